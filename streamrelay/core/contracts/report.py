"""The run report, typed for its readers: what ``GET /v1/runs/{run}`` answers
(:class:`core.records.report.DeliveryReport`,
which the sidecar builds and mutates while a run goes on), as a frozen model of the same fields in the same order
(a test holds the two together). A field a newer sidecar adds is ignored when read."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from streamrelay.core.records.report import PartState, ReportStatus, SlotRole


class PartFact(BaseModel):
    """One message part of the report (one part = one platform message), as the ledger records it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    slot: int = Field(ge=0, description="The part's number in its conversation: 0, 1, …")
    role: SlotRole
    state: PartState = Field(
        description="pending (not fully shown yet), acked (the platform confirmed its text), uncertain (a send timed "
        "out: it may have landed, never retried), failed (permanently refused), skipped (nothing to show)."
    )
    message_id: str | None = Field(default=None, description="The platform's id of the message, once acked.")
    chars: int = Field(default=0, ge=0, description="Characters of the text it should show.")
    degraded: bool = Field(default=False, description="Sent as plain text after the platform refused the markup.")
    error: str | None = Field(default=None, description="Why it failed or is uncertain.")


class PlaceFact(BaseModel):
    """One place of a fan-out run (a ``run.start`` with ``targets``): its channel, target and what it shows."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    channel: str
    target: dict[str, str | int] = Field(description="The place's target as the run.start named it.")
    ledger_run: str = Field(
        description="Its ledger records' run id: the run's for the first place, <run>/to:<i> after."
    )
    done: bool = False
    status: ReportStatus = ReportStatus.PENDING
    end_status: str | None = None
    confirmed: int = Field(default=0, ge=0)
    uncertain: int = Field(default=0, ge=0)
    failed: int = Field(default=0, ge=0)
    unsent: int = Field(default=0, ge=0)
    message_ids: list[str] = Field(default_factory=list, description="This place's confirmed messages' ids, in order.")
    parts: list[PartFact] = Field(default_factory=list, description="This place's message parts.")
    errors: list[str] = Field(default_factory=list)


class RunReport(BaseModel):
    """What a run's channel really shows: ``status`` in one word and the parts counted by state.

    ``status``: ``delivered`` (every part confirmed, an answer among them), ``partial``, ``failed``, ``empty`` (it
    ended well with no answer to show), ``pending`` while not ``done``. ``uncertain`` parts may show (a send timed
    out after it left): they keep a run from ``delivered`` and are never sent twice.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    run: str
    channel: str
    done: bool = False
    status: ReportStatus = ReportStatus.PENDING
    end_status: str | None = Field(
        default=None, description="The agent's end: ok, error, cancelled, refused, cut; null before."
    )
    confirmed: int = Field(default=0, ge=0, description="Parts the platform confirmed (acked).")
    uncertain: int = Field(default=0, ge=0, description="Parts that may or may not show.")
    failed: int = Field(default=0, ge=0, description="Parts permanently refused.")
    unsent: int = Field(default=0, ge=0, description="Parts not (fully) shown yet.")
    media: int = Field(default=0, ge=0, description="Media messages (images, files, audio, video) confirmed.")
    media_parts: int = Field(default=0, ge=0, description="Media items the run should show (sent or not).")
    degraded: bool = Field(default=False, description="A part was sent as plain text after its markup was refused.")
    message_ids: list[str] = Field(default_factory=list, description="The confirmed messages' ids, in order.")
    parts: list[PartFact] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list, description="What went wrong, one line each.")
    gaps: list[str] = Field(default_factory=list, description="Input the run lost (a seq gap): at best partial.")
    places: list[PlaceFact] = Field(
        default_factory=list,
        description="A fan-out run's places, one row each (empty for one place); the fields above are then the first "
        "place's, but status and done (the run's over every place) and errors (every place's).",
    )
