"""The typed contracts over real HTTP: what the sidecar sends (pipeline units, live SSE events, the run report) is
each model's JSON key for key, and RelayClient hands the parent loop the typed models end to end (units, the
pipeline stream, the gate, the report, the listing of active runs, the watch link and the live events)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from streamrelay.app.client import RelayClient
from streamrelay.core.contracts.answers import RunListing
from streamrelay.core.contracts.live import (
    LIVE_EVENT,
    AgentEvent,
    DeliveryEvent,
    EndLiveEvent,
    LiveEvent,
    PhaseEvent,
    RunOpened,
    ToolCallEvent,
)
from streamrelay.core.contracts.report import RunReport
from streamrelay.core.contracts.units import PIPELINE_UNIT, MessageUnit, PipelineUnit, RunEndUnit, ToolCallUnit
from streamrelay.core.records.ledger import MemoryLedger
from tests.integration.conftest import INGEST_TOKEN, start_stack, stop_stack

pytestmark = pytest.mark.timeout(60)

HELPER = {"agent_id": "helper", "session_id": "s-help", "depth": 1, "path": "root/helper"}
LOOKUP = {"kind": "tool_call", "id": "c1", "name": "lookup", "source": HELPER}


def _events() -> list[dict[str, Any]]:
    return [
        {"kind": "phase", "name": "planning"},
        {**LOOKUP, "state": "start"},
        {**LOOKUP, "state": "args_delta", "args_delta": '{"q": "refunds"}'},
        {**LOOKUP, "state": "end"},
        {"kind": "text", "text": "Refunds take 14 days.", "source": HELPER},
        {"kind": "end", "status": "ok", "source": HELPER},
        {"kind": "text", "mode": "delta", "text": "Refunds take "},
        {"kind": "text", "mode": "delta", "text": "14 days."},
        {"kind": "commit"},
        {"kind": "end", "status": "ok"},
    ]


def _wire(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


async def test_the_wire_is_the_models_and_the_client_is_typed_end_to_end() -> None:
    mock, relay, sidecar = await start_stack(MemoryLedger())
    try:
        async with RelayClient(sidecar.url, INGEST_TOKEN) as client:
            link = await client.watch_link("t1")  # before the run: its page waits for it
            assert link.started is False and link.url.endswith(f"token={link.token}")
            watched: list[LiveEvent] = []
            raw_live: list[dict[str, Any]] = []

            async def watch() -> None:
                async for event in client.watch("t1"):
                    watched.append(event)

            async def read_raw() -> None:  # the same stream, as bytes
                headers = {"Authorization": f"Bearer {link.token}"}
                async with client._http.stream("GET", "/v1/runs/t1/live", headers=headers, timeout=None) as answer:
                    async for line in answer.aiter_lines():
                        if line.startswith("data: "):
                            raw_live.append(json.loads(line[len("data: ") :]))
                            if raw_live[-1]["type"] == "end":
                                return

            watching = [asyncio.create_task(watch()), asyncio.create_task(read_raw())]
            await asyncio.sleep(0.3)  # both streams wait for the run
            await client.start("t1", channel="telegram", chat_id=7, overrides={"subagents": "status"})
            streamed: list[PipelineUnit] = []

            async def follow() -> None:
                async for unit in client.pipeline("t1"):
                    streamed.append(unit)

            follower = asyncio.create_task(follow())
            await client.send("t1", [{"kind": "phase", "name": "opening"}])
            listing = await client.runs()
            raw_listing = (await client._http.get("/v1/runs")).json()
            await client.send("t1", _events())
            report = await client.report("t1", wait_s=30)
            await asyncio.wait_for(asyncio.gather(follower, *watching), 20)
            gate = await client.gate("t1", "c1")
            units = await client.units("t1")
            raw_units = (await client._http.get("/v1/runs/t1/pipeline")).json()["units"]
            raw_report = (await client._http.get("/v1/runs/t1")).json()
    finally:
        await stop_stack(mock, relay, sidecar)

    (row,) = listing.runs
    assert row.run == "t1" and row.channel == "telegram" and row.watch is not None and row.replica is None
    typed_listing = RunListing.model_validate(raw_listing)  # the same listing read again: only age_s moved
    assert _wire(typed_listing.model_dump(mode="json", exclude_unset=True)) == _wire(raw_listing)
    assert isinstance(report, RunReport) and report.status == "delivered" and report.done, report
    assert _wire(report.model_dump(mode="json")) == _wire(raw_report)
    assert units == streamed and isinstance(units[-1], RunEndUnit) and units[-1].committed
    call, message = units[0], units[1]
    assert isinstance(call, ToolCallUnit) and call.args == {"q": "refunds"} and call.source is not None
    assert call.source.agent_id == "helper"
    assert isinstance(message, MessageUnit) and message.text == "Refunds take 14 days."
    for raw_unit in raw_units:
        assert _wire(PIPELINE_UNIT.validate_python(raw_unit).model_dump(mode="json")) == _wire(raw_unit)
    assert gate.verdict in ("run", "wait") and isinstance(gate.unit, ToolCallUnit) and gate.unit.id == "c1"

    kinds = {type(e) for e in watched}
    assert watched[0].type == "waiting" and isinstance(watched[1], RunOpened) and isinstance(watched[-1], EndLiveEvent)
    assert {PhaseEvent, ToolCallEvent, AgentEvent, DeliveryEvent} <= kinds, kinds
    assert watched[-1].delivery == "delivered"
    for raw_event in raw_live:
        typed = LIVE_EVENT.validate_python(raw_event)
        assert _wire(typed.model_dump(mode="json", exclude_unset=True)) == _wire(raw_event)
