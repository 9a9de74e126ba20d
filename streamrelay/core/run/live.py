"""A run's live events as values at run time: what :class:`core.run.monitor.RunMonitor` publishes, keeps and hands
its watchers, one frozen slotted class per event type; JSON only at the edges (:meth:`Live.wire`: the SSE data of the
live page's stream, a finished run's kept record; :func:`from_wire` reads a kept one back).

Their contract (field meanings, the JSON Schema) is :mod:`core.contracts.live`: pydantic models, built where an event
is read or checked, never per delta here. :meth:`Live.wire` gives the object key for key as the wire has it
(tests/unit/test_contracts.py pins its bytes): ``id``, ``run``, ``seq``, ``ts``, ``type``, then the type's fields in
:attr:`Live.WIRE` order, an optional one (``delta``, ``reason``, …) absent when None.

An ``answer`` event's ``delta`` or ``text`` and a ``delivery`` event's ``text`` or ``append`` may be a
:class:`TextRange` while the monitor holds it (a range of a text kept once); the monitor materializes it before an
event leaves it (:meth:`core.run.monitor.RunMonitor.since`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from streamrelay.core.json_types import JsonObject


class TextRange:
    """An event's text as a range of a text kept once under one generation: of the run's shared answer (``part``
    None), or of the whole text web part ``part`` shows. Mutable: the open ``answer`` delta grows by its ``end``."""

    __slots__ = ("end", "generation", "part", "start")

    def __init__(self, generation: int, start: int, end: int, part: str | None = None) -> None:
        self.generation, self.start, self.end, self.part = generation, start, end, part


Text = str | TextRange
"""An event's text while the monitor holds it."""
Source = dict[str, object]
"""A sub-agent as the producers dumped it (:class:`core.events.Source`'s JSON object; None: the root agent)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Live:
    """What every live event has: ``id`` (1, 2, … per run), ``run``, ``seq`` (= ``id``), ``ts`` (wall-clock Unix
    seconds); ``type`` is the class's."""

    type: ClassVar[str]
    WIRE: ClassVar[tuple[tuple[str, bool], ...]] = ()
    """The type's fields in wire order, each with whether it is left out when None."""

    id: int
    run: str
    seq: int
    ts: float

    def wire(self) -> JsonObject:
        """The event's JSON object, key for key as the wire has it (its texts must be strings: not ranges)."""
        out: JsonObject = {"id": self.id, "run": self.run, "seq": self.seq, "ts": self.ts, "type": self.type}
        for name, optional in self.WIRE:
            value = getattr(self, name)
            if value is not None or not optional:
                assert not isinstance(value, TextRange), "a range leaves the monitor materialized"
                out[name] = value
        return out

    def chars(self) -> int:
        """The length of its strings (a range counts as the text it tells)."""
        size = 0
        for name, _ in self.WIRE:
            value = getattr(self, name)
            if isinstance(value, str):
                size += len(value)
            elif isinstance(value, TextRange):
                size += value.end - value.start
        return size


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLive(Live):
    """The run started delivering (always event 1)."""

    type: ClassVar[str] = "run"
    WIRE = (("channel", False), ("platform", False), ("mode", False))
    channel: str
    platform: str | None
    mode: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseLive(Live):
    """The agent entered a phase."""

    type: ClassVar[str] = "phase"
    WIRE = (("name", False), ("source", False))
    name: str
    source: Source | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusLive(Live):
    """A status line."""

    type: ClassVar[str] = "status"
    WIRE = (("text", False), ("source", False))
    text: str
    source: Source | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallLive(Live):
    """A tool call completed (``args`` a redacted preview), or was malformed."""

    type: ClassVar[str] = "tool_call"
    WIRE = (("call_id", False), ("name", False), ("args", False), ("malformed", False), ("source", False))
    call_id: str
    name: str | None
    args: str
    malformed: bool
    source: Source | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultLive(Live):
    """A tool's result, summarized."""

    type: ClassVar[str] = "tool_result"
    WIRE = (("call_id", False), ("name", False), ("summary", False), ("source", False))
    call_id: str
    name: str | None
    summary: str
    source: Source | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionLive(Live):
    """A decision: ``commit``, ``gate`` (about ``call_id``: ``verdict``), ``stop`` (``reason``)."""

    type: ClassVar[str] = "decision"
    WIRE = (("what", False), ("reason", True), ("call_id", True), ("name", True), ("verdict", True))
    what: str
    reason: str | None = None
    call_id: str | None = None
    name: str | None = None
    verdict: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalLive(Live):
    """An approval as a page shows it (:mod:`core.run.approvals`): asked (``state`` ``pending``, with what is asked,
    what will be done, who may decide and until when), ``decided`` (``decision``, ``approved``, ``by``, ``at``) or
    ``ended`` (the run ended before anyone decided)."""

    type: ClassVar[str] = "approval"
    WIRE = (
        ("approval", False),
        ("state", False),
        ("question", False),
        ("action", True),
        ("approvers", False),
        ("anyone", False),
        ("expires_at", False),
        ("on_expiry", False),
        ("decision", True),
        ("approved", True),
        ("by", True),
        ("at", True),
    )
    approval: str
    state: str
    question: str
    action: str | None = None
    approvers: list[str]
    anyone: bool
    expires_at: float
    on_expiry: str
    decision: str | None = None
    approved: bool | None = None
    by: str | None = None
    at: float | None = None

    def facts(self) -> JsonObject:
        """What the state keeps of the approval (its wire fields but the event's own)."""
        return {k: v for k, v in self.wire().items() if k not in ("id", "run", "seq", "ts", "type")}


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerLive(Live):
    """The root's answer: ``delta`` (appended), or ``text`` with ``reset``; ``final`` on the committed text."""

    type: ClassVar[str] = "answer"
    WIRE = (("delta", True), ("text", True), ("reset", True), ("final", True))
    delta: Text | None = None
    text: Text | None = None
    reset: bool | None = None
    final: bool | None = None

    def chars(self) -> int:
        """The length of its text (one per delta: no loop over its fields)."""
        return _length(self.delta) + _length(self.text)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentLive(Live):
    """A sub-agent's state and its text: ``delta``, or ``text`` with ``reset``."""

    type: ClassVar[str] = "agent"
    WIRE = (("key", False), ("source", False), ("state", False), ("delta", True), ("text", True), ("reset", True))
    key: str
    source: Source | None
    state: str
    delta: str | None = None
    text: str | None = None
    reset: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryLive(Live):
    """One platform call's outcome for a message part; on the web channel its ``text`` or ``append``."""

    type: ClassVar[str] = "delivery"
    WIRE = (
        ("channel", False),
        ("part", False),
        ("role", False),
        ("state", False),
        ("message_id", False),
        ("retry_after_s", True),
        ("reason", True),
        ("text", True),
        ("append", True),
    )
    channel: str
    part: int
    role: str
    state: str
    message_id: str | None = None
    retry_after_s: float | None = None
    reason: str | None = None
    text: Text | None = None
    append: Text | None = None

    def facts(self) -> dict[str, object]:
        """Its fields a part's state keeps, as on the wire (its texts apart)."""
        facts: dict[str, object] = {"channel": self.channel, "part": self.part, "role": self.role, "state": self.state}
        facts["message_id"] = self.message_id
        if self.retry_after_s is not None:
            facts["retry_after_s"] = self.retry_after_s
        if self.reason is not None:
            facts["reason"] = self.reason
        return facts

    def chars(self) -> int:
        """The length of its strings (one per platform call: no loop over its fields)."""
        size = len(self.channel) + len(self.role) + len(self.state) + _length(self.message_id) + _length(self.reason)
        return size + _length(self.text) + _length(self.append)


