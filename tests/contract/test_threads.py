"""Contract: :class:`core.ports.Threads` on every adapter, through its real SDK, against its mock.

Each platform: an anchor message, a thread opened under it, a message sent and edited there, and what a person
then sees (Telegram: a reply to the anchor; Slack: a reply in the anchor's thread; Discord: a message in the
public thread started from the anchor). Then the refusals and the platform's errors.
"""

from __future__ import annotations

import pytest

from streamrelay.adapters.discord import DiscordAdapter
from streamrelay.adapters.slack import SlackAdapter
from streamrelay.adapters.telegram import TelegramAdapter
from streamrelay.core.errors import (
    PermanentDeliveryError,
    RateLimitedError,
    TargetNotFoundError,
    UncertainDeliveryError,
)
from streamrelay.core.events import Target
from streamrelay.core.ports import TextFormat, Threads
from streamrelay.mocks.discord import MockDiscord
from streamrelay.mocks.slack import MockSlack
from streamrelay.mocks.telegram import MockTelegram
from tests.contract.conftest import MakeDiscord

pytestmark = pytest.mark.timeout(5)

PLAIN = TextFormat.PLAIN
TELEGRAM_GROUP = Target(chat_id=-1001234567890)
SLACK_CHANNEL = Target(chat_id="C0123456789")
DISCORD_CHANNEL = Target(chat_id=1100000000000000001)


@pytest.mark.parametrize("fixture", ["telegram", "slack", "discord_adapter"])
def test_every_platform_adapter_has_threads(request: pytest.FixtureRequest, fixture: str) -> None:
    assert isinstance(request.getfixturevalue(fixture), Threads)


# ------------------------------------------------------------------ Telegram: a reply chain


async def test_telegram_thread_is_a_reply_chain_under_the_anchor(
    telegram: TelegramAdapter, telegram_mock: MockTelegram
) -> None:
    anchor = await telegram.send_text(TELEGRAM_GROUP, "Plan: three steps", PLAIN)
    calls_before = len(telegram_mock.calls)

    assert telegram.thread_refusal(TELEGRAM_GROUP) is None
    thread = await telegram.open_thread(TELEGRAM_GROUP, anchor, "researcher")
    assert len(telegram_mock.calls) == calls_before  # no call: a reply chain needs none
    assert thread == Target(chat_id=TELEGRAM_GROUP.chat_id, reply_to=anchor)

    step = await telegram.send_text(thread, "step 1", PLAIN)
    await telegram.edit_text(thread, step, "step 1: done", PLAIN)
    later = await telegram.send_text(thread, "step 2", PLAIN)

    shown = [(m.message_id, m.text, m.reply_to) for m in telegram_mock.messages(TELEGRAM_GROUP.chat_id)]
    assert shown == [
        (int(anchor), "Plan: three steps", None),
        (int(step), "step 1: done", int(anchor)),  # a person sees which message each reply answers
        (int(later), "step 2", int(anchor)),
    ]


async def test_telegram_thread_keeps_the_forum_topic(telegram: TelegramAdapter, telegram_mock: MockTelegram) -> None:
    topic = Target(chat_id=TELEGRAM_GROUP.chat_id, thread_id=7)
    anchor = await telegram.send_text(topic, "Plan", PLAIN)

    thread = await telegram.open_thread(topic, anchor, "researcher")
    await telegram.send_text(thread, "step", PLAIN)

    assert thread == Target(chat_id=TELEGRAM_GROUP.chat_id, thread_id=7, reply_to=anchor)
    last = telegram_mock.messages(TELEGRAM_GROUP.chat_id)[-1]
    assert (last.text, last.thread_id, last.reply_to) == ("step", 7, int(anchor))


async def test_telegram_anchor_must_be_a_message_id(telegram: TelegramAdapter) -> None:
    with pytest.raises(TargetNotFoundError):
        await telegram.open_thread(TELEGRAM_GROUP, "not-an-id", "researcher")


# ------------------------------------------------------------------ Slack: thread_ts


