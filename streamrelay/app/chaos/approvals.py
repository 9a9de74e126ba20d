"""Approvals in a chaos campaign (docs/approvals.md): about one run in five asks one, its agent waits for the
decision as a runtime blocked in ``RelayClient.wait_approval`` does, and the campaign presses its buttons as the bot
that owns the platform's updates forwards a press (``POST /v1/runs/{run}/approvals/{id}``), through kills and
faults like everything else.

- **Plan** (seeded, its own generator: the runs, kills, faults, media and stops of a seed stay what they were): an
  ``approval.request`` line after a fraction of the answer's text, naming one approver
  (``<platform>:user:4242``); the request carrying it is the last of its batch, and the agent sends nothing more
  until the run's pipeline lane shows the decision. The outcome is ``approve`` or ``deny`` (the approver presses
  after 0.1-1.5 s; its ``ttl_s`` :data:`DECIDED_TTL_S`, or the campaign's ``--approval-ttl-s``) or ``expire``
  (nobody who may decide presses: its ``ttl_s`` of 2-5 s runs out, ``on_expiry`` denied or approved). Half the
  runs see a stranger (``<platform>:user:6666``) press first.
- **Presses** are retried through a kill (a transport error: the restarted sidecar is pressed again; one killed
  after it journaled the decision answers the retry 409 with that decision) and a 503 (not journaled: press again).
- **Judging** (:func:`judge_approval`): every read of the lane shows the approval's unit at most once and, once it
  shows it, the same unit at the same place; the approver's press answered 200 (or 409 with the first decision)
  names the unit's decision; a stranger's press is never answered 200 (403; 409 once decided; 404 once the run
  ended) and never decides (the table counts its 403s); an
  ``expire`` plan ends ``expired``. A run that ended before the decision (the idle timeout closed it) shows it
  undecided: counted, not bad. The chat shows the approval's message once (left out of the answer's text), saying
  the decision once the lane has it.
"""

from __future__ import annotations

import asyncio
import json
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from streamrelay.app.chaos.plan import RunPlan
    from streamrelay.app.chaos.services import Services

APPROVAL_SHARE = 0.2
"""About this share of runs (not stopped by their reader) asks one approval."""
OUTCOMES = (("approve", 0.4), ("deny", 0.3), ("expire", 0.3))
APPROVER = "{platform}:user:4242"
STRANGER = "{platform}:user:6666"
MESSAGE_PREFIX = "🔐 Approval:"
"""How an approval's message starts in the chat (core.run.approvals.Approval.text)."""
DECIDED_TTL_S = 120.0
"""The ``ttl_s`` of an approval the approver decides (seconds; the campaign's ``--approval-ttl-s``): far above the
press's 0.1-1.5 s and a restart after a kill. It is also how long a run waits when the agent's request carrying the
approval was cut by a kill after the sidecar journaled it and the agent never came back: nobody presses (the campaign
presses once the agent's request was answered), so the approval expires after it, and the run then waits its idle
timeout."""
POLL_S = 0.2
WAIT_MARGIN_S = 90.0
"""How long past its ttl an agent waits for the decision (seconds of a sidecar answering) before it gives up."""
MARKS = {"approved": "✅ Approved by", "denied": "❌ Denied by", "expired": "⌛ Expired"}


