"""replay's wait for a sidecar: past a refused connection, then past ``/readyz`` 503 while it starts."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest

from streamrelay.app import ingest_client
from streamrelay.app.ingest_client import SidecarNotReadyError, SidecarUnreachableError, wait_for_sidecar

pytestmark = pytest.mark.timeout(30)

STARTING = {"ready": False, "state": "starting", "reason": "loading channels: telegram"}


async def _readyz(not_ready: int) -> tuple[asyncio.Server, str]:
    """A server answering /readyz 503 (starting) ``not_ready`` times, then 200."""
    answers = [503] * not_ready

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        status = answers.pop(0) if answers else 200
        body = json.dumps(STARTING if status == 503 else {"ready": True, "state": "ready"}).encode()
        reason = b"Service Unavailable" if status == 503 else b"OK"
        head = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % (
            status,
            reason,
            len(body),
        )
        writer.write(head + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


async def test_a_starting_sidecar_is_waited_for_and_said_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_client, "WAIT_POLL_S", 0.01)
    server, url = await _readyz(not_ready=5)
    lines: list[str] = []
    async with server:
        await wait_for_sidecar(url, 0.05, on_wait=lines.append)  # 5 answers of 503 outlast wait_s: still waited
    assert lines == [f"the sidecar at {url} answers, not ready yet: loading channels: telegram…"]


async def test_a_sidecar_that_never_gets_ready_is_one_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_client, "WAIT_POLL_S", 0.01)
    monkeypatch.setattr(ingest_client, "STARTING_WAIT_S", 0.1)
    server, url = await _readyz(not_ready=10_000)
    async with server:
        with pytest.raises(SidecarNotReadyError) as caught:
            await wait_for_sidecar(url, 0.0)
    assert str(caught.value) == (
        f"the sidecar at {url} is still not ready after 0.1 s: loading channels: telegram: see its log"
    )


async def test_nothing_listening_is_unreachable_after_wait_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_client, "WAIT_POLL_S", 0.01)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    lines: list[str] = []
    with pytest.raises(SidecarUnreachableError) as caught:
        # 1 s: the first refused connect must come back within the wait for a wait to be told (on a loaded
        # machine 0.1 s was sometimes spent on that first try alone)
        await wait_for_sidecar(url, 1.0, on_wait=lines.append)
    assert lines == [f"waiting for the sidecar at {url}…"]
    assert f"the sidecar at {url} is not reachable (ConnectError" in str(caught.value)


async def test_a_wait_shorter_than_the_first_look_still_waits_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a busy machine the first refused connect may take longer than a short ``wait_s``: the wait is still said
    and a second look made before giving up (replay --wait-s 1 gave its error without its waiting line at load 18)."""
    monkeypatch.setattr(ingest_client, "WAIT_POLL_S", 0.01)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    looks = 0
    look = ingest_client._ready

    async def counted(client: Any, at: str) -> tuple[bool, str]:
        nonlocal looks
        looks += 1
        return await look(client, at)

    monkeypatch.setattr(ingest_client, "_ready", counted)
    lines: list[str] = []
    with pytest.raises(SidecarUnreachableError):
        await wait_for_sidecar(url, 1e-9, on_wait=lines.append)  # over before the first look comes back
    assert lines == [f"waiting for the sidecar at {url}…"] and looks == 2
    with pytest.raises(SidecarUnreachableError):
        await wait_for_sidecar(url, 0.0, on_wait=lines.append)  # no wait asked for: one look, nothing said
    assert len(lines) == 1 and looks == 3


async def test_a_url_that_is_not_http_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not an http"):
        await wait_for_sidecar("ftp://example.org", 0.0)
