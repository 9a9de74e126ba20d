"""Edges of the ingest listener's connection guard found by breaker2 (answers before the body was read, linger,
eviction), on both uvicorn protocols: a client's stream answered early gets the answer (not a broken connection);
pipelined requests ahead of an unfinished body are all answered, without an error; a client's pipelined request in
progress is never evicted; strangers that never read their answers do not deny a client."""

from __future__ import annotations

import asyncio
import functools
import socket

import httpx
import pytest

from streamrelay.adapters.ingest_http import protocols
from streamrelay.app import service
from tests.integration.test_connections import AUTH, sidecar_with

pytestmark = pytest.mark.timeout(120)

PIPELINED = b"GET /static/vendor/markdown-it.min.js HTTP/1.1\r\nHost: s\r\n\r\n" * 40
"""Forty pipelined requests for a public 100 KB file: 4 MB of answers, more than the socket buffers hold."""


def slow_reader(port: int) -> socket.socket:
    """A stranger (no token) that asks for big public answers and never reads them (a "slow read" attack)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(PIPELINED)
    return sock


async def test_slow_readers_without_a_token_never_deny_a_rightful_client_h11(monkeypatch: pytest.MonkeyPatch) -> None:
    # uvicorn's h11 protocol (the fallback where httptools has no build; protocols.guarded_protocol(http="h11")):
    # while the first answer is written, h11's their_state is DONE, so _reading_head() is False -> idle_rank None
    monkeypatch.setattr(service, "uvicorn_options", functools.partial(protocols.uvicorn_options, http="h11"))
    async with sidecar_with(max_connections_per_peer=10, header_timeout_s=2, body_idle_timeout_s=2) as sidecar:
        held = [slow_reader(sidecar.port) for _ in range(10)]
        try:
            await asyncio.sleep(5)  # past every timeout of the guard (header 2 s, body 2 s, linger 2 s)
            assert sidecar.guards["ingest"].open == 10
            async with httpx.AsyncClient(base_url=sidecar.url, headers=AUTH, timeout=20) as client:
                answer = await client.get("/v1/runs")
            assert answer.status_code == 200, (answer.status_code, answer.text)
        finally:
            for sock in held:
                sock.close()


UNFINISHED_POST = b"POST /v1/runs/x/events HTTP/1.1\r\nHost: s\r\nContent-Length: 100\r\n\r\n"
"""A request whose body never comes."""


async def until_closed(reader: asyncio.StreamReader) -> bytes:
    data = b""
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), 10):
            data += chunk
    except ConnectionResetError:
        pass
    return data


async def test_pipelined_requests_before_an_unfinished_body_are_all_answered_httptools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert protocols.GuardedHttpToolsProtocol is not None
    async with sidecar_with() as sidecar:
        reader, writer = await asyncio.open_connection("127.0.0.1", sidecar.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: s\r\n\r\n" * 3 + UNFINISHED_POST)
        data = await until_closed(reader)
        writer.close()
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert data.count(b"HTTP/1.1 200") == 3 and not errors, (data, [r.getMessage() for r in errors])


@pytest.mark.parametrize("http", ["httptools", "h11"])
async def test_an_agent_stream_answered_early_gets_the_answer_not_a_broken_connection(
    http: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamrelay.app.client import RelayClient, RelayError
    from tests.integration.conftest import INGEST_TOKEN

    monkeypatch.setattr(service, "uvicorn_options", functools.partial(protocols.uvicorn_options, http=http))
    async with sidecar_with() as sidecar:
        with pytest.raises(RelayError) as refused:
            async with RelayClient(sidecar.url, INGEST_TOKEN) as client, client.stream("early") as stream:
                await stream.send([{"kind": "run.start", "channel": "telegram", "target": {"chat_id": 5}}])
                await stream.send([{"kind": "text", "mode": "delta", "text": "a"}])
                await asyncio.sleep(0.3)
                await stream.send([{"kind": "text", "mode": "delta", "text": "x" * (2 * 1024 * 1024)}])
                await asyncio.sleep(protocols.LINGER_S + 0.5)  # the agent thinks (a tool call, a slow model)
                await stream.send([{"kind": "text", "mode": "delta", "text": "b"}])
        assert refused.value.status == 413


async def test_a_rightful_pipelined_request_in_progress_is_never_evicted_httptools() -> None:
    import json

    from tests.integration.conftest import INGEST_TOKEN

    assert protocols.GuardedHttpToolsProtocol is not None
    # keep-alive shorter than until_closed's 10 s wait, longer than the newcomer's 2.5 s: the connection ends once both
    # answers are given (the default 20 s outlasts the wait)
    async with sidecar_with(max_connections_per_peer=2, keepalive_timeout_s=5) as sidecar:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=AUTH, timeout=20) as client:
            start = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 5}}
            assert (await client.post("/v1/runs/open/events", content=json.dumps(start) + "\n")).status_code == 200
        reader, writer = await asyncio.open_connection("127.0.0.1", sidecar.port)
        poll = f"GET /v1/runs/open?wait_s=2 HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer {INGEST_TOKEN}\r\n\r\n"
        writer.write(poll.encode() * 2)  # two long-polls of a run still open, pipelined
        idle = httpx.AsyncClient(base_url=sidecar.url, headers=AUTH, timeout=20)
        try:
            assert (await idle.get("/v1/runs")).status_code == 200  # then an idle keep-alive connection
            await asyncio.sleep(2.5)  # the first long-poll answered, the second running
            async with httpx.AsyncClient(base_url=sidecar.url, headers=AUTH, timeout=20) as newcomer:
                assert (await newcomer.get("/v1/runs")).status_code == 200  # room made by one eviction
            data = await until_closed(reader)
        finally:
            writer.close()
            await idle.aclose()
        assert data.count(b"HTTP/1.1 200") == 2


@pytest.mark.parametrize("http", ["httptools", "h11"])
async def test_a_client_answered_early_then_idle_is_closed_quietly_like_any_keep_alive_connection(
    http: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client's request answered before its body was read keeps its connection; once the rest of its body came,
    the connection is idle between two requests: closed after keepalive_timeout_s without an answer, not given a
    408 header_timeout (no request was coming) after header_timeout_s."""
    from tests.integration.conftest import INGEST_TOKEN

    monkeypatch.setattr(service, "uvicorn_options", functools.partial(protocols.uvicorn_options, http=http))
    async with sidecar_with(header_timeout_s=1, keepalive_timeout_s=3) as sidecar:
        reader, writer = await asyncio.open_connection("127.0.0.1", sidecar.port)
        try:
            body = b'{"kind": "text", "mode": "delta", "text": "' + b"x" * (2 * 1024 * 1024) + b'"}\n'
            head = (
                f"POST /v1/runs/quiet/events HTTP/1.1\r\nHost: s\r\nAuthorization: Bearer {INGEST_TOKEN}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            )
            writer.write(head.encode() + body)  # a line over max_line_bytes: 413, given before the body was read
            answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            assert answer.startswith(b"HTTP/1.1 413") and b"connection: close" not in answer.lower(), answer
            length = int(answer.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await asyncio.wait_for(reader.readexactly(length), 10)
            await writer.drain()
            rest = await until_closed(reader)
        finally:
            writer.close()
        assert rest == b"", rest  # closed by the keep-alive timer, no 408
