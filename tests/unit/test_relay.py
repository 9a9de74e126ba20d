"""The relay: group rate budgets, idle runs closed, bad lines failing alone."""

from __future__ import annotations

import asyncio

import pytest

from core.clock import FakeClock, MonotonicClock
from core.errors import IngestError
from core.events import Target
from core.ledger import MemoryLedger
from core.policy import ChannelPolicy
from core.ports import TextFormat
from core.relay import ChannelRuntime, RateSpec, Relay
from core.units import LengthUnit


class _Chat:
    """A minimal in-memory channel adapter: negative chat ids are groups."""

    platform = "fake"
    max_units = 4096
    unit = LengthUnit.CHARS

    def __init__(self) -> None:
        self.messages: dict[str, str] = {}

    def check_target(self, target: Target) -> str | None:
        return None

    def is_group(self, target: Target) -> bool:
        return isinstance(target.chat_id, int) and target.chat_id < 0

    async def send_text(self, target: Target, text: str, fmt: TextFormat) -> str:
        mid = str(len(self.messages) + 1)
        self.messages[mid] = text.strip()
        return mid

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> None:
        self.messages[message_id] = text.strip()

    async def delete_message(self, target: Target, message_id: str) -> None:
        self.messages.pop(message_id, None)

    async def send_typing(self, target: Target) -> None:
        return None

    async def close(self) -> None:
        return None


async def test_group_conversations_are_paced_to_the_per_minute_budget() -> None:
    clock = FakeClock()
    runtime = ChannelRuntime(
        ChannelPolicy(name="c"), _Chat(), RateSpec(per_chat_per_s=1, per_chat_burst=2, per_group_per_min=20)
    )
    group = runtime.chain_for(Target(chat_id=-100), clock)
    private = runtime.chain_for(Target(chat_id=100), clock)
    starts: list[float] = []

    async def call() -> None:
        starts.append(clock.now())

    for _ in range(3):
        await group.call(call)
    assert [round(b - a, 3) for a, b in zip(starts, starts[1:], strict=False)] == [3.0, 3.0]
    starts.clear()
    for _ in range(3):
        await private.call(call)
    assert starts[1] - starts[0] == 0  # burst of 2 in a private chat
    assert starts[2] - starts[1] == pytest.approx(1.0)


async def test_a_run_that_goes_quiet_is_closed_as_failed() -> None:
    chat = _Chat()
    relay = Relay(
        {"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), chat)},
        MemoryLedger(),
        MonotonicClock(),
        run_idle_timeout_s=0.2,
    )
    await relay.submit_line({"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}, "r")
    await relay.submit_line({"kind": "text", "text": "half an answer"}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert report is not None and report.done
    assert report.end_status == "error"
    assert any("sent nothing" in e for e in report.errors)
    assert any("went wrong" in t for t in chat.messages.values())


async def test_a_bad_line_fails_alone() -> None:
    chat = _Chat()
    relay = Relay({"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), chat)}, MemoryLedger(), MonotonicClock())
    await relay.submit_line({"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}, "r")
    with pytest.raises(IngestError, match="unknown event kind"):
        await relay.submit_line({"kind": "nope"}, "r")
    with pytest.raises(IngestError, match="posted to run 'r'"):
        await relay.submit_line({"kind": "text", "text": "x", "run": "other"}, "r")
    await relay.submit_line({"kind": "text", "text": "fine"}, "r")
    await relay.submit_line({"kind": "end"}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert report is not None and report.status == "delivered"
    assert list(chat.messages.values()) == ["fine"]
    with pytest.raises(IngestError, match="already ended"):
        await relay.submit_line({"kind": "text", "text": "late"}, "r")
    await asyncio.sleep(0)
