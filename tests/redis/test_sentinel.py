"""A Redis that fails over (issue 24, item 5): a real primary, one replica and three sentinels
(:class:`app.chaos.sentinels.RedisSentinels`), three `streamrelay serve` replicas that find the primary through the
sentinels, a recorded answer streamed slowly, and the primary killed with -9 a third of the way in. The sentinels
promote the replica; the sidecar's replicas reconnect to it, keep their epoch markers (not "Redis lost its data"),
take their partitions again with fencing tokens that only grew, and the run finishes with the answer shown once
and a report that says delivered.

Also: `serve` refuses a Redis without an append-only file, and says why, unless `allow_volatile_redis = true`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from streamrelay.adapters.redis import Durability, NotReplicatedError, connect, connect_sentinel
from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.lease import Leases
from streamrelay.app.chaos.answers import load_recordings
from streamrelay.app.chaos.sentinels import MASTER, RedisSentinels
from streamrelay.app.dry_run import DRY_RUN
from tests.contention import wait_scale
from tests.preloaded import streamrelay_process
from tests.redis.conftest import _start, redis_binary
from tests.redis.test_failover import PARTITIONS, TOKEN, Replicas, _config, _until

pytestmark = pytest.mark.timeout(300)

RECORDING = "openai-chat/long-text.jsonl"
DELTAS = 120
"""The first deltas of the recorded answer (about 600 characters, a few paragraphs)."""


def _sentinel_config(tmp: Path, api_base: str, sentinels: RedisSentinels) -> Path:
    path = _config(tmp, api_base, "preview")
    service = [
        f"redis_sentinels = {json.dumps(sentinels.addresses)}",
        f'redis_sentinel_master = "{MASTER}"',
    ]
    path.write_text(path.read_text().replace("[service]\n", "[service]\n" + "\n".join(service) + "\n", 1))
    return path


def _bare(text: str) -> str:
    """``text`` without whitespace and Markdown's marks (what the chat shows is the rendered answer)."""
    return re.sub(r"[\s*_#`]", "", text)


async def _fences(client: Redis) -> dict[int, int]:
    leases = Leases(client)
    return {p: await leases.fence(p) or 0 for p in range(PARTITIONS)}


async def _post(http: httpx.AsyncClient, url: str, body: bytes) -> httpx.Response:
    """POST as an agent does: sent again after a 503 (Redis failing over, or the replica pushing back)."""
    for _ in range(240):
        answer = await http.post(url, content=body)
        if answer.status_code != 503:
            return answer
        await asyncio.sleep(min(1.0, float(answer.headers.get("Retry-After", "1"))))
    return answer


async def test_the_primary_killed_mid_run_is_replaced_and_the_run_finishes_once(
    tmp_path: Path, sentinels: RedisSentinels
) -> None:
    recording = next(r for r in load_recordings() if r.name == RECORDING)
    pieces = list(recording.deltas[:DELTAS])
    dry = DRY_RUN["telegram"]
    mock = dry.make_mock(False)
    await mock.start()
    replicas = Replicas(_sentinel_config(tmp_path, mock.base_url, sentinels), "", tmp_path / "replicas.log")
    client = connect_sentinel([("127.0.0.1", p) for p in sentinels.sentinel_ports], MASTER)
    target = dry.target()
    run = "sentinel-1"
    lines = [{"kind": "run.start", "channel": "chat", "target": target.model_dump(), "seq": 0}]
    lines += [{"kind": "text", "mode": "delta", "text": p, "seq": i + 1} for i, p in enumerate(pieces)]
    lines.append({"kind": "end", "status": "ok", "seq": len(pieces) + 1})
    bodies = [(json.dumps({"run": run, **line}) + "\n").encode() for line in lines]
    try:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:

            async def ready() -> bool:
                return await replicas.ready(http, client)

            await _until(
                ready, 120 * wait_scale(), "three replicas ready on the sentinels' primary, every partition owned"
            )
            before = await _fences(client)
            url = replicas.url(0) + f"/v1/runs/{run}/events"
            third = len(bodies) // 3
            for body in bodies[:third]:
                assert (await _post(http, url, body)).status_code == 200
                await asyncio.sleep(0.03)
            failing = asyncio.create_task(sentinels.fail_over(0.0, restart_after_s=1.0))
            for body in bodies[third:]:  # the rest streams while the primary dies and the replica is promoted
                answer = await _post(http, url, body)
                assert answer.status_code == 200, answer.text
                await asyncio.sleep(0.03)
            record = await failing
            assert record.promoted != record.killed
            report = await http.get(replicas.url(1) + f"/v1/runs/{run}", params={"wait_s": 90}, timeout=120)
            assert report.status_code == 200, report.text
            assert report.json()["done"] and report.json()["status"] == "delivered", report.json()
            texts = [text for _, text in mock.visible(target.chat_id)]
            assert _bare("".join(texts)) == _bare("".join(pieces)), texts  # whole, in order, nothing twice
            for i in range(3):  # a promoted replica holds the epoch markers: nobody reads it as data lost
                ready_now = await http.get(replicas.url(i) + "/readyz")
                assert ready_now.status_code == 200, ready_now.text
            after = await _fences(client)
            assert all(after[p] >= before[p] for p in range(PARTITIONS)), (before, after)
            assert await client.get("sr:{p0}:epoch") is not None
        log = replicas.log.read_text()
        assert "Redis lost its data" not in log
        assert all(proc.poll() is None for proc in replicas.procs), log[-3000:]
    finally:
        replicas.stop()
        await client.aclose()
        await mock.stop()


