"""MockSlack's message metadata, conversations.history and conversations.replies, and after_commit faults,
driven by slack-sdk's AsyncWebClient unchanged (GET with query parameters for the reads) and by raw HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.models.metadata import Metadata
from slack_sdk.web.async_client import AsyncWebClient

from streamrelay.core.clock import FakeClock
from streamrelay.mocks.slack import BOT_USER_ID, PERSON_USER_ID, MockSlack, SlackLimits

pytestmark = pytest.mark.timeout(10)

TOKEN = "xoxb-1-2-mocksecret"
CHANNEL = "C0123456789"
DELIVERY = {"event_type": "streamrelay_delivery", "event_payload": {"delivery_id": "run-1/part-1"}}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=100.0)


@pytest.fixture
async def mock(clock: FakeClock) -> AsyncIterator[MockSlack]:
    async with MockSlack(clock=clock.now) as server:
        yield server


@pytest.fixture
async def slack(mock: MockSlack) -> AsyncIterator[AsyncWebClient]:
    client = AsyncWebClient(TOKEN, base_url=mock.base_url, retry_handlers=[])
    yield client


async def error_of(call: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        await call
    return str(caught.value.response["error"])


async def test_history_is_newest_first_and_shows_metadata_only_when_asked(
    slack: AsyncWebClient, mock: MockSlack
) -> None:
    question = mock.user_message(CHANNEL, "Where is my refund?")
    await slack.chat_postMessage(channel=CHANNEL, text="plain")
    posted = await slack.chat_postMessage(
        channel=CHANNEL,
        text="tagged",
        metadata=Metadata(event_type="streamrelay_delivery", event_payload={"delivery_id": "run-1/part-1"}),
    )

    bare = await slack.conversations_history(channel=CHANNEL)
    full = await slack.conversations_history(channel=CHANNEL, include_all_metadata=True)

    assert [m["text"] for m in bare["messages"]] == ["tagged", "plain", "Where is my refund?"]
    assert [m["user"] for m in bare["messages"]] == [BOT_USER_ID, BOT_USER_ID, PERSON_USER_ID]
    assert all("metadata" not in m for m in bare["messages"])
    assert full["messages"][0]["metadata"] == DELIVERY
    assert full["messages"][0]["ts"] == posted["ts"]
    assert "metadata" not in full["messages"][1]
    assert (full["has_more"], full["response_metadata"]) == (False, {"next_cursor": ""})
    assert full["messages"][2]["ts"] == question
    assert mock.calls[-1].method == "conversations.history"
    assert (mock.calls[-1].chat_id, mock.calls[-1].status) == (CHANNEL, 200)


async def test_metadata_as_a_json_string_in_a_form_body(mock: MockSlack) -> None:
    async with httpx.AsyncClient(base_url=mock.base_url) as http:
        posted = await http.post(
            "chat.postMessage", data={"token": TOKEN, "channel": CHANNEL, "text": "x", "metadata": json.dumps(DELIVERY)}
        )
        read = await http.get(
            "conversations.history",
            params={"channel": CHANNEL, "include_all_metadata": "1"},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )

    assert posted.json()["ok"] is True
    assert read.json()["messages"][0]["metadata"] == DELIVERY


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ("{not json", "invalid_metadata_format"),
        ("[1, 2]", "invalid_metadata_format"),
        (json.dumps({"event_payload": {}}), "invalid_metadata_schema"),
        (json.dumps({"event_type": "x", "event_payload": "no"}), "invalid_metadata_schema"),
    ],
)
async def test_bad_metadata_is_refused(slack: AsyncWebClient, mock: MockSlack, metadata: str, error: str) -> None:
    posted = slack.chat_postMessage(channel=CHANNEL, text="x", metadata=metadata)  # type: ignore[arg-type]

    assert await error_of(posted) == error
    assert mock.visible(CHANNEL) == []


async def test_chat_update_keeps_or_replaces_metadata(slack: AsyncWebClient, mock: MockSlack) -> None:
    posted = await slack.chat_postMessage(channel=CHANNEL, text="a", metadata=DELIVERY)
    await slack.chat_update(channel=CHANNEL, ts=posted["ts"], text="b")
    kept = await slack.conversations_history(channel=CHANNEL, include_all_metadata=True)
    other = {"event_type": "other", "event_payload": {"n": 1}}
    await slack.chat_update(channel=CHANNEL, ts=posted["ts"], text="c", metadata=other)
    replaced = await slack.conversations_history(channel=CHANNEL, include_all_metadata=True)

    assert (kept["messages"][0]["text"], kept["messages"][0]["metadata"]) == ("b", DELIVERY)
    assert (replaced["messages"][0]["text"], replaced["messages"][0]["metadata"]) == ("c", other)


async def test_history_bounds_limit_and_cursor(slack: AsyncWebClient) -> None:
    stamps = [(await slack.chat_postMessage(channel=CHANNEL, text=f"m{i}"))["ts"] for i in range(5)]

    after = await slack.conversations_history(channel=CHANNEL, oldest=stamps[1])
    between = await slack.conversations_history(channel=CHANNEL, oldest=stamps[1], latest=stamps[3], inclusive=True)
    first = await slack.conversations_history(channel=CHANNEL, limit=2)
    second = await slack.conversations_history(
        channel=CHANNEL, limit=2, cursor=first["response_metadata"]["next_cursor"]
    )
    last = await slack.conversations_history(
        channel=CHANNEL, limit=2, cursor=second["response_metadata"]["next_cursor"]
    )

    assert [m["text"] for m in after["messages"]] == ["m4", "m3", "m2"]
    assert [m["text"] for m in between["messages"]] == ["m3", "m2", "m1"]
    assert ([m["text"] for m in first["messages"]], first["has_more"]) == (["m4", "m3"], True)
    assert [m["text"] for m in second["messages"]] == ["m2", "m1"]
    assert ([m["text"] for m in last["messages"]], last["has_more"]) == (["m0"], False)
    assert last["response_metadata"]["next_cursor"] == ""


async def test_replies_are_parent_first_and_history_leaves_them_out(slack: AsyncWebClient, mock: MockSlack) -> None:
    parent = mock.user_message(CHANNEL, "A question")
    one = await slack.chat_postMessage(channel=CHANNEL, thread_ts=parent, text="one", metadata=DELIVERY)
    await slack.chat_postMessage(channel=CHANNEL, thread_ts=parent, text="two")

    thread = await slack.conversations_replies(channel=CHANNEL, ts=parent, include_all_metadata=True)
    from_a_reply = await slack.conversations_replies(channel=CHANNEL, ts=one["ts"])
    later = await slack.conversations_replies(channel=CHANNEL, ts=parent, oldest=one["ts"])
    top = await slack.conversations_history(channel=CHANNEL)

    assert [m["text"] for m in thread["messages"]] == ["A question", "one", "two"]
    assert thread["messages"][1]["metadata"] == DELIVERY
    assert (thread["messages"][1]["thread_ts"], thread["messages"][1]["parent_user_id"]) == (parent, PERSON_USER_ID)
    assert [m["text"] for m in from_a_reply["messages"]] == ["A question", "one", "two"]
    assert [m["text"] for m in later["messages"]] == ["A question", "two"]
    assert [m["text"] for m in top["messages"]] == ["A question"]
    assert (top["messages"][0]["reply_count"], top["messages"][0]["reply_users"]) == (2, [BOT_USER_ID])
    assert (thread["has_more"], thread["response_metadata"]) == (False, {"next_cursor": ""})


async def test_a_message_without_replies_is_its_own_thread(slack: AsyncWebClient) -> None:
    posted = await slack.chat_postMessage(channel=CHANNEL, text="alone")

    answer = await slack.conversations_replies(channel=CHANNEL, ts=posted["ts"])

    assert [m["text"] for m in answer["messages"]] == ["alone"]


async def test_read_errors(slack: AsyncWebClient, mock: MockSlack) -> None:
    posted = await slack.chat_postMessage(channel=CHANNEL, text="x")
    await slack.chat_delete(channel=CHANNEL, ts=posted["ts"])

    assert await error_of(slack.conversations_history(channel="#general")) == "channel_not_found"
    assert await error_of(slack.conversations_replies(channel="C0MISSING99", ts=posted["ts"])) == "thread_not_found"
    assert await error_of(slack.conversations_replies(channel=CHANNEL, ts=posted["ts"])) == "thread_not_found"
    assert await error_of(slack.conversations_replies(channel=CHANNEL, ts="1700000009.000100")) == "thread_not_found"
    assert await error_of(slack.conversations_history(channel=CHANNEL, cursor="bm9wZQ==")) == "invalid_cursor"
    assert await error_of(slack.conversations_history(channel=CHANNEL, oldest="yesterday")) == "invalid_ts_oldest"
    assert await error_of(slack.conversations_history(channel=CHANNEL, latest="-1")) == "invalid_ts_latest"
    assert await error_of(slack.conversations_history(channel=CHANNEL, limit="many")) == "invalid_arguments"  # type: ignore[arg-type]


async def test_reads_are_tier_3_each(clock: FakeClock) -> None:
    async with MockSlack(clock=clock.now, rate_limits=True, limits=SlackLimits(history_per_min=2)) as mock:
        slack = AsyncWebClient(TOKEN, base_url=mock.base_url, retry_handlers=[])
        await slack.conversations_history(channel=CHANNEL)
        await slack.conversations_history(channel=CHANNEL)
        with pytest.raises(SlackApiError) as caught:
            await slack.conversations_history(channel=CHANNEL)
        parent = mock.user_message(CHANNEL, "q")
        await slack.conversations_replies(channel=CHANNEL, ts=parent)  # its own budget
        clock.advance(60.0)
        await slack.conversations_history(channel=CHANNEL)

    assert (caught.value.response.status_code, caught.value.response["error"]) == (429, "ratelimited")
    assert caught.value.response.headers["Retry-After"] == "60"
    assert SlackLimits().per_minute("conversations.history") == SlackLimits().per_minute("conversations.replies") == 50


async def test_after_commit_post_is_stored_and_found_by_its_metadata(slack: AsyncWebClient, mock: MockSlack) -> None:
    mock.add_fault("chat.postMessage", 1, {"status": 503}, after_commit=True)

    with pytest.raises(SlackApiError) as caught:
        await slack.chat_postMessage(channel=CHANNEL, text="answer", metadata=DELIVERY)
    history = await slack.conversations_history(channel=CHANNEL, include_all_metadata=True)

    assert caught.value.response.status_code == 503
    assert [(m["text"], m["metadata"]) for m in history["messages"]] == [("answer", DELIVERY)]
    assert (mock.calls[0].status, mock.calls[0].ok, mock.calls[0].message_id) == (
        503,
        False,
        history["messages"][0]["ts"],
    )
