"""Stop from Telegram: the live message carries an inline Stop button (aiogram → the mock Bot API, which validates
the keyboard); a press makes the mock's callback_query update, which the example bot's aiogram router
(examples/stop_bot.py) forwards to the sidecar and answers; the run ends cancelled, the button goes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from pydantic import SecretStr

from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.adapters.sqlite.journal import SqliteJournal
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.stage import STOPPED_NOTICE
from streamrelay.core.run.stop import STOPPED_ERROR
from streamrelay.core.run.stop_controls import control_id
from streamrelay.mocks.telegram import MockTelegram
from streamrelay.mocks.telegram.buttons import PRESSER_ID
from tests.integration.conftest import BOT_TOKEN, INGEST_TOKEN, start_stack, stop_stack
from tests.integration.stop_bot_stack import stop_bot_stack

START = {"seq": 1, "kind": "run.start", "channel": "telegram", "target": {"chat_id": 5}}


def lines(*objs: dict[str, Any]) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objs).encode()


async def keyboard_on(mock: MockTelegram, chat: int, message_id: int, *, present: bool) -> Any:
    for _ in range(250):
        keyboard = mock.inline_keyboard(chat, message_id)
        if (keyboard is not None) == present:
            return keyboard
        await asyncio.sleep(0.02)
    raise AssertionError(f"the keyboard of message {message_id} is still {keyboard!r}")


def markup_calls(mock: MockTelegram) -> int:
    return sum(call.method == "editMessageReplyMarkup" for call in mock.calls)


async def press(mock: MockTelegram, chat: int, message_id: int) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"{mock.control_url}/press", json={"chat_id": chat, "message_id": message_id})
    assert answer.status_code == 200, answer.text
    update: dict[str, Any] = answer.json()
    return update


async def test_stop_button_on_telegram() -> None:
    async with stop_bot_stack() as (mock, _, _, client, bot, dispatcher):
        first = {"seq": 2, "kind": "text", "text": "The first half"}
        assert (await client.post("/v1/runs/t1/events", content=lines(START, first))).status_code == 200
        for _ in range(250):
            if mock.visible(5):
                break
            await asyncio.sleep(0.02)
        (message_id, _), *_ = mock.visible(5)
        button = (await keyboard_on(mock, 5, int(message_id), present=True))[0][0]
        assert button["callback_data"] == control_id("t1") and len(button["callback_data"].encode()) <= 64
        more = {"seq": 3, "kind": "text", "text": " of the answer."}
        assert (await client.post("/v1/runs/t1/events", content=lines(more))).status_code == 200
        for _ in range(250):
            if mock.visible(5)[0][1] == "The first half of the answer.":
                break
            await asyncio.sleep(0.02)
        assert mock.inline_keyboard(5, int(message_id)) is not None  # the preview's edit kept the button

        # Two presses before the run ends: both forwarded, both answered, one stop.
        updates = [await press(mock, 5, int(message_id)), await press(mock, 5, int(message_id))]
        assert updates[0]["callback_query"]["data"] == control_id("t1")
        for update in updates:
            await dispatcher.feed_raw_update(bot, update)
        answered = [c for c in mock.calls if c.method == "answerCallbackQuery"]
        assert [c.ok for c in answered] == [True, True]

        report = (await client.get("/v1/runs/t1", params={"wait_s": 10})).json()
        assert report["end_status"] == "cancelled"
        assert f"stopped by the reader (telegram:user:{PRESSER_ID}): pressed Stop" in report["errors"]
        assert [t for _, t in mock.visible(5)] == ["The first half of the answer.", STOPPED_NOTICE]
        assert all(mock.inline_keyboard(5, int(m)) is None for m, _ in mock.visible(5))  # the button is gone
        units = (await client.get("/v1/runs/t1/pipeline")).json()["units"]
        assert [u["kind"] for u in units] == ["stop", "run.end"]
        assert units[0]["by"] == f"telegram:user:{PRESSER_ID}"
        late = await client.post("/v1/runs/t1/events", content=lines({"seq": 4, "kind": "text", "text": "!"}))
        assert late.status_code == 409 and STOPPED_ERROR in late.text
        async with httpx.AsyncClient() as control:
            gone = await control.post(f"{mock.control_url}/press", json={"chat_id": 5, "message_id": int(message_id)})
        assert gone.status_code == 400 and "no callback button" in gone.json()["error"]


async def test_mock_refuses_bad_keyboards() -> None:
    async with MockTelegram() as mock:
        bot = Bot(BOT_TOKEN, session=AiohttpSession(api=TelegramAPIServer.from_base(mock.base_url)))
        url = f"{mock.base_url}/bot{BOT_TOKEN}/sendMessage"
        try:
            async with httpx.AsyncClient() as client:
                too_long = {"inline_keyboard": [[{"text": "Stop", "callback_data": "x" * 65}]]}
                answer = await client.post(url, data={"chat_id": 5, "text": "hi", "reply_markup": json.dumps(too_long)})
                assert answer.status_code == 400 and "BUTTON_DATA_INVALID" in answer.json()["description"]
                flat = {"inline_keyboard": [{"text": "Stop", "callback_data": "s"}]}
                answer = await client.post(url, data={"chat_id": 5, "text": "hi", "reply_markup": json.dumps(flat)})
                assert answer.status_code == 400 and "Array of Arrays" in answer.json()["description"]
                stale = await client.post(
                    f"{mock.base_url}/bot{BOT_TOKEN}/answerCallbackQuery", data={"callback_query_id": "1"}
                )
                assert stale.status_code == 400 and "query ID is invalid" in stale.json()["description"]
        finally:
            await bot.session.close()


async def test_the_button_moves_to_the_newest_block_and_goes_at_the_end() -> None:
    coalesce = {"min_chars": 1, "max_chars": 4000, "idle_ms": 0}
    mock, relay, sidecar = await start_stack(MemoryLedger(), stop_button=True, delivery="block", coalesce=coalesce)
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            first = [START, {"seq": 2, "kind": "text", "text": "First block."}, {"seq": 3, "kind": "block_end"}]
            assert (await client.post("/v1/runs/b1/events", content=lines(*first))).status_code == 200
            for _ in range(250):
                if mock.visible(5):
                    break
                await asyncio.sleep(0.02)
            one = int(mock.visible(5)[0][0])
            await keyboard_on(mock, 5, one, present=True)
            second = [{"seq": 4, "kind": "text", "text": "Second block."}, {"seq": 5, "kind": "block_end"}]
            assert (await client.post("/v1/runs/b1/events", content=lines(*second))).status_code == 200
            for _ in range(250):
                if len(mock.visible(5)) == 2:
                    break
                await asyncio.sleep(0.02)
            two = int(mock.visible(5)[1][0])
            await keyboard_on(mock, 5, two, present=True)
            await keyboard_on(mock, 5, one, present=False)  # only the newest message carries it
            # The end: the button goes; taking it off fails once (a 5xx), is tried again, and the report is clean.
            mock.add_fault("editMessageReplyMarkup", markup_calls(mock) + 1, {"status": 502})
            end = {"seq": 6, "kind": "end", "status": "ok"}
            assert (await client.post("/v1/runs/b1/events", content=lines(end))).status_code == 200
            report = (await client.get("/v1/runs/b1", params={"wait_s": 10})).json()
            assert report["status"] == "delivered" and report["errors"] == []
            assert [c.status for c in mock.calls if c.method == "editMessageReplyMarkup"][-2:] == [502, 200]
            assert [t for _, t in mock.visible(5)] == ["First block.", "Second block."]
            assert mock.inline_keyboard(5, one) is None and mock.inline_keyboard(5, two) is None
    finally:
        await stop_stack(mock, relay, sidecar)


async def test_a_button_that_cannot_be_taken_off_is_reported() -> None:
    mock, relay, sidecar = await start_stack(MemoryLedger(), stop_button=True)
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            text = {"seq": 2, "kind": "text", "text": "An answer."}
            assert (await client.post("/v1/runs/f1/events", content=lines(START, text))).status_code == 200
            for _ in range(250):
                if mock.visible(5):
                    break
                await asyncio.sleep(0.02)
            await keyboard_on(mock, 5, int(mock.visible(5)[0][0]), present=True)
            refused = {"status": 400, "description": "Bad Request: message can't be edited"}
            mock.add_fault("editMessageReplyMarkup", markup_calls(mock) + 1, refused)
            end = {"seq": 3, "kind": "end", "status": "ok"}
            assert (await client.post("/v1/runs/f1/events", content=lines(end))).status_code == 200
            report = (await client.get("/v1/runs/f1", params={"wait_s": 10})).json()
            assert any(e.startswith("the Stop control may still show on message") for e in report["errors"])
    finally:
        await stop_stack(mock, relay, sidecar)


async def test_a_streamed_drafts_own_stop_button() -> None:
    """Native mode (sendMessageDraft): the draft shows Telegram's own stop button (can_stop, Bot API 10.3); its
    stopped_message_generation update, forwarded by the example router, stops the run; the text so far is persisted
    with sendMessage, then the notice."""
    async with stop_bot_stack(delivery="native") as (mock, _, _, client, bot, dispatcher):
        first = {"seq": 2, "kind": "text", "text": "Streaming"}
        assert (await client.post("/v1/runs/d1/events", content=lines(START, first))).status_code == 200
        for _ in range(250):
            if mock.drafts(5):
                break
            await asyncio.sleep(0.02)
        more = {"seq": 3, "kind": "text", "text": " natively."}
        assert (await client.post("/v1/runs/d1/events", content=lines(more))).status_code == 200
        for _ in range(250):
            drafts = mock.drafts(5)
            if drafts and drafts[0].can_stop and drafts[0].text == "Streaming natively.":
                break
            await asyncio.sleep(0.02)
        (draft,) = mock.drafts(5)
        assert draft.can_stop and mock.visible(5) == []
        async with httpx.AsyncClient() as control:
            answer = await control.post(
                f"{mock.control_url}/press", json={"chat_id": 5, "message_id": f"draft:{draft.draft_id}"}
            )
        assert answer.status_code == 200, answer.text
        update = answer.json()
        assert update["stopped_message_generation"]["draft_id"] == draft.draft_id
        await dispatcher.feed_raw_update(bot, update)
        report = (await client.get("/v1/runs/d1", params={"wait_s": 10})).json()
        assert report["end_status"] == "cancelled"
        assert "stopped by the reader (telegram:chat:5): pressed Stop" in report["errors"]
        assert [t for _, t in mock.visible(5)] == ["Streaming natively.", STOPPED_NOTICE]
        units = (await client.get("/v1/runs/d1/pipeline")).json()["units"]
        assert [u["kind"] for u in units] == ["stop", "run.end"]


async def test_after_a_restart_the_button_still_goes_at_the_end(tmp_path: Path) -> None:
    """The process dies while the live message carries the button; the resumed run finds it in the ledger (its newest
    live message) and takes it off when the run ends."""
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    async with MockTelegram() as mock:
        relay, sidecar, ledger, journal = await serve_stoppable(mock.base_url, tmp_path)
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            text = {"seq": 2, "kind": "text", "text": "Before the restart."}
            assert (await client.post("/v1/runs/k1/events", content=lines(START, text))).status_code == 200
            for _ in range(250):
                if mock.visible(5):
                    break
                await asyncio.sleep(0.02)
            message_id = int(mock.visible(5)[0][0])
            await keyboard_on(mock, 5, message_id, present=True)
        await sidecar.stop()
        await relay.close()
        await ledger.close()
        await journal.close()
        assert mock.inline_keyboard(5, message_id) is not None  # left on by the dead process

        relay, sidecar, ledger, journal = await serve_stoppable(mock.base_url, tmp_path)
        assert await relay.resume() == ["k1"]
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            end = {"seq": 3, "kind": "end", "status": "ok"}
            assert (await client.post("/v1/runs/k1/events", content=lines(end))).status_code == 200
            report = (await client.get("/v1/runs/k1", params={"wait_s": 10})).json()
            assert report["status"] == "delivered" and report["errors"] == []
        await sidecar.stop()
        await relay.close()
        await ledger.close()
        await journal.close()
        assert [t for _, t in mock.visible(5)] == ["Before the restart."]
        assert mock.inline_keyboard(5, message_id) is None


async def serve_stoppable(api: str, tmp_path: Path) -> tuple[Relay, Sidecar, SqliteLedger, SqliteJournal]:
    settings = ChannelSettings.model_validate(
        {"platform": "telegram", "api_base": api, "throttle_ms": 0, "stop_button": True}
    )
    runtime = make_runtime("telegram", settings, SecretStr(BOT_TOKEN))
    ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
    journal = await SqliteJournal.open(tmp_path / "journal.sqlite3")
    relay = Relay({"telegram": runtime}, ledger, MonotonicClock(), journal=journal)
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    return relay, sidecar, ledger, journal


async def test_progress_mode_puts_the_button_on_its_status_message() -> None:
    mock, relay, sidecar = await start_stack(MemoryLedger(), stop_button=True, delivery="progress")
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            phase = {"seq": 2, "kind": "phase", "name": "searching"}
            assert (await client.post("/v1/runs/g1/events", content=lines(START, phase))).status_code == 200
            for _ in range(250):
                if mock.visible(5):
                    break
                await asyncio.sleep(0.02)
            status_id = int(mock.visible(5)[0][0])
            await keyboard_on(mock, 5, status_id, present=True)
            stopped = await client.post(f"/v1/runs/{control_id('g1').removeprefix('stop:')}/stop", json={"by": "web"})
            assert stopped.status_code == 200 and stopped.json()["run"] == "g1"
            report = (await client.get("/v1/runs/g1", params={"wait_s": 10})).json()
            assert report["end_status"] == "cancelled"
            shown = [t for _, t in mock.visible(5)]
            assert shown[0].startswith("Stopped.") and shown[-1] == STOPPED_NOTICE
            assert mock.inline_keyboard(5, status_id) is None
    finally:
        await stop_stack(mock, relay, sidecar)
