"""MockTelegram on its own: raw HTTP in, Telegram's answers out, what a person sees stored."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from streamrelay.core.clock import FakeClock
from streamrelay.mocks.common import MockPlatform
from streamrelay.mocks.telegram import NOT_MODIFIED, MockTelegram, TelegramLimits

pytestmark = pytest.mark.timeout(5)

TOKEN = "123456:ABC-def_456"


class Client:
    """Raw Bot API calls: JSON bodies by default, form-encoded with ``form=True``."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str) -> None:
        self.session = session
        self.base_url = base_url

    async def __call__(
        self, method: str, *, token: str = TOKEN, form: bool = False, timeout_s: float = 2.0, **params: Any
    ) -> tuple[int, dict[str, Any], str | None]:
        url = f"{self.base_url}/bot{token}/{method}"
        body: dict[str, Any] = {"data": params} if form else {"json": params}
        async with self.session.post(url, timeout=aiohttp.ClientTimeout(total=timeout_s), **body) as resp:
            return resp.status, await resp.json(), resp.headers.get("Retry-After")


@pytest.fixture
async def mock() -> AsyncIterator[MockTelegram]:
    async with MockTelegram() as server:
        yield server


@pytest.fixture
async def api(mock: MockTelegram) -> AsyncIterator[Client]:
    async with aiohttp.ClientSession() as session:
        yield Client(session, mock.base_url)


def test_is_a_mock_platform() -> None:
    platform: MockPlatform = MockTelegram()  # mypy checks the shape the case runner and the demo rely on

    assert platform.platform == "telegram"
    assert (platform.rate_limits, platform.calls) == (False, [])


