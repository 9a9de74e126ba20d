"""MockSlack on its own: raw HTTP in, Slack's answers out, what a person sees stored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from streamrelay.core.clock import FakeClock
from streamrelay.mocks.slack import BOT_USER_ID, MockSlack, SlackLimits

pytestmark = pytest.mark.timeout(5)

TOKEN = "xoxb-1-2-mocksecret"
CHANNEL = "C0123456789"
OTHER = "C0987654321"
DM = "D0123456789"
Answer = tuple[int, dict[str, Any], str | None]


class Client:
    """Raw Web API calls: a JSON body with ``Authorization: Bearer`` by default; ``form=True`` form-encodes,
    ``query=True`` sends query parameters (as slack-sdk does for chat.delete); ``bearer=None`` sends no header."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str) -> None:
        self.session = session
        self.base_url = base_url

    async def __call__(
        self,
        method: str,
        *,
        bearer: str | None = TOKEN,
        form: bool = False,
        query: bool = False,
        timeout_s: float = 2.0,
        **params: Any,
    ) -> Answer:
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        body: dict[str, Any] = {"params": params} if query else {"data": params} if form else {"json": params}
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        async with self.session.post(self.base_url + method, headers=headers, timeout=timeout, **body) as resp:
            return resp.status, await resp.json(), resp.headers.get("Retry-After")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=100.0)


@pytest.fixture
async def mock(clock: FakeClock) -> AsyncIterator[MockSlack]:
    async with MockSlack(clock=clock.now, stream_idle_s=10.0) as server:
        yield server


@pytest.fixture
async def api(mock: MockSlack) -> AsyncIterator[Client]:
    async with aiohttp.ClientSession() as session:
        yield Client(session, mock.base_url)


def error(answer: Answer) -> tuple[int, str | None]:
    status, body, _ = answer
    return status, None if body["ok"] else body["error"]


async def test_base_url_is_slack_sdk_shaped(mock: MockSlack) -> None:
    assert mock.base_url.startswith("http://127.0.0.1:")
    assert mock.base_url.endswith("/api/")


async def test_auth(api: Client, mock: MockSlack) -> None:
    answers = [
        await api("auth.test", bearer=None),
        await api("auth.test", bearer="abc-123"),
        await api("auth.test", bearer=None, token=TOKEN),  # a JSON body cannot carry the token
        await api("auth.test", bearer=None, form=True, token=TOKEN),
    ]

    assert [error(a) for a in answers[:3]] == [(200, "not_authed"), (200, "invalid_auth"), (200, "not_authed")]
    assert error(answers[3]) == (200, None)
    assert answers[3][1]["user_id"] == BOT_USER_ID
    assert [c.method for c in mock.calls] == ["auth.test"] * 4


async def test_unknown_method(api: Client) -> None:
    assert error(await api("chat.postPigeon", channel=CHANNEL, text="x")) == (200, "unknown_method")


async def test_post_answers_increasing_ts_per_channel(api: Client, mock: MockSlack) -> None:
    first = await api("chat.postMessage", channel=CHANNEL, text="one")
    second = await api("chat.postMessage", form=True, channel=CHANNEL, text="two")
    other = await api("chat.postMessage", channel=OTHER, text="elsewhere")

    assert first[1]["ts"] == "1700000000.000100"
    assert (first[1]["channel"], first[1]["message"]["text"]) == (CHANNEL, "one")
    assert (second[1]["ts"], other[1]["ts"]) == ("1700000000.000200", "1700000000.000100")
    assert mock.visible(CHANNEL) == [("1700000000.000100", "one"), ("1700000000.000200", "two")]
    assert mock.chats() == [CHANNEL, OTHER]
    assert (mock.calls[0].chat_id, mock.calls[0].message_id, mock.calls[0].text) == (CHANNEL, first[1]["ts"], "one")


@pytest.mark.parametrize("channel", ["#general", "c0123456789", "U0123456789", "C01", "C0MISSING1"])
async def test_unknown_channels(api: Client, mock: MockSlack, channel: str) -> None:
    mock.missing_channels.add("C0MISSING1")

    assert error(await api("chat.postMessage", channel=channel, text="x")) == (200, "channel_not_found")


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, "no_text"),
        ({"text": " \n "}, "no_text"),
        ({"text": "a", "markdown_text": "a"}, "markdown_text_conflict"),
        ({"text": "x" * 40_001}, "msg_too_long"),
        ({"markdown_text": "x" * 12_001}, "msg_too_long"),
    ],
)
async def test_content_refusals(api: Client, mock: MockSlack, params: dict[str, Any], expected: str) -> None:
    assert error(await api("chat.postMessage", channel=CHANNEL, **params)) == (200, expected)
    assert mock.visible(CHANNEL) == []


