"""A run whose open was refused by Redis (its ledger's ``start_run`` on a primary with no replica online) goes on from
the journal once Redis takes writes again; it was left registered as opened with no worker, so every later resume of
its partition skipped it as active here and its lines went to a queue nobody read.

Chaos seed 4 with failovers (``--backend redis --replicas 3 --failovers 4``): after a failover every replica held its
partitions in silence for five minutes (no call, no idle close, no error logged; 18 runs unfinished). Each stalled
partition had logged a ``ledger.start_run`` refused while its owner resumed its runs after the outage (the promoted
primary had no replica yet), then only "0 runs resumed after a Redis outage": the runs were still in the relay,
opened, workerless. Here on real redis-server and redis-sentinel processes: the primary's replica is killed while a
run is active, so the owner's next journal write fails, its resume's ``start_run`` is refused; then the replica comes
back."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest

import streamrelay.app.replicas.owner as owner_module
from streamrelay.adapters.redis import Durability, InputStream, RedisJournal, connect_sentinel
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.chaos.sentinels import MASTER, RedisSentinels
from streamrelay.app.replicas.owner import AckingJournal
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import StoreUnavailableError
from streamrelay.core.events import DeliveryMode
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.relay import Relay
from tests.redis.owners import ANSWER, answer_entries, partition_owner
from tests.redis.test_partition_owner_outage import PARTITION
from tests.unit.fakes import FakeAdapter
from tests.unit.test_run_controller import policy

pytestmark = pytest.mark.timeout(240)


class _CountingLedger:
    """The partition's fenced ledger, counting the ``start_run`` calls Redis refused."""

    def __init__(self, inner: Ledger) -> None:
        self.inner, self.refused = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def start_run(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self.inner.start_run(*args, **kwargs)
        except StoreUnavailableError:
            self.refused += 1
            raise


async def _until(check: Any, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"not within {timeout_s:g} s: {what}")


async def test_a_run_whose_open_redis_refused_goes_on_once_the_primary_has_its_replica_again(
    sentinels: RedisSentinels, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(owner_module, "RETRY_S", 0.05)
    addresses = [(host, int(port)) for host, port in (a.rsplit(":", 1) for a in sentinels.addresses)]
    client: Redis = connect_sentinel(addresses, MASTER, durability=Durability(1, timeout_ms=300))
    clock = MonotonicClock()
    adapter = FakeAdapter(clock)
    channels = {"chat": ChannelRuntime(replace(policy(DeliveryMode.BLOCK, block_min=10), name="chat"), adapter)}
    ledgers: list[_CountingLedger] = []

    def make_relay(ledger: Ledger, journal: AckingJournal) -> Relay:
        ledgers.append(_CountingLedger(ledger))
        return Relay(channels, ledgers[-1], clock, journal=journal)

    owner = await partition_owner(client, PARTITION, make_relay, lease_ms=60_000)
    entries = answer_entries("r1", 7)
    stream = InputStream(client)  # the front's part: a plain append (it needs no replica)
    reader = RedisJournal(client, PARTITION)

    async def journaled(n: int) -> bool:
        return len(await reader.lines("r1")) >= n

    owner.start()
    try:
        await stream.append(PARTITION, entries[:2])  # run.start and the first paragraph: the run is active
        await _until(lambda: journaled(2), "the run's first lines journaled")

        replica = sentinels.data_ports[1]
        sentinels.nodes[replica].kill()  # the primary alone: its durable writes are refused

        async def alone() -> bool:
            info = await client.info("replication")
            return int(info["connected_slaves"]) == 0

        await _until(alone, "the primary without its replica")
        await stream.append(PARTITION, entries[2:3])  # its journal write fails: the owner resumes after the outage

        async def open_refused() -> bool:
            return bool(ledgers) and ledgers[-1].refused > 0

        await _until(open_refused, "the resumed run's start_run refused (no replica online)")

        sentinels.nodes[replica].start()
        await sentinels.replica_in_sync()
        await stream.append(PARTITION, entries[3:])  # the third paragraph and the end
        report = None

        async def done() -> bool:
            nonlocal report
            report = await owner.relay.report("r1")
            return report is not None and report.done

        await _until(done, "the run finished once Redis took writes again (it stayed opened with no worker)")
        assert report is not None and str(report.status) == "delivered" and not report.gaps, report
        assert adapter.chat() == ANSWER  # whole, once, in order
    finally:
        await owner.stop()
        await client.aclose()
