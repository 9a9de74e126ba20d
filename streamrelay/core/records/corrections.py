"""Corrections and retractions of ended runs, as the ledger keeps them (the work itself: :mod:`core.run.corrections`).

A correction (``run.correct``: a new final text) or a retraction (``run.retract``) of an ended run is one
:class:`CorrectionRecord`, keyed by its run and its ``id`` (the agent's or operator's: a re-sent correction with the
same id is the same correction, applied once). It holds the steps planned for it, each one platform call on one
message (:class:`Step`: edit message k to new chunk k, send an extra chunk, delete a surplus message, post the
correction as a reply where the message cannot be edited), and each step's state. A step is written ``started``
(with the delivery id of a send) before its call and again with its outcome after it: a correction cut by a crash
(kill -9) resumes from the record, an edit or a delete made again (idempotent), a send settled with the platform
first (never sent twice blindly).

Shape (JSON, ``GET /v1/runs/{run}/corrections/{id}``)::

    {"id": "fix-1", "run": "r1", "kind": "correct", "state": "applied", "chars": 812,
     "created_at": 1765000000.0, "updated_at": 1765000001.5, "fallback": null,
     "before": ["11", "12", "13"], "after": ["11", "12"],
     "steps": [{"step": 0, "op": "edit", "message_id": "11", "chars": 400, "state": "done",
                "outcome": "edited to new chunk 1 of 2"}, ...]}
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from streamrelay.core.ingest.clients import split_key
from streamrelay.core.json_types import JsonObject, JsonValue
from streamrelay.core.ports import TextFormat


class CorrectionKind(enum.StrEnum):
    """What is asked: a new final (``correct``) or the answer withdrawn (``retract``)."""

    CORRECT = "correct"
    RETRACT = "retract"


class StepOp(enum.StrEnum):
    """One step's platform call (:mod:`core.run.corrections` says which the plan makes and when)."""

    EDIT = "edit"
    """Edit an answer message to a new chunk (``text``)."""
    SEND = "send"
    """Send a new chunk as a new message after the answer's last (under ``delivery_id``)."""
    DELETE = "delete"
    """Delete a message the new text no longer needs (or, for a retraction, every message)."""
    MARK = "mark"
    """Edit a message that could not be deleted to a short marker line (``text``)."""
    REPLY = "reply"
    """Post a chunk as a new message replying to the answer's first message: the correction (or the retraction's
    notice) where the answer's messages cannot be edited (under ``delivery_id``)."""


CREATES = frozenset({StepOp.SEND, StepOp.REPLY})
"""The steps that create a message: an unknown outcome is settled with the platform, never sent again blindly."""


class StepState(enum.StrEnum):
    """Where one step stands."""

    PLANNED = "planned"
    STARTED = "started"
    """Its call is under way, or was when the process died: resumed (an edit or delete made again, a send settled)."""
    DONE = "done"
    SKIPPED = "skipped"
    """Nothing to do (the message already shows the new chunk)."""
    REFUSED = "refused"
    """The platform refused it; a fallback step follows where there is one (``outcome`` names it)."""
    FAILED = "failed"
    """Not done after the retries (an outage); a re-sent correction with the same id tries it again."""
    UNCERTAIN = "uncertain"
    """A send whose outcome could not be settled (Telegram with a shared token): it may show. Never made again
    itself; where :func:`core.run.corrections.follow` says so, the next step sends its chunk again and its outcome
    says a duplicate is possible."""


OPEN_STEPS = frozenset({StepState.PLANNED, StepState.STARTED, StepState.FAILED})
"""Steps a correction still has to do (a failed one is tried again when the same correction is sent again)."""


class CorrectionState(enum.StrEnum):
    """Where a whole correction stands."""

    APPLYING = "applying"
    """Steps are left to do (under way, or cut by a restart: resumed at start-up)."""
    APPLIED = "applied"
    """Every step is done (or skipped, or replaced by its fallback)."""
    PARTIAL = "partial"
    """Some step failed or is uncertain (the steps say which); sending the same correction again retries what
    failed."""


