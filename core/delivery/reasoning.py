"""Shown reasoning (``reasoning = "shown"``): one message with the root's reasoning as it grows.

It is a message of its own (never mixed into the answer), plain text, opened by ``💭``; when the reasoning
outgrows one message it shows the latest part that fits, opened by ``💭 …``. The text is read only when a
call is due (the reconciler's live slot), so a delta costs nothing here.
"""

from __future__ import annotations

from collections.abc import Callable

from core.delivery.slotbook import SlotBook
from core.delivery.slots import Slot
from core.ports import TextFormat
from core.records.report import SlotRole
from core.text.assembler import TextAssembler

MARK = "💭 "
CUT_MARK = "💭 …"


class ReasoningView:
    """The reasoning message of one run.

    Args:
        book: the run's slot book (the reasoning message is one of its slots).
        reasoning: where the reasoning texts are (the root's, source key None).
        measure: the channel's length of a plain text, in its unit.
        max_units: the channel's limit per message.
    """

    def __init__(self, book: SlotBook, reasoning: TextAssembler, measure: Callable[[str], int], max_units: int) -> None:
        self._book = book
        self._reasoning = reasoning
        self._measure = measure
        self._max = max_units
        self._slot: Slot | None = None

    def changed(self) -> None:
        """The root's reasoning changed: show it (the message is created at the first reasoning)."""
        if self._slot is None:
            self._slot = self._book.claim_slot(SlotRole.REASONING, "", TextFormat.PLAIN)
        # Read only when a call is due, even without a throttle: building the text costs its length.
        self._book.set_live(self._slot, self.text, every_state=False)

    def finish(self) -> None:
        """Freeze the message on the reasoning's last state (before finalization)."""
        if self._slot is not None:
            self._book.set_text(self._slot, self.text())

    def text(self) -> str:
        """What the message shows: ``💭`` and the reasoning, or its latest part that fits."""
        reasoning = self._reasoning.answer(None).strip()
        if not reasoning:
            return ""
        text = MARK + reasoning
        if self._measure(text) <= self._max:
            return text
        keep = min(len(reasoning), self._max)
        while keep > 0:
            text = CUT_MARK + reasoning[len(reasoning) - keep :].lstrip()
            if self._measure(text) <= self._max:
                return text
            keep = keep * 9 // 10
        return CUT_MARK
