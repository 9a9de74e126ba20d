"""Matrix: MatrixAdapter through matrix-nio against the mock homeserver (mocks.matrix), what a person would see.

The shared contract is in test_all_adapters.py; here what is Matrix's own: the m.room.message content (body and the
sanitized formatted_body), m.replace edits, m.thread threads, redaction, typing, M_LIMIT_EXCEEDED with
retry_after_ms, the 65,536-byte event limit, and an uncertain send made exactly once by its transaction id.
"""

from __future__ import annotations

import re

import pytest

from streamrelay.adapters.matrix import MatrixAdapter
from streamrelay.adapters.matrix.render import TAGS
from streamrelay.core.errors import (
    ForbiddenError,
    PayloadRejectedError,
    RateLimitedError,
    RateScope,
    RejectReason,
    TargetNotFoundError,
    UncertainDeliveryError,
    UnreadableAnswerError,
)
from streamrelay.core.events import Target
from streamrelay.core.ports import PendingSend, SettleOutcome, TextFormat
from streamrelay.mocks.matrix import MatrixLimits, MockMatrix
from tests.contract.conftest import platform_fixtures

TOKEN = "syt_c3RyZWFtcmVsYXk_mockSecretToken0123456789_1a2b3c"
"""Shaped like a Synapse access token (syt_, the base64 localpart "streamrelay", random, checksum)."""
ROOM = "!room1:mock.local"
TARGET = Target(chat_id=ROOM)


mock, matrix = platform_fixtures(
    MockMatrix, lambda url: MatrixAdapter(TOKEN, base_url=url, send_timeout_s=0.6), adapter="matrix"
)


def shown(mock: MockMatrix, room: str = ROOM) -> list[str]:
    return [text for _, text in mock.visible(room)]


async def test_markdown_goes_as_body_and_sanitized_html(mock: MockMatrix, matrix: MatrixAdapter) -> None:
    text = "# Plan\n\n**bold** ~~old~~ <script>alert(1)</script> [x](javascript:alert(1)) ![img](https://e.x/a.png)"
    event_id = await matrix.send_text(TARGET, text, TextFormat.MARKDOWN)
    [(event, content)] = mock.messages(ROOM)
    assert event.event_id == event_id and content["body"] == text
    assert content["format"] == "org.matrix.custom.html"
    html = content["formatted_body"]
    assert "<strong>bold</strong>" in html and "<del>old</del>" in html and "<h1>Plan</h1>" in html
    assert "<script>" not in html and "javascript:" not in html.split("[x](")[0]
    assert '<a href="https://e.x/a.png">img</a>' in html  # an image is a link: img may only show mxc:// URIs
    assert set(re.findall(r"</?([a-z0-9]+)", html)) <= TAGS
    assert content["m.mentions"] == {}  # no one is mentioned by agent text


async def test_plain_text_has_no_html(mock: MockMatrix, matrix: MatrixAdapter) -> None:
    await matrix.send_text(TARGET, "**not bold**", TextFormat.PLAIN)
    [(_, content)] = mock.messages(ROOM)
    assert content["body"] == "**not bold**" and "formatted_body" not in content


async def test_an_edit_is_an_m_replace_event_and_the_room_shows_its_new_content(
    mock: MockMatrix, matrix: MatrixAdapter
) -> None:
    event_id = await matrix.send_text(TARGET, "Hello", TextFormat.MARKDOWN)
    assert await matrix.edit_text(TARGET, event_id, "Hello **world**", TextFormat.MARKDOWN) is True
    assert mock.visible(ROOM) == [(event_id, "Hello **world**")]
    edit = mock.events(ROOM)[-1]
    assert edit.content["m.relates_to"] == {"rel_type": "m.replace", "event_id": event_id}
    assert edit.content["m.new_content"]["formatted_body"] == "<p>Hello <strong>world</strong></p>"
    assert edit.content["body"] == "* Hello **world**"  # the fallback for clients without edits


async def test_a_sub_agent_thread_is_an_m_thread_relation_to_its_anchor(
    mock: MockMatrix, matrix: MatrixAdapter
) -> None:
    anchor = await matrix.send_text(TARGET, "Working on it", TextFormat.PLAIN)
    thread = await matrix.open_thread(TARGET, anchor, "researcher")
    assert thread == Target(chat_id=ROOM, thread_id=anchor)
    assert matrix.thread_refusal(thread) is not None  # threads do not nest
    reply = await matrix.send_text(thread, "child says hi", TextFormat.PLAIN)
    event = next(e for e in mock.events(ROOM) if e.event_id == reply)
    assert event.content["m.relates_to"]["rel_type"] == "m.thread"
    assert event.content["m.relates_to"]["event_id"] == anchor
    assert shown(mock) == ["Working on it", "child says hi"]


