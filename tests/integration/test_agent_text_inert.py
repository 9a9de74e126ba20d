"""Agent text reaches chats inert (issue 25, item 5), through the real HTTP sidecar into mock Telegram, Slack and
Discord chats, each through its real SDK (aiogram, slack-sdk, discord.py):

- Slack receives no ``<!channel>``, ``<!here>``, ``<!everyone>``, ``<@U…>``, ``<#C…>`` or ``<url|label>`` as written
  (escaped ``&lt;``, in every call: posts, edits, streams), unless the channel allows mentions / platform links.
- Telegram keeps a link entity only to http(s): no ``javascript:``, no ``tg://user?id=`` (a mention) unless allowed.
- Discord sends ``allowed_mentions`` parse none: the mock's ``@everyone`` and ``<@id>`` ping no one, unless allowed.
- Invisible characters (tag characters, zero-width space, soft hyphen, Hangul filler, stray joiners) reach no
  platform; an emoji ZWJ sequence and Persian ZWNJ do.
- A media URL with credentials is refused at ingest with a clear 422, and its password is in no log line (debug
  level, the SDKs' loggers included), no live event, no report.
"""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest
import structlog
from pydantic import SecretStr

from streamrelay.adapters.ops.logs import configure_logging
from streamrelay.app.dry_run import DRY_RUN, seed_thread
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.discord import MockDiscord
from streamrelay.mocks.discord import StoredMessage as DiscordMessage
from streamrelay.mocks.slack import MockSlack
from streamrelay.mocks.slack.workspace import StoredMessage as SlackMessage
from streamrelay.mocks.telegram import MockTelegram
from streamrelay.mocks.telegram.chats import StoredMessage as TelegramMessage
from tests.integration.conftest import INGEST_TOKEN

pytestmark = pytest.mark.timeout(60)

FAMILY = "👨\u200d👩\u200d👧"
PERSIAN = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # Persian, with the ZWNJ it needs
INVISIBLE = "\U000e0041\U000e0042\u200b\u00ad\u3164\u2060"
"""Sent inside words below; none may reach a platform."""
HIDDEN_TEXT = "\U000e0069\U000e0067\U000e006e\U000e006f\U000e0072\U000e0065"
"""'ignore' in tag characters (ASCII smuggling)."""
SLACK_CONTROL = ("<!channel>", "<!here>", "<!everyone>", "<@U0123ABCD>", "<#C0123ABCD>", "<https://evil.example|bank>")
ANSWER = (
    f"Heads up <!channel> and <!here>, <!everyone>: ask <@U0123ABCD> in <#C0123ABCD>.\n\n"
    f"Log in at <https://evil.example|bank> or [docs](https://docs.example/x) or [x](javascript:alert(1)) or "
    f"[me](tg://user?id=42) or [join](tg://join?invite=abc).\n\n"
    f"pay{INVISIBLE}pal, pay\u200dpal{HIDDEN_TEXT}, {FAMILY} {PERSIAN}\n"
)


class Chat:
    """A sidecar with one channel ``c`` on ``platform``'s mock, with ``settings`` added to its table."""

    def __init__(self, platform: str, **settings: Any) -> None:
        self.platform = platform
        self.settings = settings
        self.dry = DRY_RUN[platform]
        self.mock = self.dry.make_mock(False)
        self.target = self.dry.target()
        self.lives: list[dict[str, Any]] = []
        self.report: dict[str, Any] = {}

    async def deliver(self, lines: list[dict[str, Any]], *, expect: int = 200) -> httpx.Response:
        """Post one run (``run.start`` added); its answer. Keeps the run's live events and report."""
        api = await self.mock.start()
        channel = ChannelSettings.model_validate({"platform": self.platform, "api_base": api, **self.settings})
        relay = Relay({"c": make_runtime("c", channel, SecretStr(self.dry.token))}, MemoryLedger(), MonotonicClock())
        sidecar = Sidecar(relay, token=INGEST_TOKEN)
        await sidecar.start()
        seed_thread(self.mock, self.target)
        try:
            start = {"kind": "run.start", "channel": "c", "target": self.target.model_dump()}
            body = "".join(json.dumps(line) + "\n" for line in [start, *lines])
            headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
            async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
                answer = await client.post("/v1/runs/inert/events", content=body)
                assert answer.status_code == expect, answer.text
                self.report = (await client.get("/v1/runs/inert", params={"wait_s": 30})).json()
                link = (await client.get("/v1/runs/inert/watch")).json()["url"]
                live = await client.get(link.replace("/runs/", "/v1/runs/", 1).replace("?", "/live?", 1))
                self.lives = [json.loads(line[5:]) for line in live.text.splitlines() if line.startswith("data:")]
                assert self.lives, live.text
            return answer
        finally:
            await sidecar.stop()
            await relay.close()
            await self.mock.stop()

    def slack(self) -> list[SlackMessage]:
        assert isinstance(self.mock, MockSlack)
        return self.mock.messages(self.target.chat_id)

    def telegram(self) -> list[TelegramMessage]:
        assert isinstance(self.mock, MockTelegram)
        return self.mock.messages(self.target.chat_id)

    def discord(self) -> list[DiscordMessage]:
        assert isinstance(self.mock, MockDiscord)
        return self.mock.messages(self.target.chat_id)

    def sent(self) -> list[str]:
        """Every text the platform received, in every call."""
        texts = [call.text for call in self.mock.calls if call.text]
        assert texts, "the platform received text"
        return texts


