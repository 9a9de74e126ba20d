"""The operator's view of replicas on a real redis-server: ``streamrelay runs --dead``, ``retry`` and ``drop`` on the
dead letters of every partition (read at the ``redis_url`` serve would use, failing in one line when Redis is down),
and a replica's ``GET /v1/runs?all=1``: the live replicas asked (ReplicaUrls.live), the lapsed ones not, an
unreachable one named."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import cast

import pytest
from typer.testing import CliRunner, Result

from streamrelay.adapters.redis import InputStream, Leases, ReplicaUrls, RunIndex
from streamrelay.adapters.redis.client import Redis, connect
from streamrelay.app.chaos.sentinels import MASTER, RedisSentinels
from streamrelay.app.cli import app
from streamrelay.app.ops_cli import dead_letters
from streamrelay.app.replicas.front import ReplicaFront
from streamrelay.app.replicas.peers import ReplicaPeers
from streamrelay.core.contracts.answers import RunListing, RunRow, Unreachable
from streamrelay.core.records.journal import JournalEntry
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from tests.integration.conftest import INGEST_TOKEN, start_stack, stop_stack
from tests.ports import free_port as _closed_port

pytestmark = pytest.mark.timeout(60)

PARTITIONS = 4
BAD_LINE = '{"kind": "text", "run": "r-dead", "text": "never taken"}'


def _config(tmp_path: Path, redis_url: str) -> Path:
    path = tmp_path / "channels.toml"
    path.write_text(f'[service]\nbackend = "redis"\nredis_url = "{redis_url}"\npartitions = {PARTITIONS}\n')
    return path


async def _bury(client: Redis, partition: int, line: str = BAD_LINE) -> str:
    """An input line three owners failed on, moved to the dead letters as the owners do after N deliveries; its
    source id in the input stream."""
    stream = InputStream(client)
    (source,) = await stream.append(partition, [JournalEntry("r-dead", line)])
    await stream.read(partition, "owner-a")
    for owner in ("owner-b", "owner-c"):
        await stream.claim(partition, owner)
    assert await stream.bury(partition, max_deliveries=2) == [source]
    return source


async def _cli(*args: str) -> Result:
    """``streamrelay ARGS`` in a thread (it runs its own event loop)."""
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})


async def test_dead_letters_are_listed_retried_and_dropped(client: Redis, redis_url: str, tmp_path: Path) -> None:
    config = _config(tmp_path, redis_url)
    source = await _bury(client, 2)
    await _bury(client, 3, '{"kind": "end"}')
    found = await dead_letters(redis_url, PARTITIONS)
    assert [(p, d.run, d.source, d.deliveries, d.consumer) for p, d in found[:1]] == [
        (2, "r-dead", source, 3, "owner-c")
    ]

    listed = await _cli("runs", "--dead", "--config", str(config), "--json")
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [(r["partition"], r["line"]) for r in rows] == [(2, BAD_LINE), (3, '{"kind": "end"}')]
    table = await _cli("runs", "--dead", "--config", str(config))
    assert "2 dead letters" in table.stdout and rows[0]["id"] in table.stdout and "r-dead" in table.stdout

    retried = await _cli("runs", "retry", "2", rows[0]["id"], "--config", str(config))
    assert retried.exit_code == 0 and "back in its input stream" in retried.stdout, retried.output
    assert [e.line for e in await InputStream(client).read(2, "owner-d")] == [BAD_LINE]  # the owner takes it again
    assert await InputStream(client).dead(2) == []

    dropped = await _cli("runs", "drop", "3", rows[1]["id"], "--config", str(config))
    assert dropped.exit_code == 0 and "dropped" in dropped.stdout, dropped.output
    assert await dead_letters(redis_url, PARTITIONS) == []
    assert "0 dead letters" in (await _cli("runs", "--dead", "--config", str(config))).stdout


async def test_dead_letters_through_sentinel_only(sentinels: RedisSentinels, tmp_path: Path) -> None:
    """A deployment that names its Redis through Sentinel alone (no host in any URL): the dead-letter commands reach
    the primary the sentinels name, as ``serve`` does."""
    config = tmp_path / "channels.toml"
    config.write_text(
        f'[service]\nbackend = "redis"\nredis_sentinels = {json.dumps(sentinels.addresses)}\n'
        f'redis_sentinel_master = "{MASTER}"\npartitions = {PARTITIONS}\n'
    )
    primary = connect(sentinels.primary_url)
    try:
        await _bury(primary, 1)
        listed = await _cli("runs", "--dead", "--config", str(config), "--json")
        assert listed.exit_code == 0, listed.output
        rows = json.loads(listed.stdout)
        assert [(r["partition"], r["line"]) for r in rows] == [(1, BAD_LINE)]

        retried = await _cli("runs", "retry", "1", rows[0]["id"], "--config", str(config))
        assert retried.exit_code == 0 and "back in its input stream" in retried.stdout, retried.output
        assert [e.line for e in await InputStream(primary).read(1, "owner-d")] == [BAD_LINE]

        await _bury(primary, 2)
        (letter,) = await InputStream(primary).dead(2)
        dropped = await _cli("runs", "drop", "2", letter.id, "--config", str(config))
        assert dropped.exit_code == 0 and "dropped" in dropped.stdout, dropped.output
        assert await InputStream(primary).dead(2) == []
    finally:
        await primary.aclose()


async def test_dead_letter_commands_fail_in_one_clear_line(client: Redis, redis_url: str, tmp_path: Path) -> None:
    config = str(_config(tmp_path, redis_url))
    (tmp_path / "down").mkdir()
    down = _config(tmp_path / "down", f"redis://:hunter2@127.0.0.1:{_closed_port()}/0")
    cases = [
        (await _cli("runs", "retry", "2", "1-0", "--config", config), 1, "partition 2 has no dead letter 1-0"),
        (await _cli("runs", "drop", "2", "1-0", "--config", config), 1, "partition 2 has no dead letter 1-0"),
        (await _cli("runs", "drop", "9", "1-0", "--config", config), 2, "partition 9 does not exist: this deployment"),
        (await _cli("runs", "retry", "1", "latest", "--config", config), 2, "'latest' is not a dead letter id"),
        (await _cli("runs", "--dead", "--config", str(down)), 1, "cannot reach Redis at redis://***@127.0.0.1:"),
        (await _cli("runs", "--dead", "--config", str(tmp_path / "nope.toml")), 2, "configuration error"),
    ]
    for done, code, message in cases:
        assert done.exit_code == code, done.output
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.output and "hunter2" not in done.output


class _Local:
    """The relay of a partition this replica owns, as far as the listing reads it."""

    async def runs(self) -> RunListing:
        row = RunRow(
            run="a-1",
            channel="telegram",
            platform="telegram",
            mode="preview",
            started_at=1.0,
            age_s=0.5,
            status="pending",
            confirmed=0,
            uncertain=0,
            failed=0,
            rate_limited=0,
            watch=None,
        )
        return RunListing(runs=[row])


async def test_a_replica_lists_every_live_replicas_runs(client: Redis) -> None:
    mock, relay, sidecar = await start_stack(MemoryLedger())  # replica b's HTTP surface, with one run of its own
    try:
        start = {"kind": "run.start", "run": "b-1", "channel": "telegram", "target": {"chat_id": 5}}
        assert await relay.submit_line(start) == 1
        urls, leases = ReplicaUrls(client), Leases(client)
        for owner, url in (
            ("a", "http://127.0.0.1:1"),
            ("b", sidecar.url),
            ("d", f"http://127.0.0.1:{_closed_port()}"),
        ):
            await leases.heartbeat(owner, 10_000)
            await urls.announce(owner, url)
        await client.zadd("sr:{replicas}", {"c": 1})  # its heartbeat lapsed long ago: not asked
        await urls.announce("c", sidecar.url)
        assert sorted(await urls.live()) == ["a", "b", "d"]

        local = cast(Relay, _Local())
        front = ReplicaFront({}, InputStream(client), RunIndex(client), PARTITIONS, local=lambda _p: None)
        front.follow(lambda: [local])
        front.peers = ReplicaPeers(urls, "a")
        mine = await front.runs()
        assert [(r.run, r.status, r.started_at, r.replica) for r in mine.runs] == [("a-1", "pending", 1.0, "a")]
        assert mine.unreachable == []

        every = await front.runs(everywhere=True, bearer=f"Bearer {INGEST_TOKEN}")
        assert [(r.run, r.replica) for r in every.runs] == [("a-1", "a"), ("b-1", "b")]
        assert every.runs[1].watch == sidecar.watch_path("b-1")  # b's own answer, with its read token
        assert [(u.replica, u.error) for u in every.unreachable] == [("d", "no answer (ConnectError)")]

        refused = await front.runs(everywhere=True, bearer="Bearer wrong")
        assert [r.run for r in refused.runs] == ["a-1"]
        assert {u.replica: u.error for u in refused.unreachable}["b"] == "answered 401"
    finally:
        await stop_stack(mock, relay, sidecar)


async def test_without_redis_a_replica_lists_its_own_runs_and_says_why(client: Redis) -> None:
    down = connect(f"redis://127.0.0.1:{_closed_port()}/0")
    try:
        front = ReplicaFront({}, InputStream(client), RunIndex(client), PARTITIONS, local=lambda _p: None)
        local = cast(Relay, _Local())
        front.follow(lambda: [local])
        front.peers = ReplicaPeers(ReplicaUrls(down), "a")
        listing = await front.runs(everywhere=True, bearer="Bearer x")
        assert [r.run for r in listing.runs] == ["a-1"]
        assert listing.unreachable == [Unreachable(replica="", url="", error="Redis unreachable (ConnectionError)")]
    finally:
        await down.aclose()