@dataclass(slots=True)
class Step:
    """One platform call of a correction.

    Attributes:
        op: the call (:class:`StepOp`).
        message_id: the message it edits or deletes (None for a send or reply until it is done: then the message
            it made).
        text: what an edit, mark, send or reply shows (``""`` for a delete).
        state: where it stands.
        delivery_id: a send's or reply's delivery id (Discord nonce, Slack metadata), kept from before its call.
        after_id: the newest message id known when a send was made (a Telegram settle probes above it).
        part: which new chunk it shows (0-based), or None (a delete, a marker, a notice).
        outcome: what happened (one line, for the report).
    """

    op: StepOp
    message_id: str | None = None
    text: str = ""
    state: StepState = StepState.PLANNED
    delivery_id: str | None = None
    after_id: str | None = None
    part: int | None = None
    outcome: str | None = None

    def to_json(self) -> JsonObject:
        """The step as the ledger keeps it."""
        return {
            "op": str(self.op),
            "message_id": self.message_id,
            "text": self.text,
            "state": str(self.state),
            "delivery_id": self.delivery_id,
            "after_id": self.after_id,
            "part": self.part,
            "outcome": self.outcome,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        """A step from :meth:`to_json`."""
        return cls(
            op=StepOp(data["op"]),
            message_id=data.get("message_id"),
            text=data.get("text", ""),
            state=StepState(data["state"]),
            delivery_id=data.get("delivery_id"),
            after_id=data.get("after_id"),
            part=data.get("part"),
            outcome=data.get("outcome"),
        )


@dataclass(slots=True)
class CorrectionRecord:
    """One correction or retraction of an ended run (module docstring).

    Attributes:
        run: the run key (``client/run``, or the default client's run id).
        id: the correction's id, unique in its run.
        kind: correct or retract.
        text: the new final text (``""`` for a retraction).
        fmt: how the run's channel renders it.
        channel: the run's channel name.
        target: the run's target as JSON.
        before: the answer's message ids, in order, when the correction was taken.
        steps: the planned calls, fallbacks appended as they are decided.
        state: where it stands.
        created_at: when it was taken (wall-clock seconds).
        updated_at: when it last changed.
        fallback: ``reply`` when (part of) it was posted as a reply because a message could not be edited, with
            why in the steps' outcomes; None otherwise.
    """

    run: str
    id: str
    kind: CorrectionKind
    text: str
    fmt: TextFormat
    channel: str
    target: JsonObject
    before: list[str]
    steps: list[Step] = field(default_factory=list)
    state: CorrectionState = CorrectionState.APPLYING
    created_at: float = 0.0
    updated_at: float = 0.0
    fallback: str | None = None

    @property
    def client(self) -> str:
        """The client whose run it is."""
        return split_key(self.run)[0]

    def after(self) -> list[str]:
        """The answer's message ids once the steps done so far are counted: edited and marked messages stay, deleted
        ones go, sent ones and replies are added in order (a later correction maps onto these)."""
        gone = {s.message_id for s in self.steps if s.op is StepOp.DELETE and s.state is StepState.DONE}
        kept = [m for m in self.before if m not in gone]
        made = [
            s.message_id
            for s in self.steps
            if s.op in CREATES and s.message_id is not None and s.state in (StepState.DONE, StepState.UNCERTAIN)
        ]
        return kept + made

    def to_json(self) -> str:
        """The record as the ledger keeps it (one JSON text)."""
        return json.dumps(
            {
                "run": self.run,
                "id": self.id,
                "kind": str(self.kind),
                "text": self.text,
                "fmt": str(self.fmt),
                "channel": self.channel,
                "target": self.target,
                "before": self.before,
                "steps": [step.to_json() for step in self.steps],
                "state": str(self.state),
                "created_at": self.created_at,
                "updated_at": self.updated_at,
                "fallback": self.fallback,
            }
        )

    @classmethod
    def from_json(cls, raw: str) -> CorrectionRecord:
        """A record from :meth:`to_json`."""
        data = json.loads(raw)
        return cls(
            run=data["run"],
            id=data["id"],
            kind=CorrectionKind(data["kind"]),
            text=data["text"],
            fmt=TextFormat(data["fmt"]),
            channel=data["channel"],
            target=data["target"],
            before=list(data["before"]),
            steps=[Step.from_json(step) for step in data["steps"]],
            state=CorrectionState(data["state"]),
            created_at=float(data["created_at"]),
            updated_at=float(data["updated_at"]),
            fallback=data.get("fallback"),
        )

    def summary(self) -> JsonObject:
        """The record as a run's report lists it: ``{"id", "kind", "state", "fallback", "after", "changes"}``, each
        change one message's step (``op``, ``message_id``, ``state``, ``outcome``; messages left as they were are not
        listed)."""
        return {
            "id": self.id,
            "kind": str(self.kind),
            "state": str(self.state),
            "fallback": self.fallback,
            "after": _ids(self.after()),
            "changes": _summary_steps(self),
        }

    def public(self) -> JsonObject:
        """The record as the API shows it (module docstring): the client's run id, each step without its text."""
        return {
            "id": self.id,
            "run": split_key(self.run)[1],
            "kind": str(self.kind),
            "state": str(self.state),
            "chars": len(self.text),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "fallback": self.fallback,
            "before": _ids(self.before),
            "after": _ids(self.after()),
            "steps": [
                {
                    "step": index,
                    "op": str(step.op),
                    "message_id": step.message_id,
                    "chars": len(step.text),
                    "state": str(step.state),
                    "outcome": step.outcome,
                }
                for index, step in enumerate(self.steps)
            ],
        }


def _ids(ids: list[str]) -> list[JsonValue]:
    return list(ids)


def _summary_steps(record: CorrectionRecord) -> list[JsonValue]:
    return [
        {"op": str(s.op), "message_id": s.message_id, "state": str(s.state), "outcome": s.outcome}
        for s in record.steps
        if s.state is not StepState.SKIPPED
    ]


class CorrectionStore(Protocol):
    """Where corrections are kept: the ledger (``MemoryLedger``, ``adapters.sqlite.SqliteLedger``). A write replaces
    the record whole (keyed by its run and id) and is durable when it returns."""

    async def save_correction(self, record: CorrectionRecord) -> None:
        """Write ``record`` as it now stands (taken, a step's intent, a step's outcome)."""
        ...

    async def correction(self, run: str, correction_id: str) -> CorrectionRecord | None:
        """One record, or None."""
        ...

    async def corrections(self, run: str) -> list[CorrectionRecord]:
        """The run's records, oldest first."""
        ...

    async def open_corrections(self) -> list[CorrectionRecord]:
        """The records still ``applying`` (cut by a restart), oldest first."""
        ...
