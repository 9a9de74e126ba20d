"""``subagents = "thread"`` through the real service, SDKs and mocks: each sub-agent has its own status message,
and its preview is shown in a thread under it (Slack thread, Telegram reply chain, Discord thread), never in
the root's conversation; the root's answer stays where it is.
"""

from __future__ import annotations

from typing import Any, cast

import pytest
from pydantic import SecretStr

from streamrelay.app.client import RelayClient
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import Source
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.live import ResetLive
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.common import MockPlatform
from streamrelay.mocks.discord import MockDiscord
from streamrelay.mocks.matrix import MockMatrix
from streamrelay.mocks.slack import MockSlack
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import INGEST_TOKEN

pytestmark = pytest.mark.timeout(60)

RESEARCHER = Source(agent_id="researcher", session_id="s-r", depth=1, path="s/researcher")
WRITER = Source(agent_id="writer", session_id="s-w", depth=1, path="s/writer")


def child(source: Source, *texts: str) -> list[dict[str, Any]]:
    src = source.model_dump()
    texts_ = [{"kind": "text", "text": t, "source": src} for t in texts]
    return [*texts_, {"kind": "end", "status": "ok", "source": src}]


def threads_of(mock: MockPlatform, chat: int | str, anchor: int | str) -> list[list[str]]:
    """The texts a person sees in each side conversation under message ``anchor`` of ``chat``."""
    if isinstance(mock, MockTelegram):
        replies = [m for m in mock.messages(chat) if m.reply_to == anchor]
        return [[m.text] for m in replies]
    if isinstance(mock, MockSlack):
        return [[m.text for m in mock.messages(chat) if m.thread_ts == anchor and m.ts != anchor]]
    if isinstance(mock, MockMatrix):  # the events relating to the anchor with m.thread
        related = [(e, c) for e, c in mock.messages(chat) if e.relation.get("rel_type") == "m.thread"]
        return [[str(c.get("body")) for e, c in related if e.relation.get("event_id") == anchor]]
    assert isinstance(mock, MockDiscord)
    return [[text for _, text in mock.visible(t.id)] for t in mock.threads(chat) if str(t.id) == str(anchor)]


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord", "matrix"])
async def test_each_sub_agent_previews_in_its_own_thread(platform: str) -> None:
    dry = DRY_RUN[platform]
    mock = dry.make_mock(True)
    api = await mock.start()
    settings = ChannelSettings.model_validate(
        {"platform": platform, "api_base": api, "subagents": "thread", "throttle_ms": 100}
    )
    relay = Relay({"c": make_runtime("c", settings, SecretStr(dry.token))}, MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    chat = dry.private
    try:
        async with RelayClient(sidecar.url, INGEST_TOKEN) as client:
            await client.start("t1", channel="c", chat_id=chat)
            await client.send("t1", [{"kind": "text", "text": "Let me ask two helpers. "}])
            await client.send("t1", child(RESEARCHER, "Found ", "three sources."))
            await client.send("t1", child(WRITER, "Draft: ", "refunds take 14 days."))
            answer = {"kind": "text", "text": "Refunds take 14 days."}
            await client.send("t1", [answer, {"kind": "end", "status": "ok"}])
            report = await client.report("t1", wait_s=30)
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()

    assert report.status == "delivered", report
    top = [(mid, text) for mid, text in mock.visible(chat) if not _in_thread(mock, chat, mid)]
    lines = {text: mid for mid, text in top if text.startswith("↳")}
    assert sorted(lines) == ["↳ researcher: done", "↳ writer: done"]
    assert [text for _, text in top if text not in lines] == ["Let me ask two helpers. Refunds take 14 days."]
    assert threads_of(mock, chat, lines["↳ researcher: done"]) == [["Found three sources."]]
    assert threads_of(mock, chat, lines["↳ writer: done"]) == [["Draft: refunds take 14 days."]]
    if isinstance(mock, MockDiscord):
        assert [t.name for t in mock.threads(chat)] == ["researcher", "writer"]
    monitor = relay.monitor("t1")  # watchers see each thread's messages as rows of their own
    assert monitor is not None
    [reset] = await monitor.wait(-1)  # the run is finished: a watcher from elsewhere gets its state
    assert isinstance(reset, ResetLive)
    parts = cast(dict[str, Any], reset.state["parts"])
    assert {"c ↳ researcher/0", "c ↳ writer/0"} <= set(parts)


def _in_thread(mock: MockPlatform, chat: int | str, mid: int | str) -> bool:
    if isinstance(mock, MockTelegram):
        return any(m.message_id == mid and m.reply_to is not None for m in mock.messages(chat))
    if isinstance(mock, MockSlack):
        return any(m.ts == mid and m.thread_ts not in (None, m.ts) for m in mock.messages(chat))
    if isinstance(mock, MockMatrix):
        return any(e.event_id == mid and e.relation.get("rel_type") == "m.thread" for e, _ in mock.messages(chat))
    return False
