"""The WhatsApp settle rule as a table (adapters.whatsapp.settle.decide), receipts kept at their strongest status
(core.records.receipts, adapters.sqlite.receipts) and the webhook's parsing and signature (adapters.whatsapp.webhook).
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path
from typing import Any

import pytest

from streamrelay.adapters.sqlite import SqliteStore
from streamrelay.adapters.sqlite.receipts import SqliteReceipts
from streamrelay.adapters.whatsapp.settle import decide
from streamrelay.adapters.whatsapp.webhook import receipts_of, signature, signed_by
from streamrelay.core.ports import Settlement, SettleOutcome
from streamrelay.core.records.receipts import MemoryReceipts, Receipt, Receipts, ReceiptStatus

FOUND = SettleOutcome.FOUND
NOT_SENT = SettleOutcome.NOT_SENT
UNKNOWN = SettleOutcome.UNKNOWN
S = ReceiptStatus
T0 = 1_000_000.0
WINDOW = 30.0


def receipt(status: ReceiptStatus | None) -> Receipt | None:
    return None if status is None else Receipt("d1", status, "wamid.A1", 131026 if status is S.FAILED else None, T0)


@pytest.mark.parametrize(
    ("status", "waited_s", "heard_ago_s", "expected"),
    [
        # a status for the delivery id settles at once, whatever else is known
        (S.SENT, 0.0, None, Settlement(FOUND, "wamid.A1")),
        (S.DELIVERED, 0.0, None, Settlement(FOUND, "wamid.A1")),
        (S.READ, 45.0, 2.0, Settlement(FOUND, "wamid.A1")),
        (S.FAILED, 0.0, None, Settlement(NOT_SENT)),
        (S.FAILED, 45.0, 1.0, Settlement(NOT_SENT)),
        # nothing yet inside the window: wait, look again
        (None, 0.0, None, None),
        (None, 29.9, 0.5, None),
        # the window passed in silence while other statuses arrived: never stored, sent again
        (None, 30.0, 0.0, Settlement(NOT_SENT)),
        (None, 31.0, 50.0, Settlement(NOT_SENT)),  # heard 19 s before the settle began
        (None, 30.0, 629.0, Settlement(NOT_SENT)),  # 599 s before: a restart's statuses, heard before the kill
        # silence, and no status heard in the last 10 minutes (or ever): cannot tell, reported uncertain
        (None, 30.0, None, Settlement(UNKNOWN)),
        (None, 30.0, 630.5, Settlement(UNKNOWN)),  # last heard 600.5 s before the settle began
    ],
)
def test_the_outcome_rule(
    status: ReceiptStatus | None, waited_s: float, heard_ago_s: float | None, expected: Settlement | None
) -> None:
    now = T0 + waited_s
    heard = None if heard_ago_s is None else now - heard_ago_s
    assert decide(receipt(status), started_at_s=T0, now_s=now, window_s=WINDOW, last_heard_s=heard) == expected


def test_a_zero_window_decides_on_the_first_look() -> None:
    assert decide(None, started_at_s=T0, now_s=T0, window_s=0.0, last_heard_s=T0) == Settlement(NOT_SENT)
    assert decide(None, started_at_s=T0, now_s=T0, window_s=0.0, last_heard_s=T0 - 601) == Settlement(UNKNOWN)
    assert decide(None, started_at_s=T0, now_s=T0, window_s=0.0, last_heard_s=None) == Settlement(UNKNOWN)


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        yield MemoryReceipts()
        return
    sqlite = await SqliteStore.open(tmp_path / "ledger.sqlite3")
    yield await SqliteReceipts.on(sqlite)
    await sqlite.close()


@pytest.mark.parametrize(
    ("told", "kept"),
    [
        ([S.SENT], S.SENT),
        ([S.SENT, S.DELIVERED, S.READ], S.READ),
        ([S.DELIVERED, S.SENT], S.DELIVERED),  # out of order: the stronger stays
        ([S.SENT, S.FAILED], S.SENT),  # stored, then not delivered to the phone: still landed
        ([S.FAILED], S.FAILED),
        ([S.FAILED, S.SENT], S.SENT),
    ],
)
async def test_a_receipt_keeps_its_strongest_status(store: Receipts, told: list[ReceiptStatus], kept: S) -> None:
    for n, status in enumerate(told):
        await store.record("whatsapp", [Receipt("d1", status, f"wamid.{status}", None, T0 + n)])
    found = await store.find("whatsapp", "d1")
    assert found is not None and found.status is kept and found.message_id == f"wamid.{kept}"
    assert found.landed is (kept is not S.FAILED)
    assert await store.last_heard_s("whatsapp") == T0 + len(told) - 1
    assert await store.find("whatsapp", "d2") is None and await store.find("slack", "d1") is None
    assert await store.last_heard_s("slack") is None


async def test_sqlite_receipts_outlive_the_process(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    first = await SqliteStore.open(path)
    await (await SqliteReceipts.on(first)).record("whatsapp", [Receipt("d9", S.SENT, "wamid.Z", None, T0)])
    await first.close()
    again = await SqliteStore.open(path)
    try:
        assert await (await SqliteReceipts.on(again)).find("whatsapp", "d9") == Receipt(
            "d9", S.SENT, "wamid.Z", None, T0
        )
    finally:
        await again.close()


def status(**fields: Any) -> dict[str, Any]:
    return {"id": "wamid.M1", "status": "sent", "timestamp": "1700000000", "recipient_id": "15551234567", **fields}


def webhook(*statuses: Any, messages: list[Any] | None = None) -> dict[str, Any]:
    value: dict[str, Any] = {"messaging_product": "whatsapp", "metadata": {"phone_number_id": "1065"}}
    if statuses:
        value["statuses"] = list(statuses)
    if messages is not None:
        value["messages"] = messages
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": "1", "changes": [{"field": "messages", "value": value}]}],
    }


def test_statuses_with_our_callback_data_become_receipts() -> None:
    payload = webhook(
        status(biz_opaque_callback_data="d1"),
        status(id="wamid.M2", status="failed", biz_opaque_callback_data="d2", errors=[{"code": 131026}]),
        status(id="wamid.M3", status="read", biz_opaque_callback_data="d3"),
    )
    assert receipts_of(payload, T0) == [
        Receipt("d1", S.SENT, "wamid.M1", None, T0),
        Receipt("d2", S.FAILED, "wamid.M2", 131026, T0),
        Receipt("d3", S.READ, "wamid.M3", None, T0),
    ]


@pytest.mark.parametrize(
    "payload",
    [
        webhook(status()),  # no callback data: another sender of the number
        webhook(status(biz_opaque_callback_data="")),
        webhook(status(biz_opaque_callback_data="d1", status="deleted")),  # a status this table does not know
        webhook(status(biz_opaque_callback_data="d1", id=None)),
        webhook(messages=[{"from": "15551234567", "id": "wamid.IN", "type": "text", "text": {"body": "hi"}}]),
        {"object": "whatsapp_business_account"},
        {"entry": "not a list"},
        [],
        None,
    ],
)
def test_anything_else_in_a_webhook_is_skipped(payload: Any) -> None:
    assert receipts_of(payload, T0) == []


def test_the_signature_is_hmac_sha256_of_the_raw_body() -> None:
    body = b'{"object":"whatsapp_business_account"}'
    expected = "sha256=" + hmac.new(b"app-secret", body, hashlib.sha256).hexdigest()
    assert signature("app-secret", body) == expected
    assert signed_by("app-secret", body, expected)
    assert not signed_by("app-secret", body + b" ", expected)
    assert not signed_by("other", body, expected)
    assert not signed_by("app-secret", body, None)
    assert not signed_by("app-secret", body, expected.removeprefix("sha256="))


@pytest.mark.parametrize("header", ["sha256=\xe9", "sha256=é" + "0" * 63, "\u202esha256=00"])
def test_a_non_ascii_signature_is_refused_not_an_error(header: str) -> None:
    # hmac.compare_digest raises TypeError on non-ASCII str; a forged header must be a plain "no" (401), not a 500
    assert not signed_by("app-secret", b"{}", header)
