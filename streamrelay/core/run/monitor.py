"""The run monitor: one run's live progress as numbered events, for browsers and other watchers (SSE).

Every event is a typed value at run time (:mod:`core.run.live`: one frozen slotted class per type), its JSON object
made at the edge (:meth:`core.run.live.Live.wire`: the SSE stream, a finished run's kept record), with ``id`` (1, 2,
… per run; its SSE id is ``<epoch>.<id>``, :meth:`RunMonitor.sse_id`, which a reconnecting client sends back as
``Last-Event-ID``), ``run``, ``seq`` (= ``id``), ``ts`` (wall-clock Unix seconds, float) and ``type``:

=============  ======================================================================================================
type           fields
=============  ======================================================================================================
``run``        ``channel``, ``platform``, ``mode``: the run started (always event 1)
``phase``      ``name``; ``source`` (null: the root agent)
``status``     ``text``; ``source``
``tool_call``  ``call_id``, ``name``, ``args`` (a redacted preview, never the arguments), ``malformed`` (bool),
               ``source``
``tool_result`` ``call_id``, ``name``, ``summary``, ``source``
``decision``   ``what`` (``commit``: the answer passed its checks; ``gate``: the action gate answered), and for
               gate decisions ``call_id``, ``name``, ``verdict``, ``reason``
``approval``   an approval (docs/approvals.md) asked, decided or left undecided at the end: ``approval`` (its id),
               ``state`` (pending, decided, ended), ``question``, ``action``, ``approvers``, ``anyone``,
               ``expires_at``, ``on_expiry``, and once decided ``decision``, ``approved``, ``by``, ``at``
``answer``     the root's answer as it streams: ``delta`` (appended) or ``text`` with ``reset: true`` (the whole
               answer, earlier text changed); ``final: true`` on the committed final text. In ``progress`` mode no
               answer event comes before the commit point.
``agent``      a sub-agent: ``source``, ``key`` (its identity), ``state`` (started, using X, done, failed, …) and
               optionally ``delta`` (its text as it streams) or ``text`` with ``reset: true`` (its whole text)
``delivery``   a channel message part: ``channel``, ``part`` (0, 1, …), ``role`` (answer, status, notice, reasoning),
               ``state`` (``sent``, ``edited``, ``retrying`` with ``retry_after_s``, ``uncertain``, ``failed``,
               ``deleted``), ``message_id``, ``reason`` (why a part failed or is uncertain), and for the web channel
               what the page shows as that message: ``text`` (whole) or ``append`` (added to the text shown)
``error``      ``message``: shown as a failure, never as an answer
``end``        ``status`` (ok, error, cancelled, refused, cut), ``delivery`` (the report's status): the last event
``reset``      ``state``: the whole current state (below), sent instead of events a client missed past the replay
               buffer; its ``id`` is the last event's, so the client continues from there
=============  ======================================================================================================

State (what ``reset`` carries, and what a page shows): ``{"run", "channel", "platform", "mode", "started_at"
(the ``run`` event's ``ts``), "rate_limited" (how many ``delivery`` events said ``retrying`` with ``retry_after_s``:
the 429s met), "answer", "final", "agents": {key: {"source", "state", "text"}}, "timeline": [the last 200 phase /
status / tool / decision / error events], "parts": {"<channel>/<part>": {delivery fields}}, "approvals" (when the
run asked any): {id: {its latest ``approval`` event's fields}}, "ended": status or null, "delivery": the report's
status at the end or null}``. :meth:`RunMonitor.row` is the run's line in the operator's listing (``GET /v1/runs``).

Replay: the last ``buffer`` events (and at most ``max_chars`` characters of their text) are kept while the run
goes on; a watcher that resumes after an id still in the buffer gets exactly the events after it, once; one that
resumes from further back (or from an id the run never had) gets one ``reset``. Once the run ended only its last
32 events (and 4,096 characters of their text) are kept: a finished run is its state (the answer, each part's and
each agent's text once), and a watcher further behind gets one ``reset`` with ``ended`` set.

One copy of the answer: the run stage shares the run's answer text (:meth:`RunMonitor.share_answer`, a
:class:`core.text.buffer.TextSource`), and the monitor keeps no text of its own for it: an ``answer`` event holds the
range of the answer it tells (materialized when a watcher reads it) and the state's answer is the shared text. A range
whose text changed since (the answer was replaced: a new ``generation``) can no longer be told exactly: a watcher that
needs it gets a ``reset``. The committed final is the stage's own string, kept as it is. A web part's text in the state
is what the delivery side showed (:meth:`RunMonitor.delivered`: its string, or its range of the answer, a
:class:`core.text.buffer.Pinned`), not a copy, and its ``delivery`` events hold ranges of it the same way (a new
generation when it changed other than by growing). A part's ``edited`` events no watcher has read yet are one event, as
the answer's deltas are. What a finished run keeps of all this is :meth:`RunMonitor.record` (:mod:`core.run.finished`).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from streamrelay.core.contracts.answers import RunRow
from streamrelay.core.contracts.live import check_live_event
from streamrelay.core.events import ErrorEvent, Event, Phase, Status, TextEvent, ToolResult, Visibility
from streamrelay.core.json_types import JsonObject
from streamrelay.core.records.report import DeliveryReport
from streamrelay.core.run.live import (
    LIVE_VALUES,
    AgentLive,
    AnswerLive,
    ApprovalLive,
    DeliveryLive,
    EndLive,
    Live,
    ResetLive,
    RunLive,
    Text,
    TextRange,
)
from streamrelay.core.text.buffer import Pinned, TextBuffer, TextSource
from streamrelay.core.text.safe_text import safe_text

TIMELINE = 200
"""Progress entries the state keeps (older ones drop out of it; they were sent as events)."""
KEEP_AFTER_END = 32
"""Events a finished run keeps, so that watchers just behind get them exactly (the others: one ``reset``)."""
KEEP_CHARS_AFTER_END = 4096
"""And at most this many characters of their text (besides the last event): a finished run's answer is in its state
once, not again in the events that streamed it (an 8.5k answer joined into one delta event, its final text event)."""
TIMELINE_TYPES = frozenset({"phase", "status", "tool_call", "tool_result", "decision", "error"})
_TIMELINE_CLASSES = tuple(LIVE_VALUES[kind] for kind in sorted(TIMELINE_TYPES))
STAGE_TEXT_TYPES = frozenset({"answer", "agent"})
"""Events whose text the run stage built from events it sanitized (:func:`core.text.safe_text.safe_event`): one per
delta, so not scanned again. The strings of every other event are passed through :func:`core.text.safe_text.safe_text`
when published (gate decisions, delivery reasons, tool names come from elsewhere)."""

CHECK_CONTRACT = os.environ.get("STREAMRELAY_CHECK_CONTRACTS", "") == "1"
"""With ``STREAMRELAY_CHECK_CONTRACTS=1`` (the tests set it: tests/conftest.py) every event is validated against its
typed model (:mod:`core.contracts.live`) where it is published, so a producer's field off the contract fails there.
Off in service: a model per event would add to the per-delta cost (issue 13 measured publishing at 27%)."""


@dataclass(slots=True)
class _Head:
    """The state's own fields (:attr:`RunMonitor.state`): the ``run`` event's, the 429s met, the end's."""

    channel: str | None = None
    platform: str | None = None
    mode: str | None = None
    started_at: float | None = None
    rate_limited: int = 0
    final: bool = False
    ended: str | None = None
    delivery: str | None = None


