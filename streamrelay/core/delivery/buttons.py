"""Buttons a message part carries for its own sake (an approval's Approve and Deny, :mod:`core.run.approvals`), as
part of the delivery machine's state. Sans-I/O.

Unlike the run's Stop control (:mod:`core.delivery.controls`), which moves to the newest live message, these stay on
their part's message: the part says which buttons it should carry (:attr:`Slot.buttons`), the platform acknowledged
some (:attr:`Slot.buttons_shown`), and while the two differ a :class:`~core.delivery.calls.SetControl` is due
(:meth:`ButtonPlan.next_op`), right after the create that made the message, before any other call of the
conversation; taking them off goes before the edit that shows the decision. A call whose outcome is unknown (or a
part restored from the ledger) sets them again (:attr:`Slot.buttons_doubt`); one that keeps failing is given up after
:data:`~core.delivery.controls.CLEAR_ATTEMPTS` tries and reported ("the buttons of message … may be wrong"), never
silently kept.
"""

from __future__ import annotations

from streamrelay.core.delivery.controls import CLEAR_ATTEMPTS
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import Op, OpKind, Outcome, Slot
from streamrelay.core.errors import DeliveryError, RateLimitedError, TransientDeliveryError, UncertainDeliveryError
from streamrelay.core.ports import StopControl
from streamrelay.core.records.report import SlotRole


class ButtonPlan:
    """Which approval parts' buttons are due (module docstring).

    Args:
        book: the conversation's slot book.
    """

    __slots__ = ("_attempts", "_book", "errors")

    def __init__(self, book: SlotBook) -> None:
        self._book = book
        self._attempts: dict[int, int] = {}
        self.errors: list[str] = []
        """Buttons that could not be set (for the run's report)."""

    def restored(self) -> None:
        """The book was restored from the ledger: what each approval message carries is not known."""
        for slot in self._book.slots:
            if slot.role is SlotRole.APPROVAL and slot.message_id is not None:
                slot.buttons_doubt = True

    def next_op(self) -> Op | None:
        """The button call due now, or None: an approval part shown as a message whose buttons differ from (or may
        differ from) what it should carry."""
        for slot in self._book.slots:
            if (
                slot.role is SlotRole.APPROVAL
                and slot.message_id is not None
                and not slot.streaming
                and slot.pending is None
                and (slot.buttons_doubt or slot.buttons != slot.buttons_shown)
            ):
                text = slot.shown if slot.shown is not None else slot.desired
                kind = OpKind.CONTROL_ON if slot.buttons is not None else OpKind.CONTROL_OFF
                return Op(slot, kind, text, 0.0)
        return None

    def blocks_edit(self, slot: Slot) -> bool:
        """True when ``slot``'s buttons must come off before its text is edited (the decision's edit)."""
        return slot.buttons is None and (slot.buttons_shown is not None or slot.buttons_doubt)

    @staticmethod
    def control_for(op: Op) -> StopControl | None:
        """The control the call of ``op`` puts on (None: takes the buttons off)."""
        return op.slot.buttons if op.kind is OpKind.CONTROL_ON else None

    def apply(self, op: Op, error: DeliveryError | None) -> Outcome:
        """What a button call's outcome does (``error``: None when done)."""
        slot = op.slot
        wanted = self.control_for(op)
        if error is None:
            self._attempts.pop(slot.index, None)
            slot.buttons_shown, slot.buttons_doubt = wanted, False
            return Outcome.ACK
        attempts = self._attempts.get(slot.index, 0) + 1
        self._attempts[slot.index] = attempts
        if isinstance(error, TransientDeliveryError | UncertainDeliveryError) and attempts < CLEAR_ATTEMPTS:
            # setting a message's buttons is idempotent: an unknown outcome is set again
            slot.buttons_doubt = True
            return Outcome.RATE_LIMITED if isinstance(error, RateLimitedError) else Outcome.RETRY
        self._attempts.pop(slot.index, None)
        slot.buttons_shown, slot.buttons_doubt = wanted, False  # given up: reported, never tried for ever
        what = "put on" if wanted is not None else "taken off"
        self.errors.append(f"the approval buttons of message {slot.message_id} could not be {what}: {error}")
        return Outcome.FAILED
