"""Pipeline units, typed: the complete, checked units a run's pipeline lane carries (:mod:`core.lanes.pipeline`).

Every unit has ``index`` (1, 2, …: its position in the run's lane), ``kind``, ``run`` and ``source`` (the sub-agent
that produced it, ``null`` for the root agent), in that order around the kind's own fields; :data:`PipelineUnit`
is their union discriminated on ``kind``. The parent loop matches on the class, never on ``unit["kind"]``::

    match unit:
        case ToolCallUnit(name="search", args=args): ...
        case MalformedToolCallUnit(error=error): ...
        case RunEndUnit(status=status): ...

The lane checks every unit against this contract when it is emitted (:func:`check_unit`, strictly: a known kind,
its fields and no other); units are few (tool calls, messages, the end), never one per delta, so the check costs
nothing that matters. A reader is lenient instead, so that a sidecar one version ahead breaks no deployed parent
loop: a field it does not know is ignored, and a kind it does not know is an :class:`OtherUnit` (skip it).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter

from streamrelay.core.events import EndStatus, Source
from streamrelay.core.json_types import JsonObject

TOOL_CALL = "tool_call"
MALFORMED = "tool_call.malformed"


class _Unit(BaseModel):
    """What every unit has: ``index`` (its 1-based position in the run's lane), ``kind`` and ``run``. A field this
    model does not know (a newer sidecar's) is ignored when read; the sidecar never sends one (:func:`check_unit`)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    index: int = Field(ge=1, description="The unit's position in the run's lane: 1, 2, … (resume after it).")
    kind: str
    run: str = Field(description="The run id, as the caller named it.")


class ToolCallUnit(_Unit):
    """A tool call whose arguments were complete, strictly parsed as one JSON object and valid against the tool's
    JSON Schema when one is configured: the parent loop may ask the gate to run it."""

    kind: Literal["tool_call"] = "tool_call"
    id: str = Field(description="The provider's call id.")
    name: str | None = Field(description="The tool's name (null when the provider never gave one).")
    args: JsonObject = Field(description="The arguments: one strict JSON object.")
    approval: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="The approval a person gave before the call reached the lane (the action gate's hold, "
        "docs/approvals.md); absent when none was asked.",
    )
    source: Source | None = None


class MalformedToolCallUnit(_Unit):
    """A tool call that is never a call: its arguments were cut off by the end of the stream, or are not a strict
    JSON object, or fail the tool's schema. ``raw`` keeps the text (lone surrogates replaced by U+FFFD)."""

    kind: Literal["tool_call.malformed"] = "tool_call.malformed"
    id: str
    name: str | None
    raw: str = Field(description="The arguments' text as received.")
    error: str = Field(description="What is wrong with them, in one sentence.")
    source: Source | None = None


class SourceLink(BaseModel):
    """A source the text relies on (a ``citation`` event): its ``url`` as given and its ``title``, either may be null
    (a document cited without an address)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    url: str | None = None
    title: str | None = None


class MessageUnit(_Unit):
    """A sub-agent's complete final message, when its ``end`` arrived with ``ok``, with the sources it cited (in
    order of first appearance, deduplicated by URL)."""

    kind: Literal["message"] = "message"
    status: EndStatus
    text: str
    sources: list[SourceLink] = Field(
        default_factory=list,
        exclude_if=lambda links: not links,
        description="The sub-agent's citations, deduplicated by URL, in first-appearance order (absent: none).",
    )
    source: Source | None = None


class AgentFailedUnit(_Unit):
    """A sub-agent ended other than ``ok``: no text (unchecked text is never a unit)."""

    kind: Literal["agent.failed"] = "agent.failed"
    status: EndStatus
    source: Source | None = None


class CommitUnit(_Unit):
    """The run passed its commit point: irreversible tool calls may run now."""

    kind: Literal["commit"] = "commit"
    source: Source | None = None


class StopUnit(_Unit):
    """A person stopped the run (a Stop control in the chat, or the live page): stop the agent
    (:mod:`core.run.stop`)."""

    kind: Literal["stop"] = "stop"
    by: str | None = Field(default=None, description="Who stopped it, e.g. ``telegram:user:123``.")
    reason: str | None = Field(default=None, description="Why, when they said.")
    source: Source | None = None


class ApprovalUnit(_Unit):
    """An approval the agent asked for was decided (:mod:`core.run.approvals`), once: go on with its action when
    ``approved``, else not."""

    kind: Literal["approval"] = "approval"
    id: str = Field(description="The approval's id, as its approval.request gave it.")
    decision: Literal["approved", "denied", "expired"] = Field(
        description="How it was decided: a person approved or denied it, or it expired (then ``approved`` says what "
        "its ``on_expiry`` made of it)."
    )
    approved: bool = Field(description="Go on with the action.")
    by: str | None = Field(default=None, description="Who decided, e.g. ``telegram:user:123`` (None at expiry).")
    at: float = Field(description="When it was decided (Unix seconds).")
    call: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description="The tool call this approval held (the action gate's hold, docs/approvals.md): approved, the call "
        "follows as a tool_call unit; else it never reaches the lane. Absent for an agent's own approval.",
    )
    source: Source | None = None


class RunEndUnit(_Unit):
    """The last unit of a run: its end ``status`` and whether it passed its commit point."""

    kind: Literal["run.end"] = "run.end"
    status: EndStatus
    committed: bool
    source: Source | None = None


class OtherUnit(_Unit):
    """A unit of a kind this reader does not know (a sidecar one version ahead added it): its fields as sent. A
    parent loop may skip it; the sidecar of this version never emits one."""

    model_config = ConfigDict(frozen=True, extra="allow")


UNIT_KINDS: dict[str, type[_Unit]] = {
    "tool_call": ToolCallUnit,
    "tool_call.malformed": MalformedToolCallUnit,
    "message": MessageUnit,
    "agent.failed": AgentFailedUnit,
    "commit": CommitUnit,
    "stop": StopUnit,
    "approval": ApprovalUnit,
    "run.end": RunEndUnit,
}
"""The contract's unit kinds and their classes."""


