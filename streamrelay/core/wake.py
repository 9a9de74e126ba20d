"""A wake-up flag for one waiting task, with a deadline on the injected clock, and no task per wait.

:class:`Wake` has :class:`asyncio.Event`'s ``set`` / ``clear`` / ``is_set`` / ``wait``, and ``wait`` also takes a
deadline: it returns when the flag is set or when the deadline comes, whichever is first.

Why not ``asyncio.wait((event.wait(), clock.sleep(t)))``: that is two tasks and a wait per wake-up. A run fed one
event at a time wakes its worker and its conversation's reconciler once per event, and those tasks were a third
of the cost of the event. Here a wait is one future (resolved by the first ``set``: later ones find it resolved),
and the deadline is one sleep task on the injected clock, kept across waits while the deadline does not move
earlier. A sleep kept from an earlier wait may end before the current deadline: the waiter then returns early,
once, and must look again (both users loop: they check what is due, then wait again).
"""

from __future__ import annotations

import asyncio

from streamrelay.core.clock import Clock


class Wake:
    """A level-triggered flag for one waiting task (see the module docstring)."""

    __slots__ = ("_flag", "_loop", "_sleeper", "_sleeper_until", "_waiter")

    def __init__(self) -> None:
        self._flag = False
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop of the first wait (again after it closed), kept: :func:`asyncio.get_running_loop` checks the
        process id on every call in CPython 3.11, a ``getpid`` system call per wait (0.3-0.7 µs measured here), and a
        run fed one event at a time waits once per event. Like asyncio's own primitives, a Wake serves one loop at a
        time."""
        self._waiter: asyncio.Future[None] | None = None
        self._sleeper: asyncio.Task[None] | None = None
        self._sleeper_until = 0.0

    def __repr__(self) -> str:
        return f"Wake(set={self._flag})"

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        """Set the flag and wake the waiting task (O(1); nothing more when it is already set)."""
        if self._flag:
            return
        self._flag = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        self._flag = False

    async def wait(self, deadline: float | None = None, clock: Clock | None = None) -> None:
        """Return once the flag is set (at once if it is), or at ``deadline`` (``clock`` seconds; None: no deadline)
        or a little before it (see the module docstring).

        Raises:
            ValueError: a deadline without a clock.
        """
        waiter = self.waiter(deadline, clock)
        if waiter is None:
            return
        try:
            await waiter
        finally:
            self._waiter = None

    def waiter(self, deadline: float | None = None, clock: Clock | None = None) -> asyncio.Future[None] | None:
        """:meth:`wait` without its coroutine (a caller that waits once per event saves one per wake-up): None when the
        flag is set, else the future to await, resolved as :meth:`wait` returns. Awaiting it is one wait (a cancelled
        one is cancelled with it); call this again for the next.

        Raises:
            ValueError: a deadline without a clock.
        """
        if self._flag:
            return None
        # The sleep kept from an earlier wait mostly ends no later than this deadline (a worker's idle deadline moves
        # later with each event): that check is made here, not in a call per wait.
        if deadline is not None:
            if clock is None:
                raise ValueError("a deadline needs the clock it is counted on")
            if self._sleeper is None or self._sleeper_until > deadline:
                self._arm(deadline, clock)
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        return waiter

    def close(self) -> None:
        """Stop the deadline's sleep (nobody waits any more)."""
        if self._sleeper is not None:
            self._sleeper.cancel()
            self._sleeper = None

    def _arm(self, deadline: float, clock: Clock) -> None:
        """A sleep that ends the wait at ``deadline``, unless the one running ends no later than it."""
        sleeper = self._sleeper
        if sleeper is not None and self._sleeper_until <= deadline:
            return
        if sleeper is not None:
            sleeper.cancel()
        self._sleeper_until = deadline
        self._sleeper = asyncio.ensure_future(clock.sleep(deadline - clock.now()))
        self._sleeper.add_done_callback(self._slept)

    def _slept(self, task: asyncio.Task[None]) -> None:
        if task is self._sleeper:
            self._sleeper = None
        waiter = self._waiter
        if not task.cancelled() and waiter is not None and not waiter.done():
            waiter.set_result(None)  # the deadline came: the wait ends, the flag stays as it is
