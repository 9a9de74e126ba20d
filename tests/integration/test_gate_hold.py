"""The action gate holds a tool call until a person approves it, end to end (docs/approvals.md, "The action gate holds
a call"): a recorded OpenAI Chat stream (tests/streams/openai-chat/tool-call.jsonl, DeepSeek calling ``weather``, a
tool not in the action catalog, so irreversible) sent through ``RelayClient`` to an in-process sidecar whose Slack
channel says ``approve_actions = ["irreversible"]``; the sidecar posts the question with Approve and Deny through
slack-sdk to the stateful Slack mock, the mock's press makes the ``block_actions`` payload the bot forwards as the
docs' snippet does. A stranger's press changes nothing; the approver's releases the call onto the pipeline lane and
the agent's ``RelayClient.gate`` (waiting) answers ``run``."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.app.client import RelayClient
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.actions import load_actions
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.contracts.units import ApprovalUnit, ToolCallUnit
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.approvals import NOT_ALLOWED, button_ids
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.common import MockServer
from tests.integration.conftest import INGEST_TOKEN
from tests.integration.test_approvals_platforms import USERS, until
from tests.integration.test_durability import TOKEN, _config, _mock, _ready, _serve, _serve_here, _until
from tests.integration.test_stop_platforms import slack_buttons
from tests.ports import free_port

pytestmark = pytest.mark.timeout(180)

STREAM = Path(__file__).parents[1] / "streams" / "openai-chat" / "tool-call.jsonl"
CALL = "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF"


async def test_a_held_call_is_released_by_the_approvers_press_only() -> None:
    dry = DRY_RUN["slack"]
    chat = dry.private
    allowed, stranger = USERS["slack"]
    mock = dry.make_mock(False)
    assert isinstance(mock, MockServer)
    settings = ChannelSettings.model_validate(
        {
            "platform": "slack",
            "api_base": await mock.start(),
            "throttle_ms": 0,
            "approvers": [f"slack:user:{allowed}"],
            "approve_actions": ["irreversible"],
        }
    )
    catalog, validate = load_actions()
    relay = Relay(
        {"c": make_runtime("c", settings, SecretStr(dry.token))},
        MemoryLedger(),
        MonotonicClock(),
        validator=validate,
        catalog=catalog,
    )
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    client = RelayClient(sidecar.url, INGEST_TOKEN)
    try:
        await client.start("w", channel="c", chat_id=chat, format="openai-chat")
        raws: list[dict[str, Any]] = [json.loads(line) for line in STREAM.read_text().splitlines() if line.strip()]
        await client.send("w", raws)
        held = await client.gate("w", CALL)
        assert held.verdict == "wait" and "gate." + CALL in held.reason and held.unit is None

        def asked() -> list[tuple[int | str, str]]:
            return [(m, t) for m, t in mock.visible(chat) if t.startswith("🔐")]

        await until(lambda: len(asked()) == 1, "the approval message")
        message_id, text = asked()[0]
        assert "Run the tool weather?" in text and "If approved: weather(" in text
        approve, deny = button_ids("w", "gate." + CALL)
        await until(lambda: slack_buttons(mock, chat, message_id) == [approve, deny], "the buttons")

        async def press(user: str) -> dict[str, Any]:
            """The mock's press, forwarded as the docs' Bolt snippet does."""
            delivered = await mock_press(mock, chat, message_id, approve, user)
            decision, run16, id16 = delivered["actions"][0]["value"].split(":")
            try:
                return await client.decide_approval(run16, id16, decision, by=f"slack:user:{delivered['user']['id']}")
            except Exception as refused:  # RelayError: 403
                return {"refused": str(refused)}

        assert NOT_ALLOWED in (await press(str(stranger)))["refused"]
        assert (await client.gate("w", CALL)).verdict == "wait"  # nothing changed
        assert not any(isinstance(u, ToolCallUnit) for u in await client.units("w"))

        waiting = asyncio.create_task(client.gate("w", CALL, wait_s=30))  # the agent waits at the gate
        decided = await press(str(allowed))
        assert decided["decision"] == "approved" and decided["by"] == f"slack:user:{allowed}"
        released = await asyncio.wait_for(waiting, 30)
        assert released.verdict == "run" and "approved" in released.reason
        assert isinstance(released.unit, ToolCallUnit) and released.unit.approval == "gate." + CALL
        assert released.unit.name == "weather" and released.unit.args
        units = await client.units("w")
        approval = next(u for u in units if isinstance(u, ApprovalUnit))
        assert (approval.call, approval.decision) == (CALL, "approved")
        assert units.index(approval) + 1 == units.index(released.unit)  # released right after its decision
        await until(lambda: f"✅ Approved by slack:user:{allowed}" in asked()[0][1], "the decision shown")
        await client.send("w", [{"kind": "end"}])
        report = await client.report("w", wait_s=15)
        assert report.done, report
    finally:
        await client.close()
        await sidecar.stop()
        await relay.close()
        await mock.stop()


async def mock_press(mock: MockServer, chat: int | str, message_id: int | str, data: str, user: str) -> dict[str, Any]:
    """``POST /_mock/press``: what Slack delivers to the bot when ``user`` presses ``data``."""
    async with httpx.AsyncClient() as control:
        answer = await control.post(
            f"{mock.control_url}/press",
            json={"chat_id": chat, "message_id": message_id, "data": data, "user": user},
        )
    assert answer.status_code == 200, answer.text
    delivered: dict[str, Any] = answer.json()
    assert delivered["type"] == "block_actions"
    return delivered


async def test_kill_9_after_the_approve_releases_the_held_call_exactly_once(tmp_path: Path) -> None:
    """``streamrelay serve`` on SQLite, a held call approved (answered 200: journaled) and the process killed -9 at
    once; the restarted sidecar replays the journal: one ``approval`` unit and one released ``tool_call`` unit, the
    gate says run, a second press gets the first decision (409). One platform (Slack: no aiogram to import)."""
    dry = DRY_RUN["slack"]
    target = dry.target()
    approver = "slack:user:U0ALLOWED"
    async with _mock("slack") as mock:
        port = free_port()
        config = _config(
            tmp_path, "slack", mock.base_url, port, throttle_ms=0, approvers=[approver], approve_actions=["send_email"]
        )
        config.write_text(config.read_text().replace("run_idle_timeout_s = 4", "run_idle_timeout_s = 120"))
        log = tmp_path / "sidecar.log"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        lines = [
            {"seq": 0, "kind": "run.start", "channel": "chat", "target": target.model_dump()},
            {"seq": 1, "kind": "tool_call", "id": "m1", "name": "send_email", "state": "start"},
            {"seq": 2, "kind": "tool_call", "id": "m1", "state": "end", "args": {"to": "a@example.com"}},
        ]
        body = "".join(json.dumps({"run": "r1", **line}) + "\n" for line in lines).encode()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
            with _serve(config, dry.token, log) as first:
                await _ready(client, first, log)
                assert (await client.post("/v1/runs/r1/events", content=body)).status_code == 200
                await _until(lambda: any(t.startswith("🔐") for _, t in mock.visible(target.chat_id)), 20, "asked")
                gate = (await client.post("/v1/runs/r1/gate", json={"id": "m1"})).json()
                assert gate["verdict"] == "wait", gate
                decided = await client.post(
                    "/v1/runs/r1/approvals/gate.m1", json={"decision": "approve", "by": approver}
                )
                assert decided.status_code == 200, decided.text
                first.send_signal(signal.SIGKILL)  # journaled; the release onto the lane: maybe not yet
                first.wait(10)
            async with _serve_here(config, dry.token) as second:
                await _ready(client, second, log)
                again = await client.post("/v1/runs/r1/approvals/gate.m1", json={"decision": "deny", "by": approver})
                assert again.status_code == 409 and again.json()["approval"]["decision"] == "approved", again.text
                gate = (await client.post("/v1/runs/r1/gate", json={"id": "m1", "wait_s": 20})).json()
                assert gate["verdict"] == "run" and gate["unit"]["approval"] == "gate.m1", gate
                units = (await client.get("/v1/runs/r1/pipeline")).json()["units"]
                assert [(u["kind"], u.get("call"), u.get("approval")) for u in units] == [
                    ("approval", "m1", None),
                    ("tool_call", None, "gate.m1"),
                ]
                assert (await client.post("/v1/runs/r1/events", content=_end())).status_code == 200
                report = (await client.get("/v1/runs/r1", params={"wait_s": 60})).json()
        assert report["done"], report
        asked = [t for _, t in mock.visible(target.chat_id) if t.startswith("🔐")]
        assert len(asked) == 1 and f"✅ Approved by {approver}" in asked[0]  # one message, edited once


def _end() -> bytes:
    return (json.dumps({"run": "r1", "seq": 3, "kind": "end"}) + "\n").encode()
