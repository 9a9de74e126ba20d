"""The service against a mock Telegram (aiogram) and a mock Discord (discord.py), documented rate limits on, when one
create of a run is answered with something the adapter cannot read after the platform stored it (issue 23):
Telegram ``{"ok": true}`` without ``result`` (https://core.telegram.org/bots/api#making-requests), an empty body, an
HTML page; Discord a 200 with an empty body, ``{}``, ``{"id": null}``, an HTML page
(https://discord.com/developers/docs/resources/message#create-message).

Before, the run's whole delivery stopped there ("internal error, delivery stopped: AttributeError: 'NoneType' object
has no attribute 'message_id'"; ``JSONDecodeError``): the rest of the answer was never sent and the message the chat
showed was missing from the report. Now the answer is unknown and settled like a timeout: Discord re-sends with the
same nonce, Telegram probes ids with an exclusive bot token; without one the part is reported uncertain. Either way
the rest of the answer is delivered, the final shows once, and the report is true.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import Target
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.text.chunk_checks import content_key
from streamrelay.mocks.common import MockPlatform
from tests.integration.conftest import INGEST_TOKEN

pytestmark = pytest.mark.timeout(60)

ANSWER = "\n\n".join(f"Step {i}: check the **invoice** and the refund rule number {i}, then say so." for i in range(8))
"""About 600 characters of Markdown: several blocks of 150-300 characters."""
SMALL = {"min_chars": 150, "max_chars": 300}
HTML = "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>"


@dataclass
class Stack:
    mock: MockPlatform
    client: httpx.AsyncClient
    target: Target


@asynccontextmanager
async def service(platform: str, **channel: Any) -> AsyncIterator[Stack]:
    """The sidecar with one channel ``c`` on the platform's mock (rate limits on), in ``block`` delivery with small
    blocks (the answer takes three or more creates); the target is the dry run's private conversation."""
    dry = DRY_RUN[platform]
    mock = dry.make_mock(True)
    api = await mock.start()
    settings = ChannelSettings.model_validate(
        {"platform": platform, "api_base": api, "delivery": "block", "format": "markdown", "chunk": SMALL}
        | {"coalesce": SMALL, **channel}
    )
    relay = Relay({"c": make_runtime("c", settings, SecretStr(dry.token))}, MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            yield Stack(mock, client, dry.target())
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()


async def stream_answer(stack: Stack, run: str) -> dict[str, Any]:
    """Send ``ANSWER`` word by word, a few words per request; return the run's report once it is finished."""
    start = {"kind": "run.start", "channel": "c", "target": stack.target.model_dump(exclude_none=True)}
    words = ANSWER.split(" ")
    events = [start, *({"kind": "text", "mode": "delta", "text": w + " "} for w in words[:-1])]
    events += [{"kind": "text", "mode": "delta", "text": words[-1]}, {"kind": "end", "status": "ok"}]
    for i in range(0, len(events), 6):
        body = "".join(json.dumps(e) + "\n" for e in events[i : i + 6])
        answer = await stack.client.post(f"/v1/runs/{run}/events", content=body)
        assert answer.status_code == 200, answer.text
        await asyncio.sleep(0.02)
    report: dict[str, Any] = (await stack.client.get(f"/v1/runs/{run}", params={"wait_s": 30})).json()
    return report


def shown(stack: Stack) -> list[tuple[str, str]]:
    """What the chat shows of the bot: ``(message id, text)``."""
    return [(str(mid), text) for mid, text in stack.mock.visible(stack.target.chat_id)]


def raw(reply: dict[str, Any]) -> str:
    """How the mock records a raw answer (``description``)."""
    body = reply["body"]
    return "raw answer: " + (body if isinstance(body, str) else json.dumps(body))[:80]


def assert_whole_once(messages: list[tuple[str, str]], answer: str = ANSWER) -> None:
    """The chat shows the whole ``answer`` (as rendered), each part once (three or more messages)."""
    assert len(messages) >= 3
    assert content_key("".join(text for _, text in messages)) == content_key(answer)


RENDERED = ANSWER.replace("**", "")
"""What a Telegram chat shows of ``ANSWER``: its text, the bold as an entity (the mock's ``visible``)."""
TELEGRAM = {
    "ok-without-result": {"status": 200, "body": {"ok": True}},
    "empty": {"status": 200, "body": ""},
    "html": {"status": 200, "body": HTML, "content_type": "text/html"},
}


@pytest.mark.parametrize("reply", TELEGRAM.values(), ids=TELEGRAM.keys())
async def test_telegram_exclusive_bot_settles_it_and_delivers_the_rest(reply: dict[str, Any]) -> None:
    async with service("telegram", exclusive_bot=True) as stack:
        stack.mock.add_fault("sendMessage", 2, reply, after_commit=True)  # stored, then the odd answer
        report = await stream_answer(stack, "unreadable-exclusive")
        messages = shown(stack)
        sends = [(c.method, c.status, c.description) for c in stack.mock.calls if c.method == "sendMessage"]
        probes = [c for c in stack.mock.calls if c.method == "editMessageText"]

    assert_whole_once(messages, RENDERED)
    assert sends[1] == ("sendMessage", 200, raw(reply))
    assert probes  # the id was probed (exclusive bot), never sent again
    assert len(sends) == len(messages)
    assert report["status"] == "delivered", report
    assert report["message_ids"] == [mid for mid, _ in messages]
    assert {p["state"] for p in report["parts"]} == {"acked"}


async def shared_bot_run() -> tuple[dict[str, Any], list[tuple[str, str]], int]:
    """A Telegram run on a shared bot token whose second sendMessage is stored and answered ``{"ok": true}``: its
    report, what the chat shows, and how many sendMessage calls were made."""
    async with service("telegram") as stack:
        stack.mock.add_fault("sendMessage", 2, TELEGRAM["ok-without-result"], after_commit=True)
        report = await stream_answer(stack, "unreadable-shared")
        return report, shown(stack), len([c for c in stack.mock.calls if c.method == "sendMessage"])


async def test_telegram_shared_bot_shows_the_unknown_part_once_and_reports_it() -> None:
    """Without an exclusive token Telegram's ids cannot be probed. A 2xx the adapter could not read was taken and
    most often stored (like a timeout): the part stays as it is, never sent again, and the report is partial and
    says it is uncertain; the run goes on, the chat shows the whole answer once, and every other message is
    confirmed in ``message_ids``."""
    report, messages, sends = await shared_bot_run()

    assert_whole_once(messages, RENDERED)
    assert report["status"] == "partial", report
    assert report["uncertain"] == 1 and report["done"]
    [uncertain] = [p for p in report["parts"] if p["state"] == "uncertain"]
    assert "sendMessage: unreadable answer (HTTP 200)" in str(uncertain["error"]) or "cannot tell" in str(
        uncertain["error"]
    )
    unconfirmed = [mid for mid, _ in messages if mid not in report["message_ids"]]
    assert unconfirmed == [messages[1][0]]  # the one the odd answer left unknown: shown, not claimed confirmed
    assert sends == len(messages)


DISCORD = {
    "empty": {"status": 200, "body": ""},
    "empty-object": {"status": 200, "body": {}},
    "id-null": {"status": 200, "body": {"id": None}},
    "html": {"status": 200, "body": HTML, "content_type": "text/html"},
}


@pytest.mark.parametrize("reply", DISCORD.values(), ids=DISCORD.keys())
async def test_discord_settles_it_by_its_nonce_and_delivers_the_rest(reply: dict[str, Any]) -> None:
    async with service("discord") as stack:
        stack.mock.add_fault("createMessage", 2, reply, after_commit=True)  # stored, then the odd answer
        report = await stream_answer(stack, "unreadable-discord")
        messages = shown(stack)
        creates = [(c.status, c.description) for c in stack.mock.calls if c.method == "createMessage"]

    assert_whole_once(messages)
    assert creates[1] == (200, raw(reply))
    assert len(creates) == len(messages) + 1  # the settlement: the same create and nonce, answered with the stored one
    assert report["status"] == "delivered", report
    assert report["message_ids"] == [mid for mid, _ in messages]
    assert {p["state"] for p in report["parts"]} == {"acked"}
