"""MockDiscord on its own: raw HTTP in, Discord's answers out, what a person sees stored."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from streamrelay.core.clock import FakeClock
from streamrelay.mocks.common import MockPlatform
from streamrelay.mocks.discord import PERSON_USER_ID, Bucket, DiscordLimits, MockDiscord
from streamrelay.mocks.discord.limits import retry_after_header

pytestmark = pytest.mark.timeout(5)

BOT_ID = "123456789012345678"
TOKEN = base64.urlsafe_b64encode(BOT_ID.encode()).decode().rstrip("=") + ".GmOcKz.mock_Secret-Hmac_0123456789abcdef"
OTHER_TOKEN = base64.urlsafe_b64encode(b"223456789012345678").decode().rstrip("=") + ".GmOcKz.other_Hmac-0123456789"
CHANNEL = "1100000000000000001"
OTHER_CHANNEL = "1100000000000000002"
RATE_HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Reset-After")


@dataclass
class Answer:
    status: int
    body: Any
    headers: Mapping[str, str]


class Client:
    """Raw REST calls with ``Authorization: Bot <token>`` and JSON bodies."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str) -> None:
        self.session = session
        self.base_url = base_url

    async def __call__(
        self,
        http_method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = TOKEN,
        scheme: str = "Bot",
        data: str | None = None,
        timeout_s: float = 2.0,
    ) -> Answer:
        headers = {"Authorization": f"{scheme} {token}"} if token is not None else {}
        kwargs: dict[str, Any] = {"json": body} if body is not None else {}
        if data is not None:
            kwargs = {"data": data, "headers": {**headers, "Content-Type": "application/json"}}
        else:
            kwargs["headers"] = headers
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        async with self.session.request(http_method, self.base_url + path, timeout=timeout, **kwargs) as resp:
            payload = await resp.json() if resp.content_type == "application/json" else None
            return Answer(resp.status, payload, resp.headers)

    async def send(self, content: Any, channel: str = CHANNEL, **fields: Any) -> Answer:
        return await self("POST", f"/channels/{channel}/messages", {"content": content, **fields})

    async def edit(self, message_id: str, content: Any, channel: str = CHANNEL, **fields: Any) -> Answer:
        return await self("PATCH", f"/channels/{channel}/messages/{message_id}", {"content": content, **fields})

    async def delete(self, message_id: str, channel: str = CHANNEL) -> Answer:
        return await self("DELETE", f"/channels/{channel}/messages/{message_id}")


@pytest.fixture
async def mock() -> AsyncIterator[MockDiscord]:
    async with MockDiscord() as server:
        yield server


@pytest.fixture
async def api(mock: MockDiscord) -> AsyncIterator[Client]:
    async with aiohttp.ClientSession() as session:
        yield Client(session, mock.base_url)


# ------------------------------------------------------------------ auth and routes


async def test_base_url_is_api_v10(mock: MockDiscord) -> None:
    assert mock.base_url.startswith("http://127.0.0.1:")
    assert mock.base_url.endswith("/api/v10")


@pytest.mark.parametrize(
    ("token", "scheme"), [(None, "Bot"), (TOKEN, "Bearer"), ("not-a-token", "Bot"), ("YWJj.x.y", "Bot")]
)
async def test_auth_needs_a_bot_token(api: Client, mock: MockDiscord, token: str | None, scheme: str) -> None:
    answer = await api("GET", "/users/@me", token=token, scheme=scheme)

    assert (answer.status, answer.body) == (401, {"message": "401: Unauthorized", "code": 0})
    assert (mock.calls[0].method, mock.calls[0].status) == ("getCurrentUser", 401)


async def test_unknown_routes(api: Client) -> None:
    missing = await api("GET", "/channels/1/pigeons")
    wrong_method = await api("GET", f"/channels/{CHANNEL}/messages")

    assert (missing.status, missing.body) == (404, {"code": 0, "message": "404: Not Found"})
    assert (wrong_method.status, wrong_method.body) == (405, {"code": 0, "message": "405: Method Not Allowed"})


async def test_login_routes_name_the_bot_of_the_token(api: Client) -> None:
    user = await api("GET", "/users/@me")
    app = await api("GET", "/oauth2/applications/@me")

    assert user.status == app.status == 200
    assert user.headers["Content-Type"] == "application/json"  # exactly: discord.py decodes only then
    assert (user.body["id"], user.body["bot"]) == (BOT_ID, True)
    assert app.body["id"] == BOT_ID


