"""Teams: TeamsAdapter through the Teams SDK for Python against the mock Connector (mocks.teams), what a person sees.

The shared contract is in test_all_adapters.py; here what is Teams' own: the token by client credentials, Markdown as
Teams renders it (headings in bold, code as written, a table in an Adaptive Card), updates and deletes of the bot's
own activities, reply chains only in channels, media as a hero card, Stop and approval buttons as card actions, the
size limit (413), the per-thread limit's 429 with Retry-After, and the uncertain send reported, never resent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from streamrelay.adapters.teams import TeamsAdapter
from streamrelay.adapters.teams.errors import StreamRefused
from streamrelay.adapters.teams.render import render
from streamrelay.core.errors import (
    ConfigError,
    ForbiddenError,
    MessageFrozenError,
    NativeUnavailableError,
    PayloadRejectedError,
    PermanentDeliveryError,
    PlatformUnavailableError,
    RateLimitedError,
    RateScope,
    RejectReason,
    TargetNotFoundError,
    UncertainDeliveryError,
)
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem, MediaKind
from streamrelay.core.ports import MarkupPermissions, PendingSend, SettleOutcome, StopControl, TextFormat
from streamrelay.mocks.teams import MockTeams

SECRET = "Xy7Q~mockClientSecret.0123456789abcdef"
TOKEN = f"11111111-2222-4333-8444-555555555555:{SECRET}"
GROUP = Target(chat_id="19:abcdef@thread.v2")
CHANNEL = "19:general0123@thread.tacv2"


@pytest.fixture
async def mock() -> AsyncIterator[MockTeams]:
    async with MockTeams() as server:
        yield server


@pytest.fixture
async def teams(mock: MockTeams) -> AsyncIterator[TeamsAdapter]:
    # 2 s, not 0.6: the mock shares the test's loop, and on a loaded CI machine a stream's final once took longer
    adapter = TeamsAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=2.0)
    yield adapter
    await adapter.close()


def shown(mock: MockTeams, chat: str = str(GROUP.chat_id)) -> list[str]:
    return [text for _, text in mock.visible(chat)]


async def test_the_token_is_had_once_by_client_credentials_and_sent_as_bearer(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    await teams.send_text(GROUP, "one", TextFormat.PLAIN)
    await teams.send_text(GROUP, "two", TextFormat.PLAIN)
    assert [c.method for c in mock.calls] == ["token", "sendToConversation", "sendToConversation"]
    assert shown(mock) == ["one", "two"]


async def test_refused_credentials_are_forbidden_and_never_show_the_secret(mock: MockTeams) -> None:
    mock.add_fault("token", 1, {"status": 401, "description": f"invalid_client: secret {SECRET} refused"})
    adapter = TeamsAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=0.6)
    try:
        with pytest.raises(ForbiddenError) as info:
            await adapter.send_text(GROUP, "hi", TextFormat.PLAIN)
    finally:
        await adapter.close()
    assert SECRET not in str(info.value) and "<token>" in str(info.value)
    assert shown(mock) == []


def test_malformed_credentials_are_a_config_error_without_the_secret() -> None:
    for bad in ("not-a-guid:secret", "11111111-2222-4333-8444-555555555555", "11111111-2222-4333-8444-555555555555:"):
        with pytest.raises(ConfigError, match="APP_ID:CLIENT_SECRET") as info:
            TeamsAdapter(bad)
        assert "secret" not in str(info.value).split("APP_ID")[0]


async def test_markdown_headings_become_bold_and_code_is_kept(mock: MockTeams, teams: TeamsAdapter) -> None:
    text = "# Plan\n\n**bold** *it* `x` [docs](https://e.x/d)\n\n```python\nprint(1)\n```\n\n- a\n- b"
    await teams.send_text(GROUP, text, TextFormat.MARKDOWN)
    [body] = shown(mock)
    assert body == "**Plan**\n\n**bold** *it* `x` [docs](https://e.x/d)\n\n```python\nprint(1)\n```\n\n- a\n- b"
    [activity] = mock.activities(str(GROUP.chat_id))
    assert activity.payload["textFormat"] == "markdown" and "attachments" not in activity.payload


async def test_a_table_goes_in_an_adaptive_card(mock: MockTeams, teams: TeamsAdapter) -> None:
    text = "## Prices\n\n| fruit | n |\n|---|---|\n| figs | 12 |\n\n```\nx = 1\n```"
    await teams.send_text(GROUP, text, TextFormat.MARKDOWN)
    [activity] = mock.activities(str(GROUP.chat_id))
    [attachment] = activity.payload["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    kinds = [element["type"] for element in attachment["content"]["body"]]
    assert kinds == ["TextBlock", "Table", "CodeBlock"]
    assert shown(mock) == ["**Prices**\n\n| fruit | n |\n|---|---|\n| figs | 12 |\n\n```\nx = 1\n```"]


async def test_update_and_delete_of_the_bots_own_activity(mock: MockTeams, teams: TeamsAdapter) -> None:
    mid = await teams.send_text(GROUP, "draft", TextFormat.PLAIN)
    await teams.edit_text(GROUP, mid, "draft, longer", TextFormat.PLAIN)
    assert shown(mock) == ["draft, longer"]
    await teams.delete_message(GROUP, mid)
    assert shown(mock) == []
    with pytest.raises(TargetNotFoundError):
        await teams.edit_text(GROUP, mid, "again", TextFormat.PLAIN)
    assert [c.method for c in mock.calls][1:] == [
        "sendToConversation",
        "updateActivity",
        "deleteActivity",
        "updateActivity",
    ]


async def test_the_persons_message_cannot_be_updated(mock: MockTeams, teams: TeamsAdapter) -> None:
    theirs = mock.user_message(str(GROUP.chat_id), "my question")
    with pytest.raises(ForbiddenError):
        await teams.edit_text(GROUP, theirs, "changed", TextFormat.PLAIN)


async def test_a_message_past_100_kb_is_too_long_and_80_kb_is_what_measure_keeps(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    assert teams.max_units == 81_920
    assert teams.measure("x" * 40_000, TextFormat.PLAIN) < 81_920 < teams.measure("x" * 41_000, TextFormat.PLAIN)
    with pytest.raises(PayloadRejectedError) as info:
        await teams.send_text(GROUP, "é" * 51_200, TextFormat.PLAIN)
    assert info.value.reason is RejectReason.TOO_LONG and shown(mock) == []


async def test_a_429_names_its_wait_and_pauses_the_conversation(mock: MockTeams, teams: TeamsAdapter) -> None:
    mock.add_fault("updateActivity", 1, {"status": 429, "retry_after_s": 3})
    mid = await teams.send_text(GROUP, "a", TextFormat.PLAIN)
    with pytest.raises(RateLimitedError) as info:
        await teams.edit_text(GROUP, mid, "ab", TextFormat.PLAIN)
    assert info.value.retry_after_s == 3 and info.value.scope is RateScope.CONVERSATION


async def test_the_documented_per_thread_limit_answers_429_with_retry_after() -> None:
    now = [100.0]
    async with MockTeams(rate_limits=True, clock=lambda: now[0]) as mock:
        adapter = TeamsAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=2.0)
        try:
            for i in range(7):  # 7 in a second
                await adapter.send_text(GROUP, f"m{i}", TextFormat.PLAIN)
            with pytest.raises(RateLimitedError) as info:
                await adapter.send_text(GROUP, "eighth", TextFormat.PLAIN)
            assert 0 < info.value.retry_after_s <= 1
            other = Target(chat_id="19:other@thread.v2")  # another thread has its own limit
            await adapter.send_text(other, "elsewhere", TextFormat.PLAIN)
            now[0] += 1.01
            await adapter.send_text(GROUP, "eighth", TextFormat.PLAIN)  # 8 in 2 s
            with pytest.raises(RateLimitedError):
                await adapter.send_text(GROUP, "ninth", TextFormat.PLAIN)
        finally:
            await adapter.close()
        assert len(shown(mock)) == 8
        assert [c.retry_after_s for c in mock.calls if c.status == 429] != []


async def test_an_uncertain_send_is_reported_unknown_and_never_sent_again(mock: MockTeams, teams: TeamsAdapter) -> None:
    mock.add_fault("sendToConversation", 1, {"status": 502}, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await teams.send_text(GROUP, "maybe", TextFormat.PLAIN, delivery_id="sr-1")
    calls = len(mock.calls)
    settled = await teams.settle_send(GROUP, PendingSend("sr-1", "maybe", TextFormat.PLAIN))
    assert settled.outcome is SettleOutcome.UNKNOWN and len(mock.calls) == calls  # no call, no resend
    assert shown(mock) == ["maybe"]


async def test_reply_chains_only_in_channels(mock: MockTeams, teams: TeamsAdapter) -> None:
    assert teams.thread_refusal(GROUP) is not None
    with pytest.raises(PermanentDeliveryError, match="only a channel"):
        await teams.open_thread(GROUP, "1:x", "sub-agent")
    channel = Target(chat_id=CHANNEL)
    root = await teams.send_text(channel, "Post", TextFormat.PLAIN)
    thread = await teams.open_thread(channel, root, "sub-agent")
    await teams.send_text(thread, "in the chain", TextFormat.PLAIN)
    assert [c.method for c in mock.calls][-1] == "replyToActivity"
    [_, reply] = mock.activities(CHANNEL)
    assert reply.reply_to == root and teams.thread_refusal(thread) is not None


async def test_media_is_a_hero_card_shown_by_its_caption(mock: MockTeams, teams: TeamsAdapter) -> None:
    item = MediaItem(url="https://e.x/chart.png", kind=MediaKind.IMAGE, caption="Chart")
    await teams.send_media(GROUP, item, TextFormat.MARKDOWN)
    [activity] = mock.activities(str(GROUP.chat_id))
    [card] = activity.payload["attachments"]
    assert card["contentType"] == "application/vnd.microsoft.card.hero"
    assert card["content"]["images"] == [{"url": "https://e.x/chart.png", "alt": "Chart"}]
    assert shown(mock) == ["Chart"]


async def test_stop_and_approval_buttons_are_card_actions_kept_by_updates(mock: MockTeams, teams: TeamsAdapter) -> None:
    mid = await teams.send_text(GROUP, "Working", TextFormat.MARKDOWN)
    control = StopControl("approve:0123456789abcdef", "Approve", more=(("deny:0123456789abcdef", "Deny"),))
    await teams.set_stop(GROUP, mid, "Working", TextFormat.MARKDOWN, control)
    await teams.edit_text(GROUP, mid, "Working harder", TextFormat.MARKDOWN)
    assert shown(mock) == ["Working harder"]
    pressed = mock.press(str(GROUP.chat_id), mid, "deny:0123456789abcdef")
    assert pressed["value"] == {"streamrelay": "deny:0123456789abcdef"} and pressed["replyToId"] == mid
    await teams.set_stop(GROUP, mid, "Done", TextFormat.MARKDOWN, None)
    with pytest.raises(ValueError, match="no button"):
        mock.press(str(GROUP.chat_id), mid, None)
    assert shown(mock) == ["Done"]


def test_rendering_measures_utf16_bytes_of_the_json() -> None:
    plain = render("ab", TextFormat.PLAIN)
    assert plain.units == 2 * len('{"type":"message","text":"ab","textFormat":"plain"}')
    assert render("😀", TextFormat.PLAIN).units == plain.units  # an astral character is two UTF-16 units, as "ab"
    assert render("a", TextFormat.PLAIN).units == plain.units - 2


async def test_the_bot_outside_the_conversation_is_forbidden(mock: MockTeams, teams: TeamsAdapter) -> None:
    mock.missing.add(str(GROUP.chat_id))
    with pytest.raises(ForbiddenError):
        await teams.send_text(GROUP, "hi", TextFormat.PLAIN)


# --- native streaming (personal chats) ----------------------------------------------------------------------

PERSONAL = Target(chat_id="a:1personalChatWithSomeone")


def stream_calls(mock: MockTeams) -> list[str | None]:
    return [c.description for c in mock.calls if c.method == "sendToConversation"]


async def test_a_native_stream_is_typing_chunks_then_the_final_message_in_place(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    handle = await teams.stream_start(PERSONAL, "# Plan\n\nFirst", TextFormat.MARKDOWN)
    assert shown(mock, str(PERSONAL.chat_id)) == ["# Plan\n\nFirst"]  # streamed as written
    await teams.stream_update(PERSONAL, handle, "# Plan\n\nFirst", "# Plan\n\nFirst, second", TextFormat.MARKDOWN)
    await teams.stream_update(PERSONAL, handle, "x", "# Plan\n\nRewritten", TextFormat.MARKDOWN)  # no extension
    final = await teams.stream_finish(PERSONAL, handle, "", "# Plan\n\nRewritten, whole.", TextFormat.MARKDOWN)
    assert final == handle
    assert shown(mock, str(PERSONAL.chat_id)) == ["**Plan**\n\nRewritten, whole."]  # one message, rendered
    assert stream_calls(mock) == ["stream start (streaming)", "stream streaming #2", "stream final"]
    [activity] = mock.activities(str(PERSONAL.chat_id))
    assert activity.stream_state == "final" and "entities" not in activity.payload


async def test_native_streaming_is_refused_outside_personal_chats(mock: MockTeams, teams: TeamsAdapter) -> None:
    assert teams.native_refusal(GROUP) is not None and teams.native_refusal(PERSONAL) is None
    with pytest.raises(NativeUnavailableError, match="one-on-one"):
        await teams.stream_start(GROUP, "hi", TextFormat.MARKDOWN)
    assert mock.calls == []


async def test_a_second_open_stream_in_the_chat_is_refused_by_teams(mock: MockTeams, teams: TeamsAdapter) -> None:
    await teams.stream_start(PERSONAL, "one", TextFormat.PLAIN)
    with pytest.raises(NativeUnavailableError, match="not allowed"):
        await teams.stream_start(PERSONAL, "two", TextFormat.PLAIN)


async def test_near_its_two_minutes_a_stream_is_finished_and_the_rest_goes_in_a_new_message(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    now = [1000.0]
    teams.clock = lambda: now[0]
    handle = await teams.stream_start(PERSONAL, "Part one", TextFormat.PLAIN)
    now[0] += 106
    with pytest.raises(NativeUnavailableError, match="new message"):
        await teams.stream_update(PERSONAL, handle, "Part one", "Part one and two", TextFormat.PLAIN)
    assert shown(mock, str(PERSONAL.chat_id)) == ["Part one"]  # finished, showing what was acknowledged
    with pytest.raises(MessageFrozenError):  # the core then keeps it and continues in a new message
        await teams.edit_text(PERSONAL, handle, "Part one and two", TextFormat.PLAIN)
    await teams.send_text(PERSONAL, " and two", TextFormat.PLAIN)
    assert shown(mock, str(PERSONAL.chat_id)) == ["Part one", " and two"]


async def test_teams_ending_a_stream_for_its_time_goes_on_in_a_new_message(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    handle = await teams.stream_start(PERSONAL, "Part one", TextFormat.PLAIN)
    mock.add_fault(
        "sendToConversation",
        2,
        {
            "status": 403,
            "description": "ContentStreamNotAllowed: Content stream finished due to exceeded streaming time.",
        },
    )
    with pytest.raises(NativeUnavailableError, match="two minutes"):
        await teams.stream_update(PERSONAL, handle, "Part one", "Part one and two", TextFormat.PLAIN)
    with pytest.raises(MessageFrozenError):
        await teams.edit_text(PERSONAL, handle, "Part one and two", TextFormat.PLAIN)


@pytest.mark.parametrize("fault", ["timeout_before_commit", "timeout_after_commit"], ids=["not-stored", "stored"])
async def test_a_final_whose_answer_was_lost_is_sent_again_and_shown_once(
    mock: MockTeams, teams: TeamsAdapter, fault: str
) -> None:
    """chaos-29-00231: a final that timed out before Teams stored it was reported uncertain, and the chat kept the
    streamed start only. The core now sends it again (``finish_repeats``): not stored, the second one completes the
    stream; stored, Teams refuses it as a completed stream's and the adapter takes that as done."""
    handle = await teams.stream_start(PERSONAL, "Part one", TextFormat.PLAIN)
    mock.add_fault("sendToConversation", 2, fault)  # counted from the stream start
    with pytest.raises(UncertainDeliveryError):
        await teams.stream_finish(PERSONAL, handle, "Part one", "Part one and two.", TextFormat.PLAIN)
    assert await teams.stream_finish(PERSONAL, handle, "Part one", "Part one and two.", TextFormat.PLAIN) == handle
    assert shown(mock, str(PERSONAL.chat_id)) == ["Part one and two."]
    [activity] = mock.activities(str(PERSONAL.chat_id))
    assert activity.stream_state == "final"
    assert len([c for c in mock.calls if c.method == "sendToConversation"]) == 3  # start, final, final again
    await teams.edit_text(PERSONAL, handle, "Part one and two, corrected.", TextFormat.PLAIN)  # not frozen
    assert shown(mock, str(PERSONAL.chat_id)) == ["Part one and two, corrected."]


