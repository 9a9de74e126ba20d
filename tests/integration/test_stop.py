"""Stop (issue 15, part 3): ``POST /v1/runs/{run}/stop`` ends a run ``cancelled`` with what it shows and a notice,
puts a ``stop`` unit on its pipeline lane, refuses the agent's later lines with a 409, is idempotent, and is
journaled: a restarted sidecar stops the run again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from examples.parent_loop import cancel_on_stop
from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.adapters.sqlite.journal import SqliteJournal
from streamrelay.app.client import RelayClient
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.contracts.units import StopUnit
from streamrelay.core.events import Stop, event_to_json
from streamrelay.core.records.journal import JournalEntry
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.stage import STOPPED_NOTICE
from streamrelay.core.run.stop import STOPPED_ERROR
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import INGEST_TOKEN, Stack


def lines(*objs: dict[str, Any]) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objs).encode()


START = {"seq": 1, "kind": "run.start", "channel": "telegram", "target": {"chat_id": 5}}


async def shown(mock: MockTelegram, chat: int, count: int) -> list[str]:
    """The chat's messages once there are ``count`` of them (polled: the sidecar delivers in the background)."""
    for _ in range(250):
        texts = [t for _, t in mock.visible(chat)]
        if len(texts) >= count:
            return texts
        await asyncio.sleep(0.02)
    return [t for _, t in mock.visible(chat)]


async def test_stop_ends_the_run_cancelled_with_a_stop_unit(stack: Stack) -> None:
    client, mock = stack.client, stack.mock
    text = {"seq": 2, "kind": "text", "mode": "delta", "text": "Half an answer so far."}
    assert (await client.post("/v1/runs/r1/events", content=lines(START, text))).status_code == 200
    assert await shown(mock, 5, 1) == ["Half an answer so far."]

    body = {"by": "telegram:user:42", "reason": "pressed Stop"}
    first = await client.post("/v1/runs/r1/stop", json=body)
    assert first.status_code == 200, first.text
    assert first.json() == {"run": "r1", "state": "stopping", "by": "telegram:user:42", "reason": "pressed Stop"}
    again = await client.post("/v1/runs/r1/stop", json={"by": "web"})
    assert again.status_code == 200
    assert again.json()["by"] == "telegram:user:42"  # idempotent: the first stop's state

    report = (await client.get("/v1/runs/r1", params={"wait_s": 10})).json()
    assert report["end_status"] == "cancelled"
    assert report["done"] is True
    assert any(e.startswith("stopped by the reader (telegram:user:42): pressed Stop") for e in report["errors"])
    assert await shown(mock, 5, 2) == ["Half an answer so far.", STOPPED_NOTICE]

    units = (await client.get("/v1/runs/r1/pipeline")).json()["units"]
    stop = [u for u in units if u["kind"] == "stop"]
    assert stop == [
        {
            "index": stop[0]["index"],
            "kind": "stop",
            "run": "r1",
            "by": "telegram:user:42",
            "reason": "pressed Stop",
            "source": None,
        }
    ]
    assert units[-1]["kind"] == "run.end" and units[-1]["status"] == "cancelled"

    late = await client.post("/v1/runs/r1/events", content=lines({"seq": 3, "kind": "text", "text": "more"}))
    assert late.status_code == 409
    assert STOPPED_ERROR in late.text
    after = await client.post("/v1/runs/r1/stop")
    assert after.status_code == 200 and after.json()["state"] == "stopped"
    assert after.json()["by"] == "telegram:user:42"


async def test_stop_refusals(stack: Stack) -> None:
    client = stack.client
    assert (await client.post("/v1/runs/nope/stop")).status_code == 404
    ended = [START, {"seq": 2, "kind": "text", "text": "Done."}, {"seq": 3, "kind": "end", "status": "ok"}]
    assert (await client.post("/v1/runs/r2/events", content=lines(*ended))).status_code == 200
    await client.get("/v1/runs/r2", params={"wait_s": 10})
    refused = await client.post("/v1/runs/r2/stop")
    assert refused.status_code == 409
    assert "already ended (not by a stop)" in refused.json()["error"]
    bad = await client.post("/v1/runs/r2/stop", json={"by": 7})
    assert bad.status_code == 400 and "by must name who stopped the run" in bad.json()["error"]
    async with httpx.AsyncClient(base_url=stack.sidecar.url) as anonymous:
        assert (await anonymous.post("/v1/runs/r2/stop")).status_code == 401
    agent_stop = await client.post("/v1/runs/r3/events", content=lines({**START, "seq": 1}, {"kind": "stop"}))
    assert agent_stop.status_code == 400
    assert "POST /v1/runs/{run}/stop" in agent_stop.json()["rejected"][0]["error"]


async def _serve(api: str, tmp_path: Path) -> tuple[Relay, Sidecar, SqliteLedger, SqliteJournal]:
    settings = ChannelSettings.model_validate({"platform": "telegram", "api_base": api, "throttle_ms": 0})
    runtime = make_runtime("telegram", settings, SecretStr("123456:STOP-restart-token"))
    ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
    journal = await SqliteJournal.open(tmp_path / "journal.sqlite3")
    relay = Relay({"telegram": runtime}, ledger, MonotonicClock(), journal=journal)
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    return relay, sidecar, ledger, journal