async def test_limits_are_inclusive(api: Client, mock: MockSlack) -> None:
    await api("chat.postMessage", channel=CHANNEL, text="x" * 40_000)
    await api("chat.postMessage", channel=CHANNEL, markdown_text="y" * 12_000)

    assert [len(text) for _, text in mock.visible(CHANNEL)] == [40_000, 12_000]


async def test_a_person_reads_escaped_text_unescaped(api: Client, mock: MockSlack) -> None:
    await api("chat.postMessage", form=True, channel=CHANNEL, text="a &lt; b &amp;&gt; c", mrkdwn="false")
    await api("chat.postMessage", channel=CHANNEL, markdown_text="**bold** &amp;")

    plain, markdown = mock.messages(CHANNEL)
    assert (plain.text, plain.wire, plain.kind, plain.mrkdwn) == ("a < b &> c", "a &lt; b &amp;&gt; c", "text", False)
    assert (markdown.text, markdown.kind) == ("**bold** &amp;", "markdown_text")


async def test_threads(api: Client, mock: MockSlack) -> None:
    question = mock.post_user_message(CHANNEL, "question?")
    reply = await api("chat.postMessage", channel=CHANNEL, text="answer", thread_ts=question)
    top = await api("chat.postMessage", channel=CHANNEL, text="top")

    missing = await api("chat.postMessage", channel=CHANNEL, text="x", thread_ts="1600000000.000100")
    in_a_reply = await api("chat.postMessage", channel=CHANNEL, text="x", thread_ts=reply[1]["ts"])
    elsewhere = await api("chat.postMessage", channel=OTHER, text="x", thread_ts=question)

    assert [error(a) for a in (missing, in_a_reply, elsewhere)] == [(200, "thread_not_found")] * 3
    assert mock.visible(CHANNEL) == [(reply[1]["ts"], "answer"), (top[1]["ts"], "top")]  # the person's own left out
    assert [(m.text, m.thread_ts) for m in mock.messages(CHANNEL)] == [
        ("question?", None),
        ("answer", question),
        ("top", None),
    ]


async def test_update_and_delete(api: Client, mock: MockSlack) -> None:
    ts = (await api("chat.postMessage", channel=CHANNEL, text="Hel"))[1]["ts"]
    changed = await api("chat.update", channel=CHANNEL, ts=ts, markdown_text="Hello")
    same = await api("chat.update", channel=CHANNEL, ts=ts, markdown_text="Hello")
    unknown = await api("chat.update", channel=CHANNEL, ts="1700000000.009900", text="x")
    deleted = await api("chat.delete", query=True, channel=CHANNEL, ts=ts)
    again = await api("chat.delete", query=True, channel=CHANNEL, ts=ts)
    update_gone = await api("chat.update", channel=CHANNEL, ts=ts, text="x")

    assert (error(changed), error(same), error(deleted)) == ((200, None),) * 3  # Slack has no "not modified"
    assert changed[1]["message"]["edited"]["user"] == BOT_USER_ID
    assert [error(a) for a in (unknown, again, update_gone)] == [(200, "message_not_found")] * 3
    assert mock.visible(CHANNEL) == []
    assert mock.calls[4].message_id == ts


async def test_the_persons_messages_cannot_be_changed(api: Client, mock: MockSlack) -> None:
    question = mock.post_user_message(DM, "question?")

    assert error(await api("chat.update", channel=DM, ts=question, text="x")) == (200, "cant_update_message")
    assert error(await api("chat.delete", channel=DM, ts=question)) == (200, "cant_delete_message")


# ------------------------------------------------------------------ streams


async def start(api: Client, mock: MockSlack, channel: str = DM, **params: Any) -> tuple[str, str]:
    """Seed a question, start a stream in its thread; return (thread ts, stream ts)."""
    question = mock.post_user_message(channel, "question?")
    status, body, _ = await api("chat.startStream", channel=channel, thread_ts=question, **params)
    assert (status, body["ok"]) == (200, True), body
    return question, str(body["ts"])