# ------------------------------------------------------------------ messages


async def test_create_answers_a_message_object(api: Client, mock: MockDiscord) -> None:
    first = await api.send("  **Hello** _there_\n")
    second = await api.send("again")

    message = first.body
    assert first.status == 200
    assert (message["channel_id"], message["content"], message["type"]) == (CHANNEL, "  **Hello** _there_\n", 0)
    assert message["author"]["id"] == BOT_ID
    assert message["id"].isdigit() and int(second.body["id"]) > int(message["id"])
    assert mock.visible(CHANNEL) == [(message["id"], "  **Hello** _there_\n"), (second.body["id"], "again")]
    assert mock.visible(int(CHANNEL)) == mock.visible(CHANNEL)
    assert mock.chats() == [CHANNEL]
    call = mock.calls[0]
    assert (call.chat_id, call.message_id, call.text) == (CHANNEL, message["id"], message["content"])


async def test_content_limit_counts_code_points(api: Client, mock: MockDiscord) -> None:
    ok = await api.send("🎩" * 2000)  # 4000 UTF-16 units, 2000 characters
    too_long = await api.send("x" * 2001)

    assert ok.status == 200
    assert (too_long.status, too_long.body) == (
        400,
        {
            "code": 50035,
            "message": "Invalid Form Body",
            "errors": {
                "content": {
                    "_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]
                }
            },
        },
    )
    assert len(mock.visible(CHANNEL)) == 1


@pytest.mark.parametrize("fields", [{"content": ""}, {"content": " \n "}, {"content": None}, {}])
async def test_empty_messages_are_refused(api: Client, mock: MockDiscord, fields: dict[str, Any]) -> None:
    answer = await api("POST", f"/channels/{CHANNEL}/messages", {"tts": False, **fields})

    assert (answer.status, answer.body) == (400, {"code": 50006, "message": "Cannot send an empty message"})
    assert mock.visible(CHANNEL) == []


async def test_an_embed_alone_is_a_message(api: Client) -> None:
    answer = await api("POST", f"/channels/{CHANNEL}/messages", {"embeds": [{"description": "x"}]})

    assert answer.status == 200


async def test_bodies_must_be_json_objects(api: Client) -> None:
    broken = await api("POST", f"/channels/{CHANNEL}/messages", data="{not json")
    array = await api("POST", f"/channels/{CHANNEL}/messages", data="[1]")

    assert broken.body == array.body == {"code": 50109, "message": "The request body contains invalid JSON."}


async def test_channels_must_exist(api: Client, mock: MockDiscord) -> None:
    mock.missing_channels.add(OTHER_CHANNEL)
    bad_id = await api.send("x", channel="general")
    missing = await api.send("x", channel=OTHER_CHANNEL)

    assert (bad_id.status, bad_id.body["errors"]["channel_id"]["_errors"][0]["code"]) == (400, "NUMBER_TYPE_COERCE")
    assert (missing.status, missing.body) == (404, {"code": 10003, "message": "Unknown Channel"})


async def test_edit_replaces_content_and_stamps_it(api: Client, mock: MockDiscord) -> None:
    sent = (await api.send("Hel")).body
    edited = await api.edit(sent["id"], "Hello")
    unchanged = await api.edit(sent["id"], "Hello")

    assert (edited.status, unchanged.status) == (200, 200)  # Discord has no "not modified"
    assert edited.body["edited_timestamp"] is not None
    assert mock.visible(CHANNEL) == [(sent["id"], "Hello")]
    assert [c.text for c in mock.calls] == ["Hel", "Hello", "Hello"]


async def test_edit_refusals(api: Client, mock: MockDiscord) -> None:
    mine = (await api.send("mine")).body["id"]
    theirs = mock.post_user_message(CHANNEL, "a person's question")

    unknown = await api.edit("99", "x")
    not_author = await api.edit(theirs, "x")
    emptied = await api.edit(mine, None)
    too_long = await api.edit(mine, "x" * 2001)

    assert (unknown.status, unknown.body) == (404, {"code": 10008, "message": "Unknown Message"})
    assert (not_author.status, not_author.body["code"]) == (403, 50005)
    assert (emptied.status, emptied.body["code"], too_long.body["code"]) == (400, 50006, 50035)
    assert mock.visible(CHANNEL) == [(mine, "mine")]
    assert [m.content for m in mock.messages(CHANNEL)] == ["mine", "a person's question"]