@dataclass(frozen=True)
class ApprovalPlan:
    """A run's approval: its line's index in the run's lines, the outcome the campaign drives, whether a stranger
    presses first, when the approver presses (ms after the line was acknowledged), its ttl and its expiry's
    decision."""

    id: str
    line: int
    outcome: str
    stranger_first: bool
    delay_ms: int
    ttl_s: float
    on_expiry: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ApprovalRecord:
    """What the campaign saw of a run's approval: the presses and their answers, every read of the lane."""

    asked: bool = False
    """The agent's request carrying the approval line was answered 200."""
    presses: list[dict[str, Any]] = field(default_factory=list)
    reads: list[list[dict[str, Any]]] = field(default_factory=list)
    """Each read of the lane: the approval's units in it (distinct reads only)."""
    ended_undecided: bool = False
    gave_up: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def add_approvals(seed: int, plans: list[RunPlan], decided_ttl_s: float = DECIDED_TTL_S) -> None:
    """Give about :data:`APPROVAL_SHARE` of ``plans`` (not those with a stop) an approval (module docstring), from
    a generator of its own; an approval the approver decides has the ``ttl_s`` ``decided_ttl_s`` (seconds: it
    changes no other draw)."""
    rng = random.Random(f"approvals-{seed}")
    for plan in plans:
        if plan.stop is not None or rng.random() >= APPROVAL_SHARE:
            continue
        texts = [i for i, line in enumerate(plan.lines) if line.get("kind") == "text"]
        after = texts[min(len(texts) - 1, int(len(texts) * rng.uniform(0.1, 0.8)))]
        outcome = rng.choices([k for k, _ in OUTCOMES], weights=[w for _, w in OUTCOMES])[0]
        ttl = rng.uniform(2.0, 5.0) if outcome == "expire" else decided_ttl_s
        approval = ApprovalPlan(
            id=f"ok-{plan.index}",
            line=after + 1,
            outcome=outcome,
            stranger_first=rng.random() < 0.5,
            delay_ms=rng.randint(100, 1500),
            ttl_s=round(ttl, 2),
            on_expiry=rng.choice(("denied", "approved")),
        )
        line = {
            "kind": "approval.request",
            "run": plan.run,
            "id": approval.id,
            "question": f"Go on with run {plan.run}?",
            "action": f"continue({plan.run!r})",
            "approvers": [APPROVER.format(platform=plan.platform)],
            "ttl_s": approval.ttl_s,
            "on_expiry": approval.on_expiry,
        }
        lines = [*plan.lines[: approval.line], line, *plan.lines[approval.line :]]
        plan.lines = [{**entry, "seq": seq} for seq, entry in enumerate(lines)]
        plan.batches = _split(plan.batches, approval.line)
        plan.approval = approval


def _split(batches: tuple[int, ...], at: int) -> tuple[int, ...]:
    """The batch sizes once a line is inserted at index ``at``, the request carrying it ending with it."""
    ends, total = [], 0
    for size in batches:
        total += size
        ends.append(total if total <= at else total + 1)
    ends = sorted({*ends, at + 1})
    return tuple(b - a for a, b in zip([0, *ends[:-1]], ends, strict=True))


