"""A growing part as the run stage pushes it (issue 23, item 1): a value holding a range of the run's one copy of the
text, built when its call is due, fitted to the platform's rendered limit there."""

from __future__ import annotations

from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import PendingText, TailText
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.report import SlotRole
from streamrelay.core.text.buffer import TextBuffer


def escaped(text: str, fmt: TextFormat) -> int:
    """A platform whose plain rendering escapes ``*`` (as Discord's does): each one counts twice."""
    return len(text) + text.count("*")


def test_a_pushed_range_is_built_from_the_shared_text_when_read() -> None:
    shared = TextBuffer("Intro\n\n")
    live = PendingText(shared, 7, 7)
    shared.append("Body grows")
    assert PendingText(shared, 7, shared.length, head="```py\n").text(escaped) == "```py\nBody grows"
    assert live.text(escaped) == ""  # a value: the range it was pushed with, whatever came after


def test_a_pending_text_that_its_rendering_makes_too_long_shows_the_start_that_fits_cut_at_a_space() -> None:
    text = "a*b " * 10  # 40 characters, 50 once rendered
    live = PendingText(TextBuffer(text), 0, len(text), max_units=30)
    shown = live.text(escaped)
    assert escaped(shown, TextFormat.PLAIN) <= 30 and text.startswith(shown) and not shown.endswith(" ")
    assert shown == "a*b a*b a*b a*b a*b a*b"
    assert PendingText(TextBuffer(text), 0, len(text), max_units=50).text(escaped) == text


def test_the_reasoning_message_shows_its_latest_part_that_fits() -> None:
    reasoning = TextBuffer("  first thoughts, then more thoughts  ")
    assert (
        TailText(reasoning, reasoning.length, "💭 ", "💭 …", 100).text(escaped)
        == "💭 first thoughts, then more thoughts"
    )
    cut = TailText(reasoning, reasoning.length, "💭 ", "💭 …", 16).text(escaped)
    assert cut.startswith("💭 …") and "more thoughts".endswith(cut[3:].strip()[-6:]) and len(cut) <= 16


def test_the_book_builds_a_live_part_only_when_its_call_is_due() -> None:
    book = SlotBook("r", throttle_s=1.0, native=False, measure=escaped)
    slot = book.claim_slot(SlotRole.ANSWER)
    shared = TextBuffer("Hello")
    book.set_live(slot, PendingText(shared, 0, shared.length))
    assert slot.desired == "" and slot.stale  # pushed, not built
    shared.append(" world")
    book.set_live(slot, PendingText(shared, 0, shared.length))
    book.refresh(slot)
    assert slot.desired == "Hello world" and not slot.stale
