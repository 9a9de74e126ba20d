"""The admission fast path (:meth:`core.ingest.admission.Admission.take_deltas`): a batch's plain text deltas taken as
a group must be taken exactly as each line alone through :meth:`~core.ingest.admission.Admission.accept` (the slow
path): the same results and errors (text and status), the same events (type, fields, fields set), the same journal
lines and the same counts against the client's limits, live and when the journal is replayed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import IngestError
from streamrelay.core.events import MAX_SEQ, Lane, RunEvent, TextDelta, TextEvent, TextMode, Visibility, parse_event
from streamrelay.core.ingest.admission import LineResult, _delta_of
from streamrelay.core.ingest.clients import DEFAULT_CLIENT, ClientLimits
from streamrelay.core.ingest.sequencer import SeqFloor
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.journal import JournalEntry, MemoryJournal
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.stop import STOPPED_ERROR
from tests.unit.fakes import MemoryChat

START = {"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}
MISSING = object()


def _relay(limits: ClientLimits, journal: MemoryJournal, *, fast: bool) -> Relay:
    relay = Relay(
        {"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), MemoryChat())},
        MemoryLedger(),
        MonotonicClock(),
        journal=journal,
        clients={DEFAULT_CLIENT: limits},
    )
    if not fast:  # every line through Admission.accept, one by one
        relay._admission.take_deltas = lambda *args, **kw: None  # type: ignore[method-assign]
        relay._admission.take_raw = lambda *args, **kw: None  # type: ignore[method-assign]
        relay._admission.take_delta = lambda *args, **kw: None  # type: ignore[method-assign]  # a one-line request's
    return relay


def _result(result: object) -> object:
    if isinstance(result, IngestError):
        return ("error", str(result), result.status)
    return result


def _event(event: RunEvent) -> tuple[object, ...]:
    """An event as the run takes it: its type and fields; a text event's by the values alone. The fast path carries a
    plain delta line as a :class:`TextDelta` (values, not which fields the line set: nothing after admission reads
    that), compared as the :class:`TextEvent` it stands for, so a text event of the slow path without its fields set;
    every other event with them."""
    if isinstance(event, TextDelta):
        event = event.event()
    if type(event) is TextEvent:
        return (type(event), list(event.__dict__.items()), event.__pydantic_extra__)
    return (type(event), list(event.__dict__.items()), event.model_fields_set, event.__pydantic_extra__)


def _run_state(relay: Relay) -> tuple[object, ...] | None:
    run = relay._runs.get("r")
    if run is None:
        return None
    queued = run.backlog if run.backlog is not None else run.queue.take(10**6)
    usage = run.usage
    return (
        [_event(e) for e in queued],
        (usage.events, usage.chars, usage.max_seq),
        (run.seqs.floor, sorted(run.seqs.above)),
        run.ended,
        run.end_seq,
        run.gate.last,
    )


async def _live(
    lines: list[Any],
    hint: str | None,
    limits: ClientLimits,
    start_seq: int | None,
    *,
    fast: bool,
    stream_format: str | None = None,
    one_a_request: bool = False,
) -> tuple[object, ...]:
    journal = MemoryJournal()
    relay = _relay(limits, journal, fast=fast)
    start = START if start_seq is None else {**START, "seq": start_seq}
    if stream_format is not None:
        start = {**start, "format": stream_format}
    await relay.submit_lines([(start, None)], "r")
    await asyncio.sleep(0)  # the worker waits for its first events
    if one_a_request:  # each line its own request (Relay.submit_lines' path for one line)
        results = [result for obj in lines for result in await relay.submit_lines([(obj, None)], hint)]
    else:
        results = await relay.submit_lines([(obj, None) for obj in lines], hint)
    state = _run_state(relay), [_result(r) for r in results], await journal.lines("r")
    await relay.close()
    return state


async def _replayed(lines: list[str], limits: ClientLimits, *, fast: bool) -> tuple[object, ...]:
    journal = MemoryJournal()
    await journal.append([JournalEntry("r", line) for line in lines])
    relay = _relay(limits, journal, fast=fast)
    await relay.resume()
    state = _run_state(relay)
    await asyncio.sleep(0)  # its worker starts (a worker cancelled before its first step leaves its reconciler behind)
    await relay.close()
    return state, await journal.lines("r")


def _value(*choices: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from([MISSING, *choices])


TEXTS = st.one_of(
    st.text(max_size=4),
    st.sampled_from(["\ud800", "a\udfff", "\ud83d", "\ude00b", "😀", ""]),  # lone surrogates are kept raw
    st.integers(-1, 2),
    st.none(),
    st.just(["a"]),
    st.booleans(),
)
SEQS = st.one_of(
    st.integers(-2, 14),
    st.sampled_from([MAX_SEQ, MAX_SEQ + 1, True, False, 1.0, "3", None]),
)


@st.composite
def lines(draw: st.DrawFn) -> Any:
    """One input line: mostly a text delta, with every field at times absent, of a wrong type or value."""
    shape = draw(st.sampled_from(["text"] * 8 + ["other", "not an object"]))
    if shape == "not an object":
        return draw(st.sampled_from([[], "text", 3, None]))
    if shape == "other":
        return draw(
            st.sampled_from(
                [
                    {"kind": "status", "text": "thinking"},
                    {"kind": "end"},
                    {"kind": "end", "seq": 9},
                    {"kind": "text", "mode": "snapshot", "text": "abc"},
                    {"kind": "text", "mode": "replace", "text": "x"},
                    {"kind": "nope"},
                    {"text": "no kind"},
                    {"kind": "stop"},
                    {"kind": "phase", "name": "drafting"},
                ]
            )
        )
    fields: dict[str, Any] = {  # a plain delta, its optional fields at times given (with their defaults or not)
        "kind": "text",
        "text": draw(st.one_of(st.text(max_size=3), st.sampled_from(["\ud800", "a\udfff", "\ud83d", "😀", ""]))),
        "run": draw(_value("r")),
        "seq": draw(st.one_of(st.just(MISSING), st.just(MISSING), st.integers(0, 12), st.none())),
        "mode": draw(_value(MISSING, MISSING, "delta")),
        "visibility": draw(_value(MISSING, MISSING, "answer", "reasoning")),
        "message": draw(_value(MISSING, MISSING, 0, 1)),
        "lane": draw(_value(MISSING, MISSING, "ui", "pipeline")),
        "source": draw(_value(MISSING, MISSING, None, {"agent_id": "a", "depth": 1})),
    }
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):  # then one or two fields wrong, absent or extra
        name = draw(st.sampled_from([*fields, "extra"]))
        fields[name] = draw(WRONG.get(name, st.just(1)))
    return {k: v for k, v in fields.items() if v is not MISSING}


WRONG: dict[str, st.SearchStrategy[Any]] = {
    "kind": st.sampled_from([MISSING, 3, "Text", None]),
    "text": st.one_of(st.just(MISSING), TEXTS),
    "run": st.sampled_from(["other", None, 5, ""]),
    "seq": SEQS,
    "mode": st.sampled_from(["snapshot", "replace", "bogus", 1, None]),
    "visibility": st.sampled_from(["status", "loud", None, 1]),
    "message": st.sampled_from([-1, "1", True, 2.0, None, 2**64]),
    "lane": st.sampled_from(["side", None]),
    "source": st.sampled_from([{"agent_id": 3}, {"agent_id": "a", "depth": 0}, "a"]),
}


RAW_TEXTS = st.one_of(st.text(max_size=3), st.sampled_from(["\ud800", "😀", ""]), st.integers(0, 1), st.none())


@st.composite
def raw_lines(draw: st.DrawFn) -> Any:
    """One line of a run declaring ``format = "anthropic"``: mostly a raw Anthropic stream event, at times with a
    ``seq`` (the next, a repeat, out of order or of a wrong type) or a ``run``, broken, or a normalized line."""
    line: Any = draw(
        st.sampled_from(
            [
                {"type": "message_start", "message": {"id": "m", "role": "assistant"}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_start", "index": 1, "content_block": {"type": "thinking", "thinking": ""}},
                {
                    "type": "content_block_start",
                    "index": 2,
                    "content_block": {"type": "tool_use", "id": "t", "name": "f"},
                },
                {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{"}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"}},
                {"type": "content_block_delta", "index": 1, "delta": {"type": "thinking_delta"}},
                {"type": "content_block_stop", "index": draw(st.integers(0, 2))},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"}},
                {"type": "message_stop"},
                {"type": "ping"},
                {"type": 5},
                {},
                {"kind": "text", "text": "x"},
                {"kind": "end"},
                "not an object",
            ]
        )
    )
    if not isinstance(line, dict):
        return line
    line = dict(line)
    if line.get("type") == "content_block_delta" and "partial_json" not in line["delta"]:
        key = "text" if line["delta"]["type"] == "text_delta" else "thinking"
        line["delta"] = {**line["delta"], key: draw(RAW_TEXTS)}
    if draw(st.booleans()):
        line["seq"] = draw(st.one_of(st.integers(0, 8), st.sampled_from([True, -1, "2", None])))
    if draw(st.integers(0, 5)) == 0:
        line["run"] = draw(st.sampled_from(["r", "other", None]))
    return line


LIMITS = st.builds(
    ClientLimits,
    max_events_per_run=st.integers(1, 14),
    max_chars_per_run=st.integers(0, 24),
    seq_window=st.integers(1, 6),
)
BATCHES = st.lists(lines(), max_size=14)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BATCHES, st.sampled_from(["r", None]), LIMITS, st.one_of(st.none(), st.integers(0, 3)))
def test_a_batch_taken_by_the_fast_path_is_taken_as_each_line_alone(
    batch: list[Any], hint: str | None, limits: ClientLimits, start_seq: int | None
) -> None:
    fast = asyncio.run(_live(batch, hint, limits, start_seq, fast=True))
    slow = asyncio.run(_live(batch, hint, limits, start_seq, fast=False))
    assert fast == slow


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(raw_lines(), max_size=14), st.sampled_from(["r", None]), LIMITS, st.one_of(st.none(), st.integers(0, 3))
)
def test_a_raw_stream_batch_taken_by_the_fast_path_is_taken_as_each_line_alone(
    batch: list[Any], hint: str | None, limits: ClientLimits, start_seq: int | None
) -> None:
    fast = asyncio.run(_live(batch, hint, limits, start_seq, fast=True, stream_format="anthropic"))
    slow = asyncio.run(_live(batch, hint, limits, start_seq, fast=False, stream_format="anthropic"))
    assert fast == slow


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BATCHES, st.sampled_from(["r", None]), LIMITS, st.one_of(st.none(), st.integers(0, 3)))
def test_lines_posted_one_a_request_are_taken_as_each_line_alone(
    batch: list[Any], hint: str | None, limits: ClientLimits, start_seq: int | None
) -> None:
    """An agent posting each line as it comes: Relay.submit_lines' path for one line takes it as accept does."""
    fast = asyncio.run(_live(batch, hint, limits, start_seq, fast=True, one_a_request=True))
    slow = asyncio.run(_live(batch, hint, limits, start_seq, fast=False, one_a_request=True))
    assert fast == slow


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(raw_lines(), max_size=14), st.sampled_from(["r", None]), LIMITS, st.one_of(st.none(), st.integers(0, 3))
)
def test_raw_lines_posted_one_a_request_are_taken_as_each_line_alone(
    batch: list[Any], hint: str | None, limits: ClientLimits, start_seq: int | None
) -> None:
    kw: dict[str, Any] = {"stream_format": "anthropic", "one_a_request": True}
    fast = asyncio.run(_live(batch, hint, limits, start_seq, fast=True, **kw))
    slow = asyncio.run(_live(batch, hint, limits, start_seq, fast=False, **kw))
    assert fast == slow


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BATCHES, LIMITS, st.one_of(st.none(), st.integers(0, 3)))
def test_a_journal_replayed_by_the_fast_path_rebuilds_the_run_as_line_by_line(
    batch: list[Any], limits: ClientLimits, start_seq: int | None
) -> None:
    start = START if start_seq is None else {**START, "seq": start_seq}
    texts = [json.dumps({**obj, "run": "r"}) for obj in [start, *batch] if isinstance(obj, dict)]
    fast = asyncio.run(_replayed(texts, limits, fast=True))
    slow = asyncio.run(_replayed(texts, limits, fast=False))
    assert fast == slow


