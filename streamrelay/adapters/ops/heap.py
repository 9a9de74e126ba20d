"""Giving the C heap's free pages back to the OS after runs end (glibc ``malloc_trim``).

A run, while it streams, allocates far more than it keeps once it ended (its texts, chunks, previews and platform
calls: about 50-100 KB of RSS per open run of an 8.5k answer, against a few KB its finished record holds). When it
ends, most of that is freed, but glibc's allocator keeps the freed pages of holes inside its heap resident: only the
top of the heap is given back on ``free``, and a hole below a live block stays in RSS until something calls
``malloc_trim``, which ``madvise(MADV_DONTNEED)``\\ s every whole free page of every arena (glibc's malloc_trim(3);
Dask documents the same effect for its workers, "memory not released back to the OS",
https://distributed.dask.org/en/stable/worker-memory.html#memory-not-released-back-to-the-os). So a service that
ran thousands of runs shows an RSS that grows with the runs it has finished, though what they hold does not.

:class:`HeapTrim` is told of every ended run (it is the relay's :class:`core.run.ended.RunEndObserver`, passing
each end on to the service's metrics) and :meth:`HeapTrim.keep` trims at most once every ``interval_s`` seconds,
and only when runs ended since the last trim: an idle service is never trimmed, a busy one pays one trim per
interval however many runs end (one ``malloc_trim(0)`` cost 0.38-0.45 ms of CPU on a 75-200 MB process, measured by
bench/bench_memory.py). Where the C library is not glibc (musl, macOS) there is no ``malloc_trim`` and nothing is
done; ``[service] heap_trim_s = 0`` turns it off.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
from collections.abc import Callable

from streamrelay.core.records.report import DeliveryReport
from streamrelay.core.run.ended import RunEndObserver

_log = logging.getLogger("streamrelay.service")

HEAP_TRIM_S = 5.0
"""Default seconds between two heap trims at most (``[service] heap_trim_s``)."""


def glibc_trim() -> Callable[[], int] | None:
    """``malloc_trim(0)`` of the process's C library as a callable returning 1 when memory was given back (else 0);
    None where the C library has no ``malloc_trim`` (not glibc)."""
    try:
        libc = ctypes.CDLL(None)  # the symbols the process already has: its C library among them
        function = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int

    def trim() -> int:
        return int(function(0))

    return trim


class HeapTrim:
    """Trims the C heap (:func:`glibc_trim`) at most once every ``interval_s`` seconds, after runs ended.

    Args:
        then: the observer every ended run is passed on to first (the service's metrics), or None.
        interval_s: the shortest time between two trims, in seconds (> 0).
        trim: the trim to call (default: :func:`glibc_trim`'s; None there: :meth:`keep` returns at once).

    Attributes:
        ended: runs ended since the last trim.
        trims: trims done so far.
    """

    def __init__(
        self, then: RunEndObserver | None, *, interval_s: float = HEAP_TRIM_S, trim: Callable[[], int] | None = None
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, not {interval_s}")
        self.then = then
        self.interval_s = interval_s
        self._trim = trim if trim is not None else glibc_trim()
        self.ended = 0
        self.trims = 0

    def __repr__(self) -> str:
        return f"HeapTrim(interval_s={self.interval_s}, trims={self.trims})"

    @property
    def available(self) -> bool:
        """Whether there is a trim to call (glibc, or one given)."""
        return self._trim is not None

    def run_ended(self, report: DeliveryReport, duration_s: float) -> None:
        """A run ended (:class:`core.run.ended.RunEndObserver`): passed on to ``then``, and counted for the next
        trim."""
        self.ended += 1
        if self.then is not None:
            self.then.run_ended(report, duration_s)

    def step(self) -> bool:
        """Trim now if runs ended since the last trim (:meth:`keep` calls it once per ``interval_s``).

        Returns:
            True when a trim was called.
        """
        if not self.ended or self._trim is None:
            return False
        self.ended = 0
        self.trims += 1
        try:
            self._trim()
        except Exception:  # never a reason to stop the service
            _log.exception("heap trim failed")
        return True

    async def keep(self) -> None:
        """Every ``interval_s`` seconds, :meth:`step`; runs until cancelled (returns at once with no trim)."""
        if self._trim is None:
            return
        while True:
            await asyncio.sleep(self.interval_s)
            self.step()
