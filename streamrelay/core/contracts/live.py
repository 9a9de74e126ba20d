"""Live monitor events, typed: one run's progress as watchers get it (:mod:`core.run.monitor`, the live page's SSE
``GET /v1/runs/{run}/live``, :meth:`app.client.RelayClient.watch`).

Every event has ``id`` (1, 2, … per run), ``run``, ``seq`` (= ``id``), ``ts`` (wall-clock Unix seconds) and
``type``; :data:`LiveEvent` is their union discriminated on ``type``. Fields a type has only sometimes (an
``answer``'s ``delta`` or ``text``, a ``delivery``'s ``retry_after_s``) are optional: absent on the wire, None
here; ``model_dump(mode="json", exclude_unset=True)`` gives back the wire's object key for key. Read leniently (a
field a newer sidecar adds is ignored, a type it adds is an :class:`OtherLiveEvent`); checked strictly where the
sidecar publishes them in tests (:func:`check_live_event`).

Cost: the monitor publishes frozen slotted dataclasses (:mod:`core.run.live`; one per read of merged answer deltas:
:meth:`core.run.monitor.RunMonitor.answer_delta`), never these models, and writes their JSON at the edge
(:meth:`core.run.live.Live.wire`): a run streamed a character at a time pays nothing for them. They are built where
an event is read: by a client, a test, the schema (issue 13 measured publishing per delta at 27% of a run's
handling; validating there would add to it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter

from streamrelay.core.json_types import JsonObject
from streamrelay.core.records.report import SlotRole


class _Live(BaseModel):
    """What every live event has."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: int = Field(ge=0, description="The event's number in the run (its SSE id is ``<epoch>.<id>``).")
    run: str
    seq: int = Field(ge=0, description="Equal to ``id``.")
    ts: float = Field(description="Wall-clock Unix seconds.")
    type: str


class SourceFields(BaseModel):
    """A sub-agent as live events show it (``source``: its JSON object; null is the root agent)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    agent_id: str
    session_id: str | None = None
    parent_session_id: str | None = None
    depth: int = 1
    path: str | None = None


class RunOpened(_Live):
    """The run started delivering (always event 1)."""

    type: Literal["run"] = "run"
    channel: str
    platform: str | None
    mode: str = Field(description="The delivery mode: preview, block, final, progress or native.")


class PhaseEvent(_Live):
    """The agent entered a phase (``name``)."""

    type: Literal["phase"] = "phase"
    name: str
    source: SourceFields | None = None


class StatusEvent(_Live):
    """A status line (``text``)."""

    type: Literal["status"] = "status"
    text: str
    source: SourceFields | None = None


class ToolCallEvent(_Live):
    """A tool call completed (``args`` a redacted preview, never the arguments), or was malformed."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str | None
    args: str
    malformed: bool
    source: SourceFields | None = None


