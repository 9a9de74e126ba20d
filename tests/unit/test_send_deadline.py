"""A send's timeout measures the platform, not our own loop (issue 13): a call that never left is not uncertain, a
call answered while our loop stalled is not a timeout, a platform that does not answer still times out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from streamrelay.adapters.deadline import SendDeadline
from streamrelay.adapters.slack import SlackAdapter
from streamrelay.adapters.telegram.adapter import TelegramAdapter
from streamrelay.core.errors import DeliveryError, UncertainDeliveryError
from streamrelay.core.events import Target
from streamrelay.core.ingest.pressure import LoopLag
from streamrelay.core.ports import TextFormat
from streamrelay.mocks.slack import MockSlack
from streamrelay.mocks.telegram import MockTelegram

TOKEN = "123456:DEADLINE-test-token"
SLACK_TOKEN = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"


@pytest.fixture
async def mock() -> AsyncIterator[MockTelegram]:
    server = MockTelegram()
    await server.start()
    yield server
    await server.stop()


def stall_once_written(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Stall the loop for ``seconds`` (another run's CPU) right after the next call's request is written, while the
    call is out: the platform's answer cannot be read before the stall ends, and the call's deadline is due by then
    (``seconds`` is past its timeout). Set off by the write itself, not by a timer racing it."""
    mark_written = SendDeadline.mark_written
    stalled = False

    def written(deadline: SendDeadline) -> None:
        nonlocal stalled
        mark_written(deadline)
        if not stalled:
            stalled = True
            asyncio.get_running_loop().call_soon(time.sleep, seconds)

    monkeypatch.setattr(SendDeadline, "mark_written", written)


async def test_a_call_that_was_never_written_times_out_as_not_written() -> None:
    deadline = SendDeadline(0.05)
    with pytest.raises(TimeoutError):
        async with deadline:
            await asyncio.sleep(1.0)  # waiting for a connection slot, say
    assert not deadline.written


async def test_the_platforms_time_counts_from_the_write_and_leaves_out_the_loops_stalls() -> None:
    lag = LoopLag(interval_s=0.005)
    lag.start()
    await asyncio.sleep(0.02)  # the probe is running
    try:
        deadline = SendDeadline(0.2, queue_s=0.2)
        async with deadline:
            deadline.mark_written()
            time.sleep(0.5)  # the loop stalls (another run's CPU): not the platform's time
            await asyncio.sleep(0.05)
        assert deadline.written and deadline.stalled_s >= 0.4
        with pytest.raises(TimeoutError):
            async with SendDeadline(0.1) as slow:
                slow.mark_written()
                await asyncio.sleep(0.5)  # the platform holds its answer
    finally:
        await lag.stop()


async def test_a_telegram_send_answered_during_a_stall_is_delivered_not_uncertain(
    mock: MockTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = TelegramAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=0.2)
    lag = LoopLag(interval_s=0.005)
    lag.start()
    await asyncio.sleep(0.02)  # the probe is running
    try:
        mock.set_latency("sendMessage", [50, 1000])  # the second call: the platform itself is slow
        stall_once_written(monkeypatch, 0.6)  # a stall of our own while the call is out
        message_id = await adapter.send_text(Target(chat_id=7), "hello", TextFormat.PLAIN)
        assert [text for _, text in mock.visible(7)] == ["hello"]
        assert message_id
        with pytest.raises(UncertainDeliveryError):
            await adapter.send_text(Target(chat_id=7), "slow", TextFormat.PLAIN)
    finally:
        await lag.stop()
        await adapter.close()


async def test_without_the_rule_the_same_stall_would_fail_the_send(
    mock: MockTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: with no probe the stall cannot be told from the platform's time, and the send fails."""
    adapter = TelegramAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=0.2)
    try:
        mock.set_latency("sendMessage", [50])
        stall_once_written(monkeypatch, 0.6)
        with pytest.raises(DeliveryError):
            await adapter.send_text(Target(chat_id=7), "hello", TextFormat.PLAIN)
    finally:
        await adapter.close()


async def test_a_slack_post_answered_during_a_stall_is_delivered_not_uncertain() -> None:
    async with MockSlack() as slack:
        adapter = SlackAdapter(SLACK_TOKEN, base_url=slack.base_url, send_timeout_s=0.2)
        lag = LoopLag(interval_s=0.005)
        lag.start()
        await asyncio.sleep(0.02)
        try:
            slack.set_latency("chat.postMessage", [50, 1000])
            asyncio.get_running_loop().call_later(0.02, time.sleep, 0.6)
            assert await adapter.send_text(Target(chat_id="C0DEADLINE1"), "hello", TextFormat.PLAIN)
            with pytest.raises(UncertainDeliveryError):
                await adapter.send_text(Target(chat_id="C0DEADLINE1"), "slow", TextFormat.PLAIN)
        finally:
            await lag.stop()
            await adapter.close()
