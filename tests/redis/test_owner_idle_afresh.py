"""A run a partition's owner resumes gets its idle time afresh, not the time since its newest journaled line (chaos
seeds 2 and 3, 4 failovers: runs closed as "the agent sent nothing for 20 s" while their lines, answered 200, waited).

While Redis fails over, and then while the promoted primary has no replica (its writes are refused until one is
online), no owner can journal: the agents' lines are refused 503 and sent again, or wait in the input stream. When
the partition is granted again (or Redis is back) its runs resume from the journal; counted from the newest
journaled line, a run quiet for ``run_idle_timeout_s`` by then was closed at once, and the lines waiting behind the
resume were refused after the close. Here the newest journaled line is an hour old when the owner starts."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from streamrelay.adapters.redis import InputStream, Leases, RedisJournal
from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.keys import KEYS
from streamrelay.app.replicas.owner import AckingJournal
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import DeliveryMode
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.relay import Relay
from tests.redis.owners import ANSWER, answer_entries, partition_owner
from tests.unit.fakes import FakeAdapter
from tests.unit.test_run_controller import policy

pytestmark = pytest.mark.timeout(60)

PARTITION = 11


async def test_a_resumed_run_is_not_closed_idle_for_the_time_its_owner_could_not_journal(client: Redis) -> None:
    clock = MonotonicClock()
    adapter = FakeAdapter(clock)
    channels = {"chat": ChannelRuntime(replace(policy(DeliveryMode.BLOCK, block_min=10), name="chat"), adapter)}

    def make_relay(ledger: Ledger, journal: AckingJournal) -> Relay:
        return Relay(channels, ledger, clock, journal=journal, run_idle_timeout_s=30.0)

    leases = Leases(client)
    token = await leases.acquire(PARTITION, "replica-a", 30_000)
    assert token is not None
    entries = answer_entries("r1", 7)
    await RedisJournal(client, PARTITION).fenced(token).append(entries[:2])  # its start and first paragraph
    at_key = KEYS.journal(PARTITION, "at")
    journaled_at = await client.hget(at_key, "r1")
    assert journaled_at is not None
    await client.hset(at_key, "r1", f"{float(journaled_at) - 3600:.6f}")  # journaled an hour ago, by Redis's clock

    owner = await partition_owner(client, PARTITION, make_relay, token=token, stream=InputStream(client))
    owner.start()
    try:
        await asyncio.wait_for(owner.ready.wait(), 10)
        stream = InputStream(client)
        for entry in entries[2:]:  # the rest, sent again by its agent once Redis took lines again
            await stream.append_open(PARTITION, [entry])
        deadline = asyncio.get_running_loop().time() + 20
        report = await owner.relay.report("r1")
        while (report is None or not report.done) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
            report = await owner.relay.report("r1")
        assert report is not None and report.done, report
        assert str(report.status) == "delivered" and not report.errors, report
        assert adapter.chat() == ANSWER
    finally:
        await owner.stop()
