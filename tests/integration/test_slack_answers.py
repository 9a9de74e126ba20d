"""The service against a mock Slack (slack-sdk, documented rate limits on) when Slack's answers go wrong (issue 23):

- a native stream (chat.startStream / appendStream / stopStream) whose stop is refused for the text it carried
  (``msg_too_long``, https://docs.slack.dev/reference/methods/chat.stopStream): the chat shows the whole answer once,
  and the report says so;
- a create answered with something the adapter cannot read (an empty body, an HTML page, JSON without ``ts``) after
  Slack stored it: it is settled by its metadata (https://docs.slack.dev/messaging/message-metadata), the rest of
  the answer is delivered, the final once, and the report lists the message ids the chat shows.
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

from streamrelay.app.dry_run import DRY_RUN, seed_thread
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import Target
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.text.chunk_checks import content_key
from streamrelay.mocks.slack import MockSlack
from tests.integration.conftest import INGEST_TOKEN

pytestmark = pytest.mark.timeout(60)

ANSWER = "\n\n".join(f"Step {i}: check the **invoice** and the refund rule number {i}, then say so." for i in range(8))
"""About 600 characters of Markdown: several appends of one stream, or several small blocks."""


@dataclass
class Stack:
    mock: MockSlack
    client: httpx.AsyncClient
    target: Target


@asynccontextmanager
async def slack_service(delivery: str, **channel: Any) -> AsyncIterator[Stack]:
    """The sidecar with one Slack channel on a mock Slack (rate limits on); the target is the dry run's direct
    message, in a thread (native streams need one)."""
    dry = DRY_RUN["slack"]
    mock = dry.make_mock(True)
    assert isinstance(mock, MockSlack)
    api = await mock.start()
    settings = ChannelSettings.model_validate(
        {"platform": "slack", "api_base": api, "delivery": delivery, "format": "markdown", **channel}
    )
    relay = Relay({"c": make_runtime("c", settings, SecretStr(dry.token))}, MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    target = dry.target(native=True)
    seed_thread(mock, target)
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            yield Stack(mock, client, target)
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()


async def stream_answer(stack: Stack, run: str, pause_s: float = 0.05) -> dict[str, Any]:
    """Send ``ANSWER`` word by word, a few words per request with a pause between (so a stream really streams);
    return the run's report once it is finished."""
    start = {"kind": "run.start", "channel": "c", "target": stack.target.model_dump(exclude_none=True)}
    words = ANSWER.split(" ")
    events = [start, *({"kind": "text", "mode": "delta", "text": w + " "} for w in words[:-1])]
    events += [{"kind": "text", "mode": "delta", "text": words[-1]}, {"kind": "end", "status": "ok"}]
    for i in range(0, len(events), 6):
        body = "".join(json.dumps(e) + "\n" for e in events[i : i + 6])
        answer = await stack.client.post(f"/v1/runs/{run}/events", content=body)
        assert answer.status_code == 200, answer.text
        await asyncio.sleep(pause_s)
    report: dict[str, Any] = (await stack.client.get(f"/v1/runs/{run}", params={"wait_s": 30})).json()
    return report


def shown(stack: Stack) -> list[tuple[str, str]]:
    """The bot's messages in the thread (the person's question left out): ``(ts, text)``."""
    return [(str(ts), text) for ts, text in stack.mock.visible(stack.target.chat_id) if ts != stack.target.thread_id]


def calls(stack: Stack) -> list[tuple[str, str | None]]:
    return [(c.method, c.description) for c in stack.mock.calls if c.method.startswith("chat.")]


async def test_a_stream_whose_stop_is_refused_shows_the_whole_answer_once() -> None:
    async with slack_service("native") as stack:
        stack.mock.add_fault("chat.stopStream", 1, {"status": 400, "description": "msg_too_long"})
        report = await stream_answer(stack, "stop-refused")
        messages = shown(stack)
        made = calls(stack)

    assert [c for c in made if c[0] != "chat.appendStream"] == [
        ("chat.startStream", None),
        ("chat.stopStream", "msg_too_long"),  # refused with the rest of the answer
        ("chat.stopStream", None),  # stopped as it was
        ("chat.update", None),  # the whole answer on the same message
    ]
    assert len(messages) == 1 and content_key(messages[0][1]) == content_key(ANSWER)
    assert report["status"] == "delivered", report
    assert report["message_ids"] == [messages[0][0]]
    assert [(p["state"], p["message_id"], p["chars"]) for p in report["parts"]] == [
        ("acked", messages[0][0], len(ANSWER))
    ]


UNREADABLE = {
    "empty": {"status": 200, "body": ""},
    "html": {"status": 200, "body": "<html><body><h1>502 Bad Gateway</h1></body></html>", "content_type": "text/html"},
    "no-ts": {"status": 200, "body": {"ok": True, "channel": "D0DRYRUN01"}},
}


@pytest.mark.parametrize("reply", UNREADABLE.values(), ids=UNREADABLE.keys())
async def test_a_create_answered_unreadably_mid_run_is_settled_and_the_rest_delivered(reply: dict[str, Any]) -> None:
    small = {"min_chars": 150, "max_chars": 300}  # blocks of 150-300 characters: the answer takes 3 or more
    async with slack_service("block", chunk=small, coalesce=small) as stack:
        stack.mock.add_fault("chat.postMessage", 2, reply, after_commit=True)  # stored, then the odd answer
        report = await stream_answer(stack, "unreadable")
        messages = shown(stack)
        made = calls(stack)
        settles = [c.method for c in stack.mock.calls if c.method.startswith("conversations.")]

    assert content_key("".join(text for _, text in messages)) == content_key(ANSWER)  # all of it, once
    assert len(messages) >= 3 and made[1] == ("chat.postMessage", "raw answer: " + reply_text(reply)[:80])
    assert settles  # found by its metadata, not sent again
    assert report["status"] == "delivered", report
    assert report["message_ids"] == [ts for ts, _ in messages]
    assert "None" not in report["message_ids"]
    assert {p["state"] for p in report["parts"]} == {"acked"}


def reply_text(reply: dict[str, Any]) -> str:
    body = reply["body"]
    return body if isinstance(body, str) else json.dumps(body)
