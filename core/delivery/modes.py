"""Delivery modes: what the person should see, as slots handed to the reconciler (DESIGN §5).

- ``preview``: one message grows in place; at the limit it is frozen full and a new one continues
  (the chunker with ``min = max = limit`` decides the frozen parts; the live part is its pending text).
- ``block``: chunker then coalescer; every block becomes a message; the final adds only what no block
  shows (whitespace-insensitive coverage).
- ``final``: nothing until the end; then the final split to the limit.
- ``progress``: a status message of true progress; the answer only at the commit point.

Every mode implements :class:`ModeHandler`.
"""

from __future__ import annotations

import logging
from typing import Protocol

from core.chunker import Chunker
from core.clock import Clock
from core.coalescer import Block, Chunk, Coalescer
from core.delivery.answer import AnswerChange
from core.delivery.coverage import ShownCursor, uncovered_tail
from core.delivery.slotbook import SlotBook
from core.delivery.slots import Slot
from core.events import DeliveryMode, Target
from core.policy import ChannelPolicy, Splitter
from core.ports import ChannelAdapter, NativeStreaming
from core.report import SlotRole

_log = logging.getLogger("streamrelay.run")


class ModeHandler(Protocol):
    """What a delivery mode does with the root answer and the run's boundaries."""

    def on_answer(self, change: AnswerChange, message: int) -> None:
        """The linear root answer grew (or was reset)."""
        ...

    def on_boundary(self, message_end: bool) -> None:
        """A text block (``message_end`` False) or an assistant message ended: drain what is pending."""
        ...

    def deadline(self) -> float | None:
        """When :meth:`tick` should next be called (clock seconds), or None."""
        ...

    def tick(self) -> None:
        """Time passed (e.g. the coalescer's idle gap)."""
        ...

    def show_answer_at_commit(self) -> bool:
        """True when the answer is held back until the commit point."""
        ...

    def finalize(self, final_text: str) -> None:
        """The committed final answer: make the channel show exactly it, never twice."""
        ...


class _NoTimers:
    """Defaults for modes that neither drain at boundaries nor wait on time nor hold the answer."""

    def on_boundary(self, message_end: bool) -> None:
        return None

    def deadline(self) -> float | None:
        return None

    def tick(self) -> None:
        return None

    def show_answer_at_commit(self) -> bool:
        return False


class PreviewMode(_NoTimers):
    """One message edited in place, rolled over at the limit."""

    def __init__(self, policy: ChannelPolicy, book: SlotBook, splitter: Splitter) -> None:
        self._policy = policy
        self._book = book
        self._split = splitter
        self._chunker = Chunker(policy.split_params())
        self._slots: list[Slot] = []
        self._frozen = 0

    def _show(self, frozen: list[str]) -> None:
        for text in (fitted for chunk in frozen for fitted in self._split.fit(chunk)):
            self._slot(self._frozen, text)
            self._frozen += 1
        # The live part is the chunker's pending text, read only when the reconciler is about to send
        # it: building it costs its length, so doing that per delta would cost the buffer per delta.
        if self._frozen < len(self._slots):
            self._book.set_live(self._slots[self._frozen], self._pending)
        else:
            slot = self._book.claim_slot(SlotRole.ANSWER, "", self._policy.fmt)
            self._slots.append(slot)
            self._book.set_live(slot, self._pending)

    def _pending(self) -> str:
        return self._chunker.pending

    def _slot(self, i: int, text: str) -> None:
        if i < len(self._slots):
            self._book.set_text(self._slots[i], text)
        else:
            self._slots.append(self._book.claim_slot(SlotRole.ANSWER, text, self._policy.fmt))

    def on_answer(self, change: AnswerChange, message: int) -> None:
        if change.reset:
            self._chunker = Chunker(self._policy.split_params())
            self._frozen = 0
        self._show(self._chunker.append(change.text))
        if change.reset:
            for slot in self._slots[self._frozen + 1 :]:
                self._book.retire(slot)  # parts past the new text go at once, not at the end

    def finalize(self, final_text: str) -> None:
        parts = self._split.split(final_text)
        for i, text in enumerate(parts):
            self._slot(i, text)
        for slot in self._slots[len(parts) :]:
            self._book.set_text(slot, "")


