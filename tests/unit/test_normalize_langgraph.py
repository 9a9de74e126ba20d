"""LangGraph's stream (core/normalize/langgraph.py) from two real recordings of one graph (tests/streams/langgraph/
recorded/: langgraph 1.2.22 in-process ``version="v2"`` parts, and the LangGraph server's SSE through langgraph-sdk
0.4.14 with langgraph-api 0.16.7): the answer text, the refund tool call whole and once, its result, the custom status
line, and the review node's ``interrupt()`` asked once as an ``approval.request`` whose id is the interrupt's; the
interrupt value shapes; and a Relay that asks the interrupt in the chat, takes the decision, and shows the resumed
run's answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import (
    ApprovalRequest,
    Event,
    ProviderFormat,
    Status,
    TextEvent,
    TextMode,
    ToolCall,
    ToolCallState,
    ToolResult,
)
from streamrelay.core.normalize import LangGraphNormalizer, make_normalizer
from streamrelay.core.normalize.langgraph import _asked
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import MemoryChat

pytestmark = pytest.mark.timeout(60)

RECORDED = Path(__file__).resolve().parents[1] / "streams" / "langgraph" / "recorded"
PLAN = "Order A-1029 was charged twice. I will refund the second charge."
DONE = "Refunded 49.99 EUR for order A-1029: it reaches the card in 5 days."
QUESTION = "Refund 49.99 EUR for order A-1029?"
ACTION = "refund(order='A-1029', amount=49.99)"


def _lines(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (RECORDED / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def _events(name: str) -> list[Event]:
    normalizer = make_normalizer(ProviderFormat.LANGGRAPH, "r")
    assert isinstance(normalizer, LangGraphNormalizer)
    events: list[Event] = []
    for line in _lines(name):
        events += normalizer.feed(line)
    return events + normalizer.close()


def _interrupts(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The interrupts an ``updates`` part of ``lines`` carries."""
    found: list[dict[str, Any]] = []
    for line in lines:
        data = line.get("data")
        if isinstance(data, dict) and isinstance(data.get("__interrupt__"), list):
            found += data["__interrupt__"]
    return found


def _texts(events: list[Event]) -> dict[int, str]:
    """Each message's answer text: deltas joined, a snapshot replacing what came before."""
    texts: dict[int, str] = {}
    for event in events:
        if isinstance(event, TextEvent):
            before = texts.get(event.message, "")
            texts[event.message] = event.text if event.mode is TextMode.SNAPSHOT else before + event.text
    return texts


@pytest.mark.parametrize("name", ["local-v2.jsonl", "server-sse.jsonl"])
def test_a_recording_gives_the_answer_the_call_the_status_and_one_approval(name: str) -> None:
    events = _events(name)
    assert _texts(events) == {0: PLAN, 1: DONE}
    calls = [e for e in events if isinstance(e, ToolCall) and e.id == "call_refund_1"]
    assert calls[0].state is ToolCallState.START and calls[-1].state is ToolCallState.END
    assert sum(c.state is ToolCallState.END for c in calls) == 1  # once, though updates carries it again
    args = "".join(c.args_delta or "" for c in calls)
    assert json.loads(args) == {"order": "A-1029", "amount": 49.99} and calls[0].name == "refund"
    asked = [e for e in events if isinstance(e, ApprovalRequest)]
    interrupt = _interrupts(_lines(name))[0]
    assert [(a.id, a.question, a.action, a.ttl_s) for a in asked] == [(interrupt["id"], QUESTION, ACTION, 600.0)]
    assert events.index(asked[0]) > events.index(calls[-1])  # asked after the call it reviews
    assert [(r.id, r.name, r.summary) for r in events if isinstance(r, ToolResult)] == [
        ("call_refund_1", "refund", "done")
    ]
    assert [s.text for s in events if isinstance(s, Status)] == ["refunding order A-1029"]


