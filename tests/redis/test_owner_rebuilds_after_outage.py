"""A partition's owner that met a Redis failure goes on from what Redis holds, not from what it remembers.

A journal append can fail here yet be applied there: the script ran on the primary, then no replica acknowledged it
in time (``WAIT``: :class:`adapters.redis.NotReplicatedError`), or its reply was lost. Its lines are journaled and
their input entries acknowledged in the same script (never handed over again), while admission undid them (its
``seq`` numbers not taken). A run the failure did not stop kept its state in memory: it went on without those lines
(a hole in its text, "seq N never arrived", reported as the agent's gap) although the journal has them. Now every run
of the partition is rebuilt from the journal when the owner resumes after the failure, as after a restart."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

import streamrelay.app.replicas.owner as owner_module
from streamrelay.adapters.redis import InputStream, NotReplicatedError, RedisJournal
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.replicas.owner import AckingJournal
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import DeliveryMode
from streamrelay.core.records.journal import JournalEntry
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.relay import Relay
from tests.redis.owners import ANSWER, answer_entries, partition_owner
from tests.redis.test_partition_owner_outage import PARTITION
from tests.unit.fakes import FakeAdapter
from tests.unit.test_run_controller import policy


class _AppliedButNotReplicated(RedisJournal):
    """The partition's journal whose ``nth`` append is applied, then refused as not replicated (as ``WAIT`` finding
    no replica acknowledgement does: the write is on the primary)."""

    def __init__(self, client: Redis, partition: int, *, nth: int, token: int | None = None) -> None:
        super().__init__(client, partition, token=token)
        self.nth, self.calls, self._client_ = nth, [0], client

    def fenced(self, token: int) -> RedisJournal:
        found = _AppliedButNotReplicated(self._client_, self.partition, nth=self.nth, token=token)
        found.calls = self.calls
        return found

    async def append(
        self, entries: Sequence[JournalEntry], *, acks: Sequence[str] = (), direct: str | None = None
    ) -> None:
        await super().append(entries, acks=acks, direct=direct)
        self.calls[0] += 1
        if self.calls[0] == self.nth:
            raise NotReplicatedError("journal.append", 0, 1, 300)


async def _until(check: Any, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while asyncio.get_running_loop().time() < deadline:
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("not within the time")


async def test_lines_journaled_by_an_append_that_failed_here_are_in_the_run_it_goes_on_with(
    client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(owner_module, "RETRY_S", 0.05)
    clock = MonotonicClock()
    adapter = FakeAdapter(clock)
    channels = {"chat": ChannelRuntime(replace(policy(DeliveryMode.BLOCK, block_min=10), name="chat"), adapter)}

    def make_relay(ledger: Ledger, journal: AckingJournal) -> Relay:
        return Relay(channels, ledger, clock, journal=journal)

    journal = _AppliedButNotReplicated(client, PARTITION, nth=2)
    owner = await partition_owner(client, PARTITION, make_relay, journal=journal)
    entries = answer_entries("r1", 7)
    stream = InputStream(client)
    reader = RedisJournal(client, PARTITION)

    async def journaled(n: int) -> bool:
        return len(await reader.lines("r1")) == n

    owner.start()
    try:
        await stream.append(PARTITION, entries[:2])  # run.start, first paragraph: journaled (append 1)
        await _until(lambda: journaled(2))
        await stream.append(PARTITION, entries[2:3])  # second paragraph: journaled, but the append failed here
        await _until(lambda: journaled(3))
        await asyncio.sleep(0.3)  # the owner met the failure and went on (RETRY_S)
        assert await stream.pending(PARTITION) == []  # its input entry was acknowledged: never handed over again
        await stream.append(PARTITION, entries[3:])  # third paragraph and the end
        report = None

        async def done() -> bool:
            nonlocal report
            report = await owner.relay.report("r1")
            return report is not None and report.done

        await _until(done, 15.0)
        assert report is not None and str(report.status) == "delivered" and not report.gaps, report
        assert adapter.chat() == ANSWER  # whole, once, in order
    finally:
        await owner.stop()
