"""The desk of every partition together (:class:`core.records.desk.DeliveryDesk`): what any replica lists, shows,
resolves and prunes of the ended runs' undelivered parts (docs/deliveries.md).

Each partition's owner writes its runs' entries into the partition's own ledger (``sr:{p7}:l:desk``, fenced:
:class:`adapters.redis.RedisLedger`); an operator's request reaches whichever replica a load balancer picks, so this
view reads them all, from Redis, on any replica: a listing merges the partitions' entries (oldest run end first), an
entry is found by its id in the partition that holds it, a resolve or a prune writes there (unfenced: an operator's
write about an ended run, as one process's desk does). A resend is not done here: it is the run's partition owner's
(:mod:`app.replicas.ended`), found with :meth:`SharedDesk.partition`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence

from streamrelay.adapters.redis.client import Redis, unavailable
from streamrelay.adapters.redis.keys import KEYS, KeySpace, conversation_key, partition_of
from streamrelay.adapters.redis.ledger import RedisLedger
from streamrelay.core.records.desk import OPEN_STATES, DeskEntry, DeskState, counts_of


class SharedDesk:
    """The desk entries of all ``partitions`` partitions (module docstring).

    Args:
        client: from :func:`adapters.redis.client.connect` (not closed here).
        partitions: P, as every replica counts them.
        keys: the key space.
    """

    def __init__(self, client: Redis, partitions: int, *, keys: KeySpace = KEYS) -> None:
        self._client = client
        self._keys = keys
        self.partitions = partitions
        self._ledgers = [RedisLedger(client, p, keys=keys) for p in range(partitions)]  # read-only: no token

    def __repr__(self) -> str:
        return f"SharedDesk(partitions={self.partitions})"

    def partition_of(self, entry: DeskEntry) -> int:
        """The partition of ``entry``'s run: its conversation's (channel and chat), as the run's ``run.start`` chose
        it (:meth:`app.replicas.front.ReplicaFront`)."""
        return partition_of(conversation_key(entry.channel, str(entry.target["chat_id"])), self.partitions)

    async def partition(self, entry_id: str) -> int | None:
        """The partition whose desk holds ``entry_id`` (one ``HEXISTS`` per partition, in one pipeline), or None.

        Raises:
            StoreUnavailableError: Redis did not answer.
        """
        with unavailable("desk read"):
            async with self._client.pipeline(transaction=False) as pipe:
                for p in range(self.partitions):
                    pipe.hexists(self._keys.ledger(p, "desk"), entry_id)
                found = await pipe.execute()
        return next((p for p, there in enumerate(found) if there), None)

    async def record_undelivered(self, entries: Sequence[DeskEntry]) -> None:
        """Not here: a run's owner keeps its entries through its fenced ledger.

        Raises:
            NotImplementedError: always.
        """
        raise NotImplementedError("a run's undelivered parts are written by its partition's owner (RedisLedger)")

    async def deliveries(
        self, states: Collection[DeskState] = OPEN_STATES, *, client: str | None = None, limit: int = 1000
    ) -> list[DeskEntry]:
        """Every partition's entries in ``states`` (of ``client`` only, when given), oldest run end first."""
        found = await asyncio.gather(
            *(ledger.deliveries(states, client=client, limit=limit) for ledger in self._ledgers)
        )
        merged = [entry for entries in found for entry in entries]
        return sorted(merged, key=lambda e: (e.ended_at, e.run, e.slot))[:limit]

    async def delivery(self, entry_id: str) -> DeskEntry | None:
        """One entry by its id, from the partition that holds it, or None."""
        partition = await self.partition(entry_id)
        return None if partition is None else await self._ledgers[partition].delivery(entry_id)

    async def save_delivery(self, entry: DeskEntry) -> None:
        """Write ``entry`` as it now stands, in its run's partition (not fenced: an operator's write)."""
        await self._ledgers[self.partition_of(entry)].save_delivery(entry)

    async def prune_deliveries(self, ended_before_s: float, *, client: str | None = None) -> int:
        """Delete every partition's entries of runs that ended before ``ended_before_s``; how many went."""
        pruned = await asyncio.gather(
            *(ledger.prune_deliveries(ended_before_s, client=client) for ledger in self._ledgers)
        )
        return sum(pruned)

    async def delivery_counts(self, *, client: str | None = None) -> dict[DeskState, int]:
        """Every partition's entries per state (of ``client`` only, when given)."""
        found = await asyncio.gather(*(ledger.delivery_counts(client=client) for ledger in self._ledgers))
        counts = counts_of([])
        for each in found:
            for state, n in each.items():
                counts[state] += n
        return counts


__all__ = ["SharedDesk"]
