"""Key names of the Redis backend: one hash tag per partition, so every Lua script stays in one slot.

Redis Cluster sends a key to the slot of its *hash tag*, the text between the first ``{`` and the next ``}``
(https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#hash-tags). Every key of partition
7 carries ``{p7}``: its lease, its fencing token, its input stream, its journal and its ledger all live in one
slot, so one script can check the fencing token and write the ledger atomically, on one server or a cluster.
Rate budgets are not per partition (a bot's budget is shared by every conversation): each budget scope has its
own tag, ``{rate:telegram:bot}``. The replicas' heartbeats share ``{replicas}``.

Layout (prefix ``sr``, partition 7)::

    sr:{p7}:lease           the owner's lease: "<token>:<owner>", PX ttl
    sr:{p7}:fence           the fencing token: incremented at every grant (INCR), never decreases
    sr:{p7}:epoch           the epoch marker: a random value the first replica started sets (Redis lost its data
                            when it is gone or changed under a running replica)
    sr:{p7}:in              the input stream (XADD by any replica, XREADGROUP by the owner)
    sr:{p7}:dead            its dead letters
    sr:{p7}:stop:<run>      a run of the partition its reader stopped (every front refuses its later lines)
    sr:{p7}:j:...           the journal (RedisJournal)
    sr:{p7}:l:...           the ledger (RedisLedger)
    sr:{rate:<scope>}:tat   a budget's GCRA state; :pause its 429 pause; :finals the finals waiting on it
    sr:{replicas}           live replicas (a sorted set: owner -> heartbeat deadline)
    sr:{replicas}:gone      replicas whose heartbeat lapsed (owner -> the lapsed deadline), kept an hour
    sr:{c:<client>}:active  a client's active runs over every replica; :tat its events_per_s (client_limits.py)
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

DEFAULT_PREFIX = "sr"


def partition_of(conversation_key: str, partitions: int) -> int:
    """The partition of a conversation: CRC-32 of its key modulo ``partitions`` (stable across processes,
    Python versions and machines, unlike ``hash()``).

    Args:
        conversation_key: what identifies the conversation, e.g. ``telegram/-1001234`` (see
            :func:`conversation_key`): every run to one chat lands in one partition, so one owner holds the chat's
            send chain (its order, its newest message id, its 429 pause).
        partitions: P, the number of partitions (fixed for a deployment: changing it moves conversations).

    Raises:
        ValueError: ``partitions < 1``.
    """
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    return zlib.crc32(conversation_key.encode()) % partitions


def conversation_key(channel: str, chat_id: str | int) -> str:
    """The conversation key of a chat on a channel (threads of one chat share it: they share its budgets)."""
    return f"{channel}/{chat_id}"


@dataclass(frozen=True)
class KeySpace:
    """Key names under one prefix (several deployments may share one Redis with different prefixes).

    Raises:
        ValueError: the prefix holds ``{`` or ``}`` (it would move the hash tag).
    """

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if "{" in self.prefix or "}" in self.prefix:
            raise ValueError(f"a key prefix may not hold braces: {self.prefix!r}")

    def partition(self, partition: int) -> str:
        """The common start of every key of ``partition``: ``sr:{p7}``."""
        if partition < 0:
            raise ValueError(f"partition must be >= 0, got {partition}")
        return f"{self.prefix}:{{p{partition}}}"

    def lease(self, partition: int) -> str:
        return f"{self.partition(partition)}:lease"

    def fence(self, partition: int) -> str:
        return f"{self.partition(partition)}:fence"

    def epoch(self, partition: int) -> str:
        """The partition's epoch marker (:class:`adapters.redis.Epochs`)."""
        return f"{self.partition(partition)}:epoch"

    def inbox(self, partition: int) -> str:
        """The partition's input stream."""
        return f"{self.partition(partition)}:in"

    def dead(self, partition: int) -> str:
        """The partition's dead-letter stream."""
        return f"{self.partition(partition)}:dead"

    def stopped(self, partition: int, run: str) -> str:
        """The mark of ``run`` (a run key of ``partition``) stopped by its reader: in the partition's slot, so the
        input stream's append checks it atomically (:meth:`adapters.redis.InputStream.append_open`)."""
        return f"{self.partition(partition)}:stop:{run}"

    def idle_closed(self, partition: int, run: str) -> str:
        """The mark of ``run`` (a run key of ``partition``) closed by the idle timeout, holding the last ``seq`` it
        took ('' for none): in the partition's slot, so the input stream's append checks it atomically
        (:meth:`adapters.redis.InputStream.close_idle`)."""
        return f"{self.partition(partition)}:idle:{run}"

    def journal(self, partition: int, name: str) -> str:
        """A journal key of ``partition`` (``name`` may end with a run id)."""
        return f"{self.partition(partition)}:j:{name}"

    def ledger(self, partition: int, name: str) -> str:
        """A ledger key of ``partition`` (``name`` may end with a run id)."""
        return f"{self.partition(partition)}:l:{name}"

    def budget(self, scope: str, name: str) -> str:
        """A key of the rate budget ``scope`` (e.g. ``telegram:bot``, ``telegram:chat:42``).

        Raises:
            ValueError: ``scope`` is empty or holds ``{`` or ``}``.
        """
        if not scope or "{" in scope or "}" in scope:
            raise ValueError(f"a budget scope must be non-empty without braces: {scope!r}")
        return f"{self.prefix}:{{rate:{scope}}}:{name}"

    @property
    def replicas(self) -> str:
        """The live replicas: a sorted set of owner ids scored by their heartbeat deadline (ms)."""
        return f"{self.prefix}:{{replicas}}"

    @property
    def replicas_gone(self) -> str:
        """The replicas whose heartbeat lapsed (killed, never left): a sorted set of owner ids scored by the deadline
        they missed (ms), kept :data:`adapters.redis.lease.GONE_KEPT_MS` (a graceful leave is not listed)."""
        return f"{self.prefix}:{{replicas}}:gone"


KEYS = KeySpace()
"""The default key space (prefix ``sr``)."""
