"""The connection guard behaves the same on uvicorn's httptools protocol (the default) and on its h11 one: a request
head past ``max_header_bytes`` is a 400, a slow head a 408, a stalled body a 408, a connection past a cap a 503
before anything is read, and a good request goes through."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from streamrelay.adapters.ingest_http.connections import ConnectionGuard, ConnectionLimits
from streamrelay.adapters.ingest_http.protocols import HTTPTOOLS, LINGER_S, GuardedConnection, uvicorn_options

pytestmark = [pytest.mark.timeout(60), pytest.mark.parametrize("http", ["httptools", "h11"])]

LIMITS = ConnectionLimits(
    header_timeout_s=0.5,
    body_idle_timeout_s=0.5,
    keepalive_timeout_s=5,
    max_connections=100,
    max_connections_per_peer=3,
    max_header_bytes=2048,
)


async def _echo(request: Request) -> JSONResponse:
    return JSONResponse({"bytes": len(await request.body())})


async def _refuse(request: Request) -> JSONResponse:
    return JSONResponse({"error": "no token"}, status_code=401)  # the body is never read


GO: list[asyncio.Event] = []
"""What the streaming route waits for before its first body chunk (the client sets it once it read the head; one per
test: an event belongs to its loop)."""


async def _later(request: Request) -> StreamingResponse:
    async def chunks() -> AsyncIterator[bytes]:
        await GO[-1].wait()
        yield b"late"

    return StreamingResponse(chunks(), media_type="text/plain")


class Closed(list[str]):
    """The reasons of the refusals and cuts, as the service's metrics are told them."""

    def connection_closed(self, listener: str, reason: str) -> None:
        self.append(reason)


@asynccontextmanager
async def server(http: str) -> AsyncIterator[tuple[int, Closed]]:
    if http == "httptools" and not HTTPTOOLS:
        pytest.skip("httptools is not installed")
    closed = Closed()
    guard = ConnectionGuard(LIMITS, observer=closed)
    routes = [
        Route("/echo", _echo, methods=["POST"]),
        Route("/refuse", _refuse, methods=["POST"]),
        Route("/later", _later),
    ]
    app = Starlette(routes=routes)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_config=None, lifespan="off", **uvicorn_options(guard, http)
    )
    uv = uvicorn.Server(config)
    task = asyncio.create_task(uv.serve())
    while not uv.started:
        await asyncio.sleep(0.01)
    port = uv.servers[0].sockets[0].getsockname()[1]
    try:
        yield port, closed
    finally:
        uv.should_exit = True
        await task
        guard.close()


async def exchange(port: int, data: bytes, *, wait_s: float = 10.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    try:
        return await asyncio.wait_for(reader.read(), wait_s)
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


def status(answer: bytes) -> int | None:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else None


async def test_the_guard_answers_the_same_on_both_protocols(http: str) -> None:
    async with server(http) as (port, closed):
        body = b'{"kind":"text"}\n'
        good = b"POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (
            len(body),
            body,
        )
        answer = await exchange(port, good)
        assert status(answer) == 200 and answer.endswith(b'{"bytes":16}')

        long_head = b"POST /echo HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 4000 + b"\r\n"  # never finished
        assert status(await exchange(port, long_head)) == 400

        slow = await exchange(port, b"POST /echo HTTP/1.1\r\nHost: x\r\n")  # the head never ends
        assert status(slow) == 408 and b"header_timeout" in slow

        stalled = await exchange(port, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        assert status(stalled) == 408 and b"body_idle_timeout" in stalled

        idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
        try:
            refused = await exchange(port, b"")
            assert status(refused) == 503 and b"max_connections_per_peer" in refused
        finally:
            for _, writer in idle:
                writer.close()
        assert list(closed) == ["header_timeout", "body_idle_timeout", "max_connections_per_peer"]


async def test_an_answer_before_the_body_was_read_frees_the_slot_on_both_protocols(http: str) -> None:
    """Breaker finding 1: refused before its body was read, a connection trickling that body holds no slot: its
    answer says ``Connection: close``, then end of file, and it is closed LINGER_S later."""
    async with server(http) as (port, closed):
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(LIMITS.max_connections_per_peer)]
        try:
            for _, writer in held:
                writer.write(b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
            for reader, writer in held:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                assert status(head) == 401 and b"connection: close\r\n" in head.lower()  # no next request here
                for _ in range(3):  # body bytes keep coming, faster than the body idle timeout: discarded
                    writer.write(b"x")
                    await asyncio.sleep(0.1)
                assert await asyncio.wait_for(reader.read(), 10) == b'{"error":"no token"}'  # then end of file
            await asyncio.sleep(LINGER_S + 0.5)  # closed LINGER_S after the answer
            body = b'{"kind":"text"}\n'
            good = b"POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (
                len(body),
                body,
            )
            answer = await exchange(port, good)
            assert status(answer) == 200, answer
        finally:
            for _, writer in held:
                writer.close()
        assert list(closed) == []


async def test_an_answer_after_the_body_was_read_keeps_the_connection_on_both_protocols(http: str) -> None:
    """A refusal given once the whole body came (a small request in one piece) keeps the connection: the next
    request on it is answered."""
    async with server(http) as (port, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert status(head) == 401 and b"connection: close" not in head.lower()
            await asyncio.wait_for(reader.readexactly(len(b'{"error":"no token"}')), 10)
            writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert status(head) == 200
        finally:
            writer.close()


async def test_an_answer_goes_out_in_one_write_and_a_streaming_answers_head_is_not_held(
    http: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer's head is written with its body (one ``write`` per answer: :class:`protocols._HeadHeld`), every byte
    as before; an answer whose body comes later gets its head at once (the client reads it before the body is made)."""
    writes: list[bytes] = []
    plain_write = asyncio.selector_events._SelectorSocketTransport.write  # type: ignore[attr-defined]

    def counted(self: asyncio.Transport, data: bytes) -> None:
        if data and isinstance(self.get_protocol(), GuardedConnection):  # (an empty write sends nothing: h11's end)
            writes.append(bytes(data))
        plain_write(self, data)

    monkeypatch.setattr(asyncio.selector_events._SelectorSocketTransport, "write", counted)  # type: ignore[attr-defined]
    async with server(http) as (port, _):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for n in (3, 5):
                writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (n, b"a" * n))
                head = await reader.readuntil(b"\r\n\r\n")
                body = await reader.readexactly(len(b'{"bytes":3}'))
                assert status(head) == 200 and body == b'{"bytes":%d}' % n
            assert len(writes) == 2 and all(w.startswith(b"HTTP/1.1 200") for w in writes), writes
            GO.append(go := asyncio.Event())
            writer.write(b"GET /later HTTP/1.1\r\nHost: x\r\n\r\n")
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)  # before the body is made
            assert status(head) == 200
            go.set()
            assert b"late" in await asyncio.wait_for(reader.readuntil(b"late"), 10)
        finally:
            writer.close()
