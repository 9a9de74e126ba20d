"""Load pressure: how far the event loop lags, so ingest pushes back before the loop stalls the sends.

A :class:`LoopLag` probe sleeps ``interval_s`` at a time and measures how late it wakes: the loop's lag, in float
seconds. It keeps two figures:

- ``lag_s``: the loop's lag, an exponentially weighted mean of the late wake-ups over time (a time constant of
  :data:`SMOOTH_S`): a saturated loop, late at every wake-up, raises it within a second or two, while one
  garbage-collection pause (a full collection of a large heap stalls the loop for 100-400 ms) moves it only by a
  fraction, so it does not shed load;
- ``stalled_s``: the sum of every late wake-up since the probe started: the time the loop spent unable to run
  anything on time. A platform call's deadline subtracts what the loop stalled during the call
  (:func:`stalled_s`), so a send times out for the platform's slowness, never for our own lag.

:class:`Pressure` turns the lag, and the backlog of events taken but not yet handled by their runs' workers, into
ingest's decision (:meth:`Pressure.push_back`): past ``max_lag_s`` (or half of ``max_backlog`` events) new runs are
refused (503 with ``Retry-After``), past twice that (or ``max_backlog``) the lines of started runs too; a run's
``end`` and the journal's replays are always taken (adapters/ingest_http/app.py applies it per request). The lag
alone misses one overload: a loop kept busy by many short callbacks (a thousand connections' ingest) wakes the probe
nearly on time while the run workers, one callback each, fall behind; their backlog shows it.

One probe runs per event loop; :func:`stalled_s` reads the running loop's (0.0 without one).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import math
import random
import time
import weakref
from collections.abc import Callable

SMOOTH_S = 1.0
"""The time constant of the lag's mean, in seconds: a wake-up ``dt`` seconds after the previous one weighs
``1 - exp(-dt / SMOOTH_S)``."""

BACKLOG_EVERY_S = 0.025
"""How often the backlog is summed (over every active run) at most, in seconds."""
SPREAD = 4.0
"""A refusal's ``Retry-After`` is drawn from ``retry_after_s`` up to this many times it."""

_PROBES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLag] = weakref.WeakKeyDictionary()


class LoopLag:
    """Measures the running event loop's lag (module docstring).

    Args:
        interval_s: seconds between wake-ups (each wake-up costs a few microseconds).
    """

    def __init__(self, interval_s: float = 0.025) -> None:
        self.interval_s = interval_s
        self.lag_s = 0.0
        """The lag in seconds: the time-weighted mean of late wake-ups (:data:`SMOOTH_S`)."""
        self.stalled_s = 0.0
        """Seconds the loop was late, summed over every wake-up since :meth:`start`."""
        self.worst_s = 0.0
        """The latest wake-up seen (seconds late), since the probe started or was last :meth:`reset_worst`."""
        self._due: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Start probing the running loop (again a no-op while it runs); it becomes the loop's probe."""
        if self._task is not None and not self._task.done():
            return
        self._loop = asyncio.get_running_loop()
        _PROBES[self._loop] = self
        self._task = self._loop.create_task(self._run(), name="loop-lag-probe")

    async def stop(self) -> None:
        """Stop probing."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._loop is not None and _PROBES.get(self._loop) is self:
            del _PROBES[self._loop]

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._due = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            self.observe(max(0.0, loop.time() - self._due), self.interval_s)

    def observe(self, late_s: float, elapsed_s: float) -> None:
        """Take one wake-up ``late_s`` seconds late, ``elapsed_s`` after the previous one (tests feed it)."""
        self.stalled_s += late_s
        self.worst_s = max(self.worst_s, late_s)
        weight = 1.0 - math.exp(-(elapsed_s + late_s) / SMOOTH_S)
        self.lag_s += weight * (late_s - self.lag_s)

    def reset_worst(self) -> float:
        """The latest wake-up since the last call (seconds), forgotten afterwards."""
        worst, self.worst_s = self.worst_s, 0.0
        return worst

    def now_s(self) -> float:
        """The lag now, in seconds (:attr:`lag_s`; a stall going on now counts once the probe wakes: the ingest
        handlers that run right after a stall would otherwise all see it and shed load for one pause)."""
        return self.lag_s

    def stalled_now_s(self) -> float:
        """:attr:`stalled_s` plus how overdue the probe is now (a stall still going on)."""
        if self._due is None or self._loop is None:
            return self.stalled_s
        return self.stalled_s + max(0.0, self._loop.time() - self._due)


def probe() -> LoopLag | None:
    """The running loop's probe, or None (none started, or no loop runs)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return _PROBES.get(loop)


