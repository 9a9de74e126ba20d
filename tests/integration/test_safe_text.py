"""Text that reaches a person is safe (issue 12, item 5), through the real HTTP sidecar into mock Telegram, Slack and
Discord chats (each through its real SDK): NUL, BEL, ESC sequences, the bidi override U+202E and the isolates
U+2066..U+2069 sent in deltas, a snapshot, a status, a ``final_text`` and a raw provider stream never reach a chat,
and everything else does (newlines, tabs, emoji, Hebrew). Checked on every call each mock received, not only on
what the chat shows at the end.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.app.dry_run import DRY_RUN, seed_thread
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.text.safe_text import safe_text
from streamrelay.mocks.calls import RecordedCall
from tests.integration.conftest import INGEST_TOKEN

pytestmark = pytest.mark.timeout(60)

PLATFORMS = ("telegram", "slack", "discord")
UNSAFE_SENT = "\x00\x07\x1b\u202e\u2066\u2067\u2068\u2069\r"
"""What the runs below send and no platform may receive."""
SHALOM = "\u05e9\u05dc\u05d5\u05dd"
"""Hebrew (right to left): kept."""
DELTAS = [
    "Hello\x00 wo",
    "rld\x07!\n",
    f"\x1b[1m{SHALOM}\x1b[0m\t👋 ",
    "\u202eevil\u202c and \u2066isolated\u2069\r\n",
]
SO_FAR = "".join(DELTAS)
SNAPSHOT = SO_FAR + "more\x00 \u2067text\u2069\n"
LAST = f"the end\x1b[0m 😀\t{SHALOM}"
FINAL = SNAPSHOT + LAST
EXPECTED = f"Hello world!\n[1m{SHALOM}[0m\t👋 evil and isolated\nmore text\nthe end[0m 😀\t{SHALOM}"
STATUS = "searching\x07 the\u202e web\x00"


def test_the_expected_text_is_the_sent_text_made_safe() -> None:
    assert safe_text(FINAL) == EXPECTED


class Chat:
    """A sidecar with one channel ``c`` on ``platform``'s mock (``delivery`` mode)."""

    def __init__(self, platform: str, delivery: str) -> None:
        self.platform, self.delivery = platform, delivery
        self.dry = DRY_RUN[platform]
        self.mock = self.dry.make_mock(False)
        self.target = self.dry.target()

    async def deliver(
        self, lines: list[dict[str, Any]], *, fmt: str | None = None, report_status: str | None = "delivered"
    ) -> list[str]:
        """Post one run (``run.start`` added, ``format`` for a raw provider stream); the texts the chat shows."""
        api = await self.mock.start()
        settings = ChannelSettings.model_validate(
            {"platform": self.platform, "api_base": api, "delivery": self.delivery}
        )
        relay = Relay({"c": make_runtime("c", settings, SecretStr(self.dry.token))}, MemoryLedger(), MonotonicClock())
        sidecar = Sidecar(relay, token=INGEST_TOKEN)
        await sidecar.start()
        seed_thread(self.mock, self.target)
        try:
            start: dict[str, Any] = {"kind": "run.start", "channel": "c", "target": self.target.model_dump()}
            if fmt is not None:
                start["format"] = fmt
            body = "".join(json.dumps(line) + "\n" for line in [start, *lines])
            headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
            async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
                answer = await client.post("/v1/runs/safe/events", content=body)
                assert answer.status_code == 200, answer.text
                report = (await client.get("/v1/runs/safe", params={"wait_s": 30})).json()
            assert report_status is None or report["status"] == report_status, report
            return [text for _mid, text in self.mock.visible(self.target.chat_id)]
        finally:
            await sidecar.stop()
            await relay.close()
            await self.mock.stop()

    @property
    def calls(self) -> list[RecordedCall]:
        return list(self.mock.calls)


def assert_nothing_unsafe_arrived(chat: Chat) -> None:
    texts = [call.text for call in chat.calls if call.text]
    assert texts, "the platform received text"
    for text in texts:
        assert not set(text) & set(UNSAFE_SENT), f"{chat.platform} received {text!r}"


def text(mode: str, value: str, **more: Any) -> dict[str, Any]:
    return {"kind": "text", "mode": mode, "text": value, **more}


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("delivery", ["preview", "block"])
async def test_deltas_a_snapshot_and_a_final_text_reach_the_chat_safe(platform: str, delivery: str) -> None:
    chat = Chat(platform, delivery)
    lines = [
        *(text("delta", d) for d in DELTAS),
        text("snapshot", SNAPSHOT),
        {"kind": "end", "status": "ok", "final_text": FINAL},
    ]
    shown = await chat.deliver(lines)
    assert_nothing_unsafe_arrived(chat)
    assert "\n".join(shown) == EXPECTED  # newlines, tabs, emoji and Hebrew kept; shown once


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_status_lines_error_notices_and_a_committed_answer_reach_the_chat_safe(platform: str) -> None:
    chat = Chat(platform, "progress")
    lines = [
        {"kind": "phase", "name": "plan\x1b[1m"},
        {"kind": "status", "text": STATUS},
        text("delta", "looking\u202e it up\x00", visibility="status"),
        {"kind": "tool_call", "id": "c1", "name": "web\u202esearch", "state": "start"},
        {"kind": "tool_call", "id": "c1", "name": "web\u202esearch", "state": "end", "args": {"q": "a\u2066b"}},
        {"kind": "tool_result", "id": "c1", "name": "web\u202esearch", "summary": "3 hits\x07"},
        *(text("delta", d) for d in DELTAS),
        {"kind": "commit", "text": SO_FAR},
        {"kind": "end", "status": "ok"},
    ]
    shown = await chat.deliver(lines)
    assert_nothing_unsafe_arrived(chat)
    status = next(t for t in shown if t.startswith("Done."))
    assert "• searching the web" in status and "• looking it up" in status and "• plan[1m" in status
    assert '• using websearch (q: "ab")' in status and "• websearch: 3 hits" in status
    assert safe_text(SO_FAR).strip() in shown


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_failed_run_shows_its_errors_safe(platform: str) -> None:
    chat = Chat(platform, "preview")
    shown = await chat.deliver(
        [
            text("delta", "partial\x00 answer"),
            {"kind": "error", "message": "tool\u202e broke\x07"},
            {"kind": "end", "status": "error"},
        ],
        report_status=None,  # the report of a failed run is another issue's
    )
    assert_nothing_unsafe_arrived(chat)
    assert any(t.endswith("• tool broke") for t in shown), shown


def openai_chunk(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-safe",
        "object": "chat.completion.chunk",
        "created": 1770770839,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": content}, "logprobs": None, "finish_reason": None}],
    }


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_a_raw_provider_stream_reaches_the_chat_safe(platform: str) -> None:
    chat = Chat(platform, "preview")
    chunks = [openai_chunk(d) for d in [*DELTAS, "more\x00 \u2067text\u2069\n", LAST]]
    done = {**openai_chunk(""), "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]}
    shown = await chat.deliver([*chunks, done, {"kind": "end", "status": "ok"}], fmt="openai-chat")
    assert_nothing_unsafe_arrived(chat)
    assert "\n".join(shown) == EXPECTED
