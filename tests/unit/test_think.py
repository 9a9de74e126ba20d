"""ThinkSplitter / split_think: inline reasoning tags split out of streamed answer text (core/text/think.py).

The rule under test: a reasoning block opens only before the answer (whitespace aside) and closes only inside
a block; everywhere else ``<think>``-like text is text (an answer that explains the tags keeps them).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamrelay.core.text.think import ThinkSplitter, split_think

_OPENER = re.compile(r"<(?:think|thinking|thought|reasoning)>", re.IGNORECASE | re.ASCII)
_CLOSER = re.compile(r"</(?:think|thinking|thought|reasoning)>", re.IGNORECASE | re.ASCII)
_FINAL = re.compile(r"<final>", re.IGNORECASE | re.ASCII)
_FINAL_END = re.compile(r"</final>", re.IGNORECASE | re.ASCII)


def reference_split(text: str, opened: bool = False) -> tuple[str, str]:
    """Whole-text oracle: the rules restated character by character (no streaming, no held tail)."""
    answer: list[str] = []
    reasoning: list[str] = []
    block = "think" if opened else ""
    answered = strip = final_seen = False
    i = 0
    while i < len(text):
        if block == "think":
            match = _CLOSER.match(text, i) or _FINAL.match(text, i)
        elif block == "final":
            match = _FINAL_END.match(text, i)
        elif final_seen or not answered:
            match = _OPENER.match(text, i) or _FINAL.match(text, i)
        else:
            match = None
        if match:
            tag = match.group().lower()
            if tag == "</final>":
                block = ""
            elif tag == "<final>" or tag.startswith("</"):
                block = "final" if tag == "<final>" else ""
                final_seen = final_seen or tag == "<final>"
                strip = strip or not answered
            else:
                block = "think"
            i = match.end()
            continue
        ch = text[i]
        if block == "think" or (block == "" and final_seen):
            reasoning.append(ch)
        elif not (strip and ch.isspace()):
            strip = False
            answer.append(ch)
            answered = answered or not ch.isspace()
        i += 1
    return "".join(answer), "".join(reasoning)


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


# -- the example, step by step --------------------------------------------------------------------------------


def test_example_deltas_step_by_step() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("<thi") == ("", "") and splitter.held == "<thi"
    assert splitter.feed("nk>let me") == ("", "let me") and splitter.inside
    assert splitter.feed(" see</th") == ("", " see") and splitter.held == "</th"
    assert splitter.feed("ink>\n\nThe answer") == ("The answer", "") and not splitter.inside
    assert splitter.flush() == ("", "")


@pytest.mark.parametrize("name", ["think", "thinking", "thought", "reasoning", "THINK", "Thinking", "tHoUgHt"])
def test_every_tag_name_any_ascii_case(name: str) -> None:
    assert run([f"<{name}>plan</{name}>Answer"]) == ("Answer", "plan")


def test_any_closer_closes() -> None:
    assert run(["<think>a</thought>b"]) == ("b", "a")


def test_a_non_ascii_look_alike_is_not_a_tag() -> None:
    assert run(["<thin\u212a>x"]) == ("<thin\u212a>x", "")  # KELVIN SIGN is not a "k"


# -- where tags count -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Use `<think>` tags to hide reasoning.",
        "```xml\n<think>a</think>\n```",
        "Close the block with </think> and go on.",
        "Answer first. <think>not reasoning</think> stays.",
    ],
)
def test_tags_after_the_answer_started_are_text(text: str) -> None:
    assert run([text]) == (text, "")
    assert run(list(text)) == (text, "")


def test_whitespace_before_the_block_does_not_start_the_answer() -> None:
    assert run(["\n  <think>plan</think>\nAnswer"]) == ("\n  Answer", "plan")


def test_an_opener_inside_a_block_is_reasoning_text() -> None:
    assert run(["<think>a<think>b</think>Answer"]) == ("Answer", "a<think>b")


def test_a_stray_closer_in_the_answer_is_kept() -> None:
    assert run(["Done.</think> ok"]) == ("Done.</think> ok", "")


def test_unclosed_block_stays_reasoning() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("<think>still going") == ("", "still going")
    assert splitter.flush() == ("", "")


# -- held tails -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ["<think>", "<thinking>", "<thought>", "<reasoning>"])
def test_every_proper_prefix_of_an_opener_is_held_before_the_answer(tag: str) -> None:
    for end in range(1, len(tag)):
        splitter = ThinkSplitter()
        assert splitter.feed(tag[:end]) == ("", "") and splitter.held == tag[:end]


@pytest.mark.parametrize("tag", ["</think>", "</reasoning>"])
def test_every_proper_prefix_of_a_closer_is_held_inside(tag: str) -> None:
    for end in range(1, len(tag)):
        splitter = ThinkSplitter()
        splitter.feed("<think>x")
        assert splitter.feed(tag[:end]) == ("", "") and splitter.held == tag[:end]


def test_nothing_is_held_once_the_answer_started() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("Hi <thi") == ("Hi <thi", "") and splitter.held == ""


@pytest.mark.parametrize("text", ["<thinke", "<b", "< ", "</think>", "<x"])
def test_look_alike_released_as_soon_as_it_cannot_become_an_opener(text: str) -> None:
    splitter = ThinkSplitter()
    assert splitter.feed(text) == (text, "") and splitter.held == ""


def test_partial_tag_never_completed_is_text_of_its_class_at_flush() -> None:
    outside = ThinkSplitter()
    assert outside.feed("<thin") == ("", "")
    assert outside.flush() == ("<thin", "")
    inside = ThinkSplitter()
    inside.feed("<think>a</thi")
    assert inside.flush() == ("", "</thi")


# -- whitespace after the block ---------------------------------------------------------------------------------


@pytest.mark.parametrize("gap", ["\n", "\n\n", "\r\n", "\r\n\r\n", " \n\t "])
def test_leading_whitespace_after_the_closer_is_dropped(gap: str) -> None:
    assert run([f"<think>x</think>{gap}Answer"]) == ("Answer", "x")


def test_leading_whitespace_dropped_across_deltas() -> None:
    assert run(["<think>x</think>", "\n", " \n", "\nAnswer"]) == ("Answer", "x")


def test_whitespace_inside_the_answer_is_kept() -> None:
    assert run(["<think>x</think>A", "\n\n", "B"]) == ("A\n\nB", "x")


# -- characters ---------------------------------------------------------------------------------------------------


def test_emoji_next_to_tags() -> None:
    text = "<think>\U0001f914</think>\U0001f44d\U0001f3fd<think>"
    assert run(list(text)) == ("\U0001f44d\U0001f3fd<think>", "\U0001f914")


def test_lone_surrogates_pass_through_in_order() -> None:
    assert run(["<think>\ud83d", "\ude00</think>\ud83d", "\ude00"]) == ("\ud83d\ude00", "\ud83d\ude00")


def test_flush_resets_for_the_next_message() -> None:
    splitter = ThinkSplitter()
    splitter.feed("Answer one.")
    splitter.flush()
    assert splitter.feed("<think>b</think>Two") == ("Two", "b")


def test_split_think_examples() -> None:
    assert split_think("<think>hm</think>\nYes") == ("Yes", "hm", "")
    assert split_think("<think>hm") == ("", "hm", "")
    assert split_think("<thi") == ("", "", "<thi")
    assert split_think("No <think> here") == ("No <think> here", "", "")


# -- <final>: the answer marker (Gemini) ------------------------------------------------------------------------

GEMINI = [  # openclaw #87712, as streamed: an unclosed <think>, then <final>...</final>
    "<think>The user wants a comparison. I've run the battery tests",
    "... Now I will construct the comparison.",
    "<final>Here is the comparison: the X1 lasts longest ",
    "(14 h), and the Zen 7 is the cheapest.</final>",
]
GEMINI_ANSWER = "Here is the comparison: the X1 lasts longest (14 h), and the Zen 7 is the cheapest."
GEMINI_REASONING = "The user wants a comparison. I've run the battery tests... Now I will construct the comparison."


def test_an_unclosed_think_block_ends_at_final() -> None:
    assert run(GEMINI) == (GEMINI_ANSWER, GEMINI_REASONING)
    text = "".join(GEMINI)
    assert run(list(text)) == (GEMINI_ANSWER, GEMINI_REASONING)


def test_closed_think_then_final() -> None:
    assert run(["<think>plan</think>\n\n<final>\nAnswer.\n</final>"]) == ("Answer.\n", "plan")


def test_final_alone_any_ascii_case() -> None:
    assert run(["<FINAL>Answer</Final>"]) == ("Answer", "")


def test_leading_whitespace_inside_final_is_dropped_across_deltas() -> None:
    assert run(["<final>", " \n", "\nAnswer", "\n\nMore</final>"]) == ("Answer\n\nMore", "")


def test_a_final_without_its_closer_shows_its_text() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("<think>x<final>Partial answer</fin") == ("Partial answer", "x")
    assert splitter.held == "</fin" and splitter.in_final
    assert splitter.flush() == ("</fin", "")


def test_text_after_the_final_block_is_not_the_answer() -> None:
    assert run(["<final>Answer</final>\nafterthought"]) == ("Answer", "\nafterthought")
    assert run(["<think>a</think><final>A</final><think>b</think>c"]) == ("A", "abc")


def test_a_second_final_block_follows_the_first() -> None:
    assert run(["<final>One. </final>\n<final>Two.</final>"]) == ("One. Two.", "\n")


def test_an_opened_message_ends_its_block_at_final() -> None:
    assert run(["Let me see.<final>Yes.</final>"], ThinkSplitter(opened=True)) == ("Yes.", "Let me see.")


@pytest.mark.parametrize(
    "text",
    [
        "Wrap your answer in <final> and </final> tags.",
        "Use `<final>` to mark the answer.",
        "```xml\n<final>answer</final>\n```",
        "Done.</final> ok",
        "Answer first. <final>not a block</final> stays.",
    ],
)
def test_final_tags_after_the_answer_started_are_text(text: str) -> None:
    assert run([text]) == (text, "")
    assert run(list(text)) == (text, "")


def test_tags_inside_the_final_block_are_answer_text() -> None:
    assert run(["<final>Use <think> and <final> tags.</final>"]) == ("Use <think> and <final> tags.", "")


@pytest.mark.parametrize("look_alike", ["<final/>", "<final >", "< final>", '<final id="1">', "<finally>"])
def test_final_look_alikes_are_text(look_alike: str) -> None:
    assert run([f"{look_alike}x"]) == (f"{look_alike}x", "")


@pytest.mark.parametrize(("before", "tag"), [("", "<final>"), ("<think>x", "<final>"), ("<final>x", "</final>")])
def test_every_proper_prefix_of_a_final_tag_is_held_where_it_counts(before: str, tag: str) -> None:
    for end in range(1, len(tag)):
        splitter = ThinkSplitter()
        splitter.feed(before)
        assert splitter.feed(tag[:end]) == ("", "") and splitter.held == tag[:end]


def test_after_a_final_block_a_partial_opener_is_held() -> None:
    splitter = ThinkSplitter()
    splitter.feed("<final>A</final>")
    assert splitter.feed("<fi") == ("", "") and splitter.held == "<fi"
    assert splitter.feed("nal>B") == ("B", "")


def test_split_think_with_final() -> None:
    assert split_think("<think>hm<final>Yes</final>") == ("Yes", "hm", "")
    assert split_think("<think>hm<final>Yes</fin") == ("Yes", "hm", "</fin")


# -- properties -------------------------------------------------------------------------------------------------

_ALPHABET = st.sampled_from(
    ["<", "/", ">", "t", "h", "i", "n", "k", "T", "K", "x", " ", "\n", "`", "<think>", "</think>", "<thought>",
     "</reasoning>", "\U0001f600", "a", "f", "l", "<final>", "</final>", "<FINAL>", "</Final>", "<fin", "</fi"]
)  # fmt: skip
texts = st.lists(_ALPHABET, max_size=30).map("".join)


@st.composite
def texts_and_cuts(draw: st.DrawFn) -> tuple[str, list[int]]:
    text = draw(texts)
    points = draw(st.lists(st.integers(0, len(text)), max_size=8))
    return text, points


@settings(max_examples=400)
@given(texts_and_cuts())
def test_output_does_not_depend_on_cut_points(case: tuple[str, list[int]]) -> None:
    text, points = case
    assert run(cut(text, points)) == run([text])


@settings(max_examples=400)
@given(texts)
def test_streamed_output_matches_the_whole_text_oracle(text: str) -> None:
    assert run(list(text)) == reference_split(text)


@settings(max_examples=300)
@given(texts)
def test_opened_streamed_output_matches_the_whole_text_oracle(text: str) -> None:
    assert run(list(text), ThinkSplitter(opened=True)) == reference_split(text, opened=True)


@settings(max_examples=300)
@given(texts)
def test_split_think_equals_one_shot_feed(text: str) -> None:
    splitter = ThinkSplitter()
    answer, reasoning = splitter.feed(text)
    assert split_think(text) == (answer, reasoning, splitter.held)


@settings(max_examples=300)
@given(st.text(alphabet=st.characters(blacklist_characters="<"), max_size=40))
def test_text_without_a_lt_sign_is_answer_unchanged(text: str) -> None:
    assert run([text]) == (text, "")


# -- a block opened by the prompt (DeepSeek-R1 templates) -------------------------------------------------------


def test_an_opened_message_is_reasoning_until_the_closer() -> None:
    splitter = ThinkSplitter(opened=True)
    assert splitter.inside
    assert run(["Let me th", "ink.</th", "ink>\n\nThe answer."], splitter) == ("The answer.", "Let me think.")


def test_an_opened_splitter_starts_each_message_inside_again() -> None:
    splitter = ThinkSplitter(opened=True)
    run(["a</think>One"], splitter)
    assert splitter.inside and run(["b</think>Two"], splitter) == ("Two", "b")


def test_an_opened_message_that_never_closes_is_all_reasoning() -> None:
    assert split_think("no closer here", opened=True) == ("", "no closer here", "")


@settings(max_examples=300)
@given(texts_and_cuts())
def test_opened_output_does_not_depend_on_cut_points(case: tuple[str, list[int]]) -> None:
    text, points = case
    assert run(cut(text, points), ThinkSplitter(opened=True)) == run([text], ThinkSplitter(opened=True))
