"""A run whose agent waits for a person's decision is not idle (docs/approvals.md): while one of its approvals is
undecided and unexpired, the idle timeout does not close it (chaos seed 7: a run closed 12 s into an approval whose
ttl was 120 s; the approver's press then got 404 and the agent's later lines were lost). Once the approval is
decided or expired, its agent has a whole idle timeout again."""

from __future__ import annotations

import asyncio
import time

import pytest

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.journal import MemoryJournal
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import DeliveryReport
from streamrelay.core.run.controller import IDLE_CLOSED
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import MemoryChat

pytestmark = pytest.mark.timeout(30)

IDLE_S = 0.3


def _relay() -> Relay:
    channels = {"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), MemoryChat())}
    return Relay(channels, MemoryLedger(), MonotonicClock(), journal=MemoryJournal(), run_idle_timeout_s=IDLE_S)


def _ask(ttl_s: float) -> list[dict[str, object]]:
    start = {"kind": "run.start", "run": "r", "seq": 0, "channel": "c", "target": {"chat_id": 5}}
    text = {"kind": "text", "run": "r", "seq": 1, "text": "Deploying needs your say.\n\n"}
    ask = {
        "kind": "approval.request",
        "run": "r",
        "seq": 2,
        "id": "a1",
        "question": "Deploy?",
        "approvers": ["telegram:user:1"],
        "ttl_s": ttl_s,
        "on_expiry": "denied",
    }
    return [start, text, ask]


async def _done(relay: Relay, within_s: float) -> DeliveryReport | None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        report = await relay.report("r")
        if report is not None and report.done:
            return report
        await asyncio.sleep(0.02)
    return None


async def test_a_pending_approval_holds_the_idle_timeout_and_the_decision_gives_a_whole_one_again() -> None:
    relay = _relay()
    await relay.submit_lines([(line, None) for line in _ask(ttl_s=60)])
    assert await _done(relay, 6 * IDLE_S) is None  # the person has not decided: not idle
    decided = await relay.decide_approval("r", "a1", "approve", "telegram:user:1")
    assert decided["decision"] == "approved"
    await asyncio.sleep(IDLE_S / 2)
    more = {"kind": "text", "run": "r", "seq": 3, "text": "Deployed."}
    end = {"kind": "end", "run": "r", "seq": 4, "status": "ok"}
    results = await relay.submit_lines([(more, None), (end, None)])
    assert all(not isinstance(r, Exception) for r in results), results
    report = await _done(relay, 5)
    assert report is not None and str(report.status) == "delivered" and not report.errors, report


async def test_an_agent_gone_after_its_approval_expired_is_closed_an_idle_timeout_later() -> None:
    relay = _relay()
    await relay.submit_lines([(line, None) for line in _ask(ttl_s=1.0)])
    assert await _done(relay, 0.7) is None  # past the idle timeout, inside the approval's ttl
    report = await _done(relay, 1.0 + 4 * IDLE_S + 2)
    assert report is not None, "the run stayed open after its approval expired and its agent sent nothing"
    assert any(IDLE_CLOSED in e for e in report.errors), report
