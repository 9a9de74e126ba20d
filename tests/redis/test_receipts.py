"""RedisReceipts against a real redis-server: WhatsApp's status receipts shared by the replicas, kept at their strongest
status, with when the newest was heard (the settle rule's proof that the webhooks flow)."""

from __future__ import annotations

import asyncio
import time

import pytest

from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.keys import KeySpace
from streamrelay.adapters.redis.lease import Leases
from streamrelay.adapters.redis.receipts import DEAD_RECEIVER_S, RedisReceipts
from streamrelay.adapters.whatsapp.adapter import WhatsAppAdapter
from streamrelay.core.events import Target
from streamrelay.core.ports import PendingSend, SettleOutcome, TextFormat
from streamrelay.core.records.receipts import RECEIPTS_RETENTION_S, Receipt, ReceiptStatus

S = ReceiptStatus
T0 = 1_700_000_000.25
TOKEN = "106540352242922:EAAGm0PX4ZCpsBAmockSecretToken0123456789abcdef"


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
    # every key of the platform's receipts has an expiry but the "heard" markers (two keys, not per message)
    names = sorted([str(k) async for k in client.scan_iter(match="ttl:*")])
    assert names == [
        "ttl:{receipts:whatsapp}:heard",
        "ttl:{receipts:whatsapp}:heard_by",
        "ttl:{receipts:whatsapp}:r:new",
    ]


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


async def test_silence_is_trusted_only_on_the_word_of_a_receiver_whose_heartbeat_lives(client: Redis) -> None:
    """chaos-7-00007: Meta's one URL reached replica-1 alone; it was killed, and replica-2 settled a create that had
    timed out after the Cloud API stored it. Its status was being retried at the dead replica, so replica-2 heard
    nothing; the statuses replica-1 had recorded before it died counted as proof that the webhooks flow, and the create
    was sent again: a double the report did not count. Now only a live receiver's statuses are that proof."""
    keys = KeySpace(prefix="live")
    leases = Leases(client, keys)
    one = RedisReceipts(client, keys, receiver="replica-1")
    two = RedisReceipts(client, keys, receiver="replica-2")
    await leases.heartbeat("replica-1", 60_000)
    await leases.heartbeat("replica-2", 60_000)
    now = time.time()
    await one.record("whatsapp", [Receipt("earlier", S.DELIVERED, "wamid.E", None, now - 5)])
    assert await two.last_heard_s("whatsapp") == pytest.approx(now - 5)  # replica-1 lives: its word counts

    adapter = WhatsAppAdapter(TOKEN, base_url="http://127.0.0.1:9")  # settling reads receipts, it calls no one
    adapter.use_receipts(two, settle_window_s=0.3)
    pending = PendingSend("timed-out-after-store", "the part", TextFormat.PLAIN)
    target = Target(chat_id="15551234567")
    assert (await adapter.settle_send(target, pending)).outcome is SettleOutcome.NOT_SENT

    await leases.heartbeat("replica-1", 1)  # killed: its heartbeat lapses
    await asyncio.sleep(0.05)
    assert await two.last_heard_s("whatsapp") is None
    assert (await adapter.settle_send(target, pending)).outcome is SettleOutcome.UNKNOWN  # reported, never resent

    # replica-2 hears them itself: still no proof while replica-1's death is recent (what was aimed at it comes later)
    await two.record("whatsapp", [Receipt("later", S.SENT, "wamid.L", None, now)])
    assert await two.last_heard_s("whatsapp") is None
    later = time.time() + DEAD_RECEIVER_S + 1  # replica-1's last word and death are older than that: proof again
    await two.record("whatsapp", [Receipt("much-later", S.SENT, "wamid.M", None, later)])
    assert await two.last_heard_s("whatsapp") == pytest.approx(later)
    assert await RedisReceipts(client, keys).last_heard_s("whatsapp") == pytest.approx(later)  # no replica: any
    await one.record("whatsapp", [Receipt("the-dead-ones", S.SENT, "wamid.D", None, later + 1)])
    assert await two.last_heard_s("whatsapp") is None  # a dead receiver's newer time is no live one's proof


