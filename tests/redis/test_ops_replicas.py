"""``streamrelay runs`` against two replicas on one redis-server (in this process:
:func:`tests.redis.replicas.two_replicas`): each replica holds one of the two partitions, and either one lists both
runs (``GET /v1/runs?all=1``: its own, and the other's asked over HTTP), each with the replica that holds it."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.adapters.redis import conversation_key, partition_of
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.config.settings import load_settings
from tests.redis.replicas import PARTITIONS, SERVICE, two_replicas, until
from tests.redis.test_failover import post_as_agent

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "replica-ops-token"


def _config(tmp: Path, api_base: str) -> Path:
    path = tmp / "channels.toml"
    channel = f'[channels.chat]\nplatform = "telegram"\ntoken_env = "OPS_BOT_TOKEN"\napi_base = "{api_base}"\n'
    path.write_text(SERVICE + "\n" + channel + "throttle_ms = 100\ntyping = false\n")
    return path


def _chat_in(partition: int) -> int:
    """A chat id whose conversation lives in ``partition``."""
    return next(c for c in range(1, 1000) if partition_of(conversation_key("chat", c), PARTITIONS) == partition)


def _line(run: str, **event: Any) -> bytes:
    return (json.dumps({"run": run, **event}) + "\n").encode()


async def test_either_replica_lists_every_replicas_runs(
    tmp_path: Path, redis_url: str, client: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    dry = DRY_RUN["telegram"]
    mock = dry.make_mock(False)
    await mock.start()
    monkeypatch.setenv("STREAMRELAY_TOKEN", TOKEN)
    monkeypatch.setenv("OPS_BOT_TOKEN", dry.token)
    monkeypatch.setenv("STREAMRELAY_SERVICE__REDIS_URL", redis_url)
    settings = load_settings(_config(tmp_path, mock.base_url))
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    try:
        async with (
            httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
            two_replicas(settings, client, http) as urls,
        ):
            for partition in range(PARTITIONS):
                run = f"ops-{partition}"
                body = _line(run, kind="run.start", channel="chat", target={"chat_id": _chat_in(partition)})
                body += _line(run, kind="text", mode="delta", text=f"Run {partition} is under way")
                assert (await post_as_agent(http, f"{urls[0]}/v1/runs/{run}/events", body)).status_code == 200

            async def both(url: str) -> list[dict[str, Any]] | None:
                rows: list[dict[str, Any]] = (await http.get(url + "/v1/runs", params={"all": "1"})).json()["runs"]
                return rows if sorted(r["run"] for r in rows) == ["ops-0", "ops-1"] else None

            for url in urls:
                rows = await until(functools.partial(both, url), f"both runs listed by {url}")
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
        await mock.stop()
