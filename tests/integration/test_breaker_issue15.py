"""Breaker findings on issue 15 over real HTTP (the sidecar and the mock Bot API on 127.0.0.1): the new ingest
formats and Stop, attacked as an agent, a bot developer and a person reading the chat would. Each test says what
the sidecar did before its fix (or is a strict xfail naming what is still wrong)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.adapters.sqlite.journal import SqliteJournal
from streamrelay.app.client import RelayClient, RelayError
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.stop_controls import short_id
from streamrelay.mocks.telegram import MockTelegram
from tests.integration import test_clients
from tests.integration.conftest import BOT_TOKEN, INGEST_TOKEN, Stack, start_stack, stop_stack
from tests.integration.stop_bot_stack import stop_bot_stack
from tests.integration.test_clients import Clients, ndjson


def lines(*objs: dict[str, Any]) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objs).encode()


def start(fmt: str) -> dict[str, Any]:
    return {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 5}, "format": fmt}


async def shown(stack: Stack, chat: int, count: int) -> list[str]:
    """The chat's messages once there are ``count`` of them (polled: the sidecar delivers in the background)."""
    for _ in range(250):
        texts = [t for _, t in stack.mock.visible(chat)]
        if len(texts) >= count:
            return texts
        await asyncio.sleep(0.02)
    return [t for _, t in stack.mock.visible(chat)]


ARTIFACT = {
    "kind": "artifact-update",
    "taskId": "task-1",
    "contextId": "ctx-1",
    "artifact": {"artifactId": "a1", "parts": [{"kind": "text", "text": "The bare artifact's answer."}]},
    "lastChunk": True,
}


async def test_a2a_bare_result_objects_are_taken_as_the_module_says(stack: Stack) -> None:
    # core/normalize/a2a.py accepts "the bare result object (told apart by kind)"; over HTTP a line with 'kind' was
    # parsed as a normalized event and refused: "unknown event kind 'artifact-update'"
    task = {"kind": "task", "id": "task-1", "contextId": "ctx-1", "status": {"state": "submitted"}}
    done = {
        "kind": "status-update",
        "taskId": "task-1",
        "contextId": "ctx-1",
        "status": {"state": "completed"},
        "final": True,
    }
    answer = await stack.client.post("/v1/runs/a2a-bare/events", content=lines(start("a2a"), task, ARTIFACT, done))
    assert answer.status_code == 200, answer.text
    end = await stack.client.post("/v1/runs/a2a-bare/events", content=lines({"kind": "end", "status": "ok"}))
    assert end.status_code == 200, end.text
    report = (await stack.client.get("/v1/runs/a2a-bare", params={"wait_s": 10})).json()
    assert report["status"] == "delivered", report
    assert await shown(stack, 5, 1) == ["The bare artifact's answer."]


async def test_an_a2a_kind_in_a_run_of_another_format_is_still_refused(stack: Stack) -> None:
    answer = await stack.client.post("/v1/runs/not-a2a/events", content=lines(start("ag-ui"), ARTIFACT))
    assert answer.status_code == 400
    assert "unknown event kind 'artifact-update'" in answer.json()["rejected"][0]["error"]


START = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 5}}


@pytest.mark.parametrize(
    "body",
    [
        b'{"reason": "\\ud800 half a pair"}',  # was: 500 Internal Server Error, yet the run was stopped
        b'{"reason": "line one\\n2026-12-02 ERROR forged log line"}',  # was: taken into the report and logs
        b'{"reason": "looks fine \\u202egnp.exe"}',  # was: a bidi override in the ops page's report
        b'{"reason": "bell \\u0007"}',
    ],
)
async def test_a_stop_reason_that_is_not_one_printable_line_is_a_400_and_nothing_is_stopped(
    stack: Stack, body: bytes
) -> None:
    assert (await stack.client.post("/v1/runs/r1/events", content=lines(START))).status_code == 200
    answer = await stack.client.post("/v1/runs/r1/stop", content=body)
    assert answer.status_code == 400, answer.text
    assert "reason must be one line of printable text" in answer.json()["error"]
    report = (await stack.client.get("/v1/runs/r1")).json()
    assert report["done"] is False and report["end_status"] is None  # refused: not stopped
    assert (await stack.client.post("/v1/runs/r1/stop", json={"reason": "too long"})).status_code == 200


