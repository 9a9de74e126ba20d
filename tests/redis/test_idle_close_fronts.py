"""A run its owner closed on the idle timeout refuses its later lines on every replica, as one process does (chaos
seed 7, CI: a run closed while its agent waited 18 s for an approval press; its last 9 lines, posted to another
replica, were answered 200 and dropped by the owner: 62 characters the agent was told were taken never shown).

The close has a commit point (:meth:`app.replicas.owner.PartitionOwner.close_idle`): the run's idle-close mark in
Redis, which every front's append checks atomically (:meth:`adapters.redis.InputStream.append_open`). A line
appended before the mark is taken by the run before it closes; a later one is refused with 409 (a repeat of a line
the run took is acknowledged and dropped)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest

from streamrelay.adapters.redis import ClosedRun, InputEntry, InputStream, RunIndex
from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.keys import KEYS
from streamrelay.app.replicas.front import ReplicaFront, _after_idle_close
from streamrelay.app.replicas.owner import AckingJournal, PartitionOwner
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import IngestError
from streamrelay.core.events import DeliveryMode
from streamrelay.core.ingest.admission import LineResult, ended_note
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.records.report import DeliveryReport
from streamrelay.core.run.controller import IDLE_CLOSED, IDLE_REFUSAL
from streamrelay.core.run.relay import Relay
from tests.redis.owners import ANSWER, DownFor, answer_entries, partition_owner
from tests.unit.fakes import FakeAdapter
from tests.unit.test_run_controller import policy

pytestmark = pytest.mark.timeout(60)

PARTITION = 12
IDLE_S = 1.0


class HeldReads(DownFor):
    """The partition's stream with the owner's reads held while :attr:`held` is set (a reader that has not got to
    an entry yet)."""

    def __init__(self, client: Redis) -> None:
        super().__init__(client, reads=0, claims=0)
        self.held = False
        self.released = asyncio.Event()
        self.parked = asyncio.Event()
        """Set once a read waits for :attr:`released` (entries appended from then on are not read before it)."""

    async def read(self, partition: int, consumer: str, **kwargs: Any) -> list[InputEntry]:
        if self.held:
            self.parked.set()
            await self.released.wait()
            self.held = False
        return await super().read(partition, consumer, **kwargs)


async def _owner(client: Redis, adapter: FakeAdapter, stream: InputStream, idle_s: float = IDLE_S) -> PartitionOwner:
    clock = adapter.clock
    channels = {"chat": ChannelRuntime(replace(policy(DeliveryMode.BLOCK, block_min=10), name="chat"), adapter)}

    def make_relay(ledger: Ledger, journal: AckingJournal) -> Relay:
        return Relay(channels, ledger, clock, journal=journal, run_idle_timeout_s=idle_s)

    owner = await partition_owner(client, PARTITION, make_relay, stream=stream)
    owner.start()
    await asyncio.wait_for(owner.ready.wait(), 10)
    return owner


async def _ended(owner: PartitionOwner, run: str) -> DeliveryReport:
    deadline = asyncio.get_running_loop().time() + 20
    while asyncio.get_running_loop().time() < deadline:
        report = await owner.relay.report(run)
        if report is not None and report.done:
            return report
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run} did not end")


async def test_lines_after_an_idle_close_are_refused_by_the_append_and_repeats_dropped(client: Redis) -> None:
    adapter = FakeAdapter(MonotonicClock())
    stream = InputStream(client)
    owner = await _owner(client, adapter, DownFor(client, reads=0, claims=0))
    try:
        entries = answer_entries("r1", 8)
        for entry in entries[:3]:  # its start and two paragraphs, then its agent goes quiet
            await stream.append_open(PARTITION, [entry])
        report = await _ended(owner, "r1")
        assert any(IDLE_CLOSED in e for e in report.errors), report
        assert adapter.chat()[0].startswith(ANSWER[0])

        later = await stream.append_open(PARTITION, [entries[3], entries[1]])
        assert later == [ClosedRun(last_seq=2), ClosedRun(last_seq=2)]  # nothing of a closed run is appended
        assert await client.xlen(KEYS.inbox(PARTITION)) == 0
        third, repeat = (_after_idle_close("r1", e.line, 2) for e in (entries[3], entries[1]))
        assert isinstance(third, IngestError) and third.status == 409 and IDLE_REFUSAL in str(third)
        assert isinstance(repeat, LineResult) and repeat.dropped and "already ended" in repeat.dropped
        other = await stream.append_open(PARTITION, [answer_entries("r2", 9)[0]])
        assert isinstance(other[0], str)  # another run of the partition goes on
    finally:
        await owner.stop()


async def test_a_line_appended_just_before_the_mark_is_taken_before_the_run_closes(client: Redis) -> None:
    adapter = FakeAdapter(MonotonicClock())
    held = HeldReads(client)
    stream = InputStream(client)
    owner = await _owner(client, adapter, held, idle_s=3 * IDLE_S)
    try:
        entries = answer_entries("r3", 10)
        for entry in entries[:2]:
            await stream.append_open(PARTITION, [entry])
        await asyncio.sleep(0.3)
        held.held = True  # the reader has not got to the next entry when the idle timeout comes
        await asyncio.sleep(0.2)
        appended = await stream.append_open(PARTITION, [entries[2]])
        assert isinstance(appended[0], str)  # answered 200: before the mark
        await asyncio.sleep(3 * IDLE_S + 0.5)  # the run's close waits at its commit point for the reader
        report = await owner.relay.report("r3")
        assert report is None or not report.done, "closed without the line its front answered 200"
        held.released.set()
        report = await _ended(owner, "r3")
        assert any(IDLE_CLOSED in e for e in report.errors), report
        shown = "\n\n".join(adapter.chat())
        assert ANSWER[1] in shown, shown  # the line appended before the mark is shown
        assert await stream.append_open(PARTITION, [entries[3]]) == [ClosedRun(last_seq=2)]
    finally:
        held.released.set()
        await owner.stop()


def test_a_line_without_seq_after_an_idle_close_is_refused() -> None:
    line = json.dumps({"kind": "text", "run": "r", "text": "late"})
    refused = _after_idle_close("r", line, None)
    assert isinstance(refused, IngestError) and refused.status == 409
    assert isinstance(_after_idle_close("r", "not json", 4), IngestError)
    assert _after_idle_close("r", json.dumps({"kind": "text", "seq": 4}), 4) == LineResult(
        dropped="run 'r' already ended: its lines are acknowledged and dropped"
    )


async def test_a_run_whose_end_came_before_the_mark_answers_its_later_lines_as_an_ended_run(client: Redis) -> None:
    """The idle close took the run's own ``end`` (appended before the mark, answered 200): the run ended normally,
    and its later lines are acknowledged and dropped on every front, as one process answers for an ended run (they
    were refused 409 "not taken; send the answer again in a new run": its agent would send a whole answer again)."""
    adapter = FakeAdapter(MonotonicClock())
    held = HeldReads(client)
    stream = InputStream(client)
    owner = await _owner(client, adapter, held, idle_s=3 * IDLE_S)
    front = ReplicaFront({}, stream, RunIndex(client), 16, local=lambda p: None)
    await RunIndex(client).claim("r4", PARTITION)
    try:
        entries = answer_entries("r4", 11)
        for entry in entries[:2]:
            await stream.append_open(PARTITION, [entry])
        fed = owner._fed
        while owner._handed == (0, 0) or (await owner.relay.report("r4")) is None:
            fed.clear()
            await fed.wait()  # the reader handed the start and the first paragraph over
        held.held = True  # the reader has not got to the next entries when the idle timeout comes
        await held.parked.wait()
        appended = await stream.append_open(PARTITION, entries[2:])  # the rest of the answer and its end
        assert all(isinstance(a, str) for a in appended)  # answered 200: before the mark
        while not await client.exists(KEYS.idle_closed(PARTITION, "r4")):
            await asyncio.sleep(0.05)  # the run's close made its mark and waits for the reader
        held.released.set()
        report = await _ended(owner, "r4")
        assert report.status == "delivered" and report.errors == [], report  # it ended with its own end
        assert "\n\n".join(adapter.chat()).count("paragraph") == 2

        late = {"run": "r4", "kind": "text", "text": "A postscript.", "seq": 5}
        for line in (late, {k: v for k, v in late.items() if k != "seq"}, json.loads(entries[-1].line)):
            (answer,) = await front.submit_lines([(line, None)])
            assert answer == LineResult(dropped=ended_note("r4")), (line, answer)
        assert await client.xlen(KEYS.inbox(PARTITION)) == 0  # nothing of it appended
    finally:
        held.released.set()
        await owner.stop()
