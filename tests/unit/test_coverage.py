"""Finalization coverage: the final minus what is shown, whitespace- and fence-insensitive."""

from __future__ import annotations

from core.delivery.coverage import uncovered_tail


def test_everything_shown_leaves_nothing() -> None:
    assert (
        uncovered_tail("Alpha one. Alpha two.\n\nBeta one.", ["Alpha one.", "Alpha two.", "Beta one."]) == ""
    )


def test_only_the_unseen_tail_is_returned() -> None:
    assert uncovered_tail("Checking now.\n\nFound 3 results.", ["Checking now."]) == "Found 3 results."


def test_nothing_shown_returns_all() -> None:
    assert uncovered_tail("Hello", []) == "Hello"


def test_a_fence_open_at_the_cut_is_reopened() -> None:
    final = "See:\n```py\na = 1\nb = 2\n```"
    tail = uncovered_tail(final, ["See:\n```py\na = 1\n```"])
    assert tail == "```py\nb = 2\n```"
