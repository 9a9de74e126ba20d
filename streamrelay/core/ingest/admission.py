"""Admission: whether one input line is taken, and what it means before the next line is read.

A line is validated alone (a bad line fails alone with an :class:`~core.errors.IngestError`); a ``run.start``
creates the run (its controller and stages, not opened yet) so the lines after it in the same batch find it;
a raw provider line is normalized by its run's normalizer; a repeat (a ``seq`` already taken, any line of a run
that already ended, here or before a restart) is acknowledged and dropped. The relay journals what was taken.

The common lines are taken in groups, without an await per line: a batch's plain text deltas of one open run
(:meth:`Admission.take_deltas`: the ``text`` event's own validator, one count of the group against the client's
limits) and a raw stream's lines (:meth:`Admission.take_raw`). A group ends before a line that would be dropped or
refused, or that is of another kind or run, and :meth:`Admission.accept` takes that line alone: every result and
error is the one the line gets alone (tests/unit/test_ingest_fast_path.py holds both paths to that).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from operator import attrgetter, itemgetter
from typing import Any

from pydantic import BaseModel, ValidationError

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import Clock
from streamrelay.core.errors import IngestError, OwnershipLostError
from streamrelay.core.events import (
    EVENT_TYPES,
    MAX_SEQ,
    ApprovalDecision,
    ApprovalExpiry,
    ApprovalRequest,
    End,
    Event,
    Lane,
    Place,
    ProviderFormat,
    RunEvent,
    RunStart,
    Stop,
    TextDelta,
    TextEvent,
    TextMode,
    ToolCall,
    ToolCallState,
    Visibility,
    parse_event,
)
from streamrelay.core.ingest.clients import ClientBook, ClientLimits
from streamrelay.core.ingest.sequencer import SeqFloor, SeqGate
from streamrelay.core.lanes.gate import ActionCatalog
from streamrelay.core.lanes.hold import hold_id, hold_request, needs_person
from streamrelay.core.lanes.pipeline import ArgsValidator, FinishedCall, ToolCallCollector
from streamrelay.core.normalize import Normalizer, make_normalizer
from streamrelay.core.normalize.a2a import RESULT_KINDS, A2ANormalizer
from streamrelay.core.normalize.base import JsonObject
from streamrelay.core.policy import apply_overrides
from streamrelay.core.records.journal import Journal
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.approvals import (
    Approval,
    DecisionRefused,
    check_request,
    decide,
    forget_approvals,
    take_decision,
    take_expiry,
)
from streamrelay.core.run.controller import IDLE_CLOSED, IDLE_REFUSAL, RunController, idle_refusal
from streamrelay.core.run.fanout import FanoutController, place_ledger_run, place_row_name, place_start
from streamrelay.core.run.inbox import Inbox
from streamrelay.core.run.monitor import RunMonitor
from streamrelay.core.run.stop import STOPPED_ERROR, is_stop_note
from streamrelay.core.run.worker import ActiveRun


def raw_seq(obj: JsonObject) -> int | None:
    """The ``seq`` a raw stream line carries beside the stream's own fields (none of the seven formats uses the
    key), or None.

    Raises:
        IngestError: it is not an integer from 0 to :data:`core.events.MAX_SEQ`.
    """
    seq = obj.get("seq")
    if seq is None:
        return None
    if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= MAX_SEQ:
        raise IngestError(f"'seq' of a raw stream line must be an integer from 0 to {MAX_SEQ}, got {seq!r}")
    return seq


@dataclass(frozen=True)
class LineResult:
    """What became of one accepted line: ``events`` normalized events taken, or ``dropped`` (why the line was
    acknowledged without effect: a repeated ``seq``, a re-sent line of a run that already ended)."""

    events: int = 0
    dropped: str | None = None


def ended_note(run: str) -> str:
    """Why a re-sent line of ``run`` (a run key) that already ended is acknowledged and dropped."""
    return f"run {run!r} already ended: its lines are acknowledged and dropped"


ONE_EVENT = LineResult(events=1)
"""What most lines become (one result shared: it is frozen): each line of a :meth:`Admission.take_deltas` group."""

_EVENTS = (LineResult(events=0), ONE_EVENT, LineResult(events=2), LineResult(events=3))
"""The results of lines taken as a few events (shared: they are frozen)."""

_log = logging.getLogger("streamrelay.relay")


def line_failed(exc: Exception, run_hint: str | None) -> IngestError:
    """The 422 of a line that could not be admitted because of a bug of ours (logged with ``exc``): it fails alone,
    never its batch nor the journal's 503."""
    _log.error("a line could not be admitted (run hint %s)", run_hint, exc_info=exc)
    return IngestError(f"this line could not be taken ({type(exc).__name__}): report it", status=422)


_DELTA = TextMode.DELTA
"""Looked up once (an enum member's lookup on its class is a call on CPython 3.11)."""

_validate_text: Callable[[object], TextEvent] = TextEvent.__pydantic_validator__.validate_python
"""The ``text`` event's own compiled validator: what :func:`core.events.parse_event`'s union picks by ``kind``, without
the union's dispatch (a line it refuses goes to :func:`~core.events.parse_event`, whose message names the field)."""


def _text_event(obj: dict[str, Any], run: str) -> TextEvent | None:
    """The ``text`` event of the line ``obj`` (its ``run`` is ``run``, or it names none), or None when the validator
    refuses it (:func:`~core.events.parse_event` then says why)."""
    try:
        return _validate_text(obj if "run" in obj else {**obj, "run": run})
    except ValidationError:
        return None


_PLAIN_KEYS = frozenset(("kind", "text", "run", "seq", "mode", "message", "lane", "visibility", "source"))
"""The keys of a plain delta line (:func:`_plain_delta`)."""

