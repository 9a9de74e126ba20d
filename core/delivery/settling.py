"""Settling a create whose outcome is unknown, and deleting a second copy: the reconciler's calls for them
(:class:`Settling`, mixed into :class:`~core.delivery.reconciler.Reconciler`).

A create that timed out, met a 5xx or a reset, or was in flight when the process died is never blindly sent again
(DESIGN §4, §8): the platform is asked (:meth:`core.ports.ChannelAdapter.settle_send`). ``found``: it landed (a
second copy made meanwhile is deleted); ``not_sent``: it is made again; ``needs_bound``: it is made again and settled
below the new message; ``unknown``: a text that still grows or changed goes on in a new message (the old create is
reported: a duplicate is possible), a text that timed out as it is stays uncertain. A media item is never sent again
on ``unknown``: it stays uncertain and the report says so (the person may or may not see it; never twice).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TypeVar

from core.delivery.send_chain import SendChain
from core.delivery.slotbook import SlotBook
from core.delivery.slots import Op, Outcome, Slot, same_render
from core.events import Target
from core.media import MediaItem
from core.ports import ChannelAdapter, SettleOutcome
from core.records.report import PartState, SlotRole

T = TypeVar("T")


def media_of(slot: Slot, text: str) -> MediaItem | None:
    """The media item a create of ``slot`` sends (its text is :meth:`MediaItem.text`), or None for a text part.

    Raises:
        ValueError: a media part whose text is not a media item's (a ledger written by something else).
    """
    return MediaItem.from_text(text) if slot.role is SlotRole.MEDIA else None


class Settling:
    """The settle and stray-delete calls, mixed into the reconciler (which provides the attributes declared here)."""

    book: SlotBook
    _target: Target
    _adapter: ChannelAdapter
    _chain: SendChain
    _exclusive: bool

    async def _call(self, op: Op, fn: Callable[[], Awaitable[T]]) -> T:
        raise NotImplementedError

    def _sent(self, slot: Slot, text: str) -> None:
        raise NotImplementedError

    async def _settle_call(self, op: Op) -> Outcome:
        """Ask the platform what became of the slot's unsettled create (see the module docstring). A bounded
        settle (the part was sent again because the platform needed a later message) keeps one copy: the older."""
        slot, target, adapter = op.slot, self._target, self._adapter
        assert slot.pending is not None
        pending = dataclasses.replace(
            slot.pending,
            known_ids=self._chain.known_ids(),
            exclusive=self._exclusive,
            media=slot.pending.media or media_of(slot, slot.pending.text),  # a pending create restored from the ledger
        )
        settlement = await self._call(op, lambda: adapter.settle_send(target, pending))
        slot.pending = None
        again = slot.message_id  # the part sent again (bounded settle), or None
        if settlement.outcome is SettleOutcome.FOUND and settlement.message_id is not None:
            slot.message_id, slot.stray = settlement.message_id, again  # the first copy stays; a second one goes
            self._chain.note_message(settlement.message_id, newest=False)
            self._sent(slot, pending.text)
            return Outcome.FOUND
        if settlement.outcome is SettleOutcome.NOT_SENT:
            return Outcome.NOT_SENT  # made again (or it was: the bound's message is the only copy)
        if settlement.outcome is SettleOutcome.NEEDS_BOUND and again is None and pending.before_id is None:
            slot.unbounded = pending  # sent again next; settled once the new message gives the bound
            return Outcome.NEEDS_BOUND
        if again is not None:
            self.book.orphans_of(slot, pending.text)  # the part shows; the older create may show too
            return Outcome.UNKNOWN
        slot.uncertain_text = pending.text
        slot.state, slot.error = PartState.UNCERTAIN, "uncertain: the platform cannot tell whether it was stored"
        timed_out, slot.timed_out, slot.restarted = slot.timed_out and not slot.restarted, False, False
        if pending.media is not None:
            return Outcome.UNKNOWN  # a media item is never sent again on a guess: it stays uncertain, reported
        if slot.live is not None or not same_render(slot.desired, pending.text) or not timed_out:
            # Still growing or changed: the text goes on in a new message. Or the create died with the process, or
            # met a 5xx or a reset (a proxy's 502 and a refused connection mostly mean not stored): sent again
            # rather than risk it missing; the report says a duplicate is possible. Only a create that timed out
            # after reaching the platform (which most often stored it) stays as it is, reported uncertain: the case
            # timeout-then-continue.
            self.book.orphan(slot)
        return Outcome.UNKNOWN

    async def _stray_call(self, op: Op) -> None:
        """Delete the second copy of a part whose first copy was found (it was sent again meanwhile)."""
        slot, target, adapter = op.slot, self._target, self._adapter
        assert slot.stray is not None
        stray = slot.stray
        await self._call(op, lambda: adapter.delete_message(target, stray))
        slot.stray = None