async def test_a_durable_write_waits_for_the_replica_and_is_refused_when_it_cannot_have_it(
    sentinels: RedisSentinels,
) -> None:
    """A lease grant is acknowledged by the replica before it counts; with the replica paused (SIGSTOP) the grant is
    refused as not replicated (the fencing token it took is never used), and goes through once it answers again."""
    durability = Durability(1, timeout_ms=300)
    client = connect(sentinels.primary_url, durability=durability)
    leases = Leases(client)
    replica = next(p for p in sentinels.data_ports if p != sentinels.primary_port)
    try:
        assert await leases.acquire(0, "owner-a", 60_000) == 1
        replica_client = connect(f"redis://127.0.0.1:{replica}/0")
        try:
            assert await replica_client.get("sr:{p0}:fence") == "1"  # on the replica when the grant was answered
        finally:
            await replica_client.aclose()
        proc = sentinels.nodes[replica].popen
        assert proc is not None
        proc.send_signal(signal.SIGSTOP)  # connected, but acknowledges nothing
        try:
            with pytest.raises(NotReplicatedError, match="acknowledged by 0 of 1"):
                await leases.acquire(1, "owner-a", 60_000)
        finally:
            proc.send_signal(signal.SIGCONT)
        assert await leases.release(1, "owner-a", 1)  # the refused grant (token 1), given back (else it expires)
        assert await leases.acquire(1, "owner-b", 60_000) == 2  # token 1 was never used: the next grant is above
    finally:
        await client.aclose()


def _serve(config: Path, env: dict[str, str], timeout_s: float = 90) -> subprocess.CompletedProcess[str]:
    """Run ``serve`` to its exit (forked from the worker's zygote: tests/preloaded.py), its output in ``stdout``
    (stderr with it); ``timeout_s`` is a hang guard for an idle machine, scaled by the load
    (:func:`tests.contention.wait_scale`: at load 30 on 2 cores a refusing ``serve`` took over 90 s to exit)."""
    timeout_s *= wait_scale()
    log = config.parent / "refused.log"
    log.write_bytes(b"")
    args = ["serve", "--config", str(config), "--port", "0"]
    full_env = {**os.environ, "STREAMRELAY_TOKEN": TOKEN, "NO_COLOR": "1", "COLUMNS": "400", **env}
    proc = streamrelay_process(args, full_env, log)
    try:
        code = proc.wait(timeout_s)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(args, code, log.read_text(errors="replace"), "")


async def test_serve_refuses_a_redis_without_persistence_and_says_why(tmp_path: Path) -> None:
    binary = redis_binary()

    server, port = _start(binary, tmp_path, appendonly="no")
    try:
        config = tmp_path / "channels.toml"
        config.write_text('[service]\nbackend = "redis"\nactions = ""\n')
        env = {"STREAMRELAY_SERVICE__REDIS_URL": f"redis://127.0.0.1:{port}/0"}
        refused = await asyncio.to_thread(_serve, config, env)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        said = " ".join((refused.stdout + refused.stderr).split())
        assert "no persistence (appendonly no, save '')" in said, said
        assert "allow_volatile_redis = true" in said and "appendonly yes" in said, said
    finally:
        server.kill()
        server.wait()


async def test_serve_refuses_an_append_only_file_never_fsynced(tmp_path: Path) -> None:
    """``appendonly yes`` with ``appendfsync no``: the OS writes the file when it likes (~30 s), so a machine crash
    loses lines answered 200 and sends fencing tokens back: refused like no append-only file (breaker2 F7)."""
    binary = redis_binary()

    server, port = _start(binary, tmp_path, appendonly="yes", appendfsync="no")
    try:
        config = tmp_path / "channels.toml"
        config.write_text('[service]\nbackend = "redis"\nactions = ""\n')
        env = {"STREAMRELAY_SERVICE__REDIS_URL": f"redis://127.0.0.1:{port}/0"}
        refused = await asyncio.to_thread(_serve, config, env)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        said = " ".join((refused.stdout + refused.stderr).split())
        assert "never fsynced (appendfsync no)" in said, said
        assert "allow_volatile_redis = true" in said, said
    finally:
        server.kill()
        server.wait()


