"""A replica's front takes an approval's decision to the run's partition's relay, by the run's id or by the 16 hex
its buttons carry (recorded in Redis with the run's index entry, so any replica finds it): the owner decides, once
(docs/approvals.md); an unknown run is a 404."""

from __future__ import annotations

from typing import Any, cast

import pytest

from streamrelay.adapters.redis import InputStream, RunIndex
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.replicas.front import ReplicaFront, control_key
from streamrelay.core.errors import IngestError
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.stop_controls import short_id


class _Owner:
    """The relay of partition 3, holding run ``r1``."""

    def __init__(self) -> None:
        self.decided: list[tuple[str, str, str, str | None]] = []

    async def decide_approval(self, run_id: str, approval: str, decision: str, by: str | None) -> dict[str, Any]:
        if run_id != "r1":
            raise IngestError(f"unknown run {run_id!r}", status=404)
        self.decided.append((run_id, approval, decision, by))
        return {"run": run_id, "id": approval, "state": "decided"}


async def test_a_decision_reaches_the_runs_relay_by_id_or_by_its_buttons(client: Redis) -> None:
    owner = _Owner()
    relay = cast(Relay, owner)
    front = ReplicaFront({}, InputStream(client), RunIndex(client), 16, local=lambda p: relay if p == 3 else None)
    front.follow(lambda: [relay])
    await RunIndex(client).claim("r1", 3, control_key("r1"))
    assert (await front.decide_approval("r1", "a1", "approve", "slack:user:U1"))["run"] == "r1"
    assert (await front.decide_approval(short_id("r1"), "a1", "deny", "telegram:user:1"))["run"] == "r1"
    assert owner.decided == [("r1", "a1", "approve", "slack:user:U1"), ("r1", "a1", "deny", "telegram:user:1")]
    with pytest.raises(IngestError) as unknown:
        await front.decide_approval(short_id("r2"), "a1", "approve", None)
    assert unknown.value.status == 404
