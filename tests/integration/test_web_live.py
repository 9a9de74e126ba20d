"""The web channel and the live run stream over real HTTP: read tokens, SSE headers, resume, reset, keepalives,
the page and its local files, and what a run on another channel (Telegram) reports live."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.corrections import Corrections
from streamrelay.core.run.finished import FinishedMonitor
from streamrelay.core.run.live import ResetLive
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import BOT_TOKEN, INGEST_TOKEN

pytestmark = pytest.mark.timeout(60)
AUTH = {"Authorization": f"Bearer {INGEST_TOKEN}"}
NO_TOKEN = SecretStr("")


def ndjson(*lines: dict[str, Any]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def start(run: str, channel: str = "web", chat_id: int | str = "page") -> dict[str, Any]:
    return {"kind": "run.start", "run": run, "channel": channel, "target": {"chat_id": chat_id}}


def sse(text: str) -> list[dict[str, Any]]:
    """The JSON events of an SSE body (comments dropped), each checked against its ``id:`` line."""
    out = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        lines = [line for line in block.splitlines() if line and not line.startswith(":")]
        if not lines:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        event = json.loads(fields["data"])
        assert fields["id"].rpartition(".")[2] == str(event["id"])  # <epoch>.<id>
        out.append(event)
    return out


class Web:
    def __init__(self, relay: Relay, sidecar: Sidecar, client: httpx.AsyncClient, mock: MockTelegram) -> None:
        self.relay, self.sidecar, self.client, self.mock = relay, sidecar, client, mock

    async def run(self, run: str, *events: dict[str, Any], channel: str = "web") -> None:
        chat: int | str = "page" if channel == "web" else 7
        answer = await self.client.post(f"/v1/runs/{run}/events", content=ndjson(start(run, channel, chat), *events))
        assert answer.status_code == 200, answer.text

    def live(self, run: str) -> str:
        return self.sidecar.watch_path(run).replace(f"/runs/{run}?", f"/v1/runs/{run}/live?")


@pytest.fixture
async def web() -> AsyncIterator[Web]:
    mock = MockTelegram()
    api = await mock.start()
    channels = {
        "web": make_runtime("web", ChannelSettings.model_validate({"platform": "web", "throttle_ms": 0}), NO_TOKEN),
        "telegram": make_runtime(
            "telegram",
            ChannelSettings.model_validate({"platform": "telegram", "api_base": api, "throttle_ms": 0}),
            SecretStr(BOT_TOKEN),
        ),
    }
    relay = Relay(channels, MemoryLedger(), MonotonicClock(), live_buffer=8)
    sidecar = Sidecar(relay, token=INGEST_TOKEN, keepalive_s=0.2)
    await sidecar.start()
    async with httpx.AsyncClient(base_url=sidecar.url, headers=AUTH, timeout=30) as client:
        yield Web(relay, sidecar, client, mock)
    await sidecar.stop()
    await relay.close()
    await mock.stop()


async def test_the_watch_link_opens_the_page_and_its_files_are_local(web: Web) -> None:
    await web.run("w1", {"kind": "text", "text": "Hi"}, {"kind": "end"})
    link = (await web.client.get("/v1/runs/w1/watch")).json()
    page = await web.client.get(link["url"])
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "http://" not in page.text and "https://" not in page.text  # no CDN: everything is served here
    for asset in ("/static/live.js", "/static/live.css"):
        assert asset in page.text and (await web.client.get(asset)).status_code == 200
    assert link["url"].startswith(f"{web.sidecar.url}/runs/w1?token=") and link["started"] is True  # absolute
    # A run not started yet has its link too (its page waits for the run).
    early = await web.client.get("/v1/runs/nope/watch")
    assert early.status_code == 200 and early.json()["started"] is False
    assert early.json()["url"] == web.sidecar.watch_url("nope")


async def test_a_read_token_is_needed_and_nothing_leaks_without_the_right_one(web: Web) -> None:
    await web.run("w2", {"kind": "text", "text": "secret answer"}, {"kind": "end"})
    token = web.sidecar.tokens.token("w2")
    async with httpx.AsyncClient(base_url=web.sidecar.url) as anon:
        missing = await anon.get("/v1/runs/w2/live")
        wrong = await anon.get("/v1/runs/w2/live", params={"token": "0" * 32})
        other = await anon.get("/v1/runs/w1/live", params={"token": token})  # w2's token does not open w1
        unknown = await anon.get("/v1/runs/nope/live", params={"token": "0" * 32})
        page = await anon.get("/runs/w2", params={"token": "bad"})
        ingest_token = await anon.get("/v1/runs/w2/live", params={"token": INGEST_TOKEN})
    assert missing.status_code == 401 and wrong.status_code == 403 and other.status_code == 403
    assert unknown.status_code == 403 and page.status_code == 403 and ingest_token.status_code == 403
    assert all("secret answer" not in r.text for r in (missing, wrong, other, unknown, page))


async def test_the_stream_has_no_buffering_headers_and_ends_after_end(web: Web) -> None:
    await web.run("w3", {"kind": "phase", "name": "drafting"}, {"kind": "text", "text": "Hello"}, {"kind": "end"})
    await web.client.get("/v1/runs/w3", params={"wait_s": 10})
    async with web.client.stream("GET", web.live("w3")) as answer:
        headers = answer.headers
        events = sse((await answer.aread()).decode())
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["cache-control"] == "no-cache" and headers["x-accel-buffering"] == "no"
    assert "content-encoding" not in headers
    kinds = [e["type"] for e in events]
    assert kinds[0] == "run" and kinds[-1] == "end" and "phase" in kinds
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))
    assert [e for e in events if e["type"] == "delivery"][-1]["text"] == "Hello"  # the web page's message


async def test_a_reconnect_gets_what_it_missed_once_or_a_reset_past_the_buffer(web: Web) -> None:
    steps = [e for i in range(12) for e in ({"kind": "phase", "name": f"step {i}"}, {"kind": "text", "text": f"{i} "})]
    await web.run("w4", *steps, {"kind": "end"})
    await web.client.get("/v1/runs/w4", params={"wait_s": 10})
    everything = sse((await web.client.get(web.live("w4"), headers={"Last-Event-ID": "0"})).text)
    last = everything[-1]["id"]
    near = sse((await web.client.get(web.live("w4"), headers={"Last-Event-ID": str(last - 3)})).text)
    assert [e["id"] for e in near] == [last - 2, last - 1, last]
    far = sse((await web.client.get(web.live("w4"), headers={"Last-Event-ID": "1"})).text)
    assert [e["type"] for e in far] == ["reset"] and far[0]["id"] == last  # the buffer holds only 8 events
    assert far[0]["state"]["answer"] == "".join(f"{i} " for i in range(12)) and far[0]["state"]["ended"] == "ok"


async def test_an_idle_stream_gets_comment_keepalives(web: Web) -> None:
    await web.run("w5", {"kind": "text", "text": "thinking…"})
    chunks: list[str] = []
    async with web.client.stream("GET", web.live("w5")) as answer:
        async for chunk in answer.aiter_text():
            chunks.append(chunk)
            if sum(c.count(": ping") for c in chunks) >= 2:
                break
    assert any(line.startswith(":") for c in chunks for line in c.splitlines())
    await web.client.post("/v1/runs/w5/events", content=ndjson({"kind": "end"}))


async def test_a_telegram_run_reports_its_progress_agents_and_delivery_live(web: Web) -> None:
    web.relay.live_buffer = 1000  # a watcher that starts after the run gets every event, not a reset
    child = {"agent_id": "researcher", "session_id": "s-r", "depth": 1, "path": "s/researcher"}
    await web.run(
        "t1",
        {"kind": "phase", "name": "planning"},
        {"kind": "tool_call", "id": "c1", "name": "search", "state": "end", "args": {"q": "x", "api_key": "sk-1"}},
        {"kind": "text", "text": "child text", "source": child},
        {"kind": "end", "source": child},
        {"kind": "text", "text": "The answer."},
        {"kind": "end"},
        channel="telegram",
    )
    await web.client.get("/v1/runs/t1", params={"wait_s": 10})
    events = sse((await web.client.get(web.live("t1"))).text)
    by_type: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_type.setdefault(event["type"], []).append(event)
    assert by_type["run"][0]["platform"] == "telegram"
    assert by_type["tool_call"][0]["args"] == 'q: "x", api_key: •••'
    assert by_type["agent"][-1]["state"] == "done" and by_type["agent"][0]["delta"] == "child text"
    assert by_type["answer"][-1] == {**by_type["answer"][-1], "text": "The answer.", "final": True}
    assert {d["state"] for d in by_type["delivery"]} == {"sent"} and "text" not in by_type["delivery"][0]
    assert by_type["end"][0]["delivery"] == "delivered"
    await asyncio.sleep(0)


async def test_a_429_shows_live_as_retrying_then_edited(web: Web) -> None:
    web.relay.live_buffer = 1000
    web.mock.add_fault("editMessageText", 1, {"status": 429, "retry_after_s": 1})
    await web.run("t2", {"kind": "text", "text": "Hello"}, channel="telegram")
    await asyncio.sleep(0.3)
    await web.client.post("/v1/runs/t2/events", content=ndjson({"kind": "text", "text": ", world"}, {"kind": "end"}))
    report = (await web.client.get("/v1/runs/t2", params={"wait_s": 10})).json()
    assert report["status"] == "delivered"
    states = [(e["state"], e.get("retry_after_s")) for e in sse((await web.client.get(web.live("t2"))).text)
              if e["type"] == "delivery"]  # fmt: skip
    assert states[0] == ("sent", None) and ("retrying", 1.0) in states and states[-1] == ("edited", None)


async def test_a_web_part_that_grows_costs_its_length_once_not_per_edit(web: Web) -> None:
    await web.run("w6", {"kind": "text", "text": "word " * 20})
    watching = asyncio.create_task(web.client.get(web.live("w6")))  # a watcher from the start, to the end
    for i in range(30):  # each delta its own words (a delta repeating the whole text would be a replayed snapshot)
        await web.client.post("/v1/runs/w6/events", content=ndjson({"kind": "text", "text": f"w{i:02} " * 25}))
        await asyncio.sleep(0.01)
    await web.client.post("/v1/runs/w6/events", content=ndjson({"kind": "end"}))
    deliveries = [e for e in sse((await asyncio.wait_for(watching, 10)).text) if e["type"] == "delivery"]
    sent = sum(len(e.get("text", "")) + len(e.get("append", "")) for e in deliveries)
    final = "word " * 20 + "".join(f"w{i:02} " * 25 for i in range(30))
    assert len(deliveries) > 3 and sent == len(final)  # every character once, however many edits
    monitor = web.relay.monitor("w6")  # finished: a watcher from elsewhere gets its state, texts from the ledger
    assert monitor is not None
    [reset] = await monitor.wait(-1)
    assert isinstance(reset, ResetLive)
    parts = cast(dict[str, Any], reset.state["parts"])
    assert parts["web/0"]["text"].strip() == final.strip()


async def test_pipeline_calls_stay_off_the_stream_and_a_run_id_with_a_slash_is_refused(web: Web) -> None:
    refused = await web.client.post("/v1/events", content=ndjson({**start("team/run-1"), "run": "team/run-1"}))
    assert refused.status_code == 400 and "no '/'" in refused.json()["error"]
    run = "team-run-1"
    call = {"kind": "tool_call", "id": "c", "name": "secret_tool", "state": "end", "args": {}, "lane": "pipeline"}
    lines = [start(run), call, {"kind": "text", "text": "Hi"}, {"kind": "end"}]
    posted = await web.client.post("/v1/events", content=ndjson(*({**line, "run": run} for line in lines)))
    assert posted.status_code == 200, posted.text
    await web.client.get(f"/v1/runs/{run}", params={"wait_s": 10})
    link = (await web.client.get(f"/v1/runs/{run}/watch")).json()["url"]
    assert link.startswith(f"{web.sidecar.url}/runs/{run}?token=") and (await web.client.get(link)).status_code == 200
    live = link.replace("/runs/", "/v1/runs/", 1).replace("?", "/live?", 1)
    events = sse((await web.client.get(live)).text)
    assert events[-1]["type"] == "end" and "secret_tool" not in json.dumps(events)


async def test_an_uncertain_part_says_why_live(web: Web) -> None:
    web.relay.live_buffer = 1000
    web.mock.add_fault("sendMessage", 1, "timeout_after_commit")
    telegram = web.relay.channels["telegram"].adapter
    telegram.send_timeout_s = 0.3  # type: ignore[attr-defined]
    await web.run("t3", {"kind": "text", "text": "Hello"}, {"kind": "end"}, channel="telegram")
    await web.client.get("/v1/runs/t3", params={"wait_s": 10})
    sent, settled = [e for e in sse((await web.client.get(web.live("t3"))).text) if e["type"] == "delivery"]
    assert sent["state"] == "uncertain" and "Timeout" in sent["reason"]
    # then asked the platform: Telegram without an exclusive bot token cannot tell
    assert settled["state"] == "uncertain" and "cannot tell" in settled["reason"]


async def test_a_correction_reaches_the_pages_watchers_and_a_page_loaded_after(web: Web) -> None:
    """Issue 27: a page following the run (``&corrections=1``, as live.js asks) stays open past the end and gets the
    correction as one ``answer`` event (reset, final); a page loaded after gets the corrected answer; a stream asked
    without it ends with the run, as before."""
    ledger = MemoryLedger()
    relay = Relay(web.relay.channels, ledger, MonotonicClock(), live_buffer=4)
    corrections = Corrections(ledger, ledger, relay.channels, MonotonicClock(), shown=relay.corrected)
    sidecar = Sidecar(relay, token=INGEST_TOKEN, keepalive_s=0.2, corrections=corrections)
    await sidecar.start()
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=AUTH, timeout=30) as client:
            lines = ndjson(start("c1"), {"kind": "text", "text": "The refund was declined."})
            assert (await client.post("/v1/runs/c1/events", content=lines)).status_code == 200
            live = sidecar.watch_path("c1").replace("/runs/c1?", "/v1/runs/c1/live?")
            seen: list[dict[str, Any]] = []
            following, ended = asyncio.Event(), asyncio.Event()

            async def watch() -> None:
                async with client.stream("GET", live + "&corrections=1") as answer:
                    async for line in answer.aiter_lines():
                        if line.startswith("data: "):
                            seen.append(json.loads(line[len("data: ") :]))
                            following.set()
                            if seen[-1]["type"] == "end":
                                ended.set()
                            if seen[-1]["type"] == "answer" and seen[-1].get("text") == "The refund was approved.":
                                return

            watching = asyncio.create_task(watch())
            await asyncio.wait_for(following.wait(), 10)  # it follows the run before its end
            await client.post("/v1/runs/c1/events", content=ndjson({"kind": "end", "run": "c1"}))
            assert (await client.get("/v1/runs/c1", params={"wait_s": 10})).json()["done"]
            await asyncio.wait_for(ended.wait(), 10)
            assert not watching.done()  # the stream stays open past the end for the run's corrections
            ended_alone = sse((await client.get(live)).text)  # asked without &corrections=1: it ends with the run
            assert [e["type"] for e in ended_alone] == ["reset"] and ended_alone[0]["state"]["ended"] == "ok"
            kept = relay.monitor("c1")  # the finished run's: a page opened later follows it until 10 min past this
            end_ts = next(e["ts"] for e in seen if e["type"] == "end")
            assert isinstance(kept, FinishedMonitor) and kept.ended_at() == end_ts

            fix = {"kind": "run.correct", "id": "fix-1", "text": "The refund was approved."}
            fixed = await client.post("/v1/runs/c1/corrections", json=fix)
            assert fixed.status_code == 200 and fixed.json()["state"] == "applied", fixed.text
            await asyncio.wait_for(watching, 10)
            last = seen[-1]
            assert (last["type"], last["reset"], last["final"]) == ("answer", True, True)
            assert last["id"] == seen[-2]["id"] + 1  # the next event of the run: a page applies it

            later = sse((await client.get(live, headers={"Last-Event-ID": "1"})).text)  # past the buffer: a reset
            assert [e["type"] for e in later] == ["reset"] and later[0]["id"] == last["id"]
            assert later[0]["state"]["answer"] == "The refund was approved." and later[0]["state"]["final"] is True
            gone = await client.post("/v1/runs/c1/corrections", json={"kind": "run.retract", "id": "pull-1"})
            assert gone.status_code == 200, gone.text
            after = sse((await client.get(live, headers={"Last-Event-ID": "1"})).text)
            assert after[0]["state"]["answer"] == "🗑 This answer was retracted."
            corrected = relay.monitor("c1")  # the corrections' events come after the end: it still ended then
            assert isinstance(corrected, FinishedMonitor) and corrected.ended_at() == end_ts
    finally:
        await sidecar.stop()
        await relay.close()


async def test_every_watcher_past_the_end_gets_the_correction_even_after_another_gave_up(web: Web) -> None:
    """Relay.after_end: watchers of one finished run share one wake-up; one that times out first does not take it
    from the others; a correction wakes them with the finished run's next event."""
    await web.run("c2", {"kind": "text", "text": "Old."}, {"kind": "end"})
    assert (await web.client.get("/v1/runs/c2", params={"wait_s": 10})).json()["done"]
    monitor = web.relay.monitor("c2")
    assert monitor is not None
    last = monitor.last_id
    assert await web.relay.after_end("c2", last, 0.05) is None  # nothing came: it gives up
    patient = asyncio.create_task(web.relay.after_end("c2", last, 10))
    hasty = asyncio.create_task(web.relay.after_end("c2", last, 0.05))
    assert await hasty is None and not patient.done()
    assert web.relay.corrected("c2", "New.")
    woken = await asyncio.wait_for(patient, 5)
    assert woken is not None and woken.last_id == last + 1
    (event,) = await woken.wait(last)
    assert event.wire()["text"] == "New." and event.wire()["reset"] is True
    assert web.relay.corrected("nope", "x") is False and await web.relay.after_end("nope", 0, 1) is None
