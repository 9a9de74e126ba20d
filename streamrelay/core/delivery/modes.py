"""Delivery modes: what the person should see, as slots handed to the reconciler (DESIGN §5).

- ``preview``: one message grows in place; at the limit it is frozen full and a new one continues
  (the chunker with ``min = max = limit`` decides the frozen parts; the live part is its pending text).
- ``block``: chunker then coalescer; every block becomes a message; the final adds only what no block
  shows (whitespace-insensitive coverage).
- ``final``: nothing until the end; then the final split to the limit.
- ``progress``: a status message of true progress; the answer only at the commit point.

Every mode implements :class:`SegmentMode`, and keeps the answer within the run's message limit
(:mod:`core.delivery.cap`): past it, the last allowed part ends with a notice and the rest is not shown. A media item
ends a mode's text (:meth:`SegmentMode.close_segment`) and a new one of the same mode shows the text after it:
:class:`~core.delivery.segments.MediaSegments` (what :func:`make_mode` returns) keeps them in order.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import replace
from typing import Protocol

from streamrelay.core.chunking import Chunker, chunk_text
from streamrelay.core.clock import Clock
from streamrelay.core.delivery.answer import AnswerChange
from streamrelay.core.delivery.cap import within
from streamrelay.core.delivery.coverage import ShownCursor, uncovered_tail
from streamrelay.core.delivery.segments import MediaSegments
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import PendingText, Slot
from streamrelay.core.events import DeliveryMode, Target
from streamrelay.core.media import MediaItem
from streamrelay.core.policy import ChannelPolicy, Splitter
from streamrelay.core.ports import ChannelAdapter, NativeStreaming, TextFormat
from streamrelay.core.records.report import PartState, SlotRole
from streamrelay.core.text.buffer import Pinned, TextBuffer, TextSource
from streamrelay.core.text.coalescer import Block, Chunk, Coalescer

_log = logging.getLogger("streamrelay.run")

CHECK_PENDING = os.environ.get("STREAMRELAY_CHECK_CONTRACTS", "") == "1"
"""With ``STREAMRELAY_CHECK_CONTRACTS=1`` (the tests set it) every live part pushed as a range is checked against the
chunker's pending text (O(its length) per delta: off in service)."""


class ModeHandler(Protocol):
    """What a conversation's delivery does with the root answer, its media and the run's boundaries."""

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

    def on_media(self, media: MediaItem, answer: str) -> Slot:
        """A media item, after the linear root ``answer`` so far: its own message, after that text, before the next
        (:class:`~core.delivery.segments.MediaSegments`); returns its slot."""
        ...

    def share_answer(self, source: TextSource) -> None:
        """The linear answer :meth:`on_answer` tells the changes of, kept by the run (one copy): a growing part is
        pushed as a range of it (:class:`~core.delivery.slots.PendingText`). Call it before the first change;
        without it a mode keeps its own copy of the text it shows while it grows."""
        ...


class SegmentMode(Protocol):
    """One delivery mode over one stretch of answer text (between media items): :class:`ModeHandler`'s calls but
    :meth:`~ModeHandler.on_media`, and the two a media item needs."""

    anchor: Slot | None
    """The media part that ends this mode's text (its later parts are claimed right before it), or None."""

    def on_answer(self, change: AnswerChange, message: int) -> None: ...

    def on_boundary(self, message_end: bool) -> None: ...

    def deadline(self) -> float | None: ...

    def tick(self) -> None: ...

    def show_answer_at_commit(self) -> bool: ...

    def finalize(self, final_text: str) -> None: ...

    def close_segment(self) -> None:
        """A media item follows: what this mode shows of its text so far is fixed in its messages (nothing stays
        live or waiting before the media); only :meth:`finalize` changes it later."""
        ...

    def share_answer(self, source: TextSource | None, offset: int) -> None:
        """The text :meth:`on_answer` gives is ``source`` from ``offset`` on (None: not a range of a kept text, the
        mode keeps its own copy while it needs one): :meth:`ModeHandler.share_answer`. Called before the mode's
        first change, or right before a reset."""
        ...