async def test_serve_takes_a_volatile_redis_when_the_operator_says_so(tmp_path: Path) -> None:
    binary = redis_binary()

    server, port = _start(binary, tmp_path, appendonly="no")
    config = tmp_path / "channels.toml"
    config.write_text('[service]\nbackend = "redis"\nactions = ""\nallow_volatile_redis = true\n')
    env = {
        **os.environ,
        "STREAMRELAY_TOKEN": TOKEN,
        "NO_COLOR": "1",
        "STREAMRELAY_SERVICE__REDIS_URL": f"redis://127.0.0.1:{port}/0",
    }
    log = tmp_path / "serve.log"
    log.write_bytes(b"")
    proc = streamrelay_process(["serve", "--config", str(config), "--port", "0"], env, log)  # tests/preloaded.py
    try:

        def started() -> bool:
            assert proc.poll() is None, log.read_text()[-3000:]
            return " ready on " in log.read_text()

        await _until(started, 90 * wait_scale(), "the replica ready on the volatile Redis")
        assert "taken because allow_volatile_redis = true" in log.read_text()
    finally:
        proc.terminate()
        proc.wait(30)
        server.kill()
        server.wait()


def test_redis_settings_take_sentinels_or_a_url(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from streamrelay.config.settings import ServiceSettings

    found = ServiceSettings(
        backend="redis", redis_sentinels=["10.0.0.1:26379", "[::1]:26380"], redis_sentinel_master="m"
    )
    assert found.sentinel_addresses() == [("10.0.0.1", 26379), ("::1", 26380)]
    assert found.wait_replicas() == 1
    assert ServiceSettings(backend="redis", redis_url="redis://h:6379/0").wait_replicas() == 0
    with pytest.raises(ValidationError, match="redis_sentinel_master"):
        ServiceSettings(backend="redis", redis_sentinels=["h:26379"])
    with pytest.raises(ValidationError, match="is not host:port"):
        ServiceSettings(backend="redis", redis_sentinels=["h"], redis_sentinel_master="m")
    with pytest.raises(ValidationError, match="leave its host out"):
        ServiceSettings(
            backend="redis",
            redis_sentinels=["h:26379"],
            redis_sentinel_master="m",
            redis_url="redis://:pw@primary:6379/0",
        )
    with pytest.raises(ValidationError, match="needs redis_url"):
        ServiceSettings(backend="redis")


async def test_a_replica_started_while_redis_does_not_answer_waits_for_it(tmp_path: Path) -> None:
    """A replica (re)started while its Redis fails over, or before Redis is up, waits for it (``/readyz`` 503
    "waiting for Redis") and becomes ready once it answers, instead of exiting."""
    binary = redis_binary()
    from tests.ports import free_port as _free_port

    redis_port, port = _free_port(), _free_port()
    config = tmp_path / "channels.toml"
    config.write_text('[service]\nbackend = "redis"\nactions = ""\n')
    env = {
        **os.environ,
        "STREAMRELAY_TOKEN": TOKEN,
        "NO_COLOR": "1",
        "STREAMRELAY_SERVICE__REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
    }
    log = tmp_path / "serve.log"
    log.write_bytes(b"")
    proc = streamrelay_process(["serve", "--config", str(config), "--port", str(port)], env, log)  # tests/preloaded.py
    server: subprocess.Popen[bytes] | None = None
    try:
        async with httpx.AsyncClient(timeout=10) as http:

            async def waiting() -> bool:
                assert proc.poll() is None, log.read_text()[-3000:]
                try:
                    answer = await http.get(f"http://127.0.0.1:{port}/readyz")
                except httpx.TransportError:
                    return False
                return answer.status_code == 503 and "waiting for Redis" in answer.text

            await _until(waiting, 90 * wait_scale(), "the replica saying it waits for Redis")
            argv = [binary, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes"]
            server = subprocess.Popen([*argv, "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)

            async def ready() -> bool:
                assert proc.poll() is None, log.read_text()[-3000:]
                return (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200

            await _until(ready, 90 * wait_scale(), "the replica ready once Redis answers")
    finally:
        proc.terminate()
        proc.wait(30)
        if server is not None:
            server.kill()
            server.wait()