async def test_a_batch_of_plain_deltas_is_taken_as_one_group_each_line_with_its_result_and_journal_line() -> None:
    journal = MemoryJournal()
    relay = _relay(ClientLimits(), journal, fast=True)
    await relay.submit_lines([(START, None)], "r")
    accepted: list[object] = []
    accept = relay._admission.accept

    async def counted(obj: object, run_hint: str | None, *, replay: bool) -> Any:
        accepted.append(obj)
        return await accept(obj, run_hint, replay=replay)

    relay._admission.accept = counted  # type: ignore[method-assign]
    batch = [{"kind": "text", "text": ch} for ch in "Hello"] + [{"kind": "text", "text": "!", "seq": 4}]
    results = await relay.submit_lines([(obj, json.dumps(obj)) for obj in batch], "r")
    assert [r.events for r in results if not isinstance(r, IngestError)] == [1] * 6
    assert accepted == []  # no line went through accept: one group
    assert (await journal.lines("r"))[1:] == [json.dumps(obj) for obj in batch]
    run = relay._runs["r"]
    assert [e.text for e in run.queue.take(100)] == list("Hello!")  # type: ignore[union-attr]
    assert (run.usage.events, run.usage.chars, run.usage.max_seq) == (7, 6, 4)
    await relay.close()