def test_an_interrupt_streamed_in_updates_and_values_is_asked_once() -> None:
    normalizer = LangGraphNormalizer("r")
    interrupt: dict[str, Any] = {"value": "Deploy to production?", "id": "0123456789abcdef0123456789abcdef"}
    first = normalizer.feed({"event": "updates", "data": {"__interrupt__": [interrupt]}})
    again = normalizer.feed({"event": "values", "data": {"messages": [], "__interrupt__": [interrupt]}})
    v2 = normalizer.feed({"type": "values", "ns": [], "data": {}, "interrupts": [interrupt]})
    assert [type(e) for e in first] == [ApprovalRequest] and again == [] and v2 == []
    old = LangGraphNormalizer("r")  # an older langgraph's interrupt has no id: numbered, still asked once
    asked = old.feed({"event": "updates|sub:1", "data": {"__interrupt__": [{"value": "Go?", "resumable": True}]}})
    assert [(a.id, a.question) for a in asked if isinstance(a, ApprovalRequest)] == [("interrupt-1", "Go?")]
    assert old.feed({"event": "values", "data": {"__interrupt__": [{"value": "Go?", "resumable": True}]}}) == []


@pytest.mark.parametrize(
    ("value", "question", "action"),
    [
        ("Deploy?", "Deploy?", None),
        ({"question": "Refund?", "action": "refund(1)"}, "Refund?", "refund(1)"),
        ({"message": "Send it?", "action": {"to": "a@b.c"}}, "Send it?", '{"to":"a@b.c"}'),
        (  # LangChain's human-in-the-loop middleware
            {"action_requests": [{"name": "send_email", "args": {"to": "a@b.c"}}], "review_configs": []},
            "Run the tool send_email?",
            'send_email({"to":"a@b.c"})',
        ),
        (  # an Agent Inbox HumanInterrupt (a list of them: the first)
            [{"action_request": {"action": "wipe", "args": {"disk": 1}}, "config": {}, "description": "Wipe disk 1?"}],
            "Wipe disk 1?",
            'wipe({"disk":1})',
        ),
        ({"amount": 5}, 'The agent asks: {"amount":5}', None),
        (42, "The agent asks: 42", None),
    ],
)
def test_interrupt_values_become_a_question_and_an_action(value: Any, question: str, action: str | None) -> None:
    assert _asked(value) == (question, action)


def test_a_line_of_neither_shape_is_a_400_that_says_both() -> None:
    with pytest.raises(Exception, match=r"'event'.*'type' with 'data'") as refused:
        LangGraphNormalizer("r").feed({"kind": "text"})
    assert getattr(refused.value, "status", None) == 400


async def test_a_relay_asks_the_interrupt_and_shows_the_resumed_answer() -> None:
    """The server recording in a run declared ``langgraph``: the interrupt is asked in the chat (the channel's
    approvers), the person approves, the agent reads the ``approval`` unit and resumes the graph (the recording's
    second run, made with ``command={"resume": {"approved": True}}``): the answer is the resumed run's."""
    chat = MemoryChat()
    policy = ChannelPolicy(name="c", throttle_s=0, approvers=("telegram:user:1",))
    relay = Relay({"c": ChannelRuntime(policy, chat)}, MemoryLedger(), MonotonicClock())
    lines = _lines("server-sse.jsonl")
    cut = next(i for i, line in enumerate(lines) if _interrupts([line])) + 1
    start = {"kind": "run.start", "run": "r", "channel": "c", "target": {"chat_id": 5}, "format": "langgraph"}
    results = await relay.submit_lines([(start, None), *((line, None) for line in lines[:cut])], "r")
    assert all(not isinstance(r, Exception) for r in results), results
    interrupt_id = _interrupts(lines)[0]["id"]
    assert relay.approval("r", interrupt_id)["state"] == "pending"
    await relay.decide_approval("r", interrupt_id, "approve", "telegram:user:1")
    lane = relay.lane("r")
    assert lane is not None
    while not any(u.kind == "approval" for u in lane.units):
        await lane.wait(len(lane.units))
    unit = next(u for u in lane.units if u.kind == "approval")
    assert unit.model_dump()["approved"] is True  # the agent resumes: Command(resume={"approved": True})
    results = await relay.submit_lines(
        [*((line, None) for line in lines[cut:]), ({"kind": "end", "run": "r"}, None)], "r"
    )
    assert all(not isinstance(r, Exception) for r in results), results
    report = await relay.wait_done("r", 20)
    assert report is not None and report.done and report.end_status == "ok", report
    shown = "\n".join(chat.messages.values())
    assert DONE in shown and QUESTION in shown and "Approved by telegram:user:1" in shown
    await relay.close()