async def test_the_live_pages_stop_reason_is_checked_the_same_way() -> None:
    channel = ChannelSettings.model_validate({"platform": "web", "throttle_ms": 0})
    relay = Relay({"web": make_runtime("web", channel, SecretStr(""))}, MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    try:
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            start_web = {"kind": "run.start", "channel": "web", "target": {"chat_id": "page"}}
            assert (await client.post("/v1/runs/w1/events", content=lines(start_web))).status_code == 200
            link = (await client.get("/v1/runs/w1/watch", params={"stop": "1"})).json()
            stop_token = link["url"].split("stop=", 1)[1].split("&", 1)[0]
        async with httpx.AsyncClient(base_url=sidecar.url, timeout=30) as page:
            may_stop = {"Authorization": f"Bearer {stop_token}"}
            bad = await page.post("/v1/runs/w1/live/stop", headers=may_stop, content=b'{"reason": "\\udc00"}')
            assert bad.status_code == 400, bad.text
            assert "reason must be one line of printable text" in bad.json()["error"]
    finally:
        await sidecar.stop()
        await relay.close()


async def test_the_example_bot_forwards_only_the_sidecars_own_stop_buttons() -> None:
    # was: the router took every callback whose data starts with 'stop:' and POSTed the rest as the run: the bot's
    # own button 'stop:t1' (or a crafted one) stopped run t1 by its plain id, in any chat, and 'stop:x/../../y'
    # went into the URL's path
    async with stop_bot_stack() as (mock, relay, sidecar, client, bot, dispatcher):
        text = {"kind": "text", "text": "An answer in progress"}
        assert (await client.post("/v1/runs/t1/events", content=lines(START, text))).status_code == 200
        assert await shown(Stack(mock, relay, sidecar, client), 5, 1)
        message_id = int(mock.visible(5)[0][0])
        for _ in range(250):
            if mock.inline_keyboard(5, message_id) is not None:
                break
            await asyncio.sleep(0.02)
        for data in ("stop:t1", "stop:t1/../../t1", "stop:"):
            async with httpx.AsyncClient() as control:
                press = {"chat_id": 5, "message_id": message_id}
                update = (await control.post(f"{mock.control_url}/press", json=press)).json()
            forged = {**update, "callback_query": {**update["callback_query"], "data": data}}
            await dispatcher.feed_raw_update(bot, forged)
        report = (await client.get("/v1/runs/t1")).json()
        assert report["done"] is False and report["end_status"] is None, report  # not stopped


async def test_media_past_the_message_limit_make_the_report_partial_and_cut_with_a_notice() -> None:
    """60 images in a run whose client allows 50 messages: the images that find no room are not sent, the text
    after them still is (a media item leaves one message free), and the report says ``partial`` (the last image
    shown is marked cut). The budgets are lifted: at Telegram's message a second per chat it would take a minute."""
    lifted = {"per_chat": {"per_s": 1000.0, "burst": 1000}, "per_bot": {"per_s": 1000.0, "burst": 1000}}
    mock, relay, sidecar = await start_stack(MemoryLedger(), rate=lifted)
    mock.rate_limits = False
    pictures = [{"kind": "media", "url": f"https://example.com/{i}.png", "media_kind": "image"} for i in range(60)]
    body = lines(
        {**START, "target": {"chat_id": 7}},
        {"kind": "text", "text": "Here are the pictures."},
        *pictures,
        {"kind": "text", "text": "And the conclusion."},
        {"kind": "end", "status": "ok"},
    )
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=60) as client:
            assert (await client.post("/v1/runs/many/events", content=body)).status_code == 200
            report = (await client.get("/v1/runs/many", params={"wait_s": 50})).json()
        assert report["done"], report
        assert report["media"] == 48  # the default client's max_messages_per_run = 50: the text, 48 images, the text
        assert report["status"] == "partial", {k: v for k, v in report.items() if k != "parts"}
        assert any("cut at the message limit" in (p.get("error") or "") for p in report["parts"])
        texts = [t for _, t in mock.visible(7)]
        assert texts[0] == "Here are the pictures." and texts[-1] == "And the conclusion.", texts[-3:]
        assert len(texts) == 50
    finally:
        await stop_stack(mock, relay, sidecar)


