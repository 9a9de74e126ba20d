"""Every recorded provider stream through the real service into mock Telegram, Slack and Discord chats, each
through its real SDK (aiogram, slack-sdk, discord.py) with the platform's documented rate limits on: the chat
shows the recording's answer once and whole, every message fits, fences balance, and the mock never answers
429. (Telegram's Markdown rendering to text + entities is checked in test_recordings.py.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.app.demo import recorded_answer
from streamrelay.app.demo_check import expected_key, shown_key
from streamrelay.app.dry_run import DRY_RUN, seed_thread
from streamrelay.app.ingest_client import detect_format, recording_lines
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.text.chunk_checks import content_key, fences_balanced
from streamrelay.core.units import LengthUnit, text_units
from tests.integration.conftest import INGEST_TOKEN

STREAMS = sorted((Path(__file__).resolve().parents[1] / "streams").glob("*/*.jsonl"))
LONG = next(p for p in STREAMS if p.stem == "markdown-long-fences")
BLOCK = (
    "markdown-long-fences",
    "multi-message-tools",
    "web-search-annotations",
    "subagent-reasoning",  # AG-UI: a sub-agent's text never in the chat (subagents hidden by default)
    "reasoning-tool-text",  # AI SDK UI: reasoning and a fragmented tool input before the answer
    "task-artifact-subtask",  # A2A: an artifact streamed in chunks and a referenced sub-task
)
PLATFORMS = ("telegram", "slack", "discord", "matrix", "whatsapp", "teams")
CASES = [
    *(pytest.param(p, path, "preview", id=f"{p}-{path.stem}") for p in PLATFORMS for path in STREAMS),
    *(
        pytest.param(p, path, "block", id=f"{p}-{path.stem}-block")
        for p in PLATFORMS
        for path in STREAMS
        if path.stem in BLOCK
    ),
    pytest.param("slack", LONG, "native", id="slack-long-native"),
    pytest.param("telegram", LONG, "native", id="telegram-long-native"),
    pytest.param("teams", LONG, "native", id="teams-long-native"),
]


fmt_of = {
    "telegram": "plain",
    "slack": "markdown",
    "discord": "markdown",
    "matrix": "markdown",
    "whatsapp": "plain",
    "teams": "plain",  # Teams shows headings in bold and tables in a card (test_teams_contract.py): compared as sent
}


async def deliver(
    platform: str, path: Path, delivery: str, overrides: dict[str, Any] | None = None
) -> tuple[dict[str, Any], list[str], int, list[Any]]:
    """Stream the recording into ``platform``'s mock chat (``overrides`` in its run.start); return the report, what
    the chat shows, the channel's limit and every call the mock received."""
    dry = DRY_RUN[platform]
    mock = dry.make_mock(True)
    api = await mock.start()
    settings = ChannelSettings.model_validate(
        # Telegram renders Markdown to text + entities (checked in test_recordings.py); compared as sent here.
        {"platform": platform, "api_base": api, "delivery": delivery, "format": fmt_of[platform]}
    )
    relay = Relay({"c": make_runtime("c", settings, SecretStr(dry.token))}, MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN, max_body_bytes=16 * 2**20, max_line_bytes=2**20)
    await sidecar.start()
    target = dry.target(native=delivery == "native")
    seed_thread(mock, target)
    try:
        fmt = detect_format(path)
        events = recording_lines(path)
        start = {"kind": "run.start", "channel": "c", "target": target.model_dump(exclude_none=True), "format": fmt}
        if overrides:
            start["overrides"] = overrides
        body = "".join(json.dumps(e) + "\n" for e in [start, *events, {"kind": "end", "status": "ok"}])
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=120) as client:
            answer = await client.post("/v1/runs/rec/events", content=body)
            assert answer.status_code == 200, answer.text
            report = (await client.get("/v1/runs/rec", params={"wait_s": 90})).json()
        texts = [text for mid, text in mock.visible(target.chat_id) if mid != target.thread_id]
        return report, texts, settings.policy("c").max_units, list(mock.calls)
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()


@pytest.mark.parametrize(("platform", "path", "delivery"), CASES)
async def test_a_recording_reaches_every_platform_once_whole_and_without_a_429(
    platform: str, path: Path, delivery: str
) -> None:
    report, texts, limit, calls = await deliver(platform, path, delivery)
    expected = recorded_answer(recording_lines(path), detect_format(path), TextFormat(fmt_of[platform]))
    # a recording whose model only called a tool has no answer to show: its run ends 'empty', never 'delivered'
    assert report["status"] == ("delivered" if expected.strip() else "empty"), report
    if platform == "discord":  # tables, #### headings and rules rewritten for Discord: compared as a person reads
        assert shown_key(texts, platform, TextFormat.MARKDOWN) == expected_key(expected, platform, TextFormat.MARKDOWN)
    else:
        assert content_key("\n".join(texts)) == content_key(expected)
    assert all(text_units(t, LengthUnit.UTF16) <= limit for t in texts)
    assert all(fences_balanced(t) for t in texts)
    assert [c for c in calls if c.status == 429] == []


SUBAGENT_STREAMS = {  # recording → (its child's status line when done, a phrase of the child's own text)
    "ag-ui/subagent-reasoning.jsonl": ("↳ researcher: done", "Opening hours checked"),
    "a2a/task-artifact-subtask.jsonl": ("↳ task-fx-90ae: done", "Currency rates fetched"),
}


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("name", sorted(SUBAGENT_STREAMS))
async def test_a_protocol_streams_sub_agent_is_a_status_line_never_its_text(platform: str, name: str) -> None:
    path = next(p for p in STREAMS if p.as_posix().endswith(name))
    report, texts, _, _ = await deliver(platform, path, "preview", {"subagents": "status"})
    line, child_text = SUBAGENT_STREAMS[name]
    assert report["status"] == "delivered", report
    assert any(line in text for text in texts), texts
    assert not any(child_text in text for text in texts), texts
    expected = recorded_answer(recording_lines(path), detect_format(path), TextFormat(fmt_of[platform]))
    answer = [t for t in texts if line not in t]
    if platform == "discord":
        assert shown_key(answer, platform, TextFormat.MARKDOWN) == expected_key(expected, platform, TextFormat.MARKDOWN)
    else:
        assert content_key("\n".join(answer)) == content_key(expected)
