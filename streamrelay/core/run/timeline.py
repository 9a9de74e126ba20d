"""A run's delivery timeline: what was taken, and each platform call of its parts with its outcome, in order.

"Where did the time go" for one run, on the operator page (``/ops``) and ``GET /v1/runs/{run}/timeline``. The relay
gives each run a :class:`Timeline` when it opens (:data:`TIMELINE`, set in the context its tasks are made in, and on
the run), and three places append to it, each a small tuple, never text:

- the worker, per batch of events it takes: ``taken`` with the event's kind and how many (consecutive batches of
  text deltas are one entry: its ``count`` and ``last_at`` grow);
- the executor, per platform call: ``call`` with its place (the ledger run: a fan-out run's places), ``part`` and
  ``role`` (None for a call that is no part's: typing, a thread, a Stop control), ``op`` (the machine's name:
  ``send``, ``edit``, ``settle``, ...), ``method``, ``outcome`` (``done``, ``not_done``, ``unknown``), the ledger's
  ``label`` (``ack``, ``uncertain``, ``failed``, ``rate_limited``, ...), ``retry_after_s`` (a 429), ``settled`` (a
  settle's answer: ``found``, ``not_sent``, ``unknown``), ``error`` (the error's type), ``at`` and ``done_at``;
- the relay: ``opened`` when the run opened here (again after a restart: ``resumed``), ``ended`` with the report's
  status.

Bounded: at most :data:`MAX_ENTRIES` entries a run (past them the count of those left out is kept); the relay keeps
the timelines of its active runs and of the last ``keep`` finished ones (:class:`Timelines`). Times are wall-clock
Unix seconds (what an operator compares with logs and traces). A run resumed after a restart starts a new timeline.

Stored small, and made without new objects per call where it can (an open run appends while it streams, beside each
call's short-lived objects; a long-lived object made then keeps the allocator's page of them, issue 23): an entry's
numbers (its two times, a taken entry's count, a call's ``retry_after_s``) are three doubles of one ``array`` per run,
the rest one tuple of shared strings and small ints (the same call described twice is the same tuple: at most
:data:`_SHARED_MAX` of them are shared, process-wide). A run's own ledger run is not kept in its calls' tuples (a
call of another place, a fan-out's, is).
"""

from __future__ import annotations

import contextvars
import math
import sys
import time
from array import array
from collections import OrderedDict
from typing import Any

from streamrelay.core.delivery.calls import CallResult, Done, NotDone
from streamrelay.core.errors import RateLimitedError
from streamrelay.core.ports import Settlement

MAX_ENTRIES = 400
"""Entries kept per run; later ones are counted (``left_out``), not kept."""

_TAKEN, _CALL, _MARK = 0, 1, 2
_NUMS = 3
"""Doubles per entry in :attr:`Timeline._nums`: when it began, when it ended (a taken entry: its last batch), and a
taken entry's count or a call's ``retry_after_s`` (NaN: none)."""
_SHARED_MAX = 4096
"""Entry tuples shared process-wide (each distinct description of a call once); past them new ones are kept as made."""
_SHARED: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _shared(entry: tuple[Any, ...]) -> tuple[Any, ...]:
    """The one copy of ``entry`` kept for every timeline (``entry`` itself when it is new, or the table is full)."""
    kept = _SHARED.get(entry)
    if kept is not None:
        return kept
    if len(_SHARED) < _SHARED_MAX:
        _SHARED[entry] = entry
    return entry


def _name(value: object) -> str:
    """``value`` as a shared str (an enum member's own value, not a copy; other strings interned)."""
    if isinstance(value, str):
        return sys.intern(value) if type(value) is str else sys.intern(str.__str__(value))
    return sys.intern(str(value))


