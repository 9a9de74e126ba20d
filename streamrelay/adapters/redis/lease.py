"""Partition ownership: one owner per partition at a time, through a lease whose every grant is fenced.

A partition's lease is a key ``sr:{p7}:lease`` holding ``"<token>:<owner>"`` with a TTL (``SET NX PX``): only
one replica can hold it. Every grant increments the partition's fencing token (``INCR sr:{p7}:fence``) in the
same script and returns it (once a replica has it, when replicas are waited for: a grant the promoted replica
never saw would be handed out again after a failover); every ledger write checks it (:mod:`.ledger`), so an
owner that was paused past its lease (a GC pause, SIGSTOP, a network partition) and resumes cannot write after a
takeover: its writes raise :class:`~adapters.redis.errors.FencedError`. Renewal and release compare the whole
value first (Lua), so only the holder of that grant can extend or drop it. Pattern:
https://redis.io/docs/latest/develop/clients/patterns/distributed-locks/ and, for the fencing token,
https://martin.kleppmann.com/2016/02/08/how-to-do-distributed-locking.html.

:class:`LeaseKeeper` is the task each replica runs: it heartbeats (so replicas count each other), renews what
it holds every ``ttl/3``, takes free partitions up to a fair share (``ceil(P / live replicas)``), asks for the
extra ones back when replicas join (``SHED``), and reports every change as a :class:`LeaseEvent`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import math
import zlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from redis.exceptions import NoScriptError, RedisError, ResponseError

from streamrelay.adapters.redis.client import FENCE_CHECK, Redis, Script
from streamrelay.adapters.redis.errors import FencedError
from streamrelay.adapters.redis.keys import KEYS, KeySpace
from streamrelay.core.errors import StoreUnavailableError
from streamrelay.core.tasks import stop

log = logging.getLogger(__name__)

_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token .. ':' .. ARGV[1], 'PX', ARGV[2], 'NX')
return token
"""
"""``lease.acquire`` (durable: a fencing token handed out must survive a failover, or the promoted replica hands it
out again). KEYS: the partition's lease, its fencing token counter; ARGV: owner, ttl (ms). Returns the new fencing
token, or nil when the lease is held. Atomic: the check, the increment and the grant are one step, so two owners
never get the lease at once and every grant has a token greater than every earlier one."""

_RENEW = (
    FENCE_CHECK
    + """
-- KEYS: fence, lease; ARGV: token, "<token>:<owner>", ttl ms
if redis.call('GET', KEYS[2]) == ARGV[2] then return redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
return 0
"""
)
"""``lease.renew``: fenced like every write of the owner (:data:`~adapters.redis.client.FENCE_CHECK`): only while the
grant's token is the partition's, and only the holder of that grant's lease value. Either check alone says the same
on a Redis whose keys moved together; the fence is the one every other write of the owner answers to, so a lease
key that outlived a newer grant (restored, or left on a node whose data went back) is never renewed by its stale
holder, which would then go on believing it owns the partition."""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_HEARTBEAT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES')
for i = 1, #lapsed, 2 do redis.call('ZADD', KEYS[2], lapsed[i + 1], lapsed[i]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[3]))
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return redis.call('ZCARD', KEYS[1])
"""
"""KEYS: ``sr:{replicas}``, ``sr:{replicas}:gone``; ARGV: the owner, its ttl (ms), :data:`GONE_KEPT_MS`. A lapsed
heartbeat moves to the gone set with the deadline it missed: who died lately is a fact settling needs
(:meth:`adapters.redis.receipts.RedisReceipts.last_heard_s`: a dead replica may have been the status webhooks'
receiver)."""

GONE_KEPT_MS = 3_600_000
"""How long a replica whose heartbeat lapsed stays in ``sr:{replicas}:gone`` (ms): an hour, past every window that
reads it (``adapters.redis.receipts.DEAD_RECEIVER_S``, 600 s)."""


def _renewed(reply: object) -> bool | Exception:
    """One renewal's reply in :meth:`Leases.renew_many`: a fence refusal (``FENCED``) is a lost lease, as
    :meth:`Leases.renew` says; any other error is given back."""
    if isinstance(reply, ResponseError) and str(reply).startswith("FENCED"):
        return False
    return reply if isinstance(reply, Exception) else bool(reply)


@dataclass(frozen=True)
class Holder:
    """Who holds a partition's lease: ``owner`` with fencing ``token``, for ``ttl_ms`` more milliseconds."""

    owner: str
    token: int
    ttl_ms: int


