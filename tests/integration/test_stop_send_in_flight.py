"""Chaos finding (issue 15, ``streamrelay chaos --runs 60 --seed 7``, run chaos-7-00032, Slack block mode): a stop
that lands while an answer part's create is between its ledger intent and its platform call shows the part and
deletes it a moment later (chat.postMessage, then chat.delete 18 ms after; the report calls the part ``skipped``).

Why: :meth:`core.delivery.slotbook.SlotBook.drop_unsent` (the stop: "nothing more of the answer") empties every
answer part with no message id and no pending create, and a create's ``slot.pending`` is set only after
``await ledger.record_intent(...)`` (core/delivery/reconciler.py ``_perform``); the create already planned is then
sent with its text, and the emptied part's message is deleted. What the person saw is taken back (docs/stop.md: the
text shown so far stays). Now ``slot.pending`` is set before the intent is written: a create under way is kept by a
stop like one waiting for the platform's answer, and what it shows stays.

Reproduced here by holding the first create's ledger intent until the stop is taken."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from pydantic import SecretStr

from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.ports import PendingSend
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import SlotRole
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.stage import STOPPED_NOTICE
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import INGEST_TOKEN

CHAT = 5


class _HeldLedger(MemoryLedger):
    """A ledger whose first answer create's intent is written only once ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def record_intent(
        self, run: str, slot: int, role: SlotRole, op: str, text: str, pending: PendingSend | None = None
    ) -> int:
        if pending is not None and role is SlotRole.ANSWER and not self.held.is_set():
            self.held.set()
            await self.release.wait()
        return await super().record_intent(run, slot, role, op, text, pending)


def _lines(*objs: dict[str, Any]) -> bytes:
    return "".join(json.dumps(o) + "\n" for o in objs).encode()


async def test_a_stop_during_a_creates_intent_never_takes_back_what_was_shown() -> None:
    ledger = _HeldLedger()
    async with MockTelegram() as mock:
        settings = ChannelSettings.model_validate(
            {"platform": "telegram", "api_base": mock.base_url, "throttle_ms": 0, "delivery": "block"}
        )
        runtime = make_runtime("telegram", settings, SecretStr("123456:STOP-in-flight-token"))
        relay = Relay({"telegram": runtime}, ledger, MonotonicClock())
        sidecar = Sidecar(relay, token=INGEST_TOKEN)
        await sidecar.start()
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        try:
            async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
                start = {"seq": 1, "kind": "run.start", "channel": "telegram", "target": {"chat_id": CHAT}}
                text = {"seq": 2, "kind": "text", "text": "A paragraph the reader is about to see.\n\n"}
                block = {"seq": 3, "kind": "block_end"}
                assert (await client.post("/v1/runs/s1/events", content=_lines(start, text, block))).status_code == 200
                await asyncio.wait_for(ledger.held.wait(), 10)  # the block reply's create: intent under way
                assert (await client.post("/v1/runs/s1/stop", json={"by": "chaos:reader"})).status_code == 200
                await asyncio.sleep(0.2)  # the stop is taken: the run ends while the create waits
                ledger.release.set()
                report = (await client.get("/v1/runs/s1", params={"wait_s": 10})).json()
            assert report["done"] and report["end_status"] == "cancelled"
        finally:
            await sidecar.stop()
            await relay.close()
    created = [c.message_id for c in mock.calls if c.method == "sendMessage" and c.ok and c.text != STOPPED_NOTICE]
    deleted = [c.message_id for c in mock.calls if c.method == "deleteMessage"]
    visible = [mid for mid, _ in mock.visible(CHAT)]
    assert not deleted, f"shown then deleted: created {created}, deleted {deleted}"
    assert all(mid in visible for mid in created)
