"""A restarted sidecar's Slack budget begins from its ledger (core/budgets/history.py), against the mock Slack with
Slack's documented limits on (chat.update: Tier 3, 50 per 60 s per workspace,
https://docs.slack.dev/reference/methods/chat.update) and the shipped budget (42 a minute, a burst of 7).

The calls are real: slack-sdk over HTTP to the mock, each message part's call through the executor, its intent and
outcome in a real SQLite ledger file; a restart closes that file and opens it again in new runtime objects. The
sidecar and the mock share one fake clock (and the ledger's wall clock follows it), so what is asserted is counts
and order on that clock, never real time:

- the window half used (25 chat.update in the last 26 s) before the restart: the restarted sidecar resumes at the
  budget's pace, no window of 60 s holds more than 50, and the mock answers no 429 (without the seed the same restart
  spends a fresh burst and meets one);
- a ledger that is empty, or whose calls are older than the window: the full burst at once.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import SecretStr

from streamrelay.adapters.slack.platform import chat
from streamrelay.adapters.sqlite import SqliteLedger, SqliteStore
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.budgets.fair import Requester
from streamrelay.core.budgets.history import CallHistory
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import FakeClock
from streamrelay.core.delivery.calls import CallResult, Done, Edit, SendText
from streamrelay.core.delivery.executor import Executor, Intent
from streamrelay.core.events import Target
from streamrelay.core.ports import CallKind, TextFormat
from streamrelay.core.records.ledger import PartRecord, RunRecord
from streamrelay.core.records.report import SlotRole
from streamrelay.mocks.slack import MockSlack

pytestmark = pytest.mark.timeout(120)

TARGET = Target(chat_id=chat(1))
WALL_AT_ZERO = 1_800_000_000.0
"""The ledger's wall clock when the fake clock reads 0 (both move together)."""


@dataclass
class Sidecar:
    """One process's worth of the sidecar: the ledger file opened, the Slack channel built, one conversation."""

    store: SqliteStore
    ledger: SqliteLedger
    runtime: ChannelRuntime
    executor: Executor

    async def send(self, text: str) -> str:
        result = await self.executor.perform(
            SendText(TARGET, text, TextFormat.PLAIN), intent=Intent(0, SlotRole.ANSWER, "send", text), apply=_ack
        )
        assert isinstance(result, Done), result
        return str(result.value)

    async def edit(self, message_id: str, text: str) -> CallResult:
        return await self.executor.perform(
            Edit(TARGET, message_id, text, TextFormat.PLAIN),
            intent=Intent(0, SlotRole.ANSWER, "edit", text),
            apply=_ack,
        )


def _ack(result: CallResult) -> tuple[PartRecord, str, str]:
    return PartRecord("run-1", 0, SlotRole.ANSWER), "ack" if isinstance(result, Done) else "failed", ""


@asynccontextmanager
async def sidecar(path: Path, api: str, clock: FakeClock, *, seeded: bool) -> AsyncIterator[Sidecar]:
    """A sidecar process on the ledger file ``path``: its budgets seeded from the file's recent calls when
    ``seeded`` (as ``serve`` does), else full (as before)."""
    store = await SqliteStore.open(path)
    settings = ChannelSettings.model_validate({"platform": "slack", "api_base": api})
    runtime = make_runtime("slack", settings, SecretStr(DRY_RUN["slack"].token))
    try:
        ledger = await SqliteLedger.on(store)
        if seeded:
            runtime.history = await CallHistory.read(ledger, clock.now())
        await ledger.start_run(RunRecord("run-1", "slack", {"chat_id": TARGET.chat_id}, "preview"))
        executor = Executor(
            adapter=runtime.adapter,
            chain=runtime.chain_for(TARGET, clock),
            ledger=ledger,
            run="run-1",
            requester=Requester.of("run-1"),
        )
        yield Sidecar(store, ledger, runtime, executor)
    finally:
        await runtime.adapter.close()
        await store.close()


@pytest.fixture
async def mock_slack(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[MockSlack, str, FakeClock]]:
    clock = FakeClock(1000.0)
    wall = types.SimpleNamespace(time=lambda: WALL_AT_ZERO + clock.now())
    monkeypatch.setattr("streamrelay.adapters.sqlite.ledger.time", wall)
    monkeypatch.setattr("streamrelay.core.budgets.history.time", wall)
    mock = MockSlack(rate_limits=True, clock=clock.now)
    api = await mock.start()
    try:
        yield mock, api, clock
    finally:
        await mock.stop()


def updates(mock: MockSlack) -> list[float]:
    """When the mock stored each chat.update (its clock)."""
    return [c.t for c in mock.calls if c.method == "chat.update" and c.status == 200]


def refused(mock: MockSlack) -> int:
    return sum(1 for c in mock.calls if c.status == 429)


def most_in_a_window(times: list[float], window_s: float = 60.0) -> int:
    return max((sum(1 for u in times if t <= u < t + window_s) for t in times), default=0)


