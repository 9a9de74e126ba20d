"""Ended runs on Redis replicas: corrections and the desk's resends are done by the run's partition owner, as an
approval's decision is (docs/corrections.md, docs/deliveries.md, docs/replicas.md).

A correction (``POST /v1/runs/{run}/corrections``) or a resend (``POST /v1/deliveries/{id}/resend``) may reach any
replica; the owner proxy (:mod:`adapters.ingest_http.owner_proxy`) forwards it to the replica that owns the run's
partition, whose :class:`OwnedEnded` applies it with the partition's **fenced** ledger (every write checks the grant's
fencing token: a replica that lost the partition writes nothing more) through the conversation's send chain (guarded
by the lease: a replica paused past it makes no call). So one correction id is applied once, by one process at a
time, under its per-run lock (:class:`core.run.corrections.Corrections`). A correction is written to the ledger before
any call and each step before and after its call; when its owner dies (kill -9) or loses the partition mid-way, the
record stays ``applying`` in the partition's ``corr:open`` hash and the next owner resumes it as soon as it took the
partition (:meth:`OwnedEnded.resume`): an edit in flight is made again (idempotent), a send in flight is settled with
the platform first.

Listing, showing, resolving and pruning desk entries need no owner: any replica reads every partition's desk in Redis
(:class:`adapters.redis.desk.SharedDesk`); only a resend is routed (:func:`desk_route`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from streamrelay.adapters.redis import RedisLedger, RunIndex
from streamrelay.adapters.redis.desk import SharedDesk
from streamrelay.app.replicas.owner import EndedRuns
from streamrelay.app.serving import resume_corrections
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import Clock
from streamrelay.core.events import RunCorrect, RunRetract
from streamrelay.core.records.corrections import CorrectionRecord
from streamrelay.core.records.desk import DeskEntry
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.corrections import CorrectionError, Corrections
from streamrelay.core.run.desk import Desk, DeskError
from streamrelay.core.run.relay import Relay

MOVING = "its partition is moving between replicas: send it again in a moment"


class OwnedEnded:
    """What the owner of one partition does for the partition's ended runs (:class:`app.replicas.owner.EndedRuns`).

    Args:
        ledger: the partition's ledger, fenced with the owner's grant (the corrections' and the entries' store).
        relay: the partition's relay on this replica (its corrections are resumed once its channels are loaded).
        channels: the replica's channels (their adapters, policies and send chains; filled in as they load).
        clock: the send chains' clock.
        metered: the ledger the executor records calls in (the fenced ledger with the service's metrics); default
            ``ledger``.
    """

    def __init__(
        self,
        ledger: RedisLedger,
        relay: Relay,
        channels: Mapping[str, ChannelRuntime],
        clock: Clock,
        metered: Ledger | None = None,
    ) -> None:
        calls = ledger if metered is None else metered
        self.partition = ledger.partition
        self.relay = relay
        self.corrections = Corrections(calls, ledger, channels, clock, shown=relay.corrected)  # its live page too
        self.desk = Desk(calls, ledger, channels, clock)

    def __repr__(self) -> str:
        return f"OwnedEnded(partition={self.partition})"

    async def resume(self) -> None:
        """Apply the corrections left ``applying`` in this partition (a dead or deposed owner's, or this replica's
        before a restart): :func:`app.serving.resume_corrections`."""
        await resume_corrections(self.corrections, self.relay)


class ReplicaCorrections:
    """The correction routes' service on a replica (:class:`core.run.corrections.CorrectionService`): the run's
    partition found in the run index, the work done by that partition's :class:`OwnedEnded` on this replica (the owner
    proxy sent the request here because this replica owns it).

    Args:
        index: run -> partition.
        owned: the partition's :class:`~app.replicas.owner.EndedRuns` when this replica owns it and has resumed it
            (:meth:`app.replicas.service.ReplicaService.ended`), else None.
    """

    def __init__(self, index: RunIndex, owned: Callable[[int], EndedRuns | None]) -> None:
        self._index = index
        self._owned = owned

    def __repr__(self) -> str:
        return "ReplicaCorrections()"

    async def _corrections(self, run: str) -> Corrections:
        """The owning :class:`Corrections` of run ``run`` (a run key).

        Raises:
            CorrectionError: 404 nobody started the run; 503 its partition is not (or no longer) this replica's.
        """
        partition = await self._index.partition(run)
        if partition is None:
            raise CorrectionError(f"unknown run {run!r}", 404)
        ended = self._owned(partition)
        if ended is None:
            raise CorrectionError(f"run {run!r}: {MOVING}", 503)
        return ended.corrections

    async def submit(self, run: str, asked: RunCorrect | RunRetract) -> CorrectionRecord:
        """:meth:`core.run.corrections.Corrections.submit` on the run's owner (this replica)."""
        return await (await self._corrections(run)).submit(run, asked)

    async def list(self, run: str) -> list[CorrectionRecord]:
        """:meth:`core.run.corrections.Corrections.list` on the run's owner (this replica)."""
        return await (await self._corrections(run)).list(run)

    async def get(self, run: str, correction_id: str) -> CorrectionRecord:
        """:meth:`core.run.corrections.Corrections.get` on the run's owner (this replica)."""
        return await (await self._corrections(run)).get(run, correction_id)


def desk_route(shared: SharedDesk, owned: Callable[[int], EndedRuns | None]) -> Callable[[DeskEntry], Desk]:
    """The desk's ``route`` on a replica (:class:`core.run.desk.Desk`): an entry is resent by the desk of its run's
    partition owner, this replica (the owner proxy forwarded the resend here).

    Raises (the returned function):
        DeskError: 503 the entry's partition is not (or no longer) this replica's: send the resend again.
    """

    def route(entry: DeskEntry) -> Desk:
        ended = owned(shared.partition_of(entry))
        if ended is None:
            raise DeskError(f"delivery {entry.id}: {MOVING}", 503)
        return ended.desk

    return route


__all__ = ["MOVING", "OwnedEnded", "ReplicaCorrections", "desk_route"]
