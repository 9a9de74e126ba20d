"""What the tests of two replicas share: two :func:`app.replicas.serving.serve_replica` in this process on one
redis-server (:func:`two_replicas`, cheaper than two ``streamrelay serve`` processes), ready and holding one of the
:data:`PARTITIONS` partitions each, with the ``[service]`` table they read (:data:`SERVICE`) and a hang-guarded
wait (:func:`until`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx

from streamrelay.adapters.ops import ServiceMetrics
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.replicas.serving import serve_replica
from streamrelay.config.settings import Settings
from tests.contention import wait_scale
from tests.ports import free_port

PARTITIONS = 2
SERVICE = (
    f'[service]\nbackend = "redis"\npartitions = {PARTITIONS}\nlease_ttl_s = 2.0\ndrain_s = 1\nactions = ""\n'
    "allow_volatile_redis = true\n"
)
"""The ``[service]`` table of two replicas on Redis (TOML, ending with a newline: a test appends its own settings);
``STREAMRELAY_SERVICE__REDIS_URL`` names the server."""


async def until(check: Callable[[], Awaitable[Any]], what: str, timeout_s: float = 60.0) -> Any:
    """``check()``'s first truthy answer, asked every 50 ms.

    Raises:
        AssertionError: none within ``timeout_s`` (a hang guard for an idle machine, scaled by the load).
    """
    deadline = time.monotonic() + timeout_s * wait_scale()
    while time.monotonic() < deadline:
        if found := await check():
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def start_replicas(
    settings: Settings, ports: list[int], stop: asyncio.Event, forced: asyncio.Event
) -> list[asyncio.Task[None]]:
    """One :func:`app.replicas.serving.serve_replica` task per port in ``ports`` on 127.0.0.1 (named
    ``replica-<i>``), with the callers' tokens and the channels' bot tokens of ``settings`` (read from the
    environment, as ``serve`` reads them); they run until ``stop`` is set (``forced``: without a drain)."""
    clients = [(limits, token.get_secret_value()) for limits, token in settings.client_tokens()]
    tokens = {name: channel.token(name) for name, channel in settings.channels.items()}
    return [
        asyncio.create_task(
            serve_replica(
                settings,
                clients=clients,
                metrics_token=None,
                tokens=tokens,
                metrics=ServiceMetrics("test"),
                host="127.0.0.1",
                port=port,
                log_level="warning",
                stop=stop,
                forced=forced,
            ),
            name=f"replica-{i}",
        )
        for i, port in enumerate(ports)
    ]


@asynccontextmanager
async def two_replicas(settings: Settings, client: Redis, http: httpx.AsyncClient) -> AsyncIterator[list[str]]:
    """Two replicas of ``settings`` (their ``[service]`` :data:`SERVICE`, with the callers' tokens and the channels'
    bot tokens from the environment, as ``serve`` reads them) on 127.0.0.1; yields their base URLs once both answer
    ``/readyz`` 200 (asked with ``http``) and each holds one partition's lease (read with ``client``). Stopped and
    drained at the exit.

    Raises:
        AssertionError: a replica stopped (its error chained) or the two were not split in time.
    """
    ports = [free_port(), free_port()]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    stop, forced = asyncio.Event(), asyncio.Event()
    replicas = start_replicas(settings, ports, stop, forced)

    async def split() -> bool:  # both ready, each holding one partition
        for replica in replicas:
            if replica.done():
                raise AssertionError("a replica stopped") from replica.exception()
        try:
            ready = [(await http.get(url + "/readyz")).status_code == 200 for url in urls]
        except httpx.TransportError:
            return False
        holders = [await client.get(f"sr:{{p{p}}}:lease") for p in range(PARTITIONS)]
        owners = {str(h).split(":", 1)[1] for h in holders if h}
        return all(ready) and len(owners) == PARTITIONS

    try:
        await until(split, "two replicas holding a partition each")
        yield urls
    finally:
        stop.set()
        forced.set()
        for replica in replicas:
            async with asyncio.timeout(30):
                await replica
