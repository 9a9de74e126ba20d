"""Status receipts are kept only as long as settling can need them: ``[service] receipts_retention_hours`` from their
last recording, then pruned (SQLite: one DELETE on an index; memory: the dict), and a fresh receipt still settles."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from streamrelay.adapters.ops import ServiceMetrics
from streamrelay.adapters.sqlite import SqliteStore
from streamrelay.adapters.sqlite.receipts import PRUNE, SqliteReceipts
from streamrelay.adapters.whatsapp.settle import decide
from streamrelay.adapters.whatsapp.webhook import receipts_of
from streamrelay.app.serving import keep_receipts
from streamrelay.config.settings import ServiceSettings
from streamrelay.core.ports import Settlement, SettleOutcome
from streamrelay.core.records.receipts import RECEIPTS_RETENTION_S, MemoryReceipts, Receipt, Receipts, ReceiptStatus

S = ReceiptStatus
HOUR_S = 3600.0
NOW = 1_800_000_000.0


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        yield MemoryReceipts()
        return
    sqlite = await SqliteStore.open(tmp_path / "ledger.sqlite3")
    yield await SqliteReceipts.on(sqlite)
    await sqlite.close()


async def test_receipts_older_than_the_bound_are_pruned_and_newer_ones_kept(store: Receipts) -> None:
    bound = NOW - RECEIPTS_RETENTION_S
    await store.record(
        "whatsapp",
        [
            Receipt("old", S.READ, "wamid.OLD", None, bound - 1),
            Receipt("edge", S.SENT, "wamid.EDGE", None, bound),  # exactly at the bound: kept
            Receipt("new", S.SENT, "wamid.NEW", None, NOW - 60),
        ],
    )
    await store.record("slack", [Receipt("old", S.SENT, "x.OLD", None, bound - 5)])
    assert await store.prune(bound) == 2
    assert await store.find("whatsapp", "old") is None and await store.find("slack", "old") is None
    assert await store.find("whatsapp", "edge") == Receipt("edge", S.SENT, "wamid.EDGE", None, bound)
    assert await store.find("whatsapp", "new") == Receipt("new", S.SENT, "wamid.NEW", None, NOW - 60)
    assert await store.prune(bound) == 0


async def test_a_later_status_keeps_an_old_receipt_from_its_last_recording(store: Receipts) -> None:
    bound = NOW - RECEIPTS_RETENTION_S
    await store.record("whatsapp", [Receipt("d1", S.DELIVERED, "wamid.A", None, bound - 100)])
    await store.record("whatsapp", [Receipt("d1", S.SENT, "wamid.A", None, bound + 100)])  # weaker, but newer
    assert await store.prune(bound) == 0
    found = await store.find("whatsapp", "d1")
    assert found is not None and found.status is S.DELIVERED and found.recorded_at_s == bound + 100


async def test_a_fresh_receipt_still_settles_after_a_prune(store: Receipts) -> None:
    await store.record("whatsapp", [Receipt("old", S.SENT, "wamid.OLD", None, NOW - RECEIPTS_RETENTION_S - 1)])
    await store.record("whatsapp", [Receipt("d1", S.SENT, "wamid.A1", None, NOW - 1)])
    assert await store.prune(NOW - RECEIPTS_RETENTION_S) == 1
    heard = await store.last_heard_s("whatsapp")
    found = decide(await store.find("whatsapp", "d1"), started_at_s=NOW, now_s=NOW, window_s=30, last_heard_s=heard)
    assert found == Settlement(SettleOutcome.FOUND, "wamid.A1")
    # the pruned one's send, settled now, is not found: past the bound it can no longer be asked for
    assert await store.find("whatsapp", "old") is None


async def test_the_sqlite_prune_is_a_range_on_an_index(tmp_path: Path) -> None:
    sqlite = await SqliteStore.open(tmp_path / "ledger.sqlite3")
    try:
        await SqliteReceipts.on(sqlite)
        plan = await sqlite.fetch("EXPLAIN QUERY PLAN " + PRUNE, (NOW,))
        assert any("USING INDEX receipts_recorded (recorded_at<?)" in str(row) for row in plan), plan
    finally:
        await sqlite.close()


async def test_the_keeper_prunes_past_the_retention_and_counts_them(tmp_path: Path) -> None:
    sqlite = await SqliteStore.open(tmp_path / "ledger.sqlite3")
    try:
        receipts = await SqliteReceipts.on(sqlite)
        now = time.time()
        await receipts.record(
            "whatsapp",
            [
                Receipt("old1", S.SENT, "wamid.1", None, now - 3 * HOUR_S),
                Receipt("old2", S.FAILED, "wamid.2", 131026, now - 2.5 * HOUR_S),
                Receipt("new", S.SENT, "wamid.3", None, now - 1 * HOUR_S),
            ],
        )
        metrics = ServiceMetrics()
        keeper = asyncio.create_task(keep_receipts(receipts, metrics, retention_hours=2, poll_s=0.01))
        try:
            async with asyncio.timeout(10):
                while metrics.registry.get_sample_value("streamrelay_receipts_pruned_total") != 2:
                    await asyncio.sleep(0.01)
        finally:
            keeper.cancel()
        assert await receipts.find("whatsapp", "old1") is None and await receipts.find("whatsapp", "old2") is None
        assert await receipts.find("whatsapp", "new") is not None
    finally:
        await sqlite.close()


def test_the_retention_defaults_to_eight_days_and_refuses_less_than_an_hour() -> None:
    assert ServiceSettings().receipts_retention_hours * HOUR_S == RECEIPTS_RETENTION_S == 8 * 24 * HOUR_S
    with pytest.raises(ValidationError, match="receipts_retention_hours"):
        ServiceSettings(receipts_retention_hours=0.1)


def test_a_receipt_keeps_no_phone_number() -> None:
    status = {
        "id": "wamid.M1",
        "status": "sent",
        "timestamp": "1700000000",
        "recipient_id": "15551234567",
        "biz_opaque_callback_data": "d1",
        "conversation": {"id": "c1", "origin": {"type": "service"}},
        "pricing": {"billable": True, "category": "service"},
    }
    payload = {"entry": [{"changes": [{"field": "messages", "value": {"statuses": [status]}}]}]}
    (kept,) = receipts_of(payload, NOW)
    assert "15551234567" not in repr(kept)
    assert kept == Receipt("d1", S.SENT, "wamid.M1", None, NOW)
