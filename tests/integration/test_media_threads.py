"""A sub-agent's media with ``subagents = "thread"``, through the real service, SDKs and mocks: the image is a message
of its own in the child's thread (Slack thread, Telegram reply chain, Discord thread), between the child's texts,
once; the root's conversation shows only the root's answer and the status lines."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from streamrelay.app.client import RelayClient
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import INGEST_TOKEN
from tests.integration.test_threads import RESEARCHER, _in_thread, threads_of

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord"])
async def test_a_sub_agents_media_shows_in_its_thread_between_its_texts(platform: str) -> None:
    dry = DRY_RUN[platform]
    mock = dry.make_mock(True)
    api = await mock.start()
    settings = ChannelSettings.model_validate({"platform": platform, "api_base": api, "subagents": "thread"})
    relay = Relay({"c": make_runtime("c", settings, SecretStr(dry.token))}, MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    chat = dry.private
    src = RESEARCHER.model_dump()
    child: list[dict[str, Any]] = [
        {"kind": "text", "text": "Found the chart.", "source": src},
        {
            "kind": "media",
            "url": "https://example.com/c.png",
            "media_kind": "image",
            "caption": "The chart",
            "source": src,
        },
        {"kind": "text", "text": "It shows Q3.", "source": src},
        {"kind": "end", "status": "ok", "source": src},
    ]
    try:
        async with RelayClient(sidecar.url, INGEST_TOKEN) as client:
            await client.start("t1", channel="c", chat_id=chat)
            await client.send("t1", [{"kind": "text", "text": "Asking a helper. "}, *child])
            await client.send("t1", [{"kind": "text", "text": "Done."}, {"kind": "end", "status": "ok"}])
            report = await client.report("t1", wait_s=30)
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()

    assert report.status == "delivered", report
    top = [(mid, text) for mid, text in mock.visible(chat) if not _in_thread(mock, chat, mid)]
    [anchor] = [mid for mid, text in top if text == "↳ researcher: done"]
    assert [text for _, text in top if text != "↳ researcher: done"] == ["Asking a helper. Done."]
    shown = threads_of(mock, chat, anchor)
    if isinstance(mock, MockTelegram):  # a reply chain: each reply is listed on its own
        shown = [[text for [text] in shown]]
    assert shown == [["Found the chart.", "The chart", "It shows Q3."]]
