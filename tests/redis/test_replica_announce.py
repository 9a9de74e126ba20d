"""A replica says where it serves again after Redis lost its data (restarted without persistence, flushed): else
every read forwarded to it (reports, live pages, the gate, ``GET /v1/runs?all=1``) answers 503 until it restarts."""

from __future__ import annotations

import asyncio

from streamrelay.adapters.redis import InputStream, ReplicaUrls, RunIndex
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.replicas.front import ReplicaFront
from streamrelay.app.replicas.owner import AckingJournal
from streamrelay.app.replicas.service import ReplicaService
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.relay import Relay

URL = "http://127.0.0.1:18999"


def _relay(ledger: Ledger, journal: AckingJournal) -> Relay:
    return Relay({}, ledger, MonotonicClock(), journal=journal)


async def _url_within(urls: ReplicaUrls, owner: str, seconds: float) -> str | None:
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        if (url := await urls.url(owner)) is not None:
            return url
        await asyncio.sleep(0.05)
    return None


async def test_a_replica_announces_its_url_again_after_redis_lost_its_data(client: Redis) -> None:
    front = ReplicaFront({}, InputStream(client), RunIndex(client), 1, local=lambda _: None)
    service = ReplicaService(client, front, _relay, partitions=1, lease_ttl_s=1.0, drain_s=0.0)
    urls = ReplicaUrls(client)
    await service.start(URL)
    try:
        assert await urls.url(service.owner) == URL
        await client.flushdb()  # what a redis-server restarted with --save "" --appendonly no keeps
        assert await _url_within(urls, service.owner, 2.0) == URL
        deadline = asyncio.get_running_loop().time() + 2.0
        while service.owner not in await urls.live() and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        assert (await urls.live()).get(service.owner) == URL  # listed again by GET /v1/runs?all=1
    finally:
        await service.close()
    assert await urls.url(service.owner) is None  # it left: not announced again after close
