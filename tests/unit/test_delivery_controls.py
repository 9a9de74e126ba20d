"""The Stop control as part of the delivery machine (core/delivery/controls.py), with no I/O: it moves to each new
live message (on the new one first, then off the previous one), and at the end comes off every message that may
carry it, through retries, or is reported."""

from __future__ import annotations

from streamrelay.core.delivery.calls import Done, NotDone, SetControl, Unknown
from streamrelay.core.delivery.controls import CLEAR_ATTEMPTS
from streamrelay.core.delivery.machine import DeliveryMachine
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import Op, OpKind, Outcome, Slot
from streamrelay.core.errors import PlatformUnavailableError, TargetNotFoundError, UncertainDeliveryError
from streamrelay.core.ports import StopControl
from streamrelay.core.records.ledger import PartRecord
from streamrelay.core.records.report import PartState, SlotRole
from tests.unit.fakes import delivery_machine

STOP = StopControl("stop:0123456789abcdef")


def machine(book: SlotBook | None = None) -> DeliveryMachine:
    return delivery_machine(book, control=STOP)


def send(m: DeliveryMachine, slot: Slot, message_id: str) -> None:
    op = m.next_op()
    assert op is not None and op.slot is slot and op.kind is OpKind.SEND
    m.call_for(op)
    assert m.apply(op, Done(message_id))[0] is Outcome.ACK


def control_op(m: DeliveryMachine) -> Op:
    op = m.next_op()
    assert op is not None and op.kind.control, op
    return op


def test_the_control_follows_the_newest_live_message_on_first_then_off() -> None:
    m = machine()
    first = m.book.claim_slot(SlotRole.ANSWER, "Block one.")
    send(m, first, "m1")
    on = control_op(m)
    call = m.call_for(on)
    assert isinstance(call, SetControl) and (call.message_id, call.control, call.text) == ("m1", STOP, "Block one.")
    assert m.apply(on, Done())[0] is Outcome.ACK
    assert m.next_op() is None  # it carries the control; nothing else to do
    second = m.book.claim_slot(SlotRole.ANSWER, "Block two.")
    send(m, second, "m2")
    on, off = control_op(m), None
    assert (on.kind, on.slot) == (OpKind.CONTROL_ON, second)
    m.apply(on, Done())
    off = control_op(m)
    assert (off.kind, off.slot) == (OpKind.CONTROL_OFF, first)
    call = m.call_for(off)
    assert isinstance(call, SetControl) and call.control is None
    m.apply(off, Done())
    assert m.next_op() is None


def test_a_status_or_notice_part_is_no_carrier_unless_live() -> None:
    m = machine()
    notice = m.book.claim_slot(SlotRole.NOTICE, "⏹ Stopped.")
    send(m, notice, "m1")
    assert m.next_op() is None


def test_at_the_end_it_comes_off_everywhere_through_retries_or_is_reported() -> None:
    m = machine()
    slot = m.book.claim_slot(SlotRole.ANSWER, "The answer.")
    send(m, slot, "m1")
    on = control_op(m)
    m.apply(on, Unknown(UncertainDeliveryError("timeout")))  # may show it
    m.book.finalizing = True
    for _ in range(CLEAR_ATTEMPTS - 1):
        off = control_op(m)
        assert off.kind is OpKind.CONTROL_OFF
        assert m.apply(off, NotDone(PlatformUnavailableError("502")))[0] is Outcome.RETRY
    off = control_op(m)
    assert m.apply(off, NotDone(PlatformUnavailableError("502")))[0] is Outcome.FAILED
    assert m.next_op() is None
    assert m.controls is not None and m.controls.errors == ["the Stop control may still show on message m1: 502"]


def test_a_message_gone_carries_nothing_and_is_done() -> None:
    m = machine()
    slot = m.book.claim_slot(SlotRole.ANSWER, "The answer.")
    send(m, slot, "m1")
    m.apply(control_op(m), Done())
    m.book.finalizing = True
    off = control_op(m)
    assert m.apply(off, NotDone(TargetNotFoundError("message to edit not found")))[0] is Outcome.FAILED
    assert m.next_op() is None  # a permanent error is reported once, never retried


def test_after_a_restart_the_two_newest_live_messages_may_carry_it() -> None:
    book = SlotBook("r1", 0.0, False)
    book.restore(
        [
            PartRecord(
                run="r1", slot=i, role=SlotRole.ANSWER, message_id=f"m{i}", shown=f"Block {i}.", state=PartState.ACKED
            )
            for i in range(3)
        ]
    )
    m = machine(book)
    assert m.controls is not None
    m.controls.restored()
    for i in range(3):
        book.claim_slot(SlotRole.ANSWER, f"Block {i}.")
    book.finalizing = True
    taken_off = []
    while (op := m.next_op()) is not None:
        assert op.kind is OpKind.CONTROL_OFF
        taken_off.append(op.slot.message_id)
        m.apply(op, Done())
    assert taken_off == ["m1", "m2"]