async def test_a_first_final_that_landed_with_an_older_text_is_brought_up_to_date_in_place(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    handle = await teams.stream_start(PERSONAL, "Part one", TextFormat.PLAIN)
    mock.add_fault("sendToConversation", 2, "timeout_after_commit")
    with pytest.raises(UncertainDeliveryError):
        await teams.stream_finish(PERSONAL, handle, "Part one", "Part one, draft.", TextFormat.PLAIN)
    assert await teams.stream_finish(PERSONAL, handle, "Part one", "Part one, final.", TextFormat.PLAIN) == handle
    assert shown(mock, str(PERSONAL.chat_id)) == ["Part one, final."]


TIMED_OUT_403 = {
    "status": 403,
    "description": "ContentStreamNotAllowed: Content stream finished due to exceeded streaming time.",
}


async def test_a_repeated_final_refused_for_its_time_after_the_first_landed_is_shown_once(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    """The first final landed but its answer was lost; near the two minutes Teams may refuse the repeat for its time
    rather than as completed, saying nothing of the first. Taken as "not shown", the core would post the rest in a new
    message: the answer twice. Update Activity settles it: the completed stream takes it."""
    handle = await teams.stream_start(PERSONAL, "Part one", TextFormat.PLAIN)
    mock.add_fault("sendToConversation", 2, "timeout_after_commit")
    with pytest.raises(UncertainDeliveryError):
        await teams.stream_finish(PERSONAL, handle, "Part one", "Part one and two.", TextFormat.PLAIN)
    mock.add_fault("sendToConversation", 3, TIMED_OUT_403)
    assert await teams.stream_finish(PERSONAL, handle, "Part one", "Part one and two.", TextFormat.PLAIN) == handle
    assert shown(mock, str(PERSONAL.chat_id)) == ["Part one and two."]
    assert [c.method for c in mock.calls][-1] == "updateActivity"


async def test_a_repeated_final_refused_for_its_time_when_the_first_never_landed_goes_on_anew() -> None:
    """The same refusal when the first final never landed: the stream only timed out, so Update Activity is refused
    too, and the message keeps what was streamed while the rest goes on in a new one (shown once)."""
    now = [1000.0]
    async with MockTeams(clock=lambda: now[0]) as mock:
        teams = TeamsAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=2.0)
        try:
            handle = await teams.stream_start(PERSONAL, "Part one", TextFormat.PLAIN)
            mock.add_fault("sendToConversation", 2, "timeout_before_commit")
            with pytest.raises(UncertainDeliveryError):
                await teams.stream_finish(PERSONAL, handle, "Part one", "Part one and two.", TextFormat.PLAIN)
            now[0] += 121  # past Teams' two minutes: the mock refuses the repeat for its time
            with pytest.raises(NativeUnavailableError, match="two minutes"):
                await teams.stream_finish(PERSONAL, handle, "Part one", "Part one and two.", TextFormat.PLAIN)
            assert [c.method for c in mock.calls][-1] == "updateActivity"  # tried, refused: still a stream
            assert shown(mock, str(PERSONAL.chat_id)) == ["Part one"]
            await teams.send_text(PERSONAL, " and two.", TextFormat.PLAIN)
            assert shown(mock, str(PERSONAL.chat_id)) == ["Part one", " and two."]
        finally:
            await teams.close()


@pytest.mark.parametrize("landed", [True, False], ids=["first-landed", "first-lost"])
async def test_a_final_repeated_past_our_limit_and_refused_for_its_time_is_shown_once(landed: bool) -> None:
    """The first final's answer was lost; the repeat comes past the adapter's limit (it finishes the stream early
    with what the core knows it shows) and Teams refuses it for its time, saying nothing of the first. Taken as
    "ended at its time", the message was frozen and the core posted the rest in a new one: the answer twice when the
    first had landed. Update Activity settles it: a completed stream takes it, and the core's edit brings the
    message to the part's text; a stream that only timed out refuses it, and the rest goes on in a new message."""
    now = [1000.0]
    async with MockTeams(clock=lambda: now[0]) as mock:
        teams = TeamsAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=2.0)
        teams.clock = lambda: now[0]
        try:
            handle = await teams.stream_start(PERSONAL, "Part one", TextFormat.PLAIN)
            mock.add_fault("sendToConversation", 2, "timeout_after_commit" if landed else "timeout_before_commit")
            with pytest.raises(UncertainDeliveryError):
                await teams.stream_finish(PERSONAL, handle, "Part one", "Part one and two.", TextFormat.PLAIN)
            now[0] += 106  # past the adapter's STREAM_LIMIT_S: the repeat finishes the stream early
            mock.add_fault("sendToConversation", 3, TIMED_OUT_403)
            with pytest.raises(NativeUnavailableError):
                await teams.stream_finish(PERSONAL, handle, "Part one", "Part one and two.", TextFormat.PLAIN)
            # The core's next step (native off: the part goes on as a message): its message edited to the part's
            # text, and the rest posted anew only if that edit is refused as frozen.
            try:
                await teams.edit_text(PERSONAL, handle, "Part one and two.", TextFormat.PLAIN)
            except MessageFrozenError:
                await teams.send_text(PERSONAL, " and two.", TextFormat.PLAIN)
            expected = ["Part one and two."] if landed else ["Part one", " and two."]
            assert shown(mock, str(PERSONAL.chat_id)) == expected
        finally:
            await teams.close()


