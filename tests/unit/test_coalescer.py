"""Coalescer: the coalesce-*.json cases and targeted rules, on a FakeClock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamrelay.core.clock import FakeClock
from streamrelay.core.events import Visibility
from streamrelay.core.text.coalescer import Block, Chunk, CoalesceParams, Coalescer
from streamrelay.core.units import LengthUnit

CASES = Path(__file__).resolve().parents[1] / "cases"
COALESCE_CASES = sorted(CASES.glob("coalesce-*.json"))

ANSWER, REASONING = Visibility.ANSWER, Visibility.REASONING


def run_case(case: dict[str, Any]) -> list[str]:
    """Feed a coalescer case: inputs in order (the clock set to ``at_ms`` first), then a forced flush."""
    clock = FakeClock()
    coalescer = Coalescer(CoalesceParams(**case["params"]), clock)
    blocks: list[Block] = []
    for item in case["inputs"]:
        if "at_ms" in item:
            clock.advance(item["at_ms"] / 1000 - clock.now())
            blocks += coalescer.poll()
        chunk = Chunk(
            text=item["text"],
            visibility=Visibility(item.get("visibility", "answer")),
            message=item.get("message", 0),
            reply_to=item.get("reply_to"),
        )
        blocks += coalescer.push(chunk)
    blocks += coalescer.flush()
    return [block.text for block in blocks]


@pytest.mark.parametrize("path", COALESCE_CASES, ids=lambda p: p.stem)
def test_coalesce_case(path: Path) -> None:
    case: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert case["type"] == "unit" and case["stage"] == "coalescer"
    assert run_case(case) == case["expect"]["blocks"]


def test_there_are_coalesce_cases() -> None:
    assert len(COALESCE_CASES) >= 4


def make(min_chars: int = 10, max_chars: int = 200, idle_ms: int = 100, joiner: str = " ") -> Coalescer:
    return Coalescer(CoalesceParams(min_chars, max_chars, idle_ms, joiner), FakeClock())


def test_emits_once_min_chars_is_reached() -> None:
    coalescer = make(min_chars=10)
    assert coalescer.push(Chunk("Hello"), now=0.0) == []
    assert coalescer.push(Chunk("world"), now=0.01) == [Block("Hello world", ANSWER, 0, None)]
    assert coalescer.flush() == []
    assert coalescer.push(Chunk("a long enough chunk"), now=0.02) == [Block("a long enough chunk", ANSWER, 0, None)]


def test_idle_gap_flushes_on_poll_and_the_coalescer_carries_on() -> None:
    coalescer = make(min_chars=100, idle_ms=100)
    assert coalescer.deadline() is None
    coalescer.push(Chunk("one"), now=1.0)
    coalescer.push(Chunk("two"), now=1.05)
    assert coalescer.deadline() == pytest.approx(1.15)
    assert coalescer.poll(now=1.1) == []
    assert coalescer.poll(now=1.15) == [Block("one two", ANSWER, 0, None)]
    assert coalescer.deadline() is None and coalescer.poll(now=5.0) == []
    coalescer.push(Chunk("three"), now=6.0)
    assert coalescer.flush() == [Block("three", ANSWER, 0, None)]


def test_poll_uses_the_clock_when_no_time_is_given() -> None:
    clock = FakeClock(start=10.0)
    coalescer = Coalescer(CoalesceParams(100, 200, 250), clock)
    coalescer.push(Chunk("pending"))
    clock.advance(0.2)
    assert coalescer.poll() == []
    clock.advance(0.05)
    assert [b.text for b in coalescer.poll()] == ["pending"]


def test_push_after_an_unpolled_idle_gap_emits_the_stale_block_first() -> None:
    coalescer = make(min_chars=100, idle_ms=100)
    coalescer.push(Chunk("before"), now=0.0)
    assert [b.text for b in coalescer.push(Chunk("after"), now=1.0)] == ["before"]
    assert [b.text for b in coalescer.flush()] == ["after"]


def test_idle_zero_emits_every_chunk_at_once() -> None:
    coalescer = make(min_chars=100, idle_ms=0)
    assert [b.text for b in coalescer.push(Chunk("a"), now=0.0)] == ["a"]
    assert [b.text for b in coalescer.push(Chunk("b"), now=0.0)] == ["b"]
    assert coalescer.deadline() is None


def test_max_chars_counts_the_joiner() -> None:
    coalescer = make(min_chars=12, max_chars=12, joiner="\n\n")
    coalescer.push(Chunk("aaaa"), now=0.0)
    assert coalescer.push(Chunk("bbbbb"), now=0.0) == []  # 4 + 2 + 5 = 11 fits, under min_chars
    assert [b.text for b in coalescer.push(Chunk("c"), now=0.0)] == ["aaaa\n\nbbbbb"]
    assert coalescer.pending_units == 1


def test_a_chunk_longer_than_max_is_emitted_alone_and_whole() -> None:
    coalescer = make(min_chars=5, max_chars=10)
    coalescer.push(Chunk("ab"), now=0.0)
    blocks = coalescer.push(Chunk("x" * 25), now=0.0)
    assert [b.text for b in blocks] == ["ab", "x" * 25]


def test_utf16_unit_counts_astral_code_points_twice() -> None:
    params = CoalesceParams(min_chars=5, max_chars=5, idle_ms=100, joiner="", unit=LengthUnit.UTF16)
    coalescer = Coalescer(params, FakeClock())
    coalescer.push(Chunk("😀😀"), now=0.0)  # 4 UTF-16 units
    assert [b.text for b in coalescer.push(Chunk("😀"), now=0.0)] == ["😀😀"]


@pytest.mark.parametrize(
    "second",
    [Chunk("b", visibility=REASONING), Chunk("b", message=1), Chunk("b", reply_to="42")],
    ids=["visibility", "message", "reply_to"],
)
def test_boundaries_flush_below_min_chars(second: Chunk) -> None:
    coalescer = make(min_chars=100)
    coalescer.push(Chunk("a"), now=0.0)
    assert coalescer.push(second, now=0.0) == [Block("a", ANSWER, 0, None)]
    assert coalescer.flush() == [Block("b", second.visibility, second.message, second.reply_to)]


def test_empty_chunks_are_ignored() -> None:
    coalescer = make(min_chars=100)
    assert coalescer.push(Chunk(""), now=0.0) == []
    assert coalescer.deadline() is None
    coalescer.push(Chunk("a"), now=0.0)
    coalescer.push(Chunk("", message=3), now=0.0)
    assert coalescer.flush() == [Block("a", ANSWER, 0, None)]


@pytest.mark.parametrize(("min_chars", "max_chars", "idle_ms"), [(-1, 10, 0), (20, 10, 0), (0, 0, 0), (0, 10, -5)])
def test_bad_params_are_rejected(min_chars: int, max_chars: int, idle_ms: int) -> None:
    with pytest.raises(ValueError):
        CoalesceParams(min_chars, max_chars, idle_ms)