async def test_a_stream_appends_then_stops(api: Client, mock: MockSlack) -> None:
    question, ts = await start(api, mock, markdown_text="Hel")
    await api("chat.appendStream", channel=DM, ts=ts, markdown_text="lo")
    await api("chat.appendStream", channel=DM, ts=ts, markdown_text="\n\n")  # whitespace is a chunk too
    stopped = await api("chat.stopStream", channel=DM, ts=ts, markdown_text="**world**")
    late = await api("chat.appendStream", channel=DM, ts=ts, markdown_text="!")

    assert stopped[1]["message"]["thread_ts"] == question
    assert error(late) == (200, "message_not_in_streaming_state")
    assert mock.visible(DM) == [(ts, "Hello\n\n**world**")]
    [_, message] = mock.messages(DM)
    assert (message.streamed, message.streaming, message.kind) == (True, False, "markdown_text")


async def test_stream_start_refusals(api: Client, mock: MockSlack) -> None:
    question = mock.post_user_message(CHANNEL, "question?")
    answers = [
        await api("chat.startStream", channel=DM, markdown_text="x"),
        await api("chat.startStream", channel=CHANNEL, thread_ts=question),
        await api("chat.startStream", channel=CHANNEL, thread_ts=question, recipient_user_id="U0PERSON1"),
        await api("chat.startStream", channel=DM, thread_ts="1600000000.000100"),
        await api("chat.startStream", channel=CHANNEL, thread_ts=question, text="x"),
    ]
    channel_ok = await api(
        "chat.startStream", channel=CHANNEL, thread_ts=question, recipient_user_id="U1", recipient_team_id="T1"
    )

    assert [error(a)[1] for a in answers] == [
        "invalid_arguments",
        "missing_recipient_user_id",
        "missing_recipient_team_id",
        "thread_not_found",
        "missing_recipient_user_id",
    ]
    assert error(channel_ok) == (200, None)


async def test_stream_chunk_rules(api: Client, mock: MockSlack) -> None:
    _, ts = await start(api, mock)
    answers = [
        await api("chat.appendStream", channel=DM, ts=ts, markdown_text=""),
        await api("chat.appendStream", channel=DM, ts=ts, text="plain"),
        await api("chat.appendStream", channel=DM, ts=ts, markdown_text="x" * 12_001),
        await api("chat.appendStream", channel=DM, ts="1700000000.009900", markdown_text="x"),
    ]

    assert [error(a)[1] for a in answers] == ["no_text", "invalid_arguments", "msg_too_long", "message_not_found"]


async def test_an_open_stream_cannot_be_updated_or_deleted(api: Client, mock: MockSlack) -> None:
    _, ts = await start(api, mock, markdown_text="draft")
    update = await api("chat.update", channel=DM, ts=ts, markdown_text="rewritten")
    delete = await api("chat.delete", channel=DM, ts=ts)
    await api("chat.stopStream", channel=DM, ts=ts)
    after_stop = await api("chat.update", channel=DM, ts=ts, markdown_text="rewritten")

    assert (error(update), error(delete)) == ((200, "streaming_state_conflict"), (200, "cant_delete_message"))
    assert error(after_stop) == (200, None)
    assert mock.visible(DM) == [(ts, "rewritten")]


async def test_an_idle_stream_expires(api: Client, mock: MockSlack, clock: FakeClock) -> None:
    _, ts = await start(api, mock, markdown_text="a")
    clock.advance(9.0)
    await api("chat.appendStream", channel=DM, ts=ts, markdown_text="b")  # activity: idle counts from here
    clock.advance(9.0)
    await api("chat.appendStream", channel=DM, ts=ts, markdown_text="c")
    clock.advance(10.5)
    expired = await api("chat.appendStream", channel=DM, ts=ts, markdown_text="d")
    stop = await api("chat.stopStream", channel=DM, ts=ts)
    update = await api("chat.update", channel=DM, ts=ts, markdown_text="abcd")

    assert [error(a) for a in (expired, stop)] == [(200, "message_not_in_streaming_state")] * 2
    assert error(update) == (200, None)
    assert mock.visible(DM) == [(ts, "abcd")]
    assert mock.messages(DM)[1].expired