async def test_the_line_that_passes_a_limit_is_refused_alone_and_the_group_goes_on_around_it() -> None:
    journal = MemoryJournal()
    relay = _relay(ClientLimits(max_chars_per_run=6, max_events_per_run=4), journal, fast=True)
    await relay.submit_lines([(START, None)], "r")
    batch = [{"kind": "text", "text": t} for t in ("ab", "cd", "efg", "e", "x")]
    results = await relay.submit_lines([(obj, None) for obj in batch], "r")
    refused = results[2]
    assert isinstance(refused, IngestError) and refused.status == 422
    assert str(refused) == (
        "this line would take the run's text to 7 characters, past clients.default.max_chars_per_run = 6: "
        "start a new run"
    )
    assert [r.events for r in results if not isinstance(r, IngestError)] == [1, 1, 1]
    last = results[4]
    assert isinstance(last, IngestError) and "the run already carries 4 events" in str(last)
    await relay.close()


async def test_a_stopped_runs_deltas_are_each_refused_with_409() -> None:
    relay = _relay(ClientLimits(), MemoryJournal(), fast=True)
    await relay.submit_lines([(START, None)], "r")
    await asyncio.sleep(0)
    await relay.stop("r", by="test")
    results = await relay.submit_lines([({"kind": "text", "text": "a"}, None)] * 3, "r")
    assert [(str(r), r.status) for r in results if isinstance(r, IngestError)] == [(STOPPED_ERROR, 409)] * 3
    await relay.close()


