"""``streamrelay serve`` with ``[service] backend = "redis"``: one replica of several on one Redis.

The same listeners, probes, metrics and logs as one process (:mod:`app.serving`); underneath, the journal and
the ledger are Redis's (per partition, fenced), lines go through the partitions' input streams, and what only a
run's owner can answer is forwarded to it. ``/readyz`` asks Redis (never a chat platform). The first SIGTERM
drains: input stops, the owned partitions' runs get ``drain_s`` to finish, the leases are given back so the other
replicas take the partitions at once (what was left resumes there from the journal).

It listens first, as one process does: ``/healthz`` answers 200 and ``/readyz`` 503 "loading channels: telegram"
while the chat platforms' SDKs are imported in a worker thread (:func:`app.serving.load_channels`' way: aiogram
alone takes seconds); ingest answers 503 with ``Retry-After: 1`` until the partitions it took have resumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from pydantic import SecretStr
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.types import ASGIApp

from streamrelay.adapters.ingest_http import Callers
from streamrelay.adapters.ingest_http.owner_proxy import OwnerProxy, OwnerUnavailableError
from streamrelay.adapters.ops import Health, MeteredJournal, MeteredLedger, ServiceMetrics, ServiceState
from streamrelay.adapters.ops.traced import RunSpans
from streamrelay.adapters.redis import (
    Durability,
    InputStream,
    RedisLedger,
    RunIndex,
    persistence,
    shared_budgets_for,
)
from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.client_limits import SharedClientLimits
from streamrelay.adapters.redis.desk import SharedDesk
from streamrelay.adapters.redis.receipts import RedisReceipts
from streamrelay.adapters.registry import REGISTRY
from streamrelay.app.platform_loading import load_platforms, unloaded_channels
from streamrelay.app.redis_target import connect_service, redis_where
from streamrelay.app.replicas.client_book import SharedClientBook
from streamrelay.app.replicas.ended import OwnedEnded, ReplicaCorrections, desk_route
from streamrelay.app.replicas.front import ReplicaFront
from streamrelay.app.replicas.owner import AckingJournal
from streamrelay.app.replicas.service import ReplicaService, replica_id
from streamrelay.app.service import Sidecar, build_channels, service_sidecar
from streamrelay.app.serving import (
    HOUR_S,
    RETENTION_POLL_S,
    audit_sampler,
    heap_trim,
    keep_audits,
    keep_desk,
    keep_heap_trim,
    whatsapp_webhook,
)
from streamrelay.app.version import version
from streamrelay.config.actions import load_actions
from streamrelay.config.settings import Settings
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import ConfigError, IngestError, StoreUnavailableError
from streamrelay.core.ingest.clients import ClientLimits
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.records.receipts import Receipts
from streamrelay.core.run.audit import AuditError, AuditReport
from streamrelay.core.run.desk import Desk
from streamrelay.core.run.relay import Relay

_log = logging.getLogger("streamrelay.service")

RESUME_WAIT_S = 30.0
"""How long a starting replica waits for the partitions it took to resume before it says ready."""
REDIS_RETRY_S = 1.0
"""How often a starting replica asks a Redis that does not answer again (e.g. while Sentinel promotes a replica)."""


class ReplicaTaps:
    """WhatsApp approval taps on a replica (:mod:`adapters.whatsapp.webhook`): decided by this replica's front when it
    owns the run (``owner_of`` None), else posted on to the owner that
    :meth:`app.replicas.service.ReplicaService.locate` names. ``front`` and ``service`` are set once built; a tap
    before that is a 500 (Meta sends it again)."""

    front: ReplicaFront | None = None
    service: ReplicaService | None = None

    def __repr__(self) -> str:
        return "ReplicaTaps()"

    async def decide(self, run16: str, id16: str, decision: str, by: str) -> dict[str, Any]:
        if self.front is None:
            raise OwnerUnavailableError("the replica is starting")
        return await self.front.decide_approval(run16, id16, decision, by)

    async def owner_of(self, run16: str) -> str | None:
        if self.service is None:
            raise OwnerUnavailableError("the replica is starting")
        return await self.service.locate(run16)


async def serve_replica(
    settings: Settings,
    *,
    clients: list[tuple[ClientLimits, str]],
    metrics_token: str | None,
    tokens: dict[str, SecretStr],
    metrics: ServiceMetrics,
    host: str,
    port: int,
    log_level: str,
    stop: asyncio.Event,
    forced: asyncio.Event,
) -> None:
    """Run one replica until ``stop`` is set, then drain (until ``forced`` or ``drain_s``) and leave.

    Raises:
        ConfigError: a channel's token or adapter is wrong, or the action catalog.
        RuntimeError: a listener could not start (its port is in use).
    """
    service = settings.service
    client, where = redis_client(settings)
    pending = unloaded_channels(settings)
    # WhatsApp's status webhooks, taken by any replica, read by the settling one; each expires after the retention.
    # Each replica records its own as their receiver: a settle trusts silence only while a live replica hears them.
    owner = replica_id()
    receipts = RedisReceipts(client, retention_s=service.receipts_retention_hours * HOUR_S, receiver=owner)
    taps = ReplicaTaps()  # its front and service are set below, before serving
    webhook = whatsapp_webhook(receipts, taps.decide, taps.owner_of)
    settling = receipts if webhook else None
    loaded_now = _loaded_now(settings, pending)
    channels = build_channels(settings, tokens=tokens, metrics=metrics, names=loaded_now, receipts=settling)
    catalog, validate = load_actions(service.actions or None)
    clock = MonotonicClock()
    shared_limits = SharedClientLimits(client)  # a client's active runs and events per second, over every replica
    book = SharedClientBook(settings.client_limits(), shared_limits)
    callers = Callers(clients)
    trim = heap_trim(metrics, service.heap_trim_s)  # one for every partition's relay

    run_spans = RunSpans()  # a traced run's span (docs/tracing.md)
    replicas: ReplicaService | None = None
    front = ReplicaFront(
        channels,
        InputStream(client),
        RunIndex(client),
        service.partitions,
        local=lambda p: replicas.local(p) if replicas is not None else None,
    )
    front.book, front.limits = book, shared_limits
    taps.front = front
    # One sampled background audit for the replica (docs/audit.md): told of the runs that end on the partitions it
    # owns, each audited on its partition's relay here; a run whose partition moved meanwhile is not audited (logged).
    sampler = audit_sampler(functools.partial(audit_owned, front), channels, service, metrics, then=trim or metrics)
    front.audits = sampler  # the report of a run (answered by its owner) shows its audit

    def make_relay(ledger: Ledger, journal: AckingJournal) -> Relay:
        relay = Relay(
            channels,
            MeteredLedger(ledger, metrics),
            clock,
            journal=MeteredJournal(journal, metrics),
            run_idle_timeout_s=service.run_idle_timeout_s,
            retry_window_s=service.retry_window_s,
            live_buffer=service.live_buffer,
            catalog=catalog,
            validator=validate,
            clients=book,
            observer=sampler or trim or metrics,
            tracer=run_spans,
        )
        relay.audits = sampler
        return relay

    shared_desk = SharedDesk(client, service.partitions)  # every partition's entries, listed by any replica
    replicas = ReplicaService(
        client,
        front,
        make_relay,
        partitions=service.partitions,
        lease_ttl_s=service.lease_ttl_s,
        drain_s=service.drain_s,
        make_ended=functools.partial(_owned_ended, channels=channels, clock=clock, metrics=metrics),
        desk=shared_desk,
        owner=owner,
    )
    taps.service = replicas
    # A resend is the owner's (the owner proxy forwards it there); the desk's own ledger is never written here.
    desk = Desk(RedisLedger(client, 0), shared_desk, channels, clock, route=desk_route(shared_desk, replicas.ended))
    corrections = ReplicaCorrections(RunIndex(client), replicas.ended)

    def share(built: dict[str, ChannelRuntime]) -> None:
        assert replicas is not None
        _share(built, settings, tokens, client, replicas)
        channels.update(built)
        front.channels.update(built)

    share(dict(channels))

    async def ping() -> None:
        await client.ping()
        if replicas is not None:
            await replicas.epochs.check()  # Redis restarted empty answers a ping: not ready, with the reason

    proxies: list[OwnerProxy] = []

    def wrap(app: ASGIApp) -> ASGIApp:
        assert replicas is not None
        proxy = OwnerProxy(app, replicas.locate, max_body_bytes=service.max_line_bytes, key_of=callers.key_of)
        proxies.append(proxy)
        return proxy

    health = Health(ping, state=ServiceState.STARTING)
    sidecar = service_sidecar(
        front,
        service,
        clients=callers,
        host=host,
        port=port,
        log_level=log_level,
        metrics=metrics,
        health=health,
        metrics_token=metrics_token,
        wrap=wrap,
        routes=webhook,
        desk=desk,
        corrections=corrections,
    )
    keeping = asyncio.create_task(book.keep(replicas.active_runs), name="clients:keep")  # sleeps first
    # every replica prunes past the retention (idempotent) and sets its gauges from every partition's counts
    desk_keeping = asyncio.create_task(keep_desk(desk, metrics, service.deliveries_retention_days), name="desk")
    trimming = keep_heap_trim(trim)
    # each owned partition's text_retention_hours (RedisLedger.expire: its channel's ended runs by end time)
    expiring = asyncio.create_task(keep_replica_retention(replicas), name="retention")
    auditing = keep_audits(sampler)
    try:
        listening = await _listen_and_load(sidecar, health, settings, pending, tokens, metrics, stop, settling)
        if listening is None:
            return
        share(listening[1])
        listening_url = listening[0]
        gc.collect()  # what start-up built lives as long as the process: kept out of every later collection's scan
        gc.freeze()
        if sidecar.pressure is not None:  # the import in its thread and gc.collect made the loop late: not load
            sidecar.pressure.start()
        health.set(ServiceState.RESUMING)
        url = service.advertise_url or listening_url
        start = functools.partial(_start, replicas, client, where, url, allow_volatile=service.allow_volatile_redis)
        if not await _when_redis_answers(start, where, health, stop):
            health.set(ServiceState.STOPPING)
            await sidecar.stop()
            return
        await asyncio.sleep(0)
        await replicas.ready_partitions(RESUME_WAIT_S)
        health.set(ServiceState.READY)
        _log.info(
            "streamrelay %s replica %s ready on %s (redis %s, %d partitions, holding %d)",
            version(),
            replicas.owner,
            listening_url,
            where,
            service.partitions,
            len(replicas.owners),
            extra={"replica": replicas.owner, "partitions": sorted(replicas.owners)},
        )
        serving = asyncio.ensure_future(sidecar.wait())
        asked = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({serving, asked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            asked.cancel()
        if not serving.done():
            active = replicas.active_runs()
            health.set(ServiceState.DRAINING, f"{len(active)} active runs, at most {service.drain_s:g} s")
            await replicas.drain(service.drain_s, forced.is_set)
            health.set(ServiceState.STOPPING)
            await sidecar.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
    finally:
        keeping.cancel()
        desk_keeping.cancel()
        trimming.cancel()
        expiring.cancel()
        auditing.cancel()
        await replicas.close()
        for proxy in proxies:
            await proxy.close()
        for channel in channels.values():
            await channel.adapter.close()
        await client.aclose()
        _log.info("stopped")


async def audit_owned(front: ReplicaFront, run: str) -> AuditReport:
    """Audit ``run`` on its partition's relay here (:meth:`ReplicaFront.audit`), for the replica's sampled background
    audit: a run whose partition moved to another replica since it ended is not audited (that replica was not told of
    its end, and this one no longer holds its ledger).

    Raises:
        AuditError: unknown run, or its partition is no longer this replica's (the sampler logs it, no retry).
    """
    try:
        return await front.audit(run)
    except IngestError as exc:
        raise AuditError(f"its partition is no longer this replica's ({exc})") from exc


def _owned_ended(
    ledger: RedisLedger,
    relay: Relay,
    *,
    channels: dict[str, ChannelRuntime],
    clock: MonotonicClock,
    metrics: ServiceMetrics,
) -> OwnedEnded:
    """What a partition's owner does for its ended runs (corrections, desk resends) on the replica's channels, its
    calls recorded in the partition's fenced ledger with the service's metrics."""
    return OwnedEnded(ledger, relay, channels, clock, MeteredLedger(ledger, metrics))


def redis_client(settings: Settings) -> tuple[Redis, str]:
    """The Redis client ``settings`` name (:func:`app.redis_target.connect_service`: one URL, or the primary Sentinel
    names, followed across a failover), with its durable writes waiting for ``redis_wait_replicas``; and where it
    points, as it may be shown (no password).

    Raises:
        ConfigError: the URL is not a Redis URL.
    """
    service = settings.service
    durability = Durability(service.wait_replicas(), timeout_ms=service.redis_wait_timeout_ms)
    return connect_service(service, durability=durability), redis_where(service)


async def check_persistence(client: Redis, where: str, *, allow_volatile: bool) -> None:
    """Refuse a Redis primary without an fsynced append-only file (``appendonly no``, or ``appendfsync no``) unless
    ``allow_volatile`` (``[service] allow_volatile_redis``); log what it keeps either way.

    Raises:
        ConfigError: it keeps no append-only file and ``allow_volatile`` is False (the message says why and what
            to set).
        redis.exceptions.RedisError: Redis did not answer.
    """
    kept = await persistence(client)
    if not kept.volatile:
        _log.info("redis %s: %s", where, kept.describe(), extra={"appendfsync": kept.appendfsync})
        return
    if not allow_volatile:
        raise ConfigError(
            f"Redis {where} keeps {kept.describe()}. The replicas keep the runs in flight, the lines answered 200 "
            "and the partitions' fencing tokens there: a restart of it would lose those runs and hand out fencing "
            "tokens again (a replica paused past its lease could then write). Turn on `appendonly yes` "
            "(`appendfsync always` or `everysec`) on the primary and its replicas, or set [service] "
            "allow_volatile_redis = true to use it anyway (tests, throwaway demos)"
        )
    _log.warning(
        "redis %s keeps %s; taken because allow_volatile_redis = true: a restart of it loses the runs in flight",
        where,
        kept.describe(),
    )


async def keep_replica_retention(replicas: ReplicaService, poll_s: float = RETENTION_POLL_S) -> None:
    """Apply every channel's ``text_retention_hours`` on the partitions this replica owns now (each partition's
    :meth:`core.run.relay.Relay.expire_texts`: :meth:`adapters.redis.ledger.RedisLedger.expire`) every ``poll_s``
    seconds, the first one turn after start. A partition that fails is tried again at the next turn (logged). Runs
    forever."""
    while True:
        await asyncio.sleep(poll_s)
        await expire_owned(replicas)


async def expire_owned(replicas: ReplicaService) -> list[str]:
    """One turn of :func:`keep_replica_retention`: the runs whose text went, over every partition owned here."""
    gone: list[str] = []
    for partition in sorted(replicas.owners):
        relay = replicas.local(partition)
        if relay is None:
            continue
        try:
            gone += await relay.expire_texts(time.time())
        except Exception:
            _log.exception("retention: partition %d: dropping expired text failed; tried again later", partition)
    return gone


async def _start(replicas: ReplicaService, client: Redis, where: str, url: str, *, allow_volatile: bool) -> None:
    """The persistence check, then the replica's start (announced at ``url``).

    Raises:
        ConfigError: as :func:`check_persistence` and :meth:`ReplicaService.start`.
        redis.exceptions.RedisError: Redis did not answer.
    """
    await check_persistence(client, where, allow_volatile=allow_volatile)
    await replicas.start(url)


async def _when_redis_answers(
    start: Callable[[], Awaitable[None]], where: str, health: Health, stop: asyncio.Event
) -> bool:
    """Run ``start`` (the persistence check, then :meth:`ReplicaService.start`, whose Redis steps may be repeated:
    the partition count's check, the epoch markers' ``SET NX``, the announcement), again every
    :data:`REDIS_RETRY_S` while Redis does not answer or its replicas do not acknowledge a durable write (it is
    failing over, resynchronising, or not up yet: ``/readyz`` says so);
    False when ``stop`` was set first.

    Raises:
        ConfigError: the primary keeps no append-only file (and ``allow_volatile_redis`` is false), or another
            partition count than the deployment's.
    """
    while not stop.is_set():
        try:
            await start()
            return True
        # A replica not acknowledging in time (lagging, resynchronising) is waited for like a Redis not answering.
        except (RedisConnectionError, RedisTimeoutError, StoreUnavailableError) as exc:  # its name: never the URL
            reason = f"waiting for Redis {where} ({type(exc).__name__})"
            health.set(ServiceState.RESUMING, reason)
            _log.warning("%s: trying again in %g s", reason, REDIS_RETRY_S)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), REDIS_RETRY_S)
    return False


async def _listen_and_load(
    sidecar: Sidecar,
    health: Health,
    settings: Settings,
    pending: list[str],
    tokens: dict[str, SecretStr],
    metrics: ServiceMetrics,
    stop: asyncio.Event,
    receipts: Receipts | None = None,
) -> tuple[str, dict[str, ChannelRuntime]] | None:
    """Start listening (``/healthz`` answers, ``/readyz`` says which channels load), then build the ``pending``
    channels; the listening URL and those channels, or None when ``stop`` came first (the listener is then stopped).

    Raises:
        ConfigError: a channel cannot be built (the listener is stopped first).
        RuntimeError: the listener could not start.
    """
    if pending:
        health.set(ServiceState.STARTING, f"loading channels: {', '.join(pending)}")
    listening = await sidecar.start(probe_lag=False)  # started once loaded: an SDK import makes the loop late
    loading = f"; loading channels: {', '.join(pending)}" if pending else ""
    fields = {"url": listening, "version": version(), "loading": list(pending)}
    _log.info("streamrelay %s replica listening on %s%s", version(), listening, loading, extra=fields)
    if not pending:
        return listening, {}
    try:
        loaded = await _until_stopped(_load(settings, pending, tokens, metrics, receipts), stop)
    except BaseException:
        health.set(ServiceState.STOPPING)
        await sidecar.stop()
        raise
    if loaded is None:
        _log.info("stopped before the channels were loaded")
        health.set(ServiceState.STOPPING)
        await sidecar.stop()
        return None
    return listening, loaded


def _share(
    built: dict[str, ChannelRuntime],
    settings: Settings,
    tokens: dict[str, SecretStr],
    client: Redis,
    replicas: ReplicaService,
) -> None:
    """Fence ``built``'s sends by the partitions' leases and share their bots' rate budgets with every replica."""
    for name, runtime in built.items():
        runtime.guard_for = replicas.guard_for(name)
        platform = REGISTRY[settings.channels[name].platform]
        if platform.needs_token:  # the bot's budgets are shared by every replica (the web page has no bot)
            bot_id = platform.bot_id(tokens[name].get_secret_value())  # e.g. Telegram's id before ":", never the token
            runtime.shared = shared_budgets_for(client, name, runtime.budgets, bot_id)