async def test_streaming_can_be_disabled(api: Client, mock: MockSlack) -> None:
    mock.streaming_enabled = False
    question = mock.post_user_message(DM, "question?")

    assert error(await api("chat.startStream", channel=DM, thread_ts=question)) == (200, "unknown_method")


async def test_set_status_is_kept_not_shown(api: Client, mock: MockSlack) -> None:
    question = mock.post_user_message(DM, "question?")
    ok = await api("assistant.threads.setStatus", channel_id=DM, thread_ts=question, status="is typing…")
    no_thread = await api("assistant.threads.setStatus", channel_id=DM, status="is typing…")

    assert (error(ok), error(no_thread)) == ((200, None), (200, "invalid_arguments"))
    assert mock.status(DM, question) == "is typing…"
    assert mock.visible(DM) == []
    assert (mock.calls[0].chat_id, mock.calls[0].message_id, mock.calls[0].text) == (DM, question, "is typing…")


# ------------------------------------------------------------------ scripted faults and latency


async def test_fault_shapes(api: Client, mock: MockSlack) -> None:
    mock.add_fault("chat.postMessage", 1, {"status": 429, "retry_after_s": 2.5})
    mock.add_fault("chat.postMessage", 2, {"status": 503})
    mock.add_fault("chat.postMessage", 3, {"status": 400, "description": "not_in_channel"})
    mock.add_fault("chat.postMessage", 4, {"status": 404})

    answers = [await api("chat.postMessage", channel=CHANNEL, text=str(i)) for i in range(5)]

    assert [(status, body, header) for status, body, header in answers[:4]] == [
        (429, {"ok": False, "error": "ratelimited"}, "3"),
        (503, {"ok": False, "error": "service_unavailable"}, None),
        (200, {"ok": False, "error": "not_in_channel"}, None),
        (404, {"ok": False, "error": "not_found"}, None),
    ]
    assert answers[4][0] == 200
    assert mock.visible(CHANNEL) == [(answers[4][1]["ts"], "4")]
    assert [c.retry_after_s for c in mock.calls] == [3.0, None, None, None, None]
    assert [c.description for c in mock.calls[:3]] == ["ratelimited", "service_unavailable", "not_in_channel"]


async def test_timeout_after_commit_stores_then_hangs(api: Client, mock: MockSlack) -> None:
    mock.add_fault("chat.postMessage", 1, "timeout_after_commit")

    with pytest.raises(TimeoutError):
        await api("chat.postMessage", channel=CHANNEL, text="landed", timeout_s=0.2)

    assert mock.visible(CHANNEL) == [("1700000000.000100", "landed")]
    assert (mock.calls[0].status, mock.calls[0].message_id) == (None, "1700000000.000100")


async def test_timeout_before_commit_never_stores(api: Client, mock: MockSlack) -> None:
    mock.add_fault("chat.update", 1, "timeout_before_commit")
    ts = (await api("chat.postMessage", channel=CHANNEL, text="kept"))[1]["ts"]

    with pytest.raises(TimeoutError):
        await api("chat.update", channel=CHANNEL, ts=ts, text="lost", timeout_s=0.2)

    assert mock.visible(CHANNEL) == [(ts, "kept")]
    assert mock.calls[1].description == "timeout_before_commit"


async def test_reset_and_case_configuration(api: Client, mock: MockSlack) -> None:
    await api("chat.postMessage", channel=CHANNEL, text="old")
    mock.reset()
    mock.configure_from_case(
        {
            "faults": [{"method": "chat.postMessage", "nth": 1, "reply": {"status": 500}}],
            "latency_ms": {"chat.postMessage": [0]},
            "mock": {"rate_limits": "documented"},
        }
    )
    status, body, _ = await api("chat.postMessage", channel=CHANNEL, text="new")

    assert (status, body["error"], mock.calls[0].text, mock.rate_limits) == (500, "internal_server_error", "new", True)
    assert mock.visible(CHANNEL) == []
    assert mock.chats() == []


# ------------------------------------------------------------------ documented rate limits (fake clock)