@pytest.mark.parametrize("fault", ["timeout_before_commit", "timeout_after_commit"], ids=["not-stored", "stored"])
async def test_a_stream_whose_append_was_lost_is_rewritten_whole_by_its_final(
    mock: MockTeams, teams: TeamsAdapter, fault: str
) -> None:
    """chaos-52-00024: an append (a streaming activity) timed out; the core never repeats an append that may have
    landed, so the part goes on as a message, rewritten whole by an edit. Teams refuses Update Activity on an open
    stream (403 ContentStreamNotAllowed), so that edit failed, the part was given up and the answer lost. The edit of
    an open stream is its final: the stream completes showing the whole text, and later edits update it in place."""
    handle = await teams.stream_start(PERSONAL, "Part one", TextFormat.PLAIN)
    mock.add_fault("sendToConversation", 2, fault)  # counted from the stream start
    with pytest.raises(UncertainDeliveryError):
        await teams.stream_update(PERSONAL, handle, "Part one", "Part one and two", TextFormat.PLAIN)
    assert await teams.edit_text(PERSONAL, handle, "Part one and two, three", TextFormat.PLAIN)
    assert shown(mock, str(PERSONAL.chat_id)) == ["Part one and two, three"]
    [activity] = mock.activities(str(PERSONAL.chat_id))
    assert activity.stream_state == "final"
    await teams.edit_text(PERSONAL, handle, "Part one and two, three, four.", TextFormat.PLAIN)
    assert shown(mock, str(PERSONAL.chat_id)) == ["Part one and two, three, four."]


