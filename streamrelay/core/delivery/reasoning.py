"""Shown reasoning (``reasoning = "shown"``): one message with the root's reasoning as it grows.

It is a message of its own (never mixed into the answer), plain text, opened by ``💭``; when the reasoning
outgrows one message it shows the latest part that fits, opened by ``💭 …``. A delta pushes the reasoning's range
(:class:`~core.delivery.slots.TailText`); its text is built only when a call is due, so a delta costs O(1) here.
"""

from __future__ import annotations

from collections.abc import Callable

from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import Slot, TailText
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.report import SlotRole
from streamrelay.core.text.assembler import TextAssembler

MARK = "💭 "
CUT_MARK = "💭 …"


class ReasoningView:
    """The reasoning message of one run.

    Args:
        book: the run's slot book (the reasoning message is one of its slots).
        reasoning: where the reasoning texts are (the root's, source key None).
        measure: the channel's length of a plain text, in its unit.
        max_units: the most a message may measure once rendered, in ``measure``'s unit
            (:attr:`core.policy.ChannelPolicy.rendered_max`).
    """

    def __init__(self, book: SlotBook, reasoning: TextAssembler, measure: Callable[[str], int], max_units: int) -> None:
        self._book = book
        self._reasoning = reasoning
        self._measure = measure
        self._max = max_units
        self._slot: Slot | None = None
        self._source = reasoning.view(None)
        """The root's reasoning, its messages joined as :meth:`text` joins them (read by ranges, not copied)."""

    def changed(self) -> None:
        """The root's reasoning changed: show it (the message is created at the first reasoning). O(1): the book is
        given the reasoning's range, whose text is built only when a call is due, even without a throttle (building
        it costs its length)."""
        if self._slot is None:
            self._slot = self._book.claim_slot(SlotRole.REASONING, "", TextFormat.PLAIN)
        source = self._source
        live = TailText(source, source.length, MARK, CUT_MARK, self._max)
        self._book.set_live(self._slot, live, every_state=False)

    def finish(self) -> None:
        """Freeze the message on the reasoning's last state (before finalization)."""
        if self._slot is not None:
            self._book.set_text(self._slot, self.text())

    def text(self) -> str:
        """What the message shows: ``💭`` and the reasoning, or its latest part that fits. O(the reasoning)."""
        measure = self._measure
        return TailText(self._source, self._source.length, MARK, CUT_MARK, self._max).text(lambda t, _: measure(t))
