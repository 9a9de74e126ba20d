"""DeepSeek-R1 served without a reasoning parser: the chat template opened ``<think>``, so the model streams its
reasoning, then ``</think>`` with no opener, then the answer (issue 26, item 9; open-webui#9808, DeepSeek-R1#352,
llama.cpp#11861). The reasoning and the tag are never the answer (:func:`core.text.think.opened_by_template`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.events import TextEvent
from core.text.think import OPENED_BY_TEMPLATE_CHARS, opened_by_template
from core.text.visible import VisibleText, visible_final

R1 = "Okay, the user asks for r's.\nThree of them.\n</think>\n\nThere are **3** r's."


def _read(deltas: list[str], visible: VisibleText | None = None) -> tuple[str, str]:
    visible = visible or VisibleText()
    for delta in deltas:
        visible.apply(TextEvent(run="r", text=delta))
    visible.flush(None, 0)
    return visible.answers.text(None, 0), visible.reasoning.text(None, 0)


@pytest.mark.parametrize(
    ("text", "opened"),
    [
        (R1, True),
        ("</think>\n\nYes.", True),  # nothing thought
        ("Hmm.\n</THINK>Yes.", True),  # tags are ASCII case-insensitive
        ("Hmm.\n</thinking>Yes.", True),
        ("Use </think> to close a block.", False),  # mid-line: prose about the tag
        ("<think>a</think>b", False),  # an opener came first: the usual split
        ("a\n<final>b</final>\n</think>", False),  # the first tag is not a closer
        ("x\n</final>", False),
        ("a\n</thinkx>", False),  # a look-alike
        ("x" * OPENED_BY_TEMPLATE_CHARS + "\n</think>y", False),  # past the first 32k characters
    ],
)
def test_the_rule(text: str, opened: bool) -> None:
    assert opened_by_template(text) is opened


@given(st.lists(st.integers(1, len(R1) - 1), max_size=12))
def test_r1_output_cut_anywhere_shows_only_the_answer(cuts: list[int]) -> None:
    bounds = [0, *sorted(set(cuts)), len(R1)]
    deltas = [R1[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if a < b]
    assert _read(deltas) == ("There are **3** r's.", "Okay, the user asks for r's.\nThree of them.\n")


def test_the_setting_still_says_it_from_the_first_character() -> None:
    assert _read([R1], VisibleText(opened=True)) == (
        "There are **3** r's.",
        "Okay, the user asks for r's.\nThree of them.\n",
    )


def test_an_answer_that_mentions_the_tag_is_kept() -> None:
    text = "Close the block with </think> and then\nwrite the answer."
    assert _read([text]) == (text, "")


def test_a_whole_final_text_is_read_by_the_same_rule() -> None:
    assert visible_final(R1) == "There are **3** r's."
    assert visible_final("Use </think> here.") == "Use </think> here."


def test_the_message_is_replaced_at_its_end_and_a_later_message_is_its_own() -> None:
    visible = VisibleText()
    visible.apply(TextEvent(run="r", text=R1))
    (split,) = visible.flush(None, 0)
    assert split.answer is not None and split.answer.kind == "replace"
    assert split.answer.text == "There are **3** r's."
    visible.apply(TextEvent(run="r", text="Plain second message.", message=1))
    visible.flush(None, 1)
    assert visible.answers.messages(None) == [(0, "There are **3** r's."), (1, "Plain second message.")]
    assert visible.flush(None, 0) == []  # read again once only


def test_text_after_a_flush_inside_the_message_is_split_anew() -> None:
    """A media item flushes the message's held text mid-message: what follows is answer, not reasoning again."""
    visible = VisibleText()
    visible.apply(TextEvent(run="r", text=R1))
    visible.flush(None)  # a media item
    visible.apply(TextEvent(run="r", text=" And a picture above."))
    visible.flush(None, 0)
    assert visible.answers.text(None, 0) == "There are **3** r's. And a picture above."
