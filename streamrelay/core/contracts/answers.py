"""The answers of the parent loop's and the operator's requests, typed: the action gate's decision, a run's watch
link, a stop, and the listing of active runs (``GET /v1/runs``, what the ops page shows)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from streamrelay.core.contracts.units import PipelineUnit
from streamrelay.core.json_types import JsonObject


class GateAnswer(BaseModel):
    """``POST /v1/runs/{run}/gate``: may the tool call run now (core/lanes/gate.py has the policy).

    ``verdict``: ``run``, ``wait`` (an irreversible call before the commit point) or ``refuse``; ``reason`` one
    sentence naming the tool; ``action_class`` (``class`` on the wire) the class used, ``compensation`` the
    compensating action of a compensable tool; ``unit`` the call's pipeline unit.
    """

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True, serialize_by_alias=True)

    verdict: str = Field(description="run, wait or refuse.")
    reason: str
    action_class: str | None = Field(alias="class", description="readonly, idempotent, compensable, irreversible.")
    compensation: str | None
    unit: PipelineUnit | None = None


class WatchLink(BaseModel):
    """``GET /v1/runs/{run}/watch``: the run's live page ``url`` (with its read ``token``), and whether it
    ``started`` (a page opened before waits for it)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    url: str
    token: str
    started: bool


class StopAnswer(BaseModel):
    """``POST /v1/runs/{run}/stop``: the stopped ``run`` (the caller's id), its ``state`` (``stopping``: ending now;
    ``stopped``: it ended stopped) and the first stop's ``by`` and ``reason`` (a later stop changes nothing)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    run: str
    state: str = Field(description="stopping or stopped.")
    by: str | None = None
    reason: str | None = None


class RunRow(BaseModel):
    """One active run in the listing (:meth:`core.run.monitor.RunMonitor.row`): where it goes, how old it is, and its
    report's status with the parts counted by state."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    run: str
    channel: str
    platform: str | None
    mode: str | None
    started_at: float | None = Field(description="Wall-clock Unix seconds; null until the run opened.")
    age_s: float | None = Field(description="Seconds since it started; null until then.")
    status: str = Field(description="The report's status: pending, delivered, partial, failed, empty.")
    confirmed: int = Field(ge=0)
    uncertain: int = Field(ge=0)
    failed: int = Field(ge=0)
    rate_limited: int = Field(ge=0, description="429s met so far (retry_after honoured).")
    watch: str | None = Field(description="Its live page's path with its read token (null: no live page).")
    replica: str | None = Field(default=None, description="With replicas: the replica that owns it.")


class Unreachable(BaseModel):
    """A replica the listing could not ask (with ``all``)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    replica: str
    url: str
    error: str


class RunListing(BaseModel):
    """``GET /v1/runs`` (``?all=1``: every replica's): the caller's active runs, oldest first."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    runs: list[RunRow]
    unreachable: list[Unreachable] = Field(default_factory=list)


def gate_answer(body: JsonObject) -> GateAnswer:
    """The typed gate answer of its JSON body.

    Raises:
        pydantic.ValidationError: not a gate answer (a field missing, extra, or of the wrong type).
    """
    return GateAnswer.model_validate(body)
