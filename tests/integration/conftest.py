"""Fixtures that start real servers on 127.0.0.1: the mock Bot API and the sidecar (uvicorn)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import Ledger, MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram

BOT_TOKEN = "123456:INTEGRATION-test-token"
INGEST_TOKEN = "ingest-secret-for-tests"


@dataclass
class Stack:
    mock: MockTelegram
    relay: Relay
    sidecar: Sidecar
    client: httpx.AsyncClient


async def start_stack(
    ledger: Ledger, *, max_body_bytes: int = 64 * 1024, max_line_bytes: int = 8 * 1024, **channel: object
) -> tuple[MockTelegram, Relay, Sidecar]:
    mock = MockTelegram(rate_limits=True)
    api = await mock.start()
    settings = ChannelSettings.model_validate({"platform": "telegram", "api_base": api, "throttle_ms": 0, **channel})
    runtime = make_runtime("telegram", settings, SecretStr(BOT_TOKEN))
    relay = Relay({"telegram": runtime}, ledger, MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN, max_body_bytes=max_body_bytes, max_line_bytes=max_line_bytes)
    await sidecar.start()
    return mock, relay, sidecar


async def stop_stack(mock: MockTelegram, relay: Relay, sidecar: Sidecar) -> None:
    await sidecar.stop()
    await relay.close()
    await mock.stop()


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    mock, relay, sidecar = await start_stack(MemoryLedger())
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
        yield Stack(mock, relay, sidecar, client)
    await stop_stack(mock, relay, sidecar)
