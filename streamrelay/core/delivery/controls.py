"""Controls on messages (the Stop button today; the buttons that come next): which message should carry a control
and which may, as part of the delivery machine's state. Sans-I/O.

The run's Stop control (:mod:`core.run.stop_controls`) goes on the conversation's newest live message, the one a
person is looking at (an ``answer`` or ``status`` part acknowledged as a message; an open native stream carries
none). A move is two calls, put on the new carrier first, then taken off the previous one, each a
:class:`~core.delivery.calls.SetControl` the machine hands out like any call (:meth:`ControlPlan.next_op`), right
after the create that made the new carrier, before the next text call. When the run ends, after its final text is
delivered, the control is taken off every message that carries it or may (a move whose outcome is unknown, the two
newest live messages after a restart: the process may have died between a move's two calls), up to
:data:`CLEAR_ATTEMPTS` times each through 429s and outages; one that cannot be taken off is reported
("the Stop control may still show on message …"), never silently kept.
"""

from __future__ import annotations

from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import Op, OpKind, Outcome, Slot
from streamrelay.core.errors import DeliveryError, RateLimitedError, TransientDeliveryError
from streamrelay.core.ports import StopControl
from streamrelay.core.records.report import SlotRole

CLEAR_ATTEMPTS = 3
"""Tries to take a control off a message at the end (a 429 or an outage in between waits in the send chain)."""

LIVE_ROLES = frozenset({SlotRole.ANSWER, SlotRole.STATUS})
"""Parts whose messages carry the control."""


class ControlPlan:
    """Where one conversation's control is and should be.

    Args:
        control: the control (its id and label).
        book: the conversation's slot book (a carrier's text and format are its part's).
    """

    def __init__(self, control: StopControl, book: SlotBook) -> None:
        self.control = control
        self._book = book
        self.ending = False
        """The run's final text is delivered: the control comes off everywhere, no more moves."""
        self._wanted: str | None = None
        self._carrier: str | None = None
        self._leaving: str | None = None
        """The previous carrier, taken off once the control is on the new one."""
        self._maybe: dict[str, int] = {}
        """Messages that carry the control or may, oldest first, with the attempts made to take it off at the end."""
        self.errors: list[str] = []
        """Controls that could not be taken off (for the run's report)."""

    def restored(self) -> None:
        """The book was restored from the ledger (a restart): its newest live message may carry the control, and so
        may the one before it (a move is two calls, a second apart on Telegram's chat budget, and the process may
        have died in between). Both are taken off at the end (taking off a control a message does not show is
        harmless). Older ones are not tried: each earlier move finished before the next message came."""
        live = [s for s in self._book.slots if s.role in LIVE_ROLES and s.message_id and not s.streaming]
        for slot in live[-2:]:
            self._maybe[str(slot.message_id)] = 0
        if live:
            self._carrier = self._wanted = str(live[-1].message_id)

    def shown(self, slot: Slot) -> None:
        """``slot`` became a message (a create acknowledged or found): a live one is the new carrier."""
        if not self.ending and slot.role in LIVE_ROLES and slot.message_id is not None and not slot.streaming:
            self._wanted = slot.message_id

    def _slot(self, message_id: str) -> Slot | None:
        return next((s for s in self._book.slots if s.message_id == message_id), None)

    def next_op(self) -> Op | None:
        """The control call due now, or None: a move (on the new carrier, then off the previous one) while the run
        is live; at its end, taking it off each message that may carry it. A message gone (a replace deleted it)
        carries nothing: skipped."""
        while True:
            if self.ending:
                message_id = next(iter(self._maybe), None)
                on = False
            elif self._wanted is not None and self._wanted != self._carrier:
                message_id, on = self._wanted, True
            elif self._leaving is not None:
                message_id, on = self._leaving, False
            else:
                return None
            if message_id is None:
                return None
            slot = self._slot(message_id)
            if slot is not None:
                text = slot.shown if slot.shown is not None else slot.desired
                return Op(slot, OpKind.CONTROL_ON if on else OpKind.CONTROL_OFF, text, 0.0)
            self._forget(message_id)

    def _forget(self, message_id: str) -> None:
        self._maybe.pop(message_id, None)
        if self._wanted == message_id:
            self._wanted = self._carrier
        if self._leaving == message_id:
            self._leaving = None

    def apply(self, op: Op, error: DeliveryError | None) -> Outcome:
        """What a control call's outcome does (``error``: None when done)."""
        message_id = str(op.slot.message_id)
        if op.kind is OpKind.CONTROL_ON:
            self._maybe.setdefault(message_id, 0)  # shown, or maybe (unknown): the end takes it off either way
            if error is not None:  # not shown: the move is given up until the next new message
                self._wanted = self._carrier
                return Outcome.FAILED
            self._leaving, self._carrier = self._carrier, message_id
            return Outcome.ACK
        if not self.ending:  # the move's second call: failing, it stays in doubt and the end tries again
            self._leaving = None
            if error is None:
                self._maybe.pop(message_id, None)
            return Outcome.ACK if error is None else Outcome.FAILED
        if error is None:
            self._maybe.pop(message_id, None)
            return Outcome.ACK
        attempts = self._maybe.get(message_id, 0) + 1
        self._maybe[message_id] = attempts
        if isinstance(error, TransientDeliveryError) and attempts < CLEAR_ATTEMPTS:
            return Outcome.RATE_LIMITED if isinstance(error, RateLimitedError) else Outcome.RETRY
        self.errors.append(f"the Stop control may still show on message {message_id}: {error}")
        self._maybe.pop(message_id, None)
        return Outcome.FAILED

    def end(self) -> None:
        """The run's final text is delivered: from now on the control only comes off."""
        self.ending = True
        self._wanted = self._carrier = self._leaving = None
