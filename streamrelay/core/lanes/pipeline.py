"""The pipeline lane: complete, checked units only — never a preview (shared/DESIGN.md §1, §6).

The ``ui`` lane feeds channels and may still be rewritten; the pipeline lane is what the parent loop acts
on. It carries, per run, an append-only log of units:

- a tool call whose arguments were complete (the ``end`` state, which the normalizers emit at the
  provider's block-stop / arguments-done event), strictly parsed as a JSON object (no ``NaN``, no repeated
  keys) and valid against the tool's JSON Schema when one is configured;
- a ``tool_call.malformed`` unit instead, keeping the raw text, when the arguments were cut off by the end
  of the stream or fail to parse or validate: never a call;
- a sub-agent's final message when its ``end`` arrives (``message``), or the fact that it failed
  (``agent.failed``: no text, since unchecked text is never a unit);
- ``commit`` when the run passed its commit point, and ``run.end`` last.

Every unit has ``index`` (1, 2, …: its position in the run's lane, for resuming a subscription), ``kind``,
``run`` and ``source`` (``null`` for the root agent). The lane holds them typed, as the classes of
:mod:`core.contracts.units` (one class per ``kind``, docs/schema/pipeline-unit.schema.json), built and validated
once when emitted (units are few: never one per delta); they become JSON only at the edges (the HTTP routes, a
case's transcript: ``unit.model_dump(mode="json")``). A producer hands the lane what happened, typed
(:class:`FinishedCall`, :class:`ChildDone`, :class:`StopAsked`; :meth:`PipelineLane.commit`,
:meth:`PipelineLane.close`), and the lane numbers it. Shapes (JSON)::

    {"index": 1, "kind": "tool_call", "run": "r1", "id": "c1", "name": "search", "args": {...}, "source": null}
    {"index": 2, "kind": "tool_call.malformed", "run": "r1", "id": "c2", "name": "write_file",
     "raw": "{\\"pa", "error": "arguments cut off by the end of the stream", "source": null}
    {"index": 3, "kind": "message", "run": "r1", "text": "…", "source": {"agent_id": "researcher", …}}
    {"index": 4, "kind": "agent.failed", "run": "r1", "status": "error", "source": {…}}
    {"index": 5, "kind": "commit", "run": "r1", "source": null}
    {"index": 6, "kind": "run.end", "run": "r1", "status": "ok", "committed": true, "source": null}
"""

from __future__ import annotations

import asyncio
import json
import reprlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NoReturn

from streamrelay.core.contracts.units import (
    AgentFailedUnit,
    ApprovalUnit,
    CommitUnit,
    MalformedToolCallUnit,
    MessageUnit,
    PipelineUnit,
    RunEndUnit,
    SourceLink,
    StopUnit,
    ToolCallUnit,
)
from streamrelay.core.events import EndStatus, Source, ToolCall, ToolCallState, fix_surrogates
from streamrelay.core.json_types import JsonObject, JsonValue

ArgsValidator = Callable[[str, JsonObject], str | None]
"""(tool name, arguments) → what is wrong with them (a sentence), or None when they are valid."""


def _no_constants(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _no_repeats(pairs: list[tuple[str, JsonValue]]) -> JsonObject:
    out: JsonObject = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key[:80]!r} appears twice")
        out[key] = value
    return out


MAX_JSON_DEPTH = 128
"""The deepest nesting of arrays and objects the sidecar takes in one JSON value (``[[1]]`` is 2 levels): its encoder
(orjson) stops at 254 levels, and the sidecar wraps what it takes in its own records (the journal, the live page's
stream), so deeper values were taken and later could not be written (the fuzzer's depth bombs killed the run)."""


class JsonTooDeepError(ValueError):
    """A JSON value nested deeper than :data:`MAX_JSON_DEPTH` (the message says how deep and what to do)."""