_UI, _ANSWER = Lane.UI, Visibility.ANSWER
"""Looked up once (as :data:`_DELTA`)."""


def _is(value: object, member: enum.StrEnum, name: str) -> bool:
    """Whether ``value`` is ``member`` or the string ``name`` (its value) itself: what the validator takes unchanged."""
    return value is member or (type(value) is str and value == name)


def _plain_delta(obj: dict[str, Any], run_id: str) -> TextDelta | None:
    """The :class:`~core.events.TextDelta` of the ``text`` line ``obj`` of mode ``delta`` of run ``run_id`` (the
    caller checked those three) when the ``text`` event's validator would take it unchanged: no key but ``kind``,
    ``text``, ``run``, ``seq``, ``mode``, ``message``, ``lane``, ``visibility`` and ``source``; ``kind``, ``text`` and
    ``mode`` of type ``str`` (the mode may be :attr:`~core.events.TextMode.DELTA` itself); ``seq`` absent, null or an
    ``int`` from 0 to :data:`~core.events.MAX_SEQ`; ``message`` absent or an ``int`` >= 0 (strict: never a ``bool``);
    ``lane``, ``visibility`` and ``source`` absent or their defaults (``ui``, ``answer``, null: what a writer of every
    field sends). Else None (the validator then decides, and says why it refuses). O(1) (the line's keys are few: more
    than nine is not plain)."""
    text = obj.get("text")
    if type(text) is not str or type(obj["kind"]) is not str:
        return None
    if len(obj) > 2:  # more than kind and text
        if not _PLAIN_KEYS.issuperset(obj):
            return None
        if (mode := obj.get("mode", _DELTA)) is not _DELTA and type(mode) is not str:
            return None  # (the caller found it equal to "delta")
        if not _is(obj.get("lane", _UI), _UI, "ui") or not _is(obj.get("visibility", _ANSWER), _ANSWER, "answer"):
            return None
        if obj.get("source") is not None:
            return None
    return TextDelta.numbered(run_id, text, obj)


def _delta_of(obj: object, run_id: str, run_hint: str | None) -> TextEvent | TextDelta | None:
    """The ``text`` event of mode ``delta`` of run ``run_id`` the line ``obj`` is (a JSON object, or an event decoded
    and validated in one step: :func:`adapters.ingest_http.lines.decode_text`), or None. A plain line (the common one:
    :func:`_plain_delta`) is taken as a :class:`~core.events.TextDelta`, without pydantic's validation and copy of the
    line (~2.5 µs a line); one HTTP ingest decoded so already (:func:`adapters.ingest_http.lines.decode_delta`) is taken
    as it is."""
    if type(obj) is TextDelta:
        return obj if obj.run == run_id else None
    if type(obj) is TextEvent:
        return obj if obj.mode is _DELTA and obj.run == run_id else None
    if type(obj) is not dict or obj.get("kind") != "text" or obj.get("mode", "delta") != "delta":
        return None  # (a mode equal to "delta" that validates is the delta mode)
    if obj.get("run", run_hint) != run_id:
        return None
    return _plain_delta(obj, run_id) or _text_event(obj, run_id)


_seq_of = attrgetter("seq")
_run_of = attrgetter("run")
_text_of = attrgetter("text")


def _whole_group(
    lines: Sequence[tuple[Any, str | None]],
    start: int,
    run_id: str,
    seqs: SeqFloor,
    last: int | None,
    n_events: int,
    chars: int,
    max_seq: int | None,
    max_events: int,
    max_chars: int,
    window: int,
) -> tuple[list[RunEvent], int, int, int | None] | None:
    """:meth:`Admission.take_deltas`'s group when it is all of ``lines[start:]`` and every line is a
    :class:`~core.events.TextDelta` of ``run_id`` whose ``seq`` is None for all of them or, for all of them, the
    numbers right after the run's ``seq`` floor (``seqs``: none taken above it) in order: the common batch of HTTP
    ingest (:func:`adapters.ingest_http.lines.decode_deltas`), checked with a few passes in C instead of a Python
    step per line. ``last`` (the gate's), ``n_events``, ``chars``, ``max_seq`` are the run's before the group;
    ``max_events``, ``max_chars``, ``window`` its limits. Returns ``(events, n_events, chars, max_seq)`` after the
    group, the floor moved past it, exactly what the loop of :meth:`Admission.take_deltas` gives for these lines;
    None (nothing changed) when the group is not so, or when a line would be refused, dropped or left out (the loop
    then takes the lines one by one and stops where it must). O(lines), in C."""
    events: list[Any] = list(islice(map(itemgetter(0), lines), start, None))
    n = len(events)
    if n < 2 or set(map(type, events)) != {TextDelta} or set(map(_run_of, events)) != {run_id}:
        return None
    if n_events + n > max_events:
        return None
    size = sum(map(len, map(_text_of, events)))
    if chars + size > max_chars:
        return None
    numbers = list(map(_seq_of, events))
    first = numbers[0]
    if first is None:
        if numbers.count(None) != n:
            return None
        return events, n_events + n, chars + size, max_seq
    floor = seqs.floor
    if floor is None or first != floor + 1 or seqs.above or window < 1 or (last is not None and first <= last):
        return None
    if first > (max_seq if max_seq is not None else -1) + window or numbers != list(range(first, first + n)):
        return None
    seqs.floor = first + n - 1
    top = first + n - 1
    return events, n_events + n, chars + size, top if max_seq is None or top > max_seq else max_seq


@dataclass
class Limits:
    """How runs are admitted: ``queue_size`` per run, ``gap_timeout_s`` for ``seq`` gaps, ``idle_s`` before a silent
    run is closed, ``max_active`` runs, ``live_buffer`` events kept for watchers, ``retry_window_s`` of a part's
    calls through an outage (seconds)."""

    queue_size: int = 10_000
    gap_timeout_s: float = 2.0
    idle_s: float = 600.0
    max_active: int = 10_000
    live_buffer: int = 1000
    retry_window_s: float = 600.0


