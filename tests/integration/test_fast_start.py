"""A fast start (issue 14): platform SDKs are imported only for enabled channels, and ``serve`` listens before it
has imported them.

- Importing the CLI, and a whole ``serve`` with only the web channel up to ready, import none of aiogram, slack_sdk
  and discord (each checked in a fresh interpreter's ``sys.modules``).
- With Telegram enabled, ``serve`` answers ``/healthz`` while aiogram is still being imported (held here until the
  test lets it go, so the window is certain), ``/readyz`` says 503 "loading channels: telegram", and a run sent
  meanwhile through :class:`app.client.RelayClient` (answered 503 + Retry-After, sent again) is delivered whole
  once the channel is built.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.app.client import RelayClient
from streamrelay.mocks.telegram import MockTelegram
from tests.contention import wait_scale
from tests.ports import free_port

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
INGEST_TOKEN = "fast-start-ingest-token"
BOT_TOKEN = "123456789:AAE-fast_Start-Token_0123456789abcd"
SDKS = ("aiogram", "slack_sdk", "discord")

SERVE = """
import asyncio, json, os, sys, time
from pathlib import Path
import streamrelay.app.serving as serving

GATE = os.environ.get("FAST_START_GATE")
real_load = serving.load_platforms


def held_load(platforms):
    while GATE and not Path(GATE).exists():  # the test lets the SDK import begin
        time.sleep(0.02)
    real_load(platforms)


serving.load_platforms = held_load


async def main():
    await serving.serve(Path(sys.argv[1]))
    print(json.dumps(sorted(m for m in ("aiogram", "slack_sdk", "discord") if m in sys.modules)), flush=True)


asyncio.run(main())
"""


def _loaded_sdks(code: str) -> list[str]:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            f"{code}\nimport json, sys\nprint(json.dumps(sorted(set({SDKS!r}) & set(sys.modules))))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded: list[str] = json.loads(out.stdout.splitlines()[-1])
    return loaded


def test_importing_the_cli_the_service_the_demo_and_the_runners_imports_no_platform_sdk() -> None:
    assert (
        _loaded_sdks(
            "import streamrelay.app.cli, streamrelay.app.serving, streamrelay.app.service, streamrelay.app.dry_run, "
            "streamrelay.app.demo, streamrelay.app.cases, streamrelay.app.chaos"
        )
        == []
    )


def _config(tmp: Path, port: int, *, telegram_api: str | None) -> Path:
    lines = [
        "[service]",
        f"port = {port}",
        f'ledger = "{tmp / "ledger.sqlite3"}"',
        'actions = ""',
        'log_format = "json"',
        "",
        "[channels.web]",
        'platform = "web"',
    ]
    if telegram_api is not None:
        lines += [
            "",
            "[channels.telegram]",
            'platform = "telegram"',
            'token_env = "FAST_START_BOT_TOKEN"',
            f'api_base = "{telegram_api}"',
            "throttle_ms = 100",
        ]
    config = tmp / "channels.toml"
    config.write_text("\n".join(lines) + "\n")
    return config


@contextmanager
def _served(tmp: Path, config: Path, gate: Path | None = None) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "STREAMRELAY_TOKEN": INGEST_TOKEN, "FAST_START_BOT_TOKEN": BOT_TOKEN}
    if gate is not None:
        env["FAST_START_GATE"] = str(gate)
    with (tmp / "serve.log").open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(config)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


@asynccontextmanager
async def _client(port: int) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        yield client


async def _answer(client: httpx.AsyncClient, path: str, proc: subprocess.Popen[str], log: Path) -> httpx.Response:
    """The first answer of ``path`` (the listener may not be up yet)."""
    timeout_s = 60 * wait_scale()  # a hang guard, scaled as the timeouts are
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            return await client.get(path)
        except httpx.TransportError:
            await asyncio.sleep(0.05)
    raise AssertionError(f"{path} did not answer in {timeout_s:g} s")


async def _ready(client: httpx.AsyncClient, proc: subprocess.Popen[str], log: Path) -> None:
    timeout_s = 60 * wait_scale()  # a hang guard, scaled as the timeouts are
    deadline = time.monotonic() + timeout_s
    while (await _answer(client, "/readyz", proc, log)).status_code != 200:
        assert time.monotonic() < deadline, f"not ready in {timeout_s:g} s"
        await asyncio.sleep(0.05)


def _stopped(proc: subprocess.Popen[str]) -> list[str]:
    """SIGTERM, exit 0, and the SDKs the process had imported (it prints them last)."""
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30 * wait_scale())
    assert proc.returncode == 0
    loaded: list[str] = json.loads(out.splitlines()[-1])
    return loaded


async def test_serve_with_only_the_web_channel_imports_no_platform_sdk(tmp_path: Path) -> None:
    port = free_port()
    config = _config(tmp_path, port, telegram_api=None)
    with _served(tmp_path, config) as proc:
        async with _client(port) as client:
            await _ready(client, proc, tmp_path / "serve.log")
        assert _stopped(proc) == []


@pytest.fixture
async def mock() -> AsyncIterator[MockTelegram]:
    server = MockTelegram(rate_limits=True)
    await server.start()
    yield server
    await server.stop()


async def test_serve_listens_while_telegram_loads_and_a_run_sent_meanwhile_is_delivered(
    tmp_path: Path, mock: MockTelegram
) -> None:
    port, gate = free_port(), tmp_path / "gate"
    log = tmp_path / "serve.log"
    config = _config(tmp_path, port, telegram_api=mock.base_url)
    with _served(tmp_path, config, gate) as proc:
        async with _client(port) as client:
            assert (await _answer(client, "/healthz", proc, log)).status_code == 200
            ready = await client.get("/readyz")
            assert ready.status_code == 503
            assert "loading channels: telegram" in ready.json()["reason"]
            async with RelayClient(f"http://127.0.0.1:{port}", INGEST_TOKEN) as relay:
                start: dict[str, Any] = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 42}}
                lines: list[dict[str, Any]] = [
                    start,
                    {"kind": "text", "text": "Sent while aiogram was loading."},
                    {"kind": "end"},
                ]
                sending = asyncio.create_task(relay.send("early", lines))
                await asyncio.sleep(1.5)  # answered 503 + Retry-After at least once: still waiting
                assert not sending.done()
                assert (await client.get("/readyz")).status_code == 503
                gate.touch()  # now aiogram loads: ~6 CPU-seconds, over 60 s at load 20 on 2 cores (hang guards scaled)
                assert await asyncio.wait_for(sending, 60 * wait_scale()) == 3
                report = await relay.report("early", wait_s=min(20 * wait_scale(), 600))
            assert report.status == "delivered", report
            assert (await client.get("/readyz")).status_code == 200
        assert [text for _, text in mock.visible(42)] == ["Sent while aiogram was loading."]
        assert "aiogram" in _stopped(proc)