async def test_a_journaled_stop_survives_a_restart(tmp_path: Path) -> None:
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    async with MockTelegram() as mock:
        relay, sidecar, ledger, journal = await _serve(mock.base_url, tmp_path)
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            text = {"seq": 2, "kind": "text", "text": "Before the stop."}
            assert (await client.post("/v1/runs/r9/events", content=lines(START, text))).status_code == 200
            assert await shown(mock, 5, 1) == ["Before the stop."]
        # the process dies with the run unfinished; the stop was journaled just before (as the route writes it)
        await sidecar.stop()
        await relay.close()
        await ledger.close()
        stop = Stop(run="r9", by="web")
        await journal.append([JournalEntry("r9", json.dumps(event_to_json(stop)))])
        await journal.close()
        assert [t for _, t in mock.visible(5)] == ["Before the stop."]

        relay, sidecar, ledger, journal = await _serve(mock.base_url, tmp_path)
        assert await relay.resume() == ["r9"]
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            report = (await client.get("/v1/runs/r9", params={"wait_s": 10})).json()
            assert report["end_status"] == "cancelled"
            late = await client.post("/v1/runs/r9/events", content=lines({"seq": 3, "kind": "text", "text": "x"}))
            assert late.status_code == 409
            units = (await client.get("/v1/runs/r9/pipeline")).json()["units"]
            assert [u["kind"] for u in units][-2:] == ["stop", "run.end"]
        await sidecar.stop()
        await relay.close()
        await ledger.close()
        await journal.close()
        assert [t for _, t in mock.visible(5)] == ["Before the stop.", STOPPED_NOTICE]


async def test_the_parent_loop_cancels_its_agent_on_a_stop(stack: Stack) -> None:
    async with RelayClient(stack.sidecar.url, INGEST_TOKEN) as relay:
        await relay.start("p1", channel="telegram", chat_id=5)
        await relay.send("p1", [{"kind": "text", "text": "Working"}])
        agent: asyncio.Task[object] = asyncio.create_task(asyncio.sleep(60))  # the agent, busy
        watcher = asyncio.create_task(cancel_on_stop(relay, "p1", agent))
        await asyncio.sleep(0.1)
        assert not agent.done()
        await relay.stop("p1", by="web")
        unit = await asyncio.wait_for(watcher, 10)
        assert isinstance(unit, StopUnit) and unit.by == "web"
        await asyncio.gather(agent, return_exceptions=True)
        assert agent.cancelled()


async def test_the_live_pages_stop_needs_the_stop_token() -> None:
    channel = ChannelSettings.model_validate({"platform": "web", "throttle_ms": 0})
    relay = Relay({"web": make_runtime("web", channel, SecretStr(""))}, MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            start = {"kind": "run.start", "channel": "web", "target": {"chat_id": "page"}}
            text = {"kind": "text", "text": "Reading along"}
            assert (await client.post("/v1/runs/w1/events", content=lines(start, text))).status_code == 200
            plain = (await client.get("/v1/runs/w1/watch")).json()
            link = (await client.get("/v1/runs/w1/watch", params={"stop": "1"})).json()
            assert "stop=" not in plain["url"] and plain["token"] == link["token"]
            stop_token = link["url"].split("stop=", 1)[1].split("&", 1)[0]
            assert stop_token != link["token"]
        async with httpx.AsyncClient(base_url=sidecar.url, timeout=30) as page:
            path = "/v1/runs/w1/live/stop"
            assert (await page.post(path)).status_code == 401
            read_only = {"Authorization": f"Bearer {link['token']}"}
            assert (await page.post(path, headers=read_only)).status_code == 403
            other = await page.post("/v1/runs/w2/live/stop", headers={"Authorization": f"Bearer {stop_token}"})
            assert other.status_code == 403  # a stop token is one run's
            may_stop = {"Authorization": f"Bearer {stop_token}"}
            bad = await page.post(path, headers=may_stop, json={"reason": 3})
            assert bad.status_code == 400 and "reason must be a string" in bad.json()["error"]
            first = await page.post(path, headers=may_stop, json={"reason": "enough"})
            assert first.status_code == 200
            assert first.json() == {"run": "w1", "state": "stopping", "by": "web", "reason": "enough"}
            again = await page.post(path, headers=may_stop)
            assert again.status_code == 200 and again.json()["reason"] == "enough"
            # reading with the stop token alone is refused: stopping is not reading
            assert (await page.get("/v1/runs/w1/live", params={"token": stop_token})).status_code == 403
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            report = (await client.get("/v1/runs/w1", params={"wait_s": 10})).json()
            assert report["end_status"] == "cancelled" and "stopped by the reader (web): enough" in report["errors"]
    finally:
        await sidecar.stop()
        await relay.close()
