"""A partition's owner keeps reading its input through a Redis outage longer than one retry: a failure while it takes
its pending entries again must not end its task (the lease lives on, so no other replica would read the partition:
every run of it stayed pending until the replica restarted)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import pytest

import streamrelay.app.replicas.owner as owner_module
from streamrelay.adapters.redis import InputStream
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.replicas.owner import AckingJournal
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import StoreUnavailableError
from streamrelay.core.events import DeliveryMode
from streamrelay.core.ingest.admission import LineResult
from streamrelay.core.records.journal import JournalEntry
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.relay import Relay
from tests.redis.owners import ANSWER, DownFor, answer_entries, partition_owner
from tests.unit.fakes import FakeAdapter
from tests.unit.test_run_controller import policy

PARTITION = 2


class _Relay:
    """Takes what the owner hands over (the lines' runs), nothing more."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.interrupted: set[str] = set()

    async def resume(self) -> list[str]:
        return []

    async def submit_lines(self, lines: Sequence[tuple[Any, str | None]], run_hint: str | None) -> list[LineResult]:
        self.runs += [obj["run"] for obj, _ in lines]
        return [LineResult(events=1) for _ in lines]

    def active_runs(self) -> list[str]:
        return []

    async def stop_runs(self) -> None:
        return None


async def test_the_owner_reads_its_partition_again_after_an_outage_longer_than_one_retry(
    client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(owner_module, "RETRY_S", 0.05)
    stream = DownFor(client, reads=1, claims=2)
    relay = _Relay()

    def make_relay(ledger: Ledger, journal: AckingJournal) -> Relay:
        return cast(Relay, relay)

    owner = await partition_owner(client, PARTITION, make_relay, stream=stream)
    owner.start()
    try:
        await asyncio.wait_for(owner.ready.wait(), 5)
        await asyncio.sleep(0.5)  # the read fails, then two claims of the pending entries fail: Redis is down
        assert owner.task is not None and not owner.task.done()
        await InputStream(client).append(PARTITION, [JournalEntry("run-after", '{"kind": "end", "run": "run-after"}')])
        deadline = asyncio.get_running_loop().time() + 5
        while "run-after" not in relay.runs and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        assert relay.runs == ["run-after"]  # read and handed over once Redis answered again
    finally:
        await owner.stop()


class _LedgerDownOnce:
    """The partition's fenced ledger, whose ``nth`` intent meets a Redis that does not answer."""

    def __init__(self, inner: Ledger, nth: int) -> None:
        self.inner, self.nth, self.calls = inner, nth, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def record_intent(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == self.nth:
            raise StoreUnavailableError("Redis did not answer ledger.intent (ConnectionError)")
        return await self.inner.record_intent(*args, **kwargs)


async def test_a_run_whose_ledger_write_met_a_redis_outage_resumes_from_the_journal_and_finishes_once(
    client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A breaker's finding: a 10 s Redis outage failed runs for good (a cut-off answer, a report saying failed while
    a message showed). Now the run stops unfinished and the partition's owner resumes it from the journal."""
    monkeypatch.setattr(owner_module, "RETRY_S", 0.05)
    clock = MonotonicClock()
    adapter = FakeAdapter(clock)
    channels = {"chat": ChannelRuntime(replace(policy(DeliveryMode.BLOCK, block_min=10), name="chat"), adapter)}
    ledgers: list[_LedgerDownOnce] = []

    def make_relay(ledger: Ledger, journal: AckingJournal) -> Relay:
        ledgers.append(_LedgerDownOnce(ledger, nth=2))
        return Relay(channels, cast(Ledger, ledgers[-1]), clock, journal=journal)

    owner = await partition_owner(client, PARTITION, make_relay)
    await InputStream(client).append(PARTITION, answer_entries("r1", 7))
    owner.start()
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while asyncio.get_running_loop().time() < deadline:
            report = await owner.relay.report("r1")
            if report is not None and report.done:
                break
            await asyncio.sleep(0.05)
        assert report is not None and report.done and str(report.status) == "delivered", report
        assert adapter.chat() == ANSWER  # whole, once, in order: nothing failed, nothing doubled
    finally:
        await owner.stop()


class _RefusedFirstResume(_Relay):
    """A relay whose first ``refusals`` resumes meet a Redis that refuses the runs' writes (a primary alone after a
    failover refuses ``ledger.start_run``)."""

    def __init__(self, refusals: int) -> None:
        super().__init__()
        self.refusals, self.resumes = refusals, 0

    async def resume(self) -> list[str]:
        self.resumes += 1
        if self.refusals:
            self.refusals -= 1
            raise StoreUnavailableError("Redis did not answer ledger.start_run (NotReplicatedError)")
        return []


async def test_an_owner_whose_first_resume_is_refused_tries_again_and_reads_its_partition(
    client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the first resume of a grant ran outside the owner's retry loop: refused, it ended the owner's task
    while the lease keeper went on renewing the lease, so nobody read the partition (its runs stalled until the
    replica restarted)."""
    monkeypatch.setattr(owner_module, "RETRY_S", 0.05)
    relay = _RefusedFirstResume(refusals=2)

    def make_relay(ledger: Ledger, journal: AckingJournal) -> Relay:
        return cast(Relay, relay)

    owner = await partition_owner(client, PARTITION, make_relay)
    owner.start()
    try:
        await asyncio.wait_for(owner.ready.wait(), 5)
        assert relay.resumes == 3 and owner.task is not None and not owner.task.done()
        await InputStream(client).append(PARTITION, [JournalEntry("run-after", '{"kind": "end", "run": "run-after"}')])
        deadline = asyncio.get_running_loop().time() + 5
        while "run-after" not in relay.runs and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        assert relay.runs == ["run-after"]
    finally:
        await owner.stop()
