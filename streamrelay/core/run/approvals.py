"""Approvals: a person approves or denies an agent's action from the chat (docs/approvals.md).

The agent sends an ``approval.request`` line (:class:`core.events.ApprovalRequest`). The run shows it as its own
message (an ``approval`` part, ledgered like any part) saying what is asked, what will be done if approved and who
may decide, with two buttons, controls like Stop (:mod:`core.delivery.controls`): ``approve:<run16>:<id16>`` and
``deny:<run16>:<id16>`` (:func:`button_ids`: 41 bytes, inside Telegram's ``callback_data`` 1-64 bytes,
https://core.telegram.org/bots/api#inlinekeyboardbutton; Slack's ``action_id`` 255; Discord's ``custom_id`` 100).

The bot that owns the platform's updates forwards a press to ``POST /v1/runs/{run16}/approvals/{id16}`` with
``{"decision": "approve"|"deny", "by": "telegram:user:123"}``; :func:`decide` then:

1. refuses a press by someone who may not decide (403, :data:`NOT_ALLOWED` for the bot to tell the person:
   Telegram answerCallbackQuery text, Slack/Discord an ephemeral reply): nothing changes;
2. answers a second decision with the first one (409: decided once, whoever pressed first);
3. journals an :class:`core.events.ApprovalDecision` line before it answers (a restarted sidecar replays it and
   decides the same way: one decision, one ``approval`` unit at the same place of the pipeline lane), then hands
   it to the run: the ``approval`` unit goes on the lane, the message is edited to say the decision and who made
   it, its buttons come off.

Who may decide: the request's ``approvers``, else the channel's ``approvers`` setting; anyone in the chat only
where the channel says ``approvals_anyone = true`` (:func:`check_request` refuses a request that names nobody with a
400). At its expiry an undecided approval takes its ``on_expiry`` decision, once, journaled the same way (decision
``expired``, ``approved`` saying which way). A run that ends with an undecided approval shows it as not decided.

Pipeline unit shape (JSON)::

    {"index": 4, "kind": "approval", "run": "r1", "id": "a1", "decision": "approved", "approved": true,
     "by": "telegram:user:123", "at": 1765100000.0, "source": null}
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    APPROVER_ID,
    MAX_APPROVAL_TTL_S,
    ApprovalDecision,
    ApprovalExpiry,
    ApprovalRequest,
    event_to_json,
)
from streamrelay.core.ingest.clients import split_key
from streamrelay.core.ports import StopControl
from streamrelay.core.records.journal import JournalEntry
from streamrelay.core.run.stop_controls import is_short_id, short_id
from streamrelay.core.text.safe_text import safe_text

if TYPE_CHECKING:
    from streamrelay.core.ingest.admission import Admission
    from streamrelay.core.policy import ChannelPolicy
    from streamrelay.core.run.worker import ActiveRun

APPROVE_PREFIX = "approve:"
DENY_PREFIX = "deny:"
NOT_ALLOWED = "You may not decide this approval."
"""What the bot tells a person whose press was refused (the 403's ``tell``)."""
DECISIONS = {"approve": ("approved", True), "deny": ("denied", False)}
"""A press's ``decision`` and what it decides."""


def approval_short(run_key: str, approval_id: str) -> str:
    """16 hex characters naming approval ``approval_id`` of run ``run_key`` in its buttons (a hash: neither is
    readable from it)."""
    data = b"streamrelay approval\x00" + run_key.encode() + b"\x00" + approval_id.encode()
    return hashlib.sha256(data).hexdigest()[:16]


def button_ids(run_key: str, approval_id: str) -> tuple[str, str]:
    """The Approve and Deny buttons' ids: ``approve:<run16>:<id16>``, ``deny:<run16>:<id16>`` (``run16`` the run's
    Stop control id, :func:`core.run.stop_controls.short_id`)."""
    tail = f"{short_id(run_key)}:{approval_short(run_key, approval_id)}"
    return APPROVE_PREFIX + tail, DENY_PREFIX + tail


def approval_control(run_key: str, approval_id: str) -> StopControl:
    """The two buttons an approval's message carries (a control of two buttons, :class:`core.ports.StopControl`)."""
    approve, deny = button_ids(run_key, approval_id)
    return StopControl(approve, "✅ Approve", more=((deny, "❌ Deny"),))


def _clock_text(at: float) -> str:
    """``at`` (Unix seconds) as ``YYYY-MM-DD HH:MM UTC``, held inside the calendar's years 1-9999 (an
    ``expires_at`` like 0001-01-01T00:00:00+14:00 is year 0 in UTC: never a ValueError in the run stage)."""
    low, high = datetime(1, 1, 1, tzinfo=UTC).timestamp(), datetime(9999, 12, 31, 23, 59, tzinfo=UTC).timestamp()
    return datetime.fromtimestamp(min(max(at, low), high), UTC).strftime("%Y-%m-%d %H:%M UTC")


@dataclass
class Approval:
    """One approval of a run: its request, when it expires (Unix seconds), who may decide, and its decision once
    made."""

    request: ApprovalRequest
    expires_at: float
    approvers: tuple[str, ...]
    anyone: bool
    decision: ApprovalDecision | None = None
    moved: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)
    """Set when a journaled :class:`core.events.ApprovalExpiry` moved ``expires_at`` (the expiry timer waits again)."""

    def allowed(self, by: str | None) -> bool:
        """True when ``by`` may decide."""
        return self.anyone or (by is not None and by in self.approvers)

    def text(self, *, ended: bool = False) -> str:
        """The message: what is asked, what will be done, who may decide and until when; once decided, the decision
        and who made it (``ended``: the run ended undecided). The agent's question and action pass through
        :func:`core.text.safe_text.safe_text` here: this approval is admission's, holding the request as it came,
        not the sanitized event the run stage sees."""
        req = self.request
        lines = [f"🔐 Approval: {safe_text(req.question)}"]
        if req.action:
            lines.append(f"If approved: {safe_text(req.action)}")
        decision = self.decision
        if decision is None and ended:
            lines.append("Not decided: the run ended.")
        elif decision is None:
            who = "anyone in the chat" if self.anyone else ", ".join(self.approvers)
            lines.append(f"Who may decide: {who}")
            lines.append(f"Expires {_clock_text(self.expires_at)} (then {req.on_expiry}).")
        elif decision.decision == "expired":
            lines.append(f"⌛ Expired at {_clock_text(decision.at)}: {'approved' if decision.approved else 'denied'}.")
        else:
            mark = "✅ Approved" if decision.approved else "❌ Denied"
            lines.append(f"{mark} by {decision.by} at {_clock_text(decision.at)}.")
        return "\n".join(lines)

    def to_json(self, run: str) -> dict[str, Any]:
        """The decision route's and ``GET``'s answer: ``{"run", "id", "state": "pending"|"decided", "decision",
        "approved", "by", "at", "expires_at"}``."""
        d = self.decision
        return {
            "run": run,
            "id": self.request.id,
            "state": "pending" if d is None else "decided",
            "decision": d.decision if d else None,
            "approved": d.approved if d else None,
            "by": d.by if d else None,
            "at": d.at if d else None,
            "expires_at": self.expires_at,
        }