@dataclass(slots=True)
class _Agent:
    """A sub-agent in the state (its text apart)."""

    source: dict[str, object] | None
    state: str


@dataclass(frozen=True, slots=True)
class MonitorRecord:
    """What a finished run's monitor holds, for :mod:`core.run.finished` to keep in its own form.

    Attributes:
        epoch: the monitor's instance (SSE ids are ``<epoch>.<id>``). last_id: its last event's id.
        state: the state's JSON object (:attr:`RunMonitor.state`) without its texts: ``answer`` is ``""``, each
            agent's and each part's ``text`` is left out.
        tail: the last events it kept (``KEEP_AFTER_END``), their texts materialized.
        answer: the state's answer. agents: each agent's text. parts: each part's text (web parts only).
    """

    epoch: str
    last_id: int
    state: dict[str, object]
    tail: list[Live]
    answer: str
    agents: dict[str, str]
    parts: dict[str, str]


class Watched(Protocol):
    """What a watcher reads of a run's live events: an active run's :class:`RunMonitor`, or a finished run's
    :class:`core.run.finished.FinishedMonitor`."""

    run: str
    epoch: str
    last_id: int
    closed: bool

    def sse_id(self, event: Live) -> str: ...

    def resume_after(self, last_event_id: str | None) -> int: ...

    async def wait(self, last_id: int) -> list[Live]: ...