async def test_post_message_one_per_second_per_channel(api: Client, mock: MockSlack, clock: FakeClock) -> None:
    mock.rate_limits = True
    statuses = [(await api("chat.postMessage", channel=CHANNEL, text=str(i)))[0] for i in range(3)]
    refused = await api("chat.postMessage", channel=CHANNEL, text="again")  # a refused call costs nothing
    other_channel = (await api("chat.postMessage", channel=OTHER, text="x"))[0]
    clock.advance(1.0)
    after_wait = (await api("chat.postMessage", channel=CHANNEL, text="later"))[0]

    assert statuses == [200, 200, 429]
    assert refused == (429, {"ok": False, "error": "ratelimited"}, "1")
    assert (other_channel, after_wait) == (200, 200)
    assert [text for _, text in mock.visible(CHANNEL)] == ["0", "1", "later"]


async def test_update_budget_is_shared_by_all_channels(api: Client, mock: MockSlack, clock: FakeClock) -> None:
    one = (await api("chat.postMessage", channel=CHANNEL, text="a"))[1]["ts"]
    two = (await api("chat.postMessage", channel=OTHER, text="b"))[1]["ts"]
    mock.rate_limits = True
    statuses = []
    for i in range(50):
        channel, ts = (CHANNEL, one) if i % 2 else (OTHER, two)
        statuses.append((await api("chat.update", channel=channel, ts=ts, text=str(i)))[0])
        clock.advance(0.5)
    refused = await api("chat.update", channel=CHANNEL, ts=one, text="x")
    delete = await api("chat.delete", channel=CHANNEL, ts=one)  # its own Tier 3 budget
    other_token = await api("chat.update", bearer="xoxb-9-9-otherapp", channel=OTHER, ts=two, text="y")

    assert statuses == [200] * 50
    assert refused == (429, {"ok": False, "error": "ratelimited"}, "35")  # the first update leaves at t=160
    assert (delete[0], other_token[0]) == (200, 200)


async def test_stream_tiers(api: Client, mock: MockSlack) -> None:
    mock.rate_limits = True
    question = mock.post_user_message(DM, "question?")
    starts = [(await api("chat.startStream", channel=DM, thread_ts=question))[0] for _ in range(21)]
    ts = mock.visible(DM)[0][0]
    appends = [(await api("chat.appendStream", channel=DM, ts=ts, markdown_text="x"))[0] for _ in range(101)]
    stop = await api("chat.stopStream", channel=DM, ts=ts)  # its own Tier 2 budget

    assert (starts, appends) == ([200] * 20 + [429], [200] * 100 + [429])
    assert error(stop) == (200, None)


async def test_limits_are_configurable(clock: FakeClock) -> None:
    limits = SlackLimits(post_burst=1, update_per_min=1)
    async with MockSlack(rate_limits=True, limits=limits, clock=clock.now) as server, aiohttp.ClientSession() as s:
        api = Client(s, server.base_url)
        statuses = [(await api("chat.postMessage", channel=CHANNEL, text="x"))[0] for _ in range(2)]
        ts = server.visible(CHANNEL)[0][0]
        updates = [(await api("chat.update", channel=CHANNEL, ts=ts, text=str(i)))[0] for i in range(2)]

    assert (statuses, updates) == ([200, 429], [200, 429])


async def test_seeding_at_a_given_ts(api: Client, mock: MockSlack) -> None:
    question = mock.add_user_message(DM, "1700000000.000100", "question?")
    reply = await api("chat.postMessage", channel=DM, text="answer", thread_ts=question)

    assert reply[1]["ts"] == "1700000000.000200"  # after the seeded one, never the same
    for ts, channel in (("1700000000.000100", DM), ("nope", DM), (None, "#general")):
        with pytest.raises(ValueError):
            mock.add_user_message(channel, ts, "x")


async def test_an_ephemeral_message_is_seen_by_its_user_only(api: Client, mock: MockSlack) -> None:
    """chat.postEphemeral: told to one user, never in the channel's history; a user id is required."""
    told = await api("chat.postEphemeral", channel=CHANNEL, user="U0PRESSER", text="You may not decide this approval.")
    assert told[1]["ok"] is True and "message_ts" in told[1]
    assert mock.ephemerals == [(CHANNEL, "U0PRESSER", "You may not decide this approval.")]
    assert mock.visible(CHANNEL) == []
    assert error(await api("chat.postEphemeral", channel=CHANNEL, text="x")) == (200, "user_not_found")
    assert error(await api("chat.postEphemeral", channel="#general", user="U0PRESSER", text="x")) == (
        200,
        "channel_not_found",
    )
