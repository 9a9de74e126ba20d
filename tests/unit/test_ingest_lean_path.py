"""The ingest app's lean path (adapters/ingest_http/lean.py): ``POST /v1/runs/{run}/events`` handed to its handler
past Starlette's layers must answer every request as Starlette's own path does (status, headers, body), and leave
every other request to Starlette: the same requests, in the same order, to two sidecars, one of them always through
Starlette. And the body read from the ASGI messages (``lines.batches``) as ``Request.stream`` read it."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from streamrelay.adapters.ingest_http.app import create_app
from streamrelay.adapters.ingest_http.lean import RUN_EVENTS_PATH, IngestApp
from streamrelay.adapters.ingest_http.lines import BodyTooLargeError, batches
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.ingest.clients import DEFAULT_CLIENT, ClientLimits
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import MemoryChat

AUTH = {"Authorization": "Bearer lean-token"}
START = b'{"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}\n'

REQUESTS: list[tuple[str, str, dict[str, str], bytes]] = [
    ("POST", "/v1/runs/r1/events", AUTH, START + b'{"kind":"text","text":"Hello ","seq":1}\n'),
    ("POST", "/v1/runs/r1/events?x=1", AUTH, b'{"kind":"text","text":"world","seq":2}\n{"kind":"text","text":"!"}'),
    ("POST", "/v1/runs/r1/events", AUTH, b'{"kind":"text","text":"again","seq":2}\n'),  # a repeat: dropped
    ("POST", "/v1/runs/r1/events", AUTH, b'not json\n{"kind":"text","text":"x","seq":true}\n\n'),
    ("POST", "/v1/runs/r1/events", {}, b'{"kind":"text","text":"x"}\n'),
    ("POST", "/v1/runs/r1/events", {"Authorization": "Bearer nope"}, b""),
    ("POST", "/v1/runs/bad%20id!/events", AUTH, b'{"kind":"text","text":"x"}\n'),
    ("POST", "/v1/runs/a/b/events", AUTH, b""),
    ("POST", "/v1/runs//events", AUTH, b""),
    ("POST", "/v1/runs/r1/events/", AUTH, b""),
    ("GET", "/v1/runs/r1/events", AUTH, b""),
    ("PUT", "/v1/runs/r1/events", AUTH, b""),
    ("POST", "/v1/events", AUTH, b'{"kind":"text","text":"via the other route","run":"r1"}\n'),
    ("POST", "/v1/runs/r1/events", AUTH, b'{"kind":"end","status":"ok"}\n'),
    ("POST", "/v1/runs/r1/events", AUTH, b'{"kind":"text","text":"late"}\n'),  # the run ended
    ("GET", "/v1/runs/r1", AUTH, b""),
]


def _app(chat: MemoryChat | None = None) -> IngestApp:
    limits = ClientLimits(events_per_s=1e6)
    runtime = ChannelRuntime(ChannelPolicy(name="c", throttle_s=0.0), chat or MemoryChat())
    relay = Relay({"c": runtime}, MemoryLedger(), MonotonicClock(), clients={DEFAULT_CLIENT: limits})
    app = create_app(relay, clients=[(limits, "lean-token")])
    assert isinstance(app, IngestApp)
    return app


def _through_starlette(app: Starlette) -> object:
    """``app`` with every request through Starlette's middleware and router (no lean path)."""

    async def general(scope: Scope, receive: Receive, send: Send) -> None:
        await Starlette.__call__(app, scope, receive, send)

    return general


async def _answers(app: object, root_path: str = "") -> list[tuple[int, list[tuple[str, str]], bytes]]:
    transport = httpx.ASGITransport(app=app, root_path=root_path)  # type: ignore[arg-type]
    out: list[tuple[int, list[tuple[str, str]], bytes]] = []
    async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
        for method, path, headers, body in REQUESTS:
            answer = await client.request(method, root_path + path, headers=headers, content=body)
            if path == "/v1/runs/r1":  # the report, once the run ended: its status (its timings differ)
                answer = await client.get(root_path + "/v1/runs/r1?wait_s=5", headers=AUTH)
                out.append((answer.status_code, [], answer.json()["status"].encode()))
                continue
            out.append((answer.status_code, sorted(answer.headers.items()), answer.content))
    return out


def test_the_lean_path_answers_as_starlette_does() -> None:
    lean_chat, general_chat = MemoryChat(), MemoryChat()
    got = asyncio.run(_answers(_app(lean_chat)))
    assert got == asyncio.run(_answers(_through_starlette(_app(general_chat))))
    statuses = [status for status, _, _ in got]
    assert statuses == [200, 200, 200, 400, 401, 401, 400, 404, 404, 404, 405, 405, 200, 200, 200, 200]
    assert b'"dropped":1' in got[2][2] and b'"dropped":1' in got[-2][2]
    assert lean_chat.messages == general_chat.messages
    assert list(lean_chat.messages.values()) == ["Hello world!via the other route"]


def test_a_root_path_leaves_the_request_to_starlette() -> None:
    lean, general = _app(), _app()
    got = asyncio.run(_answers(lean, root_path="/api"))
    assert got == asyncio.run(_answers(_through_starlette(general), root_path="/api"))
    assert [status for status, _, _ in got][:2] == [200, 200]


