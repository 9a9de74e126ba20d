"""What the relay keeps in memory of finished runs: their report, pipeline lane, live monitor and last ``seq``, for
readers that come after the end (a late report, a parent loop reading its lane, a watcher opening the page).

Bounded three times: at most ``keep`` runs, at most ``budget_chars`` characters of text over all of them (the live
state's texts and the lane's units, measured once when the run ends), and at most ``budget_bytes`` bytes over all of
them (:meth:`Finished.measure`: the memory those texts take as Python strings, 1, 2 or 4 bytes a character plus each
string's header, the kept live events and lane units, and :data:`RUN_OVERHEAD_BYTES` for the objects of the run
itself): a client inside its limits can make each of its runs hold about ``max_chars_per_run`` characters, so a
count alone would let 10,000 finished runs hold gigabytes, and a character count alone misjudges text outside
Latin-1 by up to four times. The oldest go first; a report asked for later is rebuilt from the ledger.
"""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from dataclasses import dataclass

from core.lanes.pipeline import PipelineLane
from core.records.report import DeliveryReport
from core.run.monitor import RunMonitor

RUN_OVERHEAD_BYTES = 16 * 1024
"""Bytes a finished run holds besides its texts (its report, monitor, lane and their small objects): a tracemalloc
snapshot diff over finished runs of the recorded Markdown answer showed about 12 KB of them; rounded up."""


@dataclass(frozen=True)
class Finished:
    """What stays in memory of a finished run: its report, pipeline lane, live events and last seq."""

    report: DeliveryReport
    lane: PipelineLane
    monitor: RunMonitor
    last_seq: int | None

    def measure(self) -> tuple[int, int]:
        """``(characters, bytes)`` it holds: the characters of its live state's texts and its lane's units, and the
        bytes of memory they take as Python strings, with the kept live events and :data:`RUN_OVERHEAD_BYTES`
        (module docstring). One pass, O(its size), once."""
        state = self.monitor.state
        strings = [state["answer"], *(a.get("text") or "" for a in state["agents"].values())]
        strings += [p.get("text") or "" for p in state["parts"].values()]
        strings += [str(e) for e in state["timeline"]]
        strings += [json.dumps(u, ensure_ascii=False, default=str) for u in self.lane.units]
        kept = [str(e) for e in self.monitor.since(0) if e.get("type") != "reset"]
        chars = sum(len(text) for text in strings)
        held = sum(sys.getsizeof(text) for text in strings) + sum(sys.getsizeof(text) for text in kept)
        return chars, RUN_OVERHEAD_BYTES + held


class FinishedRuns(OrderedDict[str, Finished]):
    """Finished runs by key, oldest first, within ``keep`` runs, ``budget_chars`` characters and ``budget_bytes`` bytes
    (module docstring; the default byte budget is 256 MiB)."""

    def __init__(self, keep: int = 10_000, budget_chars: int = 64_000_000, budget_bytes: int = 256 * 2**20) -> None:
        super().__init__()
        self.keep = keep
        self.budget_chars = budget_chars
        self.budget_bytes = budget_bytes
        self.chars = 0
        self.bytes = 0
        self._sizes: dict[str, tuple[int, int]] = {}

    def __setitem__(self, run: str, finished: Finished) -> None:
        if run in self:
            self.pop(run)
        size = finished.measure()
        super().__setitem__(run, finished)
        self._sizes[run] = size
        self.chars += size[0]
        self.bytes += size[1]
        while len(self) > 1 and (
            len(self) > self.keep or self.chars > self.budget_chars or self.bytes > self.budget_bytes
        ):
            self.popitem(last=False)

    def _forget(self, run: str) -> None:
        chars, size = self._sizes.pop(run, (0, 0))
        self.chars -= chars
        self.bytes -= size

    def __delitem__(self, run: str) -> None:
        super().__delitem__(run)
        self._forget(run)

    def popitem(self, last: bool = True) -> tuple[str, Finished]:
        run, finished = super().popitem(last=last)
        self._forget(run)
        return run, finished

    def pop(self, run: str, *default: Finished | None) -> Finished | None:  # type: ignore[override]
        if run not in self:
            return default[0] if default else super().pop(run)
        finished = super().pop(run)
        self._forget(run)
        return finished
