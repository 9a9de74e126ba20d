"""Contract: TelegramAdapter (aiogram) against MockTelegram over loopback HTTP.

Assertions read what a person would see (the mock's stored messages) and what the platform received.
"""

from __future__ import annotations

import asyncio
import time
import traceback

import pytest

from streamrelay.adapters.telegram import TelegramAdapter
from streamrelay.adapters.telegram.errors import NoMessageToEditError
from streamrelay.core.errors import (
    AnswerTimeoutError,
    ConfigError,
    DeliveryError,
    ForbiddenError,
    MessageFrozenError,
    PayloadRejectedError,
    PlatformUnavailableError,
    RateLimitedError,
    RejectReason,
    TargetNotFoundError,
    UncertainDeliveryError,
)
from streamrelay.core.events import Target
from streamrelay.core.ports import TextFormat
from streamrelay.mocks.telegram import NOT_MODIFIED, MockTelegram
from tests.contract.conftest import TELEGRAM_TOKEN, MakeTelegram
from tests.ports import free_port

pytestmark = pytest.mark.timeout(5)

CHAT = Target(chat_id=4242)
GROUP = Target(chat_id=-1001234567890)
PLAIN = TextFormat.PLAIN


def methods(mock: MockTelegram) -> list[str]:
    return [call.method for call in mock.calls]


# ------------------------------------------------------------------ happy paths