@dataclass(slots=True)
class ApprovalBook:
    """A run's approvals by id (kept with the run at admission: a decision is checked and taken at once, decided
    once)."""

    items: dict[str, Approval] = field(default_factory=dict)
    holds: dict[str, str] = field(default_factory=dict)
    """The approvals the action gate asked to hold a tool call (:mod:`core.lanes.hold`): approval id -> call id."""
    unjournaled: list[Approval] = field(default_factory=list)
    """Approvals asked with ``ttl_s`` by new lines whose expiry is not journaled yet (:func:`expiry_entries`)."""

    def find(self, run_key: str, name: str) -> Approval | None:
        """The approval named ``name``: its id, or its 16 hex (:func:`approval_short`, what a button gives)."""
        found = self.items.get(name)
        if found is None and is_short_id(name):
            found = next((a for i, a in self.items.items() if approval_short(run_key, i) == name), None)
        return found


def check_request(
    book: ApprovalBook, request: ApprovalRequest, policy: ChannelPolicy, now: float, *, enforce: bool
) -> Approval:
    """Take an ``approval.request`` into ``book``; returns the approval (its expiry: ``expires_at``, or ``ttl_s``
    from ``now``).

    Raises:
        IngestError: 400 when it names nobody who may decide and the channel neither names ``approvers`` nor says
            ``approvals_anyone = true``, or (``enforce``) its ``expires_at`` is more than a week ahead; 409 when its
            id was asked already in this run (``enforce``: a new line; a journaled one is taken as it was).
    """
    approvers = request.approvers or policy.approvers
    anyone = not approvers and policy.approvals_anyone
    if not approvers and not anyone:
        raise IngestError(
            f"approval {request.id!r} names nobody who may decide: list platform user ids in 'approvers' (like "
            f"'telegram:user:123'), or set approvers (or approvals_anyone = true) on channel {policy.name!r}"
        )
    if request.id in book.items and enforce:
        raise IngestError(f"approval {request.id!r} was already asked in this run: give each its own id", status=409)
    expires_at = request.expires_at.timestamp() if request.expires_at is not None else now + (request.ttl_s or 0.0)
    if enforce and expires_at > now + MAX_APPROVAL_TTL_S:
        raise IngestError(
            f"approval {request.id!r}: expires_at must be at most a week ahead (as ttl_s is at most "
            f"{MAX_APPROVAL_TTL_S:g} s): nobody may be asked for ever"
        )
    approval = book.items.get(request.id)
    if approval is None:
        approval = book.items[request.id] = Approval(request, expires_at, tuple(approvers), anyone)
        if enforce and request.ttl_s is not None:
            book.unjournaled.append(approval)
    return approval