async def test_delete_hides_the_message(api: Client, mock: MockDiscord) -> None:
    ids = [(await api.send(text)).body["id"] for text in ("a", "b")]
    theirs = mock.post_user_message(CHANNEL, "question")

    deleted = await api.delete(ids[0])
    again = await api.delete(ids[0])
    not_mine = await api.delete(theirs)

    assert (deleted.status, deleted.body) == (204, None)
    assert (again.status, again.body["code"]) == (404, 10008)
    assert (not_mine.status, not_mine.body) == (403, {"code": 50013, "message": "Missing Permissions"})
    assert mock.visible(CHANNEL) == [(ids[1], "b")]


async def test_replies_reference_an_existing_message(api: Client, mock: MockDiscord) -> None:
    question = mock.post_user_message(CHANNEL, "question")
    reply = await api.send("answer", message_reference={"message_id": question})
    lost = await api.send("x", message_reference={"message_id": "42"})
    kept = await api.send("kept", message_reference={"message_id": "42", "fail_if_not_exists": False})

    assert (reply.body["type"], reply.body["message_reference"]["message_id"]) == (19, question)
    assert reply.body["referenced_message"]["content"] == "question"
    assert (lost.status, lost.body["errors"]["message_reference"]["_errors"][0]["code"]) == (
        400,
        "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
    )
    assert (kept.status, kept.body["type"], "message_reference" in kept.body) == (200, 0, False)
    assert [m.reference for m in mock.messages(CHANNEL)] == [None, question, None]


async def test_allowed_mentions_decide_who_is_pinged(api: Client, mock: MockDiscord) -> None:
    pinging = await api.send("@everyone look, <@42>")
    quiet = await api.send("@everyone look, <@42>", allowed_mentions={"parse": []})
    bad = await api.send("x", allowed_mentions={"parse": ["everybody"]})
    exclusive = await api.send("x", allowed_mentions={"parse": ["users"], "users": ["42"]})

    assert (pinging.body["mention_everyone"], [u["id"] for u in pinging.body["mentions"]]) == (True, ["42"])
    assert (quiet.body["mention_everyone"], quiet.body["mentions"]) == (False, [])
    assert (bad.status, exclusive.status) == (400, 400)
    assert [(m.mention_everyone, m.allowed_mentions) for m in mock.messages(CHANNEL)] == [
        (True, None),
        (False, {"parse": []}),
    ]


async def test_enforced_nonce_returns_the_earlier_message(api: Client, mock: MockDiscord) -> None:
    first = await api.send("once", nonce="12345", enforce_nonce=True)
    again = await api.send("once", nonce="12345", enforce_nonce=True)
    unenforced = await api.send("twice", nonce="12345")

    assert first.body["id"] == again.body["id"] != unenforced.body["id"]
    assert [text for _, text in mock.visible(CHANNEL)] == ["once", "twice"]


async def test_typing_is_recorded_not_shown(api: Client, mock: MockDiscord) -> None:
    answer = await api("POST", f"/channels/{CHANNEL}/typing")

    assert (answer.status, answer.body) == (204, None)
    assert [(c.method, c.chat_id, c.ok) for c in mock.calls] == [("triggerTypingIndicator", CHANNEL, True)]
    assert mock.visible(CHANNEL) == []


