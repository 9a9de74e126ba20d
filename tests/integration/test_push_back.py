"""Push-back past capacity over real HTTP (issue 13): with the loop's lag injected, new runs and event posts are
answered 503 with ``Retry-After`` and ``pushed_back_from``, a run's ``end`` is still taken, and an agent that sends the
rest again (the RelayClient does) loses nothing: the chat shows the whole answer once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.app.client import RelayClient
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.ingest.pressure import LoopLag, Pressure
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import BOT_TOKEN, INGEST_TOKEN


class InjectedLag(LoopLag):
    """A probe whose lag the test sets (it never measures the real loop)."""

    def start(self) -> None:
        pass

    def set(self, lag_s: float) -> None:
        self.lag_s = lag_s


@dataclass
class Loaded:
    mock: MockTelegram
    relay: Relay
    sidecar: Sidecar
    lag: InjectedLag
    http: httpx.AsyncClient


@pytest.fixture
async def loaded() -> AsyncIterator[Loaded]:
    mock = MockTelegram(rate_limits=False)
    api = await mock.start()
    settings = ChannelSettings.model_validate(
        {"platform": "telegram", "api_base": api, "throttle_ms": 0, "delivery": "block"}
    )
    relay = Relay(
        {"telegram": make_runtime("telegram", settings, SecretStr(BOT_TOKEN))}, MemoryLedger(), MonotonicClock()
    )
    lag = InjectedLag()
    sidecar = Sidecar(relay, token=INGEST_TOKEN, pressure=Pressure(lag, max_lag_s=0.1, retry_after_s=1.0))
    await sidecar.start()
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as http:
        yield Loaded(mock, relay, sidecar, lag, http)
    await sidecar.stop()
    await relay.close()
    await mock.stop()


def ndjson(*lines: dict[str, Any]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


START = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 7}}
PARTS = ["First paragraph of the answer.\n\n", "Second paragraph, which must not be lost.\n\n", "Third and last."]


async def chat_text(stack: Loaded, chat: int = 7) -> str:
    return " ".join(text for _, text in stack.mock.visible(chat))


async def test_event_posts_are_pushed_back_with_retry_after_and_the_rest_is_taken_later(loaded: Loaded) -> None:
    st = loaded
    assert (await st.http.post("/v1/runs/r1/events", content=ndjson(START))).status_code == 200
    st.lag.set(0.5)  # past twice overload_lag_ms: every line but an end is pushed back
    lines = [{"kind": "text", "mode": "delta", "text": part, "seq": i + 1} for i, part in enumerate(PARTS)]
    answer = await st.http.post("/v1/runs/r1/events", content=ndjson(*lines, {"kind": "end", "status": "ok"}))
    assert answer.status_code == 503
    assert 1 <= int(answer.headers["retry-after"]) <= 4  # overload_retry_after_s up to four times it
    body = answer.json()
    assert body["pushed_back_from"] == 1 and body["accepted"] == 0
    assert "overload_lag_ms" in body["error"]
    st.lag.set(0.0)
    again = await st.http.post("/v1/runs/r1/events", content=ndjson(*lines, {"kind": "end", "status": "ok"}))
    assert again.status_code == 200 and again.json()["accepted"] == 4
    report = (await st.http.get("/v1/runs/r1", params={"wait_s": 10})).json()
    assert report["status"] == "delivered"
    assert (await chat_text(st)).split() == "".join(PARTS).split()


async def test_new_runs_are_pushed_back_first_while_started_runs_go_on(loaded: Loaded) -> None:
    st = loaded
    assert (await st.http.post("/v1/runs/r1/events", content=ndjson(START))).status_code == 200
    st.lag.set(0.15)  # past overload_lag_ms, under twice it: starts only
    started = await st.http.post("/v1/runs/r2/events", content=ndjson({**START, "target": {"chat_id": 8}}))
    assert started.status_code == 503 and 1 <= int(started.headers["retry-after"]) <= 3
    assert started.json()["pushed_back_from"] == 1
    assert st.relay.controller("r2") is None
    text = {"kind": "text", "mode": "delta", "text": "goes on"}
    taken = await st.http.post("/v1/runs/r1/events", content=ndjson(text))
    assert taken.status_code == 200 and taken.json()["accepted"] == 1


async def test_an_end_is_taken_whatever_the_load_and_lines_after_a_pushed_back_one_wait_with_it(loaded: Loaded) -> None:
    st = loaded
    text = {"kind": "text", "mode": "delta", "text": "The whole answer."}
    assert (await st.http.post("/v1/runs/r1/events", content=ndjson(START, text))).status_code == 200
    st.lag.set(5.0)
    # An end behind a pushed-back line is pushed back with it: taking it would end the run without that line.
    more = {"kind": "text", "mode": "delta", "text": " And more."}
    mixed = await st.http.post("/v1/runs/r1/events", content=ndjson(more, {"kind": "end", "status": "ok"}))
    assert mixed.status_code == 503 and mixed.json()["pushed_back_from"] == 1
    ended = await st.http.post("/v1/runs/r1/events", content=ndjson({"kind": "end", "status": "ok"}))
    assert ended.status_code == 200 and ended.json()["accepted"] == 1
    report = (await st.http.get("/v1/runs/r1", params={"wait_s": 10})).json()
    assert report["status"] == "delivered"
    assert await chat_text(st) == "The whole answer."


async def test_the_relay_client_honours_retry_after_and_nothing_is_lost(loaded: Loaded) -> None:
    st = loaded
    async with RelayClient(st.sidecar.url, INGEST_TOKEN) as relay:
        await relay.start("r1", channel="telegram", chat_id=7)
        st.lag.set(0.5)
        lines = [{"kind": "text", "mode": "delta", "text": part} for part in PARTS]
        sending = asyncio.create_task(relay.send("r1", [*lines, {"kind": "end", "status": "ok"}]))
        await asyncio.sleep(0.3)
        assert not sending.done()  # pushed back: it waits for Retry-After
        st.lag.set(0.0)
        assert await asyncio.wait_for(sending, 10) == 4
        report = await relay.report("r1", wait_s=10)
    assert report.status == "delivered"
    assert (await chat_text(st)).split() == "".join(PARTS).split()


async def until(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_a_long_stream_cut_partway_after_keep_alives_sends_the_lines_not_taken_again(loaded: Loaded) -> None:
    """A stream's request cut by a push-back after keep-alive lines: ``pushed_back_from`` counts the keep-alives as
    the sidecar read them, and the client sends exactly the lines from there on again (before, it indexed its own
    list without the keep-alives: with three keep-alives before the cut, the lines pushed back were lost)."""
    st = loaded
    async with RelayClient(st.sidecar.url, INGEST_TOKEN) as relay:
        async with relay.stream("r1", keepalive_s=0.05) as stream:
            await stream.send([START, {"kind": "text", "mode": "delta", "text": PARTS[0], "seq": 1}])
            await until(lambda: st.relay.controller("r1") is not None)
            await until(lambda: stream._body.count("") >= 3)  # keep-alive lines went out while the agent thought
            st.lag.set(0.5)  # past twice overload_lag_ms: the next line cuts the request
            await stream.send([{"kind": "text", "mode": "delta", "text": PARTS[1], "seq": 2}])
            await until(lambda: st.sidecar.pressure is not None and st.sidecar.pressure.pushed_back == 1)
            st.lag.set(0.0)
            await stream.send([{"kind": "text", "mode": "delta", "text": PARTS[2], "seq": 3}])
            await stream.send([{"kind": "end", "status": "ok", "seq": 4}])
        assert stream.accepted == 5
        report = await relay.report("r1", wait_s=10)
    assert report.status == "delivered"
    assert (await chat_text(st)).split() == "".join(PARTS).split()