class Admission:
    """Admits lines into runs (see the module docstring).

    Args:
        channels: configured channels by name.
        runs: the active runs (shared with the relay, which removes finished ones).
        finished: ids of runs finished in this process (shared with the relay).
        journal: where finished runs are remembered across restarts.
        ledger: the durable record (a run id used before).
        clock: the injected clock.
        limits: queue, gap, idle and active-run limits.
        validator: checks complete tool calls against their JSON Schemas.
        clients: each client's limits and active runs (a run's client is in its key:
        :func:`core.ingest.clients.split_key`).
        catalog: the action catalog, for the calls a person must approve first (:mod:`core.lanes.hold`).
    """

    def __init__(
        self,
        channels: Mapping[str, ChannelRuntime],
        runs: dict[str, ActiveRun],
        finished: Mapping[str, object],
        journal: Journal,
        ledger: Ledger,
        clock: Clock,
        limits: Limits,
        validator: ArgsValidator | None,
        clients: ClientBook | None = None,
        catalog: ActionCatalog | None = None,
    ) -> None:
        self.channels = channels
        self.catalog = catalog if catalog is not None else ActionCatalog()
        self.clients = clients if clients is not None else ClientBook()
        """The relay calls ``clients.left`` when a run leaves ``runs``."""
        self._starting = 0
        """Starts between their room check and their registration (they hold a slot)."""
        self.runs = runs
        self.finished = finished
        self._journal = journal
        self._ledger = ledger
        self._clock = clock
        self.limits = limits
        self._validator = validator
        self._expiries: set[asyncio.Task[None]] = set()
        """The approvals' expiry timers (:meth:`take_approvals`)."""

    def limits_for(self, run_key: str) -> ClientLimits:
        """The limits of the client that owns the run keyed ``run_key``."""
        return self.clients.limits_for(run_key)

    async def accept(
        self, obj: object, run_hint: str | None, *, replay: bool
    ) -> tuple[ActiveRun | None, list[Event], LineResult]:
        """Validate one line (a decoded JSON value, or an event already typed: :meth:`Relay.submit`, or a plain delta
        HTTP ingest decoded: :func:`adapters.ingest_http.lines.decode_delta`) and apply what must be known before the
        next line (a new run, the normalizer)."""
        if type(obj) is TextDelta:  # taken alone (a repeat, a limit, a run not open): as the event it stands for
            obj = obj.event()
        if isinstance(obj, BaseModel):
            if not isinstance(obj, EVENT_TYPES):
                raise IngestError(f"each line must be a JSON object or an event, got {type(obj).__name__}")
            if run_hint is not None and obj.run != run_hint:
                raise IngestError(f"line names run {obj.run!r} but was posted to run {run_hint!r}")
            return await self._accept_event(obj, replay=replay)
        if not isinstance(obj, dict):
            raise IngestError(f"each line must be a JSON object, got {type(obj).__name__}")
        if run_hint is not None and obj.get("run", run_hint) != run_hint:
            raise IngestError(f"line names run {obj.get('run')!r} but was posted to run {run_hint!r}")
        run_id = obj.get("run", run_hint)
        if "kind" not in obj or self._is_bare_a2a(run_id, obj):
            return await self._accept_raw(run_id, obj, enforce=not replay)
        if run_hint is not None and "run" not in obj:
            obj = {**obj, "run": run_hint}
        return await self._accept_event(parse_event(obj), replay=replay)

    def take_deltas(  # noqa: C901 (one frame: the group's fast path, then its loop, each line's checks inlined)
        self, lines: Sequence[tuple[Any, str | None]], start: int, run_hint: str | None, *, replay: bool
    ) -> tuple[ActiveRun, list[RunEvent], list[LineResult | IngestError]] | None:
        """The fast path of the common line: ``lines[start:]``'s leading plain text deltas of one started run, taken
        as a group (one check of the run, one charge of the group's count and summed length), or None when
        ``lines[start]`` is not one (then :meth:`accept` takes it alone).

        A line belongs to the group when it is a JSON object of ``kind`` ``text`` and ``mode`` ``delta`` (the
        default) of the run its ``run`` (or ``run_hint``) names, active, not stopped, closing or ended, and the
        ``text`` event validator takes it (the one :func:`core.events.parse_event` picks for ``text``, so the event
        is the same), or a :class:`~core.events.TextEvent` of ``mode`` ``delta`` of that run already validated
        (HTTP ingest decodes and validates a text line in one step: :func:`adapters.ingest_http.lines.decode_text`);
        and when it is taken as it would be alone: its ``seq`` (if any) not taken yet and within the
        client's ``seq_window``, and the run's ``max_events_per_run`` and ``max_chars_per_run`` not passed with it.
        The group ends before the first line that is not so: :meth:`accept` then takes it alone and drops it, or
        refuses it with its own error (every message as before). Nothing awaits in here, and nothing a group's line
        is checked against changes before the group is counted: it is taken exactly as its lines one by one. Each
        line of the group is one event (:data:`ONE_EVENT`); O(lines taken).

        Returns:
            ``(run, events, results)``: the run, the group's events, one per line, in order, and each line's result
            (:data:`ONE_EVENT`).
        """
        run = self._delta_run(lines[start][0], run_hint)
        if run is None:
            return None
        run_id = run.run
        usage, seqs, last = run.usage, run.seqs, run.gate.last
        n_events, chars, max_seq = usage.events, usage.chars, usage.max_seq
        max_events, max_chars, window = self._group_limits(run, replay=replay)
        if whole := _whole_group(
            lines, start, run_id, seqs, last, n_events, chars, max_seq, max_events, max_chars, window
        ):
            events, n_events, chars, max_seq = whole
            usage.events, usage.chars, usage.max_seq = n_events, chars, max_seq
            return run, events, [ONE_EVENT] * len(events)
        events = []
        for obj, _ in islice(lines, start, None):
            if (event := _delta_of(obj, run_id, run_hint)) is None:
                break
            seq, size = event.seq, len(event.text)
            if seq is not None:
                if (last is not None and seq <= last) or seqs.taken(seq):
                    break  # a repeat: dropped alone
                if seq > (max_seq if max_seq is not None else -1) + window:
                    break  # refused alone
            if n_events >= max_events or chars + size > max_chars:
                break  # refused alone
            if seq is not None:
                if seq - 1 == seqs.floor and not seqs.above:  # the next in order: what take does, without the call
                    seqs.floor = seq
                else:
                    seqs.take(seq)
                if max_seq is None or seq > max_seq:
                    max_seq = seq
            n_events += 1
            chars += size
            events.append(event)
        if not events:
            return None
        usage.events, usage.chars, usage.max_seq = n_events, chars, max_seq
        return run, events, [ONE_EVENT] * len(events)

    def take_delta(self, obj: object, run_hint: str | None) -> tuple[ActiveRun, RunEvent] | None:
        """:meth:`take_deltas` of a request of the one line ``obj`` (live, never replayed), without a group's lists and
        loop: the run and the line's event, taken (its result :data:`ONE_EVENT`), or None, nothing done, when the line
        is not one the group would take (then :meth:`take_raw` or :meth:`accept` takes it). O(1)."""
        run = self._delta_run(obj, run_hint)
        if run is None or (event := _delta_of(obj, run.run, run_hint)) is None:
            return None
        limits = run.limits if run.limits is not None else self.limits_for(run.run)
        usage, seq, size = run.usage, event.seq, len(event.text)
        if usage.events >= limits.max_events_per_run or usage.chars + size > limits.max_chars_per_run:
            return None  # refused alone
        if seq is not None:
            last, max_seq = run.gate.last, usage.max_seq
            if (last is not None and seq <= last) or run.seqs.taken(seq):
                return None  # a repeat: dropped alone
            if seq > (max_seq if max_seq is not None else -1) + limits.seq_window:
                return None  # refused alone
            run.seqs.take(seq)
            if max_seq is None or seq > max_seq:
                usage.max_seq = seq
        usage.events += 1
        usage.chars += size
        return run, event

    def _delta_run(self, first: object, run_hint: str | None) -> ActiveRun | None:
        """The run a group of :meth:`take_deltas` starting with the line ``first`` goes to, or None (no group: it is
        not a text line, names no active run or another than ``run_hint``, or its run is stopped, closing or ended)."""
        if type(first) is TextDelta or type(first) is TextEvent:
            return self._taking_run(first.run, run_hint)
        if type(first) is not dict or first.get("kind") != "text":
            return None
        return self._taking_run(first.get("run", run_hint), run_hint)

    def _taking_run(self, run_id: object, run_hint: str | None) -> ActiveRun | None:
        """The active run a line names (``run_id``: its ``run``, or ``run_hint``), while it takes lines: None when it
        names another run than ``run_hint``, none active, or one stopped, closing or ended."""
        if run_hint is not None and run_id != run_hint:
            return None
        run = self.runs.get(run_id) if type(run_id) is str else None
        if run is None or run.stopped is not None or run.closing is not None or run.ended:
            return None
        return run

    def _group_limits(self, run: ActiveRun, *, replay: bool) -> tuple[int, int, int]:
        """``(max_events_per_run, max_chars_per_run, seq_window)`` a group of :meth:`take_deltas` is held to (none
        for journaled lines: they are counted, never refused, as they were taken once)."""
        if replay:
            return MAX_SEQ * 2, MAX_SEQ * 2, MAX_SEQ * 2
        limits = run.limits if run.limits is not None else self.limits_for(run.run)
        return limits.max_events_per_run, limits.max_chars_per_run, limits.seq_window

    async def _accept_event(self, event: Event, *, replay: bool) -> tuple[ActiveRun | None, list[Event], LineResult]:
        """A normalized event, typed: a new run, an event of a started run, or a repeat."""
        run = self.runs.get(event.run)
        if run is None:
            if (ended := await self._ended(event.run)) is not None:
                if await self.stopped_note(event.run) is not None:
                    raise IngestError(STOPPED_ERROR, status=409)
                await self._refuse_after_idle_close(event.run, event.seq)
                return None, [], LineResult(dropped=ended)
            run = self.runs.get(event.run)  # again: another request may have started it meanwhile
        if isinstance(event, RunStart):
            return await self._start(run, event, replay=replay)
        if run is None:
            raise IngestError(f"run {event.run!r} has not started: send its run.start event first", status=409)
        return self._into(run, event, enforce=not replay)

    def _is_bare_a2a(self, run_id: object, obj: JsonObject) -> bool:
        """True for a bare A2A result object (its own ``kind``: ``artifact-update``, ...) in a run declared ``a2a``."""
        run = self.runs.get(run_id) if isinstance(run_id, str) else None
        return run is not None and isinstance(run.normalizer, A2ANormalizer) and obj.get("kind") in RESULT_KINDS

    def _into(self, run: ActiveRun, event: Event, *, enforce: bool) -> tuple[ActiveRun | None, list[Event], LineResult]:
        """An event of a started run: taken, or acknowledged and dropped (a repeat, or after the run's end). The
        client's per-run limits are ``enforce``d on new lines, not on journaled ones (taken once already)."""
        if isinstance(event, Stop | ApprovalDecision | ApprovalExpiry):
            return self._sidecar_line(run, event, enforce=enforce)
        if run.stopped is not None:
            raise IngestError(STOPPED_ERROR, status=409)
        if (closed := run.closed_to(event)) is not None:
            if (
                IDLE_CLOSED in closed
                and enforce
                and not (event.seq is not None and run.closed_seq is not None and event.seq <= run.closed_seq)
            ):
                raise IngestError(f"{closed}: {IDLE_REFUSAL}", status=409)
            return None, [], LineResult(dropped=closed)
        if event.seq is not None and (
            (run.gate.last is not None and event.seq <= run.gate.last) or run.seqs.taken(event.seq)
        ):
            return None, [], LineResult(dropped=f"seq {event.seq} was already taken")
        limits = run.limits if run.limits is not None else self.limits_for(run.run)
        if enforce and event.seq is not None:
            run.usage.check_seq(event.seq, limits)
        events = self._line_events(run, event)
        if any(isinstance(e, ApprovalRequest) for e in events):
            self.take_approvals(run, events, enforce=enforce)
        if isinstance(event, End) and event.source is None:
            if event.seq is not None:
                run.seqs.take(event.seq)
            run.usage.charge([event], limits, enforce=False)  # an end is always taken: the run must be able to end
            run.end_taken(event.seq)
        else:
            _charge(run, events, limits, enforce=enforce)  # a 422 here: the line was not taken, nor its seq
            if event.seq is not None:
                run.seqs.take(event.seq)
        return run, events, ONE_EVENT

    def _line_events(self, run: ActiveRun, event: Event) -> list[Event]:
        """The events a normalized line of ``run`` gives: itself; for the root's ``end``, what the run's stream
        normalizer still held first; a tool call's ``end`` a person must approve first, its ``approval.request``
        before it (:meth:`hold_calls`)."""
        if isinstance(event, End) and event.source is None:
            if run.normalizer is None:
                return [event]
            return [*self.hold_calls(run, run.normalizer.close()), event]
        if isinstance(event, ToolCall) and run.holds is not None:
            return self.hold_calls(run, [event])
        return [event]

    def _sidecar_line(
        self, run: ActiveRun, event: Stop | ApprovalDecision | ApprovalExpiry, *, enforce: bool
    ) -> tuple[ActiveRun | None, list[Event], LineResult]:
        """A line only the sidecar writes (a reader's stop, an approval's decision or expiry), replayed from the
        journal; an agent's (``enforce``) is refused with a 400 saying where such a thing comes from."""
        if isinstance(event, ApprovalExpiry):
            if enforce:  # an agent's line: the sidecar fixes an expiry when it takes the request
                raise IngestError(
                    "an 'approval.expiry' line comes from the sidecar, not the agent: it journals when an approval "
                    "asked with 'ttl_s' expires; give the approval.request 'expires_at' (an ISO 8601 instant) instead"
                )
            if not take_expiry(run, event):
                return None, [], LineResult(dropped=f"approval {event.id!r} is unknown or decided already")
            return run, [], _EVENTS[0]  # nothing for the run stage: the approval's expiry moved
        if isinstance(event, Stop):
            if enforce:  # an agent's line: only the reader stops a run
                raise IngestError(
                    "a 'stop' line comes from the run's reader, not its agent: POST /v1/runs/{run}/stop "
                    "(an agent ends its own run with an 'end' event, status 'cancelled')"
                )
            self.take_stop(run, event)
            return run, [event], ONE_EVENT
        if enforce:  # an agent's line: only a person (or the expiry) decides
            raise IngestError(
                "an 'approval.decision' line comes from the sidecar, not the agent: a person's press is forwarded "
                "to POST /v1/runs/{run}/approvals/{id}; the agent waits with RelayClient.wait_approval"
            )
        if not take_decision(run, event):
            return None, [], LineResult(dropped=f"approval {event.id!r} was decided already")
        return run, [event], ONE_EVENT

    async def _start(
        self, run: ActiveRun | None, event: RunStart, *, replay: bool
    ) -> tuple[ActiveRun | None, list[Event], LineResult]:
        """A ``run.start``: a new run, or a harmless repeat of the first one."""
        if run is not None:
            self._check_replayed_start(run.controller.start_event, event)
            return None, [], LineResult(dropped="run.start repeated")
        created = await self._create(event, replay=replay)
        if created is None:
            return None, [], LineResult(dropped=f"run {event.run!r} already ended")
        if created.controller.start_event is not event:  # another request started it while this one waited
            self._check_replayed_start(created.controller.start_event, event)
            return None, [], LineResult(dropped="run.start repeated")
        return created, [], LineResult(events=1)

    async def _accept_raw(
        self, run_id: object, obj: JsonObject, *, enforce: bool
    ) -> tuple[ActiveRun | None, list[Event], LineResult]:
        run = self.runs.get(run_id) if isinstance(run_id, str) else None
        if run is None and isinstance(run_id, str) and (ended := await self._ended(run_id)) is not None:
            seq = obj.get("seq")
            await self._refuse_after_idle_close(run_id, seq if type(seq) is int else None)
            return None, [], LineResult(dropped=ended)
        if run is not None and run.stopped is not None:
            raise IngestError(STOPPED_ERROR, status=409)
        if run is not None and (run.closing is not None or run.ended):
            return None, [], LineResult(dropped=run.closing or f"run {run.run!r} already took its end")
        if run is None or run.normalizer is None:
            raise IngestError(
                "line has no 'kind': a normalized event needs one (run.start, text, end, ...); raw events of a "
                "stream format are taken only for a started run whose run.start declares 'format' "
                f"({', '.join(ProviderFormat)})",
                status=409 if run is None and "type" in obj else 400,
            )
        return self._feed_raw(run, run.normalizer, obj, enforce=enforce)

    def _feed_raw(
        self, run: ActiveRun, normalizer: Normalizer, obj: JsonObject, *, enforce: bool
    ) -> tuple[ActiveRun | None, list[Event], LineResult]:
        """A raw line of the started, open run ``run`` (its ``normalizer``'s): its ``seq`` checked, then normalized
        and counted (or dropped: a repeated ``seq``).

        Raises:
            IngestError: a bad or out-of-order ``seq``, a line its normalizer refuses, a limit it would pass.
        """
        seq = raw_seq(obj)
        if seq is not None:
            if run.seqs.taken(seq):
                return None, [], LineResult(dropped=f"seq {seq} was already taken")
            expected = run.seqs.next_raw()
            if expected is not None and seq != expected:
                raise IngestError(
                    f"raw stream line seq {seq} is not the next one: a raw line is normalized as it comes, so it is "
                    f"taken only in order; send again from seq {expected}",
                    status=409,
                )
            obj = {k: v for k, v in obj.items() if k != "seq"}
        events = normalizer.feed(obj)
        if run.holds is not None and events:
            events = self.hold_calls(run, events)
        if any(isinstance(e, ApprovalRequest) for e in events):
            self.take_approvals(run, events, enforce=enforce)
        _charge(run, events, run.limits if run.limits is not None else self.limits_for(run.run), enforce=enforce)
        if seq is not None:
            run.seqs.take(seq)
            run.gate.consume(seq)
            run.usage.max_seq = max(seq, run.usage.max_seq if run.usage.max_seq is not None else seq)
        return run, events, _EVENTS[len(events)] if len(events) < len(_EVENTS) else LineResult(events=len(events))

    def take_raw(
        self, lines: Sequence[tuple[Any, str | None]], start: int, run_hint: str | None, *, replay: bool
    ) -> tuple[ActiveRun, list[RunEvent], list[LineResult | IngestError]] | None:
        """The fast path of a raw stream's lines: ``lines[start:]``'s leading raw lines (no ``kind``, or a bare A2A
        object) of one started run that declared a ``format``, open (not stopped, closing or ended), each taken as
        :meth:`accept` takes it (its ``seq`` checked, normalized, counted; dropped, or refused alone) but without an
        await; None when ``lines[start]`` is not one (then :meth:`accept` takes it). O(lines taken).

        Returns:
            ``(run, events, results)``: the run, the events of the lines taken, in order, and each line's result.
        """
        run = self._raw_run(lines[start][0], run_hint)
        if run is None or run.normalizer is None:
            return None
        normalizer, enforce = run.normalizer, not replay
        events: list[RunEvent] = []
        results: list[LineResult | IngestError] = []
        for obj, _ in islice(lines, start, None):
            if not self._is_raw_of(run, obj, run_hint):
                break
            try:
                _, taken, result = self._feed_raw(run, normalizer, obj, enforce=enforce)
            except IngestError as exc:
                results.append(exc)
                continue
            except OwnershipLostError:
                raise
            except Exception as exc:  # a bug of ours: this line fails alone
                results.append(line_failed(exc, run_hint))
                continue
            events += taken
            results.append(result)
        return run, events, results

    def _raw_run(self, first: object, run_hint: str | None) -> ActiveRun | None:
        """The run a group of :meth:`take_raw` starting with the line ``first`` goes to, or None (see there)."""
        if type(first) is not dict:
            return None
        run = self._taking_run(first.get("run", run_hint), run_hint)
        return run if run is not None and self._is_raw_of(run, first, run_hint) else None

    @staticmethod
    def _is_raw_of(run: ActiveRun, obj: object, run_hint: str | None) -> bool:
        """Whether ``obj`` is a raw line (no ``kind``, or a bare A2A result object) of ``run``, a run with a format."""
        if type(obj) is not dict or obj.get("run", run_hint) != run.run:
            return False
        return "kind" not in obj or (isinstance(run.normalizer, A2ANormalizer) and obj.get("kind") in RESULT_KINDS)

    @property
    def journal(self) -> Journal:
        return self._journal

    def hold_calls(self, run: ActiveRun, events: list[Event]) -> list[Event]:
        """``events`` with an ``approval.request`` put right before each tool call's ``end`` whose call a person must
        approve first (:mod:`core.lanes.hold`: the run's ``approve_actions`` name its tool or class; its arguments
        complete and valid). The run stage then keeps that call off the pipeline lane until the decision. Derived
        from the call's own line, so a journal replay derives the same request, with the same id. O(len(events))."""
        holds = run.holds
        if holds is None or not any(isinstance(e, ToolCall) and e.state is ToolCallState.END for e in events):
            for event in events:
                if isinstance(event, ToolCall) and holds is not None:
                    holds.feed(event)
            return events
        out: list[Event] = []
        policy = run.controller.policy
        for event in events:
            call = holds.feed(event) if isinstance(event, ToolCall) else None
            if (
                call is not None
                and not call.malformed
                and needs_person(call.name, self.catalog, policy.approve_actions)
            ):
                approval_id = hold_id(call.id, call.source, run.approvals.items)
                try:
                    request = hold_request(run.run, call, approval_id, policy.approve_ttl_s)
                except ValidationError:  # a tool name no question may carry: asked without it
                    unnamed = FinishedCall(call.id, "(unnamed)", call.source, call.args)
                    request = hold_request(run.run, unnamed, approval_id, policy.approve_ttl_s)
                run.approvals.holds[approval_id] = call.id
                out.append(request)
            out.append(event)
        return out

    def take_approvals(self, run: ActiveRun, events: Sequence[Event], *, enforce: bool) -> None:
        """Take the ``approval.request`` events of ``events`` into ``run``'s approvals and wake each at its expiry
        (:mod:`core.run.approvals`).

        Raises:
            IngestError: a request names nobody who may decide, or repeats an id (:func:`check_request`).
        """
        for event in events:
            if isinstance(event, ApprovalRequest):
                known = event.id in run.approvals.items  # a journaled id asked again: its timer runs already
                approval = check_request(run.approvals, event, run.controller.policy, time.time(), enforce=enforce)
                if approval.decision is None and not known:
                    self._expiries.add(asyncio.create_task(self._expire(run.run, event.id, approval)))

    async def _expire(self, run_key: str, approval_id: str, approval: Approval) -> None:
        """At ``approval.expires_at`` (Unix seconds; a journaled :class:`~core.events.ApprovalExpiry` replayed after
        the timer was armed moves it, and the timer waits for the new instant) decide approval ``approval_id`` by its
        ``on_expiry``, unless decided meanwhile; a journal that cannot be written is tried again every second while
        the run is open."""
        try:
            while (wait := approval.expires_at - time.time()) > 0:
                approval.moved.clear()
                with contextlib.suppress(TimeoutError):  # the instant came, or a journaled expiry moved it
                    await asyncio.wait_for(approval.moved.wait(), wait)
            run = self.runs.get(run_key)
            if run is None or run.approvals.items.get(approval_id) is not approval:
                return  # the run ended, or its line was refused and the approval forgotten (asked again: its own timer)
            while True:
                try:
                    await decide(self, run_key, approval_id, "expire", None)
                    return
                except (IngestError, DecisionRefused):
                    return  # decided meanwhile, or the run ended
                except Exception:
                    _log.exception("run %s: the expiry of approval %s could not be journaled", run_key, approval_id)
                    await asyncio.sleep(1.0)
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._expiries.discard(task)

    async def cancel_expiries(self) -> None:
        """Cancel the approvals' expiry timers and wait for them (the sidecar closes: its successor arms them again
        from the journal, each at its journaled instant)."""
        tasks = list(self._expiries)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @staticmethod
    def take_stop(run: ActiveRun, stop: Stop) -> None:
        """Mark ``run`` stopped by its reader (:mod:`core.run.stop`): from now on its agent's lines are refused
        (409)."""
        if run.stopped is None:
            run.stopped = stop

    async def _refuse_after_idle_close(self, run_id: str, seq: int | None) -> None:
        """A line of a run the idle timeout closed (here, or before a restart) that it never took: refused with 409,
        so an agent that comes back (e.g. after a restart longer than the timeout) learns its answer was not shown,
        instead of a 200 "dropped" it would read as taken. A repeat of a line the run took (its ``seq`` at most the
        run's last) is acknowledged and dropped as after any end.

        Raises:
            IngestError: 409, naming the run and what to do.
        """
        if not any(IDLE_CLOSED in e for e in await self._end_errors(run_id)):
            return
        last = await self._last_seq(run_id)
        if seq is not None and last is not None and seq <= last:
            return
        raise IngestError(idle_refusal(run_id), status=409)

    async def _end_errors(self, run_id: str) -> list[str]:
        finished = self.finished.get(run_id)
        errors = getattr(getattr(finished, "report", None), "errors", None)
        if errors is None:
            record = await self._ledger.get_run(run_id)
            errors = record.errors if record is not None and record.ended else []
        return list(errors)

    async def _last_seq(self, run_id: str) -> int | None:
        finished = self.finished.get(run_id)
        if finished is not None:
            last = getattr(finished, "last_seq", getattr(finished, "last", None))
            return last if isinstance(last, int) else None
        ended = await self._journal.ended(run_id)
        return ended.last_seq if ended is not None else None

    async def stopped_note(self, run_id: str) -> str | None:
        """The :func:`core.run.stop.stop_note` of ``run_id`` when it ended stopped by its reader (here, or before a
        restart: the ledger keeps it with the run's end), else None."""
        finished = self.finished.get(run_id)
        errors = getattr(getattr(finished, "report", None), "errors", None)
        if errors is None:
            record = await self._ledger.get_run(run_id)
            errors = record.errors if record is not None and record.ended else []
        return next((e for e in errors if is_stop_note(e)), None)

    async def ended(self, run_id: str) -> str | None:
        """Why a line of ``run_id`` would be dropped because the run already ended, else None."""
        return await self._ended(run_id)

    async def _ended(self, run_id: str) -> str | None:
        """Why a line of ``run_id`` is dropped when the run already ended (here or before a restart), else None."""
        if run_id in self.finished or await self._journal.ended(run_id) is not None:
            return ended_note(run_id)
        record = await self._ledger.get_run(run_id)
        if record is not None and record.ended:
            return ended_note(run_id)
        return None

    @staticmethod
    def _check_replayed_start(first: RunStart, again: RunStart) -> None:
        fields = ("channel", "target", "mode", "format", "overrides", "targets")
        changed = [f for f in fields if getattr(first, f) != getattr(again, f)]
        if changed:
            raise IngestError(
                f"run {again.run!r} already started with another {', '.join(changed)}: a run keeps its "
                "run.start; use a new run id",
                status=409,
            )

    async def _create(self, event: RunStart, *, replay: bool) -> ActiveRun | None:
        """A new run for ``event`` (registered, not opened yet); None when the ledger says it already ended.

        Raises:
            IngestError: unknown channel, bad target or override, too many active runs (503), a run id used
                before with another channel or target (409).
        """
        client = self.limits_for(event.run)
        channels = [self._place_channel(client, place) for place in event.places()]  # every place, or a 400
        if not replay:  # a journaled run resumes whatever the limits are now: it was taken once
            self._check_room(client)
        self.clients.started(event.run)  # the slot is held across the await below: concurrent starts see it
        self._starting += 1
        registered: ActiveRun | None = None
        try:
            registered = await self._build(event, channels, client, replay=replay)
        finally:
            self._starting -= 1
            if (
                registered is None
                or self.runs.get(event.run) is not registered
                or registered.controller.start_event is not event
            ):
                self.clients.left(event.run, ended=registered is None)  # not this start's run: its slot back
        return registered

    def _place_channel(self, client: ClientLimits, place: Place) -> ChannelRuntime:
        """The channel of one place of a ``run.start`` (its only one, or one of its ``targets``), checked for the
        client: a fan-out run goes only to channels its client may use, each place's target checked by its channel.

        Raises:
            IngestError: 400, a channel unknown to the client (one it may not use is not revealed) or a bad target.
        """
        channel = self.channels.get(place.channel) if client.may_use(place.channel) else None
        if channel is None:  # a channel the client may not use is unknown to it: its name is not revealed
            known = ", ".join(sorted(name for name in self.channels if client.may_use(name))) or "none"
            raise IngestError(f"unknown channel {place.channel!r}: the channels you may use are {known}")
        problem = channel.adapter.check_target(place.target)
        if problem is not None:
            raise IngestError(f"bad target for channel {place.channel!r}: {problem}")
        return channel

    def _check_room(self, client: ClientLimits) -> None:
        """Raise the 429 (the client's active runs) or the 503 (the sidecar's) that refuses one more run."""
        if (active := self.clients.active[client.name]) >= client.max_active_runs:
            raise IngestError(
                f"{active} of your runs are active, the most you may have "
                f"({client.setting('max_active_runs')} = {client.max_active_runs}): end one or retry later",
                status=429,
                retry_after_s=1.0,
            )
        if len(self.runs) + self._starting >= self.limits.max_active:
            raise IngestError(
                f"{len(self.runs)} runs are active, the most this sidecar takes: retry later",
                status=503,
                retry_after_s=1.0,
            )

    async def _build(
        self, event: RunStart, channels: list[ChannelRuntime], client: ClientLimits, *, replay: bool
    ) -> ActiveRun | None:
        """The run of ``event``, registered (or the one a concurrent start registered first); None when the ledger
        says it already ended.

        Raises:
            IngestError: 409, the run id was used before with another channel or target.
        """
        record = await self._ledger.get_run(event.run)
        if record is not None:
            if record.ended:
                return None
            if record.channel != event.channel or record.target != event.target.model_dump(mode="json"):
                raise IngestError(
                    f"run {event.run!r} was started before on another channel or target; use a new run id",
                    status=409,
                )
        monitor = RunMonitor(event.run, buffer=self.limits.live_buffer)
        places = [self._place(event, i, channel, client, monitor) for i, channel in enumerate(channels)]
        controller: RunController | FanoutController = places[0] if len(places) == 1 else FanoutController(places)
        normalizer = make_normalizer(event.format, event.run) if event.format is not None else None
        gate = SeqGate(self.limits.gap_timeout_s, last=event.seq)
        run = ActiveRun(controller, Inbox(self.limits.queue_size), gate, normalizer, [] if replay else None)
        if controller.policy.approve_actions:  # its calls a person must approve are found here (:meth:`hold_calls`)
            run.holds = ToolCallCollector(self._validator)
        run.seqs = SeqFloor(floor=event.seq)
        run.usage.max_seq = event.seq
        run.limits = client
        run.usage.charge([event], client, enforce=False)
        return self.runs.setdefault(event.run, run)  # the first registered wins (concurrent requests)

    def _place(
        self, event: RunStart, index: int, channel: ChannelRuntime, client: ClientLimits, monitor: RunMonitor
    ) -> RunController:
        """The controller of place ``index`` of ``event`` on ``channel`` (:mod:`core.run.fanout`): its channel's
        policy with the place's overrides and mode, capped by the client's ``max_messages_per_run``; its own send
        chain and ledger run id. The first place's stage publishes on the run's ``monitor``; a later place's calls
        are published there on a row of their own (:func:`core.run.fanout.place_row_name`), its stage on a monitor
        of its own (the answer is the first place's)."""
        place = event.places()[index]
        policy = apply_overrides(channel.policy, place.overrides or {})
        if policy.max_messages is None or policy.max_messages > client.max_messages_per_run:  # the stricter cap
            policy = replace(
                policy,
                max_messages=client.max_messages_per_run,
                max_messages_setting=client.setting("max_messages_per_run"),
            )
        if client.approve_actions:  # the client's holds join the channel's (core/lanes/hold.py)
            if not policy.approvers and not policy.approvals_anyone:
                raise IngestError(
                    f"client {client.name!r} holds tool calls for a person (clients.{client.name}.approve_actions) but "
                    f"channel {policy.name!r} names nobody who may decide: set its approvers or approvals_anyone"
                )
            joined = tuple(dict.fromkeys((*policy.approve_actions, *client.approve_actions)))
            policy = replace(policy, approve_actions=joined)
        if place.mode is not None and place.mode is not policy.delivery:
            policy = replace(policy, delivery=policy.delivery_for(place.mode))  # no edits: preview runs as block
        return RunController(
            place_start(event, index),
            policy,
            channel.adapter,
            channel.chain_for(place.target, self._clock),
            self._ledger,
            self._clock,
            validator=self._validator,
            chain_for=lambda target: channel.chain_for(target, self._clock),
            release=channel.release,
            monitor=monitor if index == 0 else RunMonitor(event.run, buffer=self.limits.live_buffer),
            retry_window_s=self.limits.retry_window_s,
            ledger_run=place_ledger_run(event.run, index),
            rows=None if index == 0 else (monitor, place_row_name(event, index)),
        )


def _charge(run: ActiveRun, events: list[Event], limits: ClientLimits, *, enforce: bool) -> None:
    """Charge ``events`` to ``run``'s usage (:meth:`core.ingest.quota.RunUsage.charge`); a refusal forgets the
    approvals they asked too (the line was not taken: sent again, each is asked once).

    Raises:
        IngestError: a limit the line would pass (422).
    """
    try:
        run.usage.charge(events, limits, enforce=enforce)
    except IngestError:
        forget_approvals(run, events)
        raise