class _NoTimers:
    """Defaults for modes that neither drain at boundaries nor wait on time nor hold the answer."""

    def share_answer(self, source: TextSource | None, offset: int) -> None:
        return None  # their parts are fixed texts

    def on_boundary(self, message_end: bool) -> None:
        return None

    def deadline(self) -> float | None:
        return None

    def tick(self) -> None:
        return None

    def show_answer_at_commit(self) -> bool:
        return False


class _Parts:
    """The answer's slots of one mode, claimed in order and kept within the run's message limit."""

    def __init__(self, policy: ChannelPolicy, book: SlotBook, splitter: Splitter) -> None:
        self._policy = policy
        self._book = book
        self._split = splitter
        self._slots: list[Slot] = []
        self.anchor: Slot | None = None

    def _allowed(self) -> int | None:
        """How many answer parts this mode may have (its slots and the book's room), or None (no limit)."""
        room = self._book.room(SlotRole.ANSWER)
        return None if room is None else len(self._slots) + room

    def _slot(self, i: int, text: str, cut: bool = False, pin: Pinned | None = None) -> None:
        """Part ``i`` shows ``text`` (claimed when new); ``cut``: it ends the answer cut at the limit; ``pin``: the
        range of the answer ``text`` is exactly (the part keeps it instead of the string once a call showed it)."""
        if i < len(self._slots):
            self._book.set_text(self._slots[i], text)
        else:
            self._slots.append(self._book.claim_slot(SlotRole.ANSWER, text, self._policy.fmt, before=self.anchor))
        self._book.mark_cut(self._slots[i], cut)
        if pin is not None:
            if CHECK_PENDING:
                assert pin.value() == text, (pin.value(), text)
            self._book.pin_text(self._slots[i], text, pin)

    def _lay_out(self, parts: list[str]) -> int:
        """The answer is ``parts`` (within the limit, the last allowed one ending with the notice): the slots show
        them; returns how many parts there are now. Slots past them are left to the caller."""
        parts, cut = within(parts, self._allowed(), self._book.limit, self._split.ending)
        for i, text in enumerate(parts):
            self._slot(i, text, cut and i == len(parts) - 1)
        return len(parts)