async def test_silence_proves_nothing_while_a_receiver_died_lately_though_a_live_one_hears_others(
    client: Redis,
) -> None:
    """breaker7, chaos seed 7 on 01c7686 (whatsapp/block, chaos-7-00022): replica-2 was killed while replica-1 was
    down too; the statuses went round the three replicas as a load balancer sends them, each attempt to the next, so a
    media create's status (it had timed out after the Cloud API stored it) was tried at dead replicas and came again
    only later, while replica-3 heard other messages' statuses. replica-3 settled on silence, counted its own fresh
    statuses as proof that they flow, and sent the media again: a double the report did not count. A receiver's
    recent death now leaves the create uncertain, reported."""
    keys = KeySpace(prefix="lately")
    leases = Leases(client, keys)
    receivers = {n: RedisReceipts(client, keys, receiver=n) for n in ("replica-1", "replica-2", "replica-3")}
    for name in receivers:
        await leases.heartbeat(name, 60_000)
    now = time.time()
    for i, receipts in enumerate(receivers.values()):
        await receipts.record("whatsapp", [Receipt(f"earlier-{i}", S.DELIVERED, f"wamid.E{i}", None, now - 5 + i)])
    adapter = WhatsAppAdapter(TOKEN, base_url="http://127.0.0.1:9")  # settling reads receipts, it calls no one
    adapter.use_receipts(receivers["replica-3"], settle_window_s=0.3)
    pending = PendingSend("stored-but-its-status-retried-later", "a file", TextFormat.PLAIN)
    target = Target(chat_id="15551234567")
    assert (await adapter.settle_send(target, pending)).outcome is SettleOutcome.NOT_SENT  # every receiver lives

    await leases.heartbeat("replica-2", 1)  # killed: its heartbeat lapses
    await asyncio.sleep(0.05)
    await receivers["replica-3"].record("whatsapp", [Receipt("others", S.SENT, "wamid.O", None, time.time())])
    assert await receivers["replica-3"].last_heard_s("whatsapp") is None
    assert (await adapter.settle_send(target, pending)).outcome is SettleOutcome.UNKNOWN  # reported, never resent


async def test_a_replica_killed_before_it_recorded_any_status_leaves_silence_unproven(client: Redis) -> None:
    """A replica behind Meta's load balancer that was killed before its webhook recorded anything was never in
    ``heard_by``, so its death went unseen: the statuses posted to it as it died come again only at Meta's next try,
    while a live replica hears others, and a create that timed out after it was stored would be sent again. Any
    replica's lapsed heartbeat now leaves silence unproven for the same span; a graceful leave does not."""
    keys = KeySpace(prefix="unheard")
    leases = Leases(client, keys)
    two = RedisReceipts(client, keys, receiver="replica-2")
    for name in ("replica-1", "replica-2", "replica-3"):
        await leases.heartbeat(name, 60_000)
    now = time.time()
    await two.record("whatsapp", [Receipt("others", S.SENT, "wamid.O", None, now)])
    assert await two.last_heard_s("whatsapp") == pytest.approx(now)
    await leases.leave("replica-3")  # drained and left: it takes no more webhooks
    assert await two.last_heard_s("whatsapp") == pytest.approx(now)

    adapter = WhatsAppAdapter(TOKEN, base_url="http://127.0.0.1:9")  # settling reads receipts, it calls no one
    adapter.use_receipts(two, settle_window_s=0.3)
    pending = PendingSend("stored-while-its-receiver-died", "the part", TextFormat.PLAIN)
    target = Target(chat_id="15551234567")
    await leases.heartbeat("replica-1", 1)  # killed, having recorded nothing
    await asyncio.sleep(0.05)
    assert await two.last_heard_s("whatsapp") is None
    await leases.heartbeat("replica-2", 60_000)  # the lapsed heartbeat moves to the gone set: still seen
    assert await client.zrange(keys.replicas_gone, 0, -1) == ["replica-1"]
    await two.record("whatsapp", [Receipt("more", S.SENT, "wamid.M", None, time.time())])
    assert await two.last_heard_s("whatsapp") is None
    assert (await adapter.settle_send(target, pending)).outcome is SettleOutcome.UNKNOWN  # reported, never resent

    later = time.time() + DEAD_RECEIVER_S + 1  # the death is older than the span before the newest: proof again
    await two.record("whatsapp", [Receipt("much-later", S.SENT, "wamid.L", None, later)])
    assert await two.last_heard_s("whatsapp") == pytest.approx(later)


async def test_a_receiver_silent_for_the_retention_is_forgotten_by_the_next_write(client: Redis) -> None:
    keys = KeySpace(prefix="forget")
    await RedisReceipts(client, keys, receiver="old-replica", retention_s=60).record(
        "whatsapp", [Receipt("a", S.SENT, "wamid.A", None, T0)]
    )
    await RedisReceipts(client, keys, receiver="new-replica", retention_s=60).record(
        "whatsapp", [Receipt("b", S.SENT, "wamid.B", None, T0 + 61)]
    )
    assert sorted(await client.hkeys("forget:{receipts:whatsapp}:heard_by")) == ["new-replica"]
