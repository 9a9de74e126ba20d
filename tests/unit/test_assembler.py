"""TextAssembler: the text-*.json cases, targeted rules and hypothesis properties."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.assembler import TextAssembler
from core.events import TextMode

CASES = Path(__file__).resolve().parents[1] / "cases"
TEXT_CASES = sorted(CASES.glob("text-*.json"))

DELTA, SNAPSHOT, REPLACE = TextMode.DELTA, TextMode.SNAPSHOT, TextMode.REPLACE


@pytest.mark.parametrize("path", TEXT_CASES, ids=lambda p: p.stem)
def test_text_case(path: Path) -> None:
    case: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert case["type"] == "unit" and case["stage"] == "text"
    asm = TextAssembler()
    for mode, text in case["events"]:
        asm.apply(None, 0, TextMode(mode), text)
    assert asm.text(None, 0) == case["expect"]["visible"]
    assert asm.answer() == case["expect"]["visible"]


def test_there_are_text_cases() -> None:
    assert len(TEXT_CASES) >= 5


def test_changes_report_what_happened() -> None:
    asm = TextAssembler()
    first = asm.apply(None, 0, DELTA, "Hello")
    assert (first.kind, first.appended, first.length, first.text) == ("append", "Hello", 5, "Hello")
    extends = asm.apply(None, 0, SNAPSHOT, "Hello world")
    assert (extends.kind, extends.appended, extends.text) == ("append", " world", "Hello world")
    assert asm.apply(None, 0, SNAPSHOT, "Hello world").kind == "none"
    assert asm.apply(None, 0, SNAPSHOT, "Hell").kind == "none"
    diverges = asm.apply(None, 0, SNAPSHOT, "Help")
    assert (diverges.kind, diverges.appended, diverges.text) == ("replace", "", "Help")
    assert asm.apply(None, 0, REPLACE, "Help").kind == "none"
    swapped = asm.apply(None, 0, REPLACE, "Hi")
    assert (swapped.kind, swapped.text) == ("replace", "Hi")
    assert asm.apply(None, 0, DELTA, "").kind == "none"


def test_change_text_is_the_text_at_that_change() -> None:
    asm = TextAssembler()
    early = asm.apply(None, 0, DELTA, "ab")
    asm.apply(None, 0, DELTA, "cd")
    before_replace = asm.apply(None, 0, SNAPSHOT, "abcdef")
    asm.apply(None, 0, REPLACE, "xyz")
    asm.apply(None, 0, DELTA, "!")
    assert (early.text, before_replace.text, asm.text(None, 0)) == ("ab", "abcdef", "xyz!")
    assert early == TextAssembler().apply("other", 5, DELTA, "ab")
    assert early != before_replace


def test_snapshot_longer_but_diverging_early_is_a_replace() -> None:
    asm = TextAssembler()
    asm.apply(None, 0, DELTA, "Hello wor")
    change = asm.apply(None, 0, SNAPSHOT, "Hallo world, friend")
    assert (change.kind, asm.text(None, 0)) == ("replace", "Hallo world, friend")


def test_messages_and_answer() -> None:
    asm = TextAssembler()
    asm.apply(None, 2, DELTA, "third")
    asm.apply(None, 0, DELTA, "first")
    asm.apply(None, 1, DELTA, "")
    asm.apply("child", 0, DELTA, "not the root's")
    assert asm.messages(None) == [(0, "first"), (1, ""), (2, "third")]
    assert asm.answer() == "first\n\nthird"
    assert asm.answer(sep="\n") == "first\nthird"
    assert asm.answer("child") == "not the root's"
    assert asm.text("nobody", 0) == "" and asm.messages("nobody") == [] and asm.answer("nobody") == ""


def test_delta_cost_does_not_grow_with_the_text() -> None:
    """Appending n deltas is linear: 200k one-char deltas take well under a second."""
    asm = TextAssembler()
    start = time.perf_counter()
    for _ in range(200_000):
        asm.apply(None, 0, DELTA, "x")
    elapsed = time.perf_counter() - start
    assert asm.text(None, 0) == "x" * 200_000
    assert elapsed < 2.0


def test_prefix_snapshot_of_a_long_text_walks_only_its_own_length() -> None:
    asm = TextAssembler()
    for _ in range(50_000):
        asm.apply(None, 0, DELTA, "ab")
    start = time.perf_counter()
    for _ in range(20_000):
        assert asm.apply(None, 0, SNAPSHOT, "abab").kind == "none"
    assert time.perf_counter() - start < 1.0


# --- properties -------------------------------------------------------------------------------------------

texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=200)


@st.composite
def split_text(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = draw(texts)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=20)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds)]


@given(split_text())
def test_deltas_then_full_snapshot_is_exactly_the_text(split: tuple[str, list[str]]) -> None:
    text, deltas = split
    asm = TextAssembler()
    for delta in deltas:
        asm.apply(None, 0, DELTA, delta)
    change = asm.apply(None, 0, SNAPSHOT, text)
    assert change.kind == "none"
    assert asm.text(None, 0) == text


@given(split_text(), st.data())
def test_snapshot_of_any_prefix_adds_nothing(split: tuple[str, list[str]], data: st.DataObject) -> None:
    text, deltas = split
    asm = TextAssembler()
    for delta in deltas:
        asm.apply(None, 0, DELTA, delta)
    prefix = text[: data.draw(st.integers(0, len(text)))]
    change = asm.apply(None, 0, SNAPSHOT, prefix)
    assert (change.kind, change.appended, asm.text(None, 0)) == ("none", "", text)


@given(split_text(), st.data())
def test_growing_snapshots_add_exactly_their_suffixes(split: tuple[str, list[str]], data: st.DataObject) -> None:
    text, _ = split
    asm = TextAssembler()
    ends = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=10)))
    appended = "".join(asm.apply(None, 0, SNAPSHOT, text[:end]).appended for end in [*ends, len(text)])
    assert appended == text == asm.text(None, 0)


@given(texts, texts)
def test_diverging_snapshot_is_never_appended(current: str, snapshot: str) -> None:
    asm = TextAssembler()
    asm.apply(None, 0, DELTA, current)
    change = asm.apply(None, 0, SNAPSHOT, snapshot)
    expected = current if current.startswith(snapshot) else snapshot
    assert asm.text(None, 0) == expected == change.text
    if not (current.startswith(snapshot) or snapshot.startswith(current)):
        assert change.kind == "replace"


@given(st.lists(st.tuples(st.sampled_from(["root", "child-a", "child-b"]), st.integers(0, 2), texts), max_size=40))
def test_interleaved_sources_do_not_mix(events: list[tuple[str, int, str]]) -> None:
    asm = TextAssembler()
    expected: dict[tuple[str, int], str] = {}
    for source, message, delta in events:
        key = None if source == "root" else source
        asm.apply(key, message, DELTA, delta)
        expected[(source, message)] = expected.get((source, message), "") + delta
    for (source, message), text in expected.items():
        assert asm.text(None if source == "root" else source, message) == text
