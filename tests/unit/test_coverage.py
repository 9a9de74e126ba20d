"""Finalization coverage: the final minus what is shown, whitespace- and fence-insensitive."""

from __future__ import annotations

from streamrelay.core.delivery.coverage import uncovered_tail


def test_everything_shown_leaves_nothing() -> None:
    assert uncovered_tail("Alpha one. Alpha two.\n\nBeta one.", ["Alpha one.", "Alpha two.", "Beta one."]) == ""


def test_only_the_unseen_tail_is_returned() -> None:
    assert uncovered_tail("Checking now.\n\nFound 3 results.", ["Checking now."]) == "Found 3 results."


def test_nothing_shown_returns_all() -> None:
    assert uncovered_tail("Hello", []) == "Hello"


def test_a_fence_open_at_the_cut_is_reopened() -> None:
    final = "See:\n```py\na = 1\nb = 2\n```"
    tail = uncovered_tail(final, ["See:\n```py\na = 1\n```"])
    assert tail == "```py\nb = 2\n```"


def test_a_final_that_is_only_the_last_message_is_covered_by_its_blocks() -> None:
    assert uncovered_tail("The answer is 42.", ["Let me check.", "The answer is 42."]) == ""


def test_a_final_that_diverged_from_the_blocks_is_shown_whole() -> None:
    final = "The answer is 14 days.\n\nMore detail follows here."
    assert uncovered_tail(final, ["The answer is 4 days.", "More detail follows here."]) == final


def test_a_final_shorter_than_what_is_shown_adds_nothing() -> None:
    assert uncovered_tail("A. B.", ["A.", "B.", "C."]) == ""


def test_the_unseen_tail_after_a_preamble_is_returned() -> None:
    assert uncovered_tail("Step one. Step two.", ["Thinking...", "Step one."]) == "Step two."


def test_a_line_inside_a_fence_that_looks_like_an_opener_is_content_and_is_not_lost() -> None:
    # CommonMark: a closing fence has no info string, so the second "```py" is code inside the fence.
    final = "Words here.\n```py\n\n```py\n"
    assert uncovered_tail(final, ["Words here."]) == "```py\n```py\n"
