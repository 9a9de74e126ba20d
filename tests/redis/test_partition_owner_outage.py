"""A partition's owner keeps reading its input through a Redis outage longer than one retry: a failure while it takes
its pending entries again must not end its task (the lease lives on, so no other replica would read the partition:
every run of it stayed pending until the replica restarted)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

import app.replicas.owner as owner_module
from adapters.redis import InputEntry, InputStream, RedisJournal, RedisLedger
from adapters.redis.client import Redis
from app.replicas.owner import AckingJournal, PartitionOwner
from core.admission import LineResult
from core.journal import JournalEntry
from core.ledger import Ledger
from core.relay import Relay

PARTITION = 2


class _DownFor(InputStream):
    """The partition's stream while Redis is down: the first ``reads`` reads and the ``claims`` claims after the
    owner's start-up fail as a closed connection does."""

    def __init__(self, client: Redis, *, reads: int, claims: int) -> None:
        super().__init__(client)
        self.reads, self.claims, self.started = reads, claims, False

    async def read(self, partition: int, consumer: str, **kwargs: Any) -> list[InputEntry]:
        if self.reads:
            self.reads -= 1
            raise RedisConnectionError("Connection closed by server.")
        # Never a blocking XREADGROUP here: cancelling one (the owner's stop) can hang in redis-py 8.1 (about one
        # cancel in 50 to 100 of a read blocked on the server); the owner's loop is what is tested, not that read.
        entries = await super().read(partition, consumer, count=kwargs.get("count", 100), block_ms=None)
        if not entries:
            await asyncio.sleep(0.02)
        return entries

    async def claim(self, partition: int, consumer: str, **kwargs: Any) -> list[InputEntry]:
        if self.started and self.claims:
            self.claims -= 1
            raise RedisConnectionError("Error 111 connecting to 127.0.0.1. Connection refused.")
        self.started = True
        return await super().claim(partition, consumer, **kwargs)


class _Relay:
    """Takes what the owner hands over (the lines' runs), nothing more."""

    def __init__(self) -> None:
        self.runs: list[str] = []

    async def resume(self) -> list[str]:
        return []

    async def submit_lines(self, lines: Sequence[tuple[Any, str | None]], run_hint: str | None) -> list[LineResult]:
        self.runs += [obj["run"] for obj, _ in lines]
        return [LineResult(events=1) for _ in lines]

    def active_runs(self) -> list[str]:
        return []

    async def stop_runs(self) -> None:
        return None


async def test_the_owner_reads_its_partition_again_after_an_outage_longer_than_one_retry(
    client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(owner_module, "RETRY_S", 0.05)
    stream = _DownFor(client, reads=1, claims=2)
    relay = _Relay()

    def make_relay(ledger: Ledger, journal: AckingJournal) -> Relay:
        return cast(Relay, relay)

    owner = PartitionOwner(
        PARTITION,
        1,
        owner="replica-a",
        stream=stream,
        journal=RedisJournal(client, PARTITION),
        ledger=RedisLedger(client, PARTITION),
        make_relay=make_relay,
    )
    owner.start()
    try:
        await asyncio.wait_for(owner.ready.wait(), 5)
        await asyncio.sleep(0.5)  # the read fails, then two claims of the pending entries fail: Redis is down
        assert owner.task is not None and not owner.task.done()
        await InputStream(client).append(PARTITION, [JournalEntry("run-after", '{"kind": "end", "run": "run-after"}')])
        deadline = asyncio.get_running_loop().time() + 5
        while "run-after" not in relay.runs and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        assert relay.runs == ["run-after"]  # read and handed over once Redis answered again
    finally:
        await owner.stop()