class Timeline:
    """One run's timeline (module docstring). ``run``: the core's run key."""

    __slots__ = ("_entries", "_nums", "_text_run", "left_out", "run")

    def __init__(self, run: str) -> None:
        self.run = run
        self._entries: list[tuple[Any, ...]] = []
        self._nums = array("d")
        self.left_out = 0
        self._text_run = False
        """The last entry is a ``taken`` of text deltas (the next one joins it)."""

    def __repr__(self) -> str:
        return f"Timeline(run={self.run!r}, entries={len(self._entries)})"

    def _add(self, entry: tuple[Any, ...], at: float, end: float, number: float) -> None:
        if len(self._entries) >= MAX_ENTRIES:
            self.left_out += 1
        else:
            self._entries.append(_shared(entry))
            self._nums.extend((at, end, number))

    def mark(self, what: str, detail: str = "") -> None:
        """A moment of the run: ``opened``, ``resumed``, ``ended`` (``detail``: the report's status)."""
        self._text_run = False
        now = time.time()
        self._add((_MARK, _name(what), _name(detail)), now, now, math.nan)

    def taken(self, kind: str, count: int) -> None:
        """The worker took ``count`` events, the first of ``kind`` (``text`` for deltas: joined with the previous
        entry when it was text too)."""
        now = time.time()
        if kind == "text":
            if self._text_run and self._entries:
                at = len(self._nums) - _NUMS
                self._nums[at + 1] = now
                self._nums[at + 2] += count
                return
            self._text_run = True
        else:
            self._text_run = False
        self._add((_TAKEN, _name(kind)), now, now, count)

    def call(
        self,
        at: float,
        place: str,
        part: int | None,
        role: str | None,
        op: str,
        method: str,
        result: CallResult,
        label: str = "",
    ) -> None:
        """A platform call began at ``at`` and ended now with ``result`` (module docstring)."""
        self._text_run = False
        retry_after_s = math.nan
        settled: str | None = None
        error: str | None = None
        if isinstance(result, Done):
            outcome = "done"
            if isinstance(result.value, Settlement):
                settled = _name(result.value.outcome)
        else:
            outcome = "not_done" if isinstance(result, NotDone) else "unknown"
            error = _name(type(result.error).__name__)
            if isinstance(result.error, RateLimitedError):
                retry_after_s = float(result.error.retry_after_s)
        entry = (
            _CALL,
            None if place == self.run else place,
            part,
            None if role is None else _name(role),
            _name(op),
            _name(method),
            outcome,
            _name(label),
            settled,
            error,
        )
        self._add(entry, at, time.time(), retry_after_s)

    def public(self) -> dict[str, Any]:
        """As JSON: ``{"entries": [...], "left_out"}``, entries in the order they happened (module docstring)."""
        entries: list[dict[str, Any]] = []
        nums = self._nums
        for k, entry in enumerate(self._entries):
            at, end, number = nums[k * _NUMS], nums[k * _NUMS + 1], nums[k * _NUMS + 2]
            if entry[0] == _MARK:
                entries.append({"type": entry[1], "at": at, **({"status": entry[2]} if entry[2] else {})})
            elif entry[0] == _TAKEN:
                entries.append({"type": "taken", "at": at, "kind": entry[1], "count": int(number), "last_at": end})
            else:
                _, place, part, role, op, method, outcome, label, settled, error = entry
                row: dict[str, Any] = {
                    "type": "call",
                    "at": at,
                    "done_at": end,
                    "place": self.run if place is None else place,
                    "part": part,
                    "role": role,
                    "op": op,
                    "method": method,
                    "outcome": outcome,
                    "label": label,
                }
                retry = None if math.isnan(number) else number
                for name, value in (("retry_after_s", retry), ("settled", settled), ("error", error)):
                    if value is not None:
                        row[name] = value
                entries.append(row)
        entries.sort(key=lambda e: e["at"])  # a call is entered at its end: ordered by when each began
        return {"entries": entries, "left_out": self.left_out}


class Timelines:
    """The relay's timelines: every active run's, and the last ``keep`` finished runs' (oldest dropped first)."""

    def __init__(self, keep: int = 1000) -> None:
        self.keep = keep
        self._active: dict[str, Timeline] = {}
        self._finished: OrderedDict[str, Timeline] = OrderedDict()

    def open(self, run: str) -> Timeline:
        """A new timeline for ``run`` (opened here, or resumed: ``resumed`` when one was kept of it)."""
        timeline = Timeline(run)
        timeline.mark("resumed" if run in self._finished else "opened")
        self._finished.pop(run, None)
        self._active[run] = timeline
        return timeline

    def close(self, run: str, status: str | None) -> None:
        """The run left the relay: ``ended`` with its report's status (None: stopped unfinished here)."""
        timeline = self._active.pop(run, None)
        if timeline is None:
            return
        timeline.mark("ended" if status is not None else "stopped", status or "")
        self._finished[run] = timeline
        while len(self._finished) > self.keep:
            self._finished.popitem(last=False)

    def get(self, run: str) -> Timeline | None:
        """``run``'s timeline, active or kept (None: not known here)."""
        return self._active.get(run) or self._finished.get(run)

    def forget(self, run: str) -> bool:
        """Drop a finished run's timeline (erasure); True when one was kept."""
        return self._finished.pop(run, None) is not None


TIMELINE: contextvars.ContextVar[Timeline | None] = contextvars.ContextVar("streamrelay_timeline", default=None)
"""The timeline of the run whose tasks are running (the executor appends its calls to it)."""
