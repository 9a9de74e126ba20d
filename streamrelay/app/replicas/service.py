"""A replica: one process of several on one Redis, owning a fair share of the partitions (DESIGN §8).

Every replica takes lines for any run (:class:`app.replicas.front.ReplicaFront`) and forwards what only a run's
owner can answer (:class:`adapters.ingest_http.owner_proxy.OwnerProxy`). It keeps its share of the partitions'
leases (:class:`adapters.redis.LeaseKeeper`) and runs one :class:`app.replicas.owner.PartitionOwner` per
partition it holds:

- ``acquired``: a new owner with the grant's fencing token (it resumes the partition's runs and pending input);
- ``lost``: the owner stops at once (another replica resumes its runs; what was in flight is settled there);
- ``shed`` (a replica joined): the owner stops reading, lets its runs finish for up to ``drain_s``, stops, and
  releases the lease so the newcomer takes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Callable

from redis.asyncio import Redis
from redis.exceptions import RedisError

from streamrelay.adapters.ingest_http.owner_proxy import CONVERSATION, DESK_ENTRY, OwnerUnavailableError
from streamrelay.adapters.redis import (
    KEYS,
    DataLostError,
    Epochs,
    InputStream,
    LeaseChange,
    LeaseEvent,
    LeaseKeeper,
    Leases,
    RedisJournal,
    RedisLedger,
    ReplicaUrls,
    RunIndex,
    conversation_key,
    partition_of,
)
from streamrelay.adapters.redis.desk import SharedDesk
from streamrelay.app.replicas.front import ReplicaFront
from streamrelay.app.replicas.owner import EndedRuns, MakeEnded, MakeRelay, PartitionOwner
from streamrelay.app.replicas.peers import ReplicaPeers
from streamrelay.core.errors import ConfigError
from streamrelay.core.events import Target
from streamrelay.core.run.relay import Relay
from streamrelay.core.tasks import stop_all

_log = logging.getLogger("streamrelay.replicas")


def replica_id() -> str:
    """A replica's id, unique per process start: ``host-pid-random``."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class ReplicaService:
    """This replica's partitions (module docstring).

    Args:
        client: the Redis client.
        front: the replica's ingest and read surface.
        make_relay: builds a partition's relay (see :data:`app.replicas.owner.MakeRelay`).
        partitions: P.
        lease_ttl_s: a lease's life (seconds); a dead replica's partitions move after at most this plus a third.
        drain_s: how long a shed partition's runs may take to finish before it is handed over.
        owner: this replica's id (default: :func:`replica_id`).
        make_ended: builds what a partition's owner does for its ended runs (corrections, desk resends:
            :class:`app.replicas.ended.OwnedEnded`); None: nothing.
        desk: every partition's desk entries (finds the partition of a resend's entry: :meth:`locate`).
    """

    def __init__(
        self,
        client: Redis,
        front: ReplicaFront,
        make_relay: MakeRelay,
        *,
        partitions: int,
        lease_ttl_s: float,
        drain_s: float,
        owner: str | None = None,
        make_ended: MakeEnded | None = None,
        desk: SharedDesk | None = None,
    ) -> None:
        self.owner = owner or replica_id()
        self._make_ended = make_ended
        self._desk = desk
        self._client = client
        self._front = front
        self._make_relay = make_relay
        self._drain_s = drain_s
        self._leases = Leases(client)
        self.keeper = LeaseKeeper(self._leases, self.owner, partitions, ttl_ms=int(lease_ttl_s * 1000))
        self._stream = InputStream(client)
        self._urls = ReplicaUrls(client)
        self._index = RunIndex(client)
        self.epochs = Epochs(client, partitions)
        self.owners: dict[int, PartitionOwner] = {}
        self._task: asyncio.Task[None] | None = None
        self._announcing: asyncio.Task[None] | None = None
        self._handovers: set[asyncio.Task[None]] = set()
        front.follow(lambda: [o.relay for o in self.owners.values()])
        front.peers = ReplicaPeers(self._urls, self.owner)
        front.direct = self.direct

    def __repr__(self) -> str:
        return f"ReplicaService(owner={self.owner!r}, partitions={sorted(self.owners)})"

    def local(self, partition: int) -> Relay | None:
        """The relay of ``partition`` when this replica owns it and has resumed it."""
        owner = self.owners.get(partition)
        return owner.relay if owner is not None and owner.ready.is_set() and not owner.lost else None

    def direct(self, partition: int) -> PartitionOwner | None:
        """The owner of ``partition`` when this replica owns it and has resumed it (its front hands it lines
        directly: :meth:`app.replicas.owner.PartitionOwner.submit_direct`)."""
        owner = self.owners.get(partition)
        return owner if owner is not None and owner.ready.is_set() and not owner.lost else None

    def ended(self, partition: int) -> EndedRuns | None:
        """What this replica does for ``partition``'s ended runs when it owns it and has resumed it, else None."""
        owner = self.owners.get(partition)
        if owner is None or not owner.ready.is_set() or owner.lost:
            return None
        return owner.ended

    async def locate(self, run: str) -> str | None:
        """Where ``run`` is answered (:data:`adapters.ingest_http.owner_proxy.Locate`): a run key, a Stop control's
        key (:meth:`app.replicas.front.ReplicaFront.locate`) or a Telegram draft's stop key (its chat's partition).

        Raises:
            OwnerUnavailableError: the partition has no reachable owner now, or Redis did not answer (the owner proxy
                waits, then answers 503 with ``Retry-After``; never a 500).
        """
        try:
            return await self._locate(run)
        except DataLostError as exc:
            raise OwnerUnavailableError(str(exc)) from None
        except OwnerUnavailableError:
            await self._lost_data()
            raise
        except (RedisError, OSError) as exc:  # the error's name only: its text may name the Redis URL
            raise OwnerUnavailableError(f"Redis did not answer ({type(exc).__name__})") from None

    async def _lost_data(self) -> None:
        """No owner found: when that is because Redis lost its data (leases included), say so.

        Raises:
            OwnerUnavailableError: with :class:`adapters.redis.DataLostError`'s message.
        """
        try:
            await self.epochs.check()
        except DataLostError as exc:
            raise OwnerUnavailableError(str(exc)) from None
        except (RedisError, OSError):
            return

    async def _locate(self, run: str) -> str | None:
        if run.startswith(DESK_ENTRY):  # a desk entry's resend: its run's partition's owner
            partition = None if self._desk is None else await self._desk.partition(run[len(DESK_ENTRY) :])
        elif run.startswith(CONVERSATION):  # a conversation's erasure: its partition's owner
            channel, _, chat = run[len(CONVERSATION) :].partition("/")
            partition = self._front.conversation_partition(channel, chat)
        else:
            run = await self._front.locate(run)
            partition = await self._index.partition(run)
            if partition is None:
                partition = self._front.draft_partition(run)
        if partition is None or self.local(partition) is not None:
            return None  # unknown here and everywhere (404), or ours
        holder = await self._leases.holder(partition)
        if holder is None or holder.owner == self.owner or holder.ttl_ms < self.keeper.ttl_ms / 2:
            # no owner yet; ours and still resuming; or an owner that missed a renewal (dead or paused)
            raise OwnerUnavailableError(partition)
        url = await self._urls.url(holder.owner)
        if url is None:
            raise OwnerUnavailableError(partition)
        return url

    async def start(self, url: str) -> None:
        """Announce ``url`` (where the others reach this replica), again every lease round, and start taking
        partitions."""
        await self._check_partitions()
        await self.epochs.claim()
        self._front.epochs = self.epochs
        await self._urls.announce(self.owner, url)
        self.keeper.start()
        self._task = asyncio.create_task(self._follow(), name="replica:leases")
        self._announcing = asyncio.create_task(self._announce(url), name="replica:announce")
        _log.info("replica %s serving at %s", self.owner, url, extra={"replica": self.owner})

    async def _announce(self, url: str) -> None:
        """Say ``url`` again every third of the lease's ttl, as the heartbeat is: a Redis that lost its data (restarted
        without persistence, flushed) must learn it again, else every read forwarded to this replica waits and
        answers 503 for as long as it runs."""
        while True:
            await asyncio.sleep(self.keeper.ttl_ms / 3000)
            try:
                await self._urls.announce(self.owner, url)
            except (RedisError, OSError) as exc:  # the error's name only: the URL may hold a password
                _log.debug("replica %s: URL not announced (%s)", self.owner, type(exc).__name__)

    async def _check_partitions(self) -> None:
        """Every replica of a deployment must count the same partitions (a conversation's partition is its hash
        modulo P): the first replica records P in Redis, a replica with another P refuses to start.

        Raises:
            ConfigError: this replica's ``partitions`` differs from the deployment's.
        """
        key = f"{KEYS.prefix}:partitions"
        mine = self.keeper.partitions
        await self._client.set(key, mine, nx=True)
        theirs = int(await self._client.get(key) or mine)
        if theirs != mine:
            raise ConfigError(
                f"[service] partitions = {mine}, but the replicas on this Redis count {theirs}: every replica must "
                f"have the same (change it only with every replica stopped, then delete the key {key!r})"
            )

    async def _follow(self) -> None:
        async for event in self.keeper:
            try:
                await self._apply(event)
            except Exception:
                _log.exception("partition %d: %s could not be handled", event.partition, event.change)

    async def _apply(self, event: LeaseEvent) -> None:
        partition = event.partition
        if event.change is LeaseChange.ACQUIRED:
            previous = self.owners.pop(partition, None)
            if previous is not None:
                await previous.stop()
            owner = PartitionOwner(
                partition,
                event.token,
                owner=self.owner,
                stream=self._stream,
                journal=RedisJournal(self._client, partition),
                ledger=RedisLedger(self._client, partition),
                make_relay=self._make_relay,
                make_ended=self._make_ended,
            )
            self.owners[partition] = owner
            owner.start()
            _log.info("partition %d taken (token %d)", partition, event.token, extra={"partition": partition})
        elif event.change is LeaseChange.LOST:
            lost = self.owners.pop(partition, None)
            if lost is not None:
                await lost.stop()
                _log.warning("partition %d lost: its runs go on at its new owner", partition)
        else:
            task = asyncio.create_task(self._hand_over(partition), name=f"handover:{partition}")
            self._handovers.add(task)
            task.add_done_callback(self._handovers.discard)

    async def _hand_over(self, partition: int) -> None:
        owner = self.owners.get(partition)
        if owner is not None:
            await owner.drain(self._drain_s)
            # Not ours from here on (reads answer 503 and are asked again of the next owner), then stopped.
            self.owners.pop(partition, None)
            await owner.stop()
        await self.keeper.release(partition)
        _log.info("partition %d handed over to a new replica", partition, extra={"partition": partition})

    def active_runs(self) -> list[str]:
        return self._front.active_runs()

    def guard_for(self, channel: str) -> Callable[[Target], Callable[[], bool]]:
        """The send chains' guard of ``channel``'s targets: is the lease of the target's partition still ours (by
        this process's clock)? A replica paused past its lease makes no call when it wakes up."""
        keeper, partitions = self.keeper, self.keeper.partitions

        def for_target(target: Target) -> Callable[[], bool]:
            partition = partition_of(conversation_key(channel, target.chat_id), partitions)
            return lambda: keeper.valid(partition)

        return for_target

    async def ready_partitions(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the owned partitions to have resumed."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(o.ready.wait() for o in list(self.owners.values()))), timeout_s)

    async def drain(self, timeout_s: float, stop: Callable[[], bool] = lambda: False) -> None:
        """Let active runs finish for up to ``timeout_s`` (or until ``stop()``); their lines are still read."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.active_runs() and loop.time() < deadline and not stop():
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        """Stop every partition (unfinished runs stay in their journals), give the leases back, leave."""
        # again while they run on: Python 3.11 may drop a cancellation inside redis-py (core.tasks)
        await stop_all([t for t in (self._task, self._announcing, *self._handovers) if t is not None])
        await asyncio.gather(*(owner.stop() for owner in list(self.owners.values())))  # readers end together
        self.owners.clear()
        await self.keeper.close()
        with contextlib.suppress(Exception):
            await self._urls.leave(self.owner)
