"""Clocks: core stages take an injected clock so unit tests never sleep for real.

Time inside core is float seconds on a monotonic scale.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


def boot_seconds() -> float:
    """Seconds on the machine's boot clock (Linux ``CLOCK_BOOTTIME``: since boot, suspend included; elsewhere
    :func:`time.monotonic`). Unlike ``time.time()`` it is never moved by a wall-clock jump (NTP, an operator, a VM
    restored), and unlike one process's monotonic clock it goes on across process restarts on the same boot: a
    durable store may record it and a restarted process compare with it (on the same boot only)."""
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(clock) if clock is not None else time.monotonic()


class Clock(Protocol):
    """A monotonic clock with an async sleep. ``now()`` is float seconds."""

    def now(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    """The real clock: :func:`time.monotonic` and :func:`asyncio.sleep`."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A manual clock for unit tests: ``sleep`` advances time instantly (and yields to the loop)."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds

    async def sleep(self, seconds: float) -> None:
        self._now += max(0.0, seconds)
        await asyncio.sleep(0)
