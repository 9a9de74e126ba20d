"""`streamrelay serve` as an operator runs it, against the mock Bot API: every output line is JSON with one line per
platform call and no token in any form even at DEBUG; SIGTERM drains an active run (readiness says so, the run's
lines are still taken, its final is delivered) before the process exits 0; a second SIGTERM stops at once."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from streamrelay.mocks.telegram import MockTelegram
from tests.integration.served import Served, serve_process
from tests.ports import free_port as _free_port

pytestmark = pytest.mark.timeout(90)

INGEST_TOKEN = "serve-process-ingest-token"
BOT_TOKEN = "123456789:AAE-serve_Secret-Token_0123456789abcd"
METRICS_TOKEN = "serve-process-metrics-token"


@pytest.fixture
async def mock() -> AsyncIterator[MockTelegram]:
    server = MockTelegram(rate_limits=True)
    await server.start()
    yield server
    await server.stop()


@asynccontextmanager
async def serve(tmp: Path, api: str, *extra: str, drain_s: float = 20) -> AsyncIterator[Served]:
    port = _free_port()
    config = tmp / "channels.toml"
    config.write_text(
        "\n".join(
            [
                "[service]",
                f"port = {port}",
                f'ledger = "{tmp / "ledger.sqlite3"}"',
                'actions = ""',
                f"drain_s = {drain_s}",
                "",
                "[channels.telegram]",
                'platform = "telegram"',
                'token_env = "SERVE_TEST_BOT_TOKEN"',
                f'api_base = "{api}"',
                "throttle_ms = 100",
                "typing = true",  # a typing call is logged at DEBUG
            ]
        )
    )
    env = {
        **os.environ,
        "STREAMRELAY_TOKEN": INGEST_TOKEN,
        "STREAMRELAY_METRICS_TOKEN": METRICS_TOKEN,
        "SERVE_TEST_BOT_TOKEN": BOT_TOKEN,
    }
    async with serve_process(config, port, env, "--log-format", "json", *extra, token=INGEST_TOKEN) as served:
        yield served


START = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 42}}


async def test_debug_logs_are_json_with_a_line_per_call_and_never_a_token(tmp_path: Path, mock: MockTelegram) -> None:
    mock.add_fault("editMessageText", 1, {"status": 429, "retry_after_s": 1})
    async with serve(tmp_path, mock.base_url, "--log-level", "debug") as served:
        await served.ready()
        assert (await served.post("r1", START, {"kind": "text", "text": "Hello"})).status_code == 200
        await asyncio.sleep(0.5)
        assert (await served.post("r1", {"kind": "text", "text": " world"}, {"kind": "end"})).status_code == 200
        report = await served.client.get(
            "/v1/runs/r1", params={"wait_s": 20}, headers={"Authorization": f"Bearer {INGEST_TOKEN}"}
        )
        assert report.json()["status"] == "delivered"
        watch = await served.client.get("/v1/runs/r1/watch", headers={"Authorization": f"Bearer {INGEST_TOKEN}"})
        read_token = watch.json()["token"]
        assert (await served.client.get(watch.json()["url"])).status_code == 200
        metrics = await served.client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        assert 'streamrelay_rate_limited_total{channel="telegram",method="edit"' in metrics.text
        served.proc.send_signal(signal.SIGTERM)
        assert await served.exit_code(30) == 0
        output = served.log.read_text()
        lines = served.lines()  # every line parses: JSON only, nothing printed around the logger
    calls = [line for line in lines if line["logger"] == "streamrelay.calls" and line["method"] != "typing"]
    assert [(c["method"], c["outcome"]) for c in calls][:3] == [
        ("send", "ok"),
        ("edit", "rate_limited"),
        ("edit", "ok"),
    ]
    assert all(c["run"] == "r1" and c["chat"] == "42" for c in calls)
    assert any(line["level"] == "debug" and line.get("method") == "typing" for line in lines)
    for secret in (BOT_TOKEN, BOT_TOKEN.partition(":")[2], INGEST_TOKEN, METRICS_TOKEN, read_token):
        assert secret not in output, f"{secret[:6]}… is in the output"


async def test_sigterm_drains_an_active_run_then_exits_and_a_second_stops_at_once(
    tmp_path: Path, mock: MockTelegram
) -> None:
    async with serve(tmp_path, mock.base_url) as served:
        await served.ready()
        assert (await served.post("r2", START, {"kind": "text", "text": "Half of the answer"})).status_code == 200
        served.proc.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.3)
        ready = await served.client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["state"] == "draining", ready.text
        assert (
            await served.post("r2", {"kind": "text", "text": ", and the rest."}, {"kind": "end"})
        ).status_code == 200
        assert await served.exit_code(20) == 0
        assert [text for _, text in mock.visible(42)] == ["Half of the answer, and the rest."]
        events = [line["event"] for line in served.lines()]
        assert any("draining 1 active runs" in event for event in events) and events[-1] == "stopped"

    (tmp_path / "again").mkdir()
    async with serve(tmp_path / "again", mock.base_url) as served:
        await served.ready()
        assert (await served.post("r3", {**START, "target": {"chat_id": 43}}, {"kind": "text", "text": "x"})).is_success
        served.proc.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.3)
        served.proc.send_signal(signal.SIGTERM)  # the agent is gone: do not wait 20 s for it
        assert await served.exit_code(10) == 0
        assert any("resume from the journal" in line["event"] for line in served.lines())


async def test_a_bool_or_float_message_index_is_refused_alone_and_the_run_is_delivered(
    tmp_path: Path, mock: MockTelegram
) -> None:
    """``"message": true`` was message 1 (lax coercion: the chat showed "there\\n\\nHello"): now that line is refused
    with its field named, like any line of a wrong type, and the batch's other lines are taken."""
    async with serve(tmp_path, mock.base_url) as served:
        await served.ready()
        answer = await served.post(
            "r4",
            START,
            {"kind": "text", "text": "Hello ", "message": True},
            {"kind": "text", "text": "there"},
            {"kind": "text", "text": " again", "message": 1.0},
            {"kind": "text", "text": " and again", "message": "1"},
            {"kind": "text", "text": "!", "message": 0},
            {"kind": "end"},
        )
        refused = "bad 'text' event: message: Input should be a valid integer"
        assert answer.status_code == 400, answer.text
        assert answer.json() == {
            "error": f"line 2: {refused}",
            "accepted": 4,
            "rejected": [{"line": 2, "error": refused}, {"line": 4, "error": refused}, {"line": 5, "error": refused}],
        }
        report = await served.client.get(
            "/v1/runs/r4", params={"wait_s": 20}, headers={"Authorization": f"Bearer {INGEST_TOKEN}"}
        )
        assert report.json()["status"] == "delivered"
        assert [text for _, text in mock.visible(42)] == ["there!"]