async def test_the_relay_client_addresses_a_run_whose_id_holds_url_characters(stack: Stack) -> None:
    async with RelayClient(stack.sidecar.url, INGEST_TOKEN) as relay:
        await relay.send("ask", [START, {"kind": "text", "text": "Someone else's answer."}])
        # 'ask?2' and 'ask#2' are valid run ids (core.ingest.clients.RUN_ID_PATTERN): the client posted to /v1/runs/ask
        with pytest.raises(RelayError):
            await relay.send("ask?2", [{"kind": "text", "text": " INJECTED"}])
        with pytest.raises(RelayError):
            await relay.report("ask#2")
        assert "INJECTED" not in str((await stack.client.get("/v1/runs/ask/pipeline")).json())
        assert "INJECTED" not in str(stack.mock.visible(5))


async def test_after_a_restart_every_message_that_may_carry_the_button_loses_it(tmp_path: Path) -> None:
    """Block mode: the button moved to block 2, and the process died before taking it off block 1. Was: the
    resumed run took only its newest live message (block 2) as the carrier, so block 1 kept a Stop button after the
    run ended (a press then answers 409)."""
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    coalesce = {"min_chars": 1, "max_chars": 4000, "idle_ms": 0}
    # a chat budget of one call in 2.5 s: the process surely dies between the two moves of the button
    channel = {"stop_button": True, "delivery": "block", "coalesce": coalesce, "rate": {"per_chat": {"per_s": 0.4}}}
    async with MockTelegram() as mock:
        relay, sidecar, ledger, journal = await serve_sqlite(mock.base_url, tmp_path, channel)
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            first: list[dict[str, Any]] = [START, {"kind": "text", "text": "First block."}, {"kind": "block_end"}]
            assert (await client.post("/v1/runs/k2/events", content=lines(*first))).status_code == 200
            one = await message_with_keyboard(mock, 0)
            second = [{"kind": "text", "text": "Second block."}, {"kind": "block_end"}]
            assert (await client.post("/v1/runs/k2/events", content=lines(*second))).status_code == 200
            two = await message_with_keyboard(mock, 1)  # taking it off block 1 waits for the chat's budget
        await sidecar.stop()
        await relay.close()
        await ledger.close()
        await journal.close()
        assert mock.inline_keyboard(5, one) is not None and mock.inline_keyboard(5, two) is not None

        relay, sidecar, ledger, journal = await serve_sqlite(mock.base_url, tmp_path, channel)
        assert await relay.resume() == ["k2"]
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            end = {"kind": "end", "status": "ok"}
            assert (await client.post("/v1/runs/k2/events", content=lines(end))).status_code == 200
            report = (await client.get("/v1/runs/k2", params={"wait_s": 10})).json()
            assert report["status"] == "delivered", report
        await sidecar.stop()
        await relay.close()
        await ledger.close()
        await journal.close()
        assert [t for _, t in mock.visible(5)] == ["First block.", "Second block."]
        assert mock.inline_keyboard(5, two) is None
        assert mock.inline_keyboard(5, one) is None, "block 1 still shows a Stop button after the run ended"


async def message_with_keyboard(mock: MockTelegram, index: int) -> int:
    """The id of the chat's ``index``-th message once it shows an inline keyboard."""
    for _ in range(750):
        visible = mock.visible(5)
        if len(visible) > index and mock.inline_keyboard(5, int(visible[index][0])) is not None:
            return int(visible[index][0])
        await asyncio.sleep(0.02)
    raise AssertionError(f"message {index} never showed the Stop button: {mock.visible(5)}")


async def serve_sqlite(
    api: str, tmp_path: Path, channel: dict[str, Any]
) -> tuple[Relay, Sidecar, SqliteLedger, SqliteJournal]:
    settings = ChannelSettings.model_validate({"platform": "telegram", "api_base": api, "throttle_ms": 0, **channel})
    runtime = make_runtime("telegram", settings, SecretStr(BOT_TOKEN))
    ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
    journal = await SqliteJournal.open(tmp_path / "journal.sqlite3")
    relay = Relay({"telegram": runtime}, ledger, MonotonicClock(), journal=journal)
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    return relay, sidecar, ledger, journal