class PreviewMode(_Parts, _NoTimers):
    """One message edited in place, rolled over at the limit. At the run's message limit, the last allowed message
    ends with the notice instead of rolling over, and later text is not shown (until a reset or the final)."""

    def __init__(self, policy: ChannelPolicy, book: SlotBook, splitter: Splitter) -> None:
        super().__init__(policy, book, splitter)
        self._params = policy.split_params()
        self._frozen = 0
        self._cut = False
        self._own: TextBuffer | None = TextBuffer()
        """The text the chunker was given, while it is not a range of a shared one (:meth:`share_answer`)."""
        self._source: TextSource = self._own
        self._offset = 0
        """Where the chunker's first character is in ``_source``."""
        self._cuts: list[tuple[int, int] | str] | None = []
        """Every chunk the chunker emitted, in order: its range of the text it was given (``(start, end)``, code points
        from its first character) or, when it is not one range of it (a reopened fence), its text; None once they are
        no longer the chunks of that whole text (appends after a segment's forced drain). :meth:`finalize` reuses
        them when the final is exactly that text instead of chunking the whole answer again."""
        self._fed = 0
        """Characters given to the chunker (its text is ``_source[_offset : _offset + _fed]``)."""
        self._generation = 0
        """``_source``'s generation when the chunker was made (a change means its text is not what it was given)."""
        self._complete = False
        """``_cuts`` end with the forced drain of all of the chunker's text (:func:`core.chunking.chunk_text`'s)."""
        self._hidden = False
        """Only :meth:`finalize` drained the chunker (to complete ``_cuts``): before its next use it is made again
        undrained, as if the final had not touched it."""
        self._chunker = self._new_chunker()
        """It reads the lines it has read in ``_source`` (the run's answer, or ``_own``) instead of keeping them."""

    def share_answer(self, source: TextSource | None, offset: int) -> None:
        if source is None:
            self._own = TextBuffer()
            self._source, self._offset = self._own, 0
        else:
            self._own, self._source, self._offset = None, source, offset
        self._chunker = self._new_chunker()

    def _new_chunker(self) -> Chunker:
        """A chunker for the text from ``_offset`` on, reading its lines in ``_source`` (none kept twice), with no
        chunks noted yet."""
        chunker = Chunker(self._params)
        chunker.share(self._source, self._offset)
        self._cuts, self._fed, self._generation = [], 0, self._source.generation
        self._complete = self._hidden = False
        return chunker

    def _append(self, text: str) -> list[tuple[str, int]]:
        """``text`` given to the chunker (made again undrained first if only the final drained it); its chunks noted."""
        if self._hidden:
            self._revive()
        elif self._complete:
            self._cuts = None  # text after a forced drain: the chunks are no longer those of the whole text
        chunks = self._chunker.append_ranges(text)
        self._fed += len(text)
        self._note(chunks)
        return chunks

    def _note(self, chunks: list[tuple[str, int]]) -> None:
        """Keep where each emitted chunk lies (O(1) each: a range, or the chunk when it is not one)."""
        cuts = self._cuts
        if cuts is not None:
            cuts.extend((start, start + len(chunk)) if start >= 0 else chunk for chunk, start in chunks)

    def _revive(self) -> None:
        """The chunker as it was before :meth:`finalize` drained it: a new one given the same text (the same chunks,
        already shown, and the same pending text: its output does not depend on how the text was split)."""
        text = self._source.slice(self._offset, self._offset + self._fed)
        self._chunker = self._new_chunker()
        self._note(self._chunker.append_ranges(text))
        self._fed = len(text)

    def _reused(self, final_text: str) -> list[str] | None:
        """The final's parts from the chunks the live preview already cut (:meth:`Splitter.split` of ``final_text``,
        without chunking it again) when ``final_text`` is exactly the text the chunker was given, else None. The
        chunker's output does not depend on how its text was split into appends, so its chunks and a forced drain
        are :func:`core.chunking.chunk_text` of the whole. Cost O(len(final_text)) to compare, plus the pending text's
        drain and the parts' fitting; a full split costs a chunking of the whole answer."""
        if (
            self._cuts is None
            or len(final_text) != self._fed
            or self._source.generation != self._generation
            or self._source.slice(self._offset, self._offset + self._fed) != final_text
        ):
            return None
        if not self._complete:
            self._note(self._chunker.drain_ranges(force=True))
            self._complete = self._hidden = True
        assert self._cuts is not None
        chunks = [final_text[cut[0] : cut[1]] if isinstance(cut, tuple) else cut for cut in self._cuts]
        return self._split.fitted(chunks)

    def _fitted(self, frozen: list[tuple[str, int]]) -> Iterator[tuple[str, Pinned | None]]:
        """The frozen chunks split to fit once rendered, each with its range of the answer when it is exactly one
        (a chunk that fits whole and is a range of the text: :meth:`core.chunking.Chunker.append_ranges`)."""
        for chunk, start in frozen:
            fitted = self._split.fit(chunk)
            if len(fitted) == 1 and start >= 0:
                at = self._offset + start
                yield chunk, self._source.pin(at, at + len(chunk))
            else:
                yield from ((text, None) for text in fitted)

    def _show(self, frozen: list[tuple[str, int]]) -> None:
        if frozen:
            allowed = self._allowed()
            for text, pin in self._fitted(frozen):
                if allowed is not None and self._frozen + 2 > allowed:  # no message left for the text after this one
                    assert self._book.limit is not None
                    self._slot(self._frozen, self._split.ending(text, self._book.limit.notice), cut=True)
                    self._cut = True
                    return
                self._slot(self._frozen, text, pin=pin)
                self._frozen += 1
        # The live part is the chunker's pending text, pushed as its range of the text (O(1)) and built only when
        # the reconciler is about to send it: building it costs its length, so doing that per delta would cost the
        # buffer per delta.
        slots, frozen_n = self._slots, self._frozen
        if frozen_n < len(slots):
            slot = slots[frozen_n]
            if slot.cut is not None:
                self._book.mark_cut(slot, False)
        else:
            slot = self._book.claim_slot(SlotRole.ANSWER, "", self._policy.fmt, before=self.anchor)
            slots.append(slot)
        # While the chunker holds more than one message's worth (waiting to see where a protected range or a block
        # ends), the part of it that fits is built now: a live message never grows past the platform's limit.
        head, start, end, widths, units = self._chunker.pending_range()
        if units > self._params.max_chars or start < 0:
            pending = self._chunker.pending
            fitted = self._split.fit(pending) if pending else []
            # none when the pending text is blank (spaces or tabs past a message's length: nothing to show yet);
            # before, that ended the run's delivery (an IndexError)
            live = PendingText(None, head=fitted[0] if fitted else "")
        else:
            at, policy = self._offset, self._policy
            live = PendingText(self._source, at + start, at + end, head, widths, policy.fmt, policy.rendered_max)
            if CHECK_PENDING:
                assert replace(live, max_units=0).text(_len) == self._chunker.pending, (live, self._chunker.pending)
        self._book.set_live(slot, live)

    def on_answer(self, change: AnswerChange, message: int) -> None:
        if not change.reset:  # the common change: text appended
            if not self._cut:  # (cut at the message limit: nothing more shows until a reset or the final)
                if self._own is not None:
                    self._own.append(change.text)
                self._show(self._append(change.text))
            return
        # A reset: ``text`` is the whole new answer.
        self._frozen = 0
        self._cut = False
        if self._own is not None:
            self._own = self._source = TextBuffer()
        self._chunker = self._new_chunker()
        if self._own is not None:
            self._own.append(change.text)
        self._show(self._append(change.text))
        for slot in self._slots[self._frozen + 1 :]:
            self._book.retire(slot)  # parts past the new text go at once, not at the end

    def finalize(self, final_text: str) -> None:
        # The final of a plain delta stream is the text the live preview chunked: its chunks are reused (the parts
        # are the same, byte for byte); any other final (a replacement, a text cut at the message limit, sources
        # after the answer) is split whole.
        parts = self._reused(final_text)
        if parts is None:
            parts = self._split.split(final_text)
        elif CHECK_PENDING:  # the whole text chunked again: the same parts
            assert parts == self._split.fitted(chunk_text(final_text, self._params)), (parts, final_text)
        shown = self._lay_out(parts)
        for slot in self._slots[shown:]:
            self._book.set_text(slot, "")
            self._book.mark_cut(slot, False)

    def close_segment(self) -> None:
        """The pending text is fixed in the live part (split to the limit); a live part left without text is
        skipped, so nothing waits before the media."""
        if not self._cut:
            if self._hidden:
                self._revive()
            drained = self._chunker.drain_ranges(force=True)
            self._note(drained)
            self._complete = True
            for text, pin in self._fitted(drained):
                self._slot(self._frozen, text, pin=pin)
                self._frozen += 1
        for slot in self._slots[self._frozen :]:
            self._book.set_text(slot, "")
            if slot.message_id is None and slot.pending is None:
                slot.state = PartState.SKIPPED