async def test_a_stream_takes_one_request_a_second() -> None:
    now = [50.0]
    async with MockTeams(rate_limits=True, clock=lambda: now[0]) as mock:
        adapter = TeamsAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=2.0)
        try:
            handle = await adapter.stream_start(PERSONAL, "a", TextFormat.PLAIN)
            with pytest.raises(RateLimitedError) as info:
                await adapter.stream_update(PERSONAL, handle, "a", "ab", TextFormat.PLAIN)
            assert info.value.retry_after_s == 1
            now[0] += 1.0
            await adapter.stream_update(PERSONAL, handle, "a", "ab", TextFormat.PLAIN)  # the same sequence again
        finally:
            await adapter.close()
        assert shown(mock, str(PERSONAL.chat_id)) == ["ab"]


async def test_a_cancelled_stream_is_deleted(mock: MockTeams, teams: TeamsAdapter) -> None:
    handle = await teams.stream_start(PERSONAL, "gone soon", TextFormat.PLAIN)
    await teams.stream_cancel(PERSONAL, handle)
    assert shown(mock, str(PERSONAL.chat_id)) == []


async def test_a_stream_unknown_after_a_restart_is_finished_as_it_is_and_the_rest_goes_on_anew(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    handle = await teams.stream_start(PERSONAL, "Before the restart", TextFormat.PLAIN)
    again = TeamsAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=0.6)  # a new process: no stream state
    try:
        with pytest.raises(NativeUnavailableError, match="not open here"):
            await again.stream_update(
                PERSONAL, handle, "Before the restart", "Before the restart, after", TextFormat.PLAIN
            )
        with pytest.raises(MessageFrozenError):
            await again.edit_text(PERSONAL, handle, "Before the restart, after", TextFormat.PLAIN)
    finally:
        await again.close()
    [activity] = mock.activities(str(PERSONAL.chat_id))
    assert activity.stream_state == "final" and shown(mock, str(PERSONAL.chat_id)) == ["Before the restart"]