class RunMonitor:
    """One run's event log with a bounded replay buffer and the current state.

    Args:
        run: the run id.
        buffer: how many of the latest events are kept for replay.
        wall: the wall clock (Unix seconds) for ``ts``.
    """

    __slots__ = (
        "_agent_texts",
        "_agents",
        "_answer",
        "_approvals",
        "_buffer",
        "_changed",
        "_chars",
        "_events",
        "_head",
        "_max_chars",
        "_open",
        "_open_id",
        "_open_parts",
        "_part_generations",
        "_part_keys",
        "_part_texts",
        "_parts",
        "_published",
        "_sizes",
        "_source",
        "_timeline",
        "_wall",
        "closed",
        "epoch",
        "last_id",
        "run",
    )

    def __init__(
        self, run: str, *, buffer: int = 1000, max_chars: int = 4_000_000, wall: Callable[[], float] = time.time
    ) -> None:
        self.run = run
        self._events: list[Live] = []
        """The buffered events, oldest first: a list, not a ``deque(maxlen=buffer)`` (a deque holds a block of 64
        pointers from its first event, 624 bytes, where a run's ~10 buffered events need ~150 in a list: per open
        run); the oldest is dropped by ``pop(0)``, a move of at most ``buffer`` pointers."""
        self._buffer = max(1, buffer)
        self._sizes: list[int] = []
        """Each buffered event's size (``_events``' order): a list, not a deque (an empty deque is 624 bytes, per
        open run; the oldest is dropped by ``pop(0)``, a move of at most ``buffer`` pointers)."""
        self._chars = 0
        self._max_chars = max_chars
        self.epoch = secrets.token_hex(4)
        """This monitor's instance: a run resumed after a restart gets a new monitor numbering from 1 again, so a
        watcher's id from the old one must not pass for an id of the new one (SSE ids are ``<epoch>.<id>``)."""
        self._wall = wall
        self.last_id = 0
        self.closed = False
        self._changed: asyncio.Event | None = None
        """Set (and cleared) at each event while a watcher waits (:meth:`wait`); made by the first watcher (an
        :class:`asyncio.Event` is 0.4 KB, most runs are never watched live)."""
        self._open: list[str] | TextRange | None = None
        """The open ``answer`` delta (no watcher has read it yet), which the next delta joins: its pieces, or its range
        of the shared answer (None: none open). Its event is the one of id ``_open_id``."""
        self._open_id = 0
        self._open_parts: dict[str, int] = {}
        """Per part: the id of its open ``edited`` delivery event (no watcher has read it yet), which the part's next
        edit joins (:meth:`delivered`)."""
        self._head = _Head()
        # Texts grow by appends: kept as blocks and joined only when the state is read, so an event costs its own
        # length, not the text's.
        self._source: TextSource | None = None
        """The run's answer, shared (:meth:`share_answer`): the state's answer while ``_published`` is not None."""
        self._published: int | None = None
        """How much of the shared answer the ``answer`` events told (None: the state's answer is ``_answer``)."""
        self._answer: TextBuffer | str = TextBuffer()
        """The state's answer when it is not the shared one: the text its ``answer`` events told, or the string a
        whole text (the committed final) came as, kept as it is (one copy of the answer: issue 23)."""
        self._agents: dict[str, _Agent] = {}
        self._agent_texts: dict[str, TextBuffer | str] = {}
        self._parts: dict[str, dict[str, object]] = {}
        """Per part: its delivery fields as on the wire, the latest of each (its ``delivery`` events', texts apart)."""
        self._part_texts: dict[str, TextBuffer | str | Pinned] = {}
        self._part_generations: dict[str, int] = {}
        self._part_keys: dict[str, str] = {}
        """Each part's row key, made once: every ``delivery`` event of the part refers to the same string."""
        """Per web part: how many times its text changed other than by growing (:meth:`delivered`)."""
        self._timeline: deque[Live] | None = None
        """The latest :data:`TIMELINE` timeline events, made at the first (None: none yet; an empty deque is 624
        bytes)."""
        self._approvals: dict[str, JsonObject] = {}
        """Per approval id: its latest ``approval`` event's fields (a run asks a few: never trimmed)."""

    def share_answer(self, source: TextSource) -> None:
        """Refer to the run's answer (the root's linear text, which ``answer`` deltas extend) instead of keeping a copy
        (module docstring). Call it before the first ``answer`` event."""
        self._source, self._published = source, 0

    @property
    def state(self) -> dict[str, object]:
        """The whole current state, its JSON object (built when read: O(its size))."""
        agents = {k: _value(self._agent_texts[k]) for k in self._agents}
        parts = {k: _value(v) for k, v in self._part_texts.items()}
        return self._state_json(self._answer_text(), agents, parts)

    def _state_json(self, answer: str, agents: dict[str, str], parts: dict[str, str]) -> dict[str, object]:
        """The state's JSON object with these texts (an agent's or a part's left out when not in them)."""
        head = self._head
        state: dict[str, object] = {
            "run": self.run,
            "channel": head.channel,
            "platform": head.platform,
            "mode": head.mode,
            "started_at": head.started_at,
            "rate_limited": head.rate_limited,
            "final": head.final,
            "ended": head.ended,
            "delivery": head.delivery,
            "answer": answer,
            "agents": {
                k: {"source": v.source, "state": v.state, **({"text": agents[k]} if k in agents else {})}
                for k, v in self._agents.items()
            },
            "parts": {k: {**v, **({"text": parts[k]} if k in parts else {})} for k, v in self._parts.items()},
            "timeline": [event.wire() for event in self._timeline or ()],
        }
        if self._approvals:  # only a run that asked any: the state of every other run is as it was
            state["approvals"] = {k: dict(v) for k, v in self._approvals.items()}
        return state

    def _answer_text(self) -> str:
        if self._published is not None and self._source is not None:
            return self._source.slice(0, self._published)
        return _value(self._answer)

    def record(self) -> MonitorRecord:
        """What a finished run keeps of this monitor (:class:`MonitorRecord`), its texts apart. O(its size)."""
        self._seal()
        state = self._state_json("", {}, {})
        tail: list[Live] = []
        for event in reversed(self._events):  # the newest first: a range that can no longer be read ends the tail
            told = self._told(event)
            if told is None:
                break
            tail.append(told)
        tail.reverse()
        parts = {k: _value(v) for k, v in self._part_texts.items()}
        agents = {k: _value(v) for k, v in self._agent_texts.items()}
        return MonitorRecord(self.epoch, self.last_id, state, tail, self._answer_text(), agents, parts)

    def row(self, report: DeliveryReport) -> RunRow:
        """The run as the operator's listing shows it (``GET /v1/runs``), with its current ``report``: where it goes,
        ``started_at`` (Unix s, None until the run opened), ``age_s``, the report's ``status`` and its parts counted
        by state, ``rate_limited`` (429s met so far). Its ``watch`` is None (the HTTP surface knows the live page) and
        ``replica`` unset (a replica's front sets it)."""
        head, started_at = self._head, self._head.started_at
        return RunRow(
            run=self.run,
            channel=head.channel or report.channel,
            platform=head.platform,
            mode=head.mode,
            started_at=started_at,
            age_s=None if started_at is None else round(max(0.0, self._wall() - started_at), 3),
            status=str(report.status),
            confirmed=report.confirmed,
            uncertain=report.uncertain,
            failed=report.failed,
            rate_limited=head.rate_limited,
            watch=None,
        )

    def publish(self, type_: str, **fields: Any) -> Live:
        """Add one event of ``type_`` with ``fields`` (its class's: :data:`core.run.live.LIVE_VALUES`; its ``id``,
        ``run``, ``seq``, ``ts`` are set here), update the state, wake watchers. Events after ``end`` are ignored
        (returned, not kept). Top-level strings are made safe to show (:data:`STAGE_TEXT_TYPES`).

        Raises:
            KeyError: an unknown ``type_``. TypeError: a field off its class.
        """
        if type_ == "delivery":  # the part's next edit is an event after this one: its open event is closed
            if self._open_parts:
                self._open_parts.pop(f"{fields.get('channel')}/{fields.get('part')}", None)
        elif type_ == "answer":
            self._seal_answer()
        else:
            self._seal()
        if type_ not in STAGE_TEXT_TYPES:
            fields = {k: safe_text(v) if isinstance(v, str) else v for k, v in fields.items()}
        elif type_ == "answer" and self._published is not None and not self.closed:
            key = "delta" if "delta" in fields else "text"
            told = self._refer(
                fields.get("delta"), fields.get("text"), bool(fields.get("reset")), bool(fields.get("final"))
            )
            if told is not None:
                fields[key] = told
        self.last_id += 0 if self.closed else 1
        event = LIVE_VALUES[type_](id=self.last_id, run=self.run, seq=self.last_id, ts=self._wall(), **fields)
        if CHECK_CONTRACT:
            check_live_event((self._told(event) or event).wire())
        if self.closed:
            return event
        self._keep(event)
        self._apply(event)
        if isinstance(event, EndLive):
            self.closed = True
            while len(self._events) > 1 and (  # a finished run is its state (and its last events)
                len(self._events) > KEEP_AFTER_END or self._chars > KEEP_CHARS_AFTER_END
            ):
                self._events.pop(0)
                self._chars -= self._sizes.pop(0)
        self._wake()
        return event

    def _refer(self, delta: str | None, text: str | None, reset: bool, final: bool) -> TextRange | None:
        """An ``answer`` event's text while the answer is shared, as a range of the shared answer when it is that (a
        ``delta`` that extends it, the whole of it after a replacement); None: a final that differs from it, or text it
        does not hold, is kept as it is, and the state's answer is that text from then on."""
        source, published = self._source, self._published
        assert source is not None and published is not None
        if delta is not None:
            end = published + len(delta)
            if end <= source.length and (not CHECK_CONTRACT or source.slice(published, end) == delta):
                self._published = end
                return TextRange(source.generation, published, end)
        elif (
            reset and not final and len(text or "") == source.length and (not CHECK_CONTRACT or source.value() == text)
        ):
            self._published = source.length
            return TextRange(source.generation, 0, source.length)
        if not reset:  # not the shared text: the state keeps its own from here
            self._answer = TextBuffer(self._answer_text())
        self._published = None
        return None

    def answer_delta(self, delta: str) -> None:
        """Publish that the answer grew by ``delta``, lazily: a delta that follows one no watcher has read yet is
        merged into it (one ``answer`` event, its ``delta`` the two joined when it is read), so a run streamed one
        character at a time costs one event per read, not one per delta, and a watcher sees the same text. Any other
        event, and any read (:meth:`since`, :meth:`wait`, :meth:`reset`), closes the merged event. O(len(delta));
        with a shared answer (:meth:`share_answer`) no text is kept."""
        opened = self._open
        if opened is None or self.closed:
            event = self.publish("answer", delta=delta)
            if not self.closed:
                told = event.delta if isinstance(event, AnswerLive) else None
                self._open = told if isinstance(told, TextRange) else [delta]
                self._open_id = event.id
            return
        if isinstance(opened, TextRange):
            source = self._source
            assert source is not None
            end = opened.end + len(delta)
            at = self._at(self._open_id)
            if (
                at is not None
                and self._published == opened.end
                and source.generation == opened.generation
                and end <= source.length
            ):
                opened.end = self._published = end
                self._sizes[at] += len(delta)
                self._chars += len(delta)
                if self._chars > self._max_chars:
                    self._seal()
                    self._trim()
                return
            self._seal_answer()
            self.answer_delta(delta)
            return
        at = self._at(self._open_id)
        if at is None:  # its event left the buffer: the delta is an event of its own
            self._open = None
            self.answer_delta(delta)
            return
        opened.append(delta)
        self._answer = _apply_text(self._answer, delta, None, False)
        self._sizes[at] += len(delta)
        self._chars += len(delta)
        if self._chars > self._max_chars:
            self._seal()
            self._trim()

    def answer_grew(self, delta: str) -> None:
        """:meth:`answer_delta` for a caller that appended ``delta`` at the end of the shared answer
        (:meth:`share_answer`) itself, its text not replaced (the run stage's common line): while the open ``answer``
        event is a range that ends where the answer ended, it grows by ``len(delta)``, the answer not looked at.
        O(1)."""
        opened = self._open
        if opened.__class__ is TextRange and not self.closed and self._published == opened.end:
            at = self._at(self._open_id)
            if at is None:
                self.answer_delta(delta)
                return
            n = len(delta)
            opened.end = self._published = opened.end + n
            self._sizes[at] += n
            self._chars += n
            if self._chars > self._max_chars:
                self._seal()
                self._trim()
            return
        self.answer_delta(delta)

    def _seal(self) -> None:
        """The open events become events like any others (the ``answer`` delta's pieces joined): read, or followed
        by an event that is neither an ``answer`` nor a ``delivery``."""
        self._seal_answer()
        self._open_parts.clear()

    def _seal_answer(self) -> None:
        """The open ``answer`` delta becomes an event like any other (its pieces joined)."""
        opened = self._open
        if opened is not None:
            if isinstance(opened, list) and len(opened) > 1:
                at = self._at(self._open_id)
                if at is not None:
                    event = self._events[at]
                    assert isinstance(event, AnswerLive)
                    self._events[at] = replace(event, delta="".join(opened))
            self._open = None

    def _at(self, event_id: int) -> int | None:
        """Where the event of ``event_id`` is in the buffer (None: it left it). The buffer's ids follow each other."""
        events = self._events
        if not events:
            return None
        at = event_id - events[0].id
        return at if 0 <= at < len(events) and events[at].id == event_id else None

    def _keep(self, event: Live) -> None:
        """Buffer ``event``, dropping the oldest past ``buffer`` events or ``max_chars`` characters of text (a range of
        the shared answer counts as the text it tells)."""
        size = event.chars()
        if len(self._events) == self._buffer:
            del self._events[0]
            self._chars -= self._sizes.pop(0)
        self._events.append(event)
        self._sizes.append(size)
        self._chars += size
        self._trim()

    def _trim(self) -> None:
        while self._chars > self._max_chars and len(self._events) > 1:
            self._events.pop(0)
            self._chars -= self._sizes.pop(0)

    def _told(self, event: Live) -> Live | None:
        """``event`` as a watcher gets it: a range of a text kept once read (None: that text changed since)."""
        if isinstance(event, AnswerLive):
            if isinstance(event.delta, TextRange):
                text = self._read(event.delta)
                return None if text is None else replace(event, delta=text)
            if isinstance(event.text, TextRange):
                text = self._read(event.text)
                return None if text is None else replace(event, text=text)
        elif isinstance(event, DeliveryLive):
            if isinstance(event.append, TextRange):
                text = self._read(event.append)
                return None if text is None else replace(event, append=text)
            if isinstance(event.text, TextRange):
                text = self._read(event.text)
                return None if text is None else replace(event, text=text)
        return event

    def _read(self, told: TextRange) -> str | None:
        """The text ``told`` is a range of (None: that text changed since)."""
        if told.part is not None:
            shown = self._part_texts.get(told.part)
            if not isinstance(shown, str | Pinned) or self._part_generations.get(told.part) != told.generation:
                return None
            return shown[told.start : told.end] if isinstance(shown, str) else shown.slice(told.start, told.end)
        source = self._source
        if source is None or source.generation != told.generation:
            return None
        return source.slice(told.start, told.end)

    def since(self, last_id: int) -> list[Live]:
        """What a watcher that has seen up to ``last_id`` must get: the events after it, or one ``reset`` when
        they are no longer all in the buffer (or ``last_id`` is not an id of this run, or the text of one of them
        changed since: module docstring)."""
        self._seal()
        if last_id == self.last_id:
            return []
        if last_id > self.last_id:  # an id this run never had (another monitor's): the state, not a silent wait
            return [self.reset()]
        first = self._events[0].id if self._events else self.last_id + 1
        if 0 <= last_id < self.last_id and last_id >= first - 1:
            told = [self._told(e) for e in self._events if e.id > last_id]
            if all(e is not None for e in told):
                return [e for e in told if e is not None]
        return [self.reset()]

    def sse_id(self, event: Live) -> str:
        """The SSE id of ``event``: ``<epoch>.<id>``."""
        return f"{self.epoch}.{event.id}"

    def resume_after(self, last_event_id: str | None) -> int:
        """The id to resume after from a client's ``Last-Event-ID`` (``<epoch>.<id>``, or a bare id): -1 (a reset)
        when it names another monitor's event, 0 when there is none.

        Raises:
            ValueError: not an event id.
        """
        return resume_after(self.epoch, last_event_id)

    def reset(self) -> ResetLive:
        """A ``reset`` event with the whole current state (id: the last event's)."""
        self._seal()  # the watcher goes on after the last id: nothing more may join it
        return reset_event(self.run, self.last_id, self._wall(), self.state)

    async def wait(self, last_id: int) -> list[Live]:
        """The events after ``last_id`` (see :meth:`since`), waiting for one unless the run ended ([] then)."""
        self._seal()  # a delta published while it waits is a new event, and wakes it
        while not self.closed and self.last_id == last_id:
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()
        return self.since(last_id)

    def progress(self, event: Event) -> Live | None:
        """Publish the event an ingest ``event`` is when it is progress by itself (phase, status, tool result, error);
        None for the others (text, tool calls and ends are published by the run as they are resolved)."""
        if isinstance(event, TextEvent) and event.visibility is not Visibility.STATUS:
            return None  # the common case first: no source dumped for it
        source = event.source.model_dump() if event.source is not None else None
        if isinstance(event, Phase):
            return self.publish("phase", name=event.name, source=source)
        if isinstance(event, Status | TextEvent):
            return self.publish("status", text=event.text, source=source)
        if isinstance(event, ToolResult):
            return self.publish("tool_result", call_id=event.id, name=event.name, summary=event.summary, source=source)
        if isinstance(event, ErrorEvent):
            return self.publish("error", message=event.message, source=source)
        return None

    def delivered(self, channel: str, fact: dict[str, object], shown: str | Pinned | None = None) -> None:
        """Publish a ``delivery`` event (``fact``'s fields) on the row ``channel``. ``shown``: the whole text the part
        shows now (a web part): told as ``append`` when it extends what the part showed (a growing part costs its
        length once, not once per edit), else whole as ``text``; either as a range of ``shown``, which the state
        refers to (the delivery side's string or range of the answer, not a copy).

        An ``edited`` that follows the part's ``edited`` no watcher has read yet joins it (:meth:`_join`): a part
        edited once a second for minutes keeps one event until a watcher reads, as the ``answer`` deltas do, and a
        watcher sees the same messages. O(1) besides ``shown``'s comparison with what the part showed."""
        if self.closed:
            self.publish("delivery", channel=channel, **fact)
            return
        key = f"{channel}/{fact['part']}"
        key = self._part_keys.setdefault(key, key)
        if shown is not None:
            before = self._part_texts.get(key)
            generation = self._part_generations.get(key, 0)
            if isinstance(before, str | Pinned) and len(before) and _value(shown).startswith(_value(before)):
                if len(shown) > len(before):
                    fact["append"] = TextRange(generation, len(before), len(shown), key)
            else:
                generation = self._part_generations[key] = generation + 1  # ranges of the text before: unreadable
                fact["text"] = TextRange(generation, 0, len(shown), key)
            self._part_texts[key] = shown
        opened = self._open_parts.get(key)
        if opened is not None and self._join(opened, fact):
            return
        event = self.publish("delivery", channel=channel, **fact)
        if fact.get("state") == "edited" and not self.closed and _joinable(fact):
            self._open_parts[key] = event.id

    def _join(self, event_id: int, fact: dict[str, object]) -> bool:
        """Join the ``edited`` ``fact`` to the part's open ``edited`` event ``event_id`` (its text ranges joined: the
        text the two tell, once): the event becomes the later one's, at the same id. False (nothing done) when they
        cannot be one: another state, message or role, a reason or a 429's wait, ranges that do not follow."""
        at = self._at(event_id)
        if at is None or fact.get("state") != "edited" or not _joinable(fact):
            return False
        earlier = self._events[at]
        if not isinstance(earlier, DeliveryLive) or earlier.message_id != fact.get("message_id"):
            return False
        if earlier.role != fact.get("role"):
            return False
        text, append = fact.get("text"), fact.get("append")
        if text is None and append is None:
            text, append = earlier.text, earlier.append
        elif text is None:
            prior = earlier.text if earlier.append is None else earlier.append
            if prior is None:
                append = append
            elif not (
                isinstance(prior, TextRange)
                and isinstance(append, TextRange)
                and (prior.generation, prior.end, prior.part) == (append.generation, append.start, append.part)
            ):
                return False
            else:
                joined = TextRange(prior.generation, prior.start, append.end, prior.part)
                text, append = (joined, None) if earlier.append is None else (None, joined)
        assert text is None or isinstance(text, str | TextRange)
        assert append is None or isinstance(append, str | TextRange)
        event = replace(earlier, ts=self._wall(), text=text, append=append)
        if CHECK_CONTRACT:
            check_live_event((self._told(event) or event).wire())
        size = event.chars()
        self._events[at] = event
        self._chars += size - self._sizes[at]
        self._sizes[at] = size
        self._delivery(event)
        self._trim()
        self._wake()
        return True

    def _wake(self) -> None:
        """Wake the watchers waiting (:meth:`wait`), if any."""
        if (changed := self._changed) is not None:
            changed.set()  # the waiters' futures are resolved: clearing the flag does not undo that
            changed.clear()

    def _apply(self, event: Live) -> None:
        head = self._head
        if isinstance(event, AnswerLive):
            if self._published is None:
                self._answer = _apply_text(self._answer, event.delta, event.text, event.reset)
            head.final = bool(event.final)
        elif isinstance(event, DeliveryLive):
            self._delivery(event)
        elif isinstance(event, AgentLive):
            key = event.key
            agent = self._agents.setdefault(key, _Agent(event.source, ""))
            agent.state = event.state
            text = self._agent_texts.get(key, "")
            self._agent_texts[key] = _apply_text(text, event.delta, event.text, event.reset)
        elif isinstance(event, RunLive):
            head.channel, head.platform, head.mode, head.started_at = (
                event.channel,
                event.platform,
                event.mode,
                event.ts,
            )
        elif isinstance(event, EndLive):
            head.ended, head.delivery = event.status, event.delivery
        elif isinstance(event, ApprovalLive):
            self._approvals[event.approval] = event.facts()
        elif isinstance(event, _TIMELINE_CLASSES):
            if self._timeline is None:
                self._timeline = deque(maxlen=TIMELINE)
            self._timeline.append(event)

    def _delivery(self, event: DeliveryLive) -> None:
        key = f"{event.channel}/{event.part}"
        if event.state == "retrying" and event.retry_after_s is not None:
            self._head.rate_limited += 1
        self._parts.setdefault(key, {}).update(event.facts())
        text, append = event.text, event.append
        if isinstance(text, TextRange) or (text is None and isinstance(append, TextRange)):
            pass  # the state refers to the part's text already (delivered)
        elif text is not None:
            self._part_texts[key] = text
        elif isinstance(append, str):
            shown = self._part_texts.get(key, "")
            grown = shown if isinstance(shown, TextBuffer) else TextBuffer(_value(shown))
            grown.append(append)
            self._part_texts[key] = grown


