"""MockTelegram's sendMessageDraft over raw HTTP: live drafts, their lifetime, refusals, faults, flood control."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from streamrelay.core.clock import FakeClock
from streamrelay.mocks.telegram import DRAFT_ID_INVALID, DRAFT_PEER_INVALID, MockTelegram

pytestmark = pytest.mark.timeout(5)

TOKEN = "123456:ABC-def_456"
Answer = tuple[int, dict[str, Any], str | None]


class Api:
    """Raw Bot API calls with JSON bodies."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str) -> None:
        self.session = session
        self.base_url = base_url

    async def __call__(self, method: str, *, timeout_s: float = 2.0, **params: Any) -> Answer:
        url = f"{self.base_url}/bot{TOKEN}/{method}"
        async with self.session.post(url, json=params, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            return resp.status, await resp.json(), resp.headers.get("Retry-After")

    async def draft(self, chat_id: int | str, draft_id: Any, text: str, **params: Any) -> Answer:
        return await self("sendMessageDraft", chat_id=chat_id, draft_id=draft_id, text=text, **params)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(start=500.0)


@pytest.fixture
async def mock(clock: FakeClock) -> AsyncIterator[MockTelegram]:
    async with MockTelegram(clock=clock.now) as server:
        yield server


@pytest.fixture
async def api(mock: MockTelegram) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(session, mock.base_url)


async def test_a_draft_is_live_but_not_persisted(api: Api, mock: MockTelegram, clock: FakeClock) -> None:
    first = await api.draft(5, 7, "Hel")
    clock.advance(1.0)
    second = await api.draft(5, 7, "  Hello **there**  ", message_thread_id=3)

    assert [first[:2], second[:2]] == [(200, {"ok": True, "result": True})] * 2
    [draft] = mock.drafts(5)
    assert (draft.draft_id, draft.text, draft.thread_id, draft.updates) == (7, "Hello **there**", 3, 2)
    assert (draft.started_at_s, draft.updated_at_s) == (500.0, 501.0)
    assert mock.visible(5) == []
    assert mock.chats() == []
    assert [(c.method, c.chat_id, c.text, c.ok) for c in mock.calls][-1] == (
        "sendMessageDraft",
        5,
        "  Hello **there**  ",
        True,
    )


async def test_drafts_are_kept_per_draft_id(api: Api, mock: MockTelegram) -> None:
    await api.draft(5, 1, "one")
    await api.draft(5, -2, "two")  # any non-zero id
    await api.draft(5, 1, "one!")
    await api.draft(6, 1, "elsewhere")

    assert [(d.draft_id, d.text) for d in mock.drafts(5)] == [(1, "one!"), (-2, "two")]
    assert [d.text for d in mock.drafts("6")] == ["elsewhere"]


async def test_entities_are_validated_like_send_message(api: Api, mock: MockTelegram) -> None:
    entities = [{"type": "bold", "offset": 1, "length": 2}]
    ok = await api.draft(5, 1, " 🎩 ", entities=json.dumps(entities))
    bad = await api.draft(5, 1, "abc", entities=[{"type": "bold", "offset": 2, "length": 5}])

    assert ok[0] == 200
    assert [(d.text, d.entities) for d in mock.drafts(5)] == [("🎩", [{"type": "bold", "offset": 0, "length": 2}])]
    assert (bad[0], bad[1]["description"].startswith("Bad Request: can't parse entities")) == (400, True)


@pytest.mark.parametrize(
    ("chat_id", "draft_id", "text", "description"),
    [
        (-1001234567890, 1, "x", DRAFT_PEER_INVALID),
        (-42, 1, "x", DRAFT_PEER_INVALID),
        ("@channel", 1, "x", DRAFT_PEER_INVALID),
        (5, 0, "x", DRAFT_ID_INVALID),
        (5, None, "x", DRAFT_ID_INVALID),
        (5, "first", "x", "Bad Request: invalid draft_id specified"),
        (5, 1, " \n", "Bad Request: message text is empty"),
        (5, 1, "x" * 4097, "Bad Request: message is too long"),
    ],
)
async def test_refusals(
    api: Api, mock: MockTelegram, chat_id: int | str, draft_id: Any, text: str, description: str
) -> None:
    status, body, _ = await api.draft(chat_id, draft_id, text)

    assert (status, body["description"]) == (400, description)
    assert mock.drafts(chat_id) == []


async def test_an_idle_draft_is_gone_after_its_ttl(api: Api, mock: MockTelegram, clock: FakeClock) -> None:
    await api.draft(5, 1, "a")
    clock.advance(29.0)
    await api.draft(5, 1, "ab")  # an update restarts the 30 s
    clock.advance(29.5)
    alive = [d.text for d in mock.drafts(5)]
    clock.advance(0.5)
    gone = mock.drafts(5)
    await api.draft(5, 1, "again")

    assert (alive, gone) == (["ab"], [])
    [draft] = mock.drafts(5)
    assert (draft.text, draft.updates, draft.started_at_s) == ("again", 1, 559.0)


async def test_draft_ttl_is_configurable(clock: FakeClock) -> None:
    async with MockTelegram(clock=clock.now, draft_ttl_s=0.5) as mock, aiohttp.ClientSession() as session:
        await Api(session, mock.base_url).draft(5, 1, "short-lived")
        clock.advance(0.5)

        assert mock.drafts(5) == []


async def test_send_message_clears_the_chats_drafts(api: Api, mock: MockTelegram) -> None:
    await api.draft(5, 1, "draft one")
    await api.draft(5, 2, "draft two")
    await api.draft(6, 1, "other chat")
    refused = await api("sendMessage", chat_id=5, text="")
    kept = len(mock.drafts(5))
    await api("sendMessage", chat_id=5, text="final")

    assert (refused[0], kept) == (400, 2)
    assert mock.drafts(5) == []
    assert [d.text for d in mock.drafts(6)] == ["other chat"]
    assert mock.visible(5) == [(1, "final")]


async def test_drafts_disabled_is_an_unknown_method(clock: FakeClock) -> None:
    async with MockTelegram(clock=clock.now, drafts_enabled=False) as mock, aiohttp.ClientSession() as session:
        status, body, _ = await Api(session, mock.base_url).draft(5, 1, "x")

        assert (status, body) == (404, {"ok": False, "error_code": 404, "description": "Not Found"})
        assert (mock.calls[0].method, mock.calls[0].status, mock.drafts(5)) == ("sendMessageDraft", 404, [])


async def test_faults_and_latency_are_scripted(api: Api, mock: MockTelegram) -> None:
    mock.configure_from_case(
        {
            "faults": [
                {"method": "sendMessageDraft", "nth": 1, "reply": {"status": 429, "retry_after_s": 0.2}},
                {"method": "sendmessagedraft", "nth": 2, "reply": "timeout_before_commit"},
            ],
            "latency_ms": {"sendMessageDraft": [0, 0, 0]},
        }
    )
    mock.hang_s = 0.3

    limited = await api.draft(5, 1, "a")
    with pytest.raises(TimeoutError):
        await api.draft(5, 1, "b", timeout_s=0.1)
    third = await api.draft(5, 1, "c")

    assert (limited[0], limited[1]["parameters"], limited[2]) == (429, {"retry_after": 1}, "1")
    assert third[0] == 200
    assert [d.text for d in mock.drafts(5)] == ["c"]
    assert [c.retry_after_s for c in mock.calls] == [1.0, None, None]
    assert mock.calls[1].description == "timeout_before_commit"


async def test_drafts_count_toward_flood_control(clock: FakeClock) -> None:
    async with MockTelegram(rate_limits=True, clock=clock.now) as mock, aiohttp.ClientSession() as session:
        api = Api(session, mock.base_url)
        statuses = [(await api.draft(5, 1, f"step {i}"))[0] for i in range(4)]
        send = await api("sendMessage", chat_id=5, text="final")
        clock.advance(1.0)
        later = await api("sendMessage", chat_id=5, text="final")

    assert statuses == [200, 200, 200, 429]
    assert (send[0], send[2], later[0]) == (429, "1", 200)
    assert mock.drafts(5) == []
    assert mock.visible(5) == [(1, "final")]
