"""A Redis that fails over, for the chaos campaign's ``primary failover`` fault and the Sentinel tests: a primary,
one replica and three sentinels, each a real ``redis-server`` process on a free port of 127.0.0.1.

Both data nodes keep an append-only file (``appendfsync always``: Redis 7.0 has no ``WAITAOF``, so the primary's
own disk is made sure of by the fsync and the replicas' copies by ``WAIT``). The sentinels watch the primary under
:data:`MASTER` with a quorum of 2, call it down after :data:`DOWN_AFTER_MS` of silence and promote the replica.
:meth:`RedisSentinels.fail_over` kills the primary with SIGKILL, waits until the sentinels name the promoted
replica and it answers as primary, then starts the killed one again: the sentinels turn it into a replica of the
new primary (it resynchronises from it), so the next failover has a replica to promote.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from streamrelay.adapters.redis.client import online_replicas
from streamrelay.app.chaos.procs import HOST, PIDS, Proc, child_env, free_port, redis_argv, redis_server

MASTER = "streamrelay"
"""The name the sentinels monitor the primary under (``redis_sentinel_master``)."""
DOWN_AFTER_MS = 1000
"""Sentinel's ``down-after-milliseconds``: how long the primary may be silent before it is called down."""
FAILOVER_TIMEOUT_MS = 4000
"""Sentinel's ``failover-timeout``."""
PROMOTION_TIMEOUT_S = 60.0
"""How long :meth:`RedisSentinels.fail_over` waits for the promotion (a loaded machine: several times the usual
2-4 s)."""


@dataclass
class FailoverRecord:
    """One failover: the primary killed (``killed``, its port), the promoted one (``promoted``), when the kill was
    (``at_s``, seconds into the campaign) and how long until the promoted one answered as primary (``took_s``)."""

    killed: int
    promoted: int
    at_s: float
    took_s: float

    def to_json(self) -> dict[str, Any]:
        return {"killed": self.killed, "promoted": self.promoted, "at_s": self.at_s, "took_s": self.took_s}


