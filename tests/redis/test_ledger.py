"""The Redis ledger keeps MemoryLedger's semantics (the same assertions run on both) and refuses every write of an
owner whose lease was granted to another since: the paused-owner case."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from streamrelay.adapters.redis import FencedError, Leases, RedisLedger
from streamrelay.adapters.redis.client import Redis
from streamrelay.core.ports import PendingSend, TextFormat
from streamrelay.core.records.ledger import Ledger, MemoryLedger, PartRecord, RunRecord
from streamrelay.core.records.report import PartState, SlotRole

MakeLedger = Callable[[], Awaitable[Ledger]]


@pytest.fixture(params=["memory", "redis"])
def make_ledger(request: pytest.FixtureRequest) -> MakeLedger:
    """A factory of an empty ledger: MemoryLedger, or partition 2's RedisLedger for the owner of its lease."""

    async def memory() -> Ledger:
        return MemoryLedger()

    if request.param == "memory":
        return memory
    client: Redis = request.getfixturevalue("client")

    async def fenced() -> Ledger:
        token = await Leases(client).acquire(2, "owner", 10_000)
        assert token is not None
        return RedisLedger(client, 2).fenced(token)

    return fenced


def new_run() -> RunRecord:
    """A fresh record (MemoryLedger keeps and updates the object it is given)."""
    return RunRecord(run="r", channel="telegram", target={"chat_id": -100, "thread_id": 4}, mode="preview")


CREATE = PendingSend("d-1", "Hello", TextFormat.STRIPPED, after_id="41", before_id=None)


async def test_runs_start_once_and_end_with_their_errors(make_ledger: MakeLedger) -> None:
    ledger = await make_ledger()
    assert await ledger.get_run("r") is None
    await ledger.start_run(new_run())
    await ledger.start_run(RunRecord(run="r", channel="slack", target={"channel": "C1"}, mode="block"))
    assert await ledger.get_run("r") == new_run()  # a replayed run.start keeps the first record
    await ledger.end_run("r", "failed", ["telegram: 403 Forbidden"])
    assert await ledger.get_run("r") == RunRecord(
        run="r",
        channel="telegram",
        target={"chat_id": -100, "thread_id": 4},
        mode="preview",
        end_status="failed",
        ended=True,
        errors=["telegram: 403 Forbidden"],
    )
    await ledger.end_run("nobody", "ok")
    assert await ledger.get_run("nobody") is None
    await ledger.close()


async def test_a_create_is_pending_from_its_intent_until_its_outcome(make_ledger: MakeLedger) -> None:
    ledger = await make_ledger()
    await ledger.start_run(new_run())
    call = await ledger.record_intent("r", 0, SlotRole.ANSWER, "send", "Hello", pending=CREATE)
    assert await ledger.parts("r") == [PartRecord(run="r", slot=0, role=SlotRole.ANSWER, pending=CREATE)]
    acked = PartRecord(run="r", slot=0, role=SlotRole.ANSWER, state=PartState.ACKED, message_id="42", shown="Hello")
    await ledger.record_outcome(call, acked, "ack")
    assert await ledger.parts("r") == [acked]  # the outcome's part has no pending create: it is cleared


async def test_an_intent_without_a_create_leaves_the_part_alone(make_ledger: MakeLedger) -> None:
    ledger = await make_ledger()
    shown = PartRecord(run="r", slot=1, role=SlotRole.ANSWER, state=PartState.ACKED, message_id="7", shown="Hi")
    await ledger.save_part(shown)
    edit = await ledger.record_intent("r", 1, SlotRole.ANSWER, "edit", "Hi there")
    assert await ledger.parts("r") == [shown]
    again = PendingSend("d-2", "Hi there", TextFormat.PLAIN)
    await ledger.record_intent("r", 1, SlotRole.ANSWER, "send", "Hi there", pending=again)
    [part] = await ledger.parts("r")
    assert (part.message_id, part.shown, part.pending) == ("7", "Hi", again)  # only the pending create is set
    await ledger.record_outcome(edit, PartRecord(run="r", slot=1, role=SlotRole.ANSWER, state=PartState.FAILED), "x")
    assert [p.state for p in await ledger.parts("r")] == [PartState.FAILED]


