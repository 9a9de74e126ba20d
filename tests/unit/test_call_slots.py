"""Call slots (core/delivery/call_slots.py): at most as many of a channel's calls under way as its adapter has
connections; the others wait before their text is built, first come first served (finalization's first), and are
planned again with the latest text once let in. All on an injected clock: no real waiting."""

from __future__ import annotations

import asyncio

import pytest

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import FakeClock
from streamrelay.core.delivery.call_slots import CallSlots
from streamrelay.core.delivery.reconciler import Reconciler
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.events import Target
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.ports import PooledConnections
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import PartState, SlotRole
from tests.unit.fakes import FakeAdapter, ManualClock, drive, settle

pytestmark = pytest.mark.timeout(10)


async def test_slots_are_taken_first_come_first_served_finals_first_and_handed_on() -> None:
    slots = CallSlots(2)
    assert slots.try_take() and slots.try_take() and not slots.try_take()
    order: list[str] = []

    async def wait(name: str, final: bool) -> None:
        await slots.take(final=final)
        order.append(name)

    preview = asyncio.create_task(wait("preview", False))
    final = asyncio.create_task(wait("final", True))
    gone = asyncio.create_task(wait("cancelled", False))
    later = asyncio.create_task(wait("later preview", False))
    await settle()
    assert order == [] and slots.waiting == 4
    gone.cancel()
    await settle()
    assert slots.waiting == 3  # a cancelled waiter leaves the queue and is never handed a slot
    slots.give()
    await settle()
    assert order == ["final"]  # a final's waiter goes before the previews that came first
    slots.give()
    slots.give()
    await settle()
    assert order == ["final", "preview", "later preview"]
    assert slots.free == 0 and not slots.try_take()  # nobody waits, no slot free: three taken, three given
    for _ in range(3):
        slots.give()
    assert slots.free == 2  # never more than it has
    await asyncio.gather(preview, final, later)
    assert gone.cancelled()


async def test_a_slot_handed_to_a_waiter_cancelled_meanwhile_goes_to_the_next() -> None:
    slots = CallSlots(1)
    assert slots.try_take()
    first = asyncio.create_task(slots.take())
    second = asyncio.create_task(slots.take())
    await settle()
    slots.give()  # handed to the first waiter, which is cancelled before it runs
    first.cancel()
    await settle()
    assert first.cancelled() and second.done() and slots.free == 0


def test_call_slots_need_at_least_one() -> None:
    with pytest.raises(ValueError, match="at least 1 slot, got 0"):
        CallSlots(0)


class PooledAdapter(FakeAdapter):
    """A :class:`FakeAdapter` whose calls share a pool of ``connections`` (:class:`core.ports.PooledConnections`)."""

    connections = 1


def test_a_channel_whose_adapter_pools_its_connections_gives_every_chain_the_same_slots() -> None:
    clock = FakeClock()
    pooled = ChannelRuntime(ChannelPolicy(name="t"), PooledAdapter(clock))
    assert isinstance(pooled.adapter, PooledConnections)
    one, two = pooled.chain_for(Target(chat_id=1), clock), pooled.chain_for(Target(chat_id=2), clock)
    assert one.call_slots is not None and one.call_slots is two.call_slots and one.call_slots.slots == 1
    plain = ChannelRuntime(ChannelPolicy(name="t"), FakeAdapter(clock))
    assert plain.chain_for(Target(chat_id=1), clock).call_slots is None


async def test_conversations_wait_for_a_slot_before_their_text_is_built_and_send_the_latest_once_let_in() -> None:
    clock = ManualClock()
    adapter = PooledAdapter(clock, latency_s=1.0)
    slots = CallSlots(1)
    ledger = MemoryLedger()
    recs = [
        Reconciler(
            book=SlotBook(f"r{chat}", 1.0, native=False),  # a preview: intermediate states merge
            adapter=adapter,
            chain=SendChain(clock, call_slots=slots),
            target=Target(chat_id=chat),
            ledger=ledger,
            clock=clock,
        )
        for chat in (1, 2, 3)
    ]
    parts = [rec.book.claim_slot(SlotRole.ANSWER, f"chat {k + 1}: draft") for k, rec in enumerate(recs)]
    for rec in recs:
        rec.start()
    await settle()
    assert adapter.in_flight == 1 and slots.waiting == 2  # one call under way, two conversations wait before it
    assert [c.run for c in ledger.calls] == ["r1"]  # no intent of a waiting call yet: the first one's alone
    recs[1].book.set_text(parts[1], "chat 2: final text")  # changed while it waits: planned again once let in
    await drive(clock, asyncio.gather(*(rec.finish() for rec in recs)))
    assert adapter.max_in_flight == 1
    assert sorted(adapter.chat()) == ["chat 1: draft", "chat 2: final text", "chat 3: draft"]
    assert [c.text for c in adapter.calls_of()] == ["chat 1: draft", "chat 2: final text", "chat 3: draft"]
    assert all(p.state is PartState.ACKED for rec in recs for p in rec.book.parts())
    assert slots.free == 1 and slots.waiting == 0
