"""A line answered accepted survives the promotion of the old primary restarted with its own data (chaos seed 4: a
run's lines seq 19-34, answered 200, were gone after the restarted old primary was briefly primary again).

The losing moment: the primary killed, its replica promoted; the promoted one now has no replica online (its old
self is dead), and it used to count a durable write on itself alone when the sentinels named it ("no replica exists
that could be promoted without the write"). That is false: the killed primary starts again with its append-only
file, as a primary of its own, and the sentinels list it as the new primary's replica; for about 8 s, until they
turn it into a replica (which replaces its data), it is a candidate of the next failover: a promoted primary that
looks down to the sentinels for a second on a loaded machine (chaos seed 4's sentinel logs: an odown of the just
promoted primary, aborted only because no replica was up) promotes it, and the new primary's writes made alone die
with the resynchronisation. Here the next failover is forced (``SENTINEL FAILOVER``) right after the sentinels see
the old primary again: deterministic, no race with their conversion of it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis.asyncio as aioredis

from streamrelay.adapters.redis import Durability, InputStream, connect_sentinel
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.chaos.sentinels import MASTER, RedisSentinels
from streamrelay.core.errors import StoreUnavailableError
from streamrelay.core.records.journal import JournalEntry
from tests.redis.test_stale_primary import _lines_on  # the partition's input lines on one node

pytestmark = pytest.mark.timeout(240)

PARTITION = 0


def _client(sentinels: RedisSentinels) -> Redis:
    """A replica's client, through the sentinels, one replica's acknowledgement wanted (the deployment's default)."""
    addresses = [(host, int(port)) for host, port in (a.rsplit(":", 1) for a in sentinels.addresses)]
    return connect_sentinel(addresses, MASTER, durability=Durability(1, timeout_ms=300), max_connections=2)


async def _until(check: Any, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if await check():
                return
        except Exception:  # a node or a sentinel not answering yet
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"not within {timeout_s:g} s: {what}")


async def _ask(port: int, *command: str) -> Any:
    client = aioredis.Redis(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=2.0)
    try:
        return await client.execute_command(*command)  # type: ignore[no-untyped-call]
    finally:
        await client.aclose()


async def _seen_up_by_every_sentinel(sentinels: RedisSentinels, port: int) -> bool:
    """Every sentinel lists ``port`` among the primary's replicas, answering (no ``s_down``): a failover candidate."""
    for sentinel in sentinels.sentinel_ports:
        replicas = await _ask(sentinel, "SENTINEL", "REPLICAS", MASTER)
        rows = [dict(zip(r[::2], r[1::2], strict=True)) if isinstance(r, list) else dict(r) for r in replicas]
        mine = [r for r in rows if int(r["port"]) == port]
        if not mine or "s_down" in str(mine[0]["flags"]) or "disconnected" in str(mine[0]["flags"]):
            return False
    return True


async def test_a_line_accepted_while_the_primary_is_alone_survives_the_old_primary_promoted(
    sentinels: RedisSentinels,
) -> None:
    client = _client(sentinels)
    stream = InputStream(client)
    old = sentinels.primary_port
    try:
        await stream.append_open(PARTITION, [JournalEntry("run-1", '{"n": 0}')])  # on both nodes
        sentinels.nodes[old].kill()

        async def promoted() -> bool:
            port = await sentinels.named_primary()
            return port is not None and port != old and (await _ask(port, "ROLE"))[0] == "master"

        await _until(promoted, "the replica promoted")
        new = await sentinels.named_primary()
        assert new is not None

        # The losing moment: the promoted primary alone (its old self dead). A line it took now is on it only.
        accepted: list[str] = []
        refused = 0
        for n in range(1, 4):
            line = f'{{"n": {n}}}'
            for _ in range(20):  # right after the promotion a write may still be refused for other reasons
                try:
                    await stream.append_open(PARTITION, [JournalEntry("run-1", line)])
                    accepted.append(line)
                    break
                except StoreUnavailableError:
                    refused += 1
                    await asyncio.sleep(0.05)

        # A primary alone takes nothing: only the try that found it alone (its WAIT answered 0) was applied; every
        # later one read INFO replication first and was not sent (no copy per try of an agent sending again)
        tried = [line for line in await _lines_on(new) if line != '{"n": 0}']
        assert len(tried) <= 1 and refused > 3, (tried, refused)

        # The old primary starts again with its own data, a primary of its own; the sentinels see it answer and
        # list it as the new primary's replica: the next failover (forced here) promotes it, before they turn it.
        sentinels.nodes[old].start()
        await _until(lambda: _seen_up_by_every_sentinel(sentinels, old), "the sentinels see the old primary again")
        assert (await _ask(old, "ROLE"))[0] == "master"  # not turned into a replica yet: its data is its own
        assert await _ask(sentinels.sentinel_ports[0], "SENTINEL", "FAILOVER", MASTER)

        async def old_promoted() -> bool:
            return await sentinels.named_primary() == old and (await _ask(old, "ROLE"))[0] == "master"

        await _until(old_promoted, "the old primary promoted again")
        on_primary = await _lines_on(old)
        lost = [line for line in accepted if line not in on_primary]
        assert not lost, f"answered accepted, then gone after the old primary's promotion: {lost} ({refused} refused)"
        assert on_primary[:1] == ['{"n": 0}']

        # what was refused is sent again, as an agent does, and lands once the primary has a replica again
        for n in range(1, 4):
            line = f'{{"n": {n}}}'
            if line in accepted:
                continue

            async def taken(line: str = line) -> bool:
                await stream.append_open(PARTITION, [JournalEntry("run-1", line)])
                return True

            await _until(taken, f"{line} accepted again", timeout_s=90)
        named = await sentinels.named_primary()
        assert named is not None
        found = [line for line in await _lines_on(named) if line.startswith('{"n"')]
        # a line refused as not replicated may be there already: sent again, it is there twice (the owner drops the
        # second by its seq), never missing
        assert list(dict.fromkeys(found)) == [f'{{"n": {n}}}' for n in range(4)], found
    finally:
        await client.aclose()
