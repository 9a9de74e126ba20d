"""Contract: settling a create whose answer was lost (``settle_send``), each adapter through its real SDK against
its mock over loopback HTTP.

The platform stored the message and then answered 502 (``after_commit``), or never stored it: the create raises
``UncertainDeliveryError``, and ``settle_send`` finds out which, by the platform's own means: Discord a re-send
with the same nonce, Slack the delivery id in the message metadata, Telegram an id probe with editMessageText when
the bot token is the sidecar's alone. Assertions read what a person sees (the mock's stored messages) and the
calls the platform received.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from streamrelay.adapters.discord import DiscordAdapter
from streamrelay.adapters.slack import SlackAdapter
from streamrelay.adapters.slack.settle import EVENT_TYPE, MAX_PAGES, PAGE_SIZE
from streamrelay.adapters.telegram import TelegramAdapter
from streamrelay.adapters.telegram.settle import UNBOUNDED_PROBES
from streamrelay.adapters.web.adapter import WebAdapter
from streamrelay.core.errors import (
    PlatformUnavailableError,
    RateLimitedError,
    RateScope,
    TargetNotFoundError,
    UncertainDeliveryError,
)
from streamrelay.core.events import Target
from streamrelay.core.ports import PendingSend, Settlement, SettleOutcome, TextFormat
from streamrelay.mocks.discord import MockDiscord
from streamrelay.mocks.slack import MockSlack
from streamrelay.mocks.telegram import MockTelegram
from tests.contract.conftest import MakeTelegram

pytestmark = pytest.mark.timeout(10)

PLAIN, MARKDOWN = TextFormat.PLAIN, TextFormat.MARKDOWN
FOUND, NOT_SENT, UNKNOWN = SettleOutcome.FOUND, SettleOutcome.NOT_SENT, SettleOutcome.UNKNOWN
BAD_GATEWAY = {"status": 502, "description": "Bad Gateway"}
DELIVERY = "sr0123456789abcdef012345"
"""A delivery id as the core makes them: 25 characters at most (Discord's nonce limit)."""


def calls(mock: MockTelegram | MockSlack | MockDiscord, method: str) -> list[int | None]:
    """The statuses answered to ``method``, in order."""
    return [call.status for call in mock.calls if call.method == method]


# ------------------------------------------------------------------ Discord: the same nonce again

DISCORD_CHANNEL = 1100000000000000001
DISCORD_CHAT = Target(chat_id=DISCORD_CHANNEL)


async def test_discord_a_stored_create_is_found_by_its_nonce(
    discord_adapter: DiscordAdapter, discord_mock: MockDiscord
) -> None:
    discord_mock.add_fault("createMessage", 1, BAD_GATEWAY, after_commit=True)
    with pytest.raises(UncertainDeliveryError, match="Bad Gateway"):
        await discord_adapter.send_text(DISCORD_CHAT, "Your refund was approved.", PLAIN, delivery_id=DELIVERY)
    [(stored_id, _)] = discord_mock.visible(DISCORD_CHANNEL)

    settled = await discord_adapter.settle_send(DISCORD_CHAT, PendingSend(DELIVERY, "Your refund was approved.", PLAIN))

    assert settled == Settlement(FOUND, str(stored_id))
    assert discord_mock.visible(DISCORD_CHANNEL) == [(stored_id, "Your refund was approved.")]  # one message
    assert calls(discord_mock, "createMessage") == [502, 200]
    [message] = discord_mock.messages(DISCORD_CHANNEL)
    assert message.nonce == DELIVERY


async def test_discord_a_lost_create_is_made_by_the_settlement(
    discord_adapter: DiscordAdapter, discord_mock: MockDiscord
) -> None:
    discord_mock.add_fault("createMessage", 1, BAD_GATEWAY)  # refused before storing
    with pytest.raises(UncertainDeliveryError):
        await discord_adapter.send_text(DISCORD_CHAT, "Hello", PLAIN, delivery_id=DELIVERY)
    assert discord_mock.visible(DISCORD_CHANNEL) == []

    settled = await discord_adapter.settle_send(DISCORD_CHAT, PendingSend(DELIVERY, "Hello", PLAIN))

    [(stored_id, text)] = discord_mock.visible(DISCORD_CHANNEL)
    assert settled == Settlement(FOUND, str(stored_id)) and text == "Hello"
    again = await discord_adapter.settle_send(DISCORD_CHAT, PendingSend(DELIVERY, "Hello", PLAIN))
    assert again == settled and len(discord_mock.visible(DISCORD_CHANNEL)) == 1  # asked twice: still one


async def test_discord_a_stored_then_deleted_create_is_not_sent(
    discord_adapter: DiscordAdapter, discord_mock: MockDiscord
) -> None:
    message_id = await discord_adapter.send_text(DISCORD_CHAT, "Hello", PLAIN, delivery_id=DELIVERY)
    await discord_adapter.delete_message(DISCORD_CHAT, message_id)

    settled = await discord_adapter.settle_send(DISCORD_CHAT, PendingSend(DELIVERY, "Hello", PLAIN))

    assert settled == Settlement(NOT_SENT)  # 404 10008: gone, like any deleted part
    assert discord_mock.visible(DISCORD_CHANNEL) == []


async def test_discord_a_5xx_to_the_settlement_is_unavailable(
    discord_adapter: DiscordAdapter, discord_mock: MockDiscord
) -> None:
    discord_mock.add_fault("createMessage", 1, BAD_GATEWAY, after_commit=True)
    with pytest.raises(PlatformUnavailableError, match="settleMessage"):  # the nonce makes it safe to repeat
        await discord_adapter.settle_send(DISCORD_CHAT, PendingSend(DELIVERY, "Hello", PLAIN))

    settled = await discord_adapter.settle_send(DISCORD_CHAT, PendingSend(DELIVERY, "Hello", PLAIN))

    assert settled.outcome is FOUND and len(discord_mock.visible(DISCORD_CHANNEL)) == 1


# ------------------------------------------------------------------ Slack: the delivery id in the metadata

SLACK_CHANNEL = "C0123456789"
SLACK_CHAT = Target(chat_id=SLACK_CHANNEL)


async def test_slack_a_stored_create_is_found_by_its_metadata(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    before = await slack.send_text(SLACK_CHAT, "Earlier answer", PLAIN, delivery_id="sr-earlier")
    slack_mock.user_message(SLACK_CHANNEL, "thanks, and the refund?")
    slack_mock.add_fault("chat.postMessage", 2, BAD_GATEWAY, after_commit=True)
    with pytest.raises(UncertainDeliveryError, match="HTTP 502"):
        await slack.send_text(SLACK_CHAT, "**Refund** approved", MARKDOWN, delivery_id=DELIVERY)
    stored = slack_mock.messages(SLACK_CHANNEL)[-1]
    assert stored.metadata == {"event_type": EVENT_TYPE, "event_payload": {"delivery_id": DELIVERY}}

    settled = await slack.settle_send(SLACK_CHAT, PendingSend(DELIVERY, "**Refund** approved", MARKDOWN, before))

    assert settled == Settlement(FOUND, stored.ts)
    assert [m.text for m in slack_mock.messages(SLACK_CHANNEL)] == [
        "Earlier answer",
        "thanks, and the refund?",
        "**Refund** approved",
    ]
    assert calls(slack_mock, "conversations.history") == [200]


async def test_slack_a_lost_create_is_not_sent(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    before = await slack.send_text(SLACK_CHAT, "Earlier answer", PLAIN, delivery_id="sr-earlier")
    slack_mock.add_fault("chat.postMessage", 2, BAD_GATEWAY)
    with pytest.raises(UncertainDeliveryError):
        await slack.send_text(SLACK_CHAT, "Hello", PLAIN, delivery_id=DELIVERY)

    settled = await slack.settle_send(SLACK_CHAT, PendingSend(DELIVERY, "Hello", PLAIN, before))

    assert settled == Settlement(NOT_SENT)
    assert [m.text for m in slack_mock.messages(SLACK_CHANNEL)] == ["Earlier answer"]


async def test_slack_a_thread_is_read_with_conversations_replies(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    parent = slack_mock.user_message(SLACK_CHANNEL, "question?")
    thread = Target(chat_id=SLACK_CHANNEL, thread_id=str(parent))
    slack_mock.add_fault("chat.postMessage", 1, BAD_GATEWAY, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await slack.send_text(thread, "answer", PLAIN, delivery_id=DELIVERY)

    settled = await slack.settle_send(thread, PendingSend(DELIVERY, "answer", PLAIN))

    [reply] = [m for m in slack_mock.messages(SLACK_CHANNEL) if m.thread_ts == parent]
    assert settled == Settlement(FOUND, reply.ts)
    assert calls(slack_mock, "conversations.replies") == [200] and calls(slack_mock, "conversations.history") == []


async def test_slack_pages_are_followed_within_a_bound(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    before = await slack.send_text(SLACK_CHAT, "start", PLAIN)
    slack_mock.add_fault("chat.postMessage", 2, BAD_GATEWAY, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await slack.send_text(SLACK_CHAT, "ours", PLAIN, delivery_id=DELIVERY)
    for n in range(2 * PAGE_SIZE):  # newer messages: ours is on the third page, newest first
        slack_mock.user_message(SLACK_CHANNEL, f"chatter {n}")

    settled = await slack.settle_send(SLACK_CHAT, PendingSend(DELIVERY, "ours", PLAIN, before))

    assert settled.outcome is FOUND and settled.message_id == slack_mock.messages(SLACK_CHANNEL)[1].ts
    assert calls(slack_mock, "conversations.history") == [200, 200, 200]

    for n in range(MAX_PAGES * PAGE_SIZE):  # now it is past the bound: Slack could not be read that far
        slack_mock.user_message(SLACK_CHANNEL, f"more chatter {n}")
    assert (await slack.settle_send(SLACK_CHAT, PendingSend(DELIVERY, "ours", PLAIN, before))).outcome is UNKNOWN


async def test_slack_a_history_the_app_may_not_read_is_unknown(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    slack_mock.add_fault("conversations.history", 1, {"status": 400, "description": "missing_scope"})

    settled = await slack.settle_send(SLACK_CHAT, PendingSend(DELIVERY, "Hello", PLAIN))

    assert settled == Settlement(UNKNOWN)


async def test_slack_settlement_failures_map_like_every_call(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    slack_mock.add_fault("conversations.history", 1, {"status": 503})
    slack_mock.add_fault("conversations.history", 2, {"status": 429, "retry_after_s": 3})

    with pytest.raises(PlatformUnavailableError, match=r"conversations\.history: HTTP 503"):  # a read: safe to repeat
        await slack.settle_send(SLACK_CHAT, PendingSend(DELIVERY, "Hello", PLAIN))
    with pytest.raises(RateLimitedError) as limited:
        await slack.settle_send(SLACK_CHAT, PendingSend(DELIVERY, "Hello", PLAIN))

    assert (limited.value.retry_after_s, limited.value.scope) == (3.0, RateScope.METHOD)


# ------------------------------------------------------------------ Telegram: the id probe

PRIVATE = Target(chat_id=4242)
SUPERGROUP = Target(chat_id=-1001234567890)


def exclusive(
    text: str, after_id: str | None, fmt: TextFormat = PLAIN, known: frozenset[str] = frozenset()
) -> PendingSend:
    return PendingSend(DELIVERY, text, fmt, after_id=after_id, known_ids=known, exclusive=True)


async def test_telegram_exclusive_finds_a_stored_send_past_a_persons_message(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    first = await telegram.send_text(PRIVATE, "Looking it up.", PLAIN)
    person = telegram_mock.user_message(4242, "and the refund?")
    telegram_mock.add_fault("sendMessage", 2, BAD_GATEWAY, after_commit=True)
    with pytest.raises(UncertainDeliveryError, match="Bad Gateway"):
        await telegram.send_text(PRIVATE, "**Refund** of 49.99 EUR approved.", MARKDOWN)
    [*_, (stored_id, shown)] = telegram_mock.visible(4242)

    settled = await telegram.settle_send(PRIVATE, exclusive("**Refund** of 49.99 EUR approved.", first, MARKDOWN))

    assert settled == Settlement(FOUND, str(stored_id)) and stored_id == person + 1
    assert telegram_mock.visible(4242) == [(1, "Looking it up."), (stored_id, shown)]  # nothing changed, nothing twice
    probes = [(c.message_id, c.description) for c in telegram_mock.calls if c.method == "editMessageText"]
    assert [mid for mid, _ in probes] == [person, stored_id]
    assert "can't be edited" in str(probes[0][1]) and "not modified" in str(probes[1][1])


async def test_telegram_exclusive_supergroup_not_sent_when_nothing_was_stored(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    first = await telegram.send_text(SUPERGROUP, "one", PLAIN)
    telegram_mock.user_message(SUPERGROUP.chat_id, "a person")
    telegram_mock.add_fault("sendMessage", 2, BAD_GATEWAY)
    with pytest.raises(UncertainDeliveryError):
        await telegram.send_text(SUPERGROUP, "two", PLAIN)

    settled = await telegram.settle_send(SUPERGROUP, exclusive("two", first))

    assert settled == Settlement(NOT_SENT)  # its own ids, one after another: nothing exists after the person's
    assert calls(telegram_mock, "editMessageText") == [400, 400]


async def test_telegram_a_private_chat_passes_ids_of_other_chats(make_telegram: MakeTelegram) -> None:
    async with MockTelegram(account_ids=True) as mock:  # as on Telegram: private chats share the bot's counter
        telegram = make_telegram(base_url=mock.base_url)
        first = await telegram.send_text(PRIVATE, "one", PLAIN)
        await telegram.send_text(Target(chat_id=5151), "another person's answer", PLAIN)
        mock.user_message(5151, "someone else")
        mock.add_fault("sendMessage", 3, BAD_GATEWAY, after_commit=True)
        with pytest.raises(UncertainDeliveryError):
            await telegram.send_text(PRIVATE, "two", PLAIN)

        settled = await telegram.settle_send(PRIVATE, exclusive("two", first))

        assert settled == Settlement(FOUND, "4") and mock.visible(4242) == [(1, "one"), (4, "two")]
        assert [c.message_id for c in mock.calls if c.method == "editMessageText"] == [2, 3, 4]


async def test_telegram_a_private_chat_with_nothing_stored_needs_a_bound_then_settles_below_it(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    first = await telegram.send_text(PRIVATE, "one", PLAIN)
    telegram_mock.add_fault("sendMessage", 2, BAD_GATEWAY)
    with pytest.raises(UncertainDeliveryError):
        await telegram.send_text(PRIVATE, "two", PLAIN)

    settled = await telegram.settle_send(PRIVATE, exclusive("two", first))

    assert settled == Settlement(SettleOutcome.NEEDS_BOUND)  # a missing id may be another chat's: no proof
    assert calls(telegram_mock, "editMessageText") == [400] * UNBOUNDED_PROBES  # then a bound is asked for
    again = await telegram.send_text(PRIVATE, "two", PLAIN)  # the core sends the part again: the bound
    bounded = replace(exclusive("two", first), before_id=again)
    assert await telegram.settle_send(PRIVATE, bounded) == Settlement(SettleOutcome.NOT_SENT)
    assert [text for _, text in telegram_mock.visible(PRIVATE.chat_id)] == ["one", "two"]


async def test_telegram_a_private_chat_bounded_settle_finds_the_first_copy(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    first = await telegram.send_text(PRIVATE, "one", PLAIN)
    telegram_mock.add_fault("sendMessage", 2, BAD_GATEWAY, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await telegram.send_text(PRIVATE, "two", PLAIN)
    again = await telegram.send_text(PRIVATE, "two", PLAIN)
    bounded = replace(exclusive("two", first), before_id=again)
    settled = await telegram.settle_send(PRIVATE, bounded)
    assert settled.outcome is SettleOutcome.FOUND and settled.message_id != again  # the older copy


async def test_telegram_known_ids_are_skipped_and_gaps_below_them_passed(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    first = await telegram.send_text(SUPERGROUP, "one", PLAIN)
    gone = telegram_mock.user_message(SUPERGROUP.chat_id, "deleted by an admin")
    await telegram.delete_message(SUPERGROUP, str(gone))
    telegram_mock.add_fault("sendMessage", 2, BAD_GATEWAY, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await telegram.send_text(SUPERGROUP, "two", PLAIN)
    later = await telegram.send_text(SUPERGROUP, "three", PLAIN)

    settled = await telegram.settle_send(SUPERGROUP, exclusive("two", first, known=frozenset({later, first})))

    assert settled == Settlement(FOUND, str(gone + 1))
    assert [c.message_id for c in telegram_mock.calls if c.method == "editMessageText"] == [gone, gone + 1]


async def test_telegram_oldest_first_a_later_uncertain_message_is_taken_over(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    first = await telegram.send_text(SUPERGROUP, "one", PLAIN)
    telegram_mock.add_fault("sendMessage", 2, BAD_GATEWAY)  # "two" was lost
    telegram_mock.add_fault("sendMessage", 3, BAD_GATEWAY, after_commit=True)  # "three" was stored
    for text in ("two", "three"):
        with pytest.raises(UncertainDeliveryError):
            await telegram.send_text(SUPERGROUP, text, PLAIN)

    two = await telegram.settle_send(SUPERGROUP, exclusive("two", first))
    assert two == Settlement(FOUND, "2")  # the bot's message there, rewritten: it shows "two" now
    three = await telegram.settle_send(SUPERGROUP, exclusive("three", first, known=frozenset({"2"})))
    assert three == Settlement(NOT_SENT)  # the core sends "three" again: the chat reads in order
    assert telegram_mock.visible(SUPERGROUP.chat_id) == [(1, "one"), (2, "two")]


async def test_telegram_without_exclusive_is_unknown_without_a_call(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    settled = await telegram.settle_send(PRIVATE, PendingSend(DELIVERY, "two", PLAIN, after_id="1"))

    assert settled == Settlement(UNKNOWN) and telegram_mock.calls == []


async def test_telegram_probe_failures_map_like_every_call(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    telegram_mock.add_fault("editMessageText", 1, {"status": 429, "retry_after_s": 4})
    telegram_mock.add_fault("editMessageText", 2, {"status": 502, "description": "Bad Gateway"})

    with pytest.raises(RateLimitedError) as limited:
        await telegram.settle_send(PRIVATE, exclusive("two", None))
    with pytest.raises(PlatformUnavailableError, match="Bad Gateway"):  # an edit: safe to repeat
        await telegram.settle_send(PRIVATE, exclusive("two", None))

    assert limited.value.retry_after_s == 4


# ------------------------------------------------------------------ web: the page itself


@pytest.fixture
async def web() -> AsyncIterator[WebAdapter]:
    adapter = WebAdapter()
    yield adapter
    await adapter.close()


async def test_web_a_kept_part_is_found_and_a_missing_one_not_sent(web: WebAdapter) -> None:
    page = Target(chat_id="run-1")
    part = await web.send_text(page, "Hello", PLAIN, delivery_id=DELIVERY)

    assert await web.settle_send(page, PendingSend(DELIVERY, "Hello", PLAIN)) == Settlement(FOUND, part)
    assert await web.settle_send(page, PendingSend("sr-never", "Hello", PLAIN)) == Settlement(NOT_SENT)
    elsewhere = await web.settle_send(Target(chat_id="run-2"), PendingSend(DELIVERY, "Hello", PLAIN))
    assert elsewhere == Settlement(NOT_SENT)
    await web.delete_message(page, part)
    assert await web.settle_send(page, PendingSend(DELIVERY, "Hello", PLAIN)) == Settlement(NOT_SENT)


async def test_web_in_service_keeps_a_digest_of_each_part_and_still_answers_not_modified(web: WebAdapter) -> None:
    """The service's page keeps no copy of the texts it showed (the browser gets them from the run): an edit to the
    same text is still "not modified", another text is an edit, a deleted part is gone."""
    page = Target(chat_id="run-1")
    text = "An answer 🎉 " * 400
    part = await web.send_text(page, text, PLAIN)
    assert await web.edit_text(page, part, text, PLAIN) is False
    assert await web.edit_text(page, part, text + "more", PLAIN) is True
    assert await web.edit_text(page, part, text + "more", PLAIN) is False
    assert [mid for mid, _ in web.visible("run-1")] == [part]
    assert all(len(kept) < 40 for kept in web._texts.values())
    await web.delete_message(page, part)
    with pytest.raises(TargetNotFoundError):
        await web.edit_text(page, part, text, PLAIN)


async def test_web_recording_keeps_the_texts_it_shows(web: WebAdapter) -> None:
    web.record = True
    page = Target(chat_id="run-1")
    part = await web.send_text(page, "Hello", PLAIN)
    await web.edit_text(page, part, "Hello world", PLAIN)
    assert web.visible("run-1") == [(part, "Hello world")]
