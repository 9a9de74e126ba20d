"""A replica's front on a real redis-server: a report asked with ``wait_s`` for a run whose ``run.start`` was taken
but whose lines its owner has not read from the stream yet waits for them, rather than answering 404 (a chaos
finding: an agent that asked for its report right after its ``end`` was acknowledged was told the run is unknown).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest

from streamrelay.adapters.redis import DataLostError, Epochs, InputStream, RunIndex
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.replicas.front import ReplicaFront
from streamrelay.core.errors import IngestError
from streamrelay.core.ingest.admission import LineResult
from streamrelay.core.records.report import DeliveryReport
from streamrelay.core.run.relay import Relay


class _Owner:
    """The relay of a partition whose owner learns the run only once it has read the run's lines."""

    def __init__(self) -> None:
        self.known: DeliveryReport | None = None

    async def report(self, run_id: str) -> DeliveryReport | None:
        return self.known if self.known is not None and self.known.run == run_id else None

    async def wait_done(self, run_id: str, timeout_s: float) -> DeliveryReport | None:
        return await self.report(run_id)


def _front(client: Redis, owner: _Owner) -> ReplicaFront:
    relay = cast(Relay, owner)
    return ReplicaFront({}, InputStream(client), RunIndex(client), 16, local=lambda p: relay if p == 3 else None)


async def test_a_report_waits_for_a_run_its_owner_has_not_read_yet(client: Redis) -> None:
    owner = _Owner()
    front = _front(client, owner)
    await RunIndex(client).claim("r1", 3)
    report = DeliveryReport(run="r1", channel="chat", done=True)

    async def read_later() -> None:
        await asyncio.sleep(0.3)
        owner.known = report

    reading: asyncio.Task[Any] = asyncio.create_task(read_later())
    assert await front.report("r1") is None  # no wait: not known yet
    assert await front.wait_done("r1", 5.0) == report
    await reading


async def test_an_unknown_run_is_answered_at_once_and_an_unread_one_after_its_wait(client: Redis) -> None:
    front = _front(client, _Owner())
    t = time.monotonic()
    assert await front.wait_done("never-started", 5.0) is None
    assert time.monotonic() - t < 1.0
    await RunIndex(client).claim("r2", 3)
    t = time.monotonic()
    assert await front.wait_done("r2", 0.4) is None
    assert 0.3 < time.monotonic() - t < 2.0


async def test_a_run_whose_partition_moved_away_is_503_not_unknown(client: Redis) -> None:
    """The owner proxy sent the request here just as the partition was handed over (a chaos finding: a delivered
    run answered 404): the client is told to ask again, never that the run does not exist."""
    front = _front(client, _Owner())
    await RunIndex(client).claim("r3", 5)  # partition 5 is not this replica's
    for ask in (front.report("r3"), front.wait_done("r3", 1.0), front.gate("r3", "call-1")):
        with pytest.raises(IngestError) as refused:
            await ask
        assert refused.value.status == 503


async def test_a_redis_that_lost_its_data_is_refused_loudly_never_taken(client: Redis) -> None:
    """Redis restarted empty under a running replica (issue 24): the run's lines are refused as a whole (the app
    answers 503 with the reason), appends check the epoch marker in their script, and the report is 503, not 404."""
    front = _front(client, _Owner())
    front.epochs = Epochs(client, 16)
    await front.epochs.claim()
    await RunIndex(client).claim("r4", 3)
    line = {"run": "r4", "kind": "text", "mode": "delta", "text": "Hello", "seq": 1}
    assert await front.submit_lines([(line, None)]) == [LineResult(events=1)]
    await front.epochs.check()

    await client.flushall()

    with pytest.raises(DataLostError, match="Redis lost its data"):
        await front.epochs.check()
    with pytest.raises(DataLostError, match="partition 3"):
        await front.submit_lines([(line, None)])  # its run is gone from the index: not "has not started"
    for ask in (front.report("r4"), front.wait_done("r4", 1.0)):
        with pytest.raises(IngestError, match="Redis lost its data") as refused:
            await ask
        assert refused.value.status == 503
    await RunIndex(client).claim("r4", 3)  # a resent run.start claims the run again: the append itself refuses
    with pytest.raises(DataLostError):
        await front.submit_lines([(line, None)])
    assert await InputStream(client).length(3) == 0


class _HandedBack(_Owner):
    """A partition handed over and taken back while a report waits: the run's worker stops unfinished (its
    wait ends early with an unfinished report), the relay forgets it, and after the partition is read again the
    run is known once more and ends delivered."""

    def __init__(self, done: DeliveryReport) -> None:
        super().__init__()
        self.known = DeliveryReport(run=done.run, channel=done.channel, done=False)
        self.done = done
        self.waits = 0

    async def wait_done(self, run_id: str, timeout_s: float) -> DeliveryReport | None:
        self.waits += 1
        if self.waits == 1:
            interrupted, self.known = self.known, None  # stopped here unfinished, gone from the relay

            async def read_again() -> None:
                await asyncio.sleep(0.3)
                self.known = self.done

            self._reading = asyncio.create_task(read_again())
            return interrupted
        return await self.report(run_id)


async def test_a_report_wait_goes_on_through_a_handover_and_back_never_unknown(client: Redis) -> None:
    """Before, a wait whose run left its relay unfinished (the partition handed over and taken back) was answered
    the unfinished report at once, or 404 "unknown run" once the relay had forgotten it, though the run ended
    delivered (chaos-3-00172; test_replicas_any under load)."""
    report = DeliveryReport(run="r5", channel="chat", done=True)
    owner = _HandedBack(report)
    front = _front(client, owner)
    await RunIndex(client).claim("r5", 3)
    assert await front.wait_done("r5", 5.0) == report