async def test_repeated_seqs_in_a_batch_are_dropped_and_the_rest_taken() -> None:
    relay = _relay(ClientLimits(), MemoryJournal(), fast=True)
    await relay.submit_lines([({**START, "seq": 0}, None)], "r")
    batch = [{"kind": "text", "text": t, "seq": s} for t, s in (("a", 1), ("b", 2), ("b", 2), ("c", 3), ("a", 1))]
    results = await relay.submit_lines([(obj, None) for obj in batch], "r")
    assert [getattr(r, "dropped", None) for r in results] == [
        None,
        None,
        "seq 2 was already taken",
        None,
        "seq 1 was already taken",
    ]
    assert [e.text for e in relay._runs["r"].queue.take(100)] == ["a", "b", "c"]  # type: ignore[union-attr]
    await relay.close()


class _RefusingJournal(MemoryJournal):
    """A journal whose next ``refuse`` appends fail (a full or read-only disk), then takes lines again."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = 0

    async def append(self, entries: Sequence[JournalEntry]) -> None:
        if self.refuse:
            self.refuse -= 1
            raise OSError("database or disk is full")
        await super().append(entries)


async def test_a_line_posted_alone_that_the_journal_refused_is_taken_when_sent_again() -> None:
    journal = _RefusingJournal()
    relay = _relay(ClientLimits(), journal, fast=True)
    await relay.submit_lines([(dict(START, run="r"), None)])
    delta = {"kind": "text", "run": "r", "seq": 1, "mode": "delta", "text": "Hello"}
    journal.refuse = 1
    with pytest.raises(OSError):  # the request is answered 503
        await relay.submit_lines([(delta, None)])  # one line a request: the fast path
    (again,) = await relay.submit_lines([(delta, None)])
    assert isinstance(again, LineResult) and again.dropped is None, again  # taken, not dropped as a repeat
    assert [json.loads(line)["seq"] for line in await journal.lines("r") if '"text"' in line] == [1]
    await relay.close()


async def test_a_batch_out_of_order_that_the_journal_refused_is_undone_and_another_requests_seqs_stay_taken() -> None:
    journal = _RefusingJournal()
    relay = _relay(ClientLimits(), journal, fast=True)
    await relay.submit_lines([(dict(START, run="r", seq=0), None)])
    await relay.submit_lines([({"kind": "text", "run": "r", "seq": 1, "text": "a"}, None)])
    await relay.submit_lines([({"kind": "text", "run": "r", "seq": 5, "text": "e"}, None)])  # a gap: 5 above
    batch = [({"kind": "text", "run": "r", "seq": seq, "text": "x"}, None) for seq in (2, 4, 3, 7)]
    journal.refuse = 1
    with pytest.raises(OSError):  # the request is answered 503
        await relay.submit_lines(batch)
    run = relay._runs["r"]
    assert (run.seqs.floor, run.seqs.above) == (1, {5})  # as before the batch: 2, 3, 4, 7 undone, 5 kept
    assert (run.usage.events, run.usage.chars, run.usage.max_seq) == (3, 2, 5)
    again = await relay.submit_lines(batch)
    assert all(isinstance(r, LineResult) and r.dropped is None for r in again), again
    assert (run.seqs.floor, run.seqs.above) == (5, {7})
    await relay.close()


@pytest.mark.parametrize("batch", [1, 3], ids=["one-line", "batch"])
async def test_typed_text_lines_the_journal_refused_are_taken_when_sent_again(batch: int) -> None:
    """The ``text`` lines HTTP ingest hands over typed (decoded and validated: ``lines.decode_text``) name their run
    themselves: a refused append undoes their ``seq`` numbers too, or the agent's resend is dropped as a repeat
    (answered 200, never journaled: lost)."""
    journal = _RefusingJournal()
    relay = _relay(ClientLimits(), journal, fast=True)
    await relay.submit_lines([(dict(START, run="r"), None)])
    lines: list[tuple[Any, str | None]] = []
    for seq in range(1, batch + 1):
        line = {"kind": "text", "run": "r", "seq": seq, "text": f"t{seq}"}
        lines.append((TextEvent.model_validate(line), json.dumps(line)))
    journal.refuse = 1
    with pytest.raises(OSError):  # the request is answered 503
        await relay.submit_lines(lines)
    again = await relay.submit_lines(lines)
    assert all(isinstance(r, LineResult) and r.dropped is None for r in again), again  # taken, not repeats
    assert [json.loads(line)["seq"] for line in await journal.lines("r") if '"text"' in line] == list(
        range(1, batch + 1)
    )
    await relay.close()


def test_untaking_after_an_earlier_request_was_undone_keeps_its_numbers_untaken() -> None:
    """Two requests' batches taken in turn (1, 2 then 3, 4), both refused by the journal (a replica's direct append
    refused while the stream holds an entry: their lines go through the stream), undone in the order they were
    taken: the first's numbers stay untaken, or its lines sent through the stream are dropped as repeats."""
    seqs = SeqFloor(floor=0)
    for seq in (1, 2):
        seqs.take(seq)
    first = seqs.floor
    for seq in (3, 4):
        seqs.take(seq)
    seqs.untake(0, [1, 2])
    seqs.untake(first, [3, 4])  # type: ignore[arg-type]
    assert (seqs.floor, seqs.above) == (0, set())
    assert not any(seqs.taken(seq) for seq in (1, 2, 3, 4))