class Leases:
    """The lease operations on one Redis (each one round trip, atomic).

    Args:
        client: from :func:`adapters.redis.client.connect` (not closed here).
        keys: the key space.
    """

    def __init__(self, client: Redis, keys: KeySpace = KEYS) -> None:
        self._client = client
        self._keys = keys
        self._acquire = Script(client, _ACQUIRE, "lease.acquire", durable=True)
        self._renew = Script(client, _RENEW, "lease.renew")
        self._release = Script(client, _RELEASE, "lease.release")
        self._heartbeat = Script(client, _HEARTBEAT, "lease.heartbeat")

    def __repr__(self) -> str:
        return f"Leases(prefix={self._keys.prefix!r})"

    def _of(self, partition: int) -> list[str]:
        return [self._keys.lease(partition), self._keys.fence(partition)]

    async def acquire(self, partition: int, owner: str, ttl_ms: int) -> int | None:
        """Take ``partition``'s lease for ``ttl_ms`` if nobody holds it; the new fencing token, or None when held.

        ``owner`` must be unique per process start (e.g. ``host-pid-random``): a restarted replica is a new owner.

        Raises:
            NotReplicatedError: granted on the primary, but no replica acknowledged it in time: not used (it expires).
            redis.exceptions.RedisError: Redis failed (the lease may or may not be granted: it expires by itself).
        """
        token = await self._acquire(self._of(partition), [owner, ttl_ms])
        return None if token is None else int(token)

    async def renew(self, partition: int, owner: str, token: int, ttl_ms: int) -> bool:
        """Extend the lease to ``ttl_ms`` from now if ``owner`` still holds the grant ``token`` and ``token`` is still
        the partition's fencing token (:data:`_RENEW`); False when lost (a newer grant was made: never renewed).

        Raises:
            core.errors.StoreUnavailableError: the connection failed or timed out (the lease lapses by itself).
        """
        keys = [self._keys.fence(partition), self._keys.lease(partition)]
        try:
            return bool(await self._renew.fenced(partition, token, keys, [f"{token}:{owner}", ttl_ms]))
        except FencedError:
            return False

    async def renew_many(self, held: Sequence[tuple[int, int]], owner: str, ttl_ms: int) -> list[bool | Exception]:
        """:meth:`renew` each ``(partition, token)`` of ``held``, in one round trip (a pipeline of the fenced script
        :data:`_RENEW`): per lease True (renewed), False (lost: another holder, or a newer grant's fence) or the
        error Redis answered for it.

        Raises:
            redis.exceptions.RedisError: Redis failed (none is known renewed).
        """
        if not held:
            return []
        for attempt in range(2):
            async with self._client.pipeline(transaction=False) as pipe:
                for partition, token in held:
                    keys = [self._keys.fence(partition), self._keys.lease(partition)]
                    self._renew.queue(pipe, keys, [str(token), f"{token}:{owner}", ttl_ms])
                replies = await pipe.execute(raise_on_error=False)
            if attempt == 0 and any(isinstance(reply, NoScriptError) for reply in replies):
                await self._renew.load()  # Redis restarted since: a renewal is idempotent, sent again
                continue
            break
        return [_renewed(reply) for reply in replies]

    async def release(self, partition: int, owner: str, token: int) -> bool:
        """Drop the lease if ``owner`` still holds the grant ``token`` (so another replica may take it at once)."""
        return bool(await self._release([self._keys.lease(partition)], [f"{token}:{owner}"]))

    async def holder(self, partition: int) -> Holder | None:
        """Who holds ``partition`` now (None: nobody)."""
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.get(self._keys.lease(partition))
            pipe.pttl(self._keys.lease(partition))
            value, ttl_ms = await pipe.execute()
        if value is None:
            return None
        token, _, owner = str(value).partition(":")
        return Holder(owner, int(token), int(ttl_ms))

    async def fence(self, partition: int) -> int | None:
        """``partition``'s current fencing token: the last grant's (None: never granted)."""
        value = await self._client.get(self._keys.fence(partition))
        return None if value is None else int(value)

    async def heartbeat(self, owner: str, ttl_ms: int) -> int:
        """Say ``owner`` is alive for ``ttl_ms`` (Redis's clock); how many replicas are alive, ``owner`` included."""
        return int(
            await self._heartbeat([self._keys.replicas, self._keys.replicas_gone], [owner, ttl_ms, GONE_KEPT_MS])
        )

    async def leave(self, owner: str) -> None:
        """``owner`` stops (its share goes to the others at their next heartbeat)."""
        await self._client.zrem(self._keys.replicas, owner)


