"""A client's limits hold across replicas (issue 24): its ``max_active_runs`` counts its runs on every replica
together, and its ``events_per_s`` is one pace for all of them, both in Redis (adapters/redis/client_limits.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from streamrelay.adapters.redis import ClosedRun, InputStream, RunIndex
from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.client_limits import SharedClientLimits
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.replicas.front import ReplicaFront
from streamrelay.core.ingest.admission import ONE_EVENT
from streamrelay.core.ingest.clients import ClientBook, ClientLimits, run_key
from tests.redis.test_failover import TOKEN, _cluster, post_as_agent

pytestmark = pytest.mark.timeout(180)
ACME_TOKEN = "acme-token-for-the-client-limits-test"
ACME = """
[clients.default]
token_env = "STREAMRELAY_TOKEN"

[clients.acme]
token_env = "ACME_TOKEN"
max_active_runs = 2
"""


def _ndjson(*lines: dict[str, Any]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


async def test_max_active_runs_counts_a_clients_runs_on_every_replica_together(
    tmp_path: Path, redis_url: str, client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Client acme may have 2 active runs: it starts one on replica 0 and one on replica 1; a third start is refused
    429 on replica 2 (each replica alone holds fewer than 2) naming the setting; once a run ends, replica 2 takes it."""
    monkeypatch.setenv("ACME_TOKEN", ACME_TOKEN)
    target = DRY_RUN["telegram"].target().model_dump()
    auth = {"Authorization": f"Bearer {ACME_TOKEN}"}
    async with (
        _cluster(tmp_path, redis_url, client, "final", extra=ACME) as (_mock, replicas),
        httpx.AsyncClient(headers=auth, timeout=30) as http,
    ):

        def start(run: str) -> bytes:
            return _ndjson({"kind": "run.start", "channel": "chat", "target": target, "seq": 0})

        for i, run in enumerate(("a1", "a2")):
            answer = await post_as_agent(http, replicas.url(i) + f"/v1/runs/{run}/events", start(run))
            assert answer.status_code == 200, answer.text
        third = await post_as_agent(http, replicas.url(2) + "/v1/runs/a3/events", start("a3"))
        assert third.status_code == 429, third.text
        assert "clients.acme.max_active_runs = 2" in third.json()["error"], third.text
        assert third.headers.get("retry-after") == "1", third.headers
        ended = _ndjson({"kind": "text", "mode": "delta", "text": "Done.", "seq": 1}, {"kind": "end", "seq": 2})
        assert (await post_as_agent(http, replicas.url(0) + "/v1/runs/a1/events", ended)).status_code == 200
        report = await http.get(replicas.url(1) + "/v1/runs/a1", params={"wait_s": 60})
        assert report.status_code == 200 and report.json()["done"], report.text
        for _ in range(100):  # the owner takes the ended run out of Redis's count right after it ends
            again = await post_as_agent(http, replicas.url(2) + "/v1/runs/a3/events", start("a3"))
            if again.status_code != 429:
                break
            await asyncio.sleep(0.1)
        assert again.status_code == 200, again.text
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as other:
            default = await post_as_agent(other, replicas.url(2) + "/v1/runs/d1/events", start("d1"))
        assert default.status_code == 200, default.text  # another client's count is its own


async def test_events_per_s_is_one_pace_for_every_replica(client: Redis) -> None:
    """Two replicas (two gates on one Redis) pacing one client at 10 events/s: a second's worth goes through at once,
    whichever replica takes it; what either takes past that waits its turn after the other's. (The waits are what
    Redis computed, on its clock: each bound leaves a second for the machine between the calls.)"""
    acme = ClientLimits(name="acme-pace", events_per_s=10.0)
    one, two = SharedClientLimits(client), SharedClientLimits(client)
    assert (await one.gate(acme, 6))[0] == 0.0
    assert (await two.gate(acme, 4))[0] == 0.0  # 10 in the first second, over both replicas
    wait, _ = await two.gate(acme, 50)
    assert 4.0 < wait <= 5.0  # 60 at 10/s: 6 s, less the second's burst, less the time since the first
    wait, _ = await one.gate(acme, 100)
    assert 14.0 < wait <= 15.0  # after the other replica's 50: its own pace is the client's, not the replica's
    other = ClientLimits(name="other-pace", events_per_s=10.0)
    assert (await one.gate(other, 10))[0] == 0.0  # each client its own pace