async def test_webhooks_post_edit_and_delete_their_own(api: Client, mock: MockDiscord) -> None:
    hook, secret = mock.add_webhook(CHANNEL)
    base = f"/webhooks/{hook}/{secret}"
    posted = await api("POST", f"{base}?wait=true", {"content": "via hook"}, token=None)
    silent = await api("POST", base, {"content": "no wait"}, token=None)
    edited = await api("PATCH", f"{base}/messages/{posted.body['id']}", {"content": "edited"}, token=None)
    bot_message = (await api.send("bot")).body["id"]
    foreign = await api("PATCH", f"{base}/messages/{bot_message}", {"content": "x"}, token=None)
    wrong_token = await api("POST", f"/webhooks/{hook}/nope", {"content": "x"}, token=None)
    unknown = await api("POST", "/webhooks/1/nope", {"content": "x"}, token=None)
    deleted = await api("DELETE", f"{base}/messages/{posted.body['id']}", token=None)

    assert (posted.status, posted.body["webhook_id"], silent.status, edited.status) == (200, hook, 204, 200)
    assert (foreign.body["code"], wrong_token.body["code"], unknown.body["code"]) == (10008, 50027, 10015)
    assert deleted.status == 204
    assert [text for _, text in mock.visible(CHANNEL)] == ["no wait", "bot"]
    assert [c.method for c in mock.calls][:3] == ["executeWebhook", "executeWebhook", "editWebhookMessage"]
    assert mock.calls[0].chat_id == CHANNEL


# ------------------------------------------------------------------ threads


async def start_thread(api: Client, message_id: str, body: Any = None, channel: str = CHANNEL) -> Answer:
    payload = {"name": "research", "auto_archive_duration": 1440} if body is None else body
    return await api("POST", f"/channels/{channel}/messages/{message_id}/threads", payload)


async def test_a_thread_from_a_message_is_a_channel_with_the_message_id(api: Client, mock: MockDiscord) -> None:
    anchor = (await api.send("plan")).body["id"]
    started = await start_thread(api, anchor, {"name": "research", "auto_archive_duration": 60})
    inside = await api.send("step 1", channel=anchor)
    edited = await api.edit(inside.body["id"], "step 1 done", channel=anchor)
    anchor_now = await api.edit(anchor, "plan")

    assert started.status == 201
    assert {k: started.body[k] for k in ("id", "type", "parent_id", "owner_id", "name")} == {
        "id": anchor,
        "type": 11,
        "parent_id": CHANNEL,
        "owner_id": BOT_ID,
        "name": "research",
    }
    assert started.body["thread_metadata"]["auto_archive_duration"] == 60
    assert (inside.status, inside.body["channel_id"], edited.status) == (200, anchor, 200)
    assert (anchor_now.body["flags"] & 32, anchor_now.body["thread"]["id"]) == (32, anchor)  # HAS_THREAD
    assert mock.visible(anchor) == [(inside.body["id"], "step 1 done")]
    assert mock.visible(CHANNEL) == [(anchor, "plan")]  # the thread's messages stay out of the channel
    assert [(t.id, t.parent_id, t.name) for t in mock.threads(CHANNEL)] == [(anchor, CHANNEL, "research")]
    assert mock.threads(OTHER_CHANNEL) == [] and len(mock.threads()) == 1
    assert [c.method for c in mock.calls][1] == "startThreadFromMessage"


async def test_a_person_message_can_start_a_thread(api: Client, mock: MockDiscord) -> None:
    question = mock.post_user_message(CHANNEL, "why?")

    assert (await start_thread(api, question)).status == 201


@pytest.mark.parametrize(
    ("body", "field", "code"),
    [
        ({}, "name", "BASE_TYPE_REQUIRED"),
        ({"name": ""}, "name", "BASE_TYPE_BAD_LENGTH"),
        ({"name": "x" * 101}, "name", "BASE_TYPE_BAD_LENGTH"),
        ({"name": 5}, "name", "BASE_TYPE_BAD_TYPE"),
        ({"name": "x", "auto_archive_duration": 30}, "auto_archive_duration", "BASE_TYPE_CHOICES"),
        ({"name": "x", "rate_limit_per_user": 21_601}, "rate_limit_per_user", "NUMBER_TYPE_MAX"),
    ],
)
async def test_thread_bodies_are_checked(
    api: Client, mock: MockDiscord, body: dict[str, Any], field: str, code: str
) -> None:
    anchor = (await api.send("plan")).body["id"]
    answer = await start_thread(api, anchor, body)

    assert (answer.status, answer.body["code"]) == (400, 50035)
    assert answer.body["errors"][field]["_errors"][0]["code"] == code
    assert mock.threads() == []


async def test_thread_names_of_100_characters_and_discord_py_defaults_pass(api: Client) -> None:
    anchor = (await api.send("plan")).body["id"]
    body = {"name": "é" * 100, "auto_archive_duration": 1440, "rate_limit_per_user": None}  # what discord.py sends

    assert (await start_thread(api, anchor, body)).status == 201


