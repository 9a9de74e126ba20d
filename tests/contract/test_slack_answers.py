"""Contract: SlackAdapter (slack-sdk) against MockSlack, for the answers that are neither done nor refused (issue 23).

An answer with a success status the adapter cannot read (an empty body, an HTML page, JSON that is no object, no
``ok``, a create without its ``ts``) is *unknown*: ``UnreadableAnswerError``, whatever the method
(:mod:`adapters.slack.answers`); a stored create is then found by its metadata
(https://docs.slack.dev/messaging/message-metadata); anything else is retried by the core (idempotent).
"""

from __future__ import annotations

import re
import traceback
from typing import Any

import pytest

from streamrelay.adapters.slack import SlackAdapter
from streamrelay.core.errors import (
    PlatformUnavailableError,
    UncertainDeliveryError,
    UnreadableAnswerError,
)
from streamrelay.core.events import Target
from streamrelay.core.ports import PendingSend, Settlement, SettleOutcome, TextFormat
from streamrelay.mocks.slack import MockSlack
from tests.contract.conftest import SLACK_TOKEN

pytestmark = pytest.mark.timeout(5)

CHANNEL, DM = "C0123456789", "D0123456789"
PLAIN, MARKDOWN = TextFormat.PLAIN, TextFormat.MARKDOWN
HTML = "<html><head><title>502</title></head><body>upstream went away</body></html>"

BAD_ANSWERS: dict[str, tuple[dict[str, Any], str]] = {
    # id: (raw reply, what the error says)
    "empty": ({"status": 200, "body": ""}, "an empty body; body empty"),
    "empty-html": ({"status": 200, "body": "", "content_type": "text/html"}, "an empty body"),
    "blank": ({"status": 200, "body": " \n"}, "an empty body"),
    "html": ({"status": 200, "body": HTML, "content_type": "text/html"}, "no JSON object (text/html); body '<html>"),
    "html-as-json": ({"status": 200, "body": HTML}, "no JSON object (application/json)"),
    "plain-text": ({"status": 200, "body": "OK", "content_type": "text/plain"}, "no JSON object (text/plain)"),
    "json-array": ({"status": 200, "body": [{"ok": True}]}, "no JSON object"),
    "json-empty-object": ({"status": 200, "body": {}}, "no boolean 'ok'"),
    "no-ok": ({"status": 200, "body": {"ts": "1700000000.000100"}}, "no boolean 'ok'"),
    "no-ts": ({"status": 200, "body": {"ok": True}}, "ok without a message ts in 'ts'"),
    "null-ts": ({"status": 200, "body": {"ok": True, "ts": None}}, "ok without a message ts in 'ts'"),
    "number-ts": ({"status": 200, "body": {"ok": True, "ts": 1700000000.0001}}, "ok without a message ts"),
    "no-content": ({"status": 204, "body": ""}, "HTTP 204, not Slack's 200"),
}


def methods(mock: MockSlack) -> list[str]:
    return [call.method for call in mock.calls]


@pytest.fixture
def thread(slack_mock: MockSlack) -> Target:
    """A direct-message thread: the person's question is its parent."""
    return Target(chat_id=DM, thread_id=slack_mock.post_user_message(DM, "question?"))


# ------------------------------------------------------------------ answers that cannot be read


@pytest.mark.parametrize(("reply", "says"), BAD_ANSWERS.values(), ids=BAD_ANSWERS.keys())
async def test_a_create_answered_unreadably_is_unknown_and_found_by_its_metadata(
    slack: SlackAdapter, slack_mock: MockSlack, reply: dict[str, Any], says: str
) -> None:
    target = Target(chat_id=CHANNEL)
    before = await slack.send_text(target, "Earlier", PLAIN)
    slack_mock.add_fault("chat.postMessage", 2, reply, after_commit=True)

    with pytest.raises(UnreadableAnswerError) as raised:
        await slack.send_text(target, "**Refund** approved", MARKDOWN, delivery_id="sr-refund-1")
    settled = await slack.settle_send(target, PendingSend("sr-refund-1", "**Refund** approved", MARKDOWN, before))

    error = raised.value
    assert isinstance(error, UncertainDeliveryError)  # unknown: settled, never blindly sent again
    assert str(error).startswith("slack chat.postMessage: unreadable answer (HTTP ")
    assert says in str(error)
    assert (error.status, error.platform, error.target) == (reply["status"], "slack", CHANNEL)
    stored = slack_mock.messages(CHANNEL)[-1]
    assert (settled.outcome, settled.message_id) == (SettleOutcome.FOUND, stored.ts)
    assert [text for _, text in slack_mock.visible(CHANNEL)] == ["Earlier", "**Refund** approved"]


async def test_a_create_answered_unreadably_before_storing_is_not_sent(
    slack: SlackAdapter, slack_mock: MockSlack
) -> None:
    target = Target(chat_id=CHANNEL)
    slack_mock.add_fault("chat.postMessage", 1, BAD_ANSWERS["html"][0])

    with pytest.raises(UnreadableAnswerError):
        await slack.send_text(target, "Hello", PLAIN, delivery_id="sr-hello-1")
    settled = await slack.settle_send(target, PendingSend("sr-hello-1", "Hello", PLAIN))

    assert settled.outcome is SettleOutcome.NOT_SENT
    assert slack_mock.visible(CHANNEL) == []


@pytest.mark.parametrize("name", ["empty", "html", "no-ts"])
async def test_media_and_stream_creates_answered_unreadably_are_unknown(
    slack: SlackAdapter, slack_mock: MockSlack, thread: Target, name: str
) -> None:
    slack_mock.add_fault("chat.startStream", 1, BAD_ANSWERS[name][0], after_commit=True)

    with pytest.raises(UnreadableAnswerError, match=re.escape("slack chat.startStream: unreadable answer")):
        await slack.stream_start(thread, "Hel", MARKDOWN)  # not NativeUnavailableError: it may be open

    assert [m.text for m in slack_mock.messages(DM)] == ["question?", "Hel"]