class BlockMode:
    """Block replies: readable messages, each a coalesced block."""

    def __init__(self, policy: ChannelPolicy, book: SlotBook, splitter: Splitter, clock: Clock) -> None:
        self._policy = policy
        self._book = book
        self._split = splitter
        self._clock = clock
        self._chunker = Chunker(policy.block_params())
        self._coalescer = Coalescer(policy.coalesce, clock)
        self._slots: list[Slot] = []
        self._message = 0
        self._shown: ShownCursor | None = None

    def _emit(self, blocks: list[Block]) -> None:
        if self._shown is None:
            self._adopt()
        assert self._shown is not None
        for block in blocks:
            text = self._shown.uncovered(block.text)
            if not text.strip():
                continue
            # A block never exceeds the platform limit: split again to it if the joiner pushed it over.
            for part in self._split.split(text):
                self._slots.append(self._book.claim_slot(SlotRole.ANSWER, part, self._policy.fmt))

    def _adopt(self) -> None:
        """Keep the answer messages shown before a restart as they are; blocks emitted again skip what they show."""
        restored = []
        while (text := self._book.restored_text(SlotRole.ANSWER)) is not None:
            restored.append(text)
            self._slots.append(self._book.claim_slot(SlotRole.ANSWER, text, self._policy.fmt))
        self._shown = ShownCursor(restored)

    def _push(self, chunks: list[str]) -> None:
        for text in chunks:
            self._emit(self._coalescer.push(Chunk(text=text, message=self._message), self._clock.now()))

    def on_answer(self, change: AnswerChange, message: int) -> None:
        if change.reset:
            # Sent blocks cannot be unsent: continue with what no block shows yet.
            self._chunker = Chunker(self._policy.block_params())
            self._coalescer = Coalescer(self._policy.coalesce, self._clock)
            text = uncovered_tail(change.text, [s.desired for s in self._slots])
        else:
            text = change.text
        self._message = message
        self._push(self._chunker.append(text))

    def on_boundary(self, message_end: bool) -> None:
        # A text block's end drains the chunker; the coalescer still joins small blocks (providers end a
        # block every few words around citations). A message's end sends what is pending.
        self._push(self._chunker.drain(force=True))
        if message_end:
            self._emit(self._coalescer.flush())

    def deadline(self) -> float | None:
        return self._coalescer.deadline()

    def tick(self) -> None:
        self._emit(self._coalescer.poll(self._clock.now()))

    def show_answer_at_commit(self) -> bool:
        return False

    def finalize(self, final_text: str) -> None:
        # What was not sent yet is dropped, not flushed: the final is authoritative, so only what no
        # block shows of it goes out (an unsent draft never does).
        self._chunker = Chunker(self._policy.block_params())
        self._coalescer = Coalescer(self._policy.coalesce, self._clock)
        if self._shown is None:
            self._adopt()
        tail = uncovered_tail(final_text, [s.desired for s in self._slots])
        for part in self._split.split(tail):
            self._slots.append(self._book.claim_slot(SlotRole.ANSWER, part, self._policy.fmt))


class FinalMode(_NoTimers):
    """One answer at the end, split to the limit."""

    def __init__(self, policy: ChannelPolicy, book: SlotBook, splitter: Splitter) -> None:
        self._policy = policy
        self._book = book
        self._split = splitter
        self._slots: list[Slot] = []

    def on_answer(self, change: AnswerChange, message: int) -> None:
        return None

    def finalize(self, final_text: str) -> None:
        # A second finalize (an ``end`` whose final_text differs from the committed text) edits the parts
        # already shown to the new text rather than sending it again.
        parts = self._split.split(final_text)
        for i, part in enumerate(parts):
            if i < len(self._slots):
                self._book.set_text(self._slots[i], part)
            else:
                self._slots.append(self._book.claim_slot(SlotRole.ANSWER, part, self._policy.fmt))
        for slot in self._slots[len(parts) :]:
            self._book.retire(slot)


class ProgressMode(FinalMode):
    """Progress in a status message; the answer only at the commit point."""

    def show_answer_at_commit(self) -> bool:
        return True


def make_mode(policy: ChannelPolicy, book: SlotBook, splitter: Splitter, clock: Clock) -> ModeHandler:
    """The handler of ``policy.delivery``. ``native`` falls back to ``preview`` until it exists."""
    if policy.delivery is DeliveryMode.BLOCK:
        return BlockMode(policy, book, splitter, clock)
    if policy.delivery is DeliveryMode.FINAL:
        return FinalMode(policy, book, splitter)
    if policy.delivery is DeliveryMode.PROGRESS:
        return ProgressMode(policy, book, splitter)
    return PreviewMode(policy, book, splitter)


def native_streaming(policy: ChannelPolicy, adapter: ChannelAdapter, target: Target) -> NativeStreaming | None:
    """The adapter's native streaming when the channel asks for it and the platform allows it for ``target``
    (Slack: a thread; Telegram: a private chat); else None, and the run streams as ``preview``."""
    if policy.delivery is not DeliveryMode.NATIVE or not isinstance(adapter, NativeStreaming):
        return None
    refusal = adapter.native_refusal(target)
    if refusal is not None:
        _log.info("native streaming refused for this target (%s): streaming as preview", refusal)
        return None
    return adapter
