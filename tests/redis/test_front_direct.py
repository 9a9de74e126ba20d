"""A front hands a request's ``text`` lines for a partition its own replica owns to the owner directly (issue 24:
one fenced journal script instead of the stream's append, the reader's wake-up and its journal script), and keeps
the order and the exactly-once of the input stream (:meth:`app.replicas.owner.PartitionOwner.submit_direct`):

- lines another front appended to the stream before (answered 200, not read yet) are taken first: the direct
  append is refused while the stream holds an entry, and the lines go through the stream after them;
- a direct append whose outcome is unknown (the reply lost) is answered 503 and the partition's runs are rebuilt
  from the journal before anything else is taken: the lines the journal holds are shown once, the agent's resend is
  dropped by its ``seq``.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

import pytest

from streamrelay.adapters.ingest_http.lines import decode_text
from streamrelay.adapters.redis import InputStream, RedisJournal, RunIndex
from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.keys import KEYS
from streamrelay.app.replicas.front import ReplicaFront
from streamrelay.app.replicas.owner import AckingJournal, PartitionOwner
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import StoreUnavailableError
from streamrelay.core.events import DeliveryMode, TextEvent
from streamrelay.core.ingest.admission import LineResult
from streamrelay.core.records.journal import JournalEntry
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.relay import Relay
from tests.redis.owners import answer_entries, partition_owner
from tests.redis.test_idle_close_fronts import HeldReads, _ended
from tests.unit.fakes import FakeAdapter
from tests.unit.test_run_controller import policy

pytestmark = pytest.mark.timeout(60)

PARTITION = 9


class LostReply(RedisJournal):
    """The partition's journal whose first direct append is applied in Redis and its reply lost (the connection
    dropped after the script ran: an unknown outcome)."""

    lose = True

    def fenced(self, token: int) -> RedisJournal:
        journal = LostReply(self._client, self.partition, token=token)
        return journal

    async def _journal_direct(self, by_run: dict[str, list[str]], epoch: str) -> None:
        await super()._journal_direct(by_run, epoch)
        if LostReply.lose:
            LostReply.lose = False
            raise StoreUnavailableError("Redis did not answer journal.append_direct (ConnectionError)")


async def _setup(
    client: Redis, adapter: FakeAdapter, stream: InputStream, journal: RedisJournal | None = None
) -> tuple[PartitionOwner, ReplicaFront]:
    channels = {"chat": ChannelRuntime(replace(policy(DeliveryMode.BLOCK, block_min=10), name="chat"), adapter)}

    def make_relay(ledger: Ledger, acking: AckingJournal) -> Relay:
        return Relay(channels, ledger, adapter.clock, journal=acking)

    owner = await partition_owner(client, PARTITION, make_relay, stream=stream, journal=journal)
    owner.start()
    await asyncio.wait_for(owner.ready.wait(), 10)
    front = ReplicaFront({}, InputStream(client), RunIndex(client), 16, local=lambda p: None)
    front.direct = lambda p: owner if p == PARTITION else None
    return owner, front


def _typed(run: str, line: dict[str, object]) -> tuple[TextEvent, str]:
    """A ``text`` line as the app hands it to the front: decoded and validated, with its text (its run the URL's)."""
    text = json.dumps(line)
    event = decode_text(text.encode(), json.dumps(run).encode())
    assert event is not None
    return event, text


async def _started(owner: PartitionOwner, client: Redis, run: str) -> None:
    await RunIndex(client).claim(run, PARTITION)
    await InputStream(client).append_open(PARTITION, [answer_entries(run, 5)[0]])
    while owner.relay.controller(run) is None or await client.xlen(KEYS.inbox(PARTITION)) or owner._feeding:
        await asyncio.sleep(0.02)  # its start taken and journaled, and the reader done handing it over


def _end(run: str, seq: int | None = None) -> JournalEntry:
    line: dict[str, object] = {"kind": "end", "run": run, "status": "ok"}
    if seq is not None:
        line["seq"] = seq
    return JournalEntry(run, json.dumps(line))


async def _xadds(client: Redis) -> int:
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_xadd", {}).get("calls", 0))


async def test_direct_lines_skip_the_stream_and_come_after_lines_another_front_appended(client: Redis) -> None:
    adapter = FakeAdapter(MonotonicClock())
    held = HeldReads(client)
    owner, front = await _setup(client, adapter, held)
    stream = InputStream(client)
    try:
        await _started(owner, client, "d1")
        xadds = await _xadds(client)
        first = _typed("d1", {"kind": "text", "text": "one "})  # no seq: only the order of arrival orders them
        assert await front.submit_lines([first]) == [LineResult(events=1)]
        assert await _xadds(client) == xadds  # journaled by the owner in one script: never in the input stream
        assert await RedisJournal(client, PARTITION).lines("d1") == [answer_entries("d1", 5)[0].line, first[1]]

        held.held = True  # the reader has not got to what another front appends next
        await held.parked.wait()
        other = json.dumps({"kind": "text", "run": "d1", "text": "two "})
        (appended,) = await stream.append_open(PARTITION, [JournalEntry("d1", other)])
        assert isinstance(appended, str)  # answered 200 by the other front
        third = _typed("d1", {"kind": "text", "text": "three "})
        assert await front.submit_lines([third]) == [LineResult(events=1)]
        assert await client.xlen(KEYS.inbox(PARTITION)) == 2  # refused directly (the stream held "two"): after it
        held.released.set()
        end = _typed("d1", {"kind": "text", "text": "four"})
        while await client.xlen(KEYS.inbox(PARTITION)):
            await asyncio.sleep(0.02)
        assert await front.submit_lines([end]) == [LineResult(events=1)]
        (ended,) = await stream.append_open(PARTITION, [_end("d1")])
        assert isinstance(ended, str)
        report = await _ended(owner, "d1")
        assert report.status == "delivered", report
        assert adapter.chat() == ["one two three four"], adapter.chat()
    finally:
        held.released.set()
        await owner.stop()


async def test_a_direct_append_with_an_unknown_outcome_is_answered_503_and_shown_once(client: Redis) -> None:
    adapter = FakeAdapter(MonotonicClock())
    held = HeldReads(client)
    LostReply.lose = True
    owner, front = await _setup(client, adapter, held, journal=LostReply(client, PARTITION))
    try:
        await _started(owner, client, "d2")
        line = _typed("d2", {"kind": "text", "text": "Only once. ", "seq": 1})
        with pytest.raises(StoreUnavailableError):
            await front.submit_lines([line])  # 503: the agent sends it again
        assert owner._suspect  # no direct hand-over until the runs are rebuilt from the journal
        while owner._suspect:
            await asyncio.sleep(0.02)
        (resent,) = await front.submit_lines([line])  # taken directly again: a repeat of the line journaled
        assert isinstance(resent, LineResult) and resent.events == 0, resent
        (ended,) = await InputStream(client).append_open(PARTITION, [_end("d2", 2)])
        assert isinstance(ended, str)
        report = await _ended(owner, "d2")
        assert report.status == "delivered", report
        assert adapter.chat() == ["Only once."], adapter.chat()  # journaled once, shown once
    finally:
        held.released.set()
        await owner.stop()


async def test_a_direct_line_refused_for_the_stream_keeps_its_seq_untaken(client: Redis) -> None:
    """A line with a ``seq`` whose direct append is refused (another front's entry waits in the stream) goes through
    the stream: admission must have forgotten its ``seq`` (a typed event names its run itself), or the reader drops
    it as a repeat of itself: answered 200, never journaled."""
    adapter = FakeAdapter(MonotonicClock())
    held = HeldReads(client)
    owner, front = await _setup(client, adapter, held)
    stream = InputStream(client)
    try:
        await _started(owner, client, "d3")
        held.held = True
        await held.parked.wait()
        other = json.dumps({"kind": "text", "run": "d3", "text": "one ", "seq": 1})
        (appended,) = await stream.append_open(PARTITION, [JournalEntry("d3", other)])
        assert isinstance(appended, str)
        two = _typed("d3", {"kind": "text", "text": "two ", "seq": 2})
        three = _typed("d3", {"kind": "text", "text": "three", "seq": 3})
        assert await front.submit_lines([two]) == [LineResult(events=1)]  # the one-line path
        assert await front.submit_lines([three]) == [LineResult(events=1)]
        held.released.set()
        while await client.xlen(KEYS.inbox(PARTITION)):
            await asyncio.sleep(0.02)
        (ended,) = await stream.append_open(PARTITION, [_end("d3", 4)])
        assert isinstance(ended, str)
        report = await _ended(owner, "d3")
        assert adapter.chat() == ["one two three"], adapter.chat()
        assert report.status == "delivered", report
    finally:
        held.released.set()
        await owner.stop()


class LostReplyWhileRead(RedisJournal):
    """The partition's journal whose first direct append is applied in Redis and its reply lost, while another front
    appends ``then`` to the stream and the owner's reader, having read it, waits for the direct hand-over to finish
    (:meth:`app.replicas.owner.PartitionOwner._exclusive`)."""

    owner: ClassVar[PartitionOwner | None] = None
    then: ClassVar[list[JournalEntry]] = []
    fed_suspect: ClassVar[list[bool]] = []

    def fenced(self, token: int) -> RedisJournal:
        return LostReplyWhileRead(self._client, self.partition, token=token)

    async def append(
        self, entries: Sequence[JournalEntry], *, acks: Sequence[str] = (), direct: str | None = None
    ) -> None:
        owner = LostReplyWhileRead.owner
        if acks and owner is not None:
            LostReplyWhileRead.fed_suspect.append(owner._suspect)  # an entry handed over, the runs not rebuilt
        await super().append(entries, acks=acks, direct=direct)

    async def _journal_direct(self, by_run: dict[str, list[str]], epoch: str) -> None:
        await super()._journal_direct(by_run, epoch)
        then, LostReplyWhileRead.then = LostReplyWhileRead.then, []
        if then:
            (appended,) = await InputStream(self._client).append_open(self.partition, then)
            assert isinstance(appended, str)  # answered 200 by the other front
            owner = LostReplyWhileRead.owner
            assert owner is not None
            while not owner._feeding:  # the reader read it: it waits for this hand-over
                await asyncio.sleep(0.01)
            raise StoreUnavailableError("Redis did not answer journal.append_direct (ConnectionError)")


async def test_entries_read_while_a_direct_append_lost_its_reply_wait_for_the_runs_rebuilt(client: Redis) -> None:
    """A direct append applied in Redis whose reply was lost (503) leaves admission without its lines until the runs
    are rebuilt from the journal: the entries the reader read meanwhile (another front's ``end``, answered 200) are
    handed over only after that, or the run ends without the lines the journal holds."""
    adapter = FakeAdapter(MonotonicClock())
    journal = LostReplyWhileRead(client, PARTITION)
    owner, front = await _setup(client, adapter, InputStream(client), journal=journal)
    LostReplyWhileRead.owner = owner
    try:
        await _started(owner, client, "d4")
        LostReplyWhileRead.fed_suspect = []
        LostReplyWhileRead.then = [_end("d4")]
        line = _typed("d4", {"kind": "text", "text": "Journaled once."})
        with pytest.raises(StoreUnavailableError):
            await front.submit_lines([line])  # 503: its outcome unknown (it was journaled)
        report = await _ended(owner, "d4")
        assert LostReplyWhileRead.fed_suspect == [False], LostReplyWhileRead.fed_suspect  # the end after the rebuild
        assert adapter.chat() == ["Journaled once."], adapter.chat()
        assert report.status == "delivered", report
    finally:
        LostReplyWhileRead.owner = None
        await owner.stop()


async def test_a_direct_front_and_a_stream_front_posting_one_run_show_each_line_once_in_order(client: Redis) -> None:
    """This replica's front (direct hand-overs, refused while the stream holds an entry) and another front (the
    input stream) post one run's numbered lines at once, in random groups and order: every line answered 200 is
    shown once, in ``seq`` order (before the fix of ``SeqFloor.untake``, two direct batches refused in turn lost the
    first one's lines: "seq 1..4 never arrived", 1 to 2 seeds in 6)."""
    adapter = FakeAdapter(MonotonicClock())
    stream = InputStream(client)
    owner, front = await _setup(client, adapter, stream)
    n = 40
    try:
        for seed in (3, 5):
            rng = random.Random(seed)
            run = f"mix{seed}"
            await _started(owner, client, run)
            before = len(adapter.chat())
            groups: list[list[int]] = []
            seqs = list(range(1, n + 1))
            while seqs:
                k = rng.randint(1, 4)
                groups.append(seqs[:k])
                seqs = seqs[k:]

            async def post(group: list[int], run: str, direct: bool, delay: float) -> None:
                await asyncio.sleep(delay)  # (a random interleaving of the requests)
                lines = [{"kind": "text", "text": f"w{s} ", "seq": s} for s in group]
                if direct:
                    answers = await front.submit_lines([_typed(run, line) for line in lines])
                    assert answers == [LineResult(events=1)] * len(group), answers
                else:
                    joined = "\n".join(json.dumps({**line, "run": run}) for line in lines)
                    (appended,) = await stream.append_open(PARTITION, [JournalEntry(run, joined)])
                    assert isinstance(appended, str)

            await asyncio.gather(*(post(g, run, rng.random() < 0.5, rng.random() * 0.01) for g in groups))
            (ended,) = await stream.append_open(PARTITION, [_end(run, n + 1)])
            assert isinstance(ended, str)
            report = await _ended(owner, run)
            shown = "".join(adapter.chat()[before:]).split()
            assert shown == [f"w{s}" for s in range(1, n + 1)], report.gaps
            assert report.status == "delivered", report
    finally:
        await owner.stop()
