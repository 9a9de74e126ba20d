"""Contract: SlackAdapter (slack-sdk) against MockSlack over loopback HTTP.

Assertions read what a person would see (the mock's stored messages) and what the platform received.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import AsyncIterator

import pytest

from streamrelay.adapters.slack import SlackAdapter
from streamrelay.core.clock import FakeClock
from streamrelay.core.errors import (
    AnswerTimeoutError,
    ConfigError,
    DeliveryError,
    ForbiddenError,
    MessageFrozenError,
    NativeUnavailableError,
    PayloadRejectedError,
    PlatformUnavailableError,
    RateLimitedError,
    RateScope,
    RejectReason,
    TargetNotFoundError,
    UncertainDeliveryError,
)
from streamrelay.core.events import Target
from streamrelay.core.ports import ChannelAdapter, NativeStreaming, TextFormat
from streamrelay.mocks.slack import MockSlack
from tests.contract.conftest import MakeSlack
from tests.ports import free_port as closed_port

pytestmark = pytest.mark.timeout(5)

SECRET = "AbCdEfGhIjKlMnOpQrStUvWx"
CHANNEL, DM = "C0123456789", "D0123456789"
PLAIN, MARKDOWN, STRIPPED = TextFormat.PLAIN, TextFormat.MARKDOWN, TextFormat.STRIPPED
IDLE_S = 10.0


@pytest.fixture
def clock() -> FakeClock:
    """The mock's clock: stream idling and rate limits move only when a test advances it."""
    return FakeClock(start=100.0)


@pytest.fixture
async def slack_mock(clock: FakeClock) -> AsyncIterator[MockSlack]:
    """The mock on this module's clock (overrides the conftest's): stream idling and limits move with it."""
    async with MockSlack(clock=clock.now, stream_idle_s=IDLE_S) as mock:
        yield mock


def methods(mock: MockSlack) -> list[str]:
    return [call.method for call in mock.calls]


def texts(mock: MockSlack, channel: str) -> list[str]:
    return [text for _, text in mock.visible(channel)]


def test_it_implements_both_ports(slack: SlackAdapter) -> None:
    adapter: ChannelAdapter = slack
    native: NativeStreaming = slack

    assert (adapter.platform, adapter.unit, adapter.max_units) == ("slack", "utf16", 4000)
    assert isinstance(native, NativeStreaming)


# ------------------------------------------------------------------ happy paths


