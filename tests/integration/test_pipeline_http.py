"""The pipeline lane and the action gate over real HTTP: NDJSON and SSE streams, resume, keepalives, auth, errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from streamrelay.app.client import RelayClient, RelayError
from streamrelay.app.service import Sidecar
from streamrelay.core.contracts.units import CommitUnit, PipelineUnit, RunEndUnit, ToolCallUnit
from streamrelay.core.lanes.gate import Action, ActionCatalog, ActionClass
from streamrelay.core.records.ledger import MemoryLedger
from tests.integration.conftest import INGEST_TOKEN, Stack, start_stack, stop_stack

pytestmark = pytest.mark.timeout(60)
AUTH = {"Authorization": f"Bearer {INGEST_TOKEN}"}


def ndjson(*lines: dict[str, Any]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def start(run: str) -> dict[str, Any]:
    return {"kind": "run.start", "run": run, "channel": "telegram", "target": {"chat_id": 7}}


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"kind": "tool_call", "id": call_id, "name": name, "state": "end", "args": args}


@pytest.fixture
async def quick() -> AsyncIterator[Stack]:
    """The stack with keepalives every 0.2 s and a small catalog."""
    mock, relay, sidecar = await start_stack(MemoryLedger())
    await sidecar.stop()
    relay.catalog = ActionCatalog([Action("search", ActionClass.IDEMPOTENT), Action("pay", ActionClass.IRREVERSIBLE)])
    fast = Sidecar(relay, token=INGEST_TOKEN, keepalive_s=0.2)
    await fast.start()
    async with httpx.AsyncClient(base_url=fast.url, headers=AUTH, timeout=30) as client:
        yield Stack(mock, relay, fast, client)
    await stop_stack(mock, relay, fast)


async def test_ndjson_stream_carries_units_as_they_come_and_ends_at_run_end(quick: Stack) -> None:
    await quick.client.post("/v1/runs/p1/events", content=ndjson(start("p1"), {"kind": "text", "text": "Hi"}))
    lines: list[str] = []

    async def read() -> None:
        async with quick.client.stream("GET", "/v1/runs/p1/pipeline/stream") as answer:
            assert answer.headers["content-type"] == "application/x-ndjson"
            assert answer.headers["x-accel-buffering"] == "no" and answer.headers["cache-control"] == "no-cache"
            async for line in answer.aiter_lines():
                lines.append(line)

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.5)  # idle: keepalive lines
    await quick.client.post("/v1/runs/p1/events", content=ndjson(call("c1", "search", q="x"), {"kind": "end"}))
    await asyncio.wait_for(reader, 10)
    units = [json.loads(line) for line in lines if line.strip()]
    assert [u["kind"] for u in units] == ["tool_call", "commit", "run.end"]
    assert "" in lines  # a keepalive came while the lane was idle
    assert not any(u["kind"] == "text" or "Hi" in json.dumps(u) for u in units)  # never ui-lane text


async def test_sse_resumes_after_last_event_id_without_repeating(quick: Stack) -> None:
    body = ndjson(start("p2"), call("c1", "search", q="a"), call("c2", "search", q="b"), {"kind": "end"})
    await quick.client.post("/v1/runs/p2/events", content=body)
    await quick.client.get("/v1/runs/p2", params={"wait_s": 10})
    headers = {"Accept": "text/event-stream", "Last-Event-ID": "1"}
    async with quick.client.stream("GET", "/v1/runs/p2/pipeline/stream", headers=headers) as answer:
        assert answer.headers["content-type"].startswith("text/event-stream")
        text = (await answer.aread()).decode()
    events = [block for block in text.split("\r\n\r\n") if block.strip() and not block.startswith(":")]
    ids = [line.split(": ", 1)[1] for block in events for line in block.splitlines() if line.startswith("id:")]
    assert ids == ["2", "3", "4"]  # c2, commit, run.end: unit 1 is not sent again
    assert "event: tool_call" in events[0] and '"id": "c2"' in events[0]


async def test_the_client_follows_the_lane_and_the_gate_waits_for_the_commit(quick: Stack) -> None:
    async with RelayClient(quick.sidecar.url, INGEST_TOKEN) as relay:
        await relay.start("p3", channel="telegram", chat_id=7)
        await relay.send("p3", [call("c1", "pay", amount=5), call("c2", "search", q="x")])
        assert (await relay.gate("p3", "c2")).verdict == "run"
        first = await relay.gate("p3", "c1")
        assert (first.verdict, first.action_class) == ("wait", "irreversible")
        assert isinstance(first.unit, ToolCallUnit) and first.unit.args == {"amount": 5}
        waiting = asyncio.create_task(relay.gate("p3", "c1", wait_s=20))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        await relay.send("p3", [{"kind": "text", "text": "Paid."}, {"kind": "commit"}, {"kind": "end"}])
        assert (await asyncio.wait_for(waiting, 10)).verdict == "run"
        assert [type(u) async for u in relay.pipeline("p3", after=2)] == [CommitUnit, RunEndUnit]
        assert [u.id for u in await relay.units("p3", after=0) if isinstance(u, ToolCallUnit)] == ["c1", "c2"]


async def test_gate_and_lane_errors_say_what_to_do(quick: Stack) -> None:
    await quick.client.post("/v1/runs/p4/events", content=ndjson(start("p4")))
    async with RelayClient(quick.sidecar.url, INGEST_TOKEN) as relay:
        with pytest.raises(RelayError, match="no complete tool call 'nope'") as missing:
            await relay.gate("p4", "nope", wait_s=0.2)
        with pytest.raises(RelayError, match="unknown run") as unknown:
            await relay.units("ghost")
    assert missing.value.status == 404 and unknown.value.status == 404
    bad_after = await quick.client.get("/v1/runs/p4/pipeline", params={"after": "x"})
    assert bad_after.status_code == 400 and "integer" in bad_after.json()["error"]
    no_id = await quick.client.post("/v1/runs/p4/gate", json={"call": "c1"})
    assert no_id.status_code == 400 and '"id"' in no_id.json()["error"]
    async with httpx.AsyncClient(base_url=quick.sidecar.url) as anon:
        assert (await anon.get("/v1/runs/p4/pipeline/stream")).status_code == 401
        assert (await anon.post("/v1/runs/p4/gate", json={"id": "c1"})).status_code == 401


async def test_a_call_id_two_agents_used_needs_its_source(quick: Stack) -> None:
    child = {"agent_id": "a", "session_id": "s-a", "depth": 1}
    body = ndjson(start("p5"), call("c1", "search", q="root"), {**call("c1", "pay", amount=1), "source": child})
    await quick.client.post("/v1/runs/p5/events", content=body)
    await asyncio.sleep(0.2)
    ambiguous = await quick.client.post("/v1/runs/p5/gate", json={"id": "c1"})
    assert ambiguous.status_code == 409 and "say which with source" in ambiguous.json()["error"]
    root = await quick.client.post("/v1/runs/p5/gate", json={"id": "c1", "source": "root"})
    theirs = await quick.client.post("/v1/runs/p5/gate", json={"id": "c1", "source": "s-a"})
    assert root.json()["verdict"] == "run" and theirs.json()["verdict"] == "wait"


async def test_last_event_id_wins_over_the_after_in_the_url(quick: Stack) -> None:
    body = ndjson(start("p6"), call("c1", "search", q="a"), call("c2", "search", q="b"), {"kind": "end"})
    await quick.client.post("/v1/runs/p6/events", content=body)
    await quick.client.get("/v1/runs/p6", params={"wait_s": 10})
    headers = {"Accept": "text/event-stream", "Last-Event-ID": "3"}  # an EventSource opened with ?after=0
    async with quick.client.stream("GET", "/v1/runs/p6/pipeline/stream?after=0", headers=headers) as answer:
        text = (await answer.aread()).decode()
    assert [line for line in text.splitlines() if line.startswith("id:")] == ["id: 4"]


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ('{"kind": "tool_call", "id": "c", "state": "end", "args": {"n": NaN}}', "NaN is not JSON"),
        ('{"kind": "tool_call", "id": "c", "state": "end", "args": {"to": "a", "to": "b"}}', "'to' appears twice"),
        ('{"kind": "text", "text": ' + "[" * 50_000 + "]" * 50_000 + "}", "nested too deeply"),
    ],
)
async def test_ingest_takes_strict_json_only(quick: Stack, line: str, words: str) -> None:
    body = ndjson(start("p7")) + (line + "\n").encode() + ndjson({"kind": "text", "text": "kept"})
    answer = await quick.client.post("/v1/runs/p7/events", content=body)
    assert answer.status_code == 400 and words in answer.json()["error"] and answer.json()["accepted"] == 2


async def test_a_stopping_sidecar_cuts_open_streams_after_a_grace_and_the_client_resumes(quick: Stack) -> None:
    await quick.client.post("/v1/runs/p8/events", content=ndjson(start("p8"), call("c1", "search", q="a")))
    async with RelayClient(quick.sidecar.url, INGEST_TOKEN, reconnects=0) as relay:
        got: list[PipelineUnit] = []

        async def follow() -> None:
            async for unit in relay.pipeline("p8"):
                got.append(unit)

        follower = asyncio.create_task(follow())
        await asyncio.sleep(0.5)
        loop = asyncio.get_running_loop()
        began = loop.time()
        await asyncio.wait_for(quick.sidecar.stop(), 15)  # never held open by the follower
        assert loop.time() - began < 10
        with pytest.raises(httpx.HTTPError):
            await asyncio.wait_for(follower, 5)
    assert [u.index for u in got] == [1]  # the client knows where to resume: after unit 1
