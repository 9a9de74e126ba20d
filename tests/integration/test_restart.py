"""Exactly once across a restart: the SQLite ledger knows which messages exist, so a replayed run edits
them instead of sending them again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from pydantic import SecretStr

from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import BOT_TOKEN, INGEST_TOKEN


async def _sidecar(api: str, ledger: SqliteLedger) -> tuple[Relay, Sidecar]:
    settings = ChannelSettings.model_validate(
        {
            "platform": "telegram",
            "api_base": api,
            "throttle_ms": 0,
            "delivery": "block",
            "coalesce": {"min_chars": 1, "max_chars": 4000, "idle_ms": 0},
        }
    )
    runtime = make_runtime("telegram", settings, SecretStr(BOT_TOKEN))
    relay = Relay({"telegram": runtime}, ledger, MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    return relay, sidecar


def _lines(*objs: dict[str, object]) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objs).encode()


async def test_replay_after_restart_sends_nothing_twice(tmp_path: Path) -> None:
    events = [
        {"seq": 1, "kind": "run.start", "channel": "telegram", "target": {"chat_id": 9}},
        {"seq": 2, "kind": "text", "text": "First block."},
        {"seq": 3, "kind": "block_end"},
        {"seq": 4, "kind": "text", "text": "Second block."},
        {"seq": 5, "kind": "block_end"},
    ]
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    async with MockTelegram() as mock:
        ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
        relay, sidecar = await _sidecar(mock.base_url, ledger)
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers) as client:
            assert (await client.post("/v1/runs/r/events", content=_lines(*events))).status_code == 200
            for _ in range(100):
                if len(mock.visible(9)) == 2:
                    break
                await asyncio.sleep(0.02)
        # the process dies before the run ends
        await sidecar.stop()
        await relay.close()
        await ledger.close()
        assert [t for _, t in mock.visible(9)] == ["First block.", "Second block."]

        ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
        relay, sidecar = await _sidecar(mock.base_url, ledger)
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers) as client:
            # the runtime retries the whole run, then finishes it
            replay = [
                *events,
                {"seq": 6, "kind": "text", "text": "Third."},
                {"seq": 7, "kind": "end", "status": "ok"},
            ]
            assert (await client.post("/v1/runs/r/events", content=_lines(*replay))).status_code == 200
            report = (await client.get("/v1/runs/r", params={"wait_s": 10})).json()
        await sidecar.stop()
        await relay.close()
        await ledger.close()
        assert [t for _, t in mock.visible(9)] == ["First block.", "Second block.", "Third."]
        assert sum(c.method == "sendMessage" for c in mock.calls) == 3
        assert report["status"] == "delivered"
        assert report["confirmed"] == 3
