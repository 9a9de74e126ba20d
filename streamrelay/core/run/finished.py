"""What the relay keeps in memory of finished runs, for readers that come after the end (a late report, a parent loop
reading its lane, a watcher opening the page): their report, pipeline lane and last ``seq``, and of their live monitor
only what has no text of its own, with *references* into the ledger for its texts. Not the answer.

The answer a finished run's watchers get (the state's ``answer`` of a ``reset``) is what its answer parts showed: the
ledger keeps each part's acknowledged text (``PartRecord.shown``), and the run keeps the answer as pieces of them,
``[slot, start, end]``, with the few characters no part holds kept as they are (the blank line a cut dropped; the fence
a cut closed and reopened is in the parts, not in the answer, and is left out). A web part's text is its ledger slot,
and a sub-agent's text the lane's ``message`` unit that holds it. A watcher after the end reads them back (one
:meth:`core.records.ledger.Ledger.parts`); a CRC-32 of the answer says whether the pieces still make it (else the
watcher gets the answer parts' texts as they are). A run that ended without its parts in the ledger (stopped by a
shutdown) keeps its answer as it is, counted in the budgets below.

The rest (the state's fields and timeline, a sub-agent's text no unit holds, the last events: what
:meth:`core.run.monitor.RunMonitor.record` gives; and the lane's units) is kept as one compressed JSON document, the
report as its JSON; both are read back as objects when asked for. A finished run of the recorded 8.5k Markdown answer
holds about 2 KB (bench/bench_memory.py).

Bounded three times: at most ``keep`` runs, at most ``budget_chars`` characters of text over all of them (the
characters of what each keeps as text, its lane's units included, measured once when the run ends), and at most
``budget_bytes`` bytes over all of them (:meth:`Finished.measure`): a client inside its limits can make each of its
runs hold about ``max_chars_per_run`` characters, so a count alone would let 10,000 finished runs hold gigabytes. The
oldest go first; a report asked for later is rebuilt from the ledger.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import zlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import TypeAdapter

from streamrelay.core.contracts.units import MessageUnit, PipelineUnit, parse_unit
from streamrelay.core.json_types import JsonObject
from streamrelay.core.lanes.pipeline import PipelineLane
from streamrelay.core.records.ledger import Ledger, PartRecord
from streamrelay.core.records.report import DeliveryReport, SlotRole
from streamrelay.core.run.live import Live, ResetLive, from_wire
from streamrelay.core.run.monitor import MonitorRecord, reset_event, resume_after

_log = logging.getLogger("streamrelay.finished")

RUN_OVERHEAD_BYTES = 1024
"""Bytes a finished run holds besides what :meth:`Finished.measure` counts (its objects and their registry entry):
about 0.6 KB in a tracemalloc snapshot diff over finished runs of the recorded Markdown answer; rounded up."""
PROBE_CHARS = 32
"""Characters of the answer looked for in a part to find where the part goes on with it."""

Piece = list[int] | str
"""A piece of a finished run's text: ``[slot, start, end]`` (that range of a ledger part's text), or its characters."""


def references(text: str, parts: Sequence[tuple[int, str]]) -> list[Piece]:
    """``text`` as pieces of ``parts`` (``(slot, text)`` in the order shown) where they hold it, else as it is.

    Each part is searched, from where the last piece ended, for the next characters of ``text``, or for those after
    the whitespace a cut may have dropped (:func:`_find`); a match is extended as far as the two agree, and one shorter
    than :data:`PROBE_CHARS` is taken only when it reaches the end of the part or of the text. So markers a part has
    and ``text`` has not (a fence closed at a cut and reopened) fall between pieces, and the pieces always join to
    ``text`` exactly. O(len(text) + the parts' length) per part and probe length in the worst case.
    """
    pieces: list[Piece] = []
    pos, end = 0, len(text)
    for slot, shown in parts:
        at = 0
        while pos < end:
            skip = pos
            while skip < end and skip - pos < PROBE_CHARS and text[skip].isspace():
                skip += 1
            found, skip = _find(shown, at, text, pos, skip)
            if found < 0:
                break
            length = _agree(shown, found, text, skip)
            if length < PROBE_CHARS and found + length < len(shown) and skip + length < end:
                break  # a few characters that happen to be there: not where the part goes on with the text
            if skip > pos:
                _literal(pieces, text[pos:skip])
            pieces.append([slot, found, found + length])
            pos, at = skip + length, found + length
    if pos < end:
        _literal(pieces, text[pos:])
    return pieces


def _find(shown: str, at: int, text: str, pos: int, skip: int) -> tuple[int, int]:
    """Where in ``shown`` (from ``at``) the characters of ``text`` go on, from ``pos`` or else from ``skip`` (after
    whitespace): the first place that holds the next :data:`PROBE_CHARS` of them, or as many as ``shown`` has left,
    halved down to one. Returns that place and where in ``text`` it begins ((-1, pos): none)."""
    size = min(PROBE_CHARS, len(shown) - at, len(text) - pos)
    while size > 0:
        for start in (pos, skip) if skip > pos else (pos,):
            found = shown.find(text[start : start + size], at)
            if found >= 0:
                return found, start
        size //= 2
    return -1, pos


def _literal(pieces: list[Piece], text: str) -> None:
    if pieces and isinstance(pieces[-1], str):
        pieces[-1] += text
    else:
        pieces.append(text)


def _agree(a: str, i: int, b: str, j: int) -> int:
    """How many characters ``a[i:]`` and ``b[j:]`` have in common from their start. O(n log n) in C-speed compares."""
    low, high = 0, min(len(a) - i, len(b) - j)
    if a[i : i + high] == b[j : j + high]:
        return high
    while low < high:  # a[i:i+low] == b[j:j+low] holds; a[i:i+high] differs
        mid = (low + high + 1) // 2
        if a[i : i + mid] == b[j : j + mid]:
            low = mid
        else:
            high = mid - 1
    return low


def rebuild(pieces: Sequence[Piece], shown: dict[int, str]) -> str:
    """The text ``pieces`` make of the parts' texts ``shown`` by slot (a missing part gives nothing)."""
    return "".join(p if isinstance(p, str) else shown.get(p[0], "")[p[1] : p[2]] for p in pieces)


def _slots(pieces: Sequence[Piece]) -> set[int]:
    return {p[0] for p in pieces if isinstance(p, list)}


def _objects(value: object) -> dict[str, dict[str, object]]:
    """The JSON objects by key a state's ``agents`` or ``parts`` holds (``value``: that member of the state)."""
    if not isinstance(value, dict):
        return {}
    return {key: member for key, member in value.items() if isinstance(key, str) and isinstance(member, dict)}


def _crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def _answer_parts(parts: Sequence[PartRecord]) -> list[tuple[int, str]]:
    return sorted((p.slot, p.shown) for p in parts if p.role is SlotRole.ANSWER and p.shown)


@dataclass(frozen=True, slots=True)
class Kept:
    """What a finished run keeps of its monitor and lane, between its end and a late reader: one JSON document,
    compressed (:meth:`document`; read back, checked, with :meth:`read`).

    Attributes:
        state: its monitor's state without texts (:attr:`core.run.monitor.MonitorRecord.state`).
        tail: its last events' JSON objects (:meth:`core.run.live.Live.wire`).
        answer: its answer as pieces (:func:`references`). crc: the CRC-32 of the answer (:func:`_crc`).
        parts: each web part's text by key: a ledger slot, or the text. agents: each sub-agent's text by key: the
            index of the lane's ``message`` unit holding it, or the text.
        units: its lane's units' JSON objects. closed: whether its lane was closed.
    """

    state: Mapping[str, object]
    tail: list[JsonObject]
    answer: list[Piece]
    crc: int
    parts: dict[str, int | str]
    agents: dict[str, int | str]
    units: list[JsonObject]
    closed: bool

    def document(self) -> str:
        """Its JSON document (compact; a lone surrogate a text may hold stays one, as the run had it)."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))

    @staticmethod
    def read(blob: bytes) -> Kept:
        """The document ``blob`` holds (zlib-compressed UTF-8 of :meth:`document`), checked. O(its size).

        Raises:
            pydantic.ValidationError: it is not such a document (a field missing or of another type).
        """
        return _KEPT.validate_python(json.loads(zlib.decompress(blob).decode("utf-8", "surrogatepass")))

    def lane_units(self) -> list[PipelineUnit]:
        """Its lane's units, typed."""
        return [parse_unit(unit) for unit in self.units]


_KEPT: TypeAdapter[Kept] = TypeAdapter(Kept)


@dataclass(eq=False, slots=True)
class Finished:
    """What stays in memory of a finished run (module docstring).

    Attributes:
        run: the run. last_seq: its last ``seq``. epoch, last_id: its monitor's (SSE ids).
        chars: characters of text it keeps as text (its lane's units included). size: bytes it holds, about.
    """

    run: str
    last_seq: int | None
    epoch: str
    last_id: int
    chars: int
    size: int
    _report: bytes
    _kept: bytes
    _ledger: Ledger

    @property
    def report(self) -> DeliveryReport:
        """Its delivery report (a new object each time). O(its size)."""
        return DeliveryReport.model_validate_json(self._report)

    @property
    def monitor(self) -> FinishedMonitor:
        """Its live events for watchers that come after the end."""
        return FinishedMonitor(self)

    @property
    def lane(self) -> PipelineLane:
        """Its pipeline lane as it was at the end, with every unit (a new object each time). O(its units)."""
        kept = self.kept()
        lane = PipelineLane(self.run)
        lane.units = kept.lane_units()
        lane.closed = kept.closed
        return lane

    def kept(self) -> Kept:
        """What it keeps of its monitor and its lane (:class:`Kept`). O(its size)."""
        return Kept.read(self._kept)

    async def state(self) -> dict[str, object]:
        """Its monitor's state as it was at the end, texts read back from the ledger (module docstring): the state's
        JSON object, as :attr:`core.run.monitor.RunMonitor.state` gives it."""
        kept = self.kept()
        shown: dict[int, str] = {}
        refers = any(isinstance(p, list) for p in kept.answer)
        if refers or any(isinstance(slot, int) for slot in kept.parts.values()):
            try:
                records = await self._ledger.parts(self.run)
            except Exception:
                _log.exception("run %s: its parts could not be read from the ledger", self.run)
                records = []
            shown = {p.slot: p.shown for p in records if p.shown is not None}
        answer = rebuild(kept.answer, shown)
        if refers and _crc(answer) != kept.crc:
            _log.warning("run %s: its ledger parts no longer make its answer; its answer parts are shown", self.run)
            answer = "".join(text for slot, text in sorted(shown.items()) if slot in _slots(kept.answer))
        state = dict(kept.state)
        state["answer"] = answer
        units = {unit.index: unit.text for unit in kept.lane_units() if isinstance(unit, MessageUnit)}
        agents = {k: units.get(v, "") if isinstance(v, int) else v for k, v in kept.agents.items()}
        state["agents"] = {k: {**v, "text": agents.get(k, "")} for k, v in _objects(state.get("agents")).items()}
        texts = {k: shown.get(v, "") if isinstance(v, int) else v for k, v in kept.parts.items()}
        state["parts"] = {
            k: {**v, **({"text": texts[k]} if k in texts else {})} for k, v in _objects(state.get("parts")).items()
        }
        return state

    def measure(self) -> tuple[int, int]:
        """``(characters, bytes)`` it holds (class docstring)."""
        return self.chars, self.size


def finished_record(
    report: DeliveryReport,
    lane: PipelineLane,
    record: MonitorRecord,
    last_seq: int | None,
    ledger: Ledger,
    parts: Sequence[PartRecord] | None,
) -> Finished:
    """What to keep of a run that ended (module docstring).

    Args:
        report: its delivery report. lane: its pipeline lane. record: its monitor's record. last_seq: its last seq.
        ledger: where its parts are. parts: its parts as the ledger holds them now (None: not read, the texts are
            kept as they are).

    O(its texts and parts).
    """
    answer_parts = _answer_parts(parts or [])
    pieces: list[Piece] = (
        references(record.answer, answer_parts) if answer_parts else ([record.answer] if record.answer else [])
    )
    shown = {p.slot: p.shown for p in parts or [] if p.shown is not None}
    texts: dict[str, int | str] = {}
    for key, text in record.parts.items():
        row, _, part = key.rpartition("/")
        slot = int(part) if part.isdigit() and row == report.channel else None
        texts[key] = slot if slot is not None and shown.get(slot) == text else text
    messages = {unit.text: unit.index for unit in lane.units if isinstance(unit, MessageUnit)}
    agents: dict[str, int | str] = {
        key: messages.get(text, text) if text else text for key, text in record.agents.items()
    }
    document = Kept(
        state=record.state,
        tail=[event.wire() for event in record.tail],
        answer=pieces,
        crc=_crc(record.answer),
        parts=texts,
        agents=agents,
        units=[unit.model_dump(mode="json") for unit in lane.units],
        closed=lane.closed,
    ).document()
    blob = zlib.compress(document.encode("utf-8", "surrogatepass"), 6)  # a lone surrogate passes, never an error
    report_json = report.model_dump_json().encode()
    chars = len(document) + len(report_json)
    size = RUN_OVERHEAD_BYTES + sys.getsizeof(blob) + sys.getsizeof(report_json)
    return Finished(
        str(record.state["run"]), last_seq, record.epoch, record.last_id, chars, size, report_json, blob, ledger
    )


class FinishedMonitor:
    """A finished run's live events for a watcher that comes after its end (the reading side of
    :class:`core.run.monitor.RunMonitor`): its last events exactly, else one ``reset`` with its state, texts read back
    from the ledger."""

    def __init__(self, record: Finished) -> None:
        self._record = record
        self.run = record.run
        self.epoch = record.epoch
        self.last_id = record.last_id
        self.closed = True

    def sse_id(self, event: Live) -> str:
        """The SSE id of ``event``: ``<epoch>.<id>``."""
        return f"{self.epoch}.{event.id}"

    def resume_after(self, last_event_id: str | None) -> int:
        """As :meth:`core.run.monitor.RunMonitor.resume_after`."""
        return resume_after(self.epoch, last_event_id)

    async def wait(self, last_id: int) -> list[Live]:
        """The events after ``last_id``: none when it is the last, the kept ones when they reach back to it, else one
        ``reset`` (as :meth:`core.run.monitor.RunMonitor.since`)."""
        if last_id == self.last_id:
            return []
        tail = [from_wire(event) for event in self._record.kept().tail]
        first = tail[0].id if tail else self.last_id + 1
        if 0 <= last_id < self.last_id and last_id >= first - 1:
            return [event for event in tail if event.id > last_id]
        return [await self.reset()]

    async def reset(self) -> ResetLive:
        """A ``reset`` event with the run's state (its texts read back from the ledger)."""
        return reset_event(self.run, self.last_id, time.time(), await self._record.state())


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

    def __setitem__(self, run: str, finished: Finished) -> None:
        if run in self:
            self.pop(run)
        super().__setitem__(run, finished)
        self.chars += finished.chars
        self.bytes += finished.size
        while len(self) > 1 and (
            len(self) > self.keep or self.chars > self.budget_chars or self.bytes > self.budget_bytes
        ):
            self.popitem(last=False)

    def _forget(self, finished: Finished) -> None:
        self.chars -= finished.chars
        self.bytes -= finished.size

    def __delitem__(self, run: str) -> None:
        finished = self[run]
        super().__delitem__(run)
        self._forget(finished)

    def popitem(self, last: bool = True) -> tuple[str, Finished]:
        run, finished = super().popitem(last=last)
        self._forget(finished)
        return run, finished

    def pop(self, run: str, *default: Finished | None) -> Finished | None:  # type: ignore[override]
        if run not in self:
            return default[0] if default else super().pop(run)
        finished = super().pop(run)
        self._forget(finished)
        return finished
