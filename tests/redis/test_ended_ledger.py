"""What replicas keep of ended runs in Redis (issue 27): a partition's corrections, kept as the SQLite ledger keeps
them (the same assertions, tests/unit/test_corrections.py) and written by its owner only (fenced: a deposed owner
writes nothing, the record it left ``applying`` is the next owner's to resume); and every partition's desk read
together by any replica (:class:`adapters.redis.desk.SharedDesk`)."""

from __future__ import annotations

import dataclasses
from typing import cast

import pytest

from streamrelay.adapters.redis import FencedError, Leases, RedisLedger, conversation_key, partition_of
from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.desk import SharedDesk
from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.corrections import CorrectionKind, CorrectionRecord, CorrectionState, Step, StepOp
from streamrelay.core.records.desk import DeskState
from tests.unit import test_corrections, test_desk

pytestmark = pytest.mark.timeout(30)
PARTITIONS = 4


async def _owned(client: Redis, partition: int) -> RedisLedger:
    token = await Leases(client).acquire(partition, "owner", 10_000)
    assert token is not None
    return RedisLedger(client, partition).fenced(token)


def _record(run: str = "acme/r1", cid: str = "c1", created_at: float = 5.0) -> CorrectionRecord:
    return CorrectionRecord(
        run=run,
        id=cid,
        kind=CorrectionKind.CORRECT,
        text="new",
        fmt=TextFormat.MARKDOWN,
        channel="c",
        target={"chat_id": 7},
        before=["1"],
        steps=[Step(StepOp.EDIT, "1", "new", part=0)],
        created_at=created_at,
        updated_at=created_at,
    )


async def test_corrections_are_kept_whole_and_open_ones_listed(client: Redis) -> None:
    ledger = await _owned(client, 3)
    await test_corrections.test_records_are_kept_whole_and_open_ones_listed(cast(SqliteLedger, ledger))
    assert await client.hlen("sr:{p3}:l:corr:open") == 0  # applied: no longer among the open ones


async def test_a_partitions_corrections_are_listed_oldest_first_and_kept_in_its_slot(client: Redis) -> None:
    ledger = await _owned(client, 3)
    await ledger.save_correction(_record(cid="late", created_at=9.0))
    await ledger.save_correction(_record(cid="early", created_at=2.0))
    assert [r.id for r in await ledger.corrections("acme/r1")] == ["early", "late"]
    assert [r.id for r in await ledger.open_corrections()] == ["early", "late"]
    assert await RedisLedger(client, 2).open_corrections() == []  # another partition's are its own


async def test_a_deposed_owner_writes_nothing_and_its_next_owner_resumes_what_was_left(client: Redis) -> None:
    deposed = await _owned(client, 3)
    record = _record()
    record.state = CorrectionState.APPLYING
    await deposed.save_correction(record)
    assert deposed.token is not None
    assert await Leases(client).release(3, "owner", deposed.token)
    nxt = await _owned(client, 3)  # granted the partition: a new fencing token
    record.state = CorrectionState.APPLIED
    with pytest.raises(FencedError):
        await deposed.save_correction(record)
    left = await nxt.open_corrections()
    assert [(r.id, r.state) for r in left] == [("c1", CorrectionState.APPLYING)]


def _chat_in(partition: int) -> int:
    return next(chat for chat in range(1000) if partition_of(conversation_key("c", chat), PARTITIONS) == partition)


async def test_any_replica_reads_every_partitions_desk(client: Redis) -> None:
    entries = []
    for partition, (run, ended) in enumerate([("acme/r1", 300.0), ("acme/r2", 100.0), ("other/r3", 200.0)]):
        chat = _chat_in(partition)
        entry = test_desk._entry(run, ended_at=ended, target={"chat_id": chat, "thread_id": None, "reply_to": None})
        await (await _owned(client, partition)).record_undelivered([entry])
        entries.append(entry)
    shared = SharedDesk(client, PARTITIONS)
    assert [e.run for e in await shared.deliveries()] == ["acme/r2", "other/r3", "acme/r1"]  # oldest end first
    assert [e.run for e in await shared.deliveries(client="acme")] == ["acme/r2", "acme/r1"]
    assert (await shared.delivery_counts())[DeskState.FAILED] == 3
    assert (await shared.delivery_counts(client="other"))[DeskState.FAILED] == 1
    assert [await shared.partition(e.id) for e in entries] == [0, 1, 2]
    assert await shared.partition("dlv-000000000000") is None
    found = await shared.delivery(entries[1].id)
    assert found is not None and found.run == "acme/r2"
    await shared.save_delivery(dataclasses.replace(found, state=DeskState.RESOLVED, note="by hand"))
    assert (await RedisLedger(client, 1).deliveries(set(DeskState)))[0].state is DeskState.RESOLVED
    assert await shared.prune_deliveries(250.0) == 2  # r2 and r3 ended before 250
    assert [e.run for e in await shared.deliveries(set(DeskState))] == ["acme/r1"]
