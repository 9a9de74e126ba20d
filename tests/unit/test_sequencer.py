"""Per-run ordering by seq: duplicates dropped, gaps held then released with a note."""

from __future__ import annotations

from streamrelay.core.events import Event, TextEvent
from streamrelay.core.ingest.sequencer import SeqGate


def _ev(seq: int | None, text: str = "x") -> TextEvent:
    return TextEvent(run="r", seq=seq, text=text)


def _texts(events: list[Event]) -> list[str]:
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