async def test_token_must_look_like_a_bot_token(api: Client, mock: MockTelegram) -> None:
    status, body, _ = await api("getMe", token="nope")

    assert (status, body) == (401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
    assert mock.calls[0].status == 401


async def test_unknown_method_is_not_found(api: Client) -> None:
    status, body, _ = await api("sendPigeon", chat_id=1)

    assert (status, body["description"]) == (404, "Not Found")


async def test_get_me_names_the_bot(api: Client) -> None:
    status, body, _ = await api("getme")  # method names are case-insensitive

    assert status == 200
    assert body["result"]["id"] == 123456
    assert body["result"]["is_bot"] is True


async def test_send_answers_a_message_object(api: Client, mock: MockTelegram) -> None:
    status, body, _ = await api("sendMessage", form=True, chat_id="-1001", text="hi")

    message = body["result"]
    assert (status, body["ok"]) == (200, True)
    assert message["message_id"] == 1
    assert message["chat"] == {"id": -1001, "type": "group", "title": "Mock group"}
    assert message["text"] == "hi"
    assert isinstance(message["date"], int)
    assert mock.visible(-1001) == [(1, "hi")]
    assert mock.visible("-1001") == [(1, "hi")]


async def test_trimming_shifts_entities(api: Client, mock: MockTelegram) -> None:
    entities = [{"type": "bold", "offset": 0, "length": 4}, {"type": "italic", "offset": 3, "length": 4}]
    await api("sendMessage", chat_id=5, text="  🎩ab  ", entities=json.dumps(entities))

    [message] = mock.messages(5)
    assert message.text == "🎩ab"
    assert message.entities == [
        {"type": "bold", "offset": 0, "length": 2},
        {"type": "italic", "offset": 1, "length": 3},
    ]


@pytest.mark.parametrize(
    "entities",
    [
        [{"type": "bold", "offset": 2, "length": 2}],
        [{"type": "bold", "offset": -1, "length": 1}],
        [{"type": "sparkle", "offset": 0, "length": 1}],
        [{"type": "text_link", "offset": 0, "length": 1}],
        "not json",
    ],
)
async def test_bad_entities_cannot_be_parsed(api: Client, mock: MockTelegram, entities: object) -> None:
    raw = entities if isinstance(entities, str) else json.dumps(entities)
    status, body, _ = await api("sendMessage", chat_id=5, text="abc", entities=raw)

    assert status == 400
    assert body["description"].startswith("Bad Request: can't parse")
    assert mock.visible(5) == []


async def test_length_counts_code_points(api: Client) -> None:
    ok, _, _ = await api("sendMessage", chat_id=5, text="🎩" * 4096)  # 8192 UTF-16 units, 4096 characters
    too_long, body, _ = await api("sendMessage", chat_id=5, text="x" * 4097)

    assert (ok, too_long, body["description"]) == (200, 400, "Bad Request: message is too long")


@pytest.mark.parametrize("text", ["", "  \n "])
async def test_empty_text_is_refused(api: Client, text: str) -> None:
    status, body, _ = await api("sendMessage", chat_id=5, text=text)

    assert (status, body["description"]) == (400, "Bad Request: message text is empty")


async def test_unchanged_edit_is_not_modified(api: Client, mock: MockTelegram) -> None:
    await api("sendMessage", chat_id=5, text="abc")
    same = await api("editMessageText", chat_id=5, message_id=1, text="abc ")
    bolder = await api(
        "editMessageText",
        chat_id=5,
        message_id=1,
        text="abc",
        entities=[{"type": "bold", "offset": 0, "length": 1}],
    )

    assert (same[0], same[1]["description"]) == (400, NOT_MODIFIED)
    assert bolder[0] == 200
    assert "edit_date" in bolder[1]["result"]


async def test_unknown_targets_are_not_found(api: Client) -> None:
    await api("sendMessage", chat_id=5, text="abc")

    answers = [
        await api("editMessageText", chat_id=5, message_id=9, text="x"),
        await api("editMessageText", chat_id=6, message_id=1, text="x"),
        await api("deleteMessage", chat_id=5, message_id=9),
        await api("sendMessage", chat_id=5, text="x", reply_parameters={"message_id": 9}),
    ]

    assert [body["description"] for _, body, _ in answers] == [
        "Bad Request: message to edit not found",
        "Bad Request: message to edit not found",
        "Bad Request: message to delete not found",
        "Bad Request: message to be replied not found",
    ]


async def test_deleted_messages_are_not_visible(api: Client, mock: MockTelegram) -> None:
    for text in ("a", "b", "c"):
        await api("sendMessage", chat_id=5, text=text)
    await api("sendMessage", chat_id=7, text="elsewhere")
    status, body, _ = await api("deleteMessage", chat_id=5, message_id=2)

    assert (status, body["result"]) == (200, True)
    assert mock.visible(5) == [(1, "a"), (3, "c")]
    assert mock.chats() == [5, 7]


async def test_html_parse_mode_becomes_entities(api: Client, mock: MockTelegram) -> None:
    html = '<b>bold</b> &amp; <a href="https://x.org">link</a> <pre><code class="language-py">x=1</code></pre>'
    await api("sendMessage", chat_id=5, text=html, parse_mode="HTML")
    status, body, _ = await api("sendMessage", chat_id=5, text="<blink>x</blink>", parse_mode="HTML")

    [message] = mock.messages(5)
    assert message.text == "bold & link x=1"
    assert message.entities == [
        {"type": "bold", "offset": 0, "length": 4},
        {"type": "text_link", "offset": 7, "length": 4, "url": "https://x.org"},
        {"type": "pre", "offset": 12, "length": 3, "language": "py"},
    ]
    assert (status, body["description"]) == (
        400,
        'Bad Request: can\'t parse entities: Unsupported start tag "blink" at byte offset 0',
    )


async def test_markdown_v2_is_stored_verbatim(api: Client, mock: MockTelegram) -> None:
    await api("sendMessage", chat_id=5, text="*bold*", parse_mode="MarkdownV2")

    assert mock.visible(5) == [(1, "*bold*")]


async def test_chat_action_is_recorded(api: Client, mock: MockTelegram) -> None:
    ok = await api("sendChatAction", chat_id=5, action="typing")
    bad = await api("sendChatAction", chat_id=5, action="dancing")

    assert (ok[0], bad[0]) == (200, 400)
    assert [(c.method, c.chat_id, c.ok) for c in mock.calls] == [
        ("sendChatAction", 5, True),
        ("sendChatAction", 5, False),
    ]


# ------------------------------------------------------------------ scripted faults and latency


async def test_faults_hit_the_nth_call_of_a_method(api: Client, mock: MockTelegram) -> None:
    mock.add_fault("sendMessage", 2, {"status": 429, "retry_after_s": 2.5})
    mock.add_fault("sendMessage", 3, {"status": 502})
    mock.add_fault("editMessageText", 1, {"status": 400, "description": "Bad Request: message can't be edited"})

    first = await api("sendMessage", chat_id=5, text="a")
    limited = await api("sendMessage", chat_id=5, text="b")
    bad_gateway = await api("sendMessage", chat_id=5, text="c")
    edit = await api("editMessageText", chat_id=5, message_id=1, text="z")
    fourth = await api("sendMessage", chat_id=5, text="d")

    assert [first[0], limited[0], bad_gateway[0], edit[0], fourth[0]] == [200, 429, 502, 400, 200]
    assert limited[1] == {
        "ok": False,
        "error_code": 429,
        "description": "Too Many Requests: retry after 3",
        "parameters": {"retry_after": 3},
    }
    assert limited[2] == "3"
    assert bad_gateway[1] == {"ok": False, "error_code": 502, "description": "Bad Gateway"}
    assert mock.visible(5) == [(1, "a"), (2, "d")]
    assert [c.retry_after_s for c in mock.calls] == [None, 3.0, None, None, None]


async def test_timeout_after_commit_stores_then_hangs(api: Client, mock: MockTelegram) -> None:
    mock.add_fault("sendMessage", 1, "timeout_after_commit")

    with pytest.raises(TimeoutError):
        await api("sendMessage", chat_id=5, text="landed", timeout_s=1.0)  # the mock holds its answer 30 s

    assert mock.visible(5) == [(1, "landed")]
    assert (mock.calls[0].status, mock.calls[0].message_id) == (None, 1)


async def test_timeout_before_commit_never_stores(api: Client, mock: MockTelegram) -> None:
    mock.add_fault("sendMessage", 1, "timeout_before_commit")

    with pytest.raises(TimeoutError):
        await api("sendMessage", chat_id=5, text="lost", timeout_s=0.2)

    assert mock.visible(5) == []
    assert mock.calls[0].description == "timeout_before_commit"


async def test_reset_and_case_configuration(api: Client, mock: MockTelegram) -> None:
    await api("sendMessage", chat_id=5, text="old")
    mock.reset()
    mock.configure_from_case(
        {
            "faults": [{"method": "sendMessage", "nth": 1, "reply": {"status": 500}}],
            "latency_ms": {"sendMessage": [0]},
            "mock": {"rate_limits": "documented"},
        }
    )
    status, _, _ = await api("sendMessage", chat_id=5, text="new")

    assert (status, mock.calls[0].text, mock.rate_limits) == (500, "new", True)
    assert mock.visible(5) == []


# ------------------------------------------------------------------ flood control (fake clock)


@pytest.fixture
async def limited() -> AsyncIterator[tuple[MockTelegram, Client, FakeClock]]:
    clock = FakeClock(start=100.0)
    async with MockTelegram(rate_limits=True, clock=clock.now) as server, aiohttp.ClientSession() as session:
        yield server, Client(session, server.base_url), clock


async def test_per_chat_burst_then_one_per_second(limited: tuple[MockTelegram, Client, FakeClock]) -> None:
    mock, api, clock = limited
    statuses = [(await api("sendMessage", chat_id=5, text=str(i)))[0] for i in range(4)]
    edit_status, body, header = await api("editMessageText", chat_id=5, message_id=1, text="edited")
    other_chat = (await api("sendMessage", chat_id=6, text="x"))[0]
    clock.advance(1.0)
    after_wait = (await api("sendMessage", chat_id=5, text="later"))[0]

    assert statuses == [200, 200, 200, 429]
    assert (edit_status, header, body["parameters"]) == (429, "1", {"retry_after": 1})
    assert (other_chat, after_wait) == (200, 200)
    assert [text for _, text in mock.visible(5)] == ["0", "1", "2", "later"]


async def test_group_twenty_per_minute(limited: tuple[MockTelegram, Client, FakeClock]) -> None:
    mock, api, clock = limited
    statuses = []
    for i in range(21):
        statuses.append((await api("sendMessage", chat_id=-100, text=str(i)))[0])
        clock.advance(1.0)  # the per-chat bucket never runs dry at 1/s

    _, body, _ = await api("sendMessage", chat_id=-100, text="again")

    assert statuses == [200] * 20 + [429]
    assert body["parameters"]["retry_after"] == 39  # the first of the 20 leaves the window at t=160
    assert len(mock.visible(-100)) == 20


async def test_thirty_per_second_per_bot(limited: tuple[MockTelegram, Client, FakeClock]) -> None:
    _, api, clock = limited
    statuses = [(await api("sendMessage", chat_id=1000 + i, text="x"))[0] for i in range(31)]
    other_bot = (await api("sendMessage", token="999:OTHER", chat_id=1, text="x"))[0]
    clock.advance(1.0)
    next_second = (await api("sendMessage", chat_id=1, text="x"))[0]

    assert statuses == [200] * 30 + [429]
    assert (other_bot, next_second) == (200, 200)


async def test_limits_are_configurable() -> None:
    clock = FakeClock()
    limits = TelegramLimits(chat_burst=1)
    async with (
        MockTelegram(rate_limits=True, limits=limits, clock=clock.now) as server,
        aiohttp.ClientSession() as s,
    ):
        api = Client(s, server.base_url)
        statuses = [(await api("sendMessage", chat_id=5, text="x"))[0] for _ in range(2)]

    assert statuses == [200, 429]
