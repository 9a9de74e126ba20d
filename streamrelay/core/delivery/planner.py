"""The planner: from the parts' desired texts and what the platform acknowledged, the next call to make.

It decides, never calls: :meth:`Planner.next_op` reads the slots and returns one :class:`~core.delivery.slots.Op` or
None, with the earliest time its part's retry backoff and the preview throttle let it start: part of the delivery
machine (:mod:`core.delivery.machine`), which makes it a call value; the rate budgets are asked once, when it is due
(:meth:`core.delivery.send_chain.SendChain.grant`); the executor makes the call.

Order rules (DESIGN §4, §5): parts are made strictly in slot order; a part that has no text yet and no message
holds the answer parts after it, but not a status or reasoning message; an answer or a notice goes before an
edit of a status or reasoning message, so progress never delays the answer when the budget is short. A create
whose outcome is unknown is settled first (:data:`OpKind.SETTLE`) and holds the parts after it. A frozen part
keeps what it shows; the part that continues it gets the rest of its text.
"""

from __future__ import annotations

from streamrelay.core.delivery.coverage import open_fence_before, uncovered_tail
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import SIDE_ROLES, Op, OpKind, Slot
from streamrelay.core.records.report import PartState


def continuation(desired: str, frozen: str) -> str:
    """What a part that continues a frozen message shows: ``desired`` minus the ``frozen`` text it begins with
    (whitespace-insensitive when it no longer begins with it exactly); a code fence open where the frozen message
    stops is opened again with its opener line, as the chunker does at a cut (DESIGN section 4). O(len(frozen))."""
    if desired.startswith(frozen):
        tail = desired[len(frozen) :].lstrip()
        opener = open_fence_before(desired, len(frozen)) if tail else None
        return f"{opener}\n{tail}" if opener is not None else tail
    return uncovered_tail(desired, [frozen]).lstrip()


