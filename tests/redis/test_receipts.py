"""RedisReceipts against a real redis-server: WhatsApp's status receipts shared by the replicas, kept at their strongest
status, with when the newest was heard (the settle rule's proof that the webhooks flow)."""

from __future__ import annotations

import pytest

from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.keys import KeySpace
from streamrelay.adapters.redis.receipts import RedisReceipts
from streamrelay.core.records.receipts import Receipt, ReceiptStatus

S = ReceiptStatus
T0 = 1_700_000_000.25


@pytest.mark.parametrize(
    ("told", "kept"),
    [
        ([S.SENT], S.SENT),
        ([S.SENT, S.DELIVERED, S.READ], S.READ),
        ([S.DELIVERED, S.SENT], S.DELIVERED),
        ([S.SENT, S.FAILED], S.SENT),
        ([S.FAILED], S.FAILED),
        ([S.FAILED, S.READ], S.READ),
    ],
)
async def test_a_receipt_keeps_its_strongest_status(client: Redis, told: list[ReceiptStatus], kept: S) -> None:
    receipts = RedisReceipts(client, KeySpace(prefix=f"t{len(told)}{kept}"))
    for n, status in enumerate(told):
        code = 131026 if status is S.FAILED else None
        await receipts.record(
            "whatsapp", [Receipt("sr0123456789abcdef012345", status, f"wamid.{status}", code, T0 + n)]
        )
    found = await receipts.find("whatsapp", "sr0123456789abcdef012345")
    assert found is not None and found.status is kept and found.message_id == f"wamid.{kept}"
    assert found.error_code == (131026 if kept is S.FAILED else None)
    assert await receipts.last_heard_s("whatsapp") == pytest.approx(T0 + len(told) - 1)
    assert await receipts.find("whatsapp", "other") is None
    assert await receipts.last_heard_s("slack") is None


async def test_one_write_of_several_and_a_second_replica_reads_them(client: Redis, clients: list[Redis]) -> None:
    keys = KeySpace(prefix="shared")
    batch = [Receipt("d1", S.SENT, "wamid.A", None, T0), Receipt("d2", S.FAILED, "wamid.B", 131000, T0 + 1)]
    await RedisReceipts(client, keys).record("whatsapp", batch)
    other = RedisReceipts(clients[1], keys)
    assert await other.find("whatsapp", "d1") == batch[0]
    assert await other.find("whatsapp", "d2") == batch[1]
    assert await other.last_heard_s("whatsapp") == pytest.approx(T0 + 1)
