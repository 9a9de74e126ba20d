"""The delivery report: the truthful summary of what a run's channel really shows.

Shape (JSON)::

    {"run": "r1", "channel": "telegram", "done": true,
     "status": "delivered" | "partial" | "failed" | "empty" | "pending",
     "confirmed": 3, "uncertain": 0, "failed": 0, "unsent": 0, "degraded": false, "media": 1, "media_parts": 1,
     "message_ids": ["11", "12", "13"], "parts": [{"slot": 0, "role": "answer", "state": "acked", ...}],
     "end_status": "ok", "errors": ["..."], "gaps": [],
     "places": [{"channel": "slack", "target": {"chat_id": "C1"}, "ledger_run": "r1/to:1", "status": "delivered",
                 "message_ids": ["1700000000.000100"], ...}]}

``places`` has a row per place of a fan-out run (:mod:`core.run.fanout`), empty for a run to one place.

``confirmed`` / ``uncertain`` / ``failed`` / ``unsent`` count message parts (one part = one platform message).
``media`` counts the media messages confirmed, ``media_parts`` the media items the run should show (a media part
not confirmed keeps the run from ``delivered``, like any part).
"""

from __future__ import annotations

import enum

from pydantic import BaseModel, Field


class PartState(enum.StrEnum):
    """Where one message part stands.

    ``pending``: not (fully) shown yet. ``acked``: the platform confirmed the part's current text.
    ``uncertain``: a send timed out (it may have landed; never retried). ``failed``: permanently refused.
    ``skipped``: nothing to show (empty after trimming).
    """

    PENDING = "pending"
    ACKED = "acked"
    UNCERTAIN = "uncertain"
    FAILED = "failed"
    SKIPPED = "skipped"


class SlotRole(enum.StrEnum):
    """What a message part is for: the answer, a status message, shown reasoning, a notice (a failure shown
    to people), or a media item of the answer."""

    ANSWER = "answer"
    STATUS = "status"
    NOTICE = "notice"
    REASONING = "reasoning"
    MEDIA = "media"
    """One media item (an image, a file, ...): its own message, sent once, never edited (:mod:`core.media`)."""
    APPROVAL = "approval"
    """An approval's message (:mod:`core.run.approvals`): what is asked and who may decide, with Approve and Deny
    buttons; edited once decided."""


CUT_ERROR = "cut at the message limit"
"""How the error of a part that ends an answer cut at the run's message limit begins (:mod:`core.delivery.cap`): a
run with such a part is at best ``partial``, in its live report and in one rebuilt from the ledger."""


def is_cut(error: str | None) -> bool:
    """True when ``error`` says an answer was cut at the message limit."""
    return error is not None and error.startswith(CUT_ERROR)


_CONTENT = frozenset({SlotRole.ANSWER, SlotRole.MEDIA})
"""Roles of what answers the person (a run that shows none of them has no answer: ``empty``)."""


class ReportStatus(enum.StrEnum):
    """A run's delivery in one word (:func:`summarize` says how each is decided)."""

    PENDING = "pending"
    DELIVERED = "delivered"
    PARTIAL = "partial"
    FAILED = "failed"
    EMPTY = "empty"


class PartReport(BaseModel):
    slot: int
    role: SlotRole
    state: PartState
    message_id: str | None = None
    chars: int = 0
    degraded: bool = False
    error: str | None = None


class PlaceReport(BaseModel):
    """One place of a fan-out run (a ``run.start`` with ``targets``): what its channel shows, in the run's report's
    ``places``, in the ``targets``' order (:mod:`core.run.fanout`)."""

    channel: str
    target: dict[str, str | int]
    ledger_run: str
    """The run id its ledger records are kept under (the run's own for the first place, ``<run>/to:<i>`` after)."""
    done: bool = False
    status: ReportStatus = ReportStatus.PENDING
    end_status: str | None = None
    confirmed: int = 0
    uncertain: int = 0
    failed: int = 0
    unsent: int = 0
    message_ids: list[str] = Field(default_factory=list)
    parts: list[PartReport] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


