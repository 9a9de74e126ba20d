"""A real redis-server for the Redis backend's tests: started once per session on 127.0.0.1 (under pytest-xdist
once per worker, on a port of the worker's own: tests/ports.py), emptied before each test, stopped at the end. It
keeps an append-only file (``appendfsync everysec``) in its temporary folder, as ``streamrelay serve`` wants of a
Redis (it refuses one without, unless ``allow_volatile_redis = true``).

Without ``redis-server`` on PATH these tests skip, so ``uv run pytest`` works on a machine with only Python and
uv; with ``STREAMRELAY_REQUIRE_REDIS=1`` (CI: ``.ci/run`` installs it) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis

from streamrelay.adapters.redis.client import Redis, connect
from streamrelay.app.chaos.sentinels import RedisSentinels
from tests.contention import wait_scale
from tests.ports import free_port

NO_REDIS = "no redis-server on PATH: install Debian's redis-server: apt-get install redis-server"
START_TIMEOUT_S = 10.0


def _start(
    binary: str, folder: Path, *, appendonly: str = "yes", appendfsync: str = "everysec"
) -> tuple[subprocess.Popen[bytes], int]:
    """Start redis-server on a free port (``appendonly``: ``yes``, or ``no`` for a Redis ``serve`` refuses, as it
    refuses ``appendfsync`` ``no``); retry
    when another process took the port meanwhile (then the server that answers PING is not ours: its ``process_id``
    tells, and flushing another's data would fail its tests)."""
    for _ in range(3):
        port = free_port()
        args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", appendonly]
        args += [
            "--appendfsync",
            appendfsync,
            "--dir",
            str(folder),
            "--logfile",
            str(folder / "redis.log"),
            "--loglevel",
            "warning",
        ]
        server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        probe = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5)
        deadline = time.monotonic() + START_TIMEOUT_S * wait_scale()  # a hang guard, stretched by the load
        try:
            while time.monotonic() < deadline and server.poll() is None:
                try:
                    if probe.ping():
                        if probe.info("server")["process_id"] == server.pid:
                            return server, port
                        break
                except redis.ConnectionError:
                    time.sleep(0.05)
        finally:
            probe.close()
        server.kill()
        server.wait()
    log = (folder / "redis.log").read_text(errors="replace")[-2000:] if (folder / "redis.log").exists() else ""
    pytest.fail(
        f"redis-server did not answer PING within {START_TIMEOUT_S:g} s (times the load); its log ends:\n{log}",
        pytrace=False,
    )


def redis_binary() -> str:
    """redis-server's path; without one the test skips (fails under ``STREAMRELAY_REQUIRE_REDIS=1``: CI)."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("STREAMRELAY_REQUIRE_REDIS") == "1":
            pytest.fail(NO_REDIS, pytrace=False)
        pytest.skip(NO_REDIS)
    return binary


@pytest.fixture
async def sentinels(tmp_path: Path) -> AsyncIterator[RedisSentinels]:
    """A primary, a replica and three sentinels (:class:`app.chaos.sentinels.RedisSentinels`), started and in sync."""
    redis_binary()
    found = RedisSentinels(tmp_path)
    try:
        await found.start()
        yield found
    finally:
        found.stop()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a redis-server started for this session (skips without one)."""
    binary = redis_binary()
    server, port = _start(binary, tmp_path_factory.mktemp("redis"))
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[Redis]:
    """A client on the session's server, emptied first."""
    client = connect(redis_url)
    await client.flushdb()
    try:
        yield client
    finally:
        await client.aclose()


@pytest.fixture
async def clients(redis_url: str, client: Redis) -> AsyncIterator[list[Redis]]:
    """Three more clients (three replicas' connections) on the same, emptied server."""
    made = [connect(redis_url, client_name=f"replica-{i}") for i in range(3)]
    try:
        yield made
    finally:
        for each in made:
            await each.aclose()
