"""Partition leases on a real redis-server: one holder, fencing tokens that only grow, renewal by the holder,
takeover after expiry, and the keeper's fair share across replicas."""

from __future__ import annotations

import asyncio

from streamrelay.adapters.redis import LeaseChange, LeaseEvent, LeaseKeeper, Leases, partition_of
from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.keys import KEYS, KeySpace
from tests.contention import wait_scale

TTL_MS = 300
SHARE_TTL_MS = 3_000
"""The leases of keepers that must keep theirs between their ticks: a 300 ms lease expired between two ticks when
the worker stalled (a parallel run at load 12-23 on 2 cores: b took a's partitions before a's shedding round)."""


async def next_event(keeper: LeaseKeeper, timeout_s: float = 5.0) -> LeaseEvent:
    return await asyncio.wait_for(keeper.events.get(), timeout_s)


async def test_a_lease_has_one_holder_and_every_grant_increments_the_token(client: Redis) -> None:
    leases = Leases(client)
    assert await leases.fence(3) is None
    first = await leases.acquire(3, "a", 10_000)
    assert first == 1
    assert await leases.acquire(3, "b", 10_000) is None  # held: nobody else gets it
    holder = await leases.holder(3)
    assert holder is not None and (holder.owner, holder.token) == ("a", 1) and 0 < holder.ttl_ms <= 10_000
    assert await leases.release(3, "b", 1) is False  # only the holder releases
    assert await leases.release(3, "a", 1) is True
    assert await leases.holder(3) is None
    assert await leases.acquire(3, "b", 10_000) == 2
    assert await leases.fence(3) == 2
    assert await leases.acquire(4, "a", 10_000) == 1  # tokens are per partition


async def test_only_the_holder_of_the_grant_renews(client: Redis) -> None:
    leases = Leases(client)
    token = await leases.acquire(0, "a", 200)
    assert token == 1
    assert await leases.renew(0, "b", token, 10_000) is False
    assert await leases.renew(0, "a", token + 1, 10_000) is False  # an older or newer grant is not this one
    assert await leases.renew(0, "a", token, 10_000) is True
    holder = await leases.holder(0)
    assert holder is not None and holder.ttl_ms > 200


async def test_an_expired_lease_is_taken_over_with_a_higher_token(client: Redis) -> None:
    leases = Leases(client)
    assert await leases.acquire(5, "a", 50) == 1
    while await leases.holder(5) is not None:
        await asyncio.sleep(0.02)
    assert await leases.acquire(5, "b", 10_000) == 2
    assert await leases.renew(5, "a", 1, 10_000) is False  # the old owner cannot get it back by renewing
    assert await leases.release(5, "a", 1) is False  # nor drop the new owner's lease


async def test_heartbeats_count_live_replicas(client: Redis) -> None:
    leases = Leases(client)
    assert await leases.heartbeat("a", 10_000) == 1
    assert await leases.heartbeat("b", 1_000) == 2
    assert await leases.heartbeat("a", 10_000) == 2  # a beat again: still two
    async with asyncio.timeout(10):  # b stopped beating: once its beat expires, a counts one (a 50 ms beat had
        while await leases.heartbeat("a", 10_000) != 1:  # expired before a's next beat on a stalled worker)
            await asyncio.sleep(0.05)
    await leases.leave("a")
    assert await leases.heartbeat("c", 10_000) == 1


async def test_a_keeper_takes_every_free_partition_alone_and_reports_each(client: Redis) -> None:
    keeper = LeaseKeeper(Leases(client), "a", 4, ttl_ms=TTL_MS)
    await keeper.tick()
    events = [keeper.events.get_nowait() for _ in range(4)]
    assert sorted((e.partition, e.change, e.token) for e in events) == [(p, LeaseChange.ACQUIRED, 1) for p in range(4)]
    assert keeper.held == {0: 1, 1: 1, 2: 1, 3: 1}
    await keeper.close()
    assert [(await next_event(keeper)).change for _ in range(4)] == [LeaseChange.LOST] * 4
    assert all([await Leases(client).holder(p) is None for p in range(4)])


