"""The chaos campaign's approvals (streamrelay/app/chaos/approvals.py): where the plan puts them, and how the judge
reads what the lane, the presses and the chat showed."""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import Any

from streamrelay.app.chaos.answers import load_recordings
from streamrelay.app.chaos.approvals import (
    APPROVER,
    DECIDED_TTL_S,
    STRANGER,
    ApprovalRecord,
    _split,
    judge_approval,
)
from streamrelay.app.chaos.plan import Options, RunPlan, make_plan
from streamrelay.app.chaos_cli import chaos


def plans(seed: int = 9, runs: int = 60) -> list[RunPlan]:
    return make_plan(Options(runs=runs, seed=seed), load_recordings())


def test_the_request_carrying_the_approval_line_ends_with_it() -> None:
    assert _split((4, 6), 3) == (4, 1, 6)  # the request carrying the line at index 3 ends with it
    assert _split((13, 11), 13) == (13, 1, 11)
    assert _split((10,), 2) == (3, 8)
    for plan in plans():
        if plan.approval is None:
            continue
        assert sum(plan.batches) == len(plan.lines)
        assert [line["seq"] for line in plan.lines] == list(range(len(plan.lines)))
        line = plan.lines[plan.approval.line]
        assert line["kind"] == "approval.request" and line["approvers"] == [APPROVER.format(platform=plan.platform)]
        ends = {sum(plan.batches[: k + 1]) for k in range(len(plan.batches))}
        assert plan.approval.line + 1 in ends  # the agent waits for the decision after that request
        assert plan.stop is None


def test_approvals_leave_the_rest_of_a_seed_as_it_was() -> None:
    with_them = plans()
    asked = [p for p in with_them if p.approval is not None]
    assert 5 <= len(asked) <= 25 and {p.approval.outcome for p in asked if p.approval} == {"approve", "deny", "expire"}
    made_again = {p.run: p for p in plans()}
    for plan in with_them:  # kills, faults, media and stops are drawn before approvals, from the seed's generator
        again = made_again[plan.run]
        assert (again.kill, again.fault, again.media, again.stop) == (plan.kill, plan.fault, plan.media, plan.stop)


def test_a_short_approval_ttl_changes_only_the_decided_approvals_ttl() -> None:
    # --approval-ttl-s (tests/integration/test_chaos.py's shared-bot slice: an agent killed after asking, never back,
    # held its run for the 120 s ttl): the same runs, approvals and outcomes; only a decided approval's ttl_s differs
    default, short = plans(), make_plan(Options(runs=60, seed=9, approval_ttl_s=20.0), load_recordings())
    assert Options(runs=1, seed=1).approval_ttl_s == DECIDED_TTL_S == 120.0
    assert inspect.signature(chaos).parameters["approval_ttl_s"].default == DECIDED_TTL_S  # the command's default
    decided = 0
    for plan, other in zip(default, short, strict=True):
        assert (other.kill, other.fault, other.media, other.stop) == (plan.kill, plan.fault, plan.media, plan.stop)
        if plan.approval is None:
            assert other.approval is None and other.lines == plan.lines
            continue
        assert other.approval is not None
        if plan.approval.outcome == "expire":
            assert other.approval == plan.approval and other.lines == plan.lines
            continue
        decided += 1
        assert (plan.approval.ttl_s, other.approval.ttl_s) == (DECIDED_TTL_S, 20.0)
        assert other.approval == replace(plan.approval, ttl_s=20.0)
        ttls = [line.get("ttl_s") for line in other.lines if line["kind"] == "approval.request"]
        assert ttls == [20.0]
        assert [{**line, "ttl_s": 0} for line in other.lines] == [{**line, "ttl_s": 0} for line in plan.lines]
    assert decided >= 3


def _unit(decision: str, by: str | None) -> dict[str, Any]:
    return {
        "index": 3,
        "kind": "approval",
        "id": "ok-1",
        "decision": decision,
        "approved": decision == "approved",
        "by": by,
    }


def _judged(outcome: str, record: ApprovalRecord, chat: list[dict[str, Any]] | None = None) -> Any:
    plan = next(p for p in plans() if p.approval is not None and p.approval.outcome == outcome)
    return plan, judge_approval(plan, record, chat or [])