async def test_send_stores_the_text(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    first = await telegram.send_text(CHAT, "Hello", PLAIN)
    second = await telegram.send_text(CHAT, "world", PLAIN)

    assert (first, second) == ("1", "2")
    assert telegram_mock.visible(4242) == [(1, "Hello"), (2, "world")]
    assert telegram_mock.chats() == [4242]


async def test_surrounding_whitespace_is_trimmed(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    await telegram.send_text(CHAT, "  \n Hello there \n\n", PLAIN)

    assert telegram_mock.visible(4242) == [(1, "Hello there")]


async def test_edit_replaces_the_text(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    message_id = await telegram.send_text(CHAT, "Hel", PLAIN)
    await telegram.edit_text(CHAT, message_id, "Hello", PLAIN)

    assert telegram_mock.visible(4242) == [(1, "Hello")]
    assert telegram_mock.messages(4242)[0].edit_date is not None


async def test_edit_with_the_same_text_is_success(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    message_id = await telegram.send_text(CHAT, "Hello", PLAIN)
    await telegram.edit_text(CHAT, message_id, "Hello", PLAIN)
    await telegram.edit_text(CHAT, message_id, " Hello ", PLAIN)  # the same once trimmed

    assert telegram_mock.visible(4242) == [(1, "Hello")]
    edits = [call for call in telegram_mock.calls if call.method == "editMessageText"]
    assert [(call.status, call.description) for call in edits] == [(400, NOT_MODIFIED)] * 2


async def test_delete_removes_the_message(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    await telegram.send_text(CHAT, "one", PLAIN)
    await telegram.send_text(CHAT, "two", PLAIN)
    await telegram.delete_message(CHAT, "1")

    assert telegram_mock.visible(4242) == [(2, "two")]
    with pytest.raises(TargetNotFoundError, match="message to delete not found"):
        await telegram.delete_message(CHAT, "1")


async def test_typing_is_a_chat_action(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    await telegram.send_typing(Target(chat_id=4242, thread_id=7))

    assert methods(telegram_mock) == ["sendChatAction"]
    assert telegram_mock.calls[0].ok
    assert telegram_mock.visible(4242) == []


async def test_thread_and_reply_are_kept(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    question = await telegram.send_text(GROUP, "question", PLAIN)
    await telegram.send_text(Target(chat_id=GROUP.chat_id, thread_id=7, reply_to=question), "answer", PLAIN)
    await telegram.send_text(Target(chat_id=GROUP.chat_id, reply_to=999), "reply target gone", PLAIN)

    stored = telegram_mock.messages(GROUP.chat_id)
    assert [(m.text, m.thread_id, m.reply_to) for m in stored] == [
        ("question", None, None),
        ("answer", 7, 1),
        ("reply target gone", None, None),
    ]


# ------------------------------------------------------------------ formatting


async def test_markdown_is_sent_as_text_and_entities(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    await telegram.send_text(CHAT, "Run **make build** now", TextFormat.MARKDOWN)

    [message] = telegram_mock.messages(4242)
    assert message.text == "Run make build now"
    assert message.entities == [{"type": "bold", "offset": 4, "length": 10}]
    assert "parse_mode" not in str(telegram_mock.calls)


async def test_markdown_entities_count_utf16_units(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    await telegram.send_text(CHAT, "🎩 **bold** and `code`", TextFormat.MARKDOWN)

    [message] = telegram_mock.messages(4242)
    assert message.text == "🎩 bold and code"
    assert message.entities == [
        {"type": "bold", "offset": 3, "length": 4},
        {"type": "code", "offset": 12, "length": 4},
    ]


async def test_markdown_headings_add_no_text(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    await telegram.send_text(CHAT, "# Plan\n\n- step", TextFormat.MARKDOWN)

    [message] = telegram_mock.messages(4242)
    assert message.text.startswith("Plan\n")
    assert {"type": "bold", "offset": 0, "length": 4} in message.entities


async def test_markdown_edit_changes_entities(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    message_id = await telegram.send_text(CHAT, "Run make", TextFormat.PLAIN)
    await telegram.edit_text(CHAT, message_id, "Run **make**", TextFormat.MARKDOWN)

    [message] = telegram_mock.messages(4242)
    assert (message.text, message.entities) == ("Run make", [{"type": "bold", "offset": 4, "length": 4}])


async def test_stripped_drops_the_markup(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    await telegram.send_text(CHAT, "Run **make build** now", TextFormat.STRIPPED)

    [message] = telegram_mock.messages(4242)
    assert (message.text, message.entities) == ("Run make build now", [])


async def test_plain_keeps_the_markup(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    await telegram.send_text(CHAT, "Run **make build** now", PLAIN)

    assert telegram_mock.visible(4242) == [(1, "Run **make build** now")]


# ------------------------------------------------------------------ refusals


async def test_edit_of_an_unknown_message_is_target_not_found(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    await telegram.send_text(CHAT, "Hello", PLAIN)

    with pytest.raises(TargetNotFoundError, match="message to edit not found") as raised:
        await telegram.edit_text(CHAT, "99", "Hi", PLAIN)
    with pytest.raises(TargetNotFoundError):
        await telegram.edit_text(Target(chat_id=777), "1", "Hi", PLAIN)

    assert (raised.value.platform, raised.value.target) == ("telegram", "4242")
    assert telegram_mock.visible(4242) == [(1, "Hello")]


async def test_too_long_is_rejected(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    await telegram.send_text(CHAT, "x" * 4096, PLAIN)
    await telegram.send_text(CHAT, "🎩" * 2048, PLAIN)  # 4096 UTF-16 units: always safe

    with pytest.raises(PayloadRejectedError, match="message is too long") as raised:
        await telegram.send_text(CHAT, "x" * 4097, PLAIN)

    assert raised.value.reason is RejectReason.TOO_LONG
    assert [len(text) for _, text in telegram_mock.visible(4242)] == [4096, 2048]


async def test_empty_text_is_rejected(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    with pytest.raises(PayloadRejectedError) as raised:
        await telegram.send_text(CHAT, " \n\t ", PLAIN)

    assert raised.value.reason is RejectReason.EMPTY
    assert telegram_mock.visible(4242) == []


async def test_parse_error_is_bad_format(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    telegram_mock.add_fault(
        "sendMessage", 1, {"status": 400, "description": "Bad Request: can't parse entities: Can't find end"}
    )

    with pytest.raises(PayloadRejectedError) as raised:
        await telegram.send_text(CHAT, "Run **make", TextFormat.MARKDOWN)

    assert raised.value.reason is RejectReason.BAD_FORMAT


async def test_blocked_is_forbidden(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    telegram_mock.add_fault("sendMessage", 1, {"status": 403, "description": "Forbidden: bot was blocked by the user"})

    with pytest.raises(ForbiddenError, match="blocked"):
        await telegram.send_text(CHAT, "Hello", PLAIN)


# ------------------------------------------------------------------ transient failures


async def test_scripted_429_is_rate_limited(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    telegram_mock.add_fault("editMessageText", 1, {"status": 429, "retry_after_s": 3})
    message_id = await telegram.send_text(CHAT, "A", PLAIN)

    with pytest.raises(RateLimitedError) as raised:
        await telegram.edit_text(CHAT, message_id, "AB", PLAIN)

    assert raised.value.retry_after_s == 3.0
    assert methods(telegram_mock) == ["sendMessage", "editMessageText"]  # aiogram did not retry
    assert telegram_mock.calls[-1].retry_after_s == 3.0
    assert telegram_mock.visible(4242) == [(1, "A")]


async def test_documented_rate_limits_answer_429(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    telegram_mock.rate_limits = True
    for text in ("one", "two", "three"):  # the per-chat burst
        await telegram.send_text(CHAT, text, PLAIN)

    with pytest.raises(RateLimitedError) as sent:
        await telegram.send_text(CHAT, "four", PLAIN)
    with pytest.raises(RateLimitedError) as edited:  # edits count toward flood control too
        await telegram.edit_text(CHAT, "1", "one!", PLAIN)
    await telegram.send_text(Target(chat_id=4343), "another chat", PLAIN)

    assert sent.value.retry_after_s == edited.value.retry_after_s == 1.0
    assert [call.status for call in telegram_mock.calls] == [200, 200, 200, 429, 429, 200]
    assert telegram_mock.visible(4242) == [(1, "one"), (2, "two"), (3, "three")]


async def test_5xx_to_a_send_is_uncertain(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    telegram_mock.add_fault("sendMessage", 1, {"status": 502})

    with pytest.raises(UncertainDeliveryError, match="Bad Gateway"):  # Telegram may have stored it
        await telegram.send_text(CHAT, "Hello", PLAIN)

    assert methods(telegram_mock) == ["sendMessage"]
    assert telegram_mock.visible(4242) == []


async def test_5xx_to_an_edit_delete_or_typing_is_platform_unavailable(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    mid = await telegram.send_text(CHAT, "Hello", PLAIN)
    for method in ("editMessageText", "deleteMessage", "sendChatAction"):
        telegram_mock.add_fault(method, 1, {"status": 500, "description": "Internal Server Error"})

    with pytest.raises(PlatformUnavailableError, match="Internal Server Error"):  # safe to repeat
        await telegram.edit_text(CHAT, mid, "Hello, world", PLAIN)
    with pytest.raises(PlatformUnavailableError):
        await telegram.delete_message(CHAT, mid)
    with pytest.raises(PlatformUnavailableError):
        await telegram.send_typing(CHAT)

    assert telegram_mock.visible(4242) == [(1, "Hello")]


async def test_a_message_that_is_not_the_bots_is_frozen(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    person = telegram_mock.user_message(4242, "a person's question")

    with pytest.raises(MessageFrozenError, match="message can't be edited"):
        await telegram.edit_text(CHAT, str(person), "x", PLAIN)


async def test_an_edit_telegram_refuses_for_good_is_frozen(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    mid = await telegram.send_text(CHAT, "Hello", PLAIN)
    telegram_mock.add_fault(
        "editMessageText", 1, {"status": 400, "description": "Bad Request: message can't be edited"}
    )

    with pytest.raises(MessageFrozenError, match="message can't be edited") as raised:
        await telegram.edit_text(CHAT, mid, "Hello, world", PLAIN)

    assert (raised.value.platform, raised.value.target) == ("telegram", "4242")
    assert telegram_mock.visible(4242) == [(1, "Hello")]


async def test_connection_refused_is_platform_unavailable(make_telegram: MakeTelegram) -> None:
    telegram = make_telegram(base_url=f"http://127.0.0.1:{free_port()}")

    with pytest.raises(PlatformUnavailableError):
        await telegram.send_text(CHAT, "Hello", PLAIN)


async def test_timeout_after_commit_is_uncertain_and_landed(
    make_telegram: MakeTelegram, telegram_mock: MockTelegram
) -> None:
    telegram = make_telegram(send_timeout_s=0.3)
    telegram_mock.add_fault("sendMessage", 1, "timeout_after_commit")
    started = time.monotonic()

    with pytest.raises(UncertainDeliveryError):
        await telegram.send_text(CHAT, "Hello", PLAIN)

    assert 0.25 < time.monotonic() - started < 1.0
    assert telegram_mock.visible(4242) == [(1, "Hello")]
    assert len(telegram_mock.calls) == 1


async def test_timeout_before_commit_is_uncertain_and_lost(
    make_telegram: MakeTelegram, telegram_mock: MockTelegram
) -> None:
    telegram = make_telegram(send_timeout_s=0.3)
    telegram_mock.add_fault("sendMessage", 1, "timeout_before_commit")

    with pytest.raises(UncertainDeliveryError):
        await telegram.send_text(CHAT, "Hello", PLAIN)
    await telegram.send_text(CHAT, "next", PLAIN)

    assert telegram_mock.visible(4242) == [(1, "next")]


async def test_latency_delays_but_delivers(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    telegram_mock.set_latency("sendMessage", [200])
    started = time.monotonic()
    await telegram.send_text(CHAT, "slow", PLAIN)
    middle = time.monotonic()
    await telegram.send_text(CHAT, "fast", PLAIN)

    assert middle - started >= 0.2
    assert time.monotonic() - middle < 0.2
    assert telegram_mock.visible(4242) == [(1, "slow"), (2, "fast")]


async def test_latency_past_the_timeout_lands_later(make_telegram: MakeTelegram, telegram_mock: MockTelegram) -> None:
    telegram = make_telegram(send_timeout_s=0.1)
    telegram_mock.set_latency("sendMessage", [250])

    with pytest.raises(UncertainDeliveryError):
        await telegram.send_text(CHAT, "late", PLAIN)
    assert telegram_mock.visible(4242) == []
    for _ in range(50):  # the mock still processes the call the client gave up on
        await asyncio.sleep(0.02)
        if telegram_mock.visible(4242):
            break

    assert telegram_mock.visible(4242) == [(1, "late")]


# ------------------------------------------------------------------ secrets


async def test_the_token_is_never_shown(make_telegram: MakeTelegram, telegram_mock: MockTelegram) -> None:
    telegram = make_telegram(send_timeout_s=0.3)
    telegram_mock.add_fault("sendMessage", 1, {"status": 502})
    telegram_mock.add_fault("sendMessage", 2, "timeout_before_commit")
    errors: list[DeliveryError] = []
    for _ in range(2):
        with pytest.raises(DeliveryError) as raised:
            await telegram.send_text(CHAT, "Hello", PLAIN)
        errors.append(raised.value)
    with pytest.raises(DeliveryError) as not_found:
        await telegram.edit_text(CHAT, "5", "x", PLAIN)
    errors.append(not_found.value)

    broken = make_telegram(base_url="http://127.0.0.1:99999")  # aiohttp puts the whole URL in its error
    with pytest.raises(PlatformUnavailableError) as invalid_url:
        await broken.send_text(CHAT, "Hello", PLAIN)
    errors.append(invalid_url.value)

    secret = TELEGRAM_TOKEN.partition(":")[2]
    shown = [repr(telegram), str(telegram)]
    shown += ["".join(traceback.format_exception(error)) + repr(error) for error in errors]
    assert all(secret not in text for text in shown)
    assert [type(error) for error in errors] == [
        UncertainDeliveryError,  # a 502 to a create
        AnswerTimeoutError,  # no answer in time
        NoMessageToEditError,
        PlatformUnavailableError,
    ]
    assert "/bot<token>/sendMessage" in str(invalid_url.value)


def test_a_malformed_token_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as raised:
        TelegramAdapter("not-a-token-s3cr3t")

    assert "s3cr3t" not in str(raised.value)
