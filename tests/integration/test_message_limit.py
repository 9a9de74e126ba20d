"""The message limit over real HTTP (issue 12): one accepted 1 MB text line once became 245 Telegram messages.

The sidecar (uvicorn) takes the line; MockTelegram records every call: at most ``max_messages`` sendMessage calls,
the last message ends with the notice, and the report says ``partial`` naming the limit and its setting. A
sub-agent's thread (MockSlack) is limited on its own; its cut is on the run's report.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.app.client import RelayClient
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.delivery.cap import MessageLimit
from streamrelay.core.events import Source
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.common import utf16_len
from streamrelay.mocks.slack import MockSlack
from tests.integration.conftest import INGEST_TOKEN, start_stack, stop_stack

pytestmark = pytest.mark.timeout(120)

MAX_MESSAGES = 4
SETTING = "clients.default.max_messages_per_run"
LINE_CHARS = 999_000
"""A text line of about 1 MB, just under a client's default ``max_chars_per_run`` (1,000,000)."""


def ndjson(*lines: dict[str, Any]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def prose(n_chars: int) -> str:
    """Sentences of plain prose, ``n_chars`` characters."""
    sentence = "The quick brown fox jumps over the lazy dog while the answer goes on and on. "
    return (sentence * (n_chars // len(sentence) + 1))[:n_chars]


@pytest.mark.parametrize("mode", ["preview", "block", "final"])
async def test_a_1_mb_text_line_becomes_at_most_max_messages_and_the_report_says_partial(mode: str) -> None:
    mock, relay, sidecar = await start_stack(
        MemoryLedger(), max_body_bytes=4 * 1024 * 1024, max_line_bytes=2 * 1024 * 1024
    )
    runtime = relay.channels["telegram"]
    runtime.policy = replace(runtime.policy, max_messages=MAX_MESSAGES, max_messages_setting=SETTING)
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=60) as client:
            body = ndjson(
                {"kind": "run.start", "run": "big", "channel": "telegram", "target": {"chat_id": 5}, "mode": mode},
                {"kind": "text", "mode": "delta", "text": prose(LINE_CHARS)},
                {"kind": "end", "status": "ok"},
            )
            assert len(body) > 999_000
            answer = await client.post("/v1/runs/big/events", content=body)
            assert answer.status_code == 200, answer.text
            report = (await client.get("/v1/runs/big", params={"wait_s": 90})).json()
    finally:
        await stop_stack(mock, relay, sidecar)

    assert report["done"] and report["status"] == "partial", report
    cut = [e for e in report["errors"] if e.startswith("cut at the message limit") and SETTING in e]
    assert cut, report["errors"]
    limit = int(re.findall(r"= (\d+)\)", cut[0])[0])  # the limit the run met (the service may set its own)
    assert limit <= 50
    sends = [c for c in mock.calls if c.method == "sendMessage"]
    assert len(sends) == limit, [c.method for c in mock.calls]
    shown = [text for _, text in mock.visible(5)]
    assert len(shown) == limit and report["message_ids"] == [str(mid) for mid, _ in mock.visible(5)]
    assert all(utf16_len(text) <= 4096 for text in shown)
    assert shown[-1].endswith(MessageLimit(limit, SETTING).notice)
    assert shown[0].startswith("The quick brown fox")


async def test_a_sub_agent_thread_has_its_own_limit_and_its_cut_is_on_the_report() -> None:
    researcher = Source(agent_id="researcher", session_id="s-r", depth=1, path="s/researcher").model_dump()
    dry = DRY_RUN["slack"]
    mock = dry.make_mock(True)
    assert isinstance(mock, MockSlack)
    settings = ChannelSettings.model_validate(
        {"platform": "slack", "api_base": await mock.start(), "subagents": "thread", "throttle_ms": 0}
    )
    runtime = make_runtime("c", settings, SecretStr(dry.token))
    runtime.policy = replace(runtime.policy, max_messages=2, max_messages_setting=SETTING)
    relay = Relay({"c": runtime}, MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN, max_body_bytes=4 * 1024 * 1024, max_line_bytes=2 * 1024 * 1024)
    await sidecar.start()
    chat = dry.private
    long_text = prose(5 * runtime.policy.max_units)
    try:
        async with RelayClient(sidecar.url, INGEST_TOKEN) as client:
            await client.start("t1", channel="c", chat_id=chat)
            await client.send("t1", [{"kind": "text", "text": "Let me ask a helper."}])
            await client.send("t1", [{"kind": "text", "text": long_text, "source": researcher}])
            await client.send("t1", [{"kind": "end", "status": "ok", "source": researcher}])
            await client.send("t1", [{"kind": "end", "status": "ok"}])
            report = await client.report("t1", wait_s=60)
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()

    assert report.done and report.status == "partial", report
    assert any(e.startswith("cut at the message limit: researcher's thread") for e in report.errors)
    top = [m for m in mock.messages(chat) if m.thread_ts is None or m.thread_ts == m.ts]
    assert len(top) <= 2  # the root: its answer and the child's status line
    anchor = next(m.ts for m in top if m.text.startswith("↳"))
    thread = [m.text for m in mock.messages(chat) if m.thread_ts == anchor and m.ts != anchor]
    assert len(thread) == 2 and thread[-1].endswith(MessageLimit(2, SETTING).notice)