def _loaded_now(settings: Settings, pending: list[str]) -> list[str]:
    """The configured channels whose SDK is already imported (built before listening: no import to wait for)."""
    return [name for name in settings.channels if name not in pending]


async def _load(
    settings: Settings,
    names: list[str],
    tokens: dict[str, SecretStr],
    metrics: ServiceMetrics,
    receipts: Receipts | None = None,
) -> dict[str, ChannelRuntime]:
    """The channels ``names``, their SDKs imported in a worker thread (the loop goes on answering the probes).

    Raises:
        ConfigError: a channel cannot be built (a malformed token).
    """
    platforms = {settings.channels[name].platform for name in names}
    await asyncio.get_running_loop().run_in_executor(None, load_platforms, platforms)
    return build_channels(settings, tokens=tokens, metrics=metrics, names=names, receipts=receipts)


async def _until_stopped(
    load: Coroutine[Any, Any, dict[str, ChannelRuntime]], stop: asyncio.Event
) -> dict[str, ChannelRuntime] | None:
    """``load``'s result, or None when ``stop`` was set first (``load`` is then cancelled; an import under way in
    its thread finishes on its own)."""
    loading = asyncio.ensure_future(load)
    asked = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({loading, asked}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        asked.cancel()
    if not loading.done():
        loading.cancel()
        return None
    return loading.result()