async def test_many_calls_at_once_share_one_token_request(mock: MockTeams) -> None:
    # a restarted sidecar resumes many runs at once (chaos seed 7: 48): one token request, not one each. A generous
    # deadline: on a loaded machine (CI at -n 4 on two cores) the 12 calls on the test's own loop took over the
    # fixture's 2 s once, and a token request past its deadline is asked again (test_a_slow_token_... below)
    teams = TeamsAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=20.0)
    try:
        chats = [Target(chat_id=f"19:room{i}@thread.v2") for i in range(12)]
        await asyncio.gather(*(teams.send_text(chat, "resumed", TextFormat.PLAIN) for chat in chats))
        assert [c.method for c in mock.calls].count("token") == 1
    finally:
        await teams.close()


async def test_a_slow_token_leaves_nothing_sent_never_an_uncertain_create(mock: MockTeams, teams: TeamsAdapter) -> None:
    # the token has its own deadline before the create's: past it nothing was sent (retried freely)
    mock.set_latency("token", [5000])  # past the fixture's 2 s deadline
    with pytest.raises(PlatformUnavailableError, match="token: no answer"):
        await teams.send_text(GROUP, "hi", TextFormat.PLAIN)
    assert [c.method for c in mock.calls] == ["token"] and shown(mock) == []
    await teams.send_text(GROUP, "hi", TextFormat.PLAIN)
    assert shown(mock) == ["hi"]


