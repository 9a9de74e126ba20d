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

from streamrelay.core.events import TextMode
from streamrelay.core.text.assembler import TextAssembler
from streamrelay.core.text.buffer import BLOCK_CHARS, TAIL_PIECES, LinearText, TextBuffer

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
    """Appending n deltas is linear: 200k one-char deltas take well under a second of this process's CPU (CPU
    time, not wall time: on a machine shared with other work the wall clock also counts their turns)."""
    asm = TextAssembler()
    start = time.process_time()
    for _ in range(200_000):
        asm.apply(None, 0, DELTA, "x")
    elapsed = time.process_time() - start
    assert asm.text(None, 0) == "x" * 200_000
    assert elapsed < 2.0


def test_short_deltas_on_a_long_text_skip_the_replay_check() -> None:
    """A delta shorter than the text so far is never compared with it: 50k 20-char deltas stay fast."""
    asm = TextAssembler()
    piece = "abcdefghijklmnopqrst"
    asm.apply(None, 0, DELTA, "Start: ")
    start = time.process_time()  # this process's CPU, as above
    for _ in range(50_000):
        asm.apply(None, 0, DELTA, piece)
    assert time.process_time() - start < 1.0
    assert asm.text(None, 0) == "Start: " + piece * 50_000


def test_many_small_deltas_are_joined_now_and_then() -> None:
    asm = TextAssembler()
    for _ in range(100_000):
        asm.apply(None, 0, DELTA, "x")
    buffer = asm.buffer(None, 0)
    assert buffer is not None  # the stored pieces stay few: full blocks and a short tail
    assert len(buffer.pieces()) <= 100_000 // BLOCK_CHARS + TAIL_PIECES + 1


def test_prefix_snapshot_of_a_long_text_walks_only_its_own_length() -> None:
    asm = TextAssembler()
    for _ in range(50_000):
        asm.apply(None, 0, DELTA, "ab")
    start = time.process_time()  # this process's CPU, as above
    for _ in range(20_000):
        assert asm.apply(None, 0, SNAPSHOT, "abab").kind == "none"
    assert time.process_time() - start < 1.0


# --- the replay guard (DESIGN §4, openclaw #136262) --------------------------------------------------------

ORDER = "Your order #4411 shipped on Monday."


@pytest.mark.parametrize(
    ("before", "delta", "after"),
    [
        (ORDER, ORDER, ORDER),  # the repro: a bare delta repeating the whole text adds nothing
        ("Hello there, you", "Hello there, you, General Kenobi", "Hello there, you, General Kenobi"),  # + new text
        ("a" * 16, "a" * 16, "a" * 16),  # 16 characters on 16 so far: a replay
        ("a" * 16, "a" * 15 + "b", "a" * 31 + "b"),  # does not begin with all 16
        ("aaaa", "a" * 15, "a" * 19),  # 15: a token-sized delta, appended
        # below 16 characters so far the guard does not act (DESIGN §4: it cannot tell a replay from honest
        # repetitive text): issue 26, item 8
        ("Hello there", "Hello there, General Kenobi", "Hello thereHello there, General Kenobi"),
        ("aaaa", "a" * 16, "a" * 20),
        ("a" * 15, "a" * 40, "a" * 55),
        ("-", "--\n\nHello, here is the list", "---\n\nHello, here is the list"),
        ("ab", "abab", "ababab"),
        ("", ORDER, ORDER),  # the first delta of a message is never a replay
        (ORDER, ORDER[:-1] + "!", ORDER + ORDER[:-1] + "!"),  # does not begin with the whole text
        (ORDER * 2, ORDER, ORDER * 3),  # begins only with part of it
        (ORDER, " " + ORDER, ORDER + " " + ORDER),
    ],
)
def test_replay_rule(before: str, delta: str, after: str) -> None:
    asm = TextAssembler()
    asm.apply(None, 0, DELTA, before)
    asm.apply(None, 0, DELTA, delta)
    assert asm.text(None, 0) == after


def test_replay_changes() -> None:
    asm = TextAssembler()
    asm.apply(None, 0, DELTA, "Your order #4411 ")
    asm.apply(None, 0, DELTA, "shipped on Monday.")
    same = asm.apply(None, 0, DELTA, ORDER)
    assert (same.kind, same.appended, same.text) == ("none", "", ORDER)
    longer = asm.apply(None, 0, DELTA, ORDER + " It arrives Friday.")
    assert (longer.kind, longer.appended, longer.text) == (
        "append",
        " It arrives Friday.",
        ORDER + " It arrives Friday.",
    )
    after = asm.apply(None, 0, DELTA, " Thanks!")  # n -> 2n -> n: the deltas after a replay go on as before
    assert after.text == ORDER + " It arrives Friday. Thanks!"


