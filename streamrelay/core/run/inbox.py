"""A run's inbox: the bounded queue between ingest and the run's worker, woken once per batch.

Ingest hands a run the events of a request's batch at once (:meth:`Inbox.put_all`); the worker takes what is
waiting, up to a batch, in one go (:meth:`Inbox.take`), and when there is nothing it waits for the next put or
for its next deadline (:meth:`Inbox.wait`). The bound is in events: a put waits while the inbox is full, so a run
that falls behind slows its own ingest and no one else's.

Why not :class:`asyncio.Queue`: its ``get`` is one future per event waited for, and waiting for "an event or a
deadline" took two tasks and an :func:`asyncio.wait` per wake-up; that was a third of the cost of a run fed one
event at a time. Here the worker waits on a :class:`~core.wake.Wake`: one future per wake-up, resolved by the first
put (later puts find it resolved), and a deadline sleep kept across wake-ups (one that ends early wakes the worker
once for nothing: it looks, finds no event and no due deadline, and waits again).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Sequence, Sized
from typing import Generic, TypeVar

from streamrelay.core.clock import Clock
from streamrelay.core.wake import Wake

T = TypeVar("T")


class Inbox(Generic[T]):
    """A bounded FIFO of items for one consumer.

    Args:
        maxsize: the most items held at once (a put waits past it); 0 or less: no bound.
    """

    def __init__(self, maxsize: int = 0) -> None:
        self.maxsize = maxsize
        self._items: list[T] = []
        """A list, not a deque: an empty deque is 624 bytes (a block of 64 slots made at once), an open run's inbox
        is empty most of the time and a batch is taken whole or in order (:meth:`take`)."""
        self._ready = Wake()
        self._room: deque[asyncio.Future[None]] | None = None
        """The puts waiting for room, made when the first one waits (None: none ever did; most runs never fill up)."""
        self.closed = False
        """The worker is gone: puts take nothing more (their events are journaled: a resumed run replays them)."""

    def __repr__(self) -> str:
        return f"Inbox({len(self._items)}/{self.maxsize})"

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def full(self) -> bool:
        return 0 < self.maxsize <= len(self._items)

    def put_nowait(self, item: T) -> None:
        """Add one item now, past the bound if need be (a journaled backlog must all be taken)."""
        self._items.append(item)
        self._ready.set()

    def offer(self, items: Sequence[T]) -> bool:
        """Add ``items`` now when they all fit, waking the worker once: what :meth:`put_all` does without a wait,
        without its coroutine (a run fed one event a request hands over once per event); False, nothing added, when
        they do not fit. ``items`` empty: True, nothing done."""
        if self.maxsize > 0 and len(self._items) + len(items) > self.maxsize:
            return self.closed  # closed: taken nowhere, as put_all does
        if self.closed:
            return True
        if items:
            self._items.extend(items)
            self._ready.set()
        return True

    async def put(self, item: T) -> None:
        """Add one item, waiting while the inbox is full."""
        await self.put_all((item,))

    async def put_all(self, items: Iterable[T]) -> None:
        """Add ``items`` in order, as many at a time as there is room for; waits while the inbox is full. The
        worker is woken once (not once per item); items that all fit are added in one step (no wait)."""
        if self.closed:
            return
        if isinstance(items, Sized) and (self.maxsize <= 0 or len(self._items) + len(items) <= self.maxsize):
            self._items.extend(items)
            self._ready.set()
            return
        for item in items:
            while self.full():
                self._ready.set()
                room = asyncio.get_running_loop().create_future()
                if self._room is None:
                    self._room = deque()
                self._room.append(room)
                await room  # a cancelled put's future is cancelled with it: _give_room skips it
                if self.closed:
                    return
            self._items.append(item)
        self._ready.set()

    def nudge(self) -> None:
        """Wake the worker with nothing added (something it waits on besides items changed: it looks again)."""
        self._ready.set()

    def take(self, limit: int) -> list[T]:
        """Up to ``limit`` items, oldest first ([] when empty); puts waiting for room go on."""
        items = self._items
        if len(items) <= limit:
            batch, self._items = items, []
        else:
            batch = items[:limit]
            del items[:limit]
        if batch and self._room:
            self._give_room()
        return batch

    async def wait(self, deadline: float | None, clock: Clock) -> None:
        """Return when items are waiting, or at ``deadline`` (clock seconds, None: none) or a little before it
        (see the module docstring); at once when items are already waiting."""
        if self._items:
            return
        self._ready.clear()
        await self._ready.wait(deadline, clock)

    def waiter(self, deadline: float | None, clock: Clock) -> asyncio.Future[None] | None:
        """:meth:`wait` without its coroutines (the worker waits once per event): None when items are waiting, else
        the future to await (:meth:`core.wake.Wake.waiter`)."""
        if self._items:
            return None
        self._ready.clear()
        return self._ready.waiter(deadline, clock)

    def close(self) -> None:
        """The worker is gone (its run ended, stopped or never opened): stop the deadline's sleep and let every put
        return, those waiting for room included, without adding anything. Before, a request of the run waiting for
        room waited for good once the worker was gone (its run's open failed, or the worker stopped unfinished while
        the inbox was full); what it carried is journaled, and a resumed run replays it."""
        self.closed = True
        self._items.clear()
        self._ready.close()
        self._give_room()

    def _give_room(self) -> None:
        """Wake every put waiting for room, in the order they came (each looks again: one may find it full)."""
        while self._room:
            room = self._room.popleft()
            if not room.done():
                room.set_result(None)