class Approvals:
    """The campaign's presses and the agents' waits (module docstring)."""

    def __init__(self, services: Services, client: httpx.AsyncClient) -> None:
        self.services = services
        self.client = client
        self.records: dict[str, ApprovalRecord] = {}

    def record(self, plan: RunPlan) -> ApprovalRecord:
        return self.records.setdefault(plan.run, ApprovalRecord())

    async def asked(self, plan: RunPlan) -> None:
        """The request carrying ``plan``'s approval line was answered 200: press as planned, and wait until the
        lane shows the decision (or the run ended, or the wait ran out)."""
        approval = plan.approval
        assert approval is not None
        record = self.record(plan)
        if record.asked:
            return
        record.asked = True
        presser = asyncio.create_task(self._press_all(plan, approval, record))
        try:
            await self._wait(plan, approval, record)
        finally:
            if not presser.done():
                await asyncio.wait({presser}, timeout=5.0)
            presser.cancel()

    async def _press_all(self, plan: RunPlan, approval: ApprovalPlan, record: ApprovalRecord) -> None:
        await asyncio.sleep(approval.delay_ms / 1000)
        if approval.stranger_first:
            await self._press(plan, record, STRANGER.format(platform=plan.platform), random.choice(("approve", "deny")))
        if approval.outcome in ("approve", "deny"):
            await self._press(plan, record, APPROVER.format(platform=plan.platform), approval.outcome)

    async def _press(self, plan: RunPlan, record: ApprovalRecord, by: str, decision: str) -> None:
        """One press, forwarded until the sidecar answers it other than 503 (a kill in between: pressed again)."""
        assert plan.approval is not None
        deadline = self.services.up_clock() + WAIT_MARGIN_S
        entry: dict[str, Any] = {"by": by, "decision": decision, "tries": 0}
        record.presses.append(entry)
        while self.services.up_clock() < deadline:
            entry["tries"] += 1
            sidecar = await self.services.pick()
            try:
                answer = await self.client.post(
                    f"{sidecar.url}/v1/runs/{plan.run}/approvals/{plan.approval.id}",
                    json={"decision": decision, "by": by},
                    headers=self.services.headers,
                )
            except httpx.TransportError as exc:
                entry.setdefault("errors", []).append(f"{type(exc).__name__}"[:80])
                await asyncio.sleep(0.1)
                await self.services.any_up.wait()
                continue
            if answer.status_code == 503:
                await asyncio.sleep(0.5)
                continue
            entry["status"] = answer.status_code
            entry["answer"] = _json(answer)
            return
        entry["status"] = None  # never answered

    async def _wait(self, plan: RunPlan, approval: ApprovalPlan, record: ApprovalRecord) -> None:
        deadline = self.services.up_clock() + approval.ttl_s + WAIT_MARGIN_S
        while self.services.up_clock() < deadline:
            sidecar = await self.services.pick()
            try:
                answer = await self.client.get(
                    f"{sidecar.url}/v1/runs/{plan.run}/pipeline", headers=self.services.headers, timeout=30
                )
            except httpx.TransportError:
                await asyncio.sleep(0.1)
                await self.services.any_up.wait()
                continue
            if answer.status_code in (404, 503):
                await asyncio.sleep(POLL_S)
                continue
            body = _json(answer)
            units = [u for u in body.get("units", []) if u.get("kind") == "approval" and u.get("id") == approval.id]
            if not record.reads or record.reads[-1] != units:
                record.reads.append(units)
            if units:
                return
            if body.get("ended"):
                record.ended_undecided = True
                return
            await asyncio.sleep(POLL_S)
        record.gave_up = f"no decision on the lane within {approval.ttl_s + WAIT_MARGIN_S:g} s"

    async def final_read(self, plan: RunPlan) -> None:
        """One more read of the lane at the end (the run's process may still hold it: else nothing)."""
        record = self.records.get(plan.run)
        if record is None or plan.approval is None:
            return
        sidecar = await self.services.pick()
        try:
            answer = await self.client.get(f"{sidecar.url}/v1/runs/{plan.run}/pipeline", headers=self.services.headers)
        except httpx.TransportError:
            return
        if answer.status_code == 200:
            body = _json(answer)
            units = [
                u for u in body.get("units", []) if u.get("kind") == "approval" and u.get("id") == plan.approval.id
            ]
            if not record.reads or record.reads[-1] != units:
                record.reads.append(units)


@dataclass
class ApprovalVerdict:
    """A run's approval judged (:func:`judge_approval`)."""

    asked: bool = False
    outcome: str | None = None
    """The decision the lane shows: approved, denied, expired; ``undecided`` (the run ended first)."""
    stranger_refused: int = 0
    doubled: bool = False
    lost: bool = False
    wrong_decided: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def bad(self) -> bool:
        return self.doubled or self.lost or self.wrong_decided


def judge_approval(plan: RunPlan, record: ApprovalRecord | None, chat: list[dict[str, Any]]) -> ApprovalVerdict:
    """``plan``'s approval against what the lane, the presses and the chat showed (module docstring)."""
    verdict = ApprovalVerdict()
    approval = plan.approval
    if approval is None or record is None or not record.asked:
        return verdict
    verdict.asked = True
    unit = _judge_lane(verdict, record)
    verdict.outcome = str(unit["decision"]) if unit else "undecided" if record.ended_undecided else None
    _judge_presses(verdict, plan, record, unit)
    approver, stranger = APPROVER.format(platform=plan.platform), STRANGER.format(platform=plan.platform)
    if unit is not None:
        wrong = ""
        if unit.get("by") == stranger:
            wrong = "the stranger decided"
        elif approval.outcome == "expire" and unit["decision"] != "expired":
            wrong = "nobody who may decide pressed, yet the lane shows a decision"
        elif approval.outcome != "expire" and unit["decision"] != "expired" and unit.get("by") != approver:
            wrong = f"decided by {unit.get('by')!r}, not the approver"
        if wrong:
            verdict.wrong_decided = True
            verdict.problems.append(f"{wrong}: {unit}")
    if record.gave_up:
        verdict.problems.append(record.gave_up)
    messages = [str(m.get("text", "")) for m in chat if is_approval_message(m)]
    if len(messages) > 1:
        verdict.doubled = True
        verdict.problems.append(f"the chat shows {len(messages)} approval messages")
    elif unit is not None and messages and MARKS[str(unit["decision"])] not in messages[0]:
        verdict.problems.append(f"the approval message does not say {MARKS[str(unit['decision'])]!r}: {messages[0]!r}")
    return verdict