async def test_two_requests_the_journal_refused_are_both_taken_when_sent_again() -> None:
    """The same through the relay: two requests' appends in flight at once, both refused, the first one's refusal
    first; every line sent again is taken (none dropped as a repeat)."""
    journal = _HeldRefusals()
    relay = _relay(ClientLimits(), journal, fast=True)
    await relay.submit_lines([(dict(START, run="r", seq=0), None)])

    def batch(*seqs: int) -> list[tuple[Any, str | None]]:
        lines: list[tuple[Any, str | None]] = []
        for seq in seqs:
            line = {"kind": "text", "run": "r", "seq": seq, "text": f"t{seq}"}
            lines.append((TextEvent.model_validate(line), json.dumps(line)))
        return lines

    journal.refuse = 2
    first = asyncio.create_task(relay.submit_lines(batch(1, 2)))
    second = asyncio.create_task(relay.submit_lines(batch(3, 4)))
    while len(journal.waiting) < 2:
        await asyncio.sleep(0)
    journal.waiting[0].set()  # the first refused first
    with pytest.raises(OSError):
        await first
    journal.waiting[1].set()
    with pytest.raises(OSError):
        await second
    again = [*await relay.submit_lines(batch(1, 2)), *await relay.submit_lines(batch(3, 4))]
    assert all(isinstance(r, LineResult) and r.dropped is None for r in again), again
    await relay.close()


