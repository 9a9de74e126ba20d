"""Fairness through the real relay, aiogram and the mock Bot API with Telegram's documented limits on: a client with
hundreds of runs queued on the bot's budget cannot push another client's answer behind its whole queue (issue 12,
item 3), and nobody meets a 429.

The bot's budget is lowered to 10 calls a second so the queue lasts: 300 runs of the noisy client need about 30 s
of it; the victim's answer must come within its share (half the budget), long before the noisy queue drains. Only
orders and counts are asserted, never times.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import SecretStr

from streamrelay.app.service import make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.ingest.clients import ClientLimits, run_key
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import BOT_TOKEN

pytestmark = pytest.mark.timeout(120)

NOISY_RUNS = 300
NOISY_CHAT = 50_000
VICTIM_CHAT = 40_000


class Agent:
    """Streams runs into the relay as an agent runtime would: a start, deltas, an end (``seq`` counted per run)."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.seq: dict[str, int] = {}
        self.text: dict[str, str] = {}

    async def start(self, key: str, chat: int, first: str) -> None:
        await self._line(key, {"kind": "run.start", "channel": "telegram", "target": {"chat_id": chat}})
        await self.delta(key, first)

    async def delta(self, key: str, text: str) -> None:
        self.text[key] = self.text.get(key, "") + text
        await self._line(key, {"kind": "text", "mode": "delta", "text": text})

    async def end(self, key: str) -> None:
        await self._line(key, {"kind": "end", "status": "ok"})

    async def _line(self, key: str, line: dict[str, Any]) -> None:
        seq = self.seq.get(key, 0)
        self.seq[key] = seq + 1
        await self.relay.submit_line({**line, "run": key, "seq": seq})


def noisy(i: int) -> str:
    return run_key("noisy", f"r-{i}")


def noisy_finals(mock: MockTelegram, agent: Agent) -> int:
    """How many noisy chats show their run's final answer."""
    return sum(
        [text for _, text in mock.visible(NOISY_CHAT + i)] == [agent.text[noisy(i)].strip()] for i in range(NOISY_RUNS)
    )


async def test_a_victims_answer_is_not_queued_behind_a_noisy_clients_hundreds_of_runs() -> None:
    mock = MockTelegram(rate_limits=True)
    api = await mock.start()
    relay: Relay | None = None
    try:
        relay = _relay(api)
        await _noisy_and_victim(relay, mock)
    finally:
        if relay is not None:
            await relay.close()
        await mock.stop()


def _relay(api: str) -> Relay:
    settings = ChannelSettings.model_validate(
        {
            "platform": "telegram",
            "api_base": api,
            "throttle_ms": 0,
            "typing": False,
            "rate": {"per_bot": {"per_s": 10.0, "burst": 2}},
        }
    )
    runtime = make_runtime("telegram", settings, SecretStr(BOT_TOKEN))
    clients = {"noisy": ClientLimits(name="noisy", max_active_runs=1000), "victim": ClientLimits(name="victim")}
    return Relay({"telegram": runtime}, MemoryLedger(), MonotonicClock(), clients=clients)


async def _noisy_and_victim(relay: Relay, mock: MockTelegram) -> None:
    agent = Agent(relay)
    for i in range(NOISY_RUNS):
        await agent.start(noisy(i), NOISY_CHAT + i, f"Noisy answer {i}.")
    streaming = True

    async def noisy_stream() -> None:  # every noisy run keeps growing: hundreds of previews want the budget
        k = 0
        while streaming:
            await agent.delta(noisy(k % NOISY_RUNS), f" more {k}.")
            k += 1
            if k % 30 == 0:
                await asyncio.sleep(0.05)

    feeder = asyncio.ensure_future(noisy_stream())
    victim = run_key("victim", "question-1")
    await agent.start(victim, VICTIM_CHAT, "Your refund")
    for part in (" of 49.99 EUR", " was approved", " today."):
        await asyncio.sleep(0.3)
        await agent.delta(victim, part)
    streaming = False
    await feeder
    for i in range(NOISY_RUNS):  # 300 noisy finals queue up, then the victim's
        await agent.end(noisy(i))
    await agent.end(victim)
    report = await relay.wait_done(victim, timeout_s=100)
    noisy_before = noisy_finals(mock, agent)

    assert report is not None and report.status == "delivered", report
    assert [text for _, text in mock.visible(VICTIM_CHAT)] == ["Your refund of 49.99 EUR was approved today."]
    # Within its share (half the budget once both clients' finals wait), not behind the noisy queue: first come,
    # first served, the victim's final drew lots with 300 noisy finals and previews for every token.
    assert noisy_before < NOISY_RUNS // 2, f"{noisy_before} noisy answers went before the victim's"
    for i in range(NOISY_RUNS):
        done = await relay.wait_done(noisy(i), timeout_s=100)
        assert done is not None and done.status == "delivered", done
    assert noisy_finals(mock, agent) == NOISY_RUNS
    refused = [c for c in mock.calls if c.status == 429]
    assert refused == [], f"{len(refused)} x 429"
