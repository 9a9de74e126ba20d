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
:meth:`core.run.monitor.RunMonitor.record` gives; and the lane's units), the report's JSON, its last ``seq`` and its
monitor's SSE epoch and last id are kept as one ``bytes``: zlib-compressed with a preset dictionary of the keys and
words such documents repeat (:data:`ZDICT`), read back as objects when asked for. Besides it a finished run holds one
small object (:class:`Finished`: its id, the bytes, the ledger) and its registry entry: about 0.6 KB for a run of the
recorded 8.5k Markdown answer (bench/bench_memory.py; 1.1 KB when report, record, epoch and counts were objects of
their own).

Bounded three times: at most ``keep`` runs, at most ``budget_chars`` characters of text over all of them (the
characters of what each keeps as text, its lane's units included, measured once when the run ends), and at most
``budget_bytes`` bytes over all of them (:meth:`Finished.measure`): a client inside its limits can make each of its
runs hold about ``max_chars_per_run`` characters, so a count alone would let 10,000 finished runs hold gigabytes. The
oldest go first; a report asked for later is rebuilt from the ledger.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import struct
import sys
import time
import zlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from streamrelay.core.contracts.units import MessageUnit, PipelineUnit, parse_unit
from streamrelay.core.json_types import JsonObject
from streamrelay.core.lanes.pipeline import PipelineLane
from streamrelay.core.records.ledger import Ledger, PartRecord
from streamrelay.core.records.report import DeliveryReport, SlotRole
from streamrelay.core.run.live import AnswerLive, Live, ResetLive, from_wire
from streamrelay.core.run.monitor import MonitorRecord, reset_event, resume_after

_log = logging.getLogger("streamrelay.finished")

RUN_OVERHEAD_BYTES = 512
"""Bytes a finished run holds besides its ``bytes`` (:class:`Finished` itself and its registry entry): about 0.2 KB in
a tracemalloc snapshot diff over finished runs of the recorded Markdown answer; rounded up."""
ZDICT = (
    b'{"run":"","channel":"","done":true,"status":"delivered","end_status":"ok","confirmed":0,"uncertain":0,'
    b'"failed":0,"unsent":0,"media":0,"media_parts":0,"degraded":false,"message_ids":[],"parts":[{"slot":0,'
    b'"role":"answer","state":"acked","message_id":"","chars":0,"degraded":false,"error":null}],"errors":[],'
    b'"gaps":[]}\n{"state":{"run":"","channel":"","platform":"","mode":"preview","started_at":0,"rate_limited":0,'
    b'"final":true,"ended":"ok","delivery":"delivered","answer":"","agents":{},"parts":{"":{"channel":"","part":0,'
    b'"role":"answer","state":"edited","message_id":""}},"timeline":[{"id":0,"run":"","seq":0,"ts":0,'
    b'"type":"decision","what":"commit"}]},"tail":[{"id":0,"run":"","seq":0,"ts":0,"type":"delivery","channel":"",'
    b'"part":0,"role":"answer","state":"sent","message_id":""},{"id":0,"run":"","seq":0,"ts":0,"type":"end",'
    b'"status":"ok","delivery":"delivered"}],"answer":[],"crc":0,"parts":{},"agents":{},"units":[{"index":1,'
    b'"kind":"commit","run":"","source":null},{"index":2,"kind":"run.end","run":"","status":"ok","committed":true,'
    b'"source":null}],"closed":true}'
)
"""zlib's preset dictionary for a finished run's bytes: the keys and words its report and document repeat, so a
document of a few hundred bytes compresses as well as a long one would (about 0.25 KB less a run). In memory only:
nothing compressed with it is written anywhere."""
_COUNT = struct.Struct("<I")
"""The ``bytes``' header: the characters of its text (for the budgets), then the compressed text."""
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
        """Its JSON document (compact, on one line; a lone surrogate a text may hold stays one, as the run had it)."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))

    @staticmethod
    def read(document: str) -> Kept:
        """The :meth:`document` ``document``, checked. O(its size).

        Raises:
            pydantic.ValidationError: it is not such a document (a field missing or of another type).
        """
        return _KEPT.validate_python(json.loads(document))

    def lane_units(self) -> list[PipelineUnit]:
        """Its lane's units, typed."""
        return [parse_unit(unit) for unit in self.units]


_KEPT: TypeAdapter[Kept] = TypeAdapter(Kept)


def _pack(report: str, meta: list[object], document: str) -> bytes:
    """One ``bytes`` of a finished run's report JSON, its ``meta`` (last ``seq``, epoch, last id) and its document:
    :data:`_COUNT` (the characters of the three), then their lines compressed with :data:`ZDICT`."""
    text = "\n".join((report, json.dumps(meta, separators=(",", ":")), document))
    packer = zlib.compressobj(6, zdict=ZDICT)
    data = text.encode("utf-8", "surrogatepass")  # a lone surrogate passes, never an error
    return _COUNT.pack(len(text)) + packer.compress(data) + packer.flush()


def _unpack(blob: bytes) -> list[str]:
    """The three lines :func:`_pack` made. O(their size)."""
    unpacker = zlib.decompressobj(zdict=ZDICT)
    data = unpacker.decompress(memoryview(blob)[_COUNT.size :]) + unpacker.flush()
    return data.decode("utf-8", "surrogatepass").split("\n", 2)


@dataclass(eq=False, slots=True)
class Finished:
    """What stays in memory of a finished run (module docstring): its id, one ``bytes`` (:func:`_pack`) and the
    ledger its texts are in; every other value is read back from the bytes when asked for (O(their size)).

    Attributes:
        run: the run.
    """

    run: str
    _blob: bytes
    _ledger: Ledger

    def _meta(self) -> list[Any]:
        meta: list[Any] = json.loads(_unpack(self._blob)[1])
        return meta

    @property
    def last_seq(self) -> int | None:
        """Its last ``seq`` (None: it used none)."""
        last: int | None = self._meta()[0]
        return last

    @property
    def epoch(self) -> str:
        """Its monitor's SSE epoch."""
        return str(self._meta()[1])

    @property
    def last_id(self) -> int:
        """Its monitor's last event id."""
        return int(self._meta()[2])

    @property
    def chars(self) -> int:
        """Characters of text it keeps (its lane's units and its report included), for the budgets."""
        count: int = _COUNT.unpack_from(self._blob)[0]
        return count

    @property
    def size(self) -> int:
        """Bytes it holds, about: its ``bytes`` and :data:`RUN_OVERHEAD_BYTES`."""
        return RUN_OVERHEAD_BYTES + sys.getsizeof(self._blob)

    def document(self) -> str:
        """Everything it keeps, as text (its report's JSON, its meta, its document: three lines)."""
        return "\n".join(_unpack(self._blob))

    @property
    def report(self) -> DeliveryReport:
        """Its delivery report (a new object each time). O(its size)."""
        return DeliveryReport.model_validate_json(_unpack(self._blob)[0])

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
        return Kept.read(_unpack(self._blob)[2])

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

    def corrected(self, text: str, ts: float) -> Finished:
        """This run as a correction left it (docs/corrections.md): its answer ``text`` (kept as it is: no ledger part
        holds it), and one more live event, an ``answer`` with ``reset`` and ``final`` carrying it, for the watchers
        (its id the next one: a page following the run applies it, a page loaded later gets it in its ``reset``).
        O(its size)."""
        report, meta, document = _unpack(self._blob)
        kept = Kept.read(document)
        last_seq, epoch, last_id = json.loads(meta)
        last_id = int(last_id) + 1
        event = AnswerLive(id=last_id, run=self.run, seq=last_id, ts=ts, text=text, reset=True, final=True)
        state = {**kept.state, "final": True}
        changed = dataclasses.replace(
            kept, state=state, answer=[text] if text else [], crc=_crc(text), tail=[*kept.tail, event.wire()]
        )
        blob = _pack(report, [last_seq, epoch, last_id], changed.document())
        return Finished(self.run, blob, self._ledger)


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
    blob = _pack(report.model_dump_json(), [last_seq, record.epoch, record.last_id], document)
    return Finished(str(record.state["run"]), blob, ledger)


class FinishedMonitor:
    """A finished run's live events for a watcher that comes after its end (the reading side of
    :class:`core.run.monitor.RunMonitor`): its last events exactly, else one ``reset`` with its state, texts read back
    from the ledger."""

    def __init__(self, record: Finished) -> None:
        self._record = record
        self.run = record.run
        _, self.epoch, self.last_id = record._meta()
        self.closed = True

    def sse_id(self, event: Live) -> str:
        """The SSE id of ``event``: ``<epoch>.<id>``."""
        return f"{self.epoch}.{event.id}"

    def ended_at(self) -> float | None:
        """When the run ended (its ``end`` event's ``ts``, wall-clock Unix seconds; None when its kept events no
        longer hold it): how long a page follows its corrections counts from it. O(its size)."""
        for event in reversed(self._record.kept().tail):
            ts = event.get("ts")
            if event.get("type") == "end" and isinstance(ts, int | float):
                return float(ts)
        return None

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
