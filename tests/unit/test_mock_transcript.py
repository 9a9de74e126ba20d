"""A mock's calls and chat as a case transcript lists them (one definition for the case runner and the control
API), and the transcript checks that read them: ``min_calls``, ``never_contains`` as phrases."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from streamrelay.app.cases import result
from streamrelay.app.cases.expect import check_expectations, contains_phrase
from streamrelay.core.clock import FakeClock
from streamrelay.mocks import calls, control
from streamrelay.mocks.telegram import MockTelegram

pytestmark = pytest.mark.timeout(5)

CTX = {"limit": 4096, "unit": "utf16"}


@pytest.fixture
async def mock() -> AsyncIterator[MockTelegram]:
    clock = FakeClock(start=7.0)
    async with MockTelegram(clock=clock.now) as server:
        yield server


def test_the_case_runner_and_the_mocks_share_one_call_record() -> None:
    assert result.call_record is calls.call_record
    assert result.chat_record is calls.chat_record
    call = calls.RecordedCall("sendMessage", 42, 3, "hi", t=2.5, status=429, retry_after_s=2.0)

    assert result.call_record(call, 1.0) == {
        "method": "sendMessage",
        "chat_id": 42,
        "message_id": 3,
        "text": "hi",
        "t_ms": 1500.0,
        "status": 429,
        "ok": False,
        "retry_after_s": 2.0,
    }


def test_a_media_message_shows_its_caption_as_its_text() -> None:
    parts = [
        (1, "Here is the chart."),
        {"message_id": 2, "media": "photo", "caption": "Q3 revenue by region", "text": None},
        {"message_id": 3, "media_kind": "image", "url": "https://example.com/c.png"},
        {"message_id": 4, "text": "As you can see"},
    ]

    assert result.chat_records(parts) == [
        {"message_id": 1, "text": "Here is the chart."},
        {"message_id": 2, "text": "Q3 revenue by region"},
        {"message_id": 3, "text": ""},
        {"message_id": 4, "text": "As you can see"},
    ]


async def test_the_control_state_is_the_transcript_of_the_mock(mock: MockTelegram) -> None:
    async with httpx.AsyncClient(base_url=mock.base_url) as http:
        await http.post("/bot1:a/sendMessage", json={"chat_id": 5, "text": "hello"})
        await http.post("/bot1:a/editMessageText", json={"chat_id": 5, "message_id": 9, "text": "x"})

    state = control.state(mock)

    assert state["calls"] == [result.call_record(c, mock.epoch_s) for c in mock.calls]
    assert state["chats"] == {"5": result.chat_records(mock.visible(5))}


def _transcript(*methods: str, texts: tuple[str, ...] = ()) -> dict[str, object]:
    made = [
        {"method": m, "chat_id": 1, "text": t, "t_ms": 0, "status": 200} for m, t in zip(methods, texts, strict=False)
    ]
    made += [{"method": m, "chat_id": 1, "text": None, "t_ms": 0, "status": 502} for m in methods[len(texts) :]]
    return {"chat": [], "calls": made, "pipeline": [], "report": {}}


def test_min_calls_counts_failed_calls_too() -> None:
    transcript = _transcript("sendPhoto", "sendMessage", "sendMessage")  # every one failed (502)

    assert check_expectations({"min_calls": {"sendPhoto": 1, "sendMessage": 2}}, transcript, CTX) == []
    assert check_expectations({"min_calls": {"sendPhoto": 2, "editMessageText": 1}}, transcript, CTX) == [
        "sendPhoto called 1 times, at least 2 expected",
        "editMessageText called 0 times, at least 1 expected",
    ]


def test_never_contains_matches_whole_phrases() -> None:
    transcript = _transcript("sendMessage", texts=("Refunds take 14 days, not 4 days.",))
    fine = _transcript("sendMessage", texts=("Refunds take 14 days.",))

    assert check_expectations({"never_contains": ["4 days"]}, fine, CTX) == []
    assert check_expectations({"never_contains": ["4 days"]}, transcript, CTX) != []
    assert not contains_phrase("a mediodía", "día")  # Unicode letters glue too
    assert contains_phrase("a las doce del día.", "día")
    assert contains_phrase("x (draft)", "(draft)")  # punctuation at an edge matches as is
    assert not contains_phrase("anything", "")
