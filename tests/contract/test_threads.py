"""Contract: :class:`core.ports.Threads` on every adapter, through its real SDK, against its mock.

Each platform: an anchor message, a thread opened under it, a message sent and edited there, and what a person
then sees (Telegram: a reply to the anchor; Slack: a reply in the anchor's thread). Then the refusals and the
platform's errors.
"""

from __future__ import annotations

import pytest

from adapters.slack import SlackAdapter
from adapters.telegram import TelegramAdapter
from core.errors import PermanentDeliveryError, TargetNotFoundError
from core.events import Target
from core.ports import TextFormat, Threads
from mocks.slack import MockSlack
from mocks.telegram import MockTelegram

pytestmark = pytest.mark.timeout(5)

PLAIN = TextFormat.PLAIN
TELEGRAM_GROUP = Target(chat_id=-1001234567890)
SLACK_CHANNEL = Target(chat_id="C0123456789")


@pytest.mark.parametrize("fixture", ["telegram", "slack"])
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
