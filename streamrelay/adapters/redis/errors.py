"""Errors of the Redis backend.

::

    OwnershipLostError (core.errors)
      FencedError(partition, token, current)   a write by an owner whose lease was granted to another since
    NotDirectError(partition, reason)          a front's direct journal append refused before any write
      StoreUnavailableError (core.errors)
        DataLostError(partitions)              Redis lost its data (restarted empty, flushed): nothing is taken
        NotReplicatedError(name, acks, needed) a durable write no replica acknowledged in time
          StalePrimaryError(name, acks, needed, node, named)
                                               a durable write on a lone primary the sentinels do not name
"""

from __future__ import annotations

from streamrelay.core.errors import OwnershipLostError, StoreUnavailableError


class FencedError(OwnershipLostError):
    """A write was refused: the partition's fencing token is no longer the writer's.

    Another replica was granted the partition's lease since (the writer was paused, partitioned away, or its lease
    expired): nothing of the write was applied. The writer must stop working on the partition; what it sent to a
    platform meanwhile is an intent without an outcome, settled by the new owner.

    Attributes:
        partition: the partition written to.
        token: the writer's fencing token (None: a read-only handle was asked to write).
        current: the partition's current fencing token (None: never granted).
    """

    def __init__(self, partition: int, token: int | None, current: int | None) -> None:
        held = "no token (read-only)" if token is None else f"token {token}"
        super().__init__(f"partition {partition}: write refused, the writer holds {held}, the current is {current}")
        self.partition = partition
        self.token = token
        self.current = current


class NotDirectError(Exception):
    """A direct journal append (:meth:`adapters.redis.RedisJournal.append` with ``direct=``: the front of a replica
    that owns the run's partition journaling a request's lines itself, without the input stream) was refused before
    it wrote anything, because the lines must go through the partition's input stream instead: the stream holds
    entries not journaled yet (lines answered 200 before these may be among them, and must be taken first), a run of
    the batch has its stop or idle-close mark (the stream's append answers those lines), or the partition's epoch
    marker is not the one this replica found (the stream's append reports Redis's data loss). The caller appends the
    same lines to the input stream (:meth:`adapters.redis.InputStream.append_open`).

    Attributes:
        partition: the partition.
        reason: ``behind``, ``marked`` or ``lost``.
    """

    def __init__(self, partition: int, reason: str) -> None:
        super().__init__(f"partition {partition}: lines not journaled directly ({reason}): through the input stream")
        self.partition = partition
        self.reason = reason


class DataLostError(StoreUnavailableError):
    """Redis no longer holds what this replica wrote (its epoch markers, :class:`adapters.redis.Epochs`, are gone or
    are another start's): it restarted without persistence, failed over to a replica that had not received the data,
    or was flushed. The runs in flight, their journals, ledgers and fencing tokens are gone with it: nothing is taken
    (ingest answers 503) until an operator restores Redis's data or restarts the replicas on the empty Redis.

    Attributes:
        partitions: the partitions whose marker is missing or not this replica's.
    """

    def __init__(self, partitions: list[int]) -> None:
        shown = ", ".join(str(p) for p in partitions[:8]) + (" ..." if len(partitions) > 8 else "")
        super().__init__(
            f"Redis lost its data (the epoch marker of partition {shown} is gone or another start's: restarted "
            "without persistence, failed over without the data, or flushed): runs in flight there are lost and "
            "nothing is taken; restore Redis's data, or restart every replica to start afresh on the empty Redis"
        )
        self.partitions = partitions


class NotReplicatedError(StoreUnavailableError):
    """A write that must survive a failover (a lease grant, a ledger intent, an accepted line) is on the primary but
    fewer replicas than needed acknowledged it within the timeout (``WAIT``): it is not counted done. A lease grant
    is not used (it expires), an intent's call is not made (the run stops and resumes from the journal), a batch of
    lines is answered 503 (the agent sends it again; a line that got in twice is acknowledged without effect, as any
    repeated ``seq``).

    With ``sent=False`` the write was not sent at all: the primary was found alone first, nothing was applied.

    Attributes:
        name: the write (``ledger.record_intent``).
        acks: how many replicas acknowledged it.
        needed: how many were waited for.
    """

    def __init__(self, name: str, acks: int, needed: int, timeout_ms: int, *, sent: bool = True) -> None:
        super().__init__(
            f"Redis: {name} was acknowledged by {acks} of {needed} replicas within {timeout_ms} ms: not counted "
            "durable (a failover now could lose it); is a replica down or lagging?"
            if sent
            else f"Redis: {name} was not sent: the primary has no replica online of the {needed} wanted (a write on "
            "it alone could be lost to the next failover); is a replica down or resynchronising?"
        )
        self.name = name
        self.acks = acks
        self.needed = needed


class StalePrimaryError(NotReplicatedError):
    """A durable write went to a primary that has no replica online and that the sentinels do not name (or none of
    them answered): a primary a failover left behind (frozen or partitioned away while its replica was promoted, or
    killed and started again, which makes it a primary of its own until the sentinels turn it into a replica and
    its data is replaced by the promoted one's). Its writes are not counted durable (no write counts on a primary
    alone); the connection to it is dropped (the next one asks the sentinels where the primary is).

    Attributes:
        name: the write (``ledger.record_intent``).
        acks: how many replicas acknowledged it (``WAIT``'s answer: 0 unless one went offline meanwhile).
        needed: how many it wanted (the client's ``replicas``).
        node: ``host:port`` the write went to.
        named: ``host:port`` the sentinels name ("" when none answered).
    """

    def __init__(self, name: str, acks: int, needed: int, *, node: str, named: str) -> None:
        StoreUnavailableError.__init__(
            self,
            f"Redis: the durable write {name} went to {node}, a primary with no replica online that the sentinels do "
            f"not name (they name {named or 'none'}): not counted durable (a primary a failover left behind loses its "
            "writes when it rejoins as a replica)",
        )
        self.name = name
        self.acks = acks
        self.needed = needed
        self.node = node
        self.named = named