async def test_every_field_of_a_part_comes_back(make_ledger: MakeLedger) -> None:
    ledger = await make_ledger()
    parts = [
        PartRecord(
            run="r",
            slot=2,
            role=SlotRole.REASONING,
            state=PartState.UNCERTAIN,
            message_id="m-9",
            shown="thinking…",
            degraded=True,
            error="timed out",
            streaming=True,
            pending=CREATE,
            unbounded=PendingSend("d-3", "lost?", TextFormat.MARKDOWN, after_id="8", before_id="12"),
            stray="m-10",
            frozen=True,
            continues=1,
        ),
        PartRecord(run="r", slot=0, role=SlotRole.STATUS, state=PartState.SKIPPED),
        PartRecord(run="r", slot=10, role=SlotRole.NOTICE, state=PartState.ACKED, message_id="3", shown="⚠️ failed"),
        PartRecord(run="other", slot=0, role=SlotRole.ANSWER),
    ]
    for part in parts:
        await ledger.save_part(part)
    assert await ledger.parts("r") == sorted(parts[:3], key=lambda p: p.slot)
    assert await ledger.parts("other") == parts[3:]
    assert await ledger.parts("nobody") == []


async def test_a_paused_owner_cannot_write_after_a_takeover(client: Redis) -> None:
    leases = Leases(client)
    old_token = await leases.acquire(2, "old", 50)
    assert old_token == 1
    old = RedisLedger(client, 2).fenced(old_token)
    await old.start_run(new_run())
    call = await old.record_intent("r", 0, SlotRole.ANSWER, "send", "Hello", pending=CREATE)

    while await leases.holder(2) is not None:  # the old owner is paused (SIGSTOP) past its lease...
        await asyncio.sleep(0.02)
    new_token = await leases.acquire(2, "new", 10_000)
    assert new_token == 2  # ...and another replica took the partition
    new = RedisLedger(client, 2).fenced(new_token)
    settled = PartRecord(run="r", slot=0, role=SlotRole.ANSWER, state=PartState.ACKED, message_id="42", shown="Hello")
    await new.record_outcome(call, settled, "ack")
    before = (await new.get_run("r"), await new.parts("r"), await new.calls("r"))

    # the old owner resumes: every write it tries is refused and changes nothing
    doubled = PartRecord(run="r", slot=0, role=SlotRole.ANSWER, state=PartState.ACKED, message_id="43", shown="Hello")
    writes: list[Callable[[], Awaitable[object]]] = [
        lambda: old.start_run(RunRecord(run="r2", channel="c", target={}, mode="block")),
        lambda: old.end_run("r", "ok"),
        lambda: old.record_intent("r", 1, SlotRole.ANSWER, "send", "again", pending=CREATE),
        lambda: old.save_part(doubled),
        lambda: old.record_outcome(call, doubled, "ack"),
    ]
    for write in writes:
        with pytest.raises(FencedError) as refused:
            await write()
        assert (refused.value.partition, refused.value.token, refused.value.current) == (2, 1, 2)
    assert (await new.get_run("r"), await new.parts("r"), await new.calls("r")) == before
    assert await new.get_run("r2") is None


async def test_a_read_only_ledger_reads_and_never_writes(client: Redis) -> None:
    token = await Leases(client).acquire(2, "owner", 10_000)
    assert token is not None
    await RedisLedger(client, 2).fenced(token).start_run(new_run())
    reader = RedisLedger(client, 2)
    assert await reader.get_run("r") == new_run()
    with pytest.raises(FencedError, match="read-only"):
        await reader.end_run("r", "ok")
    assert repr(reader) == "RedisLedger(partition=2, token=None)"


async def test_calls_keep_their_intent_and_outcome(client: Redis) -> None:
    token = await Leases(client).acquire(2, "owner", 10_000)
    assert token is not None
    ledger = RedisLedger(client, 2).fenced(token)
    first = await ledger.record_intent("r", 0, SlotRole.ANSWER, "send", "Hello")
    second = await ledger.record_intent("r", 0, SlotRole.ANSWER, "edit", "Hello, world")
    part = PartRecord(run="r", slot=0, role=SlotRole.ANSWER, state=PartState.UNCERTAIN)
    await ledger.record_outcome(first, part, "uncertain", "timeout " * 500)
    calls = await ledger.calls("r")
    assert [(c["id"], c["op"], c["chars"], c["outcome"]) for c in calls] == [
        (first, "send", 5, "uncertain"),
        (second, "edit", 12, None),
    ]
    assert len(calls[0]["detail"]) == 2000  # as the SQLite ledger keeps it
