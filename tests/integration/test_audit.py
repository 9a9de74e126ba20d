"""The audit (docs/audit.md): a run delivered to Slack, Discord and Matrix, then a message deleted in the mock by
someone else (its control API, as a person or a moderator would): ``GET /v1/runs/{run}/audit`` reads each message back
as the platform serves it (Slack conversations.history, Discord Get Channel Message, Matrix GET event) and reports that
one ``gone``, the others as delivered. Telegram cannot be read back: the audit says so and concludes nothing."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from streamrelay.adapters.ops import ServiceMetrics
from streamrelay.app.cli import app
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.app.serving import sample_audits
from streamrelay.config.settings import ChannelSettings, ServiceSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from tests.integration.conftest import INGEST_TOKEN

BLOCKS = ("The refund was approved today.", "It reaches your card within 14 days.", "Anything else?")


TEAMS_GRAPH = {
    "settle_with_graph": True,
    "graph_tenant": "00000000-0000-4000-8000-00000000a7e1",
    "graph_team": "00000000-0000-4000-8000-0000000000ea",  # the team of the dry run's channel
}


async def _delivered(
    platform: str, extra: dict[str, Any] | None = None, *, group: bool = False
) -> tuple[Any, Relay, Sidecar, httpx.AsyncClient, list[tuple[int | str, str]]]:
    dry = DRY_RUN[platform]
    mock = dry.make_mock(False)
    api = await mock.start()
    settings = ChannelSettings.model_validate(
        {
            "platform": platform,
            "api_base": api,
            "delivery": "block",
            "throttle_ms": 0,
            "typing": False,
            "coalesce": {"min_chars": 1, "max_chars": 1000, "idle_ms": 0},
            **(extra or {}),
        }
    )
    relay = Relay({"c": make_runtime("c", settings, SecretStr(dry.token))}, MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    target = dry.target(native=False, group=group)
    events: list[dict[str, Any]] = [
        {"kind": "run.start", "channel": "c", "target": target.model_dump(exclude_none=True)}
    ]
    for block in BLOCKS:
        events += [{"kind": "text", "text": block}, {"kind": "block_end"}]
    events.append({"kind": "end", "status": "ok"})
    client = httpx.AsyncClient(base_url=sidecar.url, headers={"Authorization": f"Bearer {INGEST_TOKEN}"}, timeout=30)
    answer = await client.post("/v1/runs/a1/events", content="".join(json.dumps(e) + "\n" for e in events))
    assert answer.status_code == 200, answer.text
    report = (await client.get("/v1/runs/a1", params={"wait_s": 20})).json()
    assert report["status"] == "delivered", report
    shown = list(mock.visible(target.chat_id))
    assert [text for _, text in shown] == list(BLOCKS)
    return mock, relay, sidecar, client, shown


@pytest.mark.parametrize("platform", ["slack", "discord", "matrix", "teams"])
async def test_a_message_deleted_after_delivery_is_reported_gone(platform: str) -> None:
    teams = platform == "teams"  # read through Microsoft Graph, in a channel Graph can name
    mock, relay, sidecar, client, shown = await _delivered(platform, TEAMS_GRAPH if teams else None, group=teams)
    try:
        before = (await client.get("/v1/runs/a1/audit")).json()
        assert before["readable"] is True and before["drift"] == 0
        assert [m["verdict"] for m in before["messages"]] == ["as_delivered"] * len(BLOCKS)
        assert [m["message_id"] for m in before["messages"]] == [str(mid) for mid, _ in shown]

        deleted = str(shown[1][0])
        chat = DRY_RUN[platform].target(native=False, group=teams).chat_id
        async with httpx.AsyncClient() as control:
            removed = await control.post(f"{mock.control_url}/remove", json={"chat_id": chat, "message_id": deleted})
            assert removed.status_code == 200, removed.text
        assert [text for _, text in mock.visible(chat)] == [BLOCKS[0], BLOCKS[2]]

        after = (await client.get("/v1/runs/a1/audit")).json()
        assert after["drift"] == 1
        verdicts = {m["message_id"]: m["verdict"] for m in after["messages"]}
        assert verdicts == {str(shown[0][0]): "as_delivered", deleted: "gone", str(shown[2][0]): "as_delivered"}
        # the same from the command line: the table, and exit 3 for the drift
        env = {"STREAMRELAY_TOKEN": INGEST_TOKEN, "COLUMNS": "200", "NO_COLOR": "1"}
        cli = await asyncio.to_thread(CliRunner().invoke, app, ["audit", "a1", "--url", sidecar.url], env=env)
        assert cli.exit_code == 3, cli.output
        assert "gone" in cli.output and deleted in cli.output
        reads = {
            "slack": "conversations.history",
            "discord": "getChannelMessage",
            "matrix": "get_event",
            "teams": "getChatMessage",
        }[platform]
        assert sum(c.method == reads for c in mock.calls) == 3 * len(BLOCKS)  # read as the platform serves them

        assert (await client.get("/v1/runs/nope/audit")).status_code == 404
        assert (await client.get("/v1/runs/a1/audit", headers={"Authorization": "Bearer wrong"})).status_code == 401
    finally:
        await client.aclose()
        await sidecar.stop()
        await relay.close()
        await mock.stop()


async def test_telegram_cannot_be_read_back_and_the_audit_says_so() -> None:
    mock, relay, sidecar, client, _ = await _delivered("telegram")
    try:
        calls = len(mock.calls)
        audit = (await client.get("/v1/runs/a1/audit")).json()
        assert audit["readable"] is False and audit["messages"] == [] and audit["drift"] == 0
        assert "no method that reads a message" in audit["note"]
        assert len(mock.calls) == calls  # nothing posted, nothing read: forwardMessage would post
    finally:
        await client.aclose()
        await sidecar.stop()
        await relay.close()
        await mock.stop()


@pytest.mark.parametrize("platform", ["whatsapp", "teams"])
async def test_whatsapp_and_teams_without_graph_cannot_be_read_back_and_say_why(platform: str) -> None:
    mock, relay, sidecar, client, _ = await _delivered(platform)
    try:
        calls = len(mock.calls)
        audit = (await client.get("/v1/runs/a1/audit")).json()
        assert audit["readable"] is False and audit["messages"] == [] and audit["drift"] == 0
        why = {"whatsapp": "no call that reads a sent message", "teams": "configure settle_with_graph"}[platform]
        assert why in audit["note"]
        assert len(mock.calls) == calls  # nothing read
    finally:
        await client.aclose()
        await sidecar.stop()
        await relay.close()
        await mock.stop()


async def test_the_sampled_background_audit_reports_a_message_deleted_after_delivery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``[service] audit_sample = 1`` (every delivered run), ``audit_after_s = 0``: the run's first message is
    deleted in the mock once shown (a moderator), the run ends, and the background audit (serve's wiring:
    :func:`app.serving.sample_audits`, its ``keep`` task) reads every message back by itself: a warning line, the drift
    counter by platform and kind on /metrics, and the run's report carries the audit."""
    dry = DRY_RUN["slack"]
    mock: Any = dry.make_mock(False)  # its control API's URL too
    api = await mock.start()
    settings = ChannelSettings.model_validate(
        {
            "platform": "slack",
            "api_base": api,
            "delivery": "block",
            "throttle_ms": 0,
            "typing": False,
            "coalesce": {"min_chars": 1, "max_chars": 1000, "idle_ms": 0},
        }
    )
    metrics = ServiceMetrics("test")
    relay = Relay({"c": make_runtime("c", settings, SecretStr(dry.token))}, MemoryLedger(), MonotonicClock())
    sampler = sample_audits(relay, ServiceSettings(audit_sample=1.0, audit_after_s=0), metrics)
    assert sampler is not None and relay.audits is sampler
    auditing = asyncio.create_task(sampler.keep())
    sidecar = Sidecar(relay, token=INGEST_TOKEN, metrics=metrics)
    await sidecar.start()
    target = dry.target(native=False)
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            start = {"kind": "run.start", "channel": "c", "target": target.model_dump(exclude_none=True)}
            first: list[dict[str, Any]] = [start, {"kind": "text", "text": BLOCKS[0]}, {"kind": "block_end"}]
            assert (await client.post("/v1/runs/b1/events", content=_ndjson(first))).status_code == 200
            for _ in range(500):
                if mock.visible(target.chat_id):
                    break
                await asyncio.sleep(0.01)
            ((deleted, _),) = mock.visible(target.chat_id)
            async with httpx.AsyncClient() as control:
                body = {"chat_id": target.chat_id, "message_id": str(deleted)}
                assert (await control.post(f"{mock.control_url}/remove", json=body)).status_code == 200
            rest: list[dict[str, Any]] = []
            for block in BLOCKS[1:]:
                rest += [{"kind": "text", "text": block}, {"kind": "block_end"}]
            rest.append({"kind": "end", "status": "ok"})
            with caplog.at_level(logging.WARNING, logger="streamrelay.audit"):
                assert (await client.post("/v1/runs/b1/events", content=_ndjson(rest))).status_code == 200
                report = (await client.get("/v1/runs/b1", params={"wait_s": 20})).json()
                assert report["status"] == "delivered"  # the report of the end: it did not know yet
                async with asyncio.timeout(20):
                    await sampler.wait_audited(1)
            report = (await client.get("/v1/runs/b1")).json()
            audit = report["audit"]
            assert audit["run"] == "b1" and audit["readable"] is True and audit["drift"] == 1
            assert {m["message_id"]: m["verdict"] for m in audit["messages"]}[str(deleted)] == "gone"
            assert sorted(m["verdict"] for m in audit["messages"]) == ["as_delivered", "as_delivered", "gone"]
            warned = [r.getMessage() for r in caplog.records if r.name == "streamrelay.audit"]
            assert len(warned) == 1 and "run b1" in warned[0] and "1 message(s) gone" in warned[0], warned
            scraped = (await client.get("/metrics")).text
            assert 'streamrelay_audit_drift_total{kind="gone",platform="slack"} 1.0' in scraped
    finally:
        auditing.cancel()
        await sidecar.stop()
        await relay.close()
        await mock.stop()


def _ndjson(events: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)
