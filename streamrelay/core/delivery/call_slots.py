"""The call slots: at most as many message calls under way at once as the bot's HTTP session has connections.

A conversation's call is under way from the moment its part's text is built for it (the slot book's refresh, the
adapter's rendering, the SDK's request) until the ledger has its outcome. With more conversations due at once than
the bot's session has connections, the others used to wait inside that chain (their text, the SDK's request and
about fifteen awaiting frames alive) for a connection or for the ledger; behind these slots they wait before any of it
is built, as one small waiter each, and plan their call afresh once let in (with the latest text).

What it does not change: a conversation's calls stay one at a time and in order (a slot is taken by the
conversation's own delivery loop, between two of its calls); the intent is still written before the call is made
(the slot is taken before the call is even decided); the rate budgets are still asked once per call, after the slot
(:meth:`~core.delivery.send_chain.SendChain.grant`). Waiters are let in first come, first served, finalization's
calls before previews (as the budgets order them), so no conversation waits for another's longer than it waited for a
connection before. One set per channel (per bot), shared by its conversations' send chains
(:class:`~core.channel.ChannelRuntime`); a channel whose adapter has no connection pool
(:class:`~core.ports.PooledConnections`) has none.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque


class CallSlots:
    """A counting semaphore with two queues (finalization's waiters first), handed on without a loop turn's race.

    Args:
        slots: calls let in at once (the adapter's connections); at least 1.

    Raises:
        ValueError: ``slots`` is below 1.
    """

    __slots__ = ("_finals", "_free", "_others", "slots")

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"call slots need at least 1 slot, got {slots}")
        self.slots = slots
        self._free = slots
        self._finals: deque[asyncio.Future[None]] = deque()
        self._others: deque[asyncio.Future[None]] = deque()

    @property
    def free(self) -> int:
        """Slots not taken (none while anyone waits)."""
        return self._free

    @property
    def waiting(self) -> int:
        """Callers waiting to be let in (a cancelled one is counted until its turn comes)."""
        return len(self._finals) + len(self._others)

    def try_take(self) -> bool:
        """Take a slot now if one is free and nobody waits for one (first come, first served); True when taken."""
        if self._free and not self._finals and not self._others:
            self._free -= 1
            return True
        return False

    async def take(self, *, final: bool = False) -> None:
        """Wait for a slot and take it (``final``: queued before every preview's waiter). Pair with :meth:`give`.
        Cancelled while waiting, nothing is taken (a slot handed over meanwhile goes to the next waiter)."""
        if self.try_take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._finals if final else self._others
        queue.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed over as the cancellation came: pass it on
            else:
                with contextlib.suppress(ValueError):
                    queue.remove(waiter)
            raise

    def give(self) -> None:
        """Give a slot back: to the first waiter still waiting (finalization's first), else free."""
        for queue in (self._finals, self._others):
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    return
        self._free = min(self.slots, self._free + 1)