def expiry_entries(book: ApprovalBook, run_key: str) -> list[JournalEntry]:
    """The journal entries (:class:`core.events.ApprovalExpiry`) fixing the expiry of each approval new lines asked
    with ``ttl_s`` since the last call, to be appended after those lines in the same journal append; an approval
    forgotten meanwhile (its line refused) gets none. Empties ``book.unjournaled``. O(1) when there is none."""
    if not book.unjournaled:
        return []
    pending, book.unjournaled = book.unjournaled, []
    return [
        JournalEntry(
            run_key,
            json.dumps(event_to_json(ApprovalExpiry(run=run_key, id=a.request.id, expires_at=a.expires_at))),
        )
        for a in pending
        if book.items.get(a.request.id) is a
    ]


def take_expiry(run: ActiveRun, event: ApprovalExpiry) -> bool:
    """A journaled :class:`core.events.ApprovalExpiry` replayed into ``run``'s approvals: the approval's expiry is
    the instant fixed when its line was first taken (its timer waits for it). False when the approval is unknown or
    decided already (then the line changes nothing)."""
    approval = run.approvals.items.get(event.id)
    if approval is None or approval.decision is not None:
        return False
    approval.expires_at = event.expires_at
    approval.moved.set()
    return True


def parse_decision_body(body: Any) -> tuple[str, str | None]:
    """``decision`` (``approve``/``deny``) and ``by`` of a decision request's JSON body.

    Raises:
        IngestError: 400, naming what is wrong.
    """
    if not isinstance(body, dict):
        raise IngestError('the body must be a JSON object: {"decision": "approve" | "deny", "by": "telegram:user:1"}')
    unknown = sorted(set(body) - {"decision", "by"})
    if unknown:
        raise IngestError(f"unknown field {unknown[0]!r}: a decision takes only 'decision' and 'by'")
    decision, by = body.get("decision"), body.get("by")
    if decision not in DECISIONS:
        raise IngestError(f"decision must be 'approve' or 'deny', got {decision!r}")
    if by is not None and (not isinstance(by, str) or APPROVER_ID.fullmatch(by) is None):
        raise IngestError("by must name who pressed like 'telegram:user:123': 1-200 letters, digits or :_.@#+-")
    return decision, by


@dataclass(frozen=True)
class DecisionRefused(Exception):
    """A decision that changes nothing: 403 (``tell``: what to tell the person) or 409 (decided already: the first
    decision in ``approval``)."""

    status: int
    error: str
    tell: str
    approval: dict[str, Any]


def resolve_run(admission: Admission, run_key: str) -> str:
    """The run a decision names: ``run_key`` when known, else the run of the same client whose Stop control id
    (:func:`core.run.stop_controls.short_id`, what a button gives) is the key's run id."""
    client, run_id = split_key(run_key)
    if run_key in admission.runs or not is_short_id(run_id):
        return run_key
    return next((k for k in admission.runs if split_key(k)[0] == client and short_id(k) == run_id), run_key)


