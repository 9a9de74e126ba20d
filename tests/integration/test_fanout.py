"""Fan-out (issue 29, item 1) through the real SDKs (aiogram, slack-sdk, discord.py) to the stateful mocks: one run
to Telegram, Slack and Discord shows its answer once in each place; a place refused or paused by a 429 holds none of
the others; `streamrelay serve` killed -9 mid-run and restarted shows each place's final once."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.common import MockPlatform
from tests.integration.test_durability import TOKEN, _ready, _serve
from tests.ports import free_port

PLATFORMS = ("telegram", "slack", "discord")
FIRST_SEND = {"telegram": "sendMessage", "slack": "chat.postMessage", "discord": "createMessage"}
ANSWER = (
    "Your refund of 49.99 EUR for order A-1029 was approved today.\n\n"
    "It reaches your card within 14 days; you will get an email when it is sent."
)
INGEST = "fanout-ingest-token"


def _targets() -> list[dict[str, Any]]:
    return [{"channel": p, "target": DRY_RUN[p].target().model_dump(exclude_none=True)} for p in PLATFORMS]


def _events(run: str) -> bytes:
    lines: list[dict[str, Any]] = [{"kind": "run.start", "targets": _targets(), "seq": 0}]
    pieces = [ANSWER[i : i + 12] for i in range(0, len(ANSWER), 12)]
    lines += [{"kind": "text", "mode": "delta", "text": p, "seq": i + 1} for i, p in enumerate(pieces)]
    lines.append({"kind": "end", "status": "ok", "seq": len(pieces) + 1})
    return "".join(json.dumps({"run": run, **line}) + "\n" for line in lines).encode()


def _shown(mocks: dict[str, MockPlatform], platform: str) -> list[str]:
    return [text for _, text in mocks[platform].visible(DRY_RUN[platform].private)]


async def _until(check: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@asynccontextmanager
async def _mocks() -> AsyncIterator[dict[str, MockPlatform]]:
    async with AsyncExitStack() as stack:
        mocks: dict[str, MockPlatform] = {}
        for platform in PLATFORMS:
            mock = DRY_RUN[platform].make_mock(False)
            await mock.start()
            stack.push_async_callback(mock.stop)
            mocks[platform] = mock
        yield mocks


@asynccontextmanager
async def _in_process(mocks: dict[str, MockPlatform]) -> AsyncIterator[tuple[Relay, httpx.AsyncClient]]:
    """A relay with one channel per platform (named after it), the sidecar's HTTP ingest, and a client of it."""
    runtimes = {}
    for platform, mock in mocks.items():
        settings = ChannelSettings.model_validate(
            {"platform": platform, "api_base": mock.base_url, "throttle_ms": 0, "typing": False}
        )
        runtimes[platform] = make_runtime(platform, settings, SecretStr(DRY_RUN[platform].token))
    relay = Relay(runtimes, MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST)
    await sidecar.start()
    headers = {"Authorization": f"Bearer {INGEST}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            yield relay, client
    finally:
        await sidecar.stop()
        await relay.close()


@pytest.mark.timeout(120)
async def test_one_run_shows_its_answer_once_on_telegram_slack_and_discord() -> None:
    async with _mocks() as mocks, _in_process(mocks) as (_, client):
        answer = await client.post("/v1/runs/r1/events", content=_events("r1"))
        assert answer.status_code == 200, answer.text
        report = (await client.get("/v1/runs/r1", params={"wait_s": 60})).json()
        assert {p: _shown(mocks, p) for p in PLATFORMS} == {p: [ANSWER] for p in PLATFORMS}
        assert report["done"] and report["status"] == "delivered"
        rows = report["places"]
        assert [(row["channel"], row["status"]) for row in rows] == [(p, "delivered") for p in PLATFORMS]
        for platform, row in zip(PLATFORMS, rows, strict=True):  # each place's ids are what its platform shows
            shown_ids = [str(mid) for mid, _ in mocks[platform].visible(DRY_RUN[platform].private)]
            assert row["message_ids"] == shown_ids


@pytest.mark.timeout(120)
async def test_a_refused_place_and_a_paused_place_hold_none_of_the_others() -> None:
    async with _mocks() as mocks, _in_process(mocks) as (relay, client):
        # Discord refuses the bot for good (403 Missing Access) and Slack pauses it for 90 s (a 429): the
        # answer still reaches Telegram whole, while Slack waits out its retry_after and Discord shows nothing.
        for n in range(1, 20):
            mocks["discord"].add_fault("createMessage", n, {"status": 403, "description": "Missing Access"})
        mocks["slack"].add_fault("chat.postMessage", 1, {"status": 429, "retry_after_s": 90})
        answer = await client.post("/v1/runs/r2/events", content=_events("r2"))
        assert answer.status_code == 200, answer.text
        await _until(lambda: _shown(mocks, "telegram") == [ANSWER], "Telegram's final")
        rows = await _rows(client, "r2")
        while rows["discord"]["status"] == "pending":  # Discord's refusal lands on its own schedule
            await asyncio.sleep(0.02)
            rows = await _rows(client, "r2")
        assert _shown(mocks, "slack") == [] and _shown(mocks, "discord") == []
        assert rows["telegram"]["done"] and rows["telegram"]["status"] == "delivered"
        assert rows["discord"]["done"] and rows["discord"]["status"] == "failed"
        assert not rows["slack"]["done"]  # Slack still waits out its pause: the others did not wait for it
        assert relay.controller("r2") is not None  # the run is open until its last place ends


async def _rows(client: httpx.AsyncClient, run: str) -> dict[str, dict[str, Any]]:
    report = (await client.get(f"/v1/runs/{run}")).json()
    return {row["channel"]: row for row in report["places"]}


def _config(tmp: Path, mocks: dict[str, MockPlatform], port: int) -> Path:
    lines = [
        "[service]",
        f"port = {port}",
        f'ledger = "{tmp / "ledger.sqlite3"}"',
        "run_idle_timeout_s = 4",
        'actions = ""',
    ]
    for platform, mock in mocks.items():
        lines += [
            "",
            f"[channels.{platform}]",
            f'platform = "{platform}"',
            f'token_env = "FANOUT_{platform.upper()}_TOKEN"',
            f'api_base = "{mock.base_url}"',
            'delivery = "preview"',
            "throttle_ms = 200",
            "send_timeout_ms = 20000",  # the hung send is still in flight when the process is killed
            "typing = false",
        ]
        if platform == "telegram":
            lines.append("exclusive_bot = true")  # a send in flight at the kill is found and edited
    path = tmp / "channels.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.timeout(180)
async def test_serve_killed_mid_run_shows_each_place_its_final_once_after_the_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for platform in PLATFORMS:
        monkeypatch.setenv(f"FANOUT_{platform.upper()}_TOKEN", DRY_RUN[platform].token)
    async with _mocks() as mocks:
        mocks["slack"].add_fault("chat.postMessage", 1, "timeout_after_commit")  # stored, then it hangs
        port = free_port()
        config = _config(tmp_path, mocks, port)
        log = tmp_path / "sidecar.log"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        lines = _events("r1").splitlines(keepends=True)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
            with _serve(config, "", log) as first:
                await _ready(client, first, log)
                assert (await client.post("/v1/runs/r1/events", content=b"".join(lines[:3]))).status_code == 200
                await _until(lambda: len(_shown(mocks, "slack")) == 1, "Slack's first send to be stored")
                assert (await client.post("/v1/runs/r1/events", content=b"".join(lines[3:]))).status_code == 200
                first.send_signal(signal.SIGKILL)  # Slack's send is in flight: an intent without an outcome
                first.wait(10)
            with _serve(config, "", log) as second:
                await _ready(client, second, log)
                report = (await client.get("/v1/runs/r1", params={"wait_s": 60})).json()
                again = await client.post("/v1/runs/r1/events", content=_events("r1"))
                assert again.status_code == 200 and again.json()["accepted"] == 0, again.text  # dropped, never 409
    assert {p: _shown(mocks, p) for p in PLATFORMS} == {p: [ANSWER] for p in PLATFORMS}
    assert report["done"] and report["status"] == "delivered", report
    assert [(row["channel"], row["status"], row["uncertain"]) for row in report["places"]] == [
        (p, "delivered", 0) for p in PLATFORMS
    ]