def test_only_other_requests_build_starlettes_layers() -> None:
    """The lean path takes the run's events without Starlette's middleware (built at the first request it serves)."""
    app = _app()

    async def post() -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            answer = await client.post("/v1/runs/r2/events", headers=AUTH, content=START)
            return answer.status_code

    assert asyncio.run(post()) == 200
    assert app.middleware_stack is None


async def _boom(request: Request) -> Response:
    raise RuntimeError("a bug in the handler")


@pytest.mark.parametrize("through_starlette", [False, True])
def test_an_exception_in_the_handler_is_a_500_then_raised(through_starlette: bool) -> None:
    app = IngestApp(routes=[Route(RUN_EVENTS_PATH, _boom, methods=["POST"])])
    served = _through_starlette(app) if through_starlette else app

    async def post(raise_exceptions: bool) -> httpx.Response:
        transport = httpx.ASGITransport(app=served, raise_app_exceptions=raise_exceptions)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            return await client.post("/v1/runs/r1/events", content=b"x")

    answer = asyncio.run(post(False))
    assert (answer.status_code, answer.text, answer.headers["content-type"]) == (
        500,
        "Internal Server Error",
        "text/plain; charset=utf-8",
    )
    with pytest.raises(RuntimeError, match="a bug in the handler"):
        asyncio.run(post(True))


def test_the_first_route_must_be_the_run_events_route() -> None:
    with pytest.raises(ValueError, match=re.escape("the first route must be POST /v1/runs/{run}/events")):
        IngestApp(routes=[Route("/v1/events", _boom, methods=["POST"])])


async def _stream_batches(request: Request, max_body: int, max_line: int) -> list[list[bytes]] | str:
    """What ``batches`` gave when it read the body through Starlette's ``Request.stream`` (its code before it read
    the messages itself), or the name of what it raised."""
    out: list[list[bytes]] = []
    total, buffer = 0, b""
    try:
        async for piece in request.stream():
            total += len(piece)
            if total > max_body:
                raise BodyTooLargeError("body")
            *complete, buffer = (buffer + piece).split(b"\n")
            if complete:
                out.append(complete)
            if len(buffer) > max_line:
                raise BodyTooLargeError("line")
        if buffer.strip():
            out.append([buffer])
    except (BodyTooLargeError, ClientDisconnect) as exc:
        return type(exc).__name__
    return out


async def _our_batches(request: Request, max_body: int, max_line: int) -> list[list[bytes]] | str:
    out: list[list[bytes]] = []
    try:
        async for batch in batches(request, max_body, max_line):
            out.append(batch)
    except (BodyTooLargeError, ClientDisconnect) as exc:
        return type(exc).__name__
    return out


_MESSAGES = st.lists(
    st.one_of(
        st.builds(
            lambda body, more: {"type": "http.request", "body": body, "more_body": more},
            st.lists(st.sampled_from([b"a", b"b", b" ", b"\n", b"{}"]), max_size=8).map(b"".join),
            st.booleans(),
        ),
        st.just({"type": "http.disconnect"}),
        st.just({"type": "http.other"}),
    ),
    min_size=1,
    max_size=8,
)


@given(_MESSAGES, st.integers(1, 40), st.integers(1, 10))
def test_batches_reads_the_body_as_starlettes_stream_does(
    messages: list[dict[str, Any]], max_body: int, max_line: int
) -> None:
    """The body read from the ASGI messages themselves gives the batches (and the errors) that reading it through
    ``Request.stream`` gave, pieces split anywhere, empty pieces, other messages and a disconnect included."""
    messages = [*messages, {"type": "http.request", "body": b"", "more_body": False}]  # the body ends at last

    def request() -> Request:
        queue = iter(messages)

        async def receive() -> dict[str, Any]:
            return next(queue)

        scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b""}
        return Request(scope, receive)

    async def both() -> tuple[object, object]:
        return await _our_batches(request(), max_body, max_line), await _stream_batches(request(), max_body, max_line)

    ours, theirs = asyncio.run(both())
    assert ours == theirs


def test_an_app_given_more_layers_takes_them_on_the_events_route_too() -> None:
    """Middleware added to the app (or ``debug``) applies to the events route as to any other: no lean path then."""
    seen: list[str] = []

    class Note:
        def __init__(self, app: object) -> None:
            self.app = app

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            seen.append(scope["path"])
            await self.app(scope, receive, send)  # type: ignore[operator]

    app = _app()
    app.add_middleware(Note)

    async def post() -> int:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            return (await client.post("/v1/runs/r3/events", headers=AUTH, content=START)).status_code

    assert asyncio.run(post()) == 200
    assert seen == ["/v1/runs/r3/events"]
    debug = IngestApp(routes=[Route(RUN_EVENTS_PATH, _boom, methods=["POST"])], debug=True)

    async def boom() -> httpx.Response:
        transport = httpx.ASGITransport(app=debug, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            return await client.post("/v1/runs/r1/events", content=b"x")

    answer = asyncio.run(boom())
    assert answer.status_code == 500 and "a bug in the handler" in answer.text  # Starlette's debug traceback
