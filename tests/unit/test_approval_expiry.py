"""An approval's ``ttl_s`` is fixed once, when the sidecar first takes the line (docs/approvals.md): the instant is
journaled in the same append as the line (an ``approval.expiry`` line only the sidecar writes), so the journal
replayed into a fresh Relay (what a restart after kill -9, or the replica taking the run over, does) expires the
approval at that instant, not ``ttl_s`` after the restart; a request sent again does not arm it again; an approval
an AI SDK stream asked (the default ``ttl_s``) the same.

The restart "after part of the ttl" is made by moving the clock the approvals read (``time.time`` of admission and
of the decision) ahead, as if the sidecar had been down that long: a real 60 s or 10-minute wait is not a test."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import pytest

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import IngestError
from streamrelay.core.ingest import admission as admission_module
from streamrelay.core.normalize.base import DEFAULT_APPROVAL_TTL_S
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.journal import MemoryJournal
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run import approvals as approvals_module
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import MemoryChat

pytestmark = pytest.mark.timeout(60)

ASK = {
    "kind": "approval.request",
    "run": "r",
    "seq": 1,
    "id": "a1",
    "question": "Deploy?",
    "approvers": ["telegram:user:1"],
    "ttl_s": 60.0,
    "on_expiry": "approved",
}


class _Clock:
    """``time.time`` moved ``ahead`` seconds (the time a restart took)."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def time(self) -> float:
        return time.time() + self.ahead


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    moved = _Clock()
    fake = SimpleNamespace(time=moved.time, monotonic=time.monotonic, perf_counter=time.perf_counter)
    monkeypatch.setattr(admission_module, "time", fake)
    monkeypatch.setattr(approvals_module, "time", fake)
    return moved


def _relay(journal: MemoryJournal, ledger: MemoryLedger) -> Relay:
    channels = {"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), MemoryChat())}
    return Relay(channels, ledger, MonotonicClock(), journal=journal)


async def _expired_units(relay: Relay, run: str) -> list[dict[str, Any]]:
    """The run's ``approval`` units, once one is on its pipeline lane (waits at most 20 s: a ttl counted again from
    the restart would take 60 s or 10 minutes, and the test fails here)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        units = [u.model_dump(mode="json") for u in relay.pipeline(run) or []]
        if any(u["kind"] == "approval" for u in units):
            return [u for u in units if u["kind"] == "approval"]
        await _sleep()
    raise AssertionError("the approval did not expire at its journaled instant")


async def _sleep() -> None:
    import asyncio

    await asyncio.sleep(0.05)


async def test_a_restart_late_in_the_ttl_expires_at_the_original_instant(clock: _Clock) -> None:
    journal, ledger = MemoryJournal(), MemoryLedger()
    first = _relay(journal, ledger)
    start = {"kind": "run.start", "run": "r", "seq": 0, "channel": "c", "target": {"chat_id": 5}}
    results = await first.submit_lines([(start, None), (dict(ASK), None)])
    assert all(not isinstance(r, Exception) for r in results), results
    asked_until = first.approval("r", "a1")["expires_at"]
    lines = [json.loads(line) for line in await journal.lines("r")]
    assert [line["kind"] for line in lines] == ["run.start", "approval.request", "approval.expiry"]
    assert (lines[2]["id"], lines[2]["expires_at"]) == ("a1", asked_until)  # the instant, in the same append
    await first.close()  # (kill -9: nothing more of it runs)

    clock.ahead = 59.8  # the sidecar comes back 59.8 s into the 60 s ttl
    restarted = _relay(journal, ledger)
    assert await restarted.resume() == ["r"]
    assert restarted.approval("r", "a1")["expires_at"] == asked_until  # not 60 s after the restart
    again = await restarted.submit_lines([({k: v for k, v in ASK.items() if k != "seq"}, None)])
    assert isinstance(again[0], IngestError) and again[0].status == 409 and "already asked" in str(again[0])
    repeat = await restarted.submit_lines([(dict(ASK), None)])  # its seq: a repeat, dropped
    assert not isinstance(repeat[0], Exception) and repeat[0].dropped is not None
    assert restarted.approval("r", "a1")["expires_at"] == asked_until  # never armed again
    units = await _expired_units(restarted, "r")
    assert [(u["decision"], u["approved"], u["by"]) for u in units] == [("expired", True, None)]
    assert units[0]["at"] >= asked_until - 0.001  # (a decision's at is rounded to the millisecond)
    kinds = [json.loads(line)["kind"] for line in await journal.lines("r")]
    assert kinds.count("approval.expiry") == 1 and kinds.count("approval.decision") == 1
    await restarted.close()


async def test_an_ai_sdk_approval_keeps_its_default_ttl_across_a_restart(clock: _Clock) -> None:
    journal, ledger = MemoryJournal(), MemoryLedger()
    policy = ChannelPolicy(name="c", throttle_s=0, approvers=("telegram:user:1",))
    channels = {"c": ChannelRuntime(policy, MemoryChat())}
    first = Relay(channels, ledger, MonotonicClock(), journal=journal)
    start = {"kind": "run.start", "run": "r", "channel": "c", "target": {"chat_id": 5}, "format": "ai-sdk-ui"}
    raws: list[dict[str, Any]] = [
        {"type": "start"},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "deleteFile", "input": {"path": "/a"}},
        {"type": "tool-approval-request", "approvalId": "aitxt-1", "toolCallId": "c1"},
    ]
    await first.submit_lines([(start, None)])
    results = await first.submit_lines([(raw, json.dumps(raw)) for raw in raws], "r")
    assert all(not isinstance(r, Exception) for r in results), results
    asked_until = first.approval("r", "aitxt-1")["expires_at"]
    lines = [json.loads(line) for line in await journal.lines("r")]
    last = lines[-1]
    assert (last["kind"], last["run"], last["id"], last["expires_at"]) == (
        "approval.expiry",
        "r",
        "aitxt-1",
        asked_until,
    )
    assert lines[-2] == raws[-1]  # the raw line journaled as it came, the instant beside it
    await first.close()

    clock.ahead = DEFAULT_APPROVAL_TTL_S - 0.2  # back 0.2 s before the 10 minutes run out
    restarted = Relay({"c": ChannelRuntime(policy, MemoryChat())}, ledger, MonotonicClock(), journal=journal)
    assert await restarted.resume() == ["r"]
    assert restarted.approval("r", "aitxt-1")["expires_at"] == asked_until
    units = await _expired_units(restarted, "r")
    assert [(u["decision"], u["approved"]) for u in units] == [("expired", False)]
    await restarted.close()


async def test_an_agents_expiry_line_is_refused_saying_where_it_comes_from() -> None:
    relay = _relay(MemoryJournal(), MemoryLedger())
    start = {"kind": "run.start", "run": "r", "channel": "c", "target": {"chat_id": 5}}
    await relay.submit_lines([(start, None), (dict(ASK), None)])
    forged = {"kind": "approval.expiry", "run": "r", "id": "a1", "expires_at": time.time() + 10**6}
    result = (await relay.submit_lines([(forged, None)]))[0]
    assert isinstance(result, IngestError) and result.status == 400 and "comes from the sidecar" in str(result)
    assert relay.approval("r", "a1")["expires_at"] < time.time() + 61
    await relay.close()