async def test_keepers_share_the_partitions_and_a_dead_ones_are_taken_over(clients: list[Redis]) -> None:
    a, b = (LeaseKeeper(Leases(c), name, 8, ttl_ms=SHARE_TTL_MS) for c, name in zip(clients, "ab", strict=False))
    await a.tick()
    assert len(a.held) == 8
    await b.tick()  # b is alive: a's share is 4 from a's next round, b has none yet
    assert b.held == {}
    await a.tick()
    shed = [e for e in [a.events.get_nowait() for _ in range(a.events.qsize())] if e.change is LeaseChange.SHED]
    assert len(shed) == 4
    for event in shed:  # a hands them over once drained
        await a.release(event.partition)
    await b.tick()
    assert len(a.held) == 4 and len(b.held) == 4 and not set(a.held) & set(b.held)
    assert all(token == 2 for token in b.held.values())  # the second grant of each

    # a dies (no release, no renewal): once its leases expire, b takes them all with a new token
    b.start()
    try:
        async with asyncio.timeout(10 * wait_scale()):  # a hang guard for an idle machine, scaled by the load
            while len(b.held) < 8:
                await asyncio.sleep(0.05)
        taken = {p: t for p, t in b.held.items() if p in a.held}
        assert taken and all(t == a.held[p] + 1 for p, t in taken.items())
    finally:
        await b.close()


async def test_a_keeper_reports_a_lease_taken_while_it_was_paused(client: Redis) -> None:
    keeper = LeaseKeeper(Leases(client), "a", 1, ttl_ms=TTL_MS)
    await keeper.tick()
    assert (await next_event(keeper)).change is LeaseChange.ACQUIRED
    await asyncio.sleep(TTL_MS / 1000 * 1.5)  # "paused": no renewal; the lease expired
    assert await Leases(client).acquire(0, "b", 10_000) == 2
    await keeper.tick()
    assert await next_event(keeper) == LeaseEvent(0, LeaseChange.LOST, 1)
    assert keeper.held == {}


async def test_a_running_keeper_renews_past_its_ttl(client: Redis) -> None:
    keeper = LeaseKeeper(Leases(client), "a", 2, ttl_ms=900)  # renewed every 300 ms
    keeper.start()
    try:
        assert {(await next_event(keeper)).change for _ in range(2)} == {LeaseChange.ACQUIRED}
        await asyncio.sleep(2.0)
        assert keeper.held == {0: 1, 1: 1} and keeper.events.empty()
        assert await Leases(client).acquire(0, "b", 10_000) is None
    finally:
        await keeper.close()


def test_partitions_are_stable_and_keys_carry_the_partition_tag() -> None:
    assert partition_of("telegram/42", 16) == partition_of("telegram/42", 16)
    assert {partition_of(f"telegram/{i}", 16) for i in range(200)} == set(range(16))
    assert KEYS.lease(7) == "sr:{p7}:lease" and KEYS.fence(7) == "sr:{p7}:fence" and KEYS.inbox(7) == "sr:{p7}:in"
    assert KeySpace("prod").ledger(2, "parts:r}1") == "prod:{p2}:l:parts:r}1"
    assert KEYS.budget("telegram:bot", "tat") == "sr:{rate:telegram:bot}:tat"


class FlakyLeases(Leases):
    """Leases whose Redis becomes unreachable when ``down`` is set."""

    down = False

    async def heartbeat(self, owner: str, ttl_ms: int) -> int:
        if self.down:
            raise ConnectionError("Redis unreachable")
        return await super().heartbeat(owner, ttl_ms)

    async def renew(self, partition: int, owner: str, token: int, ttl_ms: int) -> bool:
        if self.down:
            raise ConnectionError("Redis unreachable")
        return await super().renew(partition, owner, token, ttl_ms)


async def test_a_keeper_cut_off_from_redis_reports_its_leases_lost_once_they_expired(client: Redis) -> None:
    leases = FlakyLeases(client)
    keeper = LeaseKeeper(leases, "a", 2, ttl_ms=TTL_MS)
    keeper.start()
    try:
        assert {(await next_event(keeper)).change for _ in range(2)} == {LeaseChange.ACQUIRED}
        leases.down = True
        assert {(await next_event(keeper)).change for _ in range(2)} == {LeaseChange.LOST}
        assert keeper.held == {}
        leases.down = False  # back: the partitions, free again, are taken with new tokens
        assert {((e := await next_event(keeper)).change, e.token) for _ in range(2)} == {(LeaseChange.ACQUIRED, 2)}
    finally:
        await keeper.close()
