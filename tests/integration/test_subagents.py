"""A parent loop with sub-agents, end to end: recorded provider streams as the agents, the sidecar over HTTP,
the mock Bot API through aiogram, and the parent following its pipeline lane with the Python client.

The run: the root agent answers (openai-chat/text.jsonl); its child ``researcher`` works with tools
(anthropic/multi-message-tools.jsonl) and has a nested child ``fetcher`` (openai-chat/tool-call.jsonl); a second
child ``checker`` thinks then answers (openai-chat/reasoning-content.jsonl).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from streamrelay.adapters.telegram.render import render
from streamrelay.app.client import RelayClient, recorded_events
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.contracts.units import MessageUnit, PipelineUnit, RunEndUnit, ToolCallUnit
from streamrelay.core.events import ProviderFormat, Source
from streamrelay.core.lanes.gate import Action, ActionCatalog, ActionClass
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import BOT_TOKEN, INGEST_TOKEN

pytestmark = pytest.mark.timeout(90)

STREAMS = Path(__file__).parents[1] / "streams"
CHAT = 4242
RESEARCHER = Source(agent_id="researcher", session_id="s-res", parent_session_id="s-root", depth=1, path="s/researcher")
FETCHER = Source(
    agent_id="fetcher", session_id="s-fetch", parent_session_id="s-res", depth=2, path="s/researcher/fetcher"
)
CHECKER = Source(agent_id="checker", session_id="s-check", parent_session_id="s-root", depth=1, path="s/checker")
CATALOG = ActionCatalog(
    [
        Action("readNoteTree", ActionClass.IDEMPOTENT),
        Action("tool_search_tool_bm25", ActionClass.IDEMPOTENT),
        Action("executeEditorOperation", ActionClass.IRREVERSIBLE),
        Action("weather", ActionClass.IDEMPOTENT),
    ]
)


def recording(name: str, source: Source | None) -> list[dict[str, Any]]:
    fmt = ProviderFormat(name.split("/")[0])
    return recorded_events(STREAMS / name, fmt, "r1", source)


def answer_text(events: list[dict[str, Any]]) -> str:
    """The visible text of a recording: its assistant messages' answer deltas, messages apart by a blank line."""
    messages: dict[int, str] = {}
    for e in events:
        if e["kind"] == "text" and e.get("visibility", "answer") == "answer":
            messages[e.get("message", 0)] = messages.get(e.get("message", 0), "") + e["text"]
    return "\n\n".join(text for _, text in sorted(messages.items()) if text)


def interleave(*streams: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Round-robin over the streams, a few events at a time: agents run side by side."""
    out: list[dict[str, Any]] = []
    queues = [list(s) for s in streams]
    while any(queues):
        for queue in queues:
            out.extend(queue[:7])
            del queue[:7]
    return out


@pytest.fixture
async def sidecar() -> AsyncIterator[tuple[MockTelegram, Sidecar]]:
    mock = MockTelegram(rate_limits=True)
    api = await mock.start()
    channel = ChannelSettings.model_validate(
        {"platform": "telegram", "api_base": api, "throttle_ms": 200, "subagents": "status"}
    )
    relay = Relay(
        {"telegram": make_runtime("telegram", channel, SecretStr(BOT_TOKEN))},
        MemoryLedger(),
        MonotonicClock(),
        catalog=CATALOG,
    )
    server = Sidecar(relay, token=INGEST_TOKEN)
    await server.start()
    yield mock, server
    await server.stop()
    await relay.close()
    await mock.stop()


async def test_a_parent_with_two_children_one_nested(sidecar: tuple[MockTelegram, Sidecar]) -> None:
    mock, server = sidecar
    root = recording("openai-chat/text.jsonl", None)
    researcher = recording("anthropic/multi-message-tools.jsonl", RESEARCHER)
    fetcher = recording("openai-chat/tool-call.jsonl", FETCHER)
    checker = recording("openai-chat/reasoning-content.jsonl", CHECKER)
    end = {"kind": "end", "status": "ok"}
    source = {"source": None}

    async with RelayClient(server.url, INGEST_TOKEN) as client:
        await client.start("r1", channel="telegram", chat_id=CHAT)
        units: list[PipelineUnit] = []

        async def follow() -> None:
            async for unit in client.pipeline("r1"):
                units.append(unit)

        follower = asyncio.create_task(follow())
        await client.send("r1", [{"kind": "phase", "name": "planning"}])
        # The children work side by side (the fetcher inside the researcher's run), then end.
        await client.send("r1", interleave(researcher, fetcher, checker))
        await client.send("r1", [{**end, "source": FETCHER.model_dump()}])
        await client.send("r1", [{**end, "source": RESEARCHER.model_dump()}, {**end, "source": CHECKER.model_dump()}])
        # Before the commit point an irreversible call waits; an idempotent one may run.
        editor = next(u for u in units if isinstance(u, ToolCallUnit) and u.name == "executeEditorOperation")
        assert (await client.gate("r1", editor.id)).verdict == "wait"
        weather = next(u for u in units if isinstance(u, ToolCallUnit) and u.name == "weather")
        assert (await client.gate("r1", weather.id)).verdict == "run"
        waiting = asyncio.create_task(client.gate("r1", editor.id, wait_s=30))
        await client.send("r1", root)
        await client.send("r1", [{"kind": "commit", **source}, end])
        assert (await waiting).verdict == "run"  # the gate answered as soon as the commit came
        report = await client.report("r1", wait_s=30)
        await asyncio.wait_for(follower, 10)

    assert report.status == "delivered", report
    # The person sees a status message with a true line per sub-agent (a tree), and the root's answer only.
    status, answer = [text for _, text in mock.visible(CHAT)]
    assert status.splitlines() == ["↳ researcher: done", "  ↳ fetcher: done", "↳ checker: done"]
    assert answer == render(answer_text(root).strip(), TextFormat.MARKDOWN)[0]  # Telegram shows Markdown rendered
    for child_text in (answer_text(researcher), answer_text(checker)):
        assert child_text[:30] not in status + answer

    # The pipeline lane: complete units only, in order, never ui-lane text.
    kinds = [u.kind for u in units]
    assert [u.index for u in units] == list(range(1, len(units) + 1))
    assert set(kinds) == {"tool_call", "message", "commit", "run.end"}, kinds
    assert kinds[-2:] == ["commit", "run.end"] and isinstance(units[-1], RunEndUnit) and units[-1].committed is True
    calls = {(u.name, u.source.agent_id if u.source else None) for u in units if isinstance(u, ToolCallUnit)}
    assert calls == {
        ("readNoteTree", "researcher"),
        ("tool_search_tool_bm25", "researcher"),
        ("executeEditorOperation", "researcher"),
        ("weather", "fetcher"),
    }
    messages = {u.source.agent_id: u for u in units if isinstance(u, MessageUnit) and u.source is not None}
    assert list(messages) == ["fetcher", "researcher", "checker"]  # in the order the children ended
    assert messages["researcher"].text == answer_text(researcher) != ""
    assert messages["checker"].text == 'The word "strawberry" contains three "r"s.'  # its reasoning is not in it
    assert all(m.status == "ok" for m in messages.values())
