"""Epoch markers: how a replica tells that Redis lost its data under it.

A Redis restarted without persistence (or flushed, or failed over to a replica the data never reached) comes back
empty and answers every command as if nothing had happened: the run index, the journals, the ledgers and the fencing
tokens are gone, so lines appended there would be answered 200 and go nowhere. At start-up a replica writes one
random marker per partition (``sr:{p7}:epoch``, ``SET NX``: the first replica started on this Redis chooses it, the
others read it) and remembers them. Every input append checks its partition's marker in the same script
(:meth:`adapters.redis.InputStream.append_open`), and ``/readyz`` reads them all: a marker gone or changed is
:class:`adapters.redis.errors.DataLostError`, answered 503 and logged, never 200.

A failover keeps them: with replicas to wait for, the markers (like every durable write) are on a replica before they
are relied on (:class:`adapters.redis.client.Durability`), so the promoted replica answers the same markers.

A replica started after the loss writes new markers: it works on the empty Redis, while the replicas from before go
on refusing until they are restarted (an operator's decision: the runs in flight there are lost).
"""

from __future__ import annotations

import secrets

from streamrelay.adapters.redis.client import Redis, durability_of
from streamrelay.adapters.redis.errors import DataLostError
from streamrelay.adapters.redis.keys import KEYS, KeySpace


class Epochs:
    """The epoch markers of ``partitions`` partitions as this replica found them at start-up.

    Args:
        client: the Redis client (not closed here).
        partitions: P.
        keys: the key space.
    """

    def __init__(self, client: Redis, partitions: int, keys: KeySpace = KEYS) -> None:
        self._client = client
        self._partitions = partitions
        self._keys = keys
        self.known: dict[int, str] = {}
        """partition -> its marker as this replica found it (empty before :meth:`claim`)."""

    def __repr__(self) -> str:
        return f"Epochs(partitions={self._partitions}, claimed={bool(self.known)})"

    async def claim(self) -> dict[int, str]:
        """Set each partition's marker where there is none (a new value for this start) and remember every marker
        (one pipeline, no transaction: each key is in its own partition's slot). With replicas to wait for
        (:class:`adapters.redis.client.Durability`) the pipeline ends with ``WAIT``: a marker is on a replica
        before it is relied on, so a promoted replica holds the same markers and is not read as "Redis lost its
        data".

        Raises:
            NotReplicatedError: fewer replicas than needed acknowledged the markers.
            redis.exceptions.RedisError: Redis failed.
        """
        mine = secrets.token_hex(8)
        durability = durability_of(self._client)
        async with self._client.pipeline(transaction=False) as pipe:
            for p in range(self._partitions):
                pipe.set(self._keys.epoch(p), mine, nx=True)
            for p in range(self._partitions):
                pipe.get(self._keys.epoch(p))
            if durability is not None and durability.active:
                replies = await durability.execute(pipe, "epoch.claim")
            else:
                replies = await pipe.execute()
        markers = self._partitions  # the GETs' replies follow the SETs'
        self.known = {p: str(replies[markers + p]) for p in range(self._partitions) if replies[markers + p] is not None}
        return self.known

    def of(self, partition: int) -> str:
        """The marker an append to ``partition`` must find ('' before :meth:`claim`: not checked)."""
        return self.known.get(partition, "")

    async def check(self) -> None:
        """Read every marker.

        Raises:
            DataLostError: a marker is gone or is not the one found at start-up.
            redis.exceptions.RedisError: Redis failed.
        """
        if not self.known:
            return
        async with self._client.pipeline(transaction=False) as pipe:
            for p in self.known:
                pipe.get(self._keys.epoch(p))
            replies = await pipe.execute()
        lost = [p for (p, want), got in zip(self.known.items(), replies, strict=True) if got != want]
        if lost:
            raise DataLostError(lost)
