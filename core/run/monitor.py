"""The run monitor: one run's live progress as numbered events, for browsers and other watchers (SSE).

Every event is a JSON object with ``id`` (1, 2, … per run; its SSE id is ``<epoch>.<id>``, :meth:`RunMonitor.sse_id`,
which a reconnecting client sends back as ``Last-Event-ID``), ``run``, ``seq`` (= ``id``), ``ts`` (wall-clock Unix
seconds, float) and ``type``:

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
``end``        ``status`` (ok, error, cancelled), ``delivery`` (the report's status): the last event
``reset``      ``state``: the whole current state (below), sent instead of events a client missed past the replay
               buffer; its ``id`` is the last event's, so the client continues from there
=============  ======================================================================================================

State (what ``reset`` carries, and what a page shows): ``{"run", "channel", "platform", "mode", "started_at"
(the ``run`` event's ``ts``), "rate_limited" (how many ``delivery`` events said ``retrying`` with ``retry_after_s``:
the 429s met), "answer", "final", "agents": {key: {"source", "state", "text"}}, "timeline": [the last 200 phase /
status / tool / decision / error events], "parts": {"<channel>/<part>": {delivery fields}}, "ended": status or
null, "delivery": the report's status at the end or null}``. :meth:`RunMonitor.row` is the run's line in the
operator's listing (``GET /v1/runs``).

Replay: the last ``buffer`` events (and at most ``max_chars`` characters of their text) are kept while the run
goes on; a watcher that resumes after an id still in the buffer gets exactly the events after it, once; one that
resumes from further back (or from an id the run never had) gets one ``reset``. Once the run ended only its last
32 events (and 4,096 characters of their text) are kept: a finished run is its state (the answer, each part's and
each agent's text once), and a watcher further behind gets one ``reset`` with ``ended`` set.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from core.contracts.live import check_live_event
from core.events import ErrorEvent, Event, Phase, Status, TextEvent, ToolResult, Visibility
from core.records.report import DeliveryReport
from core.text.safe_text import safe_text

TIMELINE = 200
"""Progress entries the state keeps (older ones drop out of it; they were sent as events)."""
KEEP_AFTER_END = 32
"""Events a finished run keeps, so that watchers just behind get them exactly (the others: one ``reset``)."""
KEEP_CHARS_AFTER_END = 4096
"""And at most this many characters of their text (besides the last event): a finished run's answer is in its state
once, not again in the events that streamed it (an 8.5k answer joined into one delta event, its final text event)."""
TIMELINE_TYPES = frozenset({"phase", "status", "tool_call", "tool_result", "decision", "error"})
STAGE_TEXT_TYPES = frozenset({"answer", "agent"})
"""Events whose text the run stage built from events it sanitized (:func:`core.text.safe_text.safe_event`): one per
delta, so not scanned again. The strings of every other event are passed through :func:`core.text.safe_text.safe_text`
when published (gate decisions, delivery reasons, tool names come from elsewhere)."""

CHECK_CONTRACT = os.environ.get("STREAMRELAY_CHECK_CONTRACTS", "") == "1"
"""With ``STREAMRELAY_CHECK_CONTRACTS=1`` (the tests set it: tests/conftest.py) every event is validated against its
typed model (:mod:`core.contracts.live`) where it is published, so a producer's field off the contract fails there.
Off in service: a model per event would add to the per-delta cost (issue 13 measured publishing at 27%)."""


class RunMonitor:
    """One run's event log with a bounded replay buffer and the current state.

    Args:
        run: the run id.
        buffer: how many of the latest events are kept for replay.
        wall: the wall clock (Unix seconds) for ``ts``.
    """

    def __init__(
        self, run: str, *, buffer: int = 1000, max_chars: int = 4_000_000, wall: Callable[[], float] = time.time
    ) -> None:
        self.run = run
        self._events: deque[dict[str, Any]] = deque(maxlen=max(1, buffer))
        self._sizes: deque[int] = deque()
        self._chars = 0
        self._max_chars = max_chars
        self.epoch = secrets.token_hex(4)
        """This monitor's instance: a run resumed after a restart gets a new monitor numbering from 1 again, so a
        watcher's id from the old one must not pass for an id of the new one (SSE ids are ``<epoch>.<id>``)."""
        self._wall = wall
        self.last_id = 0
        self.closed = False
        self._changed = asyncio.Event()
        self._open: list[str] | None = None
        """The deltas merged into the last event, an ``answer`` delta no watcher has read yet (None: none open)."""
        self._state: dict[str, Any] = {
            "run": run,
            "channel": None,
            "platform": None,
            "mode": None,
            "started_at": None,
            "rate_limited": 0,
            "final": False,
            "ended": None,
            "delivery": None,
        }
        # Texts grow by appends: kept as parts and joined only when the state is read, so an event costs its own
        # length, not the text's.
        self._answer = _Text()
        self._agents: dict[str, dict[str, Any]] = {}
        self._agent_texts: dict[str, _Text] = {}
        self._parts: dict[str, dict[str, Any]] = {}
        self._part_texts: dict[str, _Text] = {}
        self._timeline: deque[dict[str, Any]] = deque(maxlen=TIMELINE)

    @property
    def state(self) -> dict[str, Any]:
        """The whole current state (built when read: O(its size))."""
        state = dict(self._state)
        state["answer"] = self._answer.value()
        state["agents"] = {k: {**v, "text": self._agent_texts[k].value()} for k, v in self._agents.items()}
        state["parts"] = {
            k: {**v, **({"text": self._part_texts[k].value()} if k in self._part_texts else {})}
            for k, v in self._parts.items()
        }
        state["timeline"] = list(self._timeline)
        return state

    def row(self, report: DeliveryReport) -> dict[str, Any]:
        """The run as the operator's listing shows it (``GET /v1/runs``), with its current ``report``: ``{"run",
        "channel", "platform", "mode", "started_at" (Unix s, null until the run opened), "age_s", "status" (the
        report's), "confirmed", "uncertain", "failed" (counts of parts), "rate_limited" (429s met so far)}``."""
        state, started_at = self._state, self._state["started_at"]
        counts = {"confirmed": report.confirmed, "uncertain": report.uncertain, "failed": report.failed}
        return {
            "run": self.run,
            "channel": state["channel"] or report.channel,
            "platform": state["platform"],
            "mode": state["mode"],
            "started_at": started_at,
            "age_s": None if started_at is None else round(max(0.0, self._wall() - started_at), 3),
            "status": str(report.status),
            **counts,
            "rate_limited": state["rate_limited"],
        }

    def publish(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Add one event (its ``id``, ``run``, ``seq``, ``ts`` are set here), update the state, wake watchers.
        Events after ``end`` are ignored (returned, not kept). Top-level strings are made safe to show
        (:data:`STAGE_TEXT_TYPES`)."""
        self._seal()
        if type_ not in STAGE_TEXT_TYPES:
            fields = {k: safe_text(v) if isinstance(v, str) else v for k, v in fields.items()}
        self.last_id += 0 if self.closed else 1
        event = {"id": self.last_id, "run": self.run, "seq": self.last_id, "ts": self._wall(), "type": type_, **fields}
        if CHECK_CONTRACT:
            check_live_event(event)
        if self.closed:
            return event
        self._keep(event)
        self._apply(event)
        if type_ == "end":
            self.closed = True
            while len(self._events) > 1 and (  # a finished run is its state (and its last events)
                len(self._events) > KEEP_AFTER_END or self._chars > KEEP_CHARS_AFTER_END
            ):
                self._events.popleft()
                self._chars -= self._sizes.popleft()
        self._changed.set()  # the waiters' futures are resolved: clearing the flag does not undo that
        self._changed.clear()
        return event

    def answer_delta(self, delta: str) -> None:
        """Publish that the answer grew by ``delta``, lazily: a delta that follows one no watcher has read yet is
        merged into it (one ``answer`` event, its ``delta`` the two joined when it is read), so a run streamed one
        character at a time costs one event per read, not one per delta, and a watcher sees the same text. Any other
        event, and any read (:meth:`since`, :meth:`wait`, :meth:`reset`), closes the merged event. O(len(delta))."""
        if self._open is None or self.closed:
            self.publish("answer", delta=delta)
            if not self.closed:
                self._open = [delta]
            return
        self._open.append(delta)
        self._answer.add(delta)
        self._sizes[-1] += len(delta)
        self._chars += len(delta)
        if self._chars > self._max_chars:
            self._seal()
            self._trim()

    def _seal(self) -> None:
        """The open ``answer`` delta becomes an event like any other (its parts joined): read, or followed."""
        if self._open is not None:
            if len(self._open) > 1:
                self._events[-1]["delta"] = "".join(self._open)
            self._open = None

    def _keep(self, event: dict[str, Any]) -> None:
        """Buffer ``event``, dropping the oldest past ``buffer`` events or ``max_chars`` characters of text."""
        size = sum(len(v) for v in event.values() if isinstance(v, str))
        if len(self._events) == self._events.maxlen:
            self._chars -= self._sizes.popleft()
        self._events.append(event)
        self._sizes.append(size)
        self._chars += size
        self._trim()

    def _trim(self) -> None:
        while self._chars > self._max_chars and len(self._events) > 1:
            self._events.popleft()
            self._chars -= self._sizes.popleft()

    def since(self, last_id: int) -> list[dict[str, Any]]:
        """What a watcher that has seen up to ``last_id`` must get: the events after it, or one ``reset`` when
        they are no longer all in the buffer (or ``last_id`` is not an id of this run)."""
        self._seal()
        if last_id == self.last_id:
            return []
        if last_id > self.last_id:  # an id this run never had (another monitor's): the state, not a silent wait
            return [self.reset()]
        first = self._events[0]["id"] if self._events else self.last_id + 1
        if 0 <= last_id < self.last_id and last_id >= first - 1:
            return [e for e in self._events if e["id"] > last_id]
        return [self.reset()]

    def sse_id(self, event: dict[str, Any]) -> str:
        """The SSE id of ``event``: ``<epoch>.<id>``."""
        return f"{self.epoch}.{event['id']}"

    def resume_after(self, last_event_id: str | None) -> int:
        """The id to resume after from a client's ``Last-Event-ID`` (``<epoch>.<id>``, or a bare id): -1 (a reset)
        when it names another monitor's event, 0 when there is none.

        Raises:
            ValueError: not an event id.
        """
        if not last_event_id:
            return 0
        epoch, _, number = last_event_id.rpartition(".")
        if epoch and epoch != self.epoch:
            return -1
        return int(number)

    def reset(self) -> dict[str, Any]:
        """A ``reset`` event with the whole current state (id: the last event's)."""
        self._seal()  # the watcher goes on after the last id: nothing more may join it
        state = self.state
        event = {"id": self.last_id, "run": self.run, "seq": self.last_id, "ts": self._wall(), "type": "reset"}
        reset = {**event, "state": state}
        if CHECK_CONTRACT:
            check_live_event(reset)
        return reset

    async def wait(self, last_id: int) -> list[dict[str, Any]]:
        """The events after ``last_id`` (see :meth:`since`), waiting for one unless the run ended ([] then)."""
        self._seal()  # a delta published while it waits is a new event, and wakes it
        while not self.closed and self.last_id == last_id:
            await self._changed.wait()
        return self.since(last_id)

    def _apply(self, event: dict[str, Any]) -> None:
        state, kind = self._state, event["type"]
        if kind == "run":
            state.update(channel=event.get("channel"), platform=event.get("platform"), mode=event.get("mode"))
            state["started_at"] = event["ts"]
        elif kind == "answer":
            self._answer.apply(event)
            state["final"] = bool(event.get("final"))
        elif kind == "agent":
            key = event["key"]
            agent = self._agents.setdefault(key, {"source": event.get("source"), "state": ""})
            agent["state"] = event.get("state", agent["state"])
            self._agent_texts.setdefault(key, _Text()).apply(event)
        elif kind == "delivery":
            key = f"{event.get('channel')}/{event.get('part')}"
            if event.get("state") == "retrying" and event.get("retry_after_s") is not None:
                state["rate_limited"] += 1
            skip = ("id", "run", "seq", "ts", "type", "append", "text")
            self._parts.setdefault(key, {}).update((k, v) for k, v in event.items() if k not in skip)
            if "text" in event or "append" in event:
                self._part_texts.setdefault(key, _Text()).apply(
                    {"text": event["text"], "reset": True} if "text" in event else {"delta": event["append"]}
                )
        elif kind == "end":
            state["ended"], state["delivery"] = event.get("status"), event.get("delivery")
        if kind in TIMELINE_TYPES:
            self._timeline.append(event)


class _Text:
    """A text that grows by appends (``delta``) or is replaced (``text`` with ``reset``), joined when read."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[str] = []

    def add(self, delta: str) -> None:
        if delta:
            self._parts.append(delta)

    def apply(self, event: dict[str, Any]) -> None:
        if event.get("reset"):
            self._parts = [event.get("text", "")]
        elif event.get("delta"):
            self._parts.append(event["delta"])

    def value(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""


def progress_event(event: Event) -> tuple[str, dict[str, Any]] | None:
    """The monitor event an ingest event is, when it is progress by itself (phase, status, tool result,
    error); None for the others (text, tool calls and ends are published by the run as they are resolved)."""
    if isinstance(event, TextEvent) and event.visibility is not Visibility.STATUS:
        return None  # the common case first: no source dumped for it
    source = event.source.model_dump() if event.source is not None else None
    if isinstance(event, Phase):
        return "phase", {"name": event.name, "source": source}
    if isinstance(event, Status):
        return "status", {"text": event.text, "source": source}
    if isinstance(event, TextEvent) and event.visibility is Visibility.STATUS:
        return "status", {"text": event.text, "source": source}
    if isinstance(event, ToolResult):
        return "tool_result", {"call_id": event.id, "name": event.name, "summary": event.summary, "source": source}
    if isinstance(event, ErrorEvent):
        return "error", {"message": event.message, "source": source}
    return None


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

    def __init__(self, monitor: RunMonitor, channel: str, *, live_text: bool) -> None:
        self._monitor = monitor
        self._channel = channel
        self._shown: dict[Any, str] | None = {} if live_text else None

    def __call__(self, fact: dict[str, Any]) -> None:
        text = fact.pop("text", "")
        if self._shown is not None:
            part, before = fact["part"], self._shown.get(fact["part"], "")
            if before and text.startswith(before):
                if len(text) > len(before):
                    fact["append"] = text[len(before) :]
            else:
                fact["text"] = text
            self._shown[part] = text
        self._monitor.publish("delivery", channel=self._channel, **fact)