async def test_a_resent_raw_stream_with_seq_is_taken_once(stack: Stack) -> None:
    body = lines(
        {**start("ag-ui"), "seq": 0},
        {"seq": 1, "type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "pay"},
        {"seq": 2, "type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": '{"amount": 5}'},
        {"seq": 3, "type": "TOOL_CALL_END", "toolCallId": "c"},
        {"seq": 4, "type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Paid."},
    )
    for _ in range(2):  # the first answer was lost (a timeout): the agent sends the same request again
        assert (await stack.client.post("/v1/runs/twice/events", content=body)).status_code == 200
    end = lines({"seq": 5, "kind": "end", "status": "ok"})
    assert (await stack.client.post("/v1/runs/twice/events", content=end)).status_code == 200
    await stack.client.get("/v1/runs/twice", params={"wait_s": 10})
    units = (await stack.client.get("/v1/runs/twice/pipeline")).json()["units"]
    assert [u["name"] for u in units if u["kind"] == "tool_call"] == ["pay"]
    assert [t for _, t in stack.mock.visible(5)] == ["Paid."]


async def test_a2a_bare_objects_are_replayed_after_a_restart(tmp_path: Path) -> None:
    """The bare A2A objects are journaled as they came; a restarted sidecar replays them through the same door."""
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    async with MockTelegram() as mock:
        relay, sidecar, ledger, journal = await serve_sqlite(mock.base_url, tmp_path, {})
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            body = lines(start("a2a"), {**ARTIFACT, "lastChunk": False})
            assert (await client.post("/v1/runs/a2a-r/events", content=body)).status_code == 200
            assert await shown(Stack(mock, relay, sidecar, client), 5, 1) == ["The bare artifact's answer."]
        await sidecar.stop()
        await relay.close()
        await ledger.close()
        await journal.close()

        relay, sidecar, ledger, journal = await serve_sqlite(mock.base_url, tmp_path, {})
        assert await relay.resume() == ["a2a-r"]
        more = {
            **ARTIFACT,
            "append": True,
            "artifact": {"artifactId": "a1", "parts": [{"kind": "text", "text": " More."}]},
        }
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            body = lines(more, {"kind": "end", "status": "ok"})
            assert (await client.post("/v1/runs/a2a-r/events", content=body)).status_code == 200
            report = (await client.get("/v1/runs/a2a-r", params={"wait_s": 10})).json()
            assert report["status"] == "delivered", report
        await sidecar.stop()
        await relay.close()
        await ledger.close()
        await journal.close()
        assert [t for _, t in mock.visible(5)] == ["The bare artifact's answer. More."]


clients = test_clients.clients  # the clients tests' fixture (alice and mallory, own tokens), used here by name


async def test_another_clients_run_cannot_be_stopped_by_its_id_its_control_or_its_page(clients: Clients) -> None:
    c = clients
    assert (await c.alice.post("/v1/runs/run-1/events", content=ndjson(start_of("run-1")))).status_code == 200
    # mallory knows alice's run id, so she can compute its control id (a hash, never a secret) and alice's key
    attempts = ["run-1", short_id("alice/run-1"), "alice%2Frun-1", short_id("run-1")]
    for run in attempts:
        answer = await c.mallory.post(f"/v1/runs/{run}/stop", json={"by": "mallory"})
        assert answer.status_code in (400, 404), (run, answer.status_code, answer.text)
        assert "alice" in run or "alice" not in answer.text  # nothing of alice's run comes back
    watch = (await c.mallory.get("/v1/runs/run-1/watch", params={"stop": "1"})).json()
    stop_token = watch["url"].split("stop=", 1)[1].split("&", 1)[0]
    page = await c.anon.post("/v1/runs/alice%2Frun-1/live/stop", headers={"Authorization": f"Bearer {stop_token}"})
    assert page.status_code == 403, page.text  # mallory's stop token is for her own 'run-1'
    report = (await c.alice.get("/v1/runs/run-1")).json()
    assert report["done"] is False and report["end_status"] is None
    assert (await c.alice.post(f"/v1/runs/{short_id('alice/run-1')}/stop")).status_code == 200  # hers: it stops


def start_of(run: str) -> dict[str, Any]:
    return {"kind": "run.start", "run": run, "channel": "telegram", "target": {"chat_id": 7}}
