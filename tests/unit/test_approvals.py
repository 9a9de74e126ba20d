"""Approvals without I/O: the machine's button transitions for an approval part (core/delivery/buttons.py), the
request's checks and the decision rules (core/run/approvals.py), the normalizers' mappings (AI SDK
``tool-approval-request``, AG-UI interrupt outcomes) and the unit contract."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from streamrelay.adapters.ingest_http.owner_proxy import run_of
from streamrelay.core.contracts.units import ApprovalUnit, check_unit
from streamrelay.core.delivery.calls import CallResult, Done, NotDone, SetControl, Unknown
from streamrelay.core.delivery.controls import CLEAR_ATTEMPTS
from streamrelay.core.delivery.machine import DeliveryMachine
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import OpKind, Outcome
from streamrelay.core.errors import (
    IngestError,
    PayloadRejectedError,
    PlatformUnavailableError,
    RateLimitedError,
    RejectReason,
    UncertainDeliveryError,
)
from streamrelay.core.events import ApprovalDecision, ApprovalRequest, parse_event
from streamrelay.core.lanes.pipeline import ApprovalDecided, PipelineLane
from streamrelay.core.normalize import AgUiNormalizer, AiSdkUiNormalizer
from streamrelay.core.normalize.base import DEFAULT_APPROVAL_TTL_S
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.ledger import PartRecord
from streamrelay.core.records.report import PartState, SlotRole
from streamrelay.core.run.approvals import (
    NOT_ALLOWED,
    Approval,
    ApprovalBook,
    DecisionRefused,
    approval_control,
    approval_short,
    button_ids,
    check_request,
    decide,
    parse_decision_body,
    take_decision,
)
from streamrelay.core.run.stop_controls import short_id
from tests.unit.fakes import delivery_machine


def machine(book: SlotBook | None = None) -> DeliveryMachine:
    return delivery_machine(book)


BUTTONS = approval_control("r1", "a1")


def shown_approval(m: DeliveryMachine) -> Any:
    """An approval part sent as message m1, its buttons put on."""
    slot = m.book.claim_slot(SlotRole.APPROVAL, "🔐 Approval: Delete?")
    slot.buttons = BUTTONS
    op = m.next_op()
    assert op is not None and (op.kind, op.slot) == (OpKind.SEND, slot)
    m.call_for(op)
    m.apply(op, Done("m1"))
    on = m.next_op()
    assert on is not None and on.kind is OpKind.CONTROL_ON and on.slot is slot
    call = m.call_for(on)
    assert isinstance(call, SetControl) and (call.message_id, call.control) == ("m1", BUTTONS)
    assert m.intent_for(on) is None  # a control call is no message's text: not in the ledger
    assert m.apply(on, Done()) == (Outcome.ACK, "", None)
    assert m.next_op() is None
    return slot


def test_the_buttons_go_on_right_after_the_create_and_off_before_the_decision_edit() -> None:
    m = machine()
    slot = shown_approval(m)
    slot.buttons = None
    m.book.set_text(slot, "🔐 Approval: Delete?\n✅ Approved by telegram:user:1 at …")
    off = m.next_op()
    assert off is not None and off.kind is OpKind.CONTROL_OFF  # before the edit: no keyboard kept by the edit
    call = m.call_for(off)
    assert isinstance(call, SetControl) and call.control is None
    m.apply(off, Done())
    edit = m.next_op()
    assert edit is not None and edit.kind is OpKind.EDIT and "Approved" in edit.text
    assert m.intent_for(edit) is not None  # the decision's edit is ledgered like any part's


def test_an_approval_part_never_carries_the_stop_control() -> None:
    m = delivery_machine(control=approval_control("r1", "stop-like"))
    shown_approval(m)  # only its own buttons: next_op is None once they are on


@dataclass
class Row:
    """One row of the button outcome table: what the call answered, the outcome, whether the call is due again."""

    result: CallResult
    outcome: Outcome
    again: bool
    reported: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


ROWS = [
    Row(Done(), Outcome.ACK, again=False),
    Row(NotDone(RateLimitedError("429", retry_after_s=2.0)), Outcome.RATE_LIMITED, again=True),
    Row(NotDone(PlatformUnavailableError("502")), Outcome.RETRY, again=True),
    Row(Unknown(UncertainDeliveryError("timeout")), Outcome.RETRY, again=True),
    Row(NotDone(PayloadRejectedError("BUTTON_DATA_INVALID", reason=RejectReason.OTHER)), Outcome.FAILED, False, True),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: type(r.result).__name__ + ":" + r.outcome)
def test_a_button_call_outcome(row: Row) -> None:
    m = machine()
    slot = m.book.claim_slot(SlotRole.APPROVAL, "🔐 Approval: Delete?")
    slot.buttons = BUTTONS
    send = m.next_op()
    assert send is not None
    m.call_for(send)
    m.apply(send, Done("m1"))
    on = m.next_op()
    assert on is not None and on.kind is OpKind.CONTROL_ON
    assert m.apply(on, row.result)[0] is row.outcome
    again = m.next_op()
    assert (again is not None and again.kind is OpKind.CONTROL_ON) is row.again
    assert bool(m.buttons.errors) is row.reported


def test_transient_failures_are_given_up_after_the_attempts_and_reported() -> None:
    m = machine()
    slot = m.book.claim_slot(SlotRole.APPROVAL, "🔐 Approval: Delete?")
    slot.buttons = BUTTONS
    send = m.next_op()
    assert send is not None
    m.call_for(send)
    m.apply(send, Done("m1"))
    outcomes = []
    while (op := m.next_op()) is not None:
        outcomes.append(m.apply(op, NotDone(PlatformUnavailableError("502")))[0])
    assert outcomes == [Outcome.RETRY] * (CLEAR_ATTEMPTS - 1) + [Outcome.FAILED]
    assert m.buttons.errors == ["the approval buttons of message m1 could not be put on: 502"]


def test_after_a_restart_the_buttons_are_set_again() -> None:
    book = SlotBook("r1", 0.0, False)
    book.restore(
        [PartRecord(run="r1", slot=0, role=SlotRole.APPROVAL, message_id="m9", shown="🔐 Q", state=PartState.ACKED)]
    )
    m = machine(book)
    m.buttons.restored()
    slot = book.claim_slot(SlotRole.APPROVAL, "🔐 Q")
    slot.buttons = BUTTONS
    op = m.next_op()
    assert op is not None and (op.kind, op.slot.message_id) == (OpKind.CONTROL_ON, "m9")  # never a second message
    m.apply(op, Done())
    assert m.next_op() is None


def policy(**kw: Any) -> ChannelPolicy:
    return ChannelPolicy(name="c", **kw)


def request(**kw: Any) -> ApprovalRequest:
    fields = {"kind": "approval.request", "run": "r1", "id": "a1", "question": "Delete?", "ttl_s": 60.0, **kw}
    event = parse_event(fields)
    assert isinstance(event, ApprovalRequest)
    return event


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"id": "a/1"}, "id must be 1-64 letters"),
        ({"ttl_s": None}, "exactly one of 'expires_at'"),
        ({"expires_at": "2026-12-07T10:00:00Z"}, "exactly one of 'expires_at'"),
        ({"ttl_s": "60"}, "ttl_s"),
        ({"ttl_s": 10**9}, "ttl_s"),
        ({"approvers": ["telegram user 1"]}, "not a platform user id"),
        ({"on_expiry": "maybe"}, "on_expiry"),
        ({"question": ""}, "question"),
    ],
)
def test_a_bad_request_says_what_is_wrong(fields: dict[str, Any], error: str) -> None:
    with pytest.raises(IngestError, match=error) as refused:
        request(**fields)
    assert refused.value.status == 400


def test_who_may_decide_is_explicit() -> None:
    book = ApprovalBook()
    with pytest.raises(IngestError, match="names nobody who may decide") as nobody:
        check_request(book, request(), policy(), 0.0, enforce=True)
    assert nobody.value.status == 400 and book.items == {}
    by_channel = check_request(book, request(), policy(approvers=("slack:user:U1",)), 0.0, enforce=True)
    assert by_channel.approvers == ("slack:user:U1",) and not by_channel.anyone and by_channel.expires_at == 60.0
    assert by_channel.allowed("slack:user:U1") and not by_channel.allowed("slack:user:U2")
    anyone = check_request(ApprovalBook(), request(), policy(approvals_anyone=True), 0.0, enforce=True)
    assert anyone.anyone and anyone.allowed("discord:user:5")
    named = check_request(
        ApprovalBook(), request(approvers=["telegram:user:1"]), policy(approvals_anyone=True), 0.0, enforce=True
    )
    assert not named.anyone and not named.allowed("telegram:user:2")  # the request's list wins over "anyone"
    with pytest.raises(IngestError, match="already asked") as again:
        check_request(book, request(), policy(approvers=("x:user:1",)), 5.0, enforce=True)
    assert again.value.status == 409
    replayed = check_request(book, request(), policy(approvers=("x:user:1",)), 5.0, enforce=False)
    assert replayed is by_channel  # a journaled line is taken as it was


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ([], "must be a JSON object"),
        ({"decision": "yes"}, "decision must be 'approve' or 'deny'"),
        ({"decision": "approve", "by": "a b"}, "by must name who pressed"),
        ({"decision": "approve", "when": 1}, "unknown field 'when'"),
    ],
)
def test_a_bad_decision_body_says_what_is_wrong(body: Any, error: str) -> None:
    with pytest.raises(IngestError, match=error):
        parse_decision_body(body)


def test_the_message_says_what_is_asked_and_who_may_decide() -> None:
    approval = Approval(request(action="rm -r /tmp/x", on_expiry="approved"), 0.0, ("telegram:user:1",), False)
    assert approval.text() == (
        "🔐 Approval: Delete?\nIf approved: rm -r /tmp/x\nWho may decide: telegram:user:1\n"
        "Expires 1970-01-01 00:00 UTC (then approved)."
    )
    decided = ApprovalDecision(run="r1", id="a1", decision="denied", approved=False, by="telegram:user:1", at=60.0)
    approval.decision = decided
    assert approval.text().endswith("❌ Denied by telegram:user:1 at 1970-01-01 00:01 UTC.")
    assert Approval(request(), 0.0, (), True).text().splitlines()[1] == "Who may decide: anyone in the chat"


def test_the_message_never_carries_control_characters_or_bidi_overrides() -> None:
    """The message is built from admission's approval (the raw request), not from the sanitized event the run stage
    sees: a NUL, ESC, BEL or RLO in the question or action reached Telegram's sendMessage as sent (breaker, live
    against the mock)."""
    approval = Approval(
        request(question="a\x00b\x1b[31mc\u202etxt.exe", action="rm\x07 -r\u2066 /"), 0.0, ("telegram:user:1",), False
    )
    assert approval.text().splitlines()[:2] == ["🔐 Approval: ab[31mctxt.exe", "If approved: rm -r /"]
    assert approval.text(ended=True).splitlines()[:2] == ["🔐 Approval: ab[31mctxt.exe", "If approved: rm -r /"]


@pytest.mark.parametrize("expires_at", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_an_expiry_outside_the_calendar_is_shown_not_raised(expires_at: str) -> None:
    """``expires_at`` 0001-01-01 at +14:00 is a year-0 instant in UTC: its message raised ValueError in the run stage
    and the whole run stopped ("internal error, delivery stopped", breaker live against the mock)."""
    asked = request(ttl_s=None, expires_at=expires_at)
    approval = Approval(asked, asked.expires_at.timestamp() if asked.expires_at else 0.0, ("telegram:user:1",), False)
    assert approval.text().splitlines()[-1].startswith("Expires ")


def test_an_expiry_past_a_week_is_refused_like_a_ttl_past_a_week() -> None:
    """ "nobody may be asked for ever": ``ttl_s`` stops at a week, ``expires_at`` did not (9999-12-31 was taken)."""
    far = request(ttl_s=None, expires_at="9999-12-31T23:59:59Z")
    with pytest.raises(IngestError, match="at most a week") as refused:
        check_request(ApprovalBook(), far, policy(approvals_anyone=True), 0.0, enforce=True)
    assert refused.value.status == 400
    week = request(ttl_s=None, expires_at="1970-01-08T00:00:00Z")
    assert check_request(ApprovalBook(), week, policy(approvals_anyone=True), 0.0, enforce=True).expires_at == 604800.0
    replayed = check_request(ApprovalBook(), far, policy(approvals_anyone=True), 0.0, enforce=False)
    assert replayed.expires_at > 604800.0  # a journaled line is taken as it was


def test_button_ids_fit_every_platform_and_name_the_run_and_the_approval() -> None:
    approve, deny = button_ids("client/run-1", "a" * 64)
    assert approve == f"approve:{short_id('client/run-1')}:{approval_short('client/run-1', 'a' * 64)}"
    assert deny.startswith("deny:") and len(approve.encode()) <= 64 and len(deny) <= 100
    assert approval_control("r", "a").buttons() == (
        (button_ids("r", "a")[0], "✅ Approve"),
        (button_ids("r", "a")[1], "❌ Deny"),
    )


class _Journal:
    def __init__(self, fail: bool = False) -> None:
        self.lines: list[str] = []
        self.fail = fail

    async def append(self, entries: Any) -> None:
        if self.fail:
            raise OSError("disk full")
        self.lines += [line for _, line in entries]


@dataclass
class _Run:
    approvals: ApprovalBook
    stopped: Any = None
    ended: bool = False
    closing: str | None = None
    put: list[Any] = field(default_factory=list)
    taking: int = 0
    """ActiveRun.hold / release: the decision held the run from its idle close while it was journaled."""

    def hold(self) -> None:
        self.taking += 1

    def release(self) -> None:
        self.taking -= 1

    async def put_all(self, events: list[Any]) -> None:
        assert self.taking == 1  # handed over while held
        self.put += events


@dataclass
class _Admission:
    runs: dict[str, _Run]
    journal: _Journal


def admission(expires_at: float = 1000.0, fail: bool = False) -> tuple[_Admission, Approval]:
    book = ApprovalBook()
    approval = Approval(request(), expires_at, ("telegram:user:1",), False)
    book.items["a1"] = approval
    return _Admission({"r1": _Run(book)}, _Journal(fail)), approval


async def test_a_decision_is_journaled_once_and_a_second_answers_the_first() -> None:
    adm, approval = admission()
    with pytest.raises(DecisionRefused) as stranger:
        await decide(adm, "r1", "a1", "approve", "telegram:user:2", now=10.0)  # type: ignore[arg-type]
    assert (stranger.value.status, stranger.value.tell) == (403, NOT_ALLOWED) and adm.journal.lines == []
    key, answer = await decide(adm, "r1", approval_short("r1", "a1"), "deny", "telegram:user:1", now=10.0)  # type: ignore[arg-type]
    assert (key, answer["decision"], answer["approved"], answer["by"]) == ("r1", "denied", False, "telegram:user:1")
    assert [json.loads(line)["kind"] for line in adm.journal.lines] == ["approval.decision"]
    assert adm.runs["r1"].put == [approval.decision] and adm.runs["r1"].taking == 0
    with pytest.raises(DecisionRefused) as second:
        await decide(adm, "r1", "a1", "approve", "telegram:user:1", now=11.0)  # type: ignore[arg-type]
    assert second.value.status == 409 and second.value.approval["decision"] == "denied"
    assert len(adm.journal.lines) == 1


async def test_a_press_after_the_expiry_takes_the_expiry() -> None:
    adm, _ = admission(expires_at=5.0)
    _, answer = await decide(adm, "r1", "a1", "approve", "telegram:user:1", now=6.0)  # type: ignore[arg-type]
    assert (answer["decision"], answer["approved"], answer["by"]) == ("expired", False, None)
    with pytest.raises(DecisionRefused) as late:  # a press after the expiry was decided: nobody's, not "by None"
        await decide(adm, "r1", "a1", "approve", "telegram:user:1", now=7.0)  # type: ignore[arg-type]
    assert (late.value.status, late.value.error) == (409, "approval 'a1' was decided already: expired")


async def test_an_unwritable_journal_decides_nothing() -> None:
    adm, approval = admission(fail=True)
    with pytest.raises(OSError):
        await decide(adm, "r1", "a1", "approve", "telegram:user:1", now=1.0)  # type: ignore[arg-type]
    assert approval.decision is None and adm.runs["r1"].put == [] and adm.runs["r1"].taking == 0


def test_a_replayed_decision_is_taken_once() -> None:
    adm, approval = admission()
    line = ApprovalDecision(run="r1", id="a1", decision="approved", approved=True, by="telegram:user:1", at=1.0)
    assert take_decision(adm.runs["r1"], line) is True  # type: ignore[arg-type]
    assert take_decision(adm.runs["r1"], line) is False  # type: ignore[arg-type]
    assert approval.decision is line


def test_the_approval_unit_is_on_the_contract() -> None:
    lane = PipelineLane("r1")
    unit = lane.emit(ApprovalDecided("a1", "expired", False, None, 12.5))
    assert isinstance(unit, ApprovalUnit)
    wire = unit.model_dump(mode="json")
    assert wire == {
        "index": 1,
        "kind": "approval",
        "run": "r1",
        "id": "a1",
        "decision": "expired",
        "approved": False,
        "by": None,
        "at": 12.5,
        "source": None,
    }
    assert isinstance(check_unit(wire), ApprovalUnit)


def test_the_ai_sdk_tool_approval_request_is_an_approval() -> None:
    normalizer = AiSdkUiNormalizer("r1")
    raws: list[dict[str, Any]] = [
        {"type": "start"},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "deleteFile", "input": {"path": "/a"}},
        {"type": "tool-approval-request", "approvalId": "aitxt-1", "toolCallId": "c1"},
    ]
    events = [e for raw in raws for e in normalizer.feed(raw)]
    asked = [e for e in events if isinstance(e, ApprovalRequest)]
    assert len(asked) == 1
    assert (asked[0].id, asked[0].question, asked[0].action) == (
        "aitxt-1",
        "Run the tool deleteFile?",
        'deleteFile({"path": "/a"})',
    )
    assert (asked[0].ttl_s, asked[0].on_expiry, asked[0].approvers) == (DEFAULT_APPROVAL_TTL_S, "denied", ())
    with pytest.raises(IngestError, match="approvalId"):
        normalizer.feed({"type": "tool-approval-request", "toolCallId": "c1"})


def test_an_ag_ui_interrupt_outcome_is_an_approval() -> None:
    normalizer = AgUiNormalizer("r1")
    raws: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "run-a"},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "deploy"},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {
            "type": "RUN_FINISHED",
            "threadId": "t",
            "runId": "run-a",
            "outcome": {
                "type": "interrupt",
                "interrupts": [
                    {
                        "id": "int/1 with spaces",
                        "reason": "tool_approval",
                        "message": "Deploy to prod?",
                        "toolCallId": "c1",
                        "expiresAt": "2026-12-07T10:00:00Z",
                    },
                    {"id": "i2", "reason": "confirm"},
                ],
            },
        },
    ]
    asked = [e for raw in raws for e in normalizer.feed(raw) if isinstance(e, ApprovalRequest)]
    assert [(a.question, a.action) for a in asked] == [("Deploy to prod?", "call deploy"), ("confirm", None)]
    assert asked[0].id.startswith("h-") and len(asked[0].id) == 18  # an id the route's path could not carry
    assert asked[0].expires_at is not None and asked[1].ttl_s == DEFAULT_APPROVAL_TTL_S
    finished: dict[str, Any] = {
        "type": "RUN_FINISHED",
        "threadId": "t",
        "runId": "run-a",
        "outcome": {"type": "success"},
    }
    assert not any(isinstance(e, ApprovalRequest) for e in AgUiNormalizer("r1").feed(finished))
    with pytest.raises(IngestError, match="non-empty 'interrupts'"):
        AgUiNormalizer("r1").feed({**finished, "outcome": {"type": "interrupt", "interrupts": []}})


@pytest.mark.parametrize(
    ("method", "path", "run"),
    [
        ("POST", "/v1/runs/r1/approvals/a1", "r1"),
        ("GET", "/v1/runs/0123456789abcdef/approvals/fedcba9876543210", "0123456789abcdef"),
        ("POST", "/v1/runs/r1/stop", "r1"),
        ("POST", "/v1/runs/alice%2Fr1/live/approvals/a1", "alice/r1"),  # the live page's press (its run key)
        ("POST", "/v1/runs/r1/events", None),
        ("POST", "/v1/runs/r1/corrections", "r1"),  # a correction: applied by the run's owner (issue 27)
        ("GET", "/v1/runs/alice%2Fr1/corrections/fix-1", "alice/r1"),
        ("POST", "/v1/deliveries/dlv-0123456789ab/resend", "/desk/dlv-0123456789ab"),  # its entry's owner
        ("GET", "/v1/deliveries", None),  # listed from Redis by any replica
        ("POST", "/v1/deliveries/dlv-0123456789ab/resolve", None),
        ("DELETE", "/v1/runs/alice%2Fr1", "alice/r1"),  # an erasure: by the run's owner (issue 29)
        ("GET", "/v1/runs/r1/audit", "r1"),  # an audit: through the owner's adapters
        ("GET", "/v1/runs/alice%2Fr1/timeline", "alice/r1"),  # a timeline: in the owner's memory
        ("DELETE", "/v1/conversations/chat/7104", "/chat/chat/7104"),  # the conversation's partition's owner
        ("DELETE", "/v1/conversations/chat", None),
    ],
)
def test_a_replica_forwards_a_decision_to_the_runs_owner(method: str, path: str, run: str | None) -> None:
    assert run_of(method, path) == run


@pytest.mark.parametrize("question", ["   \n ", "\x00\x1b\x07", "\u202e\u200b\u2066", "\t", "\u0301\u0489"])
def test_a_blank_question_is_refused_saying_what_to_ask(question: str) -> None:
    from pydantic import ValidationError

    from streamrelay.core.events import ApprovalRequest

    with pytest.raises(ValidationError, match="the question is blank"):
        ApprovalRequest(run="r1", id="a1", question=question, approvers=("telegram:user:1",), ttl_s=60.0)
    assert ApprovalRequest(run="r1", id="a1", question=" ok? ", approvers=("telegram:user:1",), ttl_s=60.0)
