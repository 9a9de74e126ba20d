"""A replica listens first, as one process does (issue 25): with a Telegram channel, ``serve`` on Redis answers
``/healthz`` while aiogram is still being imported (held here until the test lets it go, so the window is certain),
``/readyz`` says 503 "loading channels: telegram", ingest answers 503 with ``Retry-After``; once the import is let go
the replica becomes ready and a run sent through :class:`app.client.RelayClient` is delivered whole."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.adapters.redis.client import Redis
from streamrelay.app.client import RelayClient
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.mocks.telegram import MockTelegram
from tests.contention import wait_scale
from tests.ports import free_port

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "replica-first-token"

SERVE = """
import os, sys, time
from pathlib import Path
import streamrelay.app.replicas.serving as replica

GATE = os.environ["LISTEN_FIRST_GATE"]
real_load = replica.load_platforms


def held_load(platforms):
    while not Path(GATE).exists():  # the test lets the SDK import begin
        time.sleep(0.02)
    real_load(platforms)


replica.load_platforms = held_load
from streamrelay.app.cli import main
sys.argv = ["streamrelay", "serve", "--config", sys.argv[1], "--port", sys.argv[2]]
main()
"""


def _config(tmp: Path, api_base: str) -> Path:
    path = tmp / "channels.toml"
    service = '[service]\nbackend = "redis"\npartitions = 2\nlease_ttl_s = 2.0\ndrain_s = 1\nactions = ""\n'
    channel = f'[channels.chat]\nplatform = "telegram"\ntoken_env = "FIRST_BOT_TOKEN"\napi_base = "{api_base}"\n'
    path.write_text(service + "\n" + channel + "throttle_ms = 100\ntyping = false\n")
    return path


async def _answer(http: httpx.AsyncClient, url: str, proc: subprocess.Popen[bytes], log: Path) -> httpx.Response:
    guard_s = 60 * wait_scale()  # a hang guard for an idle machine, scaled by the load
    deadline = time.monotonic() + guard_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            return await http.get(url)
        except httpx.TransportError:
            await asyncio.sleep(0.05)
    raise AssertionError(f"{url} did not answer in {guard_s:.0f} s")


async def test_a_replica_answers_healthz_while_its_channels_load_then_delivers(
    tmp_path: Path, redis_url: str, client: Redis
) -> None:
    dry = DRY_RUN["telegram"]
    mock = MockTelegram()
    await mock.start()
    port, gate, log = free_port(), tmp_path / "gate", tmp_path / "replica.log"
    env = {
        **os.environ,
        "STREAMRELAY_TOKEN": TOKEN,
        "FIRST_BOT_TOKEN": dry.token,
        "STREAMRELAY_SERVICE__REDIS_URL": redis_url,
        "LISTEN_FIRST_GATE": str(gate),
    }
    config = _config(tmp_path, mock.base_url)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(config), str(port)], cwd=ROOT, env=env, stdout=out, stderr=out
        )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            assert (await _answer(http, base + "/healthz", proc, log)).status_code == 200
            ready = await http.get(base + "/readyz")
            assert ready.status_code == 503 and "loading channels: chat" in ready.json()["reason"]
            line = b'{"run": "early", "kind": "run.start", "channel": "chat", "target": {"chat_id": 7}}\n'
            held = await http.post(
                base + "/v1/runs/early/events", content=line, headers={"Authorization": f"Bearer {TOKEN}"}
            )
            assert held.status_code == 503 and held.headers["Retry-After"] == "1"
            gate.touch()
            deadline = time.monotonic() + 60 * wait_scale()  # the channels load: a hang guard, scaled by the load
            while (await _answer(http, base + "/readyz", proc, log)).status_code != 200:
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                await asyncio.sleep(0.1)
        async with RelayClient(base, TOKEN) as relay:
            lines: list[dict[str, Any]] = [
                {"kind": "run.start", "channel": "chat", "target": {"chat_id": 7}},
                {"kind": "text", "text": "Sent once the replica was ready."},
                {"kind": "end"},
            ]
            await relay.send("first", lines)
            report = await relay.report("first", wait_s=30)
        assert report.status == "delivered", report
        assert [m.text for m in mock.messages(7)] == ["Sent once the replica was ready."]
        text = log.read_text()
        assert text.index("listening on") < text.index("ready on"), text[-3000:]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        await mock.stop()