async def test_slack_thread_is_the_anchor_thread(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    anchor = await slack.send_text(SLACK_CHANNEL, "Plan: three steps", PLAIN)
    calls_before = len(slack_mock.calls)

    assert slack.thread_refusal(SLACK_CHANNEL) is None
    thread = await slack.open_thread(SLACK_CHANNEL, anchor, "researcher")
    assert len(slack_mock.calls) == calls_before  # no call: the thread exists with its first reply
    assert thread == Target(chat_id=SLACK_CHANNEL.chat_id, thread_id=anchor)

    step = await slack.send_text(thread, "step 1", PLAIN)
    await slack.edit_text(thread, step, "step 1: done", PLAIN)

    shown = [(m.ts, m.text, m.thread_ts) for m in slack_mock.messages(SLACK_CHANNEL.chat_id)]
    assert shown == [(anchor, "Plan: three steps", None), (step, "step 1: done", anchor)]


async def test_slack_thread_under_a_person_message(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    question = slack_mock.post_user_message(SLACK_CHANNEL.chat_id, "why?")

    thread = await slack.open_thread(SLACK_CHANNEL, question, "researcher")
    await slack.send_text(thread, "because", PLAIN)

    assert [(m.text, m.thread_ts) for m in slack_mock.messages(SLACK_CHANNEL.chat_id)][-1] == ("because", question)


@pytest.mark.parametrize(
    "target",
    [
        Target(chat_id=SLACK_CHANNEL.chat_id, thread_id="1700000000.000100"),
        Target(chat_id=SLACK_CHANNEL.chat_id, reply_to="1700000000.000100"),  # sent as thread_ts too
    ],
)
async def test_slack_threads_do_not_nest(slack: SlackAdapter, slack_mock: MockSlack, target: Target) -> None:
    assert slack.thread_refusal(target) == "already in a thread: Slack threads do not nest"
    with pytest.raises(PermanentDeliveryError, match="do not nest"):
        await slack.open_thread(target, "1700000000.000200", "researcher")
    assert slack_mock.calls == []


async def test_slack_missing_anchor_is_found_out_by_the_first_reply(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    thread = await slack.open_thread(SLACK_CHANNEL, "1600000000.000100", "researcher")

    with pytest.raises(TargetNotFoundError, match="thread_not_found"):
        await slack.send_text(thread, "step", PLAIN)
    with pytest.raises(TargetNotFoundError):
        await slack.open_thread(SLACK_CHANNEL, "yesterday", "researcher")
    assert slack_mock.messages(SLACK_CHANNEL.chat_id) == []


# ------------------------------------------------------------------ Discord: Start Thread from Message


async def test_discord_thread_is_a_public_thread_started_from_the_anchor(
    discord_adapter: DiscordAdapter, discord_mock: MockDiscord
) -> None:
    anchor = await discord_adapter.send_text(DISCORD_CHANNEL, "Plan: three steps", PLAIN)

    assert discord_adapter.thread_refusal(DISCORD_CHANNEL) is None
    thread = await discord_adapter.open_thread(DISCORD_CHANNEL, anchor, "researcher")
    step = await discord_adapter.send_text(thread, "step 1", PLAIN)
    await discord_adapter.edit_text(thread, step, "step 1: done", PLAIN)

    assert thread == Target(chat_id=int(anchor))  # a thread is a channel; its id is the anchor's
    started = [(t.id, t.parent_id, t.name) for t in discord_mock.threads(DISCORD_CHANNEL.chat_id)]
    assert started == [(anchor, str(DISCORD_CHANNEL.chat_id), "researcher")]
    assert discord_mock.visible(thread.chat_id) == [(step, "step 1: done")]
    assert discord_mock.visible(DISCORD_CHANNEL.chat_id) == [(anchor, "Plan: three steps")]
    call = next(c for c in discord_mock.calls if c.method == "startThreadFromMessage")
    assert (call.chat_id, call.message_id, call.status) == (str(DISCORD_CHANNEL.chat_id), anchor, 201)


@pytest.mark.parametrize(
    ("title", "name"),
    [("a" * 150, "a" * 100), ("researcher:\n  find   sources", "researcher: find sources"), (" \n ", "thread")],
)
async def test_discord_thread_names_fit_discord(
    discord_adapter: DiscordAdapter, discord_mock: MockDiscord, title: str, name: str
) -> None:
    anchor = await discord_adapter.send_text(DISCORD_CHANNEL, "Plan", PLAIN)

    await discord_adapter.open_thread(DISCORD_CHANNEL, anchor, title)

    assert [t.name for t in discord_mock.threads()] == [name]


async def test_discord_threads_do_not_nest(discord_adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    anchor = await discord_adapter.send_text(DISCORD_CHANNEL, "Plan", PLAIN)
    thread = await discord_adapter.open_thread(DISCORD_CHANNEL, anchor, "researcher")
    inner = await discord_adapter.send_text(thread, "step", PLAIN)
    calls_before = len(discord_mock.calls)

    for target in (thread, Target(chat_id=DISCORD_CHANNEL.chat_id, thread_id=thread.chat_id)):
        assert discord_adapter.thread_refusal(target) == "already in a thread: Discord threads do not nest"
        with pytest.raises(PermanentDeliveryError, match="do not nest"):
            await discord_adapter.open_thread(target, inner, "nested")
    assert len(discord_mock.calls) == calls_before  # refused without a call


async def test_discord_a_thread_the_adapter_did_not_start_is_refused_by_discord(
    discord_adapter: DiscordAdapter, make_discord: MakeDiscord
) -> None:
    anchor = await discord_adapter.send_text(DISCORD_CHANNEL, "Plan", PLAIN)
    thread = await discord_adapter.open_thread(DISCORD_CHANNEL, anchor, "researcher")
    inner = await discord_adapter.send_text(thread, "step", PLAIN)
    other = make_discord()  # another process: it never saw the thread start

    assert other.thread_refusal(thread) is None
    with pytest.raises(PermanentDeliveryError, match="50024"):
        await other.open_thread(thread, inner, "nested")


async def test_discord_refusals(discord_adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    anchor = await discord_adapter.send_text(DISCORD_CHANNEL, "Plan", PLAIN)
    first = await discord_adapter.open_thread(DISCORD_CHANNEL, anchor, "researcher")

    # Asked again (a retry after a timeout): Discord answers 160004, and the thread is the one there.
    assert await discord_adapter.open_thread(DISCORD_CHANNEL, anchor, "researcher") == first
    with pytest.raises(TargetNotFoundError) as unknown_message:
        await discord_adapter.open_thread(DISCORD_CHANNEL, "1300000000000000001", "researcher")
    discord_mock.missing_channels.add("1100000000000000002")
    with pytest.raises(TargetNotFoundError) as unknown_channel:
        await discord_adapter.open_thread(Target(chat_id=1100000000000000002), anchor, "researcher")

    assert "10008" in str(unknown_message.value) and "10003" in str(unknown_channel.value)
    assert len(discord_mock.threads()) == 1


async def test_discord_thread_start_429_and_timeout(discord_adapter: DiscordAdapter, discord_mock: MockDiscord) -> None:
    anchor = await discord_adapter.send_text(DISCORD_CHANNEL, "Plan", PLAIN)
    discord_mock.add_fault("startThreadFromMessage", 1, {"status": 429, "retry_after_s": 2})
    discord_mock.add_fault("startThreadFromMessage", 2, "timeout_after_commit")

    with pytest.raises(RateLimitedError) as limited:
        await discord_adapter.open_thread(DISCORD_CHANNEL, anchor, "researcher")
    assert limited.value.retry_after_s == 2 and discord_mock.threads() == []
    discord_adapter.send_timeout_s = 0.5
    with pytest.raises(UncertainDeliveryError):
        await discord_adapter.open_thread(DISCORD_CHANNEL, anchor, "researcher")
    assert [t.id for t in discord_mock.threads()] == [anchor]  # it landed: the thread exists
