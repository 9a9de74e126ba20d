"""Idle connections never deny a client with a valid token (issue 25, item 5), on a real uvicorn with the real
httpx client: hundreds of idle sockets from the bot's own loopback address (and slowloris heads, and keep-alive
connections left by unauthenticated requests, and another address's idle sockets past the total cap) no longer give
the rightful client a 503; strangers from the same address still get it, and a connection inside a request is never
the one evicted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.integration.test_connections import (
    AUTH,
    closed,
    connect,
    ndjson,
    open_files,
    run_lines,
    sidecar_with,
    status_of,
    until_closed,
)

pytestmark = pytest.mark.timeout(180)

__all__ = ["open_files"]  # the fixture, used by name

IDLE = 600
"""Idle sockets from the client's own address: past the default ``max_connections_per_peer`` (512)."""


async def rightful_requests(url: str, n: int) -> list[int]:
    """``n`` requests with the client's token, each on a new connection (a new client: no pool to lean on)."""
    statuses = []
    for i in range(n):
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=20) as client:
            if i % 2:
                statuses.append((await client.get("/v1/runs")).status_code)
            else:
                posted = await client.post(f"/v1/runs/ok-{i}/events", content=run_lines(f"ok-{i}", 100 + i))
                statuses.append(posted.status_code)
    return statuses