def json_depth(value: object, stop_past: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of arrays and objects in ``value`` (a scalar 0, ``[]`` 1, ``{"a": [1]}`` 2), counted no
    further than ``stop_past + 1``. Iterative (no recursion limit), O(size of value)."""
    if not isinstance(value, (list, dict)):
        return 0
    deepest = 1
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:  # type: ignore[attr-defined]
            if isinstance(child, (list, dict)):
                if level + 1 > deepest:
                    deepest = level + 1
                    if deepest > stop_past:
                        return deepest
                stack.append((child, level + 1))
    return deepest


def check_json_depth(raw: str | bytes, value: object) -> None:
    """Refuse ``value`` (parsed from ``raw``) when it nests past :data:`MAX_JSON_DEPTH`. Costs two counts of
    ``raw`` (in C; none for a line of at most that many characters) unless ``raw`` holds more than that many ``[``
    and ``{``, then a walk of ``value``.

    Raises:
        JsonTooDeepError: nested too deeply.
    """
    if len(raw) <= MAX_JSON_DEPTH:
        return  # too short to hold more openers than the limit
    openers = raw.count("[") + raw.count("{") if isinstance(raw, str) else raw.count(b"[") + raw.count(b"{")
    if openers > MAX_JSON_DEPTH and json_depth(value) > MAX_JSON_DEPTH:
        raise _too_deep(f"more than {MAX_JSON_DEPTH}")


def _too_deep(how_deep: str) -> JsonTooDeepError:
    return JsonTooDeepError(
        f"JSON nested too deeply ({how_deep} levels of arrays and objects; the sidecar takes {MAX_JSON_DEPTH}): "
        "flatten that value (send a deep structure as a string, e.g. its JSON text)"
    )


def strict_loads(raw: str | bytes) -> JsonValue:
    """Parse JSON strictly: no ``NaN``/``Infinity`` (RFC 8259 has none), no key twice in one object (which
    value counts would be a guess), nesting at most :data:`MAX_JSON_DEPTH` levels deep.

    Raises:
        ValueError: the text is not strict JSON; the message says why and where. JsonTooDeepError (a ValueError):
            nested too deeply.
    """
    try:
        value: JsonValue = json.loads(raw, parse_constant=_no_constants, object_pairs_hook=_no_repeats)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} at {exc.pos}") from None
    except RecursionError:
        raise _too_deep(f"more than {MAX_JSON_DEPTH}") from None
    except ValueError as exc:
        if "integer string conversion" in str(exc):  # Python's own limit on the digits of an integer
            raise ValueError(f"not accepted: an integer of more than {sys.get_int_max_str_digits()} digits") from None
        raise ValueError(f"not strict JSON: {exc}") from None
    check_json_depth(raw, value)
    return value


def strict_json_object(raw: str) -> JsonObject:
    """Parse tool-call arguments strictly (:func:`strict_loads`) as one JSON object.

    Raises:
        ValueError: the text is not such an object (the message says why and where).
    """
    try:
        value = strict_loads(raw)
    except ValueError as exc:
        raise ValueError(f"arguments are {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True)
class FinishedCall:
    """A tool call the collector finished: complete (``args``, strict and valid: a ``tool_call`` unit), or never a
    call (``error`` says why, ``raw`` keeps its text: a ``tool_call.malformed`` unit)."""

    id: str
    name: str | None
    source: Source | None
    args: JsonObject | None = None
    """The arguments: one strict JSON object, as the agent sent it (None when malformed)."""
    raw: str = ""
    error: str | None = None
    approval: str | None = None
    """The approval a person gave before the call was let onto the lane (:mod:`core.lanes.hold`), else None."""

    @property
    def malformed(self) -> bool:
        return self.error is not None


@dataclass(frozen=True, slots=True)
class ChildDone:
    """A sub-agent ended: its complete final ``text`` when ``status`` is ``ok`` (a ``message`` unit), else the fact
    that it failed (an ``agent.failed`` unit: unchecked text is never a unit)."""

    source: Source
    status: EndStatus
    text: str
    sources: tuple[tuple[str | None, str | None], ...] = ()
    """``(url, title)`` of each source it cited, deduplicated, in order of first appearance."""


@dataclass(frozen=True, slots=True)
class StopAsked:
    """A person stopped the run (:mod:`core.run.stop`): a ``stop`` unit, ``by`` who and ``reason`` when given."""

    by: str | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class ApprovalDecided:
    """An approval was decided (:mod:`core.run.approvals`): an ``approval`` unit."""

    id: str
    decision: Literal["approved", "denied", "expired"]
    approved: bool
    by: str | None
    at: float
    call: str | None = None
    """The tool call it held (:mod:`core.lanes.hold`), else None."""


UnitBody = FinishedCall | ChildDone | StopAsked | ApprovalDecided
"""What a producer hands :meth:`PipelineLane.emit`: the lane makes it a unit (its ``index``, ``run``)."""


@dataclass
class _OpenCall:
    id: str
    name: str | None
    source: Source | None
    parts: list[str] = field(default_factory=list)


class ToolCallCollector:
    """Collects tool-call fragments per (source, call id) and turns complete calls into units.

    Args:
        validator: checks a complete call's arguments against its tool's JSON Schema (None: no schemas).
    """

    __slots__ = ("_open", "_validator")

    def __init__(self, validator: ArgsValidator | None = None) -> None:
        self._validator = validator
        self._open: dict[str, _OpenCall] = {}

    def feed(self, event: ToolCall) -> FinishedCall | None:
        """Take one fragment; return the call it completes, if any."""
        key = f"{event.source.key}\x00{event.id}" if event.source is not None else event.id
        call = self._open.get(key)
        if call is None:
            call = self._open[key] = _OpenCall(event.id, event.name, event.source)
        if event.name and not call.name:
            call.name = event.name
        if event.args_delta:
            call.parts.append(event.args_delta)
        if event.state is not ToolCallState.END:
            return None
        del self._open[key]
        raw = "".join(call.parts)
        if event.args is not None:
            args = event.args
        else:
            try:
                args = strict_json_object(raw) if raw.strip() else {}
            except ValueError as exc:
                return _malformed(call, raw, str(exc))
        if (unfit := _not_strict(args)) is not None:
            return _malformed(call, raw or _shown(args), f"arguments are not strict JSON: {unfit}")
        problem = self._validator(call.name or "", args) if self._validator is not None else None
        if problem is not None:
            return _malformed(call, raw or json.dumps(args, ensure_ascii=False), problem)
        return FinishedCall(call.id, call.name, call.source, args)

    def close(self) -> list[FinishedCall]:
        """End of the run: every call still open was cut off; each becomes a malformed unit."""
        out = [_cut_off(c) for c in self._open.values()]
        self._open.clear()
        return out

    def close_source(self, source: Source) -> list[FinishedCall]:
        """A sub-agent ended: its calls still open were cut off."""
        keys = [k for k, c in self._open.items() if c.source is not None and c.source.key == source.key]
        return [_cut_off(self._open.pop(k)) for k in keys]


def _not_strict(args: JsonObject) -> str | None:
    """Why ``args`` is not what strict JSON would give (NaN, nested too deeply, a lone surrogate in a key or a
    string: no reader of the unit could decode it), or None."""
    try:
        json.dumps(args, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "a key or a string holds a lone surrogate (half a UTF-16 pair: not valid Unicode)"
    except (ValueError, RecursionError) as exc:
        return str(exc)
    return None


def _shown(args: JsonObject) -> str:
    """``args`` shown in a malformed unit: its repr cut to 1,000 characters (shallower when it nests too deeply)."""
    try:
        return repr(args)[:1000]
    except RecursionError:
        return reprlib.repr(args)


def _cut_off(call: _OpenCall) -> FinishedCall:
    return _malformed(call, "".join(call.parts), "arguments cut off by the end of the stream")


def _malformed(call: _OpenCall, raw: str, error: str) -> FinishedCall:
    # the unit must encode: half a UTF-16 pair becomes U+FFFD
    return FinishedCall(call.id, call.name, call.source, raw=fix_surrogates(raw), error=error)


class PipelineLane:
    """One run's pipeline lane: an append-only log of units that subscribers read from any position.

    Memory: the units of one run (tool calls and final messages, never preview text).
    """

    __slots__ = ("_changed", "closed", "held", "run", "units")

    def __init__(self, run: str) -> None:
        self.run = run
        self.units: list[PipelineUnit] = []
        self.closed = False
        self.held: dict[str, tuple[str, str]] = {}
        """Tool calls kept off the lane until a person decides (:mod:`core.lanes.hold`): approval id -> (call id, the
        calling agent's source key, ``root`` for the root); an entry leaves when its approval is decided."""
        self._changed: asyncio.Event | None = None
        """What the readers waiting for the next unit wait on, made by the first of them (None: none waits; an
        :class:`asyncio.Event` is 0.4 KB, and most runs' lanes are never read live); a new one after each wake."""

    def emit(self, body: UnitBody) -> PipelineUnit:
        """Append the unit of ``body`` (numbered here, validated by its class) and wake the readers; return it.

        Raises:
            RuntimeError: the lane is closed (the run ended).
            pydantic.ValidationError: a field the contract refuses (a bug of its producer, which never reaches a
                reader).
        """
        index, run = self._next()
        unit: PipelineUnit
        match body:
            case FinishedCall(error=None, args=args) if args is not None:
                unit = ToolCallUnit(
                    index=index,
                    run=run,
                    id=body.id,
                    name=body.name,
                    args=args,
                    source=body.source,
                    approval=body.approval,
                )
            case FinishedCall(error=error):
                error = error if error is not None else "no arguments"
                unit = MalformedToolCallUnit(
                    index=index, run=run, id=body.id, name=body.name, raw=body.raw, error=error, source=body.source
                )
            case ChildDone(status=EndStatus.OK):
                links = [SourceLink(url=url, title=title) for url, title in body.sources]
                unit = MessageUnit(
                    index=index, run=run, status=body.status, text=body.text, sources=links, source=body.source
                )
            case ChildDone():
                unit = AgentFailedUnit(index=index, run=run, status=body.status, source=body.source)
            case StopAsked():
                unit = StopUnit(index=index, run=run, by=body.by, reason=body.reason, source=None)
            case ApprovalDecided():
                unit = ApprovalUnit(
                    index=index,
                    run=run,
                    id=body.id,
                    decision=body.decision,
                    approved=body.approved,
                    by=body.by,
                    at=body.at,
                    call=body.call,
                    source=None,
                )
        return self._append(unit)

    def commit(self) -> CommitUnit:
        """Emit the ``commit`` unit: the run passed its commit point (:mod:`core.lanes.gate`)."""
        index, run = self._next()
        unit = CommitUnit(index=index, run=run, source=None)
        self._append(unit)
        return unit

    def close(self, status: str, committed: bool) -> None:
        """Emit ``run.end`` and close the lane (idempotent)."""
        if not self.closed:
            index, run = self._next()
            self._append(RunEndUnit(index=index, run=run, status=EndStatus(status), committed=committed, source=None))
            self.closed = True
            self._wake()

    def _next(self) -> tuple[int, str]:
        """The next unit's ``index`` and ``run``.

        Raises:
            RuntimeError: the lane is closed (the run ended).
        """
        if self.closed:
            raise RuntimeError(f"the pipeline lane of run {self.run!r} is closed")
        return len(self.units) + 1, self.run

    def _append(self, unit: PipelineUnit) -> PipelineUnit:
        self.units.append(unit)
        self._wake()
        return unit

    def after(self, index: int) -> list[PipelineUnit]:
        """The units after position ``index`` (0: all)."""
        return self.units[max(0, index) :]

    async def wait(self, index: int) -> list[PipelineUnit]:
        """The units after ``index``, waiting for at least one unless the lane is closed ([] then)."""
        while not self.closed and len(self.units) <= index:
            if (event := self._changed) is None:
                event = self._changed = asyncio.Event()
            await event.wait()
        return self.after(index)

    def _wake(self) -> None:
        if (event := self._changed) is not None:
            event.set()
            self._changed = None
