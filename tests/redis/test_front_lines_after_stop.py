"""Chaos finding (issue 15, ``streamrelay chaos --backend redis``, seed 12, run chaos-12-00042): on replicas an
agent's lines of a run after the reader's stop were answered 200 ``accepted`` and then dropped by the partition's
owner, where one sidecar answers them 409 "run stopped by the reader; stop streaming" (docs/stop.md: "the agent's
later lines of the run get 409 ..., never a silent drop"). Now the stop is marked in Redis beside the partition's
input stream before the owner takes it, and every front's append checks the mark."""

from __future__ import annotations

from typing import cast

from streamrelay.adapters.redis import InputStream, RunIndex
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.replicas.front import ReplicaFront
from streamrelay.core.errors import IngestError
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.stop import STOPPED_ERROR, StopState


class _Owner:
    """The relay of partition 3 (run ``r1``), which takes a stop."""

    async def stop(self, run_id: str, by: str | None = None, reason: str | None = None) -> StopState:
        return StopState(run_id, "stopping", by, reason)


async def test_a_line_after_a_stop_is_refused_409_by_any_replica(client: Redis) -> None:
    relay = cast(Relay, _Owner())
    owner = ReplicaFront({}, InputStream(client), RunIndex(client), 16, local=lambda p: relay if p == 3 else None)
    other = ReplicaFront({}, InputStream(client), RunIndex(client), 16, local=lambda p: None)
    await RunIndex(client).claim("r1", 3)
    assert (await owner.stop("r1", "chaos:reader")).state == "stopping"
    line = {"kind": "text", "run": "r1", "seq": 7, "mode": "delta", "text": "streamed after the stop"}
    for front in (owner, other):
        (result,) = await front.submit_lines([(line, None)], run_hint="r1")
        assert isinstance(result, IngestError), f"{front!r} accepted a line of a stopped run: {result!r}"
        assert result.status == 409 and STOPPED_ERROR in str(result)
