"""Per-run ordering by seq: duplicates dropped, gaps held then released with a note."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from streamrelay.core.events import BlockEnd, JoinedDeltas, RunEvent, TextDelta, TextEvent
from streamrelay.core.ingest.sequencer import SeqGate, join_deltas
from streamrelay.core.text.assembler import REPLAY_MIN_CHARS


def _ev(seq: int | None, text: str = "x") -> TextEvent:
    return TextEvent(run="r", seq=seq, text=text)


def _texts(events: Sequence[RunEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextEvent)]


def test_in_order_events_pass_and_repeats_are_dropped() -> None:
    gate = SeqGate()
    assert _texts(gate.push(_ev(1, "a"), 0)) == ["a"]
    assert _texts(gate.push(_ev(2, "b"), 0)) == ["b"]
    assert gate.push(_ev(2, "b again"), 0) == []
    assert gate.dropped == 1


def test_a_gap_holds_later_events_until_filled() -> None:
    gate = SeqGate()
    gate.push(_ev(1, "a"), 0)
    assert gate.push(_ev(3, "c"), 0) == []
    assert gate.deadline() is not None
    assert _texts(gate.push(_ev(2, "b"), 0.1)) == ["b", "c"]
    assert gate.deadline() is None


def test_a_gap_that_never_fills_is_released_after_the_timeout_and_reported() -> None:
    gate = SeqGate(gap_timeout_s=2.0)
    gate.push(_ev(1, "a"), 0)
    gate.push(_ev(4, "d"), 0.5)
    assert gate.expire(1.0) == []
    assert _texts(gate.expire(2.6)) == ["d"]
    assert gate.gaps == ["seq 2..3 never arrived"]


def test_events_without_seq_pass_through() -> None:
    gate = SeqGate()
    assert _texts(gate.push(_ev(None, "a"), 0)) == ["a"]
    assert _texts(gate.push(_ev(None, "a"), 0)) == ["a"]


def test_text_deltas_are_joined_as_the_text_events_they_stand_for() -> None:
    """A run's plain delta lines come as TextDelta values: joined, they give the JoinedDeltas the same events give (a
    TextEvent among them joins too); one alone stays as it is, and an event of another kind ends a join."""
    long = "y" * REPLAY_MIN_CHARS
    plain: list[RunEvent] = [
        TextDelta("r", "a", 1),
        TextEvent(run="r", seq=2, text=long),
        TextDelta("r", "b", 3),
        BlockEnd(run="r", seq=4),
        TextDelta("r", "c", 5, message=1),
    ]
    typed: list[RunEvent] = [event.event() if isinstance(event, TextDelta) else event for event in plain]
    joined, typed_joined = join_deltas(plain), join_deltas(typed)
    assert [type(e) for e in joined] == [JoinedDeltas, BlockEnd, TextDelta]
    assert [e.__dict__ for e in joined[:2]] == [e.__dict__ for e in typed_joined[:2]]
    assert isinstance(joined[0], JoinedDeltas) and joined[0].replay_candidates == ((1, REPLAY_MIN_CHARS),)
    assert isinstance(joined[2], TextDelta) and joined[2].event().__dict__ == typed_joined[2].__dict__


_SEQS = st.lists(st.one_of(st.none(), st.integers(1, 12)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(_SEQS, max_size=5), st.sampled_from(["delta", "event"]))
def test_a_batch_pushed_at_once_is_its_events_pushed_one_by_one(batches: list[list[int | None]], kind: str) -> None:
    """:meth:`SeqGate.push_all` (with its shortcut for a batch whose every seq is the next one) gives what
    :meth:`SeqGate.push` of each event gives, batch after batch: the same events ready, in order, the same gate."""
    at_once, one_by_one = SeqGate(), SeqGate()
    for n, seqs in enumerate(batches):
        events: list[RunEvent] = [
            TextDelta("r", f"{n}.{k}", seq) if kind == "delta" else _ev(seq, f"{n}.{k}") for k, seq in enumerate(seqs)
        ]
        expected = [ready for event in events for ready in one_by_one.push(event, float(n))]
        assert at_once.push_all(events, float(n)) == expected
        assert (at_once.last, at_once.dropped, at_once.gaps) == (one_by_one.last, one_by_one.dropped, one_by_one.gaps)


def test_a_batch_of_the_next_seqs_is_ready_at_once_and_moves_the_gate() -> None:
    gate = SeqGate()
    gate.push(_ev(1, "a"), 0)
    batch: list[RunEvent] = [TextDelta("r", t, seq) for seq, t in [(2, "b"), (3, "c"), (4, "d")]]
    assert gate.push_all(batch, 0) == batch
    assert gate.last == 4
    assert gate.push_all([TextDelta("r", "again", 4), TextDelta("r", "e", 5)], 0) == [TextDelta("r", "e", 5)]
    assert gate.dropped == 1


def _loop_candidates(sizes: list[int]) -> tuple[tuple[int, int], ...]:
    """The replay candidates as the join computed them before (a loop over the sizes)."""
    out, offset = [], 0
    for size in sizes:
        if size >= REPLAY_MIN_CHARS:
            out.append((offset, size))
        offset += size
    return tuple(out)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.text(max_size=REPLAY_MIN_CHARS + 4), min_size=2, max_size=8),
    st.one_of(st.none(), st.integers(0, 10**6)),
    st.integers(0, 3),
    st.booleans(),
)
def test_a_join_is_the_joined_deltas_model_construct_makes(
    texts: list[str], seq: int | None, message: int, typed: bool
) -> None:
    """A join builds its :class:`JoinedDeltas` past ``model_construct`` (every field given, in order): the same
    instance ``model_construct`` makes (fields, fields set, no extra, no private attributes, equal), its replay
    candidates where the loop over the sizes put them."""
    delta = TextDelta("r", texts[0], seq, message)
    first: RunEvent = delta.event() if typed else delta
    joined = join_deltas([first, *(TextDelta("r", text, None, message) for text in texts[1:])])
    assert len(joined) == 1 and isinstance(joined[0], JoinedDeltas)
    got = joined[0]
    fields = {name: getattr(got, name) for name in JoinedDeltas.model_fields}
    made = JoinedDeltas.model_construct(got.model_fields_set, **fields)
    assert (got.__dict__, got.model_fields_set, got.__pydantic_extra__, got.__pydantic_private__) == (
        made.__dict__,
        made.model_fields_set,
        made.__pydantic_extra__,
        made.__pydantic_private__,
    )
    assert list(got.__dict__) == list(made.__dict__) and got == made
    assert got.text == "".join(texts)
    assert got.replay_candidates == _loop_candidates([len(text) for text in texts])
    expected_set = (
        {"kind", "run", "text"} | ({"seq"} if seq is not None else set()) | ({"message"} if message else set())
    )
    assert got.model_fields_set == expected_set