async def test_thread_refusals(api: Client, mock: MockDiscord) -> None:
    anchor = (await api.send("plan")).body["id"]
    first = await start_thread(api, anchor)
    again = await start_thread(api, anchor)
    inner = (await api.send("inside", channel=anchor)).body["id"]
    nested = await start_thread(api, inner, channel=anchor)
    unknown = await start_thread(api, "1300000000000000001")
    gone = (await api.send("gone")).body["id"]
    await api.delete(gone)
    deleted = await start_thread(api, gone)
    elsewhere = await start_thread(api, anchor, channel=OTHER_CHANNEL)
    mock.missing_channels.add(OTHER_CHANNEL)
    no_channel = await start_thread(api, anchor, channel=OTHER_CHANNEL)
    not_an_id = await start_thread(api, "abc")

    assert first.status == 201
    assert (again.status, again.body["code"], again.body["message"]) == (
        400,
        160004,
        "A thread has already been created for this message",
    )
    assert (nested.status, nested.body["code"], nested.body["message"]) == (
        400,
        50024,
        "Cannot execute action on this channel type",
    )
    assert [(a.status, a.body["code"]) for a in (unknown, deleted, elsewhere, no_channel, not_an_id)] == [
        (404, 10008),
        (404, 10008),
        (404, 10008),
        (404, 10003),
        (400, 50035),
    ]
    assert [t.id for t in mock.threads()] == [anchor]


async def test_starting_threads_has_its_own_bucket(limited: tuple[MockDiscord, Client, FakeClock]) -> None:
    mock, api, clock = limited
    anchors = [(await api.send(str(i))).body["id"] for i in range(5)]
    clock.advance(5.0)
    sent = await api.send("fresh window")
    started = [await start_thread(api, anchor) for anchor in anchors]
    over = await start_thread(api, sent.body["id"])
    in_a_thread = await api.send("first", channel=anchors[0])  # a thread is a channel: its own buckets
    clock.advance(5.0)
    later = await start_thread(api, sent.body["id"])

    assert [a.status for a in started] == [201] * 5
    assert sent.headers["X-RateLimit-Bucket"] != started[0].headers["X-RateLimit-Bucket"]
    assert (over.status, over.body["retry_after"]) == (429, 5.0)
    assert (in_a_thread.status, later.status) == (200, 201)
    assert len(mock.threads()) == 6


# ------------------------------------------------------------------ rate-limit headers and limits


async def test_every_answer_carries_its_bucket(api: Client) -> None:
    sent = await api.send("a")
    refused = await api.send("")
    other_channel = await api.send("b", channel=OTHER_CHANNEL)
    edited = await api.edit(sent.body["id"], "c")

    for answer in (sent, refused, other_channel, edited):
        assert answer.headers["Via"] == "1.1 google"
        assert all(name in answer.headers for name in RATE_HEADERS)
    assert sent.headers["X-RateLimit-Bucket"] == other_channel.headers["X-RateLimit-Bucket"]
    assert sent.headers["X-RateLimit-Bucket"] != edited.headers["X-RateLimit-Bucket"]  # edits: their own bucket
    # limits off: every answer shows a fresh window, so header-pacing clients never wait
    assert (sent.headers["X-RateLimit-Limit"], sent.headers["X-RateLimit-Remaining"]) == ("5", "4")
    assert (refused.headers["X-RateLimit-Remaining"], sent.headers["X-RateLimit-Reset-After"]) == ("5", "5.000")


@pytest.fixture
async def limited() -> AsyncIterator[tuple[MockDiscord, Client, FakeClock]]:
    clock = FakeClock(start=100.0)
    async with MockDiscord(rate_limits=True, clock=clock.now) as server, aiohttp.ClientSession() as session:
        yield server, Client(session, server.base_url), clock


