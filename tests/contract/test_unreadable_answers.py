"""Contract: an answer in no platform shape is UnreadableAnswerError (unknown), for every call, through the real SDK.

The mocks answer a scripted call byte for byte (``{"status", "body", "content_type"?}``, :mod:`mocks.control`):
Telegram ``{"ok": true}`` without ``result`` (aiogram returned None: ``AttributeError``), an empty body or an HTML
page (``JSONDecodeError``), Discord ``{}`` / ``{"id": null}`` (``KeyError`` / ``TypeError``). With ``after_commit``
the platform stored the call first: the message is in the chat, and the error says the outcome is unknown, never
an SDK decode error and never the token.
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from streamrelay.adapters.discord import DiscordAdapter
from streamrelay.adapters.telegram import TelegramAdapter
from streamrelay.core.errors import PlatformUnavailableError, UnreadableAnswerError
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem, MediaKind
from streamrelay.core.ports import PendingSend, SettleOutcome, StopControl, TextFormat
from streamrelay.mocks.discord import MockDiscord
from streamrelay.mocks.telegram import MockTelegram
from tests.contract.conftest import DISCORD_TOKEN, TELEGRAM_TOKEN, MakeDiscord, MakeTelegram

pytestmark = pytest.mark.timeout(10)

PLAIN = TextFormat.PLAIN
HTML = "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>"
IMAGE = MediaItem("https://example.com/q3.png", MediaKind.IMAGE, "Q3 revenue")


def _reply(body: Any, status: int = 200, content_type: str | None = None) -> dict[str, Any]:
    reply: dict[str, Any] = {"status": status, "body": body}
    if content_type is not None:
        reply["content_type"] = content_type
    return reply


def _assert_readable(error: UnreadableAnswerError, *, method: str, why: str, status: int | None, secret: str) -> None:
    """The error names the method, what was wrong and the status, quotes a short excerpt, and holds no token."""
    text = str(error)
    assert f" {method}: unreadable answer (HTTP {'?' if status is None else status}): {why}" in text
    assert error.status == status
    assert len(error.excerpt) <= 81
    shown = "".join(traceback.format_exception(error)) + repr(error)
    assert secret not in shown
    assert error.__context__ is None and error.__cause__ is None


# ------------------------------------------------------------------ Telegram

CHAT = Target(chat_id=4242)
TELEGRAM_SECRET = TELEGRAM_TOKEN.partition(":")[2]

TELEGRAM_SHAPES = [
    pytest.param(_reply({"ok": True}), "ok without a result", id="ok-without-result"),
    pytest.param(_reply({"ok": True, "result": None}), "ok without a result", id="result-null"),
    pytest.param(_reply(""), "not JSON", id="empty"),
    pytest.param(_reply(HTML, content_type="text/html"), "not JSON", id="html"),
    pytest.param(_reply({}), "not a Bot API answer (ok: Field required)", id="empty-object"),
    pytest.param(_reply({"ok": True, "result": {"message_id": 7}}), "not a Bot API answer (result.", id="partial"),
    pytest.param(_reply({"ok": False}), "an error without a description", id="ok-false-alone"),
    pytest.param(_reply({"ok": True}, status=500), "ok on an error status", id="ok-on-500"),
    pytest.param(
        _reply({"ok": False, "error_code": 500}, status=500), "an error without a description", id="500-alone"
    ),
    pytest.param(_reply(HTML, status=502, content_type="text/html"), "not JSON", id="html-502"),
]


@pytest.mark.parametrize(("reply", "why"), TELEGRAM_SHAPES)
async def test_telegram_a_send_answered_unreadably_is_unknown(
    telegram: TelegramAdapter, telegram_mock: MockTelegram, reply: dict[str, Any], why: str
) -> None:
    telegram_mock.add_fault("sendMessage", 1, reply, after_commit=True)

    with pytest.raises(UnreadableAnswerError) as raised:
        await telegram.send_text(CHAT, "Hello", PLAIN)
    after = await telegram.send_text(CHAT, "next", PLAIN)

    _assert_readable(raised.value, method="sendMessage", why=why, status=reply["status"], secret=TELEGRAM_SECRET)
    assert (raised.value.platform, raised.value.target) == ("telegram", "4242")
    assert telegram_mock.visible(4242) == [(1, "Hello"), (2, "next")]  # stored: the chat shows it
    assert after == "2"


async def test_telegram_the_excerpt_is_short_and_flat(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    telegram_mock.add_fault("sendMessage", 1, _reply(HTML + "\n\n" + "x" * 500, content_type="text/html"))

    with pytest.raises(UnreadableAnswerError) as raised:
        await telegram.send_text(CHAT, "Hello", PLAIN)

    assert raised.value.excerpt == HTML[:80] + "…"
    assert "body '<html><head><title>502 Bad Gateway</title>" in str(raised.value)
    assert telegram_mock.visible(4242) == []  # before the commit: nothing stored


async def test_telegram_a_body_not_in_its_charset_is_unreadable(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    telegram_mock.add_fault("sendMessage", 1, _reply("Déjà vu", content_type="text/plain; charset=ascii"))

    with pytest.raises(UnreadableAnswerError) as raised:
        await telegram.send_text(CHAT, "Hello", PLAIN)

    _assert_readable(
        raised.value, method="sendMessage", why="not text in its charset", status=None, secret=TELEGRAM_SECRET
    )


async def test_telegram_every_call_reads_answers_alike(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    """One reading for every method (the session): media, edits, deletes, typing, the Stop control, drafts."""
    mid = await telegram.send_text(CHAT, "Hello", PLAIN)
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "sendPhoto": lambda: telegram.send_media(CHAT, IMAGE, PLAIN),
        "editMessageText": lambda: telegram.edit_text(CHAT, mid, "Hello, world", PLAIN),
        "editMessageReplyMarkup": lambda: telegram.set_stop(CHAT, mid, "", PLAIN, StopControl("stop:0123456789abcdef")),
        "sendChatAction": lambda: telegram.send_typing(CHAT),
        "sendMessageDraft": lambda: telegram.stream_start(CHAT, "Hel", PLAIN),
        "deleteMessage": lambda: telegram.delete_message(CHAT, mid),
    }
    for method in calls:
        telegram_mock.add_fault(method, 1, _reply({"ok": True}), after_commit=True)

    for method, call in calls.items():
        with pytest.raises(UnreadableAnswerError) as raised:
            await call()
        _assert_readable(raised.value, method=method, why="ok without a result", status=200, secret=TELEGRAM_SECRET)

    assert telegram_mock.visible(4242) == [(2, "Q3 revenue")]  # the photo was stored; the text was deleted
    assert [c.method for c in telegram_mock.calls if c.ok] == ["sendMessage"]


async def test_telegram_an_unreadable_probe_leaves_the_send_unknown(
    make_telegram: MakeTelegram, telegram_mock: MockTelegram
) -> None:
    """Settling an uncertain send (exclusive bot) probes ids with editMessageText; an unreadable answer to a probe is
    unknown too, and a later settle finds the message."""
    telegram = make_telegram()
    telegram_mock.add_fault("sendMessage", 1, _reply({"ok": True}), after_commit=True)
    telegram_mock.add_fault("editMessageText", 1, _reply("", status=200))
    with pytest.raises(UnreadableAnswerError):
        await telegram.send_text(Target(chat_id=-1001234567890), "Hello", PLAIN)
    pending = PendingSend("part-1", "Hello", PLAIN, exclusive=True)

    with pytest.raises(UnreadableAnswerError):
        await telegram.settle_send(Target(chat_id=-1001234567890), pending)
    settled = await telegram.settle_send(Target(chat_id=-1001234567890), pending)

    assert (settled.outcome, settled.message_id) == (SettleOutcome.FOUND, "1")


# ------------------------------------------------------------------ Discord

CHANNEL = Target(chat_id=1100000000000000001)
DISCORD_SECRET = DISCORD_TOKEN.split(".", 1)[1]

DISCORD_SHAPES = [
    pytest.param(_reply(""), "an empty body", id="empty"),
    pytest.param(_reply(HTML, content_type="text/html"), "not JSON (Content-Type text/html)", id="html"),
    pytest.param(_reply({}), "not the object discord.py reads (KeyError: ", id="empty-object"),
    pytest.param(_reply({"id": None}), "not the object discord.py reads (TypeError: ", id="id-null"),
    pytest.param(_reply([]), "not the object discord.py reads (TypeError: ", id="list"),
    pytest.param(_reply("{not json"), "not JSON", id="broken-json"),
]


@pytest.mark.parametrize(("reply", "why"), DISCORD_SHAPES)
async def test_discord_a_create_answered_unreadably_is_unknown_and_settles_by_its_nonce(
    discord_adapter: DiscordAdapter, discord_mock: MockDiscord, reply: dict[str, Any], why: str
) -> None:
    await discord_adapter.send_text(CHANNEL, "first", PLAIN)  # logged in: the login is not what is scripted
    discord_mock.add_fault("createMessage", 2, reply, after_commit=True)

    with pytest.raises(UnreadableAnswerError) as raised:
        await discord_adapter.send_text(CHANNEL, "Hello", PLAIN, delivery_id="part-2")
    settled = await discord_adapter.settle_send(CHANNEL, PendingSend("part-2", "Hello", PLAIN))

    _assert_readable(raised.value, method="createMessage", why=why, status=200, secret=DISCORD_SECRET)
    assert (raised.value.platform, raised.value.target) == ("discord", str(CHANNEL.chat_id))
    shown = discord_mock.visible(CHANNEL.chat_id)
    assert [text for _, text in shown] == ["first", "Hello"]  # stored once, found by its nonce
    assert (settled.outcome, settled.message_id) == (SettleOutcome.FOUND, str(shown[1][0]))


async def test_discord_every_call_reads_answers_alike(
    discord_adapter: DiscordAdapter, discord_mock: MockDiscord
) -> None:
    """One reading for every call (the trace hook and the call's guard): media, edits, the Stop control, threads,
    deletes and typing; an HTML page to any of them, ``{"id": null}`` to those that return an object."""
    mid = await discord_adapter.send_text(CHANNEL, "Hello", PLAIN)
    other = await discord_adapter.send_text(CHANNEL, "anchor", PLAIN)
    stop = StopControl("stop:0123456789abcdef")
    calls: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("createMessage", lambda: discord_adapter.send_media(CHANNEL, IMAGE, PLAIN)),
        ("editMessage", lambda: discord_adapter.edit_text(CHANNEL, mid, "Hello, world", PLAIN)),
        ("editMessage", lambda: discord_adapter.set_stop(CHANNEL, mid, "", PLAIN, stop)),
        ("startThreadFromMessage", lambda: discord_adapter.open_thread(CHANNEL, other, "a thread")),
        ("triggerTypingIndicator", lambda: discord_adapter.send_typing(CHANNEL)),
        ("deleteMessage", lambda: discord_adapter.delete_message(CHANNEL, mid)),
    ]
    html = _reply(HTML, content_type="text/html")
    null_id = _reply({"id": None})
    replies = [html, html, null_id, null_id, html, html]
    counts = {"createMessage": 2}  # the two sends above
    for (method, _), reply in zip(calls, replies, strict=True):
        counts[method] = counts.get(method, 0) + 1
        discord_mock.add_fault(method, counts[method], reply, after_commit=True)

    for (method, call), reply in zip(calls, replies, strict=True):
        with pytest.raises(UnreadableAnswerError) as raised:
            await call()
        why = "not JSON (Content-Type text/html)" if reply is html else "not the object discord.py reads (TypeError: "
        _assert_readable(raised.value, method=method, why=why, status=200, secret=DISCORD_SECRET)

    assert [text for _, text in discord_mock.visible(CHANNEL.chat_id)] == [
        "anchor",
        "Q3 revenue",
    ]  # the image stored, "Hello" deleted
    assert [thread.name for thread in discord_mock.threads()] == ["a thread"]


async def test_discord_an_unreadable_login_is_not_sent(make_discord: MakeDiscord, discord_mock: MockDiscord) -> None:
    """The login (``GET /users/@me``) comes before the call: an answer it cannot read means the call was not sent."""
    discord_mock.add_fault("getCurrentUser", 1, _reply({"id": None}))
    adapter = make_discord()

    with pytest.raises(PlatformUnavailableError) as raised:
        await adapter.send_text(CHANNEL, "Hello", PLAIN)
    sent = await adapter.send_text(CHANNEL, "Hello", PLAIN)  # the next call logs in again

    why = "not the object discord.py reads (KeyError: 'username'); body '{\"id\": null}'"
    assert f"discord login: unreadable answer (HTTP 200): {why}" in str(raised.value)
    assert not isinstance(raised.value, UnreadableAnswerError)
    assert DISCORD_SECRET not in "".join(traceback.format_exception(raised.value))
    assert [(str(mid), text) for mid, text in discord_mock.visible(CHANNEL.chat_id)] == [(sent, "Hello")]
