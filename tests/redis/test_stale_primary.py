"""A line answered accepted is on the primary the sentinels name, also right after a failover (chaos seed 1, 60 runs,
4 failovers: chaos-1-00005 and four other runs lost lines answered 200, reported delivered).

There, the primary was killed (14:57:04), its replica promoted (14:57:06), and the killed one started again
(14:57:07.6) as a primary of its own: the sentinels made it a replica only at 14:57:18.5, which replaced its data.
A command in flight at the kill was retried by redis-py on the connection's last address (``send_packed_command`` ->
``connect_check_health`` -> ``_connect``, no sentinel asked), so its connection went back to the pool connected to
the restarted old primary; the appends that took it meanwhile were answered 200 because ``WAIT`` counted the
replicas online there (none: ``min(wanted, 0)``), and were gone after 14:57:18.5. Here: a real primary, replica and
three sentinels; a connection held across the kill (the command in flight), then appends as a front makes them,
sent again after a refusal as an agent does. Also a primary frozen (SIGSTOP) while its replica is promoted: its
connections stay open, so a write there must be refused although nothing reconnected."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import pytest

from streamrelay.adapters.redis import KEYS, Durability, InputStream, StalePrimaryError, connect, connect_sentinel
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.chaos.sentinels import MASTER, RedisSentinels
from streamrelay.core.errors import StoreUnavailableError
from streamrelay.core.records.journal import JournalEntry
from tests.contention import wait_scale

pytestmark = pytest.mark.timeout(180)

PARTITION = 0


def _client(sentinels: RedisSentinels) -> Redis:
    """A replica's client: one connection (so the one held across the failover is the one the appends take)."""
    addresses = [(host, int(port)) for host, port in (a.rsplit(":", 1) for a in sentinels.addresses)]
    return connect_sentinel(addresses, MASTER, durability=Durability(1, timeout_ms=300), max_connections=1)


async def _answers(port: int) -> bool:
    probe = connect(f"redis://127.0.0.1:{port}/0")
    try:
        return bool(await probe.ping())
    except Exception:
        return False
    finally:
        await probe.aclose()


async def _until(check: object, what: str, timeout_s: float = 60.0) -> None:
    """Poll ``check`` until true; ``timeout_s`` (on an idle machine) is scaled by the load (a hang guard)."""
    timeout_s *= wait_scale()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {timeout_s:g} s: {what}")


async def _accept(stream: InputStream, line: str) -> int:
    """Append ``line`` as a front does, sent again after a refusal (503) as an agent does; the refusals. A primary
    alone refuses every line until its old self is back as its replica (the sentinels turn it after about 8 s)."""
    refused = 0
    for _ in range(600):
        try:
            await stream.append_open(PARTITION, [JournalEntry("run-1", line)])
            return refused
        except StoreUnavailableError:
            refused += 1
            await asyncio.sleep(0.1)
    raise AssertionError(f"{line} was never accepted")


async def _settled_primary(sentinels: RedisSentinels) -> int:
    """The port of the primary the sentinels name once it answers ``ROLE`` as a primary (during a failover the named
    one may still be a replica, or down)."""
    found: list[int] = []

    async def settled() -> bool:
        port = await sentinels.named_primary()
        if port is None:
            return False
        probe = connect(f"redis://127.0.0.1:{port}/0")
        try:
            role: Any = await probe.role()
        except Exception:
            return False
        finally:
            await probe.aclose()
        if role[0] != "master" or await sentinels.named_primary() != port:
            return False
        found.append(port)
        return True

    await _until(settled, "the primary the sentinels name answering as primary")
    return found[-1]


async def _lines_on(port: int) -> list[str]:
    reader = connect(f"redis://127.0.0.1:{port}/0")
    try:
        found: Any = await reader.xrange(KEYS.inbox(PARTITION))
        return [str(fields["line"]) for _, fields in found]
    finally:
        await reader.aclose()


async def test_a_line_accepted_after_a_failover_is_on_the_primary_the_sentinels_name(
    sentinels: RedisSentinels,
) -> None:
    """The old primary killed and started again at once (a primary of its own until the sentinels turn it): a
    command in flight across the kill is retried, then every line answered accepted is on the promoted primary."""
    client = _client(sentinels)
    stream = InputStream(client)
    try:
        await _accept(stream, '{"n": 0}')
        held = client.pipeline(transaction=False)
        # a connection in flight across the kill (a command sent just before it)
        held.connection = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        record = await sentinels.fail_over(0.0, restart_after_s=0.0)
        await _until(lambda: _answers(record.killed), "the killed primary answers again")
        held.ping()
        assert await held.execute() == [True]  # retried on a new connection, which goes back to the pool
        for n in range(1, 4):
            await _accept(stream, f'{{"n": {n}}}')
        assert record.promoted != record.killed
        # The primary the sentinels name now, answering as one: the promoted replica, or (on a loaded machine, where
        # the sentinels may call the promoted one down too) the old primary promoted back after it rejoined as a
        # replica, its data replaced by the promoted one's; either way a line answered accepted must be there.
        named = await _settled_primary(sentinels)
        on_primary = [line for line in await _lines_on(named) if line.startswith('{"n"')]
        # A line refused as not replicated (the promoted primary alone) was applied there all the same: sent again,
        # it is there twice (the owner drops the second by its seq), never missing, never out of order.
        assert [f'{{"n": {n}}}' for n in range(4)] == list(dict.fromkeys(on_primary)), on_primary
    finally:
        await client.aclose()


async def test_a_write_on_a_primary_left_behind_is_refused_and_goes_to_the_named_one(
    sentinels: RedisSentinels,
) -> None:
    """The primary frozen (SIGSTOP) until its replica is promoted, then thawed: it answers as a primary with no
    replica, on the connection opened before; a line written there is refused (not counted durable), the connection
    dropped, and the line sent again lands on the promoted primary."""
    client = _client(sentinels)
    stream = InputStream(client)
    old = sentinels.primary_port
    proc = sentinels.nodes[old].popen
    assert proc is not None
    try:
        await _accept(stream, '{"n": 0}')
        proc.send_signal(signal.SIGSTOP)
        try:

            async def promoted() -> bool:
                port = await sentinels.named_primary()
                return port is not None and port != old and await _answers(port)

            await _until(promoted, "the replica promoted")
        finally:
            proc.send_signal(signal.SIGCONT)
        with pytest.raises(StalePrimaryError, match=f"went to 127.0.0.1:{old}"):
            for _ in range(20):  # the first may be refused as not replicated (the old replica still listed)
                try:
                    await stream.append_open(PARTITION, [JournalEntry("run-1", '{"n": 1}')])
                    break
                except StalePrimaryError:
                    raise
                except StoreUnavailableError:
                    await asyncio.sleep(0.05)
        await _accept(stream, '{"n": 1}')
        named = await sentinels.named_primary()
        assert named is not None and named != old
        found = [line for line in await _lines_on(named) if line.startswith('{"n"')]
        assert list(dict.fromkeys(found)) == ['{"n": 0}', '{"n": 1}'], found  # a refused try may be there too
    finally:
        await client.aclose()