class BlockMode:
    """Block replies: readable messages, each a coalesced block. At the run's message limit, a block with no message
    left ends the answer: the last message is edited to end with the notice (cut to fit it), nothing more is sent."""

    def __init__(self, policy: ChannelPolicy, book: SlotBook, splitter: Splitter, clock: Clock) -> None:
        self._policy = policy
        self._book = book
        self._split = splitter
        self._clock = clock
        self._chunker = Chunker(policy.block_params())
        self._coalescer = Coalescer(policy.coalesce, clock)
        self._slots: list[Slot] = []
        self._texts: list[str] = []
        """Each slot's text without the notice (what coverage compares with the final)."""
        self._message = 0
        self._shown: ShownCursor | None = None
        self._cut = False
        self.anchor: Slot | None = None

    def _emit(self, blocks: list[Block]) -> None:
        if self._shown is None:
            self._adopt()
        assert self._shown is not None
        if self._cut:
            return  # cut at the message limit: nothing more is sent
        for block in blocks:
            text = self._shown.uncovered(block.text)
            if not text.strip():
                continue
            # A block never exceeds the platform limit: split again to it if the joiner pushed it over.
            self._add(self._split.split(text))

    def _add(self, parts: list[str]) -> None:
        """New answer messages; the one with no message left under the limit cuts the answer at the last one."""
        for part in parts:
            if self._cut:
                return
            if self._book.room(SlotRole.ANSWER) == 0:
                self._cut_last()
                return
            self._slots.append(self._book.claim_slot(SlotRole.ANSWER, part, self._policy.fmt, before=self.anchor))
            self._texts.append(part)

    def _cut_last(self) -> None:
        """The answer needs more than the limit allows: its last message ends with the notice."""
        self._cut = True
        limit = self._book.limit
        if self._slots and limit is not None:
            self._book.set_text(self._slots[-1], self._split.ending(self._texts[-1], limit.notice))
            self._book.mark_cut(self._slots[-1], True)

    def _adopt(self) -> None:
        """Keep the answer messages shown before a restart as they are; blocks emitted again skip what they show (a
        notice that cut the answer in the earlier life aside: the replay cuts it again)."""
        restored = []
        limit = self._book.limit
        while (text := self._book.restored_text(SlotRole.ANSWER)) is not None:
            shown = limit.strip(text) if limit is not None else text
            restored.append(shown)
            self._slots.append(self._book.claim_slot(SlotRole.ANSWER, text, self._policy.fmt, before=self.anchor))
            self._texts.append(shown)
        self._shown = ShownCursor(restored)

    def _push(self, chunks: list[str]) -> None:
        for text in chunks:
            self._emit(self._coalescer.push(Chunk(text=text, message=self._message), self._clock.now()))

    def on_answer(self, change: AnswerChange, message: int) -> None:
        if self._cut:
            return  # cut at the message limit: sent blocks cannot be unsent, nothing more is sent before the final
        if change.reset:
            # Sent blocks cannot be unsent: continue with what no block shows yet.
            self._chunker = Chunker(self._policy.block_params())
            self._coalescer = Coalescer(self._policy.coalesce, self._clock)
            text = uncovered_tail(change.text, self._texts)
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

    def close_segment(self) -> None:
        """Every pending block is sent before the media (the coalescer is flushed: media never enters it)."""
        self.on_boundary(message_end=True)

    def deadline(self) -> float | None:
        return self._coalescer.deadline()

    def tick(self) -> None:
        self._emit(self._coalescer.poll(self._clock.now()))

    def show_answer_at_commit(self) -> bool:
        return False

    def share_answer(self, source: TextSource | None, offset: int) -> None:
        return None  # its parts are fixed texts

    def finalize(self, final_text: str) -> None:
        # What was not sent yet is dropped, not flushed: the final is authoritative, so only what no
        # block shows of it goes out (an unsent draft never does).
        self._chunker = Chunker(self._policy.block_params())
        self._coalescer = Coalescer(self._policy.coalesce, self._clock)
        if self._shown is None:
            self._adopt()
        tail = uncovered_tail(final_text, self._texts)
        if self._cut and not tail.strip():  # the blocks shown hold the whole final after all: no notice
            self._cut = False
            self._book.set_text(self._slots[-1], self._texts[-1])
            self._book.mark_cut(self._slots[-1], False)
        self._add(self._split.split(tail))