async def test_a_counted_run_lapses_unless_its_owner_keeps_it_and_leaves_when_it_ends(client: Redis) -> None:
    """A run counted at its start stays counted while its owner refreshes it; one whose replica died (no refresh)
    lapses after ``ttl_s``; one that ends leaves at once. A start past ``max_active_runs`` is refused, a repeated start
    of a counted run is not counted twice."""
    shared = SharedClientLimits(client, ttl_s=2.0)
    acme = ClientLimits(name="acme-count", max_active_runs=2)
    r1, r2, r3 = (run_key("acme-count", f"r{i}") for i in (1, 2, 3))
    assert (await shared.gate(acme, 1, [r1]))[1] == []
    assert (await shared.gate(acme, 1, [r1, r2]))[1] == []  # r1 again: refreshed, not counted twice
    assert (await shared.gate(acme, 1, [r3]))[1] == [r3]
    assert await shared.active("acme-count") == 2
    await shared.left(r2)
    assert await shared.active("acme-count") == 1
    for _ in range(5):  # r1's owner keeps it, past the ttl
        await asyncio.sleep(0.5)
        await shared.refresh([r1])
    assert await shared.active("acme-count") == 1
    await asyncio.sleep(2.5)  # r1's replica died: nobody refreshes it
    assert await shared.active("acme-count") == 0
    assert (await shared.gate(acme, 1, [r3]))[1] == []


class _AppendFailsOnce(InputStream):
    """An input stream whose first append fails as a dropped connection does (the batch is answered 503)."""

    failed = False

    async def append_open(
        self, partition: int, entries: Any, *, epoch: str = "", text: Sequence[bool] = ()
    ) -> list[str | ClosedRun | None]:
        if not self.failed:
            self.failed = True
            raise RedisConnectionError("Connection closed by server.")
        return await super().append_open(partition, entries, epoch=epoch, text=text)


async def test_a_batch_whose_append_failed_is_not_charged_again_when_sent_again(client: Redis) -> None:
    """The front reserved a batch's events on the client's pace, then its append failed (503, nothing taken): the
    same lines sent again spend that reservation instead of reserving them a second time (the pace's state in Redis
    does not move); the lines after them reserve their own."""
    front = ReplicaFront({}, _AppendFailsOnce(client), RunIndex(client), 16, local=lambda _p: None)
    front.limits = SharedClientLimits(client)
    front.book = ClientBook({"acme": ClientLimits(name="acme", events_per_s=100.0)})
    run = run_key("acme", "r1")
    await RunIndex(client).claim(run, 3)
    lines = [({"run": run, "kind": "text", "mode": "delta", "text": f"w{i} ", "seq": i + 1}, None) for i in range(5)]
    tat = "sr:{c:acme}:tat"
    with pytest.raises(RedisConnectionError):
        await front.submit_lines(lines)
    charged = await client.get(tat)
    assert charged is not None
    await asyncio.sleep(0.3)  # past what the front reserved ahead (ALLOWANCE_S): only what the failure kept is left
    assert await front.submit_lines(lines) == [ONE_EVENT] * 5
    assert await client.get(tat) == charged  # not reserved a second time
    later = [({"run": run, "kind": "text", "mode": "delta", "text": "w5 ", "seq": 6}, None)]
    assert await front.submit_lines(later) == [ONE_EVENT]
    assert float(await client.get(tat) or 0) > float(charged)  # new lines reserve their own