class DeliveryReport(BaseModel):
    """What a run's channel shows, with the confirmed, uncertain, failed and unsent parts."""

    run: str
    channel: str
    done: bool = False
    status: ReportStatus = ReportStatus.PENDING
    end_status: str | None = None
    confirmed: int = 0
    uncertain: int = 0
    failed: int = 0
    unsent: int = 0
    media: int = 0
    """Media messages (images, files, audio, video) confirmed."""
    media_parts: int = 0
    """Media items the run should show (sent or not)."""
    degraded: bool = False
    message_ids: list[str] = Field(default_factory=list)
    parts: list[PartReport] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    gaps: list[str] = Field(default_factory=list)
    places: list[PlaceReport] = Field(default_factory=list)
    """A fan-out run's places, one row each (empty for a run to one place). The fields above are then the first
    place's, but ``status`` and ``done``, which are the run's over every place, and ``errors``, every place's."""


def summarize(
    run: str, channel: str, parts: list[PartReport], *, done: bool, end_status: str | None = None
) -> DeliveryReport:
    """Count parts and derive the status.

    A run that ended other than ``ok`` (an error, stopped, its agent gone quiet) is at best ``partial``: what it
    shows is not a whole answer, however well every part was delivered. So is a run whose answer was cut at the
    message limit (a part's error :func:`is_cut`).

    ``delivered``: every part confirmed, an answer among them. ``partial``: some confirmed or uncertain (it may
    show), some not confirmed. ``failed``: nothing confirmed nor uncertain while something should have been shown
    (nothing of it can be showing). ``empty``: the run ended well but had no answer to show (nothing, or only
    status lines and reasoning; a media item counts as an answer): the chat holds no answer, and the agent is told
    so rather than ``delivered``.
    ``pending`` while not done.
    """
    counted = [p for p in parts if p.state is not PartState.SKIPPED]
    confirmed = sum(p.state is PartState.ACKED for p in counted)
    uncertain = sum(p.state is PartState.UNCERTAIN for p in counted)
    failed = sum(p.state is PartState.FAILED for p in counted)
    unsent = sum(p.state is PartState.PENDING for p in counted)
    if not done:
        status = ReportStatus.PENDING
    elif confirmed == len(counted):
        status = ReportStatus.DELIVERED
    elif confirmed == 0 and uncertain == 0:
        status = ReportStatus.FAILED
    else:
        status = ReportStatus.PARTIAL
    if done and status is ReportStatus.DELIVERED and end_status not in (None, "ok"):
        status = ReportStatus.PARTIAL if confirmed else ReportStatus.FAILED
    if status is ReportStatus.DELIVERED and any(is_cut(p.error) for p in parts):
        status = ReportStatus.PARTIAL
    if status is ReportStatus.DELIVERED and not any(p.role in _CONTENT and p.chars for p in counted):
        status = ReportStatus.EMPTY
    return DeliveryReport(
        run=run,
        channel=channel,
        done=done,
        status=status,
        confirmed=confirmed,
        uncertain=uncertain,
        failed=failed,
        unsent=unsent,
        media=sum(p.role is SlotRole.MEDIA and p.state is PartState.ACKED for p in counted),
        media_parts=sum(p.role is SlotRole.MEDIA for p in counted),
        degraded=any(p.degraded for p in parts),
        message_ids=[p.message_id for p in counted if p.message_id is not None],
        parts=parts,
        errors=[p.error for p in parts if p.error],
        end_status=end_status,
    )


def with_gaps(report: DeliveryReport, gaps: list[str]) -> DeliveryReport:
    """The report with the run's input gaps; a run that lost input is at best ``partial`` (never ``empty``: the
    lines it lost may have held its answer)."""
    report.gaps = list(gaps)
    if gaps and report.status in (ReportStatus.DELIVERED, ReportStatus.EMPTY):
        report.status = ReportStatus.PARTIAL
    return report
