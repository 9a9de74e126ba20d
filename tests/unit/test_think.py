"""ThinkSplitter / split_think: inline reasoning tags split out of streamed answer text (core/think.py)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.think import ThinkSplitter, split_think

_TAG_RE = re.compile(r"<(/?)(?:think|thinking|thought|reasoning)>", re.IGNORECASE | re.ASCII)


def reference_split(text: str) -> tuple[str, str]:
    """Whole-text oracle: the rules restated over the full text with one regex (no streaming, no held tail)."""
    answer = ""
    reasoning = ""
    inside = False
    closer_seen = False
    pos = 0
    for match in [*_TAG_RE.finditer(text), None]:
        piece = text[pos : match.start() if match else len(text)]
        if inside:
            reasoning += piece
        else:
            answer += piece.lstrip() if closer_seen and not answer else piece
        if match:
            inside = not match.group(1)
            closer_seen = closer_seen or bool(match.group(1))
            pos = match.end()
    return answer, reasoning


def run(deltas: Sequence[str], splitter: ThinkSplitter | None = None) -> tuple[str, str]:
    """Feed every delta then flush; the concatenated (answer, reasoning). Checks the held bound on the way."""
    splitter = splitter or ThinkSplitter()
    answer: list[str] = []
    reasoning: list[str] = []
    for delta in deltas:
        got_answer, got_reasoning = splitter.feed(delta)
        assert len(splitter.held) <= 11
        answer.append(got_answer)
        reasoning.append(got_reasoning)
    got_answer, got_reasoning = splitter.flush()
    assert splitter.held == ""
    return "".join(answer) + got_answer, "".join(reasoning) + got_reasoning


def cut(text: str, points: Sequence[int]) -> list[str]:
    """``text`` cut at ``points`` (any order, repeats allowed: empty deltas are deltas too)."""
    bounds = [0, *sorted(points), len(text)]
    return [text[lo:hi] for lo, hi in itertools.pairwise(bounds)]


# -- the brief's example, step by step ---------------------------------------------------------------------------


def test_example_deltas_step_by_step() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("<thi") == ("", "")
    assert splitter.held == "<thi"
    assert not splitter.inside
    assert splitter.feed("nk>let me") == ("", "let me")
    assert splitter.inside
    assert splitter.feed(" see</th") == ("", " see")
    assert splitter.held == "</th"
    assert splitter.feed("ink>The answer") == ("The answer", "")
    assert not splitter.inside
    assert splitter.flush() == ("", "")


@pytest.mark.parametrize("name", ["think", "thinking", "thought", "reasoning", "THINK", "Thinking", "tHoUgHt"])
def test_every_tag_name_any_ascii_case(name: str) -> None:
    assert run([f"A<{name}>r</{name.swapcase()}>B"]) == ("AB", "r")


def test_closer_of_another_name_closes() -> None:
    assert run(["<think>r</reasoning>A"]) == ("A", "r")


# -- tags cut at every position ------------------------------------------------------------------------------------

_CUT_TEXTS = [
    "<think>let me see</think>The answer",
    "x<Thinking>a<b>c</THINKING>\r\n\r\ny<th>z",
    "<reasoning>😀</reasoning>😀<</thought>",
    "a<th<think>b</thinker></think>c",
]


@pytest.mark.parametrize("text", _CUT_TEXTS)
def test_two_cuts_at_every_position(text: str) -> None:
    whole = run([text])
    assert whole == reference_split(text)
    for first in range(len(text) + 1):
        for second in range(first, len(text) + 1):
            assert run(cut(text, [first, second])) == whole, (first, second)


@pytest.mark.parametrize("text", _CUT_TEXTS)
def test_one_character_per_delta(text: str) -> None:
    assert run(list(text)) == run([text])


@pytest.mark.parametrize("tag", ["<think>", "</think>", "<thinking>", "</reasoning>", "<thought>"])
def test_every_proper_prefix_of_a_tag_is_held(tag: str) -> None:
    for end in range(1, len(tag)):
        splitter = ThinkSplitter()
        assert splitter.feed("ok" + tag[:end]) == ("ok", "")
        assert splitter.held == tag[:end]


# -- look-alikes -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "<th>",
        "<thinker>",
        "< think>",
        "<think >",
        "<think/>",
        "<think a='1'>",
        "<b>",
        "<<>>",
        "a < b > c",
        "</ think>",
        "<thin\u212a>",  # Kelvin sign: Unicode case-folds it to "k", ASCII folding does not
        "<İ>",  # "İ".lower() is two characters
    ],
)
def test_look_alikes_are_answer_text_unchanged(text: str) -> None:
    splitter = ThinkSplitter()
    assert splitter.feed(text) == (text, "")
    assert splitter.held == ""
    assert run(list(text)) == (text, "")


@pytest.mark.parametrize(("delta", "held"), [("<", "<"), ("<thi", "<thi"), ("<think", "<think"), ("</", "</")])
def test_possible_tag_is_held(delta: str, held: str) -> None:
    splitter = ThinkSplitter()
    assert splitter.feed(delta) == ("", "")
    assert splitter.held == held


@pytest.mark.parametrize("text", ["<thinke", "<b", "< ", "<x<tx", "</thinkin>", "<think\n"])
def test_look_alike_released_as_soon_as_it_cannot_become_a_tag(text: str) -> None:
    splitter = ThinkSplitter()
    answer, _ = splitter.feed(text[:-1])
    held = splitter.held
    assert held
    assert splitter.feed(text[-1]) == (held + text[-1], "")
    assert answer + held + text[-1] == text
    assert splitter.held == ""


def test_look_alike_after_a_held_tail_goes_out_whole() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("<think") == ("", "")
    assert splitter.feed("er>") == ("<thinker>", "")


def test_partial_tag_never_completed_is_text_of_its_class_at_flush() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("a</thi") == ("a", "")
    assert splitter.flush() == ("</thi", "")
    splitter = ThinkSplitter()
    assert splitter.feed("<think>r<thin") == ("", "r")
    assert splitter.flush() == ("", "<thin")


# -- unclosed, stray and repeated tags ---------------------------------------------------------------------------


def test_unclosed_think_stays_reasoning() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("Sure.<think>hmm") == ("Sure.", "hmm")
    assert splitter.inside
    assert splitter.feed(" more") == ("", " more")
    assert splitter.flush() == ("", "")


def test_closer_without_opener_is_dropped() -> None:
    assert run(["a</think>b"]) == ("ab", "")
    assert run(["</THOUGHT>x"]) == ("x", "")


def test_opener_inside_is_dropped() -> None:
    assert run(["<think>a<thinking>b</think>c"]) == ("c", "ab")


# -- whitespace after a closer -----------------------------------------------------------------------------------


@pytest.mark.parametrize("gap", ["\n", "\n\n", "\r\n", "\r\n\r\n", " \n\t "])
def test_leading_whitespace_after_closer_dropped(gap: str) -> None:
    assert run([f"<think>x</think>{gap}Answer"]) == ("Answer", "x")


def test_leading_whitespace_dropped_across_deltas_and_held_tails() -> None:
    assert run(["<think>x</think>", "\n", "\r\n", " <", "b>ok"]) == ("<b>ok", "x")
    assert run(["</think>", "\n\n", "<think>y</think>", "\n", "A"]) == ("A", "y")


def test_whitespace_kept_once_answer_text_was_emitted() -> None:
    assert run(["Hi<think>x</think>\n\nthere"]) == ("Hi\n\nthere", "x")
    assert run(["<think>x</think>\nA\n\n<think>y</think>\n\nB"]) == ("A\n\n\n\nB", "xy")
    assert run([" <think>x</think>\nA"]) == (" \nA", "x")


def test_whitespace_before_any_closer_kept() -> None:
    assert run(["\n\nA<think>x"]) == ("\n\nA", "x")
    assert run(["<think>\nx\n</think>\n\nA"]) == ("A", "\nx\n")


# -- surrogates and emoji ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer", "reasoning"),
    [("<think>🤔👍🏽</think>\n🎉<😀", "🎉<😀", "🤔👍🏽"), ("😀<think>🤔</think>👍🏽</th", "😀👍🏽</th", "🤔")],
)
def test_emoji_next_to_tags(text: str, answer: str, reasoning: str) -> None:
    for point in range(len(text) + 1):
        assert run(cut(text, [point])) == (answer, reasoning)


def test_lone_surrogates_pass_through_in_order() -> None:
    # JSON "\ud83d" and "\ude00" in two deltas decode to lone surrogates: the pair is rejoined downstream.
    assert run(["\ud83d", "\ude00<th", "ink>\ud83e", "\udd14"]) == ("\ud83d\ude00", "\ud83e\udd14")


# -- flush and split_think -----------------------------------------------------------------------------------------


def test_flush_resets_for_the_next_message() -> None:
    splitter = ThinkSplitter()
    assert run(["<think>x</think>\nA<thi"], splitter) == ("A<thi", "x")
    assert not splitter.inside
    assert run(["\nB"], splitter) == ("\nB", "")  # no closer in this message: its whitespace is kept


def test_split_think_examples() -> None:
    assert split_think("<think>hm</think>\nYes") == ("Yes", "hm", "")
    assert split_think("<think>hm") == ("", "hm", "")
    assert split_think("Yes </thi") == ("Yes ", "", "</thi")
    assert split_think("") == ("", "", "")


# -- properties ----------------------------------------------------------------------------------------------------

_TOKENS = [
    "<think>",
    "</think>",
    "<THINKING>",
    "</Thinking>",
    "<thought>",
    "</reasoning>",
    "<th>",
    "<thinker>",
    "< think>",
    "<b>",
    "\r\n",
    "😀",
    "👍🏽",
]
_ALPHABET = "<<</>>thinkTHINKgsoure ab\n\r\t😀🤔\u212a"

texts = st.lists(st.one_of(st.sampled_from(_TOKENS), st.text(alphabet=_ALPHABET, max_size=6)), max_size=12).map("".join)


@st.composite
def texts_and_cuts(draw: st.DrawFn) -> tuple[str, list[int]]:
    text = draw(texts)
    points = draw(st.lists(st.integers(min_value=0, max_value=len(text)), max_size=10))
    return text, points


@settings(max_examples=400)
@given(texts_and_cuts())
def test_output_does_not_depend_on_cut_points(case: tuple[str, list[int]]) -> None:
    text, points = case
    assert run(cut(text, points)) == run([text])


@settings(max_examples=400)
@given(texts)
def test_streamed_output_matches_the_whole_text_oracle(text: str) -> None:
    assert run([text]) == reference_split(text)


@settings(max_examples=300)
@given(texts)
def test_split_think_equals_one_shot_feed(text: str) -> None:
    splitter = ThinkSplitter()
    answer, reasoning = splitter.feed(text)
    assert split_think(text) == (answer, reasoning, splitter.held)
    assert text.endswith(splitter.held)


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(blacklist_characters="<"), max_size=40))
def test_text_without_a_lt_sign_is_answer_unchanged(text: str) -> None:
    splitter = ThinkSplitter()
    assert splitter.feed(text) == (text, "")
    assert splitter.held == ""