async def test_five_messages_per_five_seconds_per_channel(limited: tuple[MockDiscord, Client, FakeClock]) -> None:
    mock, api, clock = limited
    answers = []
    for i in range(5):
        answers.append(await api.send(str(i)))
        clock.advance(0.5)
    refused = await api.send("")  # a refused call costs nothing
    over = await api.send("over")
    edit = await api.edit(answers[0].body["id"], "edited")  # edits have their own bucket
    elsewhere = await api.send("elsewhere", channel=OTHER_CHANNEL)
    clock.advance(2.5)
    later = await api.send("later")

    assert [a.headers["X-RateLimit-Remaining"] for a in answers] == ["4", "3", "2", "1", "0"]
    assert answers[4].headers["X-RateLimit-Reset-After"] == "3.000"
    assert refused.status == 400
    assert over.status == 429
    assert over.body == {"message": "You are being rate limited.", "retry_after": 2.5, "global": False}
    assert {k: over.headers[k] for k in ("Retry-After", "X-RateLimit-Scope", "X-RateLimit-Remaining", "Via")} == {
        "Retry-After": "3",
        "X-RateLimit-Scope": "user",
        "X-RateLimit-Remaining": "0",
        "Via": "1.1 google",
    }
    assert (edit.status, elsewhere.status, later.status) == (200, 200, 200)
    assert [c.retry_after_s for c in mock.calls if c.status == 429] == [2.5]
    assert len(mock.visible(CHANNEL)) == 6


async def test_fifty_requests_per_second_per_bot(limited: tuple[MockDiscord, Client, FakeClock]) -> None:
    mock, api, clock = limited
    statuses = []
    for i in range(50):
        statuses.append((await api.send("x", channel=str(2_000_000_000_000_000_000 + i))).status)
        clock.advance(0.01)
    over = await api("POST", f"/channels/{CHANNEL}/typing")
    other_bot = await api("GET", "/users/@me", token=OTHER_TOKEN)

    assert statuses == [200] * 50
    assert (over.status, over.body["global"], over.body["retry_after"]) == (429, True, 0.5)
    assert (over.headers["X-RateLimit-Global"], over.headers["X-RateLimit-Scope"]) == ("true", "global")
    assert "X-RateLimit-Bucket" not in over.headers and over.headers["Via"] == "1.1 google"
    assert other_bot.status == 200
    assert mock.calls[-2].retry_after_s == 0.5


async def test_limits_are_configurable() -> None:
    clock = FakeClock()
    limits = DiscordLimits(typing=Bucket(1, 10.0))
    async with MockDiscord(rate_limits=True, limits=limits, clock=clock.now) as server, aiohttp.ClientSession() as s:
        api = Client(s, server.base_url)
        answers = [await api("POST", f"/channels/{CHANNEL}/typing") for _ in range(2)]

    assert [a.status for a in answers] == [204, 429]
    assert answers[1].body["retry_after"] == 10.0


# ------------------------------------------------------------------ scripted faults and latency


async def test_faults_hit_the_nth_call_of_a_method(api: Client, mock: MockDiscord) -> None:
    mock.add_fault("createMessage", 2, {"status": 429, "retry_after_s": 2.5})
    mock.add_fault("createMessage", 3, {"status": 502})
    mock.add_fault("createMessage", 4, {"status": 403, "description": "Missing Access"})
    mock.add_fault("editMessage", 1, {"status": 404})

    first = await api.send("a")
    limited = await api.send("b")
    bad_gateway = await api.send("c")
    forbidden = await api.send("d")
    edit = await api.edit(first.body["id"], "z")
    fifth = await api.send("e")

    assert [a.status for a in (first, limited, bad_gateway, forbidden, edit, fifth)] == [200, 429, 502, 403, 404, 200]
    assert limited.body == {"message": "You are being rate limited.", "retry_after": 2.5, "global": False}
    assert (limited.headers["Retry-After"], limited.headers["Via"], limited.headers["X-RateLimit-Scope"]) == (
        "3",
        "1.1 google",
        "user",
    )
    assert bad_gateway.body == {"code": 0, "message": "Bad Gateway"}
    assert forbidden.body == {"code": 50001, "message": "Missing Access"}
    assert edit.body == {"code": 10008, "message": "Unknown Message"}
    assert [text for _, text in mock.visible(CHANNEL)] == ["a", "e"]
    assert [c.retry_after_s for c in mock.calls] == [None, 2.5, None, None, None, None]


