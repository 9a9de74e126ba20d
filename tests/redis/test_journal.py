"""The Redis journal keeps MemoryJournal's semantics (the same assertions run on both), is fenced like the ledger,
and takes input-stream entries exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from streamrelay.adapters.redis import FencedError, InputStream, Leases, RedisJournal
from streamrelay.adapters.redis.client import Redis
from streamrelay.core.records.journal import EndedRun, Journal, JournalEntry, MemoryJournal

MakeJournal = Callable[[int], Journal]


@pytest.fixture(params=["memory", "redis"])
def make_journal(request: pytest.FixtureRequest) -> MakeJournal:
    """A factory ``make(keep_ended) -> Journal``: MemoryJournal, or a RedisJournal of partition 3."""
    if request.param == "memory":
        return lambda keep_ended: MemoryJournal(keep_ended=keep_ended)
    client: Redis = request.getfixturevalue("client")
    return lambda keep_ended: RedisJournal(client, 3, keep_ended=keep_ended)


def entries(*pairs: tuple[str, str]) -> list[JournalEntry]:
    return [JournalEntry(run, line) for run, line in pairs]


async def test_lines_come_back_per_run_in_order_and_runs_oldest_first(make_journal: MakeJournal) -> None:
    journal = make_journal(100_000)
    await journal.append(entries(("b", '{"n":1}'), ("a", '{"n":2}'), ("b", '{"n":3}')))
    await journal.append(entries(("c", '{"n":4}'), ("a", '{"n":5}')))
    await journal.append([])
    assert await journal.unfinished() == ["b", "a", "c"]
    assert await journal.lines("b") == ['{"n":1}', '{"n":3}']
    assert await journal.lines("a") == ['{"n":2}', '{"n":5}']
    assert await journal.lines("nobody") == []
    await journal.close()


async def test_last_at_is_the_newest_lines_time(make_journal: MakeJournal) -> None:
    journal = make_journal(100_000)
    assert await journal.last_at("a") is None
    await journal.append(entries(("a", "1")))
    first = await journal.last_at("a")
    await asyncio.sleep(0.01)
    await journal.append(entries(("a", "2")))
    second = await journal.last_at("a")
    assert first is not None and second is not None and second > first
    await journal.finish("a", 2)
    assert await journal.last_at("a") is None


async def test_a_finished_run_keeps_only_its_last_seq(make_journal: MakeJournal) -> None:
    journal = make_journal(100_000)
    await journal.append(entries(("a", "1"), ("b", "1")))
    assert await journal.ended("a") is None
    await journal.finish("a", 7)
    await journal.finish("b", None)
    assert await journal.ended("a") == EndedRun("a", 7)
    assert await journal.ended("b") == EndedRun("b", None)
    assert await journal.unfinished() == []
    assert await journal.lines("a") == []
    await journal.append(entries(("a", "late")))  # lines after the end start it again; its end stays known
    assert await journal.unfinished() == ["a"] and await journal.lines("a") == ["late"]
    assert await journal.ended("a") == EndedRun("a", 7)


async def test_the_oldest_ended_runs_are_forgotten_first(make_journal: MakeJournal) -> None:
    journal = make_journal(2)
    for run in ("a", "b"):
        await journal.finish(run, 1)
    await journal.finish("a", 2)  # finished again: a keeps its place (the oldest)
    await journal.finish("c", 1)
    assert [await journal.ended(r) for r in ("a", "b", "c")] == [None, EndedRun("b", 1), EndedRun("c", 1)]


async def test_a_stale_owners_journal_writes_are_refused(client: Redis) -> None:
    leases = Leases(client)
    old = await leases.acquire(3, "old", 50)
    assert old == 1
    journal = RedisJournal(client, 3).fenced(old)
    await journal.append(entries(("a", "1")))
    while await leases.holder(3) is not None:  # the old owner is paused past its lease
        await asyncio.sleep(0.02)
    assert await leases.acquire(3, "new", 10_000) == 2
    with pytest.raises(FencedError) as refused:
        await journal.append(entries(("a", "2")))
    assert (refused.value.partition, refused.value.token, refused.value.current) == (3, 1, 2)
    with pytest.raises(FencedError):
        await journal.finish("a", 2)
    assert await journal.lines("a") == ["1"] and await journal.ended("a") is None
    await journal.fenced(2).append(entries(("a", "2")))
    assert await journal.lines("a") == ["1", "2"]


async def test_an_append_acknowledges_the_stream_entries_it_journals(client: Redis) -> None:
    stream = InputStream(client)
    await stream.append(3, entries(("a", "1"), ("a", "2")))
    read = await stream.read(3, "owner")
    journal = RedisJournal(client, 3, token=None)
    await journal.append([e.entry() for e in read], acks=[e.id for e in read])
    assert await journal.lines("a") == ["1", "2"]
    assert await stream.pending(3) == [] and await stream.length(3) == 0
    assert await stream.claim(3, "next") == []  # a new owner finds nothing to journal twice