def test_the_guard_can_be_turned_off() -> None:
    asm = TextAssembler(delta_replay_guard=False)
    asm.apply(None, 0, DELTA, ORDER)
    asm.apply(None, 0, DELTA, ORDER)
    assert asm.text(None, 0) == ORDER + ORDER


def test_replay_after_a_snapshot_and_a_replace() -> None:
    asm = TextAssembler()
    asm.apply(None, 0, SNAPSHOT, "The first draft.")  # 16 characters so far: the guard acts
    asm.apply(None, 0, DELTA, "The first draft. Longer now")
    assert asm.text(None, 0) == "The first draft. Longer now"
    asm.apply(None, 0, REPLACE, "A new text entirely")
    asm.apply(None, 0, DELTA, "A new text entirely")
    assert asm.text(None, 0) == "A new text entirely"


def test_replay_is_per_message_and_source() -> None:
    asm = TextAssembler()
    asm.apply(None, 0, DELTA, ORDER)
    asm.apply(None, 1, DELTA, ORDER)  # another message's first delta
    asm.apply("child", 0, DELTA, ORDER)
    assert asm.messages(None) == [(0, ORDER), (1, ORDER)] and asm.answer("child") == ORDER


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
    asm = TextAssembler(delta_replay_guard=False)  # any deltas: some would look like replays
    for delta in deltas:
        asm.apply(None, 0, DELTA, delta)
    change = asm.apply(None, 0, SNAPSHOT, text)
    assert change.kind == "none"
    assert asm.text(None, 0) == text


@given(split_text(), st.data())
def test_snapshot_of_any_prefix_adds_nothing(split: tuple[str, list[str]], data: st.DataObject) -> None:
    text, deltas = split
    asm = TextAssembler(delta_replay_guard=False)  # any deltas: some would look like replays
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