async def decide(
    admission: Admission, run_key: str, name: str, decision: str, by: str | None, now: float | None = None
) -> tuple[str, dict[str, Any]]:
    """Decide approval ``name`` (its id or 16 hex) of run ``run_key`` (module docstring): ``decision`` ``approve``,
    ``deny`` or ``expire`` (the sidecar's own, at expiry). Returns the run key and the decided approval's JSON.

    Raises:
        IngestError: 404 the run or the approval is unknown here; 409 the run ended before a decision.
        DecisionRefused: 403 ``by`` may not decide; 409 it was decided already (the first decision).
        Exception: the journal could not be written (the caller answers 503): nothing was decided.
    """
    run_key = resolve_run(admission, run_key)
    run = admission.runs.get(run_key)
    if run is None:
        raise IngestError(
            f"unknown run {run_key!r} (or it ended: an approval is decided while its run is open)", status=404
        )
    approval = run.approvals.find(run_key, name)
    if approval is None:
        raise IngestError(f"run {run_key!r} asked no approval {name!r}", status=404)
    if approval.decision is not None:
        first = approval.decision
        raise DecisionRefused(
            409,
            f"approval {approval.request.id!r} was decided already: {first.decision}"
            + (f" by {first.by}" if first.by else ""),
            f"Already {first.decision}" + (f" by {first.by}." if first.by else "."),
            approval.to_json(run_key),
        )
    if run.stopped is not None or run.ended or run.closing is not None:
        raise IngestError(f"run {run_key!r} ended before approval {approval.request.id!r} was decided", status=409)
    now = time.time() if now is None else now
    if decision == "expire":
        outcome, approved, by = "expired", approval.request.on_expiry == "approved", None
    elif now >= approval.expires_at:
        return await decide(admission, run_key, name, "expire", None, now)  # too late: the expiry decides
    else:
        if not approval.allowed(by):
            raise DecisionRefused(
                403, f"{by or 'an unnamed presser'} may not decide approval {approval.request.id!r}", NOT_ALLOWED, {}
            )
        outcome, approved = DECISIONS[decision]
    event = ApprovalDecision(
        run=run_key, id=approval.request.id, decision=outcome, approved=approved, by=by, at=round(now, 3)
    )
    approval.decision = event  # decided at once: a second press meanwhile gets the 409
    run.hold()  # not closed by its idle timeout before the decision is handed over
    try:
        try:
            await admission.journal.append([JournalEntry(run_key, json.dumps(event_to_json(event)))])
        except Exception:
            approval.decision = None  # not journaled: not decided (the caller answers 503, press again)
            raise
        await run.put_all([event])
    finally:
        run.release()
    return run_key, approval.to_json(run_key)


def forget_approvals(run: ActiveRun, events: Sequence[object]) -> None:
    """Forget the approvals ``events`` asked (a line admission or the journal refused after taking them: sent
    again, each is asked once); their expiries then find nothing to decide."""
    for event in events:
        if isinstance(event, ApprovalRequest):
            approval = run.approvals.items.get(event.id)
            if approval is not None and approval.decision is None:
                del run.approvals.items[event.id]


def take_decision(run: ActiveRun, event: ApprovalDecision) -> bool:
    """A journaled decision replayed into ``run``'s approvals; False when the approval is unknown or decided
    already (then the line changes nothing)."""
    approval = run.approvals.items.get(event.id)
    if approval is None or approval.decision is not None:
        return False
    approval.decision = event
    return True


def approval_state(admission: Admission, run_key: str, name: str) -> dict[str, Any]:
    """Approval ``name`` (its id or 16 hex) of the open run ``run_key`` as :meth:`Approval.to_json` says.

    Raises:
        IngestError: 404 the run is not open here, or asked no such approval (an ended run's decisions are its
            pipeline lane's ``approval`` units).
    """
    run_key = resolve_run(admission, run_key)
    run = admission.runs.get(run_key)
    approval = run.approvals.find(run_key, name) if run is not None else None
    if run is None or approval is None:
        raise IngestError(
            f"no approval {name!r} of an open run {run_key!r} (an ended run's decisions are its pipeline's "
            "'approval' units)",
            status=404,
        )
    return approval.to_json(run_key)