class _HeldRefusals(MemoryJournal):
    """A journal whose next ``refuse`` appends each wait for their event in :attr:`waiting`, then fail."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse = 0
        self.waiting: list[asyncio.Event] = []

    async def append(self, entries: Sequence[JournalEntry]) -> None:
        if self.refuse:
            self.refuse -= 1
            event = asyncio.Event()
            self.waiting.append(event)
            await event.wait()
            raise OSError("database or disk is full")
        await super().append(entries)


def test_untaking_seqs_keeps_the_ones_another_request_took_meanwhile() -> None:
    seqs = SeqFloor(floor=3, above={6})
    for seq in (4, 9, 5):  # this batch: the floor passes 4, 5 and the 6 taken before it
        seqs.take(seq)
    seqs.take(8)  # another request's, taken meanwhile
    assert (seqs.floor, seqs.above) == (6, {8, 9})
    seqs.untake(3, [4, 9, 5])
    assert (seqs.floor, seqs.above) == (3, {6, 8})
    assert not seqs.taken(4) and not seqs.taken(5) and seqs.taken(6) and seqs.taken(8) and not seqs.taken(9)


PLAIN_LINES = [
    {"kind": "text", "text": "Hel"},
    {"kind": "text", "text": "lo", "run": "r", "seq": 3, "mode": "delta", "message": 1},
    {"kind": "text", "text": "", "seq": None, "message": 0},
    {"kind": "text", "text": "\ud83d", "mode": TextMode.DELTA},  # half a pair, kept raw as the event keeps it
    {"kind": "text", "text": "a", "lane": "ui"},  # the fields a TextDelta holds as class attributes, at their defaults
    {"kind": "text", "text": "a", "visibility": "answer", "lane": Lane.UI},  # (what a writer of every field sends)
    {"kind": "text", "text": "a", "source": None, "visibility": Visibility.ANSWER},
]
NOT_PLAIN_LINES = [
    {"kind": "text", "text": "a", "lane": "pipeline"},  # a field a TextDelta does not carry, but at its default
    {"kind": "text", "text": "a", "visibility": "reasoning"},
    {"kind": "text", "text": "a", "source": {"agent_id": "a"}},
    {"kind": "text", "text": "a", "message": True},  # a bool is no message index
    {"kind": "text", "text": "a", "seq": MAX_SEQ + 1},
]


@pytest.mark.parametrize("line", PLAIN_LINES)
def test_a_plain_delta_line_is_carried_as_a_text_delta_that_stands_for_its_event(line: dict[str, Any]) -> None:
    taken = _delta_of(line, "r", "r")
    assert type(taken) is TextDelta
    event = parse_event({"run": "r", **line})
    assert isinstance(event, TextEvent)
    assert taken.event().__dict__ == event.__dict__
    assert (taken.kind, taken.mode, taken.visibility, taken.lane, taken.source, taken.message, taken.seq) == (
        event.kind,
        event.mode,
        event.visibility,
        event.lane,
        event.source,
        event.message,
        event.seq,
    )


@pytest.mark.parametrize("line", NOT_PLAIN_LINES)
def test_any_other_delta_line_is_validated_as_its_text_event_or_left_to_the_slow_path(line: dict[str, Any]) -> None:
    taken = _delta_of(line, "r", "r")
    assert taken is None or type(taken) is TextEvent


async def test_deltas_posted_one_a_request_reach_the_chat_as_the_same_text_as_typed_events() -> None:
    """The same answer, once as plain lines (each a TextDelta to the stage), once as typed events (each a TextEvent):
    the chat shows the same text."""
    shown: list[list[str]] = []
    for typed in (False, True):
        chat = MemoryChat()
        relay = Relay(
            {"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), chat)}, MemoryLedger(), MonotonicClock()
        )
        await relay.submit_lines([(START, None)], "r")
        for i, piece in enumerate(["Hello", ", wor", "ld", "\n\nBye", ""]):
            line = {"kind": "text", "text": piece, "seq": i + 1}
            await relay.submit_lines([(parse_event({"run": "r", **line}) if typed else line, None)], "r")
            await asyncio.sleep(0)
        await relay.submit_lines([({"kind": "end"}, None)], "r")
        report = await relay.wait_done("r", 10)
        assert report is not None and str(report.status) == "delivered"
        shown.append(list(chat.messages.values()))
        await relay.close()
    assert shown[0] == shown[1] == ["Hello, world\n\nBye"]


@st.composite
def delta_batches(draw: st.DrawFn) -> list[list[Any]]:
    """Requests of plain delta lines as HTTP ingest carries them (:class:`TextDelta`, its run the URL's): mostly
    whole requests whose seqs are the next ones in order (or all without one), now and then a repeat, a gap, a seq
    out of the window, a line of another kind, a limit passed."""
    requests: list[list[Any]] = []
    seq = draw(st.integers(0, 3))
    for _ in range(draw(st.integers(1, 4))):
        numbered = draw(st.booleans())
        request: list[Any] = []
        for _ in range(draw(st.integers(1, 6))):
            step = draw(st.sampled_from([1] * 10 + [0, 2, -1, 9]))
            seq = max(0, seq + step)  # (a TextDelta's seq is valid: decoding refused any other)
            line: Any = TextDelta("r", draw(st.sampled_from(["a", "bc", "", "def", "😀"])), seq if numbered else None)
            if draw(st.integers(0, 12)) == 0:
                line = draw(st.sampled_from([{"kind": "status", "text": "x"}, {"kind": "text", "text": "d"}]))
            request.append(line)
        requests.append(request)
    return requests


def _sent(obj: Any) -> tuple[Any, str]:
    """A line as HTTP ingest hands it over: the decoded line and its text (a TextDelta's: the line it came from)."""
    if type(obj) is TextDelta:
        line: dict[str, Any] = {"kind": "text", "text": obj.text} | ({} if obj.seq is None else {"seq": obj.seq})
        return obj, json.dumps(line)
    return obj, json.dumps(obj)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(delta_batches(), LIMITS, st.one_of(st.none(), st.integers(0, 3)))
def test_requests_of_typed_plain_deltas_are_taken_as_each_line_alone(
    requests: list[list[Any]], limits: ClientLimits, start_seq: int | None
) -> None:
    """HTTP ingest's common batch (every line a :class:`TextDelta` of the run, seqs in order: taken by the group's
    shortcut in C, ``_whole_group``) and every variation of it are taken as each line alone through accept."""

    async def taken(fast: bool) -> tuple[object, ...]:
        journal = MemoryJournal()
        relay = _relay(limits, journal, fast=fast)
        await relay.submit_lines([(START if start_seq is None else {**START, "seq": start_seq}, None)], "r")
        await asyncio.sleep(0)
        results = [
            _result(r) for request in requests for r in await relay.submit_lines([_sent(obj) for obj in request], "r")
        ]
        state = _run_state(relay), results, await journal.lines("r")
        await relay.close()
        return state

    assert asyncio.run(taken(True)) == asyncio.run(taken(False))