class LeaseChange(enum.StrEnum):
    """What happened to a partition's lease.

    ``acquired``: this replica owns the partition from now, with the event's token: claim its pending input
    and resume its runs. ``lost``: it no longer does (expired, taken over, released): stop at once; any write
    with the old token is refused. ``shed``: more replicas are alive than when it was taken: finish or hand over
    the partition's work, then call :meth:`LeaseKeeper.release` (the lease is renewed until then).
    """

    ACQUIRED = "acquired"
    LOST = "lost"
    SHED = "shed"


@dataclass(frozen=True)
class LeaseEvent:
    """One change of ownership: ``(partition, change, token)``."""

    partition: int
    change: LeaseChange
    token: int


class LeaseKeeper:
    """Keeps this replica's share of the partitions; its changes are read with ``async for event in keeper``.

    Args:
        leases: the lease operations.
        owner: this replica's id, unique per process start.
        partitions: P.
        ttl_ms: a lease's life; renewed every ``ttl_ms / 3``. A dead replica's partitions are taken over after at
            most ``ttl_ms`` plus one renewal period.
        heartbeat_ttl_ms: how long a replica counts as alive after its last heartbeat (default ``ttl_ms``).

    A lease whose renewal could not reach Redis is reported lost once its ``ttl_ms`` has passed since the last
    renewal that did (it has expired on the server by then, as far as this replica can know).
    """

    def __init__(
        self, leases: Leases, owner: str, partitions: int, *, ttl_ms: int = 10_000, heartbeat_ttl_ms: int | None = None
    ) -> None:
        if partitions < 1 or ttl_ms < 3:
            raise ValueError(f"need partitions >= 1 and ttl_ms >= 3, got {partitions} and {ttl_ms}")
        self._leases = leases
        self.owner = owner
        self.partitions = partitions
        self.ttl_ms = ttl_ms
        self._heartbeat_ttl_ms = heartbeat_ttl_ms or ttl_ms
        self._held: dict[int, int] = {}
        self._valid_until: dict[int, float] = {}
        self._shedding: set[int] = set()
        self._start = zlib.crc32(owner.encode()) % partitions
        self.events: asyncio.Queue[LeaseEvent] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"LeaseKeeper(owner={self.owner!r}, held={sorted(self._held)})"

    def valid(self, partition: int) -> bool:
        """True while this replica holds ``partition`` and its lease has, by this process's clock, a tenth of its
        ttl left at least (a process paused past its lease sees its loop time jump and answers False at once,
        before any renewal round). Asked right before every platform call (the send chains' guard)."""
        until = self._valid_until.get(partition)
        if until is None or partition not in self._held:
            return False
        return asyncio.get_running_loop().time() < until - self.ttl_ms / 10_000

    @property
    def held(self) -> dict[int, int]:
        """The partitions held now, each with its fencing token."""
        return dict(self._held)

    def start(self) -> None:
        """Run :meth:`tick` every ``ttl_ms / 3`` in a task until :meth:`close`."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"lease-keeper-{self.owner}")

    async def _run(self) -> None:
        while True:
            try:
                await self.tick()
            except (RedisError, OSError, StoreUnavailableError) as exc:  # the name only: never the URL (a password)
                log.warning("lease keeper %s: Redis unreachable (%s)", self.owner, type(exc).__name__)
                self._expire_overdue()
            except Exception:  # a bug: keep renewing what can be renewed rather than let every lease lapse
                log.exception("lease keeper %s: round failed", self.owner)
                self._expire_overdue()
            await asyncio.sleep(self.ttl_ms / 3000)

    async def tick(self) -> None:
        """One round: heartbeat, renew what is held, ask for extras back, take free partitions up to the share.

        Raises:
            redis.exceptions.RedisError | OSError: Redis failed (the next round tries again).
        """
        self._expire_overdue()  # e.g. this process was paused past its leases
        live = await self._leases.heartbeat(self.owner, self._heartbeat_ttl_ms)
        share = math.ceil(self.partitions / max(1, live))
        await self._renew_all()
        self._shed(share)
        await self._acquire_up_to(share)

    async def _renew_all(self) -> None:
        held = list(self._held.items())
        started = asyncio.get_running_loop().time()
        results = await self._leases.renew_many(held, self.owner, self.ttl_ms)  # one round trip for them all
        for (partition, _), result in zip(held, results, strict=True):
            if result is True:
                self._valid_until[partition] = started + self.ttl_ms / 1000
            elif result is False:
                self._lose(partition)
        self._expire_overdue()
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]

    def _shed(self, share: int) -> None:
        keep = len(self._held) - len(self._shedding)
        for partition in sorted(self._held, reverse=True):
            if keep <= share:
                break
            if partition not in self._shedding:
                self._shedding.add(partition)
                keep -= 1
                self.events.put_nowait(LeaseEvent(partition, LeaseChange.SHED, self._held[partition]))

    async def _acquire_up_to(self, share: int) -> None:
        order = [(self._start + i) % self.partitions for i in range(self.partitions)]
        free = [p for p in order if p not in self._held]
        while free and (need := share - len(self._held)) > 0:
            batch, free = free[:need], free[need:]
            started = asyncio.get_running_loop().time()
            tokens = await asyncio.gather(
                *(self._leases.acquire(p, self.owner, self.ttl_ms) for p in batch), return_exceptions=True
            )
            for partition, token in zip(batch, tokens, strict=True):
                if isinstance(token, int):
                    self._held[partition] = token
                    self._valid_until[partition] = started + self.ttl_ms / 1000
                    self.events.put_nowait(LeaseEvent(partition, LeaseChange.ACQUIRED, token))
            errors = [t for t in tokens if isinstance(t, BaseException)]
            if errors:  # the grants that worked are kept; a grant unanswered expires by itself
                raise errors[0]

    def _expire_overdue(self) -> None:
        now = asyncio.get_running_loop().time()
        for partition in [p for p, until in self._valid_until.items() if until <= now]:
            self._lose(partition)

    def _lose(self, partition: int) -> None:
        token = self._held.pop(partition, None)
        self._valid_until.pop(partition, None)
        self._shedding.discard(partition)
        if token is not None:
            self.events.put_nowait(LeaseEvent(partition, LeaseChange.LOST, token))

    async def release(self, partition: int) -> None:
        """Give ``partition`` back (after a ``shed`` event, or to stop): a ``lost`` event follows.

        Raises:
            redis.exceptions.RedisError: Redis failed; the partition is reported lost anyway and expires by itself.
        """
        token = self._held.get(partition)
        if token is None:
            return
        self._lose(partition)
        await self._leases.release(partition, self.owner, token)

    async def close(self) -> None:
        """Stop the task, release every lease held and leave the replica set (best effort when Redis is down)."""
        if self._task is not None:
            await stop(self._task)  # again while it runs on: Python 3.11 may drop a cancellation inside redis-py
            self._task = None
        for partition in list(self._held):
            with contextlib.suppress(RedisError, OSError):
                await self.release(partition)
        with contextlib.suppress(RedisError, OSError):
            await self._leases.leave(self.owner)

    def __aiter__(self) -> AsyncIterator[LeaseEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[LeaseEvent]:
        while True:
            yield await self.events.get()