@dataclass(frozen=True, slots=True, kw_only=True)
class MediaLive(Live):
    """A media item of the answer, shown as its own message."""

    type: ClassVar[str] = "media"
    WIRE = (("url", False), ("media_kind", False), ("caption", False))
    url: str
    media_kind: str
    caption: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorLive(Live):
    """A failure, shown as one."""

    type: ClassVar[str] = "error"
    WIRE = (("message", False), ("source", False))
    message: str
    source: Source | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EndLive(Live):
    """The run ended (the last event)."""

    type: ClassVar[str] = "end"
    WIRE = (("status", False), ("delivery", False))
    status: str
    delivery: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ResetLive(Live):
    """The whole current state (its JSON object: :class:`core.contracts.live.LiveState`), instead of events a watcher
    missed; its ``id`` is the last event's."""

    type: ClassVar[str] = "reset"
    WIRE = (("state", False),)
    state: dict[str, object]


def _length(text: Text | None) -> int:
    if text is None:
        return 0
    return len(text) if isinstance(text, str) else text.end - text.start


LIVE_VALUES: dict[str, type[Live]] = {
    cls.type: cls
    for cls in (
        RunLive,
        PhaseLive,
        StatusLive,
        ToolCallLive,
        ToolResultLive,
        DecisionLive,
        ApprovalLive,
        AnswerLive,
        AgentLive,
        DeliveryLive,
        MediaLive,
        ErrorLive,
        EndLive,
        ResetLive,
    )
}
"""The event classes by ``type``."""


def from_wire(data: JsonObject) -> Live:
    """The event of a JSON object :meth:`Live.wire` gave (a finished run's kept event): the class its ``type`` names,
    built with the object's other members as its fields.

    Raises:
        KeyError: an unknown ``type``. TypeError: a field off its class.
    """
    kind = data["type"]
    if not isinstance(kind, str) or kind not in LIVE_VALUES:
        raise KeyError(kind)
    # The one trusted step: the members are the class's fields as Live.wire wrote them (JSON values of their types).
    fields: dict[str, Any] = {k: v for k, v in data.items() if k != "type"}
    return LIVE_VALUES[kind](**fields)