def run_lines(text: str = ANSWER) -> list[dict[str, Any]]:
    half = len(text) // 2
    return [
        {"kind": "text", "mode": "delta", "text": text[:half]},
        {"kind": "text", "mode": "delta", "text": text[half:]},
        {"kind": "end", "status": "ok"},
    ]


def assert_no_invisible(texts: list[str]) -> None:
    for text in texts:
        assert not set(text) & set(INVISIBLE + HIDDEN_TEXT), repr(text)
        assert "pay\u200dpal" not in text


@pytest.mark.parametrize("delivery", ["preview", "block", "native"])
async def test_slack_receives_mentions_and_links_escaped_and_no_invisible_character(delivery: str) -> None:
    chat = Chat("slack", delivery=delivery)
    await chat.deliver(run_lines())
    sent = chat.sent()
    for text in sent:
        for control in SLACK_CONTROL:
            assert control not in text, f"{control} reached Slack in {text!r}"
    assert_no_invisible(sent)
    final = chat.slack()[-1]
    assert "&lt;!channel>" in final.wire and "&lt;@U0123ABCD>" in final.wire
    assert FAMILY in final.wire and PERSIAN in final.wire and "paypal" in final.wire


async def test_slack_plain_text_escapes_them_as_slack_asks() -> None:
    chat = Chat("slack", format="plain")
    await chat.deliver(run_lines())
    final = chat.slack()[-1]
    assert final.kind == "text"
    assert "&lt;!channel&gt;" in final.wire and "&lt;https://evil.example|bank&gt;" in final.wire
    assert "<!channel>" in final.text  # what a person reads: the characters, not a mention


async def test_a_slack_channel_that_allows_mentions_keeps_them_and_only_them() -> None:
    chat = Chat("slack", allow_mentions=True)
    await chat.deliver(run_lines())
    final = chat.slack()[-1].wire
    assert "<!channel>" in final and "<@U0123ABCD>" in final and "<#C0123ABCD>" in final
    assert "&lt;https://evil.example|bank>" in final  # platform links are another setting


async def test_a_slack_channel_that_allows_platform_links_keeps_them() -> None:
    chat = Chat("slack", allow_platform_links=True)
    await chat.deliver(run_lines())
    final = chat.slack()[-1].wire
    assert "<https://evil.example|bank>" in final and "&lt;!channel>" in final


FAKE_CODE = "x `fake\n\n<https://evil.example|Click to verify>\n\n` y\n\n```a`b\n<https://evil2.example|Login>\n```\n"
"""BREAKER finding 2: neither the span across a blank line nor the fence with a backtick in its info string is code
in CommonMark."""


async def test_slack_escapes_links_in_what_only_looks_like_code() -> None:
    chat = Chat("slack", delivery="block")
    await chat.deliver(run_lines(FAKE_CODE))
    for text in chat.sent():
        assert "<https://evil" not in text, f"a link reached Slack in {text!r}"
    final = chat.slack()[-1].wire
    assert "&lt;https://evil.example|Click to verify>" in final and "&lt;https://evil2.example|Login>" in final


LOOKS_LIKE_HTML = "<!-- note --> The answer is Vec<String>, and a<b and c>d.\n\nSecond paragraph with `a<b`.\n"
"""BREAKER finding 3: the converter dropped all but "Second paragraph"."""


@pytest.mark.parametrize("delivery", ["preview", "block"])
async def test_telegram_shows_text_that_looks_like_html_as_written(delivery: str) -> None:
    chat = Chat("telegram", delivery=delivery)
    await chat.deliver(run_lines(LOOKS_LIKE_HTML))
    final = chat.telegram()[-1]
    assert final.text == "<!-- note --> The answer is Vec<String>, and a<b and c>d.\n\nSecond paragraph with a<b."
    assert [(e["type"], e["length"]) for e in final.entities] == [("code", 3)]


