"""What the relay keeps in memory of finished runs: their report, pipeline lane, live monitor and last ``seq``, for
readers that come after the end (a late report, a parent loop reading its lane, a watcher opening the page).

Bounded twice: at most ``keep`` runs, and at most ``budget_chars`` characters of text over all of them (the live
state's texts and the lane's units, measured once when the run ends): a client inside its limits can make each of
its runs hold about ``max_chars_per_run`` characters, so a count alone would let 10,000 finished runs hold gigabytes.
The oldest go first; a report asked for later is rebuilt from the ledger.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass

from core.monitor import RunMonitor
from core.pipeline import PipelineLane
from core.report import DeliveryReport


@dataclass(frozen=True)
class Finished:
    """What stays in memory of a finished run: its report, pipeline lane, live events and last seq."""

    report: DeliveryReport
    lane: PipelineLane
    monitor: RunMonitor
    last_seq: int | None

    def size(self) -> int:
        """Characters of text it holds (its live state and its lane's units): O(that size), once."""
        state = self.monitor.state
        texts = len(state["answer"]) + sum(len(a.get("text") or "") for a in state["agents"].values())
        texts += sum(len(p.get("text") or "") for p in state["parts"].values())
        texts += sum(len(str(e)) for e in state["timeline"])
        return texts + sum(len(json.dumps(u, ensure_ascii=False, default=str)) for u in self.lane.units)


class FinishedRuns(OrderedDict[str, Finished]):
    """Finished runs by key, oldest first, within ``keep`` runs and ``budget_chars`` characters (module docstring)."""

    def __init__(self, keep: int = 10_000, budget_chars: int = 64_000_000) -> None:
        super().__init__()
        self.keep = keep
        self.budget_chars = budget_chars
        self.chars = 0
        self._sizes: dict[str, int] = {}

    def __setitem__(self, run: str, finished: Finished) -> None:
        if run in self:
            self.pop(run)
        size = finished.size()
        super().__setitem__(run, finished)
        self._sizes[run] = size
        self.chars += size
        while len(self) > 1 and (len(self) > self.keep or self.chars > self.budget_chars):
            self.popitem(last=False)

    def __delitem__(self, run: str) -> None:
        super().__delitem__(run)
        self.chars -= self._sizes.pop(run, 0)

    def popitem(self, last: bool = True) -> tuple[str, Finished]:
        run, finished = super().popitem(last=last)
        self.chars -= self._sizes.pop(run, 0)
        return run, finished

    def pop(self, run: str, *default: Finished | None) -> Finished | None:  # type: ignore[override]
        if run not in self:
            return default[0] if default else super().pop(run)
        finished = super().pop(run)
        self.chars -= self._sizes.pop(run, 0)
        return finished
