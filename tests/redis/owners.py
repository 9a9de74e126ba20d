"""What the partition owner tests share: the owner as a replica builds it (:func:`partition_owner`), an input stream
while Redis is down (:class:`DownFor`), and the answer they stream (:data:`ANSWER`, :func:`answer_entries`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError

from streamrelay.adapters.redis import InputEntry, InputStream, Leases, RedisJournal, RedisLedger
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.replicas.owner import AckingJournal, PartitionOwner
from streamrelay.core.records.journal import JournalEntry
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.relay import Relay


class DownFor(InputStream):
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


async def partition_owner(
    client: Redis,
    partition: int,
    make_relay: Callable[[Ledger, AckingJournal], Relay],
    *,
    token: int | None = None,
    name: str = "replica-a",
    stream: InputStream | None = None,
    journal: RedisJournal | None = None,
    lease_ms: int = 30_000,
) -> PartitionOwner:
    """``partition``'s owner ``name`` as a replica builds it, holding the grant ``token`` (None: the partition's lease
    acquired now for ``lease_ms``; its reads, claims and writes are fenced: they need the grant's token).
    ``stream`` by default one whose reads never block (see :meth:`DownFor.read`), ``journal`` the partition's."""
    if token is None:
        token = await Leases(client).acquire(partition, name, lease_ms)
        assert token is not None
    return PartitionOwner(
        partition,
        token,
        owner=name,
        stream=stream if stream is not None else DownFor(client, reads=0, claims=0),
        journal=journal if journal is not None else RedisJournal(client, partition),
        ledger=RedisLedger(client, partition),
        make_relay=make_relay,
    )


ANSWER = ["First paragraph of the answer.", "Second paragraph of the answer.", "Third and last one."]
"""The answer the owner tests stream: three paragraphs, one text line each."""


def answer_entries(run: str, chat_id: int) -> list[JournalEntry]:
    """``run``'s whole input as journal entries: its start (channel ``chat``), :data:`ANSWER`, its end."""
    lines: list[dict[str, object]] = [
        {"kind": "run.start", "run": run, "channel": "chat", "target": {"chat_id": chat_id}, "seq": 0}
    ]
    lines += [{"kind": "text", "run": run, "text": p + "\n\n", "seq": i + 1} for i, p in enumerate(ANSWER)]
    lines.append({"kind": "end", "run": run, "status": "ok", "seq": len(ANSWER) + 1})
    return [JournalEntry(run, json.dumps(line)) for line in lines]