def links(chat: Chat) -> list[str]:
    return [
        str(entity.get("url"))
        for message in chat.telegram()
        for entity in message.entities
        if entity["type"] in ("text_link", "text_mention")
    ]


@pytest.mark.parametrize("delivery", ["preview", "block"])
async def test_telegram_links_only_to_http_and_no_invisible_character(delivery: str) -> None:
    chat = Chat("telegram", delivery=delivery)
    await chat.deliver(run_lines())
    assert links(chat) == ["https://evil.example|bank", "https://docs.example/x"]  # an autolink shows its own URL
    assert_no_invisible(chat.sent())
    shown = chat.mock.visible(chat.target.chat_id)[-1][1]
    assert "x or me or join" in shown  # a refused link keeps its text
    assert FAMILY in shown and PERSIAN in shown


async def test_a_telegram_channel_that_allows_mentions_and_platform_links_keeps_those() -> None:
    chat = Chat("telegram", allow_mentions=True, allow_platform_links=True)
    await chat.deliver(run_lines())
    assert links(chat) == [  # never javascript:
        "https://evil.example|bank",
        "https://docs.example/x",
        "tg://user?id=42",
        "tg://join?invite=abc",
    ]


DISCORD_ANSWER = f"@everyone @here <@1234567890123> <@&1234567890124> look{INVISIBLE} {FAMILY}\n"


@pytest.mark.parametrize("delivery", ["preview", "block"])
async def test_discord_mentions_ping_no_one_and_no_invisible_character(delivery: str) -> None:
    chat = Chat("discord", delivery=delivery)
    await chat.deliver(run_lines(DISCORD_ANSWER))
    assert_no_invisible(chat.sent())
    messages = chat.discord()
    assert messages and all((m.allowed_mentions or {}).get("parse") == [] for m in messages)
    assert not any(m.mention_everyone or m.mentions for m in messages)
    assert "@everyone" in messages[-1].content and FAMILY in messages[-1].content


async def test_a_discord_channel_that_allows_mentions_pings() -> None:
    chat = Chat("discord", allow_mentions=True)
    await chat.deliver(run_lines(DISCORD_ANSWER))
    final = chat.discord()[-1]
    assert final.mention_everyone and final.mentions == ["1234567890123"]


SECRET = "hunter2-s3cret-pw"
CREDENTIALED = f"https://alice:{SECRET}@files.example/q3.png"


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord"])
async def test_a_media_url_with_a_password_is_refused_and_the_password_is_nowhere(platform: str) -> None:
    stream = io.StringIO()
    setup = configure_logging("json", "debug", stream=stream)
    try:
        chat = Chat(platform)
        lines = [
            {"kind": "text", "mode": "delta", "text": "Here is the chart.\n"},
            {"kind": "media", "url": CREDENTIALED, "media_kind": "image", "caption": "Q3"},
            {"kind": "end", "status": "ok"},
        ]
        answer = await chat.deliver(lines, expect=422)  # the bad line fails alone: the run goes on without it
    finally:
        setup.close()
        structlog.reset_defaults()
    error = answer.json()["error"]
    assert "credentials" in error and "user:password@" in error
    assert SECRET not in answer.text
    logs = stream.getvalue()
    assert logs.count("\n") > 5, "debug logging captured the runs"
    assert SECRET not in logs
    assert SECRET not in json.dumps(chat.lives) and SECRET not in json.dumps(chat.report)
    assert not any(SECRET in (call.text or "") for call in chat.mock.calls)
    assert chat.report["status"] == "delivered"
    assert [text for _mid, text in chat.mock.visible(chat.target.chat_id)] == ["Here is the chart."]


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord"])
async def test_a_citation_url_with_a_password_is_refused_and_the_password_is_nowhere(platform: str) -> None:
    stream = io.StringIO()
    setup = configure_logging("json", "debug", stream=stream)
    try:
        chat = Chat(platform)
        lines = [
            {"kind": "text", "mode": "delta", "text": "Here is the answer.\n"},
            {"kind": "citation", "url": CREDENTIALED, "title": "Q3 chart"},
            {"kind": "end", "status": "ok"},
        ]
        answer = await chat.deliver(lines, expect=422)  # the bad line fails alone: the run goes on without it
    finally:
        setup.close()
        structlog.reset_defaults()
    error = answer.json()["error"]
    assert "credentials" in error and "user:password@" in error
    assert SECRET not in answer.text
    assert SECRET not in stream.getvalue()
    assert SECRET not in json.dumps(chat.lives) and SECRET not in json.dumps(chat.report)
    assert not any(SECRET in repr(call) for call in chat.mock.calls)
    assert chat.report["status"] == "delivered"
    assert [text for _mid, text in chat.mock.visible(chat.target.chat_id)] == ["Here is the answer."]