def _joinable(fact: dict[str, object]) -> bool:
    """Whether a ``delivery`` fact may join another: no reason and no 429's wait in it (each of those is told)."""
    return fact.get("reason") is None and fact.get("retry_after_s") is None


def _value(text: TextBuffer | str | Pinned) -> str:
    return text if isinstance(text, str) else text.value()


def _apply_text(text: TextBuffer | str, delta: Text | None, whole: Text | None, reset: bool | None) -> TextBuffer | str:
    """``delta`` appended to ``text``, or ``whole`` instead of it when ``reset``: that string itself, not a copy (the
    committed final is the run stage's string). Never ranges: the shared answer's events are not applied. A delta
    after a whole string makes it a :class:`TextBuffer` (a copy, then appends)."""
    assert not isinstance(delta, TextRange) and not isinstance(whole, TextRange)
    if reset:
        return whole or ""
    if delta:
        if isinstance(text, str):
            text = TextBuffer(text)
        text.append(delta)
    return text


def resume_after(epoch: str, last_event_id: str | None) -> int:
    """The id to resume after from a client's ``Last-Event-ID`` (``<epoch>.<id>``, or a bare id) for a monitor of
    ``epoch``: -1 (a reset) when it names another monitor's event, 0 when there is none.

    Raises:
        ValueError: not an event id.
    """
    if not last_event_id:
        return 0
    event_epoch, _, number = last_event_id.rpartition(".")
    if event_epoch and event_epoch != epoch:
        return -1
    return int(number)