async def test_an_informative_start_shows_no_text_and_is_at_most_1000_characters(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    """The mock's stream rules (STREAMING_UX): the first streamSequence is 1; an informative update is the blue progress
    bar, not the message's text, at most 1,000 characters; streaming chunks with a greater streamSequence follow it; a
    stream activity past the size limit is 403 "Message size too large"; the final carries no streamSequence."""

    def typing(text: str, stream_type: str, sequence: int, stream_id: str | None = None) -> dict[str, Any]:
        info: dict[str, Any] = {"streamType": stream_type, "streamSequence": sequence}
        if stream_id is not None:
            info["streamId"] = stream_id
        return {"type": "typing", "text": text, "entities": [{"type": "streaminfo", **info}], "channelData": info}

    with pytest.raises(PayloadRejectedError):  # a stream's first streamSequence is 1
        await teams._stream_call(PERSONAL, typing("Thinking…", "informative", 2), creates=True)
    sent = await teams._stream_call(PERSONAL, typing("Thinking…", "informative", 1), creates=True)
    handle = str(sent.id)
    assert shown(mock, str(PERSONAL.chat_id)) == [""]  # the progress bar shows, the message has no text yet
    with pytest.raises(PayloadRejectedError):
        await teams._stream_call(PERSONAL, typing("x" * 1001, "informative", 2, handle), creates=False)
    await teams._stream_call(PERSONAL, typing("Searching the web", "informative", 2, handle), creates=False)
    await teams._stream_call(PERSONAL, typing("The answer", "streaming", 3, handle), creates=False)
    assert shown(mock, str(PERSONAL.chat_id)) == ["The answer"]
    with pytest.raises(StreamRefused, match="Message size too large"):  # 403 ContentStreamNotAllowed, not 413
        await teams._stream_call(PERSONAL, typing("The answer" + "x" * 60_000, "streaming", 4, handle), creates=False)
    final = render("The answer, whole.", TextFormat.PLAIN).activity()
    numbered = {"streamId": handle, "streamType": "final", "streamSequence": 5}  # the final carries no sequence
    with pytest.raises(PayloadRejectedError):
        await teams._stream_call(PERSONAL, {**final, "entities": [{"type": "streaminfo", **numbered}]}, creates=False)
    await teams._final(PERSONAL, handle, final)
    assert shown(mock, str(PERSONAL.chat_id)) == ["The answer, whole."]


async def test_status_lines_open_the_stream_as_informative_updates_and_the_answer_goes_on_in_it(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    """StreamStatus (STREAMING_UX): a status line with no stream open opens one (informative, streamSequence 1); the
    answer's stream_start continues that stream (streaming, the next sequence) and returns its id; a status line
    between chunks is an informative update; the final completes the one activity; the end then takes nothing down."""
    assert teams.status_chars == 1000
    await teams.stream_status(PERSONAL, "Searching the docs…")
    handle = await teams.stream_start(PERSONAL, "Refunds", TextFormat.PLAIN)
    await teams.stream_status(PERSONAL, "using lookup")
    await teams.stream_update(PERSONAL, handle, "Refunds", "Refunds take five days", TextFormat.PLAIN)
    await teams.stream_finish(PERSONAL, handle, "", "Refunds take five days.", TextFormat.PLAIN)
    await teams.stream_status_end(PERSONAL)
    assert stream_calls(mock) == [
        "stream start (informative)",
        "stream streaming #2",
        "stream informative #3",
        "stream streaming #4",
        "stream final",
    ]
    assert shown(mock, str(PERSONAL.chat_id)) == ["Refunds take five days."]
    assert {c.message_id for c in mock.calls if c.method == "sendToConversation"} == {handle}


async def test_a_stream_of_status_lines_alone_is_taken_down_at_the_end_and_the_chat_may_stream_again(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    await teams.stream_status(PERSONAL, "Searching the docs…")
    await teams.stream_status_end(PERSONAL)
    assert [c.method for c in mock.calls][-1] == "deleteActivity"
    handle = await teams.stream_start(PERSONAL, "A new stream", TextFormat.PLAIN)  # Teams allows one open stream
    await teams.stream_finish(PERSONAL, handle, "", "A new stream.", TextFormat.PLAIN)
    assert shown(mock, str(PERSONAL.chat_id)) == ["A new stream."]


async def test_an_old_stream_of_status_lines_is_replaced_and_none_goes_on_an_answer_near_its_time(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    now = [1000.0]
    teams.clock = lambda: now[0]
    await teams.stream_status(PERSONAL, "Searching the docs…")
    now[0] += 60  # older than half the stream's time: the answer opens its own, so it has room to stream
    handle = await teams.stream_start(PERSONAL, "Refunds", TextFormat.PLAIN)
    assert stream_calls(mock) == ["stream start (informative)", "stream start (streaming)"]
    informative = next(c for c in mock.calls if c.description == "stream start (informative)")
    deleted = next(c for c in mock.calls if c.method == "deleteActivity")
    assert deleted.message_id == informative.message_id != handle
    now[0] += 106
    with pytest.raises(NativeUnavailableError, match="two minutes"):  # dropped by the core; the answer goes on
        await teams.stream_status(PERSONAL, "using lookup")
    with pytest.raises(NativeUnavailableError, match="one-on-one"):
        await teams.stream_status(GROUP, "Searching")


async def test_agent_text_never_mentions_anyone_even_where_mentions_are_allowed(mock: MockTeams) -> None:
    """A Teams mention notifies only with a ``mention`` entity naming the person's id; agent text carries no id, so
    the adapter sends none, with ``allow_mentions`` or without (docs/platforms.md, Microsoft Teams)."""
    for markup in (MarkupPermissions(), MarkupPermissions(mentions=True)):
        adapter = TeamsAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=0.6, markup=markup)
        try:
            await adapter.send_text(GROUP, "<at>Everyone</at> look", TextFormat.MARKDOWN)
        finally:
            await adapter.close()
    payloads = [a.payload for a in mock.activities(str(GROUP.chat_id))]
    assert len(payloads) == 2 and all("entities" not in p for p in payloads)


def test_the_service_url_must_be_https_except_on_this_machine() -> None:
    """Every call carries the bot's bearer token: plain http is refused unless the service URL is loopback (the mock),
    with a message naming the URL and the fix, never the secret."""
    for bad in ("http://smba.example.net/teams", "ftp://127.0.0.1/x", "https://"):
        with pytest.raises(ConfigError) as info:
            TeamsAdapter(TOKEN, base_url=bad)
        assert "api_base" in str(info.value) and SECRET not in str(info.value)
    for good in ("https://smba.trafficmanager.net/emea/", "http://127.0.0.1:8086", "http://localhost:9/"):
        assert TeamsAdapter(TOKEN, base_url=good) is not None


async def test_a_final_that_landed_before_a_restart_is_brought_up_to_date_in_place_after_it(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    """A kill between a final that Teams stored (its answer lost) and its repeat: the new process has no stream
    state, so it finishes the stream as the core knows it shows, and Teams refuses that as a completed stream's. The
    stream's message shows the whole first final; were it frozen, the core would post the rest again in a new
    message (shown twice). It is a completed message that Update Activity brings to the text, once."""
    handle = await teams.stream_start(PERSONAL, "Part one", TextFormat.PLAIN)
    mock.add_fault("sendToConversation", 2, "timeout_after_commit")
    with pytest.raises(UncertainDeliveryError):
        await teams.stream_finish(PERSONAL, handle, "Part one", "Part one and two.", TextFormat.PLAIN)
    again = TeamsAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=2.0)  # a new process: no stream state
    try:
        with pytest.raises(NativeUnavailableError, match="not open here"):
            await again.stream_finish(PERSONAL, handle, "Part one", "Part one and two.", TextFormat.PLAIN)
        # the core goes on with the part as a message: an edit to its whole text, in place
        await again.edit_text(PERSONAL, handle, "Part one and two.", TextFormat.PLAIN)
    finally:
        await again.close()
    assert shown(mock, str(PERSONAL.chat_id)) == ["Part one and two."]


async def test_a_repeated_final_whose_update_in_place_was_lost_is_brought_up_to_date_on_the_next_try(
    mock: MockTeams, teams: TeamsAdapter
) -> None:
    """The first final landed (its answer lost) with an older text; the repeat is refused as a completed stream's and
    its Update Activity times out too: the core sends the final once more, and the stream, no longer in the
    adapter's memory, is finished as it is. Its message must stay open to the update (frozen, the core posts the rest
    again in a new message: shown twice)."""
    handle = await teams.stream_start(PERSONAL, "Part one", TextFormat.PLAIN)
    mock.add_fault("sendToConversation", 2, "timeout_after_commit")
    with pytest.raises(UncertainDeliveryError):
        await teams.stream_finish(PERSONAL, handle, "Part one", "Part one, draft.", TextFormat.PLAIN)
    mock.add_fault("updateActivity", 1, "timeout_before_commit")
    with pytest.raises(UncertainDeliveryError):
        await teams.stream_finish(PERSONAL, handle, "Part one", "Part one, final.", TextFormat.PLAIN)
    with pytest.raises(NativeUnavailableError):
        await teams.stream_finish(PERSONAL, handle, "Part one", "Part one, final.", TextFormat.PLAIN)
    await teams.edit_text(PERSONAL, handle, "Part one, final.", TextFormat.PLAIN)  # the core's next call
    assert shown(mock, str(PERSONAL.chat_id)) == ["Part one, final."]
