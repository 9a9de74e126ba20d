"""Media between text: a conversation's answer in stretches (segments), one delivery mode each, a media part after
each stretch but the last (shared/DESIGN.md §3, §4: media is its own message, never merged into text buffers).

    text ─▶ mode 1 ─▶ parts ── media 1 ── text ─▶ mode 2 ─▶ parts ── media 2 ── text ─▶ mode 3 ─▶ ...

At a media item the current mode ends its text (:meth:`~core.delivery.modes.SegmentMode.close_segment`: the
coalescer is flushed, a preview's live part fixed, a final's place held), the media part is claimed after what it
shows, and a new mode of the same kind takes the text after it: text after a media item always starts a new message.
A mode's later parts (at finalization) are claimed right before the media part that ends its text (its ``anchor``),
so the order the person sees is the order of the events, in every delivery mode.

Finalization cuts the final text where each stretch's text stops covering it (whitespace-insensitive,
:func:`~core.delivery.coverage.split_covered`) and gives every mode its own piece: nothing is shown twice, and a
media item never moves. A text reset (a replace) goes to the current stretch, minus what the stretches before the
last media show. After the commit point (the answer is final) a media item is simply the next message.

Pure: no call, no clock. With no media a conversation has one mode and this class only passes calls through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from streamrelay.core.delivery.answer import AnswerChange
from streamrelay.core.delivery.coverage import split_covered, uncovered_tail
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import Slot
from streamrelay.core.media import MediaItem
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.report import SlotRole
from streamrelay.core.text.buffer import TextSource

if TYPE_CHECKING:
    from streamrelay.core.delivery.modes import SegmentMode


class MediaSegments:
    """A :class:`~core.delivery.modes.ModeHandler`: the answer's stretches between media items (module docstring).

    Args:
        make: a new mode of the channel's delivery mode, for one stretch.
        book: the conversation's slot book (media parts are claimed in it, role ``media``).
        fmt: how a media caption is rendered (the channel's text format).
    """

    __slots__ = ("_book", "_closed", "_final", "_fmt", "_make", "_mode", "_modes", "_offset", "_source", "media")

    def __init__(self, make: Callable[[], SegmentMode], book: SlotBook, fmt: TextFormat) -> None:
        self._make = make
        self._book = book
        self._fmt = fmt
        self._mode = make()
        """The current stretch's mode (the last of :attr:`_modes`)."""
        self._modes: list[SegmentMode] = [self._mode]
        self._closed: list[str] = []
        """The linear answer's text of each stretch that a media item ended, in order."""
        self._offset = 0
        """Where the current stretch starts in the linear answer."""
        self._final = False
        self._source: TextSource | None = None
        """The linear answer, kept by the run (:meth:`share_answer`), or None."""
        self.media: list[Slot] = []
        """The media parts, in order."""

    def share_answer(self, source: TextSource) -> None:
        """The linear answer, kept by the run: each stretch's mode refers to its range of it
        (:meth:`~core.delivery.modes.SegmentMode.share_answer`)."""
        self._source = source
        self._mode.share_answer(source, self._offset)

    def on_media(self, media: MediaItem, answer: str) -> Slot:
        """``media`` after the linear root ``answer`` so far: the current stretch ends (unless the answer is final
        already), the media part is claimed after it and a new stretch begins. Returns the media part (one in no
        book when the run's message limit is spent: :attr:`Slot.over_limit`)."""
        if not self._final:
            self._mode.close_segment()
        slot = self._book.claim_slot(SlotRole.MEDIA, media.text(), self._fmt)
        self.media.append(slot)
        if slot.over_limit:  # the last media item shown says the rest were cut: the report is partial
            kept = next((m for m in reversed(self.media) if not m.over_limit), None)
            if kept is not None:
                self._book.mark_cut(kept, True, "the answer's media")
        if self._final or slot.over_limit:
            return slot
        self._closed.append(answer[self._offset :])
        self._offset = len(answer)
        self._mode.anchor = slot
        self._mode = self._make()
        self._modes.append(self._mode)
        if self._source is not None:
            self._mode.share_answer(self._source, self._offset)
        return slot

    def on_answer(self, change: AnswerChange, message: int) -> None:
        if change.reset and self._closed:
            tail = uncovered_tail(change.text, self._closed)
            self._offset = max(0, len(change.text) - len(tail))
            if self._source is not None:  # a tail that reopens a fence is no range of the answer: the mode copies it
                suffix = change.text.endswith(tail) and self._source.length == len(change.text)
                self._mode.share_answer(self._source if suffix else None, self._offset)
            change = AnswerChange(tail, reset=True)
        self._mode.on_answer(change, message)

    def on_boundary(self, message_end: bool) -> None:
        self._mode.on_boundary(message_end)

    def deadline(self) -> float | None:
        return self._mode.deadline()

    def tick(self) -> None:
        self._mode.tick()

    def show_answer_at_commit(self) -> bool:
        return self._mode.show_answer_at_commit()

    def finalize(self, final_text: str) -> None:
        """Each stretch's mode shows its piece of ``final_text`` (module docstring)."""
        self._final = True
        rest = final_text
        for mode, shown in zip(self._modes, self._closed, strict=False):
            head, rest = split_covered(rest, shown)
            mode.finalize(head)
        self._mode.finalize(rest)
