"""The mock Matrix homeserver (mocks.matrix) over plain HTTP: what it refuses and what it stores, as the
Client-Server API documents it (the adapter's side is tests/contract/test_matrix_contract.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from streamrelay.mocks.matrix import MAX_EVENT_BYTES, MockMatrix

TOKEN = "syt_c3RyZWFtcmVsYXk_mockSecretToken0123456789_1a2b3c"
ROOM = "!room1:mock.local"
ROOM_PATH = "%21room1%3Amock.local"


@pytest.fixture
async def mock() -> AsyncIterator[MockMatrix]:
    async with MockMatrix() as server:
        yield server


@pytest.fixture
async def http(mock: MockMatrix) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=mock.base_url + "/_matrix/client/v3", headers=headers) as client:
        yield client


async def send(http: httpx.AsyncClient, txn: str, content: Any, room: str = ROOM_PATH) -> httpx.Response:
    return await http.put(f"/rooms/{room}/send/m.room.message/{txn}", json=content)


async def test_the_same_transaction_id_answers_the_stored_event_and_stores_nothing_new(
    mock: MockMatrix, http: httpx.AsyncClient
) -> None:
    first = await send(http, "t1", {"msgtype": "m.text", "body": "once"})
    again = await send(http, "t1", {"msgtype": "m.text", "body": "once"})
    other = await send(http, "t2", {"msgtype": "m.text", "body": "twice"})
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json() != other.json()
    assert [text for _, text in mock.visible(ROOM)] == ["once", "twice"]


async def test_a_transaction_is_keyed_by_its_path_as_synapse_does(mock: MockMatrix, http: httpx.AsyncClient) -> None:
    a = await send(http, "t1", {"msgtype": "m.text", "body": "in room 1"})
    b = await send(http, "t1", {"msgtype": "m.text", "body": "in room 2"}, room="%21room2%3Amock.local")
    assert a.json() != b.json()
    assert [t for _, t in mock.visible("!room2:mock.local")] == ["in room 2"]


async def test_a_refused_send_is_not_remembered(mock: MockMatrix, http: httpx.AsyncClient) -> None:
    mock.add_fault("send", 1, {"status": 429, "retry_after_s": 1.5})
    limited = await send(http, "t1", {"msgtype": "m.text", "body": "hi"})
    assert limited.status_code == 429
    assert limited.json() == {"errcode": "M_LIMIT_EXCEEDED", "error": "Too Many Requests", "retry_after_ms": 1500}
    assert limited.headers["Retry-After"] == "2"
    assert (await send(http, "t1", {"msgtype": "m.text", "body": "hi"})).status_code == 200
    assert [t for _, t in mock.visible(ROOM)] == ["hi"]


async def test_a_message_needs_msgtype_and_a_textual_body(http: httpx.AsyncClient) -> None:
    answer = await send(http, "t1", {"msgtype": "m.text", "body": 5})
    assert (answer.status_code, answer.json()["errcode"]) == (400, "M_BAD_JSON")


async def test_an_event_past_65536_bytes_is_m_too_large(mock: MockMatrix, http: httpx.AsyncClient) -> None:
    answer = await send(http, "t1", {"msgtype": "m.text", "body": "x" * MAX_EVENT_BYTES})
    assert (answer.status_code, answer.json()["errcode"]) == (413, "M_TOO_LARGE")
    assert mock.visible(ROOM) == []


async def test_edits_threads_and_redactions(mock: MockMatrix, http: httpx.AsyncClient) -> None:
    root = (await send(http, "t1", {"msgtype": "m.text", "body": "v1"})).json()["event_id"]
    edit = {
        "msgtype": "m.text",
        "body": "* v2",
        "m.new_content": {"msgtype": "m.text", "body": "v2"},
        "m.relates_to": {"rel_type": "m.replace", "event_id": root},
    }
    assert (await send(http, "t2", edit)).status_code == 200
    thread = {"msgtype": "m.text", "body": "in thread", "m.relates_to": {"rel_type": "m.thread", "event_id": root}}
    reply = (await send(http, "t3", thread)).json()["event_id"]
    assert [t for _, t in mock.visible(ROOM)] == ["v2", "in thread"]
    nested = {"msgtype": "m.text", "body": "x", "m.relates_to": {"rel_type": "m.thread", "event_id": reply}}
    assert (await send(http, "t4", nested)).status_code == 400  # a thread cannot start from a related event
    unknown = {**edit, "m.relates_to": {"rel_type": "m.replace", "event_id": "$nope"}}
    assert (await send(http, "t5", unknown)).status_code == 400
    redacted = await http.put(f"/rooms/{ROOM_PATH}/redact/{reply}/r1", json={})
    assert redacted.status_code == 200 and "event_id" in redacted.json()
    assert [t for _, t in mock.visible(ROOM)] == ["v2"]
    theirs = mock.user_message(ROOM, "a question")
    assert (await http.put(f"/rooms/{ROOM_PATH}/redact/{theirs}/r2", json={})).status_code == 403


async def test_tokens_and_rooms(mock: MockMatrix, http: httpx.AsyncClient) -> None:
    async with httpx.AsyncClient(base_url=mock.base_url) as anonymous:
        missing = await anonymous.put(f"/_matrix/client/v3/rooms/{ROOM_PATH}/send/m.room.message/t", json={})
        assert (missing.status_code, missing.json()["errcode"]) == (401, "M_MISSING_TOKEN")
        bad = await anonymous.get("/_matrix/client/v3/account/whoami", headers={"Authorization": "Bearer nope"})
        assert (bad.status_code, bad.json()["errcode"]) == (401, "M_UNKNOWN_TOKEN")
    assert (await http.get("/account/whoami")).json()["user_id"] == "@streamrelay:mock.local"
    malformed = await send(http, "t1", {"msgtype": "m.text", "body": "x"}, room="not-a-room")
    assert (malformed.status_code, malformed.json()["errcode"]) == (400, "M_INVALID_PARAM")
    other_user = await http.put(f"/rooms/{ROOM_PATH}/typing/@someone:mock.local", json={"typing": True})
    assert other_user.status_code == 403