def _judge_lane(verdict: ApprovalVerdict, record: ApprovalRecord) -> dict[str, Any] | None:
    """Every read shows the approval's unit at most once, and always the same one; returns it (None: never)."""
    seen = [units for units in record.reads if units]
    if any(len(units) > 1 for units in seen):
        verdict.doubled = True
        verdict.problems.append(f"approval doubled: a read of the lane shows {max(len(u) for u in seen)} units")
    firsts = {json.dumps(units[0], sort_keys=True) for units in seen}
    if len(firsts) > 1:
        verdict.doubled = True
        verdict.problems.append(f"approval changed: the lane showed {len(firsts)} different units: {sorted(firsts)}")
    return seen[0][0] if seen else None


def _judge_presses(
    verdict: ApprovalVerdict, plan: RunPlan, record: ApprovalRecord, unit: dict[str, Any] | None
) -> None:
    """A stranger's press is refused; the approver's press's answer names the lane's decision."""
    stranger = STRANGER.format(platform=plan.platform)
    for press in record.presses:
        answer: dict[str, Any] = press["answer"] if isinstance(press.get("answer"), dict) else {}
        first: dict[str, Any] = answer["approval"] if isinstance(answer.get("approval"), dict) else answer
        if press["by"] == stranger:
            refused = press.get("status") != 200  # 403; 409 decided already; 404 the run ended; none: unanswered
            verdict.stranger_refused += press.get("status") == 403
            if not refused:
                verdict.wrong_decided = True
                verdict.problems.append(f"a stranger's press was answered {press.get('status')}: {answer}")
        elif press.get("status") in (200, 409) and first.get("decision"):
            if unit is None and not record.ended_undecided:
                verdict.lost = True
                verdict.problems.append(f"the press was answered {press['status']} {first}; the lane shows nothing")
            elif unit is not None and (first.get("decision"), first.get("by")) != (unit["decision"], unit["by"]):
                verdict.lost = True
                verdict.problems.append(f"the press was answered {first}, the lane shows {unit}")


def set_aside(
    chat: list[dict[str, Any]], report: dict[str, Any] | None, calls: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, Any] | None, list[dict[str, Any]]]:
    """The run's chat, report and calls without its approval's message (judged by :func:`judge_approval`, not as
    the answer's text): the message left out of the chat, its id out of the report's ``message_ids``, the calls that
    made or edited it out of ``calls``. A platform that cannot put buttons on a sent message shows them in a message
    of their own (WhatsApp's reply buttons, :data:`BUTTONS_TEXT`): left out the same way."""
    ids = {str(m.get("message_id")) for m in chat if is_approval_message(m) or _is_buttons_message(m)}
    if not ids:
        return chat, report, calls
    shown = [m for m in chat if str(m.get("message_id")) not in ids]
    if report is not None:
        report = {**report, "message_ids": [i for i in report.get("message_ids", []) if str(i) not in ids]}
    return shown, report, [c for c in calls if str(c.get("message_id")) not in ids]


BUTTONS_TEXT = "Tap a button to decide."
"""The text of WhatsApp's reply-buttons message under an approval (adapters/whatsapp/buttons.py ``BODY``)."""


def _is_buttons_message(message: dict[str, Any]) -> bool:
    return str(message.get("text", "")).strip() == BUTTONS_TEXT


def is_approval_message(message: dict[str, Any]) -> bool:
    """A chat message that is an approval's (left out of the answer's text by the judge)."""
    return str(message.get("text", "")).strip().startswith(MESSAGE_PREFIX)


def _json(answer: httpx.Response) -> Any:
    try:
        return answer.json()
    except ValueError:
        return {"text": answer.text[:300]}