async def half_a_window_then_restart(tmp_path: Path, api: str, clock: FakeClock, mock: MockSlack) -> float:
    """Process one posts a message and edits it 25 times at the budget's pace (half of Slack's 50 per 60 s), then
    stops right after its last edit; returns the fake clock's time of the restart."""
    async with sidecar(tmp_path / "ledger.sqlite", api, clock, seeded=True) as first:
        mid = await first.send("answer 0")
        for i in range(25):
            assert isinstance(await first.edit(mid, f"answer {i + 1}"), Done)
    assert len(updates(mock)) == 25 and refused(mock) == 0
    return clock.now()


async def test_a_restart_with_the_window_half_used_resumes_at_the_pace_and_meets_no_429(
    tmp_path: Path, mock_slack: tuple[MockSlack, str, FakeClock]
) -> None:
    mock, api, clock = mock_slack
    restart = await half_a_window_then_restart(tmp_path, api, clock, mock)
    async with sidecar(tmp_path / "ledger.sqlite", api, clock, seeded=True) as second:
        mid = str(mock.visible(TARGET.chat_id)[0][0])
        for i in range(40):
            assert isinstance(await second.edit(mid, f"answer again {i}"), Done)
    after = [t for t in updates(mock) if t > restart]
    assert len(after) == 40 and refused(mock) == 0
    # The burst was spent before the restart: the first edit waits for a token, then one every 60/42 s.
    assert after[0] > restart + 1.0
    gaps = [b - a for a, b in itertools.pairwise(after)]
    assert min(gaps) == pytest.approx(60 / 42, rel=0.01)
    assert most_in_a_window(updates(mock)) <= 50


async def test_without_the_seed_the_same_restart_spends_a_second_burst_and_meets_a_429(
    tmp_path: Path, mock_slack: tuple[MockSlack, str, FakeClock]
) -> None:
    # What the seed prevents (the budget as it was: full at every start).
    mock, api, clock = mock_slack
    restart = await half_a_window_then_restart(tmp_path, api, clock, mock)
    async with sidecar(tmp_path / "ledger.sqlite", api, clock, seeded=False) as second:
        mid = str(mock.visible(TARGET.chat_id)[0][0])
        for i in range(40):
            await second.edit(mid, f"answer again {i}")
    assert sum(1 for t in updates(mock) if t == restart) == 1 + 7  # the first process's last edit, a second burst
    assert refused(mock) >= 1


@pytest.mark.parametrize("ledger_age_s", [None, 61.0])
async def test_an_empty_or_old_ledger_gives_the_full_burst(
    tmp_path: Path, mock_slack: tuple[MockSlack, str, FakeClock], ledger_age_s: float | None
) -> None:
    mock, api, clock = mock_slack
    if ledger_age_s is not None:  # a full window spent, then the sidecar was down longer than the window
        await half_a_window_then_restart(tmp_path, api, clock, mock)
        clock.advance(ledger_age_s)
    restart = clock.now()
    async with sidecar(tmp_path / "ledger.sqlite", api, clock, seeded=True) as process:
        assert process.runtime.history is not None and len(process.runtime.history) == 0
        mid = await process.send("fresh answer")
        for i in range(10):
            assert isinstance(await process.edit(mid, f"fresh answer {i}"), Done)
    after = [t for t in updates(mock) if t >= restart]
    assert len(after) == 10 and refused(mock) == 0
    assert sum(1 for t in after if t == after[0]) == 7  # the whole burst at once, then the pace


async def test_the_ledger_lists_the_calls_of_the_last_minute_across_runs_a_page_at_a_time(
    tmp_path: Path, mock_slack: tuple[MockSlack, str, FakeClock]
) -> None:
    _, _, clock = mock_slack
    ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite")
    try:
        await ledger.start_run(RunRecord("old", "slack", {"chat_id": "C1"}, "preview"))
        await ledger.start_run(RunRecord("new", "telegram", {"chat_id": 42}, "block"))
        part = PartRecord("old", 0, SlotRole.ANSWER)
        for _ in range(30):  # two minutes ago
            await ledger.record_outcome(await ledger.record_intent("old", 0, SlotRole.ANSWER, "edit", "x"), part, "ack")
        clock.advance(120.0)
        for i in range(2_500):  # more than one page
            call = await ledger.record_intent("new", 1, SlotRole.ANSWER, "send" if i % 2 else "edit", "y")
            await ledger.record_outcome(call, PartRecord("new", 1, SlotRole.ANSWER), "ack")
        await ledger.record_intent("old", 0, SlotRole.ANSWER, "delete", "x")  # in flight when the process died
        found = await ledger.recent_calls(WALL_AT_ZERO + clock.now() - 60.0)
    finally:
        await ledger.close()
    assert len(found) == 2_501
    assert {(c.channel, c.chat) for c in found[:-1]} == {("telegram", "42")}
    assert [c.kind for c in found[:4]] == [CallKind.EDIT, CallKind.SEND, CallKind.EDIT, CallKind.SEND]
    last = found[-1]
    assert (last.channel, last.chat, last.kind, last.outcome_s) == ("slack", "C1", CallKind.DELETE, None)
