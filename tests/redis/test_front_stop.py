"""A replica's front stops a run on its partition's relay, by the run's id or by its Stop control's id (recorded in
Redis with the run's index entry, so any replica finds it); an unknown id is a 404."""

from __future__ import annotations

from typing import cast

import pytest

from streamrelay.adapters.redis import InputStream, RunIndex
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.replicas.front import ReplicaFront, control_key
from streamrelay.core.errors import IngestError
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.stop import StopState
from streamrelay.core.run.stop_controls import short_id


class _Owner:
    """The relay of partition 3, holding run ``r1``."""

    def __init__(self) -> None:
        self.stopped: list[tuple[str, str | None]] = []

    async def stop(self, run_id: str, by: str | None = None, reason: str | None = None) -> StopState:
        if run_id not in ("r1", short_id("r1")):
            raise IngestError(f"unknown run {run_id!r}", status=404)
        self.stopped.append((run_id, by))
        return StopState("r1", "stopping", by, reason)


async def test_a_stop_reaches_the_runs_relay_by_id_or_by_its_control(client: Redis) -> None:
    owner = _Owner()
    relay = cast(Relay, owner)
    front = ReplicaFront({}, InputStream(client), RunIndex(client), 16, local=lambda p: relay if p == 3 else None)
    front.follow(lambda: [relay])
    await RunIndex(client).claim("r1", 3, control_key("r1"))
    assert (await front.stop("r1", "web")).run == "r1"
    assert (await front.stop(short_id("r1"), "telegram:user:1")).run == "r1"  # the button's id: found in Redis
    assert owner.stopped == [("r1", "web"), ("r1", "telegram:user:1")]
    with pytest.raises(IngestError) as unknown:
        await front.stop(short_id("r2"))
    assert unknown.value.status == 404 and str(unknown.value) == f"unknown run {short_id('r2')!r}"
