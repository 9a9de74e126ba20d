"""RedisReceipts against a real redis-server: WhatsApp's status receipts shared by the replicas, kept at their strongest
status, with when the newest was heard (the settle rule's proof that the webhooks flow)."""

from __future__ import annotations

import asyncio

import pytest

from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.keys import KeySpace
from streamrelay.adapters.redis.receipts import RedisReceipts
from streamrelay.core.records.receipts import RECEIPTS_RETENTION_S, Receipt, ReceiptStatus

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


async def test_each_receipt_expires_after_the_retention_and_a_newer_one_is_kept(client: Redis) -> None:
    keys = KeySpace(prefix="ttl")
    short = RedisReceipts(client, keys, retention_s=0.05)
    await short.record("whatsapp", [Receipt("old", S.READ, "wamid.OLD", None, T0)])
    kept = RedisReceipts(client, keys)  # the default: 8 days
    await kept.record("whatsapp", [Receipt("new", S.SENT, "wamid.NEW", None, T0 + 1)])
    async with asyncio.timeout(10):  # Redis drops the old one by itself; no prune has anything to do
        while await kept.find("whatsapp", "old") is not None:
            await asyncio.sleep(0.02)
    assert await kept.prune(T0 + 10**9) == 0
    assert await kept.find("whatsapp", "new") == Receipt("new", S.SENT, "wamid.NEW", None, T0 + 1)
    ttl_ms = await client.pttl("ttl:{receipts:whatsapp}:r:new")
    assert 7 * 86_400_000 < ttl_ms <= RECEIPTS_RETENTION_S * 1000
    # every key of the platform's receipts has an expiry but the one "heard" marker (one key, not per message)
    names = sorted([str(k) async for k in client.scan_iter(match="ttl:*")])
    assert names == ["ttl:{receipts:whatsapp}:heard", "ttl:{receipts:whatsapp}:r:new"]


async def test_a_later_status_renews_the_expiry_even_when_it_ranks_lower(client: Redis) -> None:
    receipts = RedisReceipts(client, KeySpace(prefix="renew"), retention_s=3600)
    await receipts.record("whatsapp", [Receipt("d1", S.DELIVERED, "wamid.A", None, T0)])
    key = "renew:{receipts:whatsapp}:r:d1"
    await client.pexpire(key, 1000)  # as if most of the hour had passed
    await receipts.record("whatsapp", [Receipt("d1", S.SENT, "wamid.A", None, T0 + 5)])
    assert await client.pttl(key) > 1000
    found = await receipts.find("whatsapp", "d1")
    assert found is not None and found.status is S.DELIVERED


def test_a_retention_under_a_millisecond_is_refused(client: Redis) -> None:
    with pytest.raises(ValueError, match="retention_s must be at least"):
        RedisReceipts(client, retention_s=0)
