"""A 429 whose ``retry_after`` is past the channel's ``max_retry_after_s``, on every platform, over real HTTP to its
mock through its real SDK: the platform refusing for now. The part is reported failed at once with the wait it
asked and the cap (never waited for: a Matrix ``retry_after_ms`` of 10^9 held a chat 11.5 days with its run
pending and no error), it is on the desk (``GET /v1/deliveries``), and the conversation goes on: the next part
there is delivered."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.app.chaos.plan import CREATE
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import Target
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.desk import Desk
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.common import MockPlatform
from tests.integration.conftest import INGEST_TOKEN

pytestmark = pytest.mark.timeout(60)

PLATFORMS = ("telegram", "slack", "discord", "matrix", "whatsapp")
ELEVEN_DAYS_S = 1e9 / 1000
"""A Matrix ``retry_after_ms`` of 10^9, in seconds (11.5 days), scripted on each platform's create."""


@dataclass
class CapStack:
    mock: MockPlatform
    target: Target
    client: httpx.AsyncClient
    platform: str


async def _stack(platform: str, **channel: Any) -> AsyncIterator[CapStack]:
    dry = DRY_RUN[platform]
    mock = dry.make_mock(False)
    api = await mock.start()
    settings = ChannelSettings.model_validate(
        {"platform": platform, "api_base": api, "delivery": "final", "format": "plain", "throttle_ms": 0, **channel}
    )
    ledger = MemoryLedger()
    relay = Relay({"c": make_runtime("c", settings, SecretStr(dry.token))}, ledger, MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN, desk=Desk(ledger, ledger, relay.channels, MonotonicClock()))
    await sidecar.start()
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            yield CapStack(mock, dry.target(), client, platform)
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()


def _refuse_the_first_create(stack: CapStack) -> None:
    stack.mock.add_fault(CREATE[stack.platform], 1, {"status": 429, "retry_after_s": ELEVEN_DAYS_S})


async def _ended(stack: CapStack, run: str, text: str) -> dict[str, Any]:
    target = stack.target.model_dump(exclude_none=True)
    events: list[dict[str, Any]] = [
        {"kind": "run.start", "channel": "c", "target": target},
        {"kind": "text", "mode": "delta", "text": text},
        {"kind": "end", "status": "ok"},
    ]
    body = "".join(json.dumps({"run": run, **e}) + "\n" for e in events).encode()
    answer = await stack.client.post(f"/v1/runs/{run}/events", content=body)
    assert answer.status_code == 200, answer.text
    report = await stack.client.get(f"/v1/runs/{run}", params={"wait_s": "20"})
    assert report.status_code == 200, report.text
    result: dict[str, Any] = report.json()
    assert result["done"], f"run {run} still pending after 20 s: the 429's wait was obeyed ({result})"
    return result


def _shown(stack: CapStack) -> list[str]:
    return [text for _, text in stack.mock.visible(stack.target.chat_id)]


@pytest.fixture(params=PLATFORMS)
async def stack(request: pytest.FixtureRequest) -> AsyncIterator[CapStack]:
    async for each in _stack(request.param):
        yield each


async def test_a_wait_past_the_cap_fails_the_part_at_once_puts_it_on_the_desk_and_the_chat_goes_on(
    stack: CapStack,
) -> None:
    _refuse_the_first_create(stack)
    report = await _ended(stack, "refused", "The answer: forty-two.")
    assert (report["status"], report["failed"], report["confirmed"]) == ("failed", 1, 0), report
    [part] = [p for p in report["parts"] if p["state"] == "failed"]
    assert "asked to wait 1e+06 s" in part["error"] and "max_retry_after_s = 120 s" in part["error"], part

    answer = await stack.client.get("/v1/deliveries")
    assert answer.status_code == 200, answer.text
    [row] = answer.json()["deliveries"]
    assert (row["run"], row["state"], row["chars"]) == ("refused", "failed", len("The answer: forty-two."))
    assert "max_retry_after_s" in row["error"], row

    after = await _ended(stack, "after", "The next answer is not held for 11.5 days.")
    assert (after["status"], after["confirmed"]) == ("delivered", 1), after
    assert _shown(stack) == ["The next answer is not held for 11.5 days."]