def stalled_s() -> float:
    """Seconds the running loop has stalled since its probe started (including a stall going on now), 0.0 without
    a probe: a deadline that reads it before and after a call knows how much of the call was our own lag."""
    found = probe()
    return found.stalled_now_s() if found is not None else 0.0


class PushBack(enum.IntEnum):
    """What ingest refuses now: nothing, new runs, or every line but a run's ``end``."""

    NONE = 0
    STARTS = 1
    LINES = 2


class Pressure:
    """Ingest's push-back from the loop's lag.

    Args:
        lag: the probe (None: a new one, started by :meth:`start`).
        max_lag_s: past this lag (seconds) new runs are refused, past twice it every line but an ``end``; 0 turns
            push-back off (``[service] overload_lag_ms``).
        retry_after_s: the shortest ``Retry-After`` of a refusal (whole seconds, at least 1, on the wire); each refusal
            asks for a random wait from it up to :data:`SPREAD` times it (new runs: half that spread), so agents
            pushed back together do not all come back in the same second and keep the loop lagging by themselves.
        rng: the random source of the spread (tests pass a seeded one).
        backlog: the events taken but not yet handled by the runs' workers (:meth:`core.run.relay.Relay.backlog`), read
            at most every :data:`BACKLOG_EVERY_S`; None: not watched.
        max_backlog: past this backlog every line but an ``end`` is pushed back, past half of it new runs
            (``[service] overload_backlog_events``); 0: not watched.
    """

    def __init__(
        self,
        lag: LoopLag | None = None,
        *,
        max_lag_s: float = 0.1,
        retry_after_s: float = 1.0,
        rng: random.Random | None = None,
        backlog: Callable[[], int] | None = None,
        max_backlog: int = 0,
    ) -> None:
        self.lag = lag if lag is not None else LoopLag()
        self.max_lag_s = max_lag_s
        self.retry_after_s = retry_after_s
        self._rng = rng if rng is not None else random.Random()
        self.backlog = backlog
        self.max_backlog = max_backlog
        self._backlog_seen = (-math.inf, 0)
        self.pushed_back = 0
        """Requests pushed back so far."""

    def start(self) -> None:
        """Start the probe on the running loop."""
        self.lag.start()

    async def stop(self) -> None:
        await self.lag.stop()

    def retry_after(self, level: PushBack) -> float:
        """Seconds the refused agent should wait (see ``retry_after_s``)."""
        spread = SPREAD if level is PushBack.LINES else (1 + SPREAD) / 2
        return self.retry_after_s * self._rng.uniform(1.0, spread)

    def push_back(self) -> PushBack:
        """What to refuse now (:class:`PushBack`): the stricter of what the lag and the backlog ask."""
        level = PushBack.NONE
        if self.max_lag_s > 0:
            lag = self.lag.now_s()
            level = PushBack.LINES if lag > 2 * self.max_lag_s else PushBack.STARTS if lag > self.max_lag_s else level
        if self.backlog is not None and self.max_backlog > 0 and level is not PushBack.LINES:
            waiting = self.waiting()
            if waiting > self.max_backlog:
                return PushBack.LINES
            if 2 * waiting > self.max_backlog:
                return PushBack.STARTS
        return level

    def waiting(self) -> int:
        """The backlog (events), read at most every :data:`BACKLOG_EVERY_S` (0 when not watched)."""
        if self.backlog is None:
            return 0
        now = time.monotonic()
        at, seen = self._backlog_seen
        if now - at >= BACKLOG_EVERY_S:
            seen = self.backlog()
            self._backlog_seen = (now, seen)
        return seen
