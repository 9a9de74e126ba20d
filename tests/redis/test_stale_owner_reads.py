"""An owner whose partition went to another replica takes none of its input any more (chaos seed 1, 60 runs, 4
failovers: chaos-1-00018, -00019 and -00025 lost lines answered 200; two were reported delivered).

There, a Redis failover cut replica-2 off for ~3 s; its leases expired and replica-1 was granted its partitions
(18:56:40.0, token 2). Replica-2's owners learn of it only at their next fenced write or lease renewal (up to
18:56:43.1), and went on reading the partitions' streams meanwhile: XREADGROUP hands each entry to one consumer of the
group, so the stale owner took some of the new owner's entries. An entry holding lines of a run whose start the new
owner had taken was refused by the stale relay ("has not started") and acknowledged (XACK + XDEL, unfenced): gone
(chaos-1-00018: seq 1..57 never arrived, the chat shows the answer's tail). An entry holding a run's start failed its
fenced journal write and stayed pending under the stale consumer, where the new owner never looks again (it claims
once, at its grant): the new owner refused the run's later lines as not started and acknowledged them (chaos-1-00019:
nothing shown). Now an owner's read, claim and acknowledgement are fenced like its writes: the stale owner stops at
its first read after the grant, and every entry reaches the new owner in stream order."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from streamrelay.adapters.redis import InputStream, Leases
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.replicas.owner import AckingJournal, PartitionOwner
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import DeliveryMode
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.relay import Relay
from tests.redis.owners import ANSWER, answer_entries, partition_owner
from tests.redis.test_partition_owner_outage import PARTITION
from tests.unit.fakes import FakeAdapter
from tests.unit.test_run_controller import policy

pytestmark = pytest.mark.timeout(60)


async def _until(check: object, timeout_s: float = 15.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        if await check():  # type: ignore[operator]
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {timeout_s:g} s")


async def test_an_owner_whose_lease_went_to_another_replica_takes_none_of_its_entries(client: Redis) -> None:
    clock = MonotonicClock()
    adapter = FakeAdapter(clock)
    channels = {"chat": ChannelRuntime(replace(policy(DeliveryMode.BLOCK, block_min=10), name="chat"), adapter)}

    def make_relay(ledger: Ledger, journal: AckingJournal) -> Relay:
        return Relay(channels, ledger, clock, journal=journal)

    async def owner(name: str, token: int) -> PartitionOwner:
        return await partition_owner(client, PARTITION, make_relay, token=token, name=name, stream=InputStream(client))

    leases = Leases(client)
    old_token = await leases.acquire(PARTITION, "replica-old", 200)
    assert old_token is not None
    stale = await owner("replica-old", old_token)
    stale.start()  # its lease expires unnoticed (cut off from Redis, paused): it keeps reading
    await asyncio.wait_for(stale.ready.wait(), 10)
    await asyncio.sleep(0.5)  # the stale owner is waiting in a blocking read before the new grant
    new_token = await leases.acquire(PARTITION, "replica-new", 30_000)
    assert new_token is not None and new_token > old_token
    fresh = await owner("replica-new", new_token)
    fresh.start()
    await asyncio.wait_for(fresh.ready.wait(), 10)
    await asyncio.sleep(0.3)  # both owners are waiting for the partition's entries
    stream = InputStream(client)
    try:
        for entry in answer_entries("r1", 7):  # one entry per request chunk, as fronts append them
            await stream.append_open(PARTITION, [entry])
            await asyncio.sleep(0.1)
        report = None

        async def done() -> bool:
            nonlocal report
            report = await fresh.relay.report("r1")
            return report is not None and report.done

        await _until(done)
        assert report is not None and str(report.status) == "delivered" and not report.gaps, report
        assert adapter.chat() == ANSWER  # whole, once, in order
        assert await stream.pending(PARTITION) == []
        assert stale.lost  # it stopped at its first read after the grant
    finally:
        await stale.stop()
        await fresh.stop()