async def test_a_redacted_message_is_gone(mock: MockMatrix, matrix: MatrixAdapter) -> None:
    keep = await matrix.send_text(TARGET, "keep", TextFormat.PLAIN)
    drop = await matrix.send_text(TARGET, "drop", TextFormat.PLAIN)
    await matrix.delete_message(TARGET, drop)
    assert mock.visible(ROOM) == [(keep, "keep")]
    with pytest.raises(TargetNotFoundError):
        await matrix.delete_message(TARGET, "$nosuchevent")


async def test_the_person_s_message_cannot_be_redacted_by_the_bot(mock: MockMatrix, matrix: MatrixAdapter) -> None:
    theirs = mock.user_message(ROOM, "question")
    with pytest.raises(ForbiddenError):
        await matrix.delete_message(TARGET, theirs)


async def test_typing_names_the_bot_and_is_taken_down(mock: MockMatrix, matrix: MatrixAdapter) -> None:
    await matrix.send_typing(TARGET)
    assert mock.typing_users(ROOM) == ["@streamrelay:mock.local"]
    await matrix.clear_typing(TARGET)
    assert mock.typing_users(ROOM) == []
    assert [c.method for c in mock.calls] == ["whoami", "typing", "typing"]  # the user id is read once


async def test_m_limit_exceeded_carries_retry_after_ms_and_nio_never_retries(
    mock: MockMatrix, matrix: MatrixAdapter
) -> None:
    mock.add_fault("send", 1, {"status": 429, "retry_after_s": 2.5})
    with pytest.raises(RateLimitedError) as info:
        await matrix.send_text(TARGET, "Hi", TextFormat.PLAIN)
    assert info.value.retry_after_s == 2.5 and info.value.scope is RateScope.BOT
    assert [c.status for c in mock.calls] == [429]  # one request: nio's own 429 sleep-and-retry is off
    assert shown(mock) == []


async def test_the_documented_rc_message_limit_answers_429_past_the_burst() -> None:
    async with MockMatrix(rate_limits=True, limits=MatrixLimits(per_second=0.2, burst_count=3)) as server:
        adapter = MatrixAdapter(TOKEN, base_url=server.base_url, send_timeout_s=2.0)
        try:
            for n in range(3):
                await adapter.send_text(TARGET, f"m{n}", TextFormat.PLAIN)
            with pytest.raises(RateLimitedError) as info:
                await adapter.send_text(TARGET, "one too many", TextFormat.PLAIN)
        finally:
            await adapter.close()
    assert 4.0 < info.value.retry_after_s <= 5.0  # 1 / 0.2 s for the next slot
    assert server.calls[-1].retry_after_s == info.value.retry_after_s


async def test_an_event_over_65536_bytes_is_too_long_and_measure_knows_it(
    mock: MockMatrix, matrix: MatrixAdapter
) -> None:
    text = "é" * 33_000  # 66,000 bytes of UTF-8 in the body alone
    assert matrix.measure(text, TextFormat.PLAIN) > matrix.max_units
    with pytest.raises(PayloadRejectedError) as info:
        await matrix.send_text(TARGET, text, TextFormat.PLAIN)
    assert info.value.reason is RejectReason.TOO_LONG
    fits = "x" * 30_000
    assert matrix.measure(fits, TextFormat.PLAIN) <= matrix.max_units
    await matrix.send_text(TARGET, fits, TextFormat.PLAIN)  # its edit fits too: measure counts the edit's bytes
    [event_id] = [mid for mid, _ in mock.visible(ROOM)]
    await matrix.edit_text(TARGET, str(event_id), "y" * 30_000, TextFormat.PLAIN)