class FinalMode(_Parts, _NoTimers):
    """One answer at the end, split to the limit (and within the run's message limit)."""

    def on_answer(self, change: AnswerChange, message: int) -> None:
        return None

    def finalize(self, final_text: str) -> None:
        # A second finalize (an ``end`` whose final_text differs from the committed text) edits the parts
        # already shown to the new text rather than sending it again.
        shown = self._lay_out(self._split.split(final_text))
        for slot in self._slots[shown:]:
            self._book.retire(slot)
            self._book.mark_cut(slot, False)

    def close_segment(self) -> None:
        """The text before the media shows at the end: an empty part holds its place (and holds the media back:
        the planner sends nothing after a part that waits for text) until :meth:`finalize` gives it text."""
        if not self._slots:
            self._slot(0, "")


class ProgressMode(FinalMode):
    """Progress in a status message; the answer only at the commit point."""

    def show_answer_at_commit(self) -> bool:
        return True


def make_mode(policy: ChannelPolicy, book: SlotBook, splitter: Splitter, clock: Clock) -> ModeHandler:
    """The handler of ``policy.delivery`` (``native`` shows as ``preview`` where the platform does not stream), in
    stretches of text between media items (:class:`~core.delivery.segments.MediaSegments`)."""
    return MediaSegments(lambda: segment_mode(policy, book, splitter, clock), book, policy.fmt)


def segment_mode(policy: ChannelPolicy, book: SlotBook, splitter: Splitter, clock: Clock) -> SegmentMode:
    """One mode of ``policy.delivery`` over one stretch of text (``native`` streams through ``preview``)."""
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


def _len(text: str, fmt: TextFormat) -> int:
    return len(text)
