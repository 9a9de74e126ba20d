"""``streamrelay runs`` against two `streamrelay serve` replicas on one redis-server: each replica holds one of the
two partitions, and either one lists both runs (``GET /v1/runs?all=1``: its own, and the other's asked over HTTP),
each with the replica that holds it."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.adapters.redis import conversation_key, partition_of
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.dry_run import DRY_RUN
from tests.contention import wait_scale
from tests.ports import free_port as _free_port
from tests.redis.test_failover import post_as_agent

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "replica-ops-token"
PARTITIONS = 2


def _config(tmp: Path, api_base: str) -> Path:
    path = tmp / "channels.toml"
    service = f'[service]\nbackend = "redis"\npartitions = {PARTITIONS}\nlease_ttl_s = 2.0\ndrain_s = 1\nactions = ""\n'
    channel = f'[channels.chat]\nplatform = "telegram"\ntoken_env = "OPS_BOT_TOKEN"\napi_base = "{api_base}"\n'
    path.write_text(service + "\n" + channel + "throttle_ms = 100\ntyping = false\n")
    return path


def _chat_in(partition: int) -> int:
    """A chat id whose conversation lives in ``partition``."""
    return next(c for c in range(1, 1000) if partition_of(conversation_key("chat", c), PARTITIONS) == partition)


async def _until(check: Callable[[], Awaitable[Any]], what: str, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s * wait_scale()  # a hang guard for an idle machine, scaled by the load
    while time.monotonic() < deadline:
        if found := await check():
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _line(run: str, **event: Any) -> bytes:
    return (json.dumps({"run": run, **event}) + "\n").encode()


async def test_either_replica_lists_every_replicas_runs(tmp_path: Path, redis_url: str, client: Redis) -> None:
    dry = DRY_RUN["telegram"]
    mock = dry.make_mock(False)
    await mock.start()
    ports = [_free_port(), _free_port()]
    env = {
        **os.environ,
        "STREAMRELAY_TOKEN": TOKEN,
        "OPS_BOT_TOKEN": dry.token,
        "STREAMRELAY_SERVICE__REDIS_URL": redis_url,
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    config = _config(tmp_path, mock.base_url)
    log = (tmp_path / "replicas.log").open("ab")
    command = [sys.executable, "-m", "streamrelay", "serve", "--config", str(config), "--port"]
    procs = [subprocess.Popen([*command, str(p)], cwd=ROOT, env=env, stdout=log, stderr=log) for p in ports]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    try:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:

            async def split() -> bool:  # both ready, each holding one partition
                for proc in procs:
                    assert proc.poll() is None, (tmp_path / "replicas.log").read_text()[-3000:]
                try:
                    ready = [(await http.get(url + "/readyz")).status_code == 200 for url in urls]
                except httpx.TransportError:
                    return False
                holders = [await client.get(f"sr:{{p{p}}}:lease") for p in range(PARTITIONS)]
                owners = {str(h).split(":", 1)[1] for h in holders if h}
                return all(ready) and len(owners) == PARTITIONS

            await _until(split, "two replicas holding a partition each")
            for partition in range(PARTITIONS):
                run = f"ops-{partition}"
                body = _line(run, kind="run.start", channel="chat", target={"chat_id": _chat_in(partition)})
                body += _line(run, kind="text", mode="delta", text=f"Run {partition} is under way")
                assert (await post_as_agent(http, f"{urls[0]}/v1/runs/{run}/events", body)).status_code == 200

            async def both(url: str) -> list[dict[str, Any]] | None:
                rows: list[dict[str, Any]] = (await http.get(url + "/v1/runs", params={"all": "1"})).json()["runs"]
                return rows if sorted(r["run"] for r in rows) == ["ops-0", "ops-1"] else None

            for url in urls:
                rows = await _until(functools.partial(both, url), f"both runs listed by {url}")
                assert len({r["replica"] for r in rows}) == 2 and all(r["watch"].startswith("/runs/") for r in rows)
            for partition in range(PARTITIONS):  # each run's timeline through either replica (the owner's memory)
                for url in urls:
                    timeline = await http.get(f"{url}/v1/runs/ops-{partition}/timeline")
                    assert timeline.status_code == 200, timeline.text
                    assert timeline.json()["run"] == f"ops-{partition}" and timeline.json()["entries"]
            own = (await http.get(urls[0] + "/v1/runs")).json()
            assert len(own["runs"]) == 1 and own["unreachable"] == []  # without all: its own partition's run only

            done = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "streamrelay", "runs", "--url", urls[1]],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            assert "2 active runs" in done.stdout and "ops-0" in done.stdout and "ops-1" in done.stdout
            assert "replica" in done.stdout and done.stdout.count(f"{urls[1]}/runs/ops-") == 2
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in procs:
            proc.wait(10)
        log.close()
        await mock.stop()