class ToolResultEvent(_Live):
    """A tool's result, summarized."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str | None
    summary: str
    source: SourceFields | None = None


class DecisionEvent(_Live):
    """A decision: ``commit`` (the answer passed its checks), ``gate`` (the action gate answered about
    ``call_id``), ``stop`` (a person stopped the run: ``reason`` says who and why), ``approval`` (an approval
    ``call_id`` was asked, ``verdict`` ``pending`` and ``reason`` its question, or decided: ``verdict`` approved,
    denied or expired, ``reason`` who decided)."""

    type: Literal["decision"] = "decision"
    what: str = Field(description="commit, gate, stop or approval.")
    call_id: str | None = None
    name: str | None = None
    verdict: str | None = Field(
        default=None,
        description="The gate's verdict: run, wait or refuse; an approval's: pending, approved, denied or expired.",
    )
    reason: str | None = None


class ApprovalEvent(_Live):
    """An approval as a page shows it (docs/approvals.md): asked (``state`` ``pending``), ``decided``, or ``ended``
    (the run ended before anyone decided). Each change of an approval is one such event with all its fields."""

    type: Literal["approval"] = "approval"
    approval: str = Field(description="The approval's id in the run.")
    state: Literal["pending", "decided", "ended"]
    question: str = Field(description="What is asked.")
    action: str | None = Field(default=None, description="What will be done if approved.")
    approvers: list[str] = Field(description="Platform user ids who may decide (empty with anyone).")
    anyone: bool = Field(description="Anyone in the chat may decide (the channel's approvals_anyone).")
    expires_at: float = Field(description="When it expires, Unix seconds.")
    on_expiry: Literal["approved", "denied"]
    decision: Literal["approved", "denied", "expired"] | None = None
    approved: bool | None = None
    by: str | None = Field(default=None, description="Who decided (null at the expiry).")
    at: float | None = Field(default=None, description="When it was decided, Unix seconds.")


class AnswerEvent(_Live):
    """The root's answer as it streams: ``delta`` (appended), or ``text`` with ``reset`` (the whole answer);
    ``final`` on the committed final text."""

    type: Literal["answer"] = "answer"
    delta: str | None = None
    text: str | None = None
    reset: bool | None = None
    final: bool | None = None


class AgentEvent(_Live):
    """A sub-agent's state (``started``, ``using X``, ``done``, ``failed``, …) and its text: ``delta`` or ``text``
    with ``reset``."""

    type: Literal["agent"] = "agent"
    key: str = Field(description="The sub-agent's identity (its session, else path, else agent id).")
    source: SourceFields
    state: str
    delta: str | None = None
    text: str | None = None
    reset: bool | None = None


class DeliveryEvent(_Live):
    """One platform call's outcome for a message part (a delivery fact of the run's ledger).

    ``state``: sent, edited, deleted, retrying (``retry_after_s`` after a 429), uncertain (may have landed: never
    blindly retried), failed, …; ``reason`` why a part failed or is uncertain. On the web channel, what the page
    shows as that message: ``text`` (whole) or ``append`` (added to the text shown).
    """

    type: Literal["delivery"] = "delivery"
    channel: str = Field(description="The channel, or ``<channel> ↳ <agent>`` for a sub-agent's thread.")
    part: int = Field(ge=0)
    role: SlotRole
    state: str
    message_id: str | None = None
    retry_after_s: float | None = None
    reason: str | None = None
    text: str | None = None
    append: str | None = None


class MediaEvent(_Live):
    """A media item of the answer (an image, a file, audio, video), shown as its own message."""

    type: Literal["media"] = "media"
    url: str
    media_kind: str = Field(description="image, file, audio or video.")
    caption: str = ""


class ErrorLiveEvent(_Live):
    """A failure, shown as one, never as an answer."""

    type: Literal["error"] = "error"
    message: str
    source: SourceFields | None = None


class EndLiveEvent(_Live):
    """The run ended (the last event): its end ``status`` and the report's ``delivery`` status."""

    type: Literal["end"] = "end"
    status: str = Field(description="ok, error, cancelled, refused or cut.")
    delivery: str = Field(description="The delivery report's status: delivered, partial, failed, empty.")


class AgentState(BaseModel):
    """A sub-agent in the live state."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    source: SourceFields | None
    state: str
    text: str


class LiveState(BaseModel):
    """A run's whole live state, as a ``reset`` event carries it and a page shows it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    run: str
    channel: str | None
    platform: str | None
    mode: str | None
    started_at: float | None = Field(description="The ``run`` event's ``ts`` (null before it).")
    rate_limited: int = Field(ge=0, description="How many ``delivery`` events said retrying with retry_after_s.")
    final: bool
    ended: str | None = Field(description="The end status, null while the run goes on.")
    delivery: str | None = Field(description="The report's status at the end, null before.")
    answer: str
    agents: dict[str, AgentState]
    parts: dict[str, JsonObject] = Field(
        description="``<channel>/<part>``: the part's delivery fields (a ``delivery`` event's), and ``text``."
    )
    timeline: list[JsonObject] = Field(description="The last 200 phase, status, tool, decision and error events.")
    approvals: dict[str, JsonObject] = Field(
        default_factory=dict,
        description="Each approval by its id: its latest ``approval`` event's fields (``approval``, ``state``, …).",
    )


class ResetEvent(_Live):
    """The whole current state, instead of events a watcher missed past the replay buffer; its ``id`` is the last
    event's, so the watcher continues from there."""

    type: Literal["reset"] = "reset"
    state: LiveState