def reset_event(run: str, last_id: int, ts: float, state: dict[str, object]) -> ResetLive:
    """A ``reset`` event of ``run`` carrying ``state`` (its JSON object; its id: the last event's, ``last_id``)."""
    reset = ResetLive(id=last_id, run=run, seq=last_id, ts=ts, state=state)
    if CHECK_CONTRACT:
        check_live_event(reset.wire())
    return reset


class DeliveryWatch:
    """Where a conversation's reconciler tells each call's outcome (:data:`core.delivery.reconciler.DeliveryFeed`):
    published as a ``delivery`` event of ``monitor``, on the row ``channel``.

    With ``live_text`` (the web channel, whose page is the chat) the part's text goes too: as ``append`` when it
    extends what the part showed (a growing part costs its length once, not once per edit), else whole as ``text``.
    Without it the text is dropped (a chat's text is the platform's to show, not the page's).

    Args:
        monitor: the run's monitor.
        channel: the row's name: the channel, or ``<channel> ↳ <agent>`` for a sub-agent's thread.
        live_text: send the parts' texts.
    """

    __slots__ = ("_channel", "_live_text", "_monitor")

    def __init__(self, monitor: RunMonitor, channel: str, *, live_text: bool) -> None:
        self._monitor = monitor
        self._channel = channel
        self._live_text = live_text

    def __call__(self, fact: dict[str, object]) -> None:
        text = fact.pop("text", "")
        shown = text if isinstance(text, str | Pinned) else ""
        self._monitor.delivered(self._channel, fact, shown if self._live_text else None)