async def test_a_send_retried_with_its_transaction_id_is_stored_once(mock: MockMatrix, matrix: MatrixAdapter) -> None:
    mock.add_fault("send", 1, "timeout_after_commit")
    with pytest.raises(UncertainDeliveryError):
        await matrix.send_text(TARGET, "Maybe", TextFormat.PLAIN, delivery_id="sr-maybe")
    assert shown(mock) == ["Maybe"]  # stored, unanswered

    settled = await matrix.settle_send(TARGET, PendingSend("sr-maybe", "Maybe", TextFormat.PLAIN))

    [(stored_id, _)] = mock.visible(ROOM)
    assert (settled.outcome, settled.message_id) == (SettleOutcome.FOUND, stored_id)
    assert shown(mock) == ["Maybe"]  # the homeserver deduplicated the transaction: no second event
    assert len(mock.events(ROOM)) == 1


@pytest.mark.parametrize(
    "reply",
    [
        {"status": 200, "body": "<html><body>proxy</body></html>", "content_type": "text/html"},
        {"status": 200, "body": ""},
        {"status": 200, "body": {"event_id": None}},
    ],
    ids=["html", "empty", "no-event-id"],
)
async def test_a_2xx_send_answer_that_cannot_be_read_is_unknown_and_settled_by_its_transaction_id(
    mock: MockMatrix, matrix: MatrixAdapter, reply: dict[str, object]
) -> None:
    """A 200 the adapter cannot read may follow a stored event (a proxy's page, an empty body): unknown, as Slack
    and Discord say (UnreadableAnswerError), never a failure that would call the message not sent (breaker: it was
    PermanentDeliveryError "HTTP 200 no errcode", the run reported failed)."""
    mock.add_fault("send", 1, reply, after_commit=True)  # stored, then the answer nobody can read
    with pytest.raises(UnreadableAnswerError) as info:
        await matrix.send_text(TARGET, "Maybe", TextFormat.PLAIN, delivery_id="sr-unread")
    assert "HTTP 200" in str(info.value) and TOKEN not in str(info.value)
    settled = await matrix.settle_send(TARGET, PendingSend("sr-unread", "Maybe", TextFormat.PLAIN))
    assert settled.outcome is SettleOutcome.FOUND and shown(mock) == ["Maybe"] and len(mock.events(ROOM)) == 1


async def test_a_room_the_bot_is_not_in_is_forbidden(mock: MockMatrix, matrix: MatrixAdapter) -> None:
    mock.rooms.missing.add("!elsewhere:mock.local")
    with pytest.raises(ForbiddenError):
        await matrix.send_text(Target(chat_id="!elsewhere:mock.local"), "hi", TextFormat.PLAIN)


def test_targets_are_room_and_event_ids(matrix: MatrixAdapter) -> None:
    assert matrix.check_target(TARGET) is None
    assert matrix.check_target(Target(chat_id=ROOM, thread_id="$root")) is None
    assert "room id" in (matrix.check_target(Target(chat_id="room1")) or "")
    assert "event id" in (matrix.check_target(Target(chat_id=ROOM, reply_to="42")) or "")
    for ok in ("!r:mock.local:8448", "!r:[::1]:8448", "!Abc/+=._-:127.0.0.1"):
        assert matrix.check_target(Target(chat_id=ok)) is None, ok


@pytest.mark.parametrize("room", [f"{ROOM}\n", "!r:mock.local/../x", "!r:mock.local?a=b#c", "!r:mock.local/send/x"])
def test_a_room_id_whose_server_name_is_no_host_is_refused_at_the_start(matrix: MatrixAdapter, room: str) -> None:
    """A server name is a host and a port (https://spec.matrix.org/latest/appendices/#server-name): a trailing
    newline (the regex's ``$`` let it through), a path, a query is refused when the run starts, not answered 400 by
    the homeserver later as a failed run (breaker); the mock refuses the newline too."""
    assert "room id" in (matrix.check_target(Target(chat_id=room)) or "")
    assert "event id" in (matrix.check_target(Target(chat_id=ROOM, thread_id="$root\n")) or "")


async def test_the_mock_refuses_a_room_id_with_a_trailing_newline(mock: MockMatrix, matrix: MatrixAdapter) -> None:
    with pytest.raises(PayloadRejectedError):
        await matrix.send_text(Target(chat_id=f"{ROOM}\n"), "hi", TextFormat.PLAIN)
    assert shown(mock, f"{ROOM}\n") == [] and shown(mock) == []


def test_the_token_is_never_in_the_repr(matrix: MatrixAdapter) -> None:
    assert "mockSecret" not in repr(matrix) and "mockSecret" not in str(matrix)
