"""An owner whose partition was granted to another replica neither renews its lease nor sweeps the partition's dead
letters: both are fenced like its reads, claims, acknowledgements and writes (``test_stale_owner_reads.py``).

The sweep is the one that loses lines: the new owner claims every pending entry at its grant (a claim counts a
delivery), so an entry the stale owner's sweep finds delivered too often is one the new owner is working on; moved
to the dead letters, its lines (answered 200) are never shown and the new owner's acknowledgement finds nothing."""

from __future__ import annotations

import asyncio

import pytest

from streamrelay.adapters.redis import FencedError, InputStream, Leases
from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.keys import KEYS
from streamrelay.core.records.journal import JournalEntry

pytestmark = pytest.mark.timeout(60)

PARTITION = 9


async def _lapse(leases: Leases, partition: int) -> None:
    while await leases.holder(partition) is not None:
        await asyncio.sleep(0.02)


async def _regranted(leases: Leases) -> tuple[int, int]:
    """The partition granted to ``replica-old`` for 100 ms, lapsed unnoticed (a failover, a pause), then granted to
    ``replica-new``: the two grants' fencing tokens, old first."""
    old = await leases.acquire(PARTITION, "replica-old", 100)
    assert old is not None
    await _lapse(leases, PARTITION)
    new = await leases.acquire(PARTITION, "replica-new", 30_000)
    assert new is not None and new > old
    return old, new


async def _lease_says(client: Redis, token: int, owner: str) -> None:
    """Write the partition's lease key as grant ``token`` of ``owner`` holds it: the old grant's value back (a key
    restored from an older copy, or on a node whose data went back), or the current grant's again."""
    await client.set(KEYS.lease(PARTITION), f"{token}:{owner}", px=30_000)


async def test_a_stale_owner_does_not_sweep_the_entries_the_new_owner_claimed(client: Redis) -> None:
    stream = InputStream(client)
    leases = Leases(client)
    [entry] = await stream.append(PARTITION, [JournalEntry("r1", '{"kind":"text","seq":3,"text":"hi"}')])
    old = await leases.acquire(PARTITION, "replica-old", 100)
    assert old is not None
    assert [e.id for e in await stream.read(PARTITION, "replica-old", token=old)] == [entry]
    for _ in range(2):  # it failed on the entry and took it again (its restarts): 3 deliveries
        assert [e.id for e in await stream.claim(PARTITION, "replica-old", token=old)] == [entry]
    await _lapse(leases, PARTITION)  # its lease lapsed unnoticed (a failover, a pause)
    new = await leases.acquire(PARTITION, "replica-new", 30_000)
    assert new is not None and new > old
    assert [e.id for e in await stream.claim(PARTITION, "replica-new", token=new)] == [entry]  # 4 deliveries

    with pytest.raises(FencedError):
        await stream.bury(PARTITION, max_deliveries=2, token=old)
    assert await stream.dead(PARTITION) == []
    assert await stream.pending(PARTITION) == [(entry, "replica-new", 4)]  # still the new owner's to journal
    assert await stream.ack(PARTITION, [entry], token=new) == 1


async def test_the_owner_of_the_grant_sweeps_and_an_unfenced_sweep_still_works(client: Redis) -> None:
    stream = InputStream(client)
    leases = Leases(client)
    bad, other = await stream.append(PARTITION, [JournalEntry("r1", "a"), JournalEntry("r2", "b")])
    token = await leases.acquire(PARTITION, "replica-a", 30_000)
    assert token is not None
    await stream.read(PARTITION, "replica-a", token=token)
    await stream.claim(PARTITION, "replica-a", token=token)
    assert sorted(await stream.bury(PARTITION, max_deliveries=1, token=token)) == sorted([bad, other])
    assert {letter.source for letter in await stream.dead(PARTITION)} == {bad, other}
    assert await stream.bury(PARTITION, max_deliveries=1) == []  # an operator's tool: unfenced, nothing left


async def test_a_stale_owner_does_not_renew_a_lease_a_newer_grant_replaced(client: Redis) -> None:
    """The lease key holding the old grant's value while the fence says a newer grant was made: a lease key that
    outlived the grant (restored from an older copy, or on a node whose data went back) is not renewed by its stale
    holder, which would go on believing it owns the partition (its lease valid by its own clock)."""
    leases = Leases(client)
    old, new = await _regranted(leases)
    await _lease_says(client, old, "replica-old")

    assert await leases.renew(PARTITION, "replica-old", old, 30_000) is False
    await _lease_says(client, new, "replica-new")
    assert await leases.renew(PARTITION, "replica-new", new, 30_000) is True  # the grant of the fence renews
    assert await leases.renew(PARTITION, "replica-old", old, 30_000) is False


async def test_the_keepers_renewals_in_one_round_trip_are_fenced_alike(client: Redis) -> None:
    """:meth:`Leases.renew_many` (the keeper's renewals, pipelined) answers as :meth:`Leases.renew` does, lease by
    lease: the stale grant's renewal is refused (False) beside the current one's (True) and a lease held by nobody."""
    leases = Leases(client)
    old, new = await _regranted(leases)
    await _lease_says(client, old, "replica-old")
    assert await leases.renew_many([(PARTITION, old)], "replica-old", 30_000) == [False]
    await _lease_says(client, new, "replica-new")
    other = await leases.acquire(PARTITION + 1, "replica-new", 30_000)
    assert other is not None
    held = [(PARTITION, new), (PARTITION + 1, other)]
    assert await leases.renew_many(held, "replica-new", 30_000) == [True, True]
    assert await leases.renew_many([(PARTITION, old)], "replica-old", 30_000) == [False]
