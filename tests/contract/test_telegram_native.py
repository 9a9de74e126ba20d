"""Contract: TelegramAdapter's native streaming (sendMessageDraft) against MockTelegram over loopback HTTP.

The mock runs on a fake clock here, so draft lifetimes (about 30 s) are tested without waiting.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from streamrelay.adapters.telegram import TelegramAdapter
from streamrelay.core.clock import FakeClock
from streamrelay.core.errors import (
    NativeUnavailableError,
    PayloadRejectedError,
    PermanentDeliveryError,
    PlatformUnavailableError,
    RateLimitedError,
    RejectReason,
    TargetNotFoundError,
)
from streamrelay.core.events import Target
from streamrelay.core.ports import NativeStreaming, TextFormat
from streamrelay.mocks.telegram import DRAFT_PEER_INVALID, MockTelegram

pytestmark = pytest.mark.timeout(5)

CHAT = Target(chat_id=4242)
GROUP = Target(chat_id=-1001234567890)
PLAIN = TextFormat.PLAIN


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=1000.0)


@pytest.fixture
async def telegram_mock(clock: FakeClock) -> AsyncIterator[MockTelegram]:
    """Overrides the suite's mock: the same server on a fake clock."""
    async with MockTelegram(clock=clock.now) as mock:
        yield mock


def drafts(mock: MockTelegram) -> list[tuple[int, str]]:
    return [(d.draft_id, d.text) for d in mock.drafts(CHAT.chat_id)]


async def test_start_update_finish(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    native: NativeStreaming = telegram  # mypy checks the port
    handle = await native.stream_start(CHAT, "Hel", PLAIN)
    shown_while_started = drafts(telegram_mock)
    await native.stream_update(CHAT, handle, "Hel", "Hello wor", PLAIN)
    shown_while_updated = drafts(telegram_mock)
    message_id = await native.stream_finish(CHAT, handle, "Hello wor", "Hello world", PLAIN)

    draft_id = int(handle)
    assert draft_id != 0
    assert (shown_while_started, shown_while_updated) == ([(draft_id, "Hel")], [(draft_id, "Hello wor")])
    assert message_id == "1"
    assert telegram_mock.visible(CHAT.chat_id) == [(1, "Hello world")]
    assert drafts(telegram_mock) == []  # the message replaced the draft
    assert [c.method for c in telegram_mock.calls] == ["sendMessageDraft", "sendMessageDraft", "sendMessage"]


async def test_drafts_are_rendered_like_messages(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    await telegram.stream_start(Target(chat_id=4242, thread_id=9), "Run **make** now", TextFormat.MARKDOWN)

    [draft] = telegram_mock.drafts(4242)
    assert (draft.text, draft.entities, draft.thread_id) == (
        "Run make now",
        [{"type": "bold", "offset": 4, "length": 4}],
        9,
    )


async def test_each_start_is_a_new_draft(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    handles = [await telegram.stream_start(CHAT, text, PLAIN) for text in ("one", "two")]

    assert handles[0] != handles[1]
    assert drafts(telegram_mock) == [(int(handles[0]), "one"), (int(handles[1]), "two")]


async def test_groups_are_refused_without_a_call(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    with pytest.raises(NativeUnavailableError) as raised:
        await telegram.stream_start(GROUP, "Hello", PLAIN)

    assert telegram.native_refusal(CHAT) is None
    assert "private chats" in (telegram.native_refusal(GROUP) or "")
    assert telegram.native_refusal(Target(chat_id="@channel")) is not None
    assert (raised.value.platform, raised.value.target) == ("telegram", str(GROUP.chat_id))
    assert telegram_mock.calls == []


async def test_a_private_chat_only_answer_is_native_unavailable(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    telegram_mock.add_fault("sendMessageDraft", 1, {"status": 400, "description": DRAFT_PEER_INVALID})

    with pytest.raises(NativeUnavailableError, match="TEXTDRAFT_PEER_INVALID"):
        await telegram.stream_start(CHAT, "Hello", PLAIN)


async def test_a_server_without_drafts_is_native_unavailable(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    telegram_mock.drafts_enabled = False

    with pytest.raises(NativeUnavailableError, match="Not Found"):
        await telegram.stream_start(CHAT, "Hello", PLAIN)
    message_id = await telegram.send_text(CHAT, "Hello", PLAIN)  # the preview fallback still works

    assert (message_id, telegram_mock.visible(CHAT.chat_id)) == ("1", [(1, "Hello")])


async def test_a_404_elsewhere_stays_permanent(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    telegram_mock.add_fault("sendMessage", 1, {"status": 404})

    with pytest.raises(PermanentDeliveryError) as raised:
        await telegram.send_text(CHAT, "Hello", PLAIN)

    assert type(raised.value) is PermanentDeliveryError  # a wrong base URL, not "no drafts here"


async def test_updates_keep_a_draft_alive(
    telegram: TelegramAdapter, telegram_mock: MockTelegram, clock: FakeClock
) -> None:
    handle = await telegram.stream_start(CHAT, "a", PLAIN)
    clock.advance(25.0)
    await telegram.stream_update(CHAT, handle, "a", "ab", PLAIN)
    clock.advance(25.0)
    alive = drafts(telegram_mock)
    clock.advance(5.0)

    assert alive == [(int(handle), "ab")]
    assert drafts(telegram_mock) == []  # 30 s without an update: gone, nothing persisted
    assert telegram_mock.visible(CHAT.chat_id) == []
    assert await telegram.stream_finish(CHAT, handle, "ab", "abc", PLAIN) == "1"  # finishing never needs the draft


async def test_drafts_count_toward_flood_control(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    telegram_mock.rate_limits = True
    handle = await telegram.stream_start(CHAT, "a", PLAIN)
    for text in ("ab", "abc"):  # the per-chat burst is 3
        await telegram.stream_update(CHAT, handle, text[:-1], text, PLAIN)

    with pytest.raises(RateLimitedError) as raised:
        await telegram.stream_update(CHAT, handle, "abc", "abcd", PLAIN)

    assert raised.value.retry_after_s == 1.0
    assert drafts(telegram_mock) == [(int(handle), "abc")]


async def test_other_failures_translate_as_usual(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    telegram_mock.add_fault("sendMessageDraft", 2, {"status": 502})
    handle = await telegram.stream_start(CHAT, "a", PLAIN)

    with pytest.raises(PlatformUnavailableError, match="Bad Gateway"):
        await telegram.stream_update(CHAT, handle, "a", "ab", PLAIN)
    with pytest.raises(PayloadRejectedError) as too_long:
        await telegram.stream_update(CHAT, handle, "a", "x" * 4097, PLAIN)
    with pytest.raises(TargetNotFoundError):
        await telegram.stream_update(CHAT, "not-a-draft", "a", "ab", PLAIN)

    assert too_long.value.reason is RejectReason.TOO_LONG
    assert drafts(telegram_mock) == [(int(handle), "a")]


async def test_cancel_leaves_the_draft_to_lapse(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    handle = await telegram.stream_start(CHAT, "a", PLAIN)
    await telegram.stream_cancel(CHAT, handle)

    assert [c.method for c in telegram_mock.calls] == ["sendMessageDraft"]