async def test_an_unknown_stream_start_is_settled_by_its_text_below_the_message_the_part_went_on_in(
    slack: SlackAdapter, slack_mock: MockSlack, thread: Target
) -> None:
    """chat.startStream carries no metadata: the stream is the bot's message without a delivery id, between the
    newest message known before it and the part's new message, that shows the start's text (a person's reply in
    between is no stream); another text there is unknown; none, not sent."""
    slack_mock.add_fault("chat.startStream", 1, {"status": 500, "description": "internal_error"}, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await slack.stream_start(thread, "**Refund** <ok> & done", MARKDOWN)
    slack_mock.post_user_message(DM, "**Refund** <ok> & done", thread_ts=str(thread.thread_id))
    part = await slack.send_text(thread, "**Refund** <ok> & done, and more", MARKDOWN, delivery_id="sr-part-1")
    [stream] = [m for m in slack_mock.messages(DM) if m.streamed]

    found = await slack.settle_send(
        thread, PendingSend("ss-start-1", "**Refund** <ok> & done", MARKDOWN, before_id=part)
    )
    other = await slack.settle_send(thread, PendingSend("ss-start-2", "Another start", MARKDOWN, before_id=part))
    empty = PendingSend("ss-start-3", "**Refund** <ok> & done", MARKDOWN, after_id=stream.ts, before_id=part)
    none = await slack.settle_send(thread, empty)

    assert found == Settlement(SettleOutcome.FOUND, stream.ts)
    assert other.outcome is SettleOutcome.UNKNOWN and none.outcome is SettleOutcome.NOT_SENT
    assert [c.method for c in slack_mock.calls if c.method.startswith("conversations.")] == [
        "conversations.replies"
    ] * 3


@pytest.mark.parametrize("name", ["empty", "html", "json-empty-object"])
async def test_edits_deletes_and_appends_answered_unreadably_are_unknown(
    slack: SlackAdapter, slack_mock: MockSlack, thread: Target, name: str
) -> None:
    target = Target(chat_id=CHANNEL)
    ts = await slack.send_text(target, "Hello", PLAIN)
    handle = await slack.stream_start(thread, "Hel", MARKDOWN)
    reply = BAD_ANSWERS[name][0]
    for method in ("chat.update", "chat.delete", "chat.appendStream", "assistant.threads.setStatus"):
        slack_mock.add_fault(method, 1, reply, after_commit=True)

    with pytest.raises(UnreadableAnswerError, match=re.escape("slack chat.update: unreadable")):
        await slack.edit_text(target, ts, "Hello, world", PLAIN)
    with pytest.raises(UnreadableAnswerError, match=re.escape("slack chat.appendStream: unreadable")):
        await slack.stream_update(thread, handle, "Hel", "Hello", MARKDOWN)
    with pytest.raises(UnreadableAnswerError, match=re.escape("slack assistant.threads.setStatus: unreadable")):
        await slack.send_typing(thread)
    with pytest.raises(UnreadableAnswerError, match=re.escape("slack chat.delete: unreadable")):
        await slack.delete_message(target, ts)

    assert slack_mock.visible(CHANNEL) == []  # each was done: the answers only could not be read
    assert [m.text for m in slack_mock.messages(DM)] == ["question?", "Hello"]


async def test_a_history_answer_without_messages_is_unknown_never_not_sent(
    slack: SlackAdapter, slack_mock: MockSlack
) -> None:
    target = Target(chat_id=CHANNEL)
    slack_mock.add_fault("conversations.history", 1, {"status": 200, "body": {"ok": True}})

    with pytest.raises(UnreadableAnswerError, match=r"conversations\.history: .*ok without an array in 'messages'"):
        await slack.settle_send(target, PendingSend("sr-x", "Hello", PLAIN))


async def test_an_error_status_with_an_unreadable_body_keeps_slacks_status_rules(
    slack: SlackAdapter, slack_mock: MockSlack
) -> None:
    target = Target(chat_id=CHANNEL)
    ts = await slack.send_text(target, "Hello", PLAIN)
    slack_mock.add_fault("chat.postMessage", 2, {"status": 502, "body": HTML})  # not JSON though it says so
    slack_mock.add_fault("chat.update", 1, {"status": 503, "body": "busy", "content_type": "text/plain"})

    with pytest.raises(UncertainDeliveryError, match="HTTP 502") as create:
        await slack.send_text(target, "again", PLAIN)
    with pytest.raises(PlatformUnavailableError, match="HTTP 503"):
        await slack.edit_text(target, ts, "Hello, world", PLAIN)

    assert not isinstance(create.value, UnreadableAnswerError)  # a 5xx to a create, as ever


async def test_an_unreadable_answer_never_shows_the_token(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    echo = f"<html><body>Bad request: Authorization Bearer {SLACK_TOKEN}</body></html>"
    slack_mock.add_fault("chat.postMessage", 1, {"status": 200, "body": echo, "content_type": "text/html"})

    with pytest.raises(UnreadableAnswerError) as raised:
        await slack.send_text(Target(chat_id=CHANNEL), "Hello", PLAIN)

    shown = "".join(traceback.format_exception(raised.value)) + repr(raised.value) + raised.value.excerpt
    assert "Bad request: Authorization Bearer <token></body></html>" in str(raised.value)
    assert "xoxb-" not in shown and SLACK_TOKEN.rsplit("-", 1)[-1][:6] not in shown  # not even a part of it