class WaitingEvent(BaseModel):
    """The live stream of a run that has not started yet (no SSE id): its events follow when it starts."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: Literal["waiting"] = "waiting"
    run: str


class OtherLiveEvent(_Live):
    """An event of a type this reader does not know (a sidecar one version ahead added it): its fields as sent."""

    model_config = ConfigDict(frozen=True, extra="allow")


LIVE_TYPES: dict[str, type[BaseModel]] = {
    "run": RunOpened,
    "phase": PhaseEvent,
    "status": StatusEvent,
    "tool_call": ToolCallEvent,
    "tool_result": ToolResultEvent,
    "decision": DecisionEvent,
    "approval": ApprovalEvent,
    "answer": AnswerEvent,
    "agent": AgentEvent,
    "delivery": DeliveryEvent,
    "media": MediaEvent,
    "error": ErrorLiveEvent,
    "end": EndLiveEvent,
    "reset": ResetEvent,
    "waiting": WaitingEvent,
}
"""The contract's event types and their classes."""


def _type(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if isinstance(kind, str) and kind in LIVE_TYPES else "other"


LiveEvent = Annotated[
    Annotated[RunOpened, Tag("run")]
    | Annotated[PhaseEvent, Tag("phase")]
    | Annotated[StatusEvent, Tag("status")]
    | Annotated[ToolCallEvent, Tag("tool_call")]
    | Annotated[ToolResultEvent, Tag("tool_result")]
    | Annotated[DecisionEvent, Tag("decision")]
    | Annotated[ApprovalEvent, Tag("approval")]
    | Annotated[AnswerEvent, Tag("answer")]
    | Annotated[AgentEvent, Tag("agent")]
    | Annotated[DeliveryEvent, Tag("delivery")]
    | Annotated[MediaEvent, Tag("media")]
    | Annotated[ErrorLiveEvent, Tag("error")]
    | Annotated[EndLiveEvent, Tag("end")]
    | Annotated[ResetEvent, Tag("reset")]
    | Annotated[WaitingEvent, Tag("waiting")]
    | Annotated[OtherLiveEvent, Tag("other")],
    Discriminator(_type),
]
"""One live event: the union of the event classes, discriminated on ``type`` (unknown: :class:`OtherLiveEvent`)."""

LIVE_EVENT: TypeAdapter[LiveEvent] = TypeAdapter(LiveEvent)
"""Validates one live event's JSON object (``validate_python``) or SSE data (``validate_json``)."""


def parse_live_event(data: JsonObject) -> LiveEvent:
    """The typed event of one live event's JSON object, read leniently (unknown fields ignored, an unknown type an
    :class:`OtherLiveEvent`).

    Raises:
        pydantic.ValidationError: a field of its type is missing or of the wrong type; the message names it.
    """
    return LIVE_EVENT.validate_python(data)


def check_live_event(event: JsonObject) -> LiveEvent:
    """``event`` checked strictly against the contract, as the sidecar publishes it: a known type, its fields, no
    other (in a ``reset``'s state too, at its top level).

    Raises:
        ValueError: an unknown type or a field off the contract (named, with the model to add it to); a
            pydantic.ValidationError (a ValueError) when a field is missing or of the wrong type.
    """
    typed = LIVE_EVENT.validate_python(event)
    if isinstance(typed, OtherLiveEvent):
        raise ValueError(f"live event type {event.get('type')!r} is not in the contract: add its model")
    _no_extra(event, type(typed))
    state = event.get("state")
    if isinstance(typed, ResetEvent) and isinstance(state, dict):  # a dict: the model read it as its state
        _no_extra(state, LiveState)
    return typed


def _no_extra(keys: Iterable[str], model: type[BaseModel]) -> None:
    """Refuse ``keys`` (a JSON object's) that ``model`` has no field for.

    Raises:
        ValueError: one or more (named, with the module to add them to).
    """
    extra = sorted(set(keys) - set(model.model_fields))
    if extra:
        raise ValueError(f"{model.__name__} got fields off the contract {extra}: add them to core/contracts/live.py")