@st.composite
def token_deltas(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A text cut into token-sized deltas (1 to 15 characters), which the guard never takes for replays."""
    text = draw(st.text(alphabet=st.sampled_from("ab \n"), min_size=1, max_size=120))
    deltas: list[str] = []
    pos = 0
    while pos < len(text):
        size = draw(st.integers(1, 15))
        deltas.append(text[pos : pos + size])
        pos += size
    return text, deltas


@given(token_deltas(), st.data())
def test_replays_anywhere_leave_the_text_as_streamed(split: tuple[str, list[str]], data: st.DataObject) -> None:
    """Token-sized deltas, and now and then a bare delta replaying the text so far (maybe with the next deltas'
    text too, which the stream then skips): the text is the streamed text, never doubled."""
    text, deltas = split
    asm = TextAssembler()
    so_far, index = "", 0
    while index < len(deltas):
        if len(so_far) >= 16 and data.draw(st.booleans()):
            ahead = data.draw(st.integers(0, len(deltas) - index))
            so_far += "".join(deltas[index : index + ahead])
            index += ahead
            asm.apply(None, 0, DELTA, so_far)
            assert asm.text(None, 0) == so_far
        if index < len(deltas):
            asm.apply(None, 0, DELTA, deltas[index])
            so_far += deltas[index]
            index += 1
    assert asm.text(None, 0) == so_far == text


@given(token_deltas())
def test_token_deltas_are_never_taken_for_replays(split: tuple[str, list[str]]) -> None:
    text, deltas = split
    asm = TextAssembler()
    for delta in deltas:
        asm.apply(None, 0, DELTA, delta)
    assert asm.text(None, 0) == text


@given(st.lists(st.tuples(st.sampled_from(["root", "child-a", "child-b"]), st.integers(0, 2), texts), max_size=40))
def test_interleaved_sources_do_not_mix(events: list[tuple[str, int, str]]) -> None:
    asm = TextAssembler(delta_replay_guard=False)  # any deltas: some would look like replays
    expected: dict[tuple[str, int], str] = {}
    for source, message, delta in events:
        key = None if source == "root" else source
        asm.apply(key, message, DELTA, delta)
        expected[(source, message)] = expected.get((source, message), "") + delta
    for (source, message), text in expected.items():
        assert asm.text(None if source == "root" else source, message) == text


# --- one copy: blocks at their own width, ranges read without joining the whole (issue 23, item 5) ------------------


def test_a_buffer_keeps_its_text_in_blocks_each_as_narrow_as_its_own_characters() -> None:
    text = "plain ascii text, " * 400 + "📦" + " and more ascii" * 300
    buffer = TextBuffer()
    for k in range(0, len(text), 7):
        buffer.append(text[k : k + 7])
    assert buffer.value() == text and buffer.length == len(text)
    pieces = buffer.pieces()
    assert all(len(p) <= BLOCK_CHARS for p in pieces)
    wide = [p for p in pieces if max(p) > "\uffff"]
    assert len(wide) == 1  # only the block with the emoji takes 4 bytes a character
    assert sum(len(p) for p in pieces if p.isascii()) > len(text) - 2 * BLOCK_CHARS


@given(st.lists(st.text(max_size=40), max_size=80), st.integers(0, 3000), st.integers(0, 3000))
def test_a_buffer_slice_is_the_slice_of_its_text(pieces: list[str], a: int, b: int) -> None:
    buffer = TextBuffer()
    for piece in pieces:
        buffer.append(piece)
    text = "".join(pieces)
    assert buffer.slice(a, b) == text[a:b] and buffer.value() == text
    assert buffer.common_with(text[:a]) and buffer.common_with(text + "tail")


def test_a_linear_view_reads_the_messages_joined_and_names_a_replacement_by_its_generation() -> None:
    asm = TextAssembler()
    view = asm.view(None, "\n\n")
    asm.apply(None, 0, DELTA, "Hello")
    asm.apply(None, 2, DELTA, "world")
    asm.apply(None, 1, DELTA, "")  # empty messages are skipped, as answer() skips them
    assert view.value() == asm.answer(None) == "Hello\n\nworld" and view.length == len(view.value())
    assert [view.slice(a, b) for a, b in ((0, 5), (4, 8), (5, 7), (6, 12), (0, 99))] == [
        "Hello",
        "o\n\nw",
        "\n\n",
        "\nworld",
        "Hello\n\nworld",
    ]
    first = view.generation
    asm.apply(None, 2, DELTA, "!")  # the last message grows: earlier ranges still name the same characters
    assert view.generation == first
    asm.apply(None, 0, DELTA, ", you")  # the middle changes
    assert view.generation == first + 1 and view.value() == "Hello, you\n\nworld!"
    asm.apply(None, 2, TextMode.REPLACE, "there")
    assert view.generation == first + 2 and view.value() == "Hello, you\n\nthere"


def test_a_buffer_stores_one_byte_a_character_and_puts_the_wide_ones_back() -> None:
    """Arrows, dashes and emoji are kept apart: every stored block is Latin-1 (one byte a character), and every
    range, pin and prefix reads the text as it was appended."""
    text = ("plain text → more — " * 150 + "📦 done. ") * 3 + "café 中文 🎯"
    buffer = TextBuffer()
    for k in range(0, len(text), 11):
        buffer.append(text[k : k + 11])
    assert buffer.value() == text and "".join(buffer.pieces()) == text
    assert all(max(block) <= "\xff" for block in buffer._blocks)
    for a, b in ((0, 5), (10, 40), (2990, 3100), (len(text) - 12, len(text)), (0, len(text))):
        assert buffer.slice(a, b) == text[a:b] and buffer.pin(a, b).value() == text[a:b]
    assert buffer.common_with(text[:1234]) and buffer.common_with(text + "more") and not buffer.common_with("plain x")
    buffer.reset_to(text + " 🧠 end")
    assert buffer.value() == text + " 🧠 end" and buffer.slice(len(text), len(text) + 3) == " 🧠 "


@given(
    st.lists(st.text(alphabet=st.sampled_from("ab\\né→😀"), max_size=12), min_size=1, max_size=3),
    st.integers(-3, 40),
    st.integers(-3, 40),
)
def test_a_linear_texts_slice_is_its_pinned_range(messages: list[str], start: int, end: int) -> None:
    """:meth:`LinearText.slice` (one message: that message's own slice) gives what its pinned range gives, and the
    joined text's characters."""
    buffers: dict[int, TextBuffer] = {}
    for k, message in enumerate(messages):
        buffers[k] = TextBuffer()
        for i in range(0, len(message), 3):
            buffers[k].append(message[i : i + 3])
    view = LinearText(buffers, {}, None, "\n\n")
    joined = "\n\n".join(message for message in messages if message)
    got = view.slice(start, end)
    assert got == view.pin(start, end).value() == joined[max(0, start) : max(0, end)]