class RedisSentinels:
    """A primary, a replica and three sentinels (module docstring).

    Args:
        out: the folder of their logs (``redis-<port>.log``, ``sentinel-<port>.log``) and of ``pids.json``.

    Raises:
        RuntimeError: no ``redis-server`` on PATH.
    """

    def __init__(self, out: Path) -> None:
        binary = redis_server()
        self.folder = Path(tempfile.mkdtemp(prefix="streamrelay-sentinels-"))
        self.data_ports = [free_port(), free_port()]
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.nodes: dict[int, Proc] = {}
        for i, port in enumerate(self.data_ports):
            folder = self.folder / f"redis-{port}"
            folder.mkdir()
            argv = redis_argv(binary, port, folder)
            if i > 0:
                argv += ["--replicaof", HOST, str(self.data_ports[0])]
            self.nodes[port] = Proc(f"redis-{port}", argv, child_env({}), out / f"redis-{port}.log", out / PIDS)
        self.sentinels: list[Proc] = []
        for port in self.sentinel_ports:
            conf = self.folder / f"sentinel-{port}.conf"  # sentinel rewrites it: one writable file each
            conf.write_text(
                "\n".join(
                    [
                        f"port {port}",
                        f"bind {HOST}",
                        f"dir {self.folder}",
                        f"sentinel monitor {MASTER} {HOST} {self.data_ports[0]} 2",
                        f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}",
                        f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}",
                        f"sentinel parallel-syncs {MASTER} 1",
                        "",
                    ]
                )
            )
            argv = [binary, str(conf), "--sentinel", "--loglevel", "notice"]
            self.sentinels.append(
                Proc(f"sentinel-{port}", argv, child_env({}), out / f"sentinel-{port}.log", out / PIDS)
            )
        self.primary_port = self.data_ports[0]

    def __repr__(self) -> str:
        return f"RedisSentinels(primary={self.primary_port}, sentinels={self.sentinel_ports})"

    @property
    def addresses(self) -> list[str]:
        """The sentinels as ``host:port`` (``redis_sentinels``)."""
        return [f"{HOST}:{port}" for port in self.sentinel_ports]

    @property
    def primary_url(self) -> str:
        """The current primary's URL (as this object last saw it)."""
        return f"redis://{HOST}:{self.primary_port}/0"

    async def start(self, timeout_s: float = 60.0) -> None:
        """Start the data nodes, wait until the replica is in sync, then the sentinels, and wait until each of them
        knows the replica and the other sentinels (a failover needs both).

        Raises:
            RuntimeError: a process exited, or they were not ready within ``timeout_s``.
        """
        for proc in self.nodes.values():
            proc.start()
        deadline = time.monotonic() + timeout_s
        await self._until(self._in_sync, deadline, "the replica in sync with the primary")
        for proc in self.sentinels:
            proc.start()
        await self._until(self._sentinels_ready, deadline, "the sentinels to know the replica and each other")

    async def _until(self, check: Any, deadline: float, what: str) -> None:
        while time.monotonic() < deadline:
            dead = [p.name for p in [*self.nodes.values(), *self.sentinels] if p.popen is not None and not p.alive]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited while starting (logs beside the transcripts)")
            with contextlib.suppress(Exception):
                if await check():
                    return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"timed out waiting for {what}")

    @contextlib.asynccontextmanager
    async def _client(self, port: int) -> AsyncIterator[aioredis.Redis]:
        client = aioredis.Redis(
            host=HOST, port=port, socket_timeout=2.0, socket_connect_timeout=1.0, decode_responses=True
        )
        try:
            yield client
        finally:
            await client.aclose()

    async def _role(self, port: int) -> list[Any]:
        async with self._client(port) as client:
            return list(await client.role())

    async def _in_sync(self) -> bool:
        role = await self._role(self.data_ports[1])
        return bool(role[0] == "slave" and role[3] == "connected")

    async def _sentinels_ready(self) -> bool:
        for port in self.sentinel_ports:
            async with self._client(port) as client:
                master = await client.sentinel_master(MASTER)
            if not isinstance(master, dict) or int(master["num-slaves"]) < 1 or int(master["num-other-sentinels"]) < 2:
                return False
        return True

    async def named_primary(self) -> int | None:
        """The primary's port as the sentinels name it (the first that answers; None: none answered)."""
        for port in self.sentinel_ports:
            with contextlib.suppress(Exception):
                async with self._client(port) as client:
                    found = await client.sentinel_get_master_addr_by_name(MASTER)
                if isinstance(found, tuple):
                    return int(found[1])
        return None

    async def fail_over(self, at_s: float, *, restart_after_s: float = 1.0) -> FailoverRecord:
        """Kill the primary with SIGKILL; return once the sentinels name the promoted replica and it answers as
        primary; the killed one is started again ``restart_after_s`` later (it rejoins as a replica).

        Raises:
            RuntimeError: no promotion within :data:`PROMOTION_TIMEOUT_S`.
        """
        killed = await self.named_primary() or self.primary_port
        t = time.monotonic()
        self.nodes[killed].kill()
        deadline = t + PROMOTION_TIMEOUT_S

        async def promoted() -> bool:
            port = await self.named_primary()
            if port is None or port == killed:
                return False
            return bool((await self._role(port))[0] == "master")

        await self._until_promoted(promoted, deadline)
        new = await self.named_primary()
        assert new is not None
        self.primary_port = new
        record = FailoverRecord(killed, new, at_s, round(time.monotonic() - t, 3))
        await asyncio.sleep(restart_after_s)
        self.nodes[killed].start()
        return record

    async def _until_promoted(self, promoted: Any, deadline: float) -> None:
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if await promoted():
                    return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"no replica was promoted within {PROMOTION_TIMEOUT_S:g} s of the primary's kill")

    async def replica_in_sync(self, timeout_s: float = 60.0) -> None:
        """Wait until the current primary has a replica online again (after :meth:`fail_over` restarted one).

        Raises:
            RuntimeError: none within ``timeout_s``.
        """

        async def online() -> bool:
            async with self._client(self.primary_port) as client:
                return online_replicas(await client.info("replication")) > 0

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if await online():
                    return
            await asyncio.sleep(0.1)
        raise RuntimeError(f"no replica of the primary {self.primary_port} came online within {timeout_s:g} s")

    def stop(self) -> None:
        """Stop the sentinels, then the data nodes (SIGTERM, then SIGKILL), and remove their folder."""
        for proc in [*self.sentinels, *self.nodes.values()]:
            proc.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