def _kind(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if isinstance(kind, str) and kind in UNIT_KINDS else "other"


PipelineUnit = Annotated[
    Annotated[ToolCallUnit, Tag("tool_call")]
    | Annotated[MalformedToolCallUnit, Tag("tool_call.malformed")]
    | Annotated[MessageUnit, Tag("message")]
    | Annotated[AgentFailedUnit, Tag("agent.failed")]
    | Annotated[CommitUnit, Tag("commit")]
    | Annotated[StopUnit, Tag("stop")]
    | Annotated[ApprovalUnit, Tag("approval")]
    | Annotated[RunEndUnit, Tag("run.end")]
    | Annotated[OtherUnit, Tag("other")],
    Discriminator(_kind),
]
"""One pipeline unit: the union of the unit classes, discriminated on ``kind`` (an unknown kind: :class:`OtherUnit`)."""

PIPELINE_UNIT: TypeAdapter[PipelineUnit] = TypeAdapter(PipelineUnit)
"""Validates a unit's JSON object (``validate_python``) or text (``validate_json``) into its class."""


def parse_unit(data: JsonObject) -> PipelineUnit:
    """The typed unit of one unit's JSON object, read leniently (unknown fields ignored, an unknown kind an
    :class:`OtherUnit`).

    Raises:
        pydantic.ValidationError: a field of its kind is missing or of the wrong type; the message names it.
    """
    return PIPELINE_UNIT.validate_python(data)


def check_unit(unit: JsonObject) -> PipelineUnit:
    """``unit`` checked strictly against the contract, as the sidecar emits it: a known kind, each of its fields,
    and no other field.

    Raises:
        ValueError: an unknown kind or a field off the contract (named, with the model to add it to); a
            pydantic.ValidationError (a ValueError) when a field is missing or of the wrong type.
    """
    typed = PIPELINE_UNIT.validate_python(unit)
    if isinstance(typed, OtherUnit):
        raise ValueError(f"unit kind {unit.get('kind')!r} is not in the contract: add its model to core/contracts")
    extra = sorted(set(unit) - set(type(typed).model_fields))
    if extra:
        raise ValueError(f"unit {typed.kind!r} has fields off the contract {extra}: add them to {type(typed).__name__}")
    return typed
