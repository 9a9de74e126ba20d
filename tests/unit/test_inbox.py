"""A run's inbox and the wake-up flag under it: one wake per batch, a bound that makes ingest wait, deadlines on the
injected clock without a task per wait."""

from __future__ import annotations

import asyncio

import pytest

from streamrelay.core.run.inbox import Inbox
from streamrelay.core.wake import Wake
from tests.unit.fakes import ManualClock, settle

pytestmark = pytest.mark.timeout(10)


async def test_a_batch_put_wakes_the_worker_once_and_is_taken_in_order() -> None:
    inbox: Inbox[int] = Inbox(100)
    clock = ManualClock()
    wakes = 0

    async def worker() -> list[int]:
        nonlocal wakes
        await inbox.wait(None, clock)
        wakes += 1
        return inbox.take(10)

    task = asyncio.ensure_future(worker())
    await settle()
    await inbox.put_all([1, 2, 3])
    await inbox.put(4)
    assert await task == [1, 2, 3, 4] and wakes == 1
    assert inbox.take(10) == [] and inbox.empty()


async def test_a_full_inbox_makes_puts_wait_until_the_worker_takes() -> None:
    inbox: Inbox[int] = Inbox(2)
    put = asyncio.ensure_future(inbox.put_all([1, 2, 3, 4, 5]))
    await settle()
    assert not put.done() and inbox.qsize() == 2 and inbox.full()
    assert inbox.take(1) == [1]
    await settle()
    assert not put.done() and inbox.take(10) == [2, 3]
    await settle()
    await put
    assert inbox.take(10) == [4, 5]


async def test_a_wait_ends_at_its_deadline_and_a_sleep_is_kept_while_the_deadline_does_not_move_earlier() -> None:
    inbox: Inbox[int] = Inbox()
    clock = ManualClock()
    waiter = asyncio.ensure_future(inbox.wait(5.0, clock))
    await settle()
    assert clock.sleeping() == 1
    await inbox.put(1)
    await waiter
    inbox.take(1)
    waiter = asyncio.ensure_future(inbox.wait(9.0, clock))  # later: the sleep until 5 is kept (one early wake)
    await settle()
    assert clock.sleeping() == 1
    clock.advance(5.0)
    await settle()
    assert waiter.done() and inbox.empty()
    waiter = asyncio.ensure_future(inbox.wait(9.0, clock))
    await settle()
    clock.advance(4.0)
    await settle()
    assert waiter.done()
    inbox.close()
    assert clock.sleeping() == 0


async def test_a_wake_set_before_the_wait_returns_at_once_and_needs_a_clock_for_a_deadline() -> None:
    wake = Wake()
    wake.set()
    await asyncio.wait_for(wake.wait(), 1)
    wake.clear()
    with pytest.raises(ValueError, match="clock"):
        await wake.wait(1.0)
    waiter = asyncio.ensure_future(wake.wait())
    await settle()
    assert not waiter.done()
    wake.set()
    wake.set()
    await settle()
    assert waiter.done() and wake.is_set()


async def test_a_waiter_is_the_wait_without_its_coroutine() -> None:
    """The worker's wait once per event (Inbox.waiter / Wake.waiter): None while items wait, else a future resolved by
    the next put or at the deadline; a cancelled one leaves the next waiter working."""
    inbox: Inbox[int] = Inbox()
    clock = ManualClock()
    await inbox.put(1)
    assert inbox.waiter(None, clock) is None
    assert inbox.take(10) == [1]
    waiter = inbox.waiter(5.0, clock)
    assert waiter is not None and not waiter.done()
    await inbox.put_all([2, 3])
    await asyncio.wait_for(waiter, 1)
    assert inbox.take(10) == [2, 3]
    waiter = inbox.waiter(5.0, clock)
    assert waiter is not None
    await settle()
    assert clock.sleeping() == 1 and not waiter.done()
    clock.advance(5.0)
    await settle()
    assert waiter.done() and inbox.empty()  # the deadline came: no item
    waiter = inbox.waiter(None, clock)
    assert waiter is not None
    waiter.cancel()
    waiter = inbox.waiter(None, clock)
    assert waiter is not None
    await inbox.put(4)
    await asyncio.wait_for(waiter, 1)
    inbox.close()
    with pytest.raises(ValueError, match="clock"):
        Wake().waiter(1.0)


async def test_an_offer_adds_what_fits_at_once_and_refuses_what_does_not() -> None:
    """Inbox.offer: the hand-over without a wait (one line a request); nothing is added when the items do not all fit,
    and the worker is woken once for what was added."""
    inbox: Inbox[int] = Inbox(3)
    clock = ManualClock()
    waiter = inbox.waiter(None, clock)
    assert waiter is not None
    assert inbox.offer([1, 2])
    await asyncio.wait_for(waiter, 1)
    assert not inbox.offer([3, 4]) and inbox.qsize() == 2  # would pass the bound: nothing added
    assert inbox.offer([]) and inbox.offer([3]) and inbox.full()
    assert inbox.take(10) == [1, 2, 3]


def test_a_wake_serves_the_loop_of_its_wait_and_the_next_loop_once_that_one_closed() -> None:
    """A Wake keeps the loop of its first wait (no loop look-up per wait); a later loop takes it over once that loop
    closed (sequential asyncio.run calls, as tests make them)."""
    wake = Wake()

    async def wait_once() -> None:
        waiter = wake.waiter()
        assert waiter is not None
        asyncio.get_running_loop().call_soon(wake.set)
        await asyncio.wait_for(waiter, 1)
        wake.clear()

    asyncio.run(wait_once())
    asyncio.run(wait_once())


async def test_a_closed_inbox_lets_every_put_return_those_waiting_for_room_included() -> None:
    """The worker gone (its run's open failed, or it stopped unfinished), a put waiting for room waited for good:
    the request that carried it never got its answer. Its events are journaled: a resumed run replays them."""
    inbox: Inbox[int] = Inbox(2)
    put = asyncio.ensure_future(inbox.put_all([1, 2, 3, 4, 5]))
    await settle()
    assert not put.done()
    inbox.close()
    await asyncio.wait_for(put, 1)
    assert inbox.empty()
    await asyncio.wait_for(inbox.put_all([6, 7, 8]), 1)  # later puts return too, adding nothing
    assert inbox.offer([9]) and inbox.offer([1, 2, 3]) and inbox.empty()