class Planner:
    """Decides the next call for one conversation's slot book.

    Args:
        book: the slot book (its ``throttle_s``: minimum seconds between calls before finalization; its
            ``finalizing``). The planner reads live texts (:meth:`SlotBook.refresh`) and gives a frozen part's
            continuation its text, nothing else.
    """

    __slots__ = ("_book", "_refresh", "last_call_at", "native", "stream_refresh_s")

    def __init__(self, book: SlotBook) -> None:
        self._book = book
        self._refresh = book.refresh
        self.last_call_at: float | None = None
        self.stream_refresh_s: float | None = None
        self.native = False

    @property
    def finalizing(self) -> bool:
        return self._book.finalizing

    def next_op(self) -> Op | None:
        """The next call: the first part (in order) that needs one, with the side-message rule above."""
        slots = self._book.slots
        for slot in slots:
            if slot.cont is not None:
                self._refresh(slot)
                self._book.assign(slot.cont, continuation(slot.desired, slot.shown or ""))
        op = self._first_op(slots, 0)
        if op is not None and op.kind is OpKind.EDIT and op.slot.role in SIDE_ROLES:
            later = self._first_op(slots, slots.index(op.slot) + 1)
            if later is not None and later.slot.role not in SIDE_ROLES:
                return later
        return op

    def _first_op(self, slots: list[Slot], start: int) -> Op | None:
        waiting = False
        for slot in slots[start:]:
            if waiting and slot.role not in SIDE_ROLES:
                continue
            op, blocked = self._slot_op(slot)
            if op is not None:
                return op
            if blocked:
                if slot.message_id is not None or slot.has_text() or slot.pending is not None:
                    return None
                waiting = True
        return None

    def _slot_op(self, slot: Slot) -> tuple[Op | None, bool]:
        """The call ``slot`` needs now, or ``(None, blocked)``: ``blocked`` when later parts must wait for it."""
        if slot.stray is not None:
            return self._timed(slot, OpKind.DELETE_STRAY, ""), True
        if slot.pending is not None:
            return self._timed(slot, OpKind.SETTLE, slot.pending.text), True
        if (thread := self._thread_op(slot)) is not None:
            return thread, False
        if slot.frozen:
            slot.state = PartState.ACKED  # it keeps what it shows; its continuation comes next
            return None, False
        if slot.stale and (slot.message_id is None or self.finalizing):
            self._refresh(slot)
        open_state = slot.state not in (PartState.UNCERTAIN, PartState.FAILED, PartState.SKIPPED)
        if slot.stale and open_state:
            return self._timed(slot, self._update_kind(slot), ""), True  # the text is read when the call is due
        if slot.streaming and open_state and (op := self._stream_op(slot)) is not None:
            return op, True
        if slot.verify and self.finalizing and slot.message_id is not None and slot.has_text():
            return Op(slot, OpKind.EDIT, slot.desired, slot.retry_at), True
        if slot.settled():
            return None, self._mark_settled(slot)
        if not slot.has_text():
            if slot.message_id is not None and (self.finalizing or slot.retired):
                return Op(slot, OpKind.DELETE, "", 0.0), True
            return None, slot.message_id is not None  # an emptied preview waits for text
        return self._timed(slot, self._update_kind(slot), None), True

    def _stream_op(self, slot: Slot) -> Op | None:
        """The call an open native stream needs now: cancel (emptied), finish (frozen or the end), refresh."""
        if not slot.has_text():
            return Op(slot, OpKind.STREAM_CANCEL, "", 0.0)
        if self.finalizing or slot.live is None:  # frozen, or the end: persist the streamed part
            return self._timed(slot, OpKind.STREAM_FINISH, None)
        refresh_s = self.stream_refresh_s
        if refresh_s and not slot.stale and slot.shows_desired():  # keep a lapsing stream alive
            return Op(slot, OpKind.STREAM_REFRESH, slot.desired, slot.streamed_at + refresh_s)
        return None

    @staticmethod
    def _thread_op(slot: Slot) -> Op | None:
        """A thread wanted under ``slot``'s message (:attr:`Slot.thread_title`), now that the message is shown."""
        wanted = slot.thread_title is not None and slot.thread is None and slot.thread_error is None
        if wanted and slot.message_id is not None and not slot.streaming:
            return Op(slot, OpKind.OPEN_THREAD, slot.thread_title or "", 0.0)
        return None

    def _mark_settled(self, slot: Slot) -> bool:
        """Mark a settled pending slot acknowledged or skipped; True when later parts must wait for it."""
        if slot.state is PartState.PENDING:
            if slot.message_id is not None:
                slot.state = PartState.ACKED
            elif not self.finalizing:
                return True  # emptied before it was ever sent: later parts wait for it (order)
            else:
                slot.state = PartState.SKIPPED  # nothing to show, nothing shown
        if slot.unbounded is not None and slot.message_id is None:
            self._stranded(slot)
        return False

    def _stranded(self, slot: Slot) -> None:
        """``slot`` ended without a message (skipped, failed, uncertain) while an unknown stream start of it waited
        for one to be settled below: the start's first words are reported, a part of its own that may show."""
        start = slot.unbounded
        if start is not None and start.stream_start:
            self._book.orphans_of(slot, start.text)
            slot.unbounded = None

    def _update_kind(self, slot: Slot) -> OpKind:
        """The call that brings ``slot`` to its desired text: open or grow a stream, send or edit."""
        if slot.message_id is None:
            live = slot.native and self.native and not self.finalizing and slot.live is not None
            return OpKind.STREAM_START if live else OpKind.SEND
        return OpKind.STREAM_UPDATE if slot.streaming else OpKind.EDIT

    def _timed(self, slot: Slot, kind: OpKind, text: str | None) -> Op:
        """The op for ``slot`` with the earliest time its retry backoff and the preview throttle let it start (the
        rate budgets and 429 pauses are asked when it is due: :meth:`SendChain.grant`)."""
        if text is None:
            text = slot.history[0] if slot.history else slot.desired
        not_before = slot.retry_at
        if not self.finalizing and self.last_call_at is not None:
            not_before = max(not_before, self.last_call_at + self._book.throttle_s)
        return Op(slot, kind, text, not_before)
