"""A sub-agent's media item is never dropped silently (issue 25, item 6): with ``subagents = "status"`` it is sent as
its own message in order with the root's text, counted in the report's ``media`` / ``media_parts``, and the child's
status line says so; with ``hidden`` nothing of a child is shown, as documented."""

from __future__ import annotations

import asyncio

import pytest

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import DeliveryMode
from streamrelay.core.policy import ChannelPolicy, SubagentPolicy
from streamrelay.core.records.journal import MemoryJournal
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import MemoryChat
from tests.unit.test_media_delivery import CHART, CHART_TEXT, MODES, START, _answer

CHILD = {"agent_id": "charter", "session_id": "s-charter", "depth": 1, "path": "root/charter"}


async def _run(mode: DeliveryMode, subagents: SubagentPolicy) -> tuple[MemoryChat, int, int, str]:
    chat = MemoryChat()
    policy = ChannelPolicy(name="c", throttle_s=0, delivery=mode, subagents=subagents)
    relay = Relay({"c": ChannelRuntime(policy, chat)}, MemoryLedger(), MonotonicClock(), journal=MemoryJournal())
    lines = [
        START,
        {"kind": "text", "text": "First."},
        {"kind": "text", "text": "drawing", "source": CHILD},
        {**CHART, "source": CHILD},
        {"kind": "text", "text": "Second."},
        {"kind": "end", "status": "ok", "source": CHILD},
        {"kind": "end"},
    ]
    for line in lines:
        await relay.submit_line(line, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert report is not None and report.status == "delivered", report
    return chat, report.media, report.media_parts, report.status


@pytest.mark.parametrize("mode", MODES)
async def test_a_childs_media_with_status_lines_is_its_own_message_and_counted(mode: DeliveryMode) -> None:
    chat, media, media_parts, _ = await _run(mode, SubagentPolicy.STATUS)
    answer = [text for text in _answer(chat) if "↳" not in text]
    assert answer == ["First.", CHART_TEXT, "Second."]
    assert (media, media_parts) == (1, 1)
    assert "drawing" not in "\n".join(chat.messages.values())  # the child's text stays apart


async def test_the_childs_status_line_says_it_sent_the_media() -> None:
    chat = MemoryChat()
    policy = ChannelPolicy(name="c", throttle_s=0, delivery=DeliveryMode.PREVIEW, subagents=SubagentPolicy.STATUS)
    relay = Relay({"c": ChannelRuntime(policy, chat)}, MemoryLedger(), MonotonicClock(), journal=MemoryJournal())
    for line in (START, {"kind": "text", "text": "First."}, {**CHART, "source": CHILD}):
        await relay.submit_line(line, "r")
    for _ in range(500):
        if any("↳ charter: sent an image" in text for text in chat.messages.values()):
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError(list(chat.messages.values()))
    await relay.submit_line({"kind": "end"}, "r")
    await relay.wait_done("r", 5)
    await relay.close()


async def test_a_hidden_childs_media_is_not_shown() -> None:
    chat, media, media_parts, _ = await _run(DeliveryMode.PREVIEW, SubagentPolicy.HIDDEN)
    assert not any("image" in text for text in chat.messages.values())
    assert (media, media_parts) == (0, 0)
