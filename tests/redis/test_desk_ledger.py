"""The Redis ledger keeps the desk as MemoryLedger and SqliteLedger do (the same assertions, tests/unit/test_desk.py),
in its partition's keys; the entries an ended run leaves are written by its owner only (fenced), an operator's later
writes by whoever serves the desk."""

from __future__ import annotations

import pytest

from streamrelay.adapters.redis import FencedError, Leases, RedisLedger
from streamrelay.adapters.redis.client import Redis
from streamrelay.core.records.desk import DeskState
from tests.unit import test_desk

pytestmark = pytest.mark.timeout(30)


async def _owned(client: Redis, partition: int = 3) -> RedisLedger:
    token = await Leases(client).acquire(partition, "owner", 10_000)
    assert token is not None
    return RedisLedger(client, partition).fenced(token)


async def test_a_kept_entry_is_never_reopened_by_a_second_end(client: Redis) -> None:
    await test_desk.test_a_kept_entry_is_never_reopened_by_a_second_end(await _owned(client))


async def test_entries_are_listed_by_state_and_client_oldest_end_first(client: Redis) -> None:
    ledger = await _owned(client)
    await test_desk.test_entries_are_listed_by_state_and_client_oldest_end_first(ledger)


async def test_prune_deletes_by_the_run_end_open_or_not_and_by_client(client: Redis) -> None:
    ledger = await _owned(client)
    await test_desk.test_prune_deletes_by_the_run_end_open_or_not_and_by_client(ledger)
    assert await client.zcard("sr:{p3}:l:desk:ended") == 1  # the age index went with the entries


async def test_a_deposed_owner_leaves_nothing_on_the_desk(client: Redis) -> None:
    deposed = await _owned(client)
    await client.incr("sr:{p3}:fence")  # another replica was granted the partition since
    with pytest.raises(FencedError):
        await deposed.record_undelivered([test_desk._entry()])
    assert await RedisLedger(client, 3).deliveries(set(DeskState)) == []