def test_the_judge_finds_a_decision_doubled_lost_or_made_by_a_stranger() -> None:
    plan = next(p for p in plans() if p.approval is not None and p.approval.outcome == "approve")
    approver, stranger = APPROVER.format(platform=plan.platform), STRANGER.format(platform=plan.platform)
    good = ApprovalRecord(
        asked=True,
        presses=[
            {"by": stranger, "decision": "approve", "status": 403, "answer": {"tell": "You may not decide"}},
            {"by": approver, "decision": "approve", "status": 200, "answer": {"decision": "approved", "by": approver}},
        ],
        reads=[[], [_unit("approved", approver)], [_unit("approved", approver)]],
    )
    verdict = judge_approval(plan, good, [{"text": f"🔐 Approval: x\n✅ Approved by {approver} at 10:00."}])
    assert (verdict.outcome, verdict.stranger_refused, verdict.bad, verdict.problems) == ("approved", 1, False, [])

    twice = ApprovalRecord(asked=True, reads=[[_unit("approved", approver), _unit("approved", approver)]])
    assert judge_approval(plan, twice, []).doubled
    moved = ApprovalRecord(
        asked=True, reads=[[_unit("approved", approver)], [{**_unit("approved", approver), "index": 4}]]
    )
    assert judge_approval(plan, moved, []).doubled  # the same unit at another place of the lane
    retried = ApprovalRecord(  # the press was answered after a kill by the first decision: consistent
        asked=True,
        presses=[
            {
                "by": approver,
                "decision": "approve",
                "status": 409,
                "answer": {"approval": {"decision": "approved", "by": approver}},
            }
        ],
        reads=[[_unit("approved", approver)]],
    )
    assert not judge_approval(plan, retried, []).bad
    lost = ApprovalRecord(
        asked=True,
        presses=[
            {"by": approver, "decision": "approve", "status": 200, "answer": {"decision": "approved", "by": approver}}
        ],
        reads=[[]],
    )
    assert judge_approval(plan, lost, []).lost
    stranger_won = ApprovalRecord(
        asked=True,
        presses=[{"by": stranger, "decision": "deny", "status": 200, "answer": {"decision": "denied", "by": stranger}}],
        reads=[[_unit("denied", stranger)]],
    )
    assert judge_approval(plan, stranger_won, []).wrong_decided
    shown_twice = judge_approval(plan, good, [{"text": "🔐 Approval: x"}, {"text": "🔐 Approval: x"}])
    assert shown_twice.doubled


def test_an_expiry_and_a_run_that_ended_first() -> None:
    plan = next(p for p in plans() if p.approval is not None and p.approval.outcome == "expire")
    stranger = STRANGER.format(platform=plan.platform)
    expired = ApprovalRecord(
        asked=True,
        presses=[{"by": stranger, "decision": "approve", "status": 403, "answer": {}}],
        reads=[[], [_unit("expired", None)]],
    )
    assert judge_approval(plan, expired, []).outcome == "expired"
    assert not judge_approval(plan, expired, []).bad
    ended = ApprovalRecord(
        asked=True,
        presses=[{"by": stranger, "decision": "approve", "status": 404, "answer": {"error": "unknown run"}}],
        reads=[[]],
        ended_undecided=True,
    )
    verdict = judge_approval(plan, ended, [])
    assert (verdict.outcome, verdict.bad, verdict.stranger_refused) == ("undecided", False, 0)
    approved_anyway = ApprovalRecord(asked=True, reads=[[_unit("approved", APPROVER.format(platform=plan.platform))]])
    assert judge_approval(plan, approved_anyway, []).wrong_decided  # nobody who may decide pressed


def test_whatsapps_buttons_message_is_set_aside_with_the_approval() -> None:
    """WhatsApp's reply buttons come in a message of their own: the judge leaves it out of the answer's text, as
    the approval's message (its text is the adapter's, kept in step here)."""
    from streamrelay.adapters.whatsapp.buttons import BODY
    from streamrelay.app.chaos.approvals import BUTTONS_TEXT, set_aside

    assert BUTTONS_TEXT == BODY
    chat = [
        {"message_id": "w1", "text": "🔐 Approval: Go on?"},
        {"message_id": "w2", "text": BODY},
        {"message_id": "w3", "text": "The answer."},
    ]
    shown, report, calls = set_aside(chat, {"message_ids": ["w1", "w3"]}, [{"message_id": "w2"}, {"message_id": "w3"}])
    assert shown == [chat[2]] and report == {"message_ids": ["w3"]} and calls == [{"message_id": "w3"}]