async def test_hundreds_of_idle_sockets_from_the_clients_own_address_never_deny_it(open_files: int) -> None:
    async with sidecar_with(header_timeout_s=120) as sidecar:  # the idle sockets stay for the whole test
        idle = []
        try:
            for _ in range(IDLE // 100):
                idle += await asyncio.gather(*(connect(sidecar) for _ in range(100)))
            await asyncio.sleep(0.2)
            assert sidecar.guards["ingest"].open == 512  # the cap holds: the rest wait on probation, then 503

            statuses = await rightful_requests(sidecar.url, 10)
            together = await asyncio.gather(*(rightful_requests(sidecar.url, 1) for _ in range(20)))
            assert statuses == [200] * 10 and together == [[200]] * 20, (statuses, together)
            async with httpx.AsyncClient(base_url=sidecar.url, headers=AUTH, timeout=20) as client:
                report = (await client.get("/v1/runs/ok-0", params={"wait_s": 10})).json()
            assert report["status"] == "delivered"

            # a stranger from the same address (no token) is still refused while idle sockets hold the cap
            idle += await asyncio.gather(*(connect(sidecar) for _ in range(40)))  # the cap full again
            await asyncio.sleep(0.2)
            async with httpx.AsyncClient(base_url=sidecar.url, timeout=10) as stranger:
                refused = await stranger.get("/healthz")
            assert refused.status_code == 503
            assert refused.json()["setting"] == "service.connections.max_connections_per_peer"
            assert sidecar.guards["ingest"].open <= 512
        finally:
            for _, writer in idle:
                writer.close()
        assert closed(sidecar, "idle_evicted") >= 20  # an idle socket closed for each rightful connection at once
    print(f"\n{IDLE} idle sockets from 127.0.0.1: 30 of 30 rightful requests answered 200")


async def test_slowloris_heads_and_unauthenticated_keepalives_are_evicted_in_turn() -> None:
    async with sidecar_with(max_connections_per_peer=30, header_timeout_s=60) as sidecar:
        held = []
        rightful: list[httpx.AsyncClient] = []
        try:
            held += [await connect(sidecar) for _ in range(10)]  # no byte
            for _ in range(10):  # a head that never ends
                reader, writer = await connect(sidecar)
                writer.write(b"POST /v1/runs/x/events HTTP/1.1\r\nHost: s\r\nAuthorization: Bear")
                held.append((reader, writer))
            for _ in range(10):  # a request without a token (401), then the connection kept alive and idle
                reader, writer = await connect(sidecar)
                writer.write(b"GET /v1/runs HTTP/1.1\r\nHost: s\r\n\r\n")
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                assert status_of(head) == 401
                length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-l"))
                await reader.readexactly(length)  # the whole answer read: an idle keep-alive connection
                held.append((reader, writer))
            await asyncio.sleep(0.2)
            assert sidecar.guards["ingest"].open == 30

            # rightful clients that keep their connections (each then an idle keep-alive, younger than the
            # strangers'): ten at a time, each ten evicts the next group, in order
            for group in range(3):
                clients = [httpx.AsyncClient(base_url=sidecar.url, headers=AUTH, timeout=20) for _ in range(10)]
                rightful.extend(clients)
                answers = await asyncio.gather(*(client.get("/v1/runs") for client in clients))
                assert [a.status_code for a in answers] == [200] * 10
                ends = await asyncio.gather(*(until_closed(r, 10) for r, _ in held[10 * group : 10 * group + 10]))
                assert ends == [b""] * 10  # closed without an answer
                await asyncio.sleep(0.1)
                assert not any(reader.at_eof() for reader, _ in held[10 * group + 10 :]), group
        finally:
            for _, writer in held:
                writer.close()
            for client in rightful:
                await client.aclose()
        assert closed(sidecar, "idle_evicted") == 30


async def test_idle_sockets_of_another_address_past_the_total_cap_never_deny_a_client() -> None:
    async with sidecar_with(max_connections=50, max_connections_per_peer=50) as sidecar:
        idle = [await connect(sidecar, "127.0.0.3") for _ in range(50)]
        try:
            await asyncio.sleep(0.2)
            together = await asyncio.gather(*(rightful_requests(sidecar.url, 1) for _ in range(10)))
            assert together == [[200]] * 10
            assert closed(sidecar, "idle_evicted") == 10
            idle += [await connect(sidecar, "127.0.0.3") for _ in range(10)]  # the cap full again
            await asyncio.sleep(0.2)
            async with httpx.AsyncClient(base_url=sidecar.url, timeout=10) as stranger:
                refused = await stranger.get("/healthz")
            assert refused.status_code == 503 and refused.json()["limit"] == "max_connections"
        finally:
            for _, writer in idle:
                writer.close()


async def test_a_connection_inside_a_request_is_never_evicted() -> None:
    async with sidecar_with(max_connections_per_peer=1) as sidecar:
        lines = asyncio.Queue[bytes | None]()

        async def body() -> AsyncIterator[bytes]:
            while (line := await lines.get()) is not None:
                yield line

        async with httpx.AsyncClient(base_url=sidecar.url, headers=AUTH, timeout=20) as busy:
            streaming = asyncio.create_task(busy.post("/v1/runs/busy/events", content=body()))
            start = ndjson({"kind": "run.start", "run": "busy", "channel": "telegram", "target": {"chat_id": 7}})
            await lines.put(start)
            await lines.put(ndjson({"kind": "text", "mode": "delta", "text": "still streaming"}))
            for _ in range(100):
                if sidecar.guards["ingest"].open == 1:
                    break
                await asyncio.sleep(0.02)
            # the one slot is a live request: another request with a token waits its probation, then 503
            async with httpx.AsyncClient(base_url=sidecar.url, headers=AUTH, timeout=20) as other:
                assert (await other.get("/v1/runs")).status_code == 503
            await lines.put(ndjson({"kind": "end", "run": "busy", "status": "ok"}))
            await lines.put(None)
            answer = await streaming
        assert answer.status_code == 200 and answer.json() == {"accepted": 3}
        assert closed(sidecar, "idle_evicted") == 0


async def test_refused_requests_whose_bodies_trickle_never_hold_the_slots_of_a_client() -> None:
    """Breaker finding 1: a request refused (401, no token or a wrong one) before its body was read, whose body then
    trickles in a byte at a time, must not hold a connection slot: after the answer the connection is closed."""
    async with sidecar_with(max_connections_per_peer=20, max_connections=30) as sidecar:
        held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        heads: list[bytes] = []

        async def trickle(writer: asyncio.StreamWriter) -> None:
            try:
                while not writer.is_closing():
                    writer.write(b"x")
                    await writer.drain()
                    await asyncio.sleep(0.2)
            except (ConnectionError, OSError):
                return

        async def rest_of(reader: asyncio.StreamReader) -> bytes:
            """What comes until the server closes (a reset or a broken pipe while trickling counts as closed)."""
            try:
                return await asyncio.wait_for(reader.read(), 10)
            except ConnectionError:
                return b""

        tricklers = []
        try:
            for i in range(20):
                reader, writer = await connect(sidecar)
                token = b"" if i % 2 else b"Authorization: Bearer wrong-token\r\n"
                writer.write(
                    b"POST /v1/runs/r/events HTTP/1.1\r\nHost: x\r\n" + token + b"Content-Length: 100000\r\n\r\n"
                )
                writer.write(b"{")
                heads.append(await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10))
                held.append((reader, writer))
                tricklers.append(asyncio.create_task(trickle(writer)))
            assert [status_of(head) for head in heads] == [401] * 20
            await asyncio.sleep(0.5)  # body bytes keep coming on every refused connection

            statuses = await rightful_requests(sidecar.url, 6)
            together = await asyncio.gather(*(rightful_requests(sidecar.url, 1) for _ in range(10)))
            assert statuses == [200] * 6 and together == [[200]] * 10, (statuses, together)
            ends = await asyncio.gather(*(rest_of(reader) for reader, _ in held))
            assert all(b"HTTP/" not in end for end in ends)  # closed after the 401's body, no second answer
            for _ in range(100):  # the refused connections close LINGER_S after their answer (or were evicted)
                if sidecar.guards["ingest"].open == 0:
                    break
                await asyncio.sleep(0.05)
            assert sidecar.guards["ingest"].open == 0
        finally:
            for task in tricklers:
                task.cancel()
            for _, writer in held:
                writer.close()


async def test_a_keepalive_client_refused_before_its_body_was_read_sends_its_next_request_on_a_new_connection() -> None:
    """The refused connection is closed (breaker finding 1), so its answer says ``Connection: close``: httpx's pool
    does not send the next request on it (without the header: 'Server disconnected without sending a response')."""
    async with sidecar_with() as sidecar:

        async def slow_body() -> AsyncIterator[bytes]:
            yield b'{"kind": "run.start", "run": "r", '
            await asyncio.sleep(0.3)  # the 401 is given before this part comes
            yield b'"channel": "telegram", "target": {"chat_id": 5}}\n' + b" " * 200_000 + b"\n"

        async with httpx.AsyncClient(base_url=sidecar.url, timeout=20) as client:
            wrong = {"Authorization": "Bearer wrong-token"}
            refused = await client.post("/v1/runs/r/events", content=slow_body(), headers=wrong)
            assert refused.status_code == 401 and refused.headers["connection"] == "close"
            for i in range(3):
                taken = await client.post(f"/v1/runs/k-{i}/events", content=run_lines(f"k-{i}", 7 + i), headers=AUTH)
                assert taken.status_code == 200, taken.text
                assert "connection" not in taken.headers  # a request read whole keeps its connection