async def test_timeout_after_commit_stores_then_hangs(api: Client, mock: MockDiscord) -> None:
    mock.add_fault("createMessage", 1, "timeout_after_commit")

    with pytest.raises(TimeoutError):
        await api("POST", f"/channels/{CHANNEL}/messages", {"content": "landed"}, timeout_s=0.2)

    assert [text for _, text in mock.visible(CHANNEL)] == ["landed"]
    assert (mock.calls[0].status, mock.calls[0].message_id) == (None, mock.visible(CHANNEL)[0][0])


async def test_timeout_before_commit_never_stores(api: Client, mock: MockDiscord) -> None:
    mock.add_fault("editMessage", 1, "timeout_before_commit")
    sent = (await api.send("a")).body["id"]

    with pytest.raises(TimeoutError):
        await api("PATCH", f"/channels/{CHANNEL}/messages/{sent}", {"content": "lost"}, timeout_s=0.2)

    assert mock.visible(CHANNEL) == [(sent, "a")]
    assert mock.calls[1].description == "timeout_before_commit"


async def test_reset_and_case_configuration(api: Client, mock: MockDiscord) -> None:
    await api.send("old")
    mock.reset()
    mock.configure_from_case(
        {
            "faults": [{"method": "createMessage", "nth": 1, "reply": {"status": 500}}],
            "latency_ms": {"createMessage": [0]},
            "mock": {"rate_limits": "documented"},
        }
    )
    answer = await api.send("new")

    assert (answer.status, mock.calls[0].text, mock.rate_limits) == (500, "new", True)
    assert mock.visible(CHANNEL) == []
    assert mock.chats() == []


def test_retry_after_header_rounds_up() -> None:
    assert [retry_after_header(s) for s in (0.001, 1.0, 2.5, 3.0001)] == [1, 1, 3, 4]


async def test_cloudflare_statuses_have_phrases(api: Client, mock: MockDiscord) -> None:
    mock.add_fault("triggerTypingIndicator", 1, {"status": 524})

    answer = await api("POST", f"/channels/{CHANNEL}/typing")

    assert (answer.status, answer.body) == (524, {"code": 0, "message": "A Timeout Occurred"})


def test_it_is_a_mock_platform() -> None:
    mock: MockPlatform = MockDiscord()  # checked by mypy against the shared protocol

    assert (mock.platform, mock.rate_limits, mock.calls) == ("discord", False, [])


def test_person_messages_are_not_visible() -> None:
    mock = MockDiscord()
    mock.post_user_message(CHANNEL, "hi")

    assert mock.visible(CHANNEL) == []
    assert mock.messages(CHANNEL)[0].author_id == PERSON_USER_ID


async def test_an_interaction_is_responded_to_once(api: Client, mock: MockDiscord) -> None:
    """createInteractionResponse: with the pressed interaction's token (no bot token), once; an ephemeral message
    is recorded as such; ``?with_response=true`` answers the callback response object."""
    message = (await api.send("Approve?", components=[_row("approve:x")])).body
    pressed = mock.press(CHANNEL, message["id"], "approve:x", user="600000000000000002")["d"]
    assert pressed["guild_id"] and pressed["member"]["user"]["id"] == "600000000000000002"
    assert pressed["attachment_size_limit"] > 0
    path = f"/interactions/{pressed['id']}/{pressed['token']}/callback"
    body = {"type": 4, "data": {"content": "You may not decide this approval.", "flags": 64}}
    first = await api("POST", f"{path}?with_response=true", body, token=None)
    again = await api("POST", path, {"type": 6}, token=None)
    unknown = await api("POST", "/interactions/1/nope/callback", {"type": 6}, token=None)
    assert first.status == 200 and first.body["interaction"]["response_message_ephemeral"] is True
    assert (again.status, again.body["code"]) == (400, 40060)
    assert (unknown.status, unknown.body["code"]) == (404, 10062)
    assert mock.responses == [
        {"interaction": pressed["id"], "type": 4, "content": "You may not decide this approval.", "ephemeral": True}
    ]
    other = mock.press(CHANNEL, message["id"], "approve:x")["d"]
    bad = await api("POST", f"/interactions/{other['id']}/{other['token']}/callback", {"type": 9}, token=None)
    assert (bad.status, bad.body["code"]) == (400, 50035)


def _row(custom_id: str) -> dict[str, Any]:
    return {"type": 1, "components": [{"type": 2, "style": 1, "label": "Approve", "custom_id": custom_id}]}
