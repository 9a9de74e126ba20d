"""An approval survives kill -9 (docs/approvals.md): ``streamrelay serve`` as its own process on a SQLite journal and
ledger, a person's Approve is forwarded and answered 200 (journaled), and the process is killed -9 at once, before the
run's worker has made the ``approval`` unit, the edit and the buttons' removal (or while it makes them). The restarted
sidecar (in the test's process: test_durability.py's ``_serve_here``) replays the decision from the journal: exactly one
``approval`` unit on the pipeline lane, one approval message (edited, never sent again) saying who decided, no buttons,
and a second press answered 409 with the first decision. A pending approval's expiry is armed again after a restart."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.app.dry_run import DRY_RUN
from streamrelay.core.run.approvals import button_ids
from tests.integration.test_approvals_platforms import BUTTONS
from tests.integration.test_durability import TOKEN, _config, _mock, _ready, _serve, _serve_here, _until
from tests.ports import free_port

pytestmark = pytest.mark.timeout(180)


def _lines(*events: dict[str, Any]) -> bytes:
    return "".join(json.dumps({"run": "r1", **e}) + "\n" for e in events).encode()


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord"])
async def test_kill_9_after_the_decision_gives_exactly_one_decision(tmp_path: Path, platform: str) -> None:
    dry = DRY_RUN[platform]
    target = dry.target()
    chat = target.chat_id
    approver = f"{platform}:user:42"
    async with _mock(platform) as mock:
        port = free_port()
        config = _config(tmp_path, platform, mock.base_url, port, throttle_ms=0)
        config.write_text(config.read_text().replace("run_idle_timeout_s = 4", "run_idle_timeout_s = 120"))
        log = tmp_path / "sidecar.log"
        headers = {"Authorization": f"Bearer {TOKEN}"}

        def approval_messages() -> list[tuple[int | str, str]]:
            return [(m, t) for m, t in mock.visible(chat) if t.startswith("🔐")]

        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
            with _serve(config, dry.token, log) as first:
                await _ready(client, first, log)
                start = {"seq": 0, "kind": "run.start", "channel": "chat", "target": target.model_dump()}
                ask = {
                    "seq": 1,
                    "kind": "approval.request",
                    "id": "refund",
                    "question": "Refund 49.99 EUR for order A-1029?",
                    "action": "refund(order='A-1029', amount=49.99)",
                    "approvers": [approver],
                    "ttl_s": 600,
                }
                answer = await client.post("/v1/runs/r1/events", content=_lines(start, ask))
                assert answer.status_code == 200, answer.text
                await _until(lambda: len(approval_messages()) == 1, 20, "the approval message")
                message_id = approval_messages()[0][0]
                approve, _ = button_ids("r1", "refund")
                await _until(lambda: approve in BUTTONS[platform](mock, chat, message_id), 20, "the buttons")
                decided = await client.post(
                    "/v1/runs/r1/approvals/refund", json={"decision": "approve", "by": approver}
                )
                assert decided.status_code == 200 and decided.json()["decision"] == "approved", decided.text
                first.send_signal(signal.SIGKILL)  # the decision is journaled; the lane, the edit: maybe not yet
                first.wait(10)
            async with _serve_here(config, dry.token) as second:
                await _ready(client, second, log)
                again = await client.post("/v1/runs/r1/approvals/refund", json={"decision": "deny", "by": approver})
                assert again.status_code == 409, again.text
                assert (again.json()["approval"]["decision"], again.json()["approval"]["by"]) == ("approved", approver)
                units = (await client.get("/v1/runs/r1/pipeline")).json()["units"]
                approvals = [u for u in units if u["kind"] == "approval"]
                assert len(approvals) == 1 and (approvals[0]["decision"], approvals[0]["by"]) == ("approved", approver)
                await _until(lambda: "✅ Approved by" in approval_messages()[0][1], 30, "the decision shown")
                await _until(lambda: BUTTONS[platform](mock, chat, message_id) == [], 30, "the buttons gone")
                done = await client.post("/v1/runs/r1/events", content=_lines({"seq": 2, "kind": "end"}))
                assert done.status_code == 200, done.text
                report = (await client.get("/v1/runs/r1", params={"wait_s": 60})).json()
        assert report["done"] and report["end_status"] == "ok", report
        shown = approval_messages()
        assert len(shown) == 1 and shown[0][0] == message_id  # one message, edited: never sent again
        assert f"✅ Approved by {approver}" in shown[0][1]


async def test_a_pending_expiry_is_armed_again_after_a_restart(tmp_path: Path) -> None:
    dry = DRY_RUN["telegram"]
    target = dry.target()
    async with _mock("telegram") as mock:
        port = free_port()
        config = _config(tmp_path, "telegram", mock.base_url, port, throttle_ms=0)
        config.write_text(config.read_text().replace("run_idle_timeout_s = 4", "run_idle_timeout_s = 120"))
        log = tmp_path / "sidecar.log"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
            with _serve(config, dry.token, log) as first:
                await _ready(client, first, log)
                start = {"seq": 0, "kind": "run.start", "channel": "chat", "target": target.model_dump()}
                ask = {
                    "seq": 1,
                    "kind": "approval.request",
                    "id": "deploy",
                    "question": "Deploy?",
                    "approvers": ["telegram:user:1"],
                    "ttl_s": 3,
                    "on_expiry": "approved",
                }
                assert (await client.post("/v1/runs/r1/events", content=_lines(start, ask))).status_code == 200
                await _until(lambda: any(t.startswith("🔐") for _, t in mock.visible(target.chat_id)), 20, "it")
                first.send_signal(signal.SIGKILL)
                first.wait(10)
            async with _serve_here(config, dry.token) as second:
                await _ready(client, second, log)

                async def expired() -> bool:
                    units = (await client.get("/v1/runs/r1/pipeline")).json()["units"]
                    return any(u["kind"] == "approval" for u in units)

                await _until(expired, 60, "the expiry")
                units = [
                    u for u in (await client.get("/v1/runs/r1/pipeline")).json()["units"] if u["kind"] == "approval"
                ]
                assert [(u["decision"], u["approved"], u["by"]) for u in units] == [("expired", True, None)]


async def test_a_ttl_keeps_its_instant_through_kill_9(tmp_path: Path) -> None:
    """The instant a ``ttl_s`` gives is fixed when the first sidecar takes the line (journaled with it): the sidecar
    restarted after kill -9 shows the same ``expires_at`` (not ``ttl_s`` from its start), the request sent again
    changes nothing, and the approval expires once, at or after that instant."""
    dry = DRY_RUN["telegram"]
    target = dry.target()
    async with _mock("telegram") as mock:
        port = free_port()
        config = _config(tmp_path, "telegram", mock.base_url, port, throttle_ms=0)
        config.write_text(config.read_text().replace("run_idle_timeout_s = 4", "run_idle_timeout_s = 120"))
        log = tmp_path / "sidecar.log"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        start = {"seq": 0, "kind": "run.start", "channel": "chat", "target": target.model_dump()}
        ask = {
            "seq": 1,
            "kind": "approval.request",
            "id": "deploy",
            "question": "Deploy?",
            "approvers": ["telegram:user:1"],
            "ttl_s": 20,
        }
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
            with _serve(config, dry.token, log) as first:
                await _ready(client, first, log)
                assert (await client.post("/v1/runs/r1/events", content=_lines(start, ask))).status_code == 200
                asked = (await client.get("/v1/runs/r1/approvals/deploy")).json()
                assert asked["state"] == "pending", asked
                await _until(lambda: any(t.startswith("🔐") for _, t in mock.visible(target.chat_id)), 20, "it")
                first.send_signal(signal.SIGKILL)
                first.wait(10)
            async with _serve_here(config, dry.token) as second:
                await _ready(client, second, log)
                after = (await client.get("/v1/runs/r1/approvals/deploy")).json()
                assert after["expires_at"] == asked["expires_at"], (asked, after)  # not 20 s from the restart
                again = await client.post("/v1/runs/r1/events", content=_lines(ask))
                assert again.status_code == 200 and again.json()["dropped"] == 1, again.text
                assert (await client.get("/v1/runs/r1/approvals/deploy")).json()["expires_at"] == asked["expires_at"]

                async def expired() -> bool:
                    units = (await client.get("/v1/runs/r1/pipeline")).json()["units"]
                    return any(u["kind"] == "approval" for u in units)

                await _until(expired, 60, "the expiry")
                units = [
                    u for u in (await client.get("/v1/runs/r1/pipeline")).json()["units"] if u["kind"] == "approval"
                ]
                assert [(u["decision"], u["approved"]) for u in units] == [("expired", False)]
                assert units[0]["at"] >= asked["expires_at"] - 0.001  # (at is rounded to the millisecond)
