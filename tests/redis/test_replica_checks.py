"""A replica refuses what would break a deployment quietly (a breaker's findings): another partition count than
its peers (two replicas would own one chat, some partitions none), and a body of any size forwarded unread-checked
to a run's owner before anything checked the token."""

from __future__ import annotations

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from streamrelay.adapters.ingest_http.owner_proxy import OwnerProxy
from streamrelay.adapters.redis import InputStream, RunIndex
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.replicas.front import ReplicaFront
from streamrelay.app.replicas.owner import AckingJournal
from streamrelay.app.replicas.service import ReplicaService
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import ConfigError
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.relay import Relay


def _relay(ledger: Ledger, journal: AckingJournal) -> Relay:
    return Relay({}, ledger, MonotonicClock(), journal=journal)


def _service(client: Redis, partitions: int) -> ReplicaService:
    front = ReplicaFront({}, InputStream(client), RunIndex(client), partitions, local=lambda _: None)
    return ReplicaService(client, front, _relay, partitions=partitions, lease_ttl_s=1.0, drain_s=0.0)


async def test_a_replica_with_another_partition_count_than_its_peers_refuses_to_start(client: Redis) -> None:
    first = _service(client, 2)
    await first.start("http://127.0.0.1:18998")
    try:
        with pytest.raises(ConfigError, match="partitions = 3, but the replicas on this Redis count 2"):
            await _service(client, 3).start("http://127.0.0.1:18997")
        second = _service(client, 2)  # the same count is welcome
        await second.start("http://127.0.0.1:18996")
        await second.close()
    finally:
        await first.close()


async def test_a_body_past_the_limit_is_refused_before_it_is_read_whole_or_forwarded() -> None:
    forwarded: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:  # never reached
        forwarded.append(scope["path"])

    async def elsewhere(run: str) -> str:
        return "http://127.0.0.1:9"  # the owner: another replica

    proxy = OwnerProxy(app, elsewhere, max_body_bytes=1000, patience_s=0.1)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=proxy), base_url="http://replica") as http:
        answer = await http.post("/v1/runs/r1/gate", content=b"x" * 5000)
    await proxy.close()
    assert answer.status_code == 413 and "at most 1000 bytes" in answer.json()["error"]
    assert forwarded == []