async def test_send_edit_delete(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    target = Target(chat_id=CHANNEL)
    first = await slack.send_text(target, "Hel", PLAIN)
    second = await slack.send_text(target, "second", PLAIN)
    changed = await slack.edit_text(target, first, "Hello", PLAIN)
    unchanged = await slack.edit_text(target, first, "Hello", PLAIN)  # Slack answers ok
    await slack.delete_message(target, second)

    assert (first, second) == ("1700000000.000100", "1700000000.000200")
    assert (changed, unchanged) == (True, True)
    assert slack_mock.visible(CHANNEL) == [(first, "Hello")]
    assert methods(slack_mock) == ["chat.postMessage"] * 2 + ["chat.update"] * 2 + ["chat.delete"]
    with pytest.raises(TargetNotFoundError, match="message_not_found"):
        await slack.delete_message(target, second)


async def test_thread_and_reply_become_thread_ts(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    question = slack_mock.post_user_message(CHANNEL, "question?")
    await slack.send_text(Target(chat_id=CHANNEL, thread_id=question), "in thread", PLAIN)
    await slack.send_text(Target(chat_id=CHANNEL, reply_to=question), "as reply", PLAIN)

    assert [(m.text, m.thread_ts) for m in slack_mock.messages(CHANNEL)[1:]] == [
        ("in thread", question),
        ("as reply", question),
    ]


async def test_typing_is_the_assistant_thread_status(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    question = slack_mock.post_user_message(DM, "question?")
    await slack.send_typing(Target(chat_id=DM))  # no thread: nothing to call
    await slack.send_typing(Target(chat_id=DM, thread_id=question))

    assert methods(slack_mock) == ["assistant.threads.setStatus"]
    assert slack_mock.status(DM, question) == "is typing…"
    assert slack_mock.visible(DM) == []


async def test_the_thread_status_goes_with_a_reply_or_when_cleared(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    """Slack shows the status until the app replies, or for two minutes: a run that ends without a reply clears it
    (https://docs.slack.dev/reference/methods/assistant.threads.setStatus)."""
    question = slack_mock.post_user_message(DM, "question?")
    thread = Target(chat_id=DM, thread_id=question)
    await slack.send_typing(thread)
    await slack.send_text(thread, "an answer", TextFormat.PLAIN)
    assert slack_mock.status(DM, question) is None  # the reply took it down
    await slack.send_typing(thread)
    await slack.clear_typing(Target(chat_id=DM))  # no thread: nothing to call
    await slack.clear_typing(thread)
    assert slack_mock.status(DM, question) is None
    assert methods(slack_mock)[-2:] == ["assistant.threads.setStatus", "assistant.threads.setStatus"]


async def test_verify_names_the_bot(make_slack: MakeSlack) -> None:
    assert await make_slack().verify() == "streamrelay (U0MOCKBOT)"
    with pytest.raises(ForbiddenError, match="invalid_auth"):  # shaped like a token, refused by Slack
        await make_slack(token="xoxa-2-not-a-bot-token").verify()


async def test_verify_retries_connection_errors_then_gives_up(make_slack: MakeSlack) -> None:
    slack = make_slack(base_url=f"http://127.0.0.1:{closed_port()}/api/")
    started = time.monotonic()

    with pytest.raises(PlatformUnavailableError, match="ClientConnectorError"):
        await slack.verify()

    assert time.monotonic() - started >= 0.03  # waited 0.01 s, then 0.02 s: three attempts


# ------------------------------------------------------------------ formatting


async def test_markdown_goes_in_markdown_text(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    ts = await slack.send_text(Target(chat_id=CHANNEL), "Run **make** & <go>", MARKDOWN)
    await slack.edit_text(Target(chat_id=CHANNEL), ts, "Run **make build**", MARKDOWN)

    [message] = slack_mock.messages(CHANNEL)
    assert (message.kind, message.wire) == ("markdown_text", "Run **make build**")
    assert [call.text for call in slack_mock.calls] == ["Run **make** & <go>", "Run **make build**"]
    assert slack.measure("Run **make**", MARKDOWN) == 12


async def test_plain_is_escaped_text_without_mrkdwn(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    ts = await slack.send_text(Target(chat_id=CHANNEL), "1 < 2 & *not bold* > 0", PLAIN)
    await slack.edit_text(Target(chat_id=CHANNEL), ts, "a<b>🎩", PLAIN)

    [message] = slack_mock.messages(CHANNEL)
    assert (message.kind, message.mrkdwn, message.wire, message.text) == ("text", False, "a&lt;b&gt;🎩", "a<b>🎩")
    assert slack_mock.calls[0].text == "1 &lt; 2 &amp; *not bold* &gt; 0"
    assert slack.measure("a<b>🎩", PLAIN) == 12  # what is sent, in UTF-16 units


async def test_stripped_drops_the_markup(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    await slack.send_text(Target(chat_id=CHANNEL), "Run **make build** & [docs](https://x.org)", STRIPPED)

    [message] = slack_mock.messages(CHANNEL)
    assert (message.kind, message.mrkdwn, message.wire) == ("text", False, "Run make build &amp; docs (https://x.org)")


# ------------------------------------------------------------------ refusals


async def test_unknown_messages_are_target_not_found_and_uneditable_ones_frozen(
    slack: SlackAdapter, slack_mock: MockSlack
) -> None:
    question = slack_mock.post_user_message(CHANNEL, "question?")
    slack_mock.missing_channels.add("C0NOWHERE1")

    with pytest.raises(TargetNotFoundError, match="message_not_found") as raised:
        await slack.edit_text(Target(chat_id=CHANNEL), "1700000000.009900", "x", PLAIN)
    with pytest.raises(MessageFrozenError, match="cant_update_message"):
        await slack.edit_text(Target(chat_id=CHANNEL), question, "x", PLAIN)
    with pytest.raises(TargetNotFoundError, match="channel_not_found"):
        await slack.send_text(Target(chat_id="C0NOWHERE1"), "x", PLAIN)
    with pytest.raises(TargetNotFoundError, match="thread_not_found"):
        await slack.send_text(Target(chat_id=CHANNEL, thread_id="1600000000.000100"), "x", PLAIN)

    assert (raised.value.platform, raised.value.target) == ("slack", CHANNEL)


async def test_too_long_is_rejected(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    with pytest.raises(PayloadRejectedError, match="msg_too_long") as plain:
        await slack.send_text(Target(chat_id=CHANNEL), "x" * 40_001, PLAIN)
    with pytest.raises(PayloadRejectedError) as markdown:
        await slack.send_text(Target(chat_id=CHANNEL), "x" * 12_001, MARKDOWN)

    assert plain.value.reason is markdown.value.reason is RejectReason.TOO_LONG
    assert slack_mock.visible(CHANNEL) == []


async def test_empty_text_is_rejected_unsent(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    with pytest.raises(PayloadRejectedError) as raised:
        await slack.send_text(Target(chat_id=CHANNEL), " \n ", PLAIN)

    assert raised.value.reason is RejectReason.EMPTY
    assert slack_mock.calls == []


@pytest.mark.parametrize(
    ("description", "expected"),
    [
        ("not_in_channel", ForbiddenError),
        ("is_archived", ForbiddenError),
        ("restricted_action_read_only_channel", ForbiddenError),
        ("invalid_blocks", PayloadRejectedError),
        ("internal_error", UncertainDeliveryError),
    ],
)
async def test_refusals_by_error_code(
    slack: SlackAdapter, slack_mock: MockSlack, description: str, expected: type[DeliveryError]
) -> None:
    slack_mock.add_fault("chat.postMessage", 1, {"status": 400, "description": description})

    with pytest.raises(expected, match=description):
        await slack.send_text(Target(chat_id=CHANNEL), "Hello", PLAIN)


# ------------------------------------------------------------------ transient failures


async def test_429_is_rate_limited_with_its_scope(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    slack_mock.add_fault("chat.postMessage", 1, {"status": 429, "retry_after_s": 3})
    slack_mock.add_fault("chat.update", 1, {"status": 429, "retry_after_s": 30})
    target = Target(chat_id=CHANNEL)

    with pytest.raises(RateLimitedError) as post:
        await slack.send_text(target, "A", PLAIN)
    ts = await slack.send_text(target, "A", PLAIN)
    with pytest.raises(RateLimitedError) as update:
        await slack.edit_text(target, ts, "AB", PLAIN)

    assert (post.value.retry_after_s, post.value.scope) == (3.0, RateScope.CONVERSATION)
    assert (update.value.retry_after_s, update.value.scope) == (30.0, RateScope.METHOD)  # Tier 3, per workspace
    assert methods(slack_mock) == ["chat.postMessage", "chat.postMessage", "chat.update"]  # slack-sdk did not retry
    assert slack_mock.visible(CHANNEL) == [(ts, "A")]


async def test_documented_rate_limits_answer_429(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    slack_mock.rate_limits = True
    for text in ("one", "two"):  # the per-channel burst
        await slack.send_text(Target(chat_id=CHANNEL), text, PLAIN)

    with pytest.raises(RateLimitedError) as raised:
        await slack.send_text(Target(chat_id=CHANNEL), "three", PLAIN)
    await slack.send_text(Target(chat_id="C0ANOTHER1"), "another channel", PLAIN)

    assert (raised.value.retry_after_s, raised.value.scope) == (1.0, RateScope.CONVERSATION)
    assert texts(slack_mock, CHANNEL) == ["one", "two"]


async def test_5xx_to_a_create_is_uncertain(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    slack_mock.add_fault("chat.postMessage", 1, {"status": 503})

    with pytest.raises(UncertainDeliveryError, match="HTTP 503"):  # Slack may have stored it
        await slack.send_text(Target(chat_id=CHANNEL), "Hello", PLAIN)

    assert methods(slack_mock) == ["chat.postMessage"]  # no automatic retry of a 5xx either


async def test_5xx_to_a_stream_start_is_uncertain(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    slack_mock.add_fault("chat.startStream", 1, {"status": 502})

    with pytest.raises(UncertainDeliveryError, match="HTTP 502"):
        await slack.stream_start(Target(chat_id=DM, thread_id="1700000000.000100"), "Hi", PLAIN)


async def test_5xx_to_an_edit_or_delete_is_platform_unavailable(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    ts = await slack.send_text(Target(chat_id=CHANNEL), "Hello", PLAIN)
    slack_mock.add_fault("chat.update", 1, {"status": 503})
    slack_mock.add_fault("chat.delete", 1, {"status": 500})

    slack_mock.add_fault("chat.update", 2, {"status": 400, "description": "internal_error"})  # a 5xx in a 200

    with pytest.raises(PlatformUnavailableError, match="HTTP 503"):  # an edit is safe to repeat
        await slack.edit_text(Target(chat_id=CHANNEL), ts, "Hello, world", PLAIN)
    with pytest.raises(PlatformUnavailableError, match="internal_error"):
        await slack.edit_text(Target(chat_id=CHANNEL), ts, "Hello, world", PLAIN)
    with pytest.raises(PlatformUnavailableError, match="HTTP 500"):
        await slack.delete_message(Target(chat_id=CHANNEL), ts)

    assert texts(slack_mock, CHANNEL) == ["Hello"]


@pytest.mark.parametrize("code", ["cant_update_message", "edit_window_closed"])
async def test_an_edit_slack_refuses_for_good_is_frozen(slack: SlackAdapter, slack_mock: MockSlack, code: str) -> None:
    ts = await slack.send_text(Target(chat_id=CHANNEL), "Hello", PLAIN)
    slack_mock.add_fault("chat.update", 1, {"status": 400, "description": code})

    with pytest.raises(MessageFrozenError, match=code) as raised:
        await slack.edit_text(Target(chat_id=CHANNEL), ts, "Hello, world", PLAIN)

    assert (raised.value.platform, raised.value.target) == ("slack", CHANNEL)
    assert texts(slack_mock, CHANNEL) == ["Hello"]  # it keeps what it shows


async def test_connection_refused_is_platform_unavailable(make_slack: MakeSlack) -> None:
    slack = make_slack(base_url=f"http://127.0.0.1:{closed_port()}/api/")

    with pytest.raises(PlatformUnavailableError):
        await slack.send_text(Target(chat_id=CHANNEL), "Hello", PLAIN)


async def test_timeout_after_commit_is_uncertain_and_landed(make_slack: MakeSlack, slack_mock: MockSlack) -> None:
    slack = make_slack(send_timeout_s=0.3)
    slack_mock.add_fault("chat.postMessage", 1, "timeout_after_commit")
    started = time.monotonic()

    with pytest.raises(UncertainDeliveryError):
        await slack.send_text(Target(chat_id=CHANNEL), "Hello", PLAIN)

    assert 0.25 < time.monotonic() - started < 1.0
    assert texts(slack_mock, CHANNEL) == ["Hello"]
    assert len(slack_mock.calls) == 1


async def test_timeout_before_commit_is_uncertain_and_lost(make_slack: MakeSlack, slack_mock: MockSlack) -> None:
    slack = make_slack(send_timeout_s=0.3)
    slack_mock.add_fault("chat.postMessage", 1, "timeout_before_commit")

    with pytest.raises(UncertainDeliveryError):
        await slack.send_text(Target(chat_id=CHANNEL), "Hello", PLAIN)
    await slack.send_text(Target(chat_id=CHANNEL), "next", PLAIN)

    assert texts(slack_mock, CHANNEL) == ["next"]


# ------------------------------------------------------------------ secrets


async def test_the_token_is_never_shown(make_slack: MakeSlack, slack_mock: MockSlack) -> None:
    slack = make_slack(send_timeout_s=0.3)
    slack_mock.add_fault("chat.postMessage", 1, {"status": 502})
    slack_mock.add_fault("chat.postMessage", 2, "timeout_before_commit")
    errors: list[DeliveryError] = []
    for _ in range(2):
        with pytest.raises(DeliveryError) as raised:
            await slack.send_text(Target(chat_id=CHANNEL), "Hello", PLAIN)
        errors.append(raised.value)
    with pytest.raises(DeliveryError) as not_found:
        await slack.edit_text(Target(chat_id=CHANNEL), "1700000000.000900", "x", PLAIN)
    errors.append(not_found.value)
    with pytest.raises(DeliveryError) as refused:
        await make_slack(base_url=f"http://127.0.0.1:{closed_port()}/api/").send_text(Target(chat_id=DM), "x", PLAIN)
    errors.append(refused.value)

    shown = [repr(slack), str(slack)]
    shown += ["".join(traceback.format_exception(error)) + repr(error) for error in errors]
    assert all(SECRET not in text for text in shown)
    assert [type(error) for error in errors] == [
        UncertainDeliveryError,  # a 502 to a create
        AnswerTimeoutError,  # no answer in time
        TargetNotFoundError,
        PlatformUnavailableError,
    ]


def test_a_malformed_token_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as raised:
        SlackAdapter("not-a-token-s3cr3t")

    assert "s3cr3t" not in str(raised.value)


# ------------------------------------------------------------------ targets


def test_targets(slack: SlackAdapter) -> None:
    assert slack.check_target(Target(chat_id=CHANNEL, thread_id="1700000000.000100")) is None
    assert slack.check_target(Target(chat_id="#general")) is not None
    assert slack.check_target(Target(chat_id=12345)) is not None
    assert slack.check_target(Target(chat_id=DM, reply_to=17)) is not None
    assert (slack.is_group(Target(chat_id=CHANNEL)), slack.is_group(Target(chat_id="G0123456789"))) == (True, True)
    assert slack.is_group(Target(chat_id=DM)) is False


# ------------------------------------------------------------------ native streaming


@pytest.fixture
def thread(slack_mock: MockSlack) -> Target:
    """A direct-message thread: the person's question is its parent."""
    return Target(chat_id=DM, thread_id=slack_mock.post_user_message(DM, "question?"))


async def test_native_start_update_finish(slack: SlackAdapter, slack_mock: MockSlack, thread: Target) -> None:
    handle = await slack.stream_start(thread, "Hel", MARKDOWN)
    await slack.stream_update(thread, handle, "Hel", "Hello", MARKDOWN)
    await slack.stream_update(thread, handle, "Hello", "Hello", MARKDOWN)  # nothing new: no call
    await slack.stream_update(thread, handle, "Hello", "Hello\n\n", MARKDOWN)
    final = await slack.stream_finish(thread, handle, "Hello\n\n", "Hello\n\n**world**", MARKDOWN)

    assert final == handle
    assert [(c.method, c.text) for c in slack_mock.calls] == [
        ("chat.startStream", "Hel"),
        ("chat.appendStream", "lo"),
        ("chat.appendStream", "\n\n"),
        ("chat.stopStream", "**world**"),
    ]
    assert slack_mock.visible(DM) == [(handle, "Hello\n\n**world**")]
    assert slack_mock.messages(DM)[1].thread_ts == thread.thread_id


async def test_a_non_extending_update_is_refused_and_the_message_is_then_edited(
    slack: SlackAdapter, slack_mock: MockSlack, thread: Target
) -> None:
    handle = await slack.stream_start(thread, "Hello wrold", MARKDOWN)
    with pytest.raises(NativeUnavailableError):  # a stream cannot rewrite: the core goes on with edits
        await slack.stream_update(thread, handle, "Hello wrold", "Hello world", MARKDOWN)
    await slack.edit_text(thread, handle, "Hello world!!", MARKDOWN)  # chat.update, under its own budget

    assert methods(slack_mock) == ["chat.startStream", "chat.stopStream", "chat.update"]
    assert slack_mock.visible(DM) == [(handle, "Hello world!!")]


async def test_an_expired_stream_is_refused_and_the_message_is_then_edited(
    slack: SlackAdapter, slack_mock: MockSlack, thread: Target, clock: FakeClock
) -> None:
    handle = await slack.stream_start(thread, "one", MARKDOWN)
    clock.advance(IDLE_S + 1)
    with pytest.raises(NativeUnavailableError):
        await slack.stream_update(thread, handle, "one", "one two", MARKDOWN)
    await slack.edit_text(thread, handle, "one two three", MARKDOWN)

    assert [(c.method, c.ok) for c in slack_mock.calls] == [
        ("chat.startStream", True),
        ("chat.appendStream", False),  # message_not_in_streaming_state
        ("chat.update", True),
    ]
    assert slack_mock.visible(DM) == [(handle, "one two three")]


async def test_an_expired_stream_is_refused_at_stop(
    slack: SlackAdapter, slack_mock: MockSlack, thread: Target, clock: FakeClock
) -> None:
    handle = await slack.stream_start(thread, "one", MARKDOWN)
    clock.advance(IDLE_S + 1)
    with pytest.raises(NativeUnavailableError):
        await slack.stream_finish(thread, handle, "one", "one two", MARKDOWN)
    assert methods(slack_mock) == ["chat.startStream", "chat.stopStream"]


@pytest.mark.parametrize("code", ["msg_too_long", "msg_blocks_too_long"])
async def test_a_stop_refused_for_its_text_stops_the_stream_as_it_is_then_the_edit_shows_it_whole(
    slack: SlackAdapter, slack_mock: MockSlack, thread: Target, code: str
) -> None:
    """A refused chat.stopStream changed nothing: the stream is open and shows what was appended
    (https://docs.slack.dev/reference/methods/chat.stopStream); stopped as it is, the message takes the whole text
    by chat.update (https://docs.slack.dev/reference/methods/chat.update). Issue 23: the text it carried was lost."""
    handle = await slack.stream_start(thread, "Hello", MARKDOWN)
    await slack.stream_update(thread, handle, "Hello", "Hello, the plan", MARKDOWN)
    slack_mock.add_fault("chat.stopStream", 1, {"status": 400, "description": code})

    with pytest.raises(NativeUnavailableError, match=rf"refused its last 12 units \({code}\)"):
        await slack.stream_finish(thread, handle, "Hello, the plan", "Hello, the plan **is done**", MARKDOWN)
    streaming_after_stop = slack_mock.messages(DM)[1].streaming
    await slack.edit_text(thread, handle, "Hello, the plan **is done**", MARKDOWN)  # what the core does next

    assert [(c.method, c.text, c.ok) for c in slack_mock.calls] == [
        ("chat.startStream", "Hello", True),
        ("chat.appendStream", ", the plan", True),
        ("chat.stopStream", " **is done**", False),  # refused: the stream stays open, unchanged
        ("chat.stopStream", None, True),  # stopped as it is
        ("chat.update", "Hello, the plan **is done**", True),  # the whole part, once
    ]
    assert streaming_after_stop is False
    assert slack_mock.visible(DM) == [(handle, "Hello, the plan **is done**")]


async def test_a_stop_refused_for_its_text_whose_plain_stop_fails_is_still_finished_by_the_edit(
    slack: SlackAdapter, slack_mock: MockSlack, thread: Target
) -> None:
    handle = await slack.stream_start(thread, "Hello", MARKDOWN)
    slack_mock.add_fault("chat.stopStream", 1, {"status": 400, "description": "msg_too_long"})
    slack_mock.add_fault("chat.stopStream", 2, {"status": 502})  # not stopped: the stream stays open
    with pytest.raises(NativeUnavailableError):
        await slack.stream_finish(thread, handle, "Hello", "Hello world", MARKDOWN)
    await slack.edit_text(thread, handle, "Hello world", MARKDOWN)

    assert [(c.method, c.description) for c in slack_mock.calls] == [
        ("chat.startStream", None),
        ("chat.stopStream", "msg_too_long"),
        ("chat.stopStream", "bad_gateway"),
        ("chat.update", "streaming_state_conflict"),
        ("chat.stopStream", None),
        ("chat.update", None),
    ]
    assert slack_mock.visible(DM) == [(handle, "Hello world")]


async def test_a_stop_refused_for_its_text_then_found_expired_is_finished_by_the_edit(
    slack: SlackAdapter, slack_mock: MockSlack, thread: Target, clock: FakeClock
) -> None:
    handle = await slack.stream_start(thread, "Hello", MARKDOWN)
    slack_mock.add_fault("chat.stopStream", 1, {"status": 400, "description": "msg_too_long"})
    clock.advance(IDLE_S + 1)  # the stream expires before the stop without text
    with pytest.raises(NativeUnavailableError):
        await slack.stream_finish(thread, handle, "Hello", "Hello world", MARKDOWN)
    await slack.edit_text(thread, handle, "Hello world", MARKDOWN)

    assert [(c.method, c.description) for c in slack_mock.calls] == [
        ("chat.startStream", None),
        ("chat.stopStream", "msg_too_long"),
        ("chat.stopStream", "message_not_in_streaming_state"),
        ("chat.update", None),
    ]
    assert slack_mock.visible(DM) == [(handle, "Hello world")]


async def test_plain_streams_as_escaped_markdown(slack: SlackAdapter, slack_mock: MockSlack, thread: Target) -> None:
    handle = await slack.stream_start(thread, "2*3", PLAIN)
    await slack.stream_finish(thread, handle, "2*3", "2*3 = 6_", PLAIN)

    assert slack_mock.visible(DM) == [(handle, "2\\*3 = 6\\_")]


async def test_an_open_stream_can_still_be_edited_and_deleted(
    make_slack: MakeSlack, slack_mock: MockSlack, thread: Target
) -> None:
    first, second = make_slack(), make_slack()  # e.g. a restart: the second never saw the streams start
    handle = await first.stream_start(thread, "draft", MARKDOWN)
    await second.edit_text(thread, handle, "final", MARKDOWN)
    cancelled = await first.stream_start(thread, "cancelled", MARKDOWN)
    await first.stream_cancel(thread, cancelled)
    deleted = await first.stream_start(thread, "deleted", MARKDOWN)
    await second.delete_message(thread, deleted)

    assert [(c.method, c.description) for c in slack_mock.calls] == [
        ("chat.startStream", None),
        ("chat.update", "streaming_state_conflict"),
        ("chat.stopStream", None),
        ("chat.update", None),
        ("chat.startStream", None),
        ("chat.stopStream", None),  # its own stream: stopped first
        ("chat.delete", None),
        ("chat.startStream", None),
        ("chat.delete", "cant_delete_message"),
        ("chat.stopStream", None),
        ("chat.delete", None),
    ]
    assert slack_mock.visible(DM) == [(handle, "final")]
    with pytest.raises(TargetNotFoundError, match="message_not_found"):
        await first.stream_cancel(thread, cancelled)


async def test_a_stream_a_restart_finishes_with_the_text_it_shows_is_stopped_not_left_open(
    make_slack: MakeSlack, slack_mock: MockSlack, thread: Target
) -> None:
    """After a restart the adapter no longer knows the stream open; its finish, whose text the stream shows already
    (nothing left for the core to edit), stops it as it is: chaos-5-00022 left it open (still streaming on Slack
    until it expired) while its report said done. A stream already stopped answers
    ``message_not_in_streaming_state``: nothing to do (https://docs.slack.dev/reference/methods/chat.stopStream)."""
    first, second = make_slack(), make_slack()  # the second is the process after the restart
    handle = await first.stream_start(thread, "Hello", MARKDOWN)
    await first.stream_update(thread, handle, "Hello", "Hello world", MARKDOWN)
    with pytest.raises(NativeUnavailableError):
        await second.stream_finish(thread, handle, "Hello world", "Hello world", MARKDOWN)
    stopped = await first.stream_start(thread, "Done", MARKDOWN)
    await first.stream_finish(thread, stopped, "Done", "Done", MARKDOWN)
    with pytest.raises(NativeUnavailableError):
        await second.stream_finish(thread, stopped, "Done", "Done", MARKDOWN)

    assert [(c.method, c.description) for c in slack_mock.calls][2:] == [
        ("chat.stopStream", None),  # stopped as it is: it shows the text
        ("chat.startStream", None),
        ("chat.stopStream", None),
        ("chat.stopStream", "message_not_in_streaming_state"),  # stopped before the restart: nothing to do
    ]
    assert [m.streaming for m in slack_mock.messages(DM)[1:]] == [False, False]
    assert slack_mock.visible(DM) == [(handle, "Hello world"), (stopped, "Done")]


async def test_a_failed_stop_of_a_stream_a_restart_finishes_is_raised_so_the_finish_is_tried_again(
    make_slack: MakeSlack, slack_mock: MockSlack, thread: Target
) -> None:
    """chaos-6-00039: a 502 to that stop, swallowed, left the stream open; raised, the core tries the finish again
    (an outage is retried with backoff) and the second stop closes it."""
    first, second = make_slack(), make_slack()
    handle = await first.stream_start(thread, "Hello", MARKDOWN)
    slack_mock.add_fault("chat.stopStream", 1, {"status": 502})
    with pytest.raises(PlatformUnavailableError):
        await second.stream_finish(thread, handle, "Hello", "Hello", MARKDOWN)
    with pytest.raises(NativeUnavailableError):
        await second.stream_finish(thread, handle, "Hello", "Hello", MARKDOWN)
    assert [m.streaming for m in slack_mock.messages(DM)[1:]] == [False]


async def test_the_persons_message_cannot_be_deleted(
    slack: SlackAdapter, slack_mock: MockSlack, thread: Target
) -> None:
    assert thread.thread_id is not None
    with pytest.raises(TargetNotFoundError, match=r"chat\.delete: cant_delete_message"):
        await slack.delete_message(thread, str(thread.thread_id))

    assert methods(slack_mock) == ["chat.delete", "chat.stopStream"]


async def test_native_refusals(slack: SlackAdapter, slack_mock: MockSlack) -> None:
    no_thread, in_channel = Target(chat_id=DM), Target(chat_id=CHANNEL, thread_id="1700000000.000100")

    assert "thread_ts" in (slack.native_refusal(no_thread) or "")
    assert "recipient_user_id" in (slack.native_refusal(in_channel) or "")
    for target in (no_thread, in_channel):
        with pytest.raises(NativeUnavailableError):
            await slack.stream_start(target, "x", MARKDOWN)
    assert slack_mock.calls == []


async def test_refused_streaming_is_native_unavailable(
    slack: SlackAdapter, slack_mock: MockSlack, thread: Target
) -> None:
    slack_mock.streaming_enabled = False

    with pytest.raises(NativeUnavailableError, match="unknown_method"):
        await slack.stream_start(thread, "x", MARKDOWN)


async def test_a_stream_start_429_stays_rate_limited(
    slack: SlackAdapter, slack_mock: MockSlack, thread: Target
) -> None:
    slack_mock.add_fault("chat.startStream", 1, {"status": 429, "retry_after_s": 2})

    with pytest.raises(RateLimitedError) as raised:
        await slack.stream_start(thread, "x", MARKDOWN)

    assert (raised.value.retry_after_s, raised.value.scope) == (2.0, RateScope.METHOD)
