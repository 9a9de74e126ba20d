"""``streamrelay serve``: the sidecar as a long-running process, from start-up to a drained stop.

1. Settings, tokens (from the environment), logging (:func:`adapters.ops.configure_logging`: JSON or console,
   every token registered with the redactor), metrics.
2. The SQLite store (journal and ledger in one file), metered; the relay with the channels that need no SDK (web).
3. The listeners open (ingest, probes and metrics; an ops listener too when ``ops_port`` is set) in state
   ``starting``, then the chat platforms' channels are built, their SDKs imported in a worker thread
   (:func:`load_channels`: aiogram alone takes about 4 s), ``/readyz`` answering 503 "loading channels: telegram".
   Then ``resuming`` while the journal's unfinished runs are rebuilt (:meth:`core.run.relay.Relay.resume`), then
   ``ready``. Until then ``/healthz`` answers 200, ``/readyz`` 503 and ingest 503 with ``Retry-After: 1``.
4. The first SIGTERM or SIGINT starts a drain: ``/readyz`` answers 503 ``draining``, ingest still takes the lines
   of active runs, and the service waits until no run is active or ``drain_s`` has passed; then it stops (open
   requests get a few seconds) and closes. What is unfinished stays in the journal and resumes at the next start.
   A second signal stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from streamrelay.app.platform_loading import load_platforms, unloaded_channels
from streamrelay.app.version import version
from streamrelay.config.settings import ServiceSettings, Settings, load_settings
from streamrelay.core.budgets.history import SEED_LOOKBACK_S, CallHistory
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import ConfigError
from streamrelay.core.ports import ReadBack
from streamrelay.core.run.audit_sampler import AuditSampler
from streamrelay.core.tasks import stop_all

if TYPE_CHECKING:  # imported where used: a configuration error is told before the service's modules load
    from starlette.routing import BaseRoute

    from streamrelay.adapters.ops import Health, ServiceMetrics
    from streamrelay.adapters.ops.heap import HeapTrim
    from streamrelay.app.service import Sidecar
    from streamrelay.core.channel import ChannelRuntime
    from streamrelay.core.ingest.clients import ClientLimits
    from streamrelay.core.records.receipts import Receipts
    from streamrelay.core.run.audit import AuditReport
    from streamrelay.core.run.corrections import Corrections
    from streamrelay.core.run.desk import Desk
    from streamrelay.core.run.ended import RunEndObserver
    from streamrelay.core.run.relay import Relay

_log = logging.getLogger("streamrelay.service")

STORE_TABLES = ("journal", "journal_ended", "runs", "parts", "calls")
"""Tables the readiness probe expects in the SQLite file (the journal's and the ledger's)."""

DRAIN_POLL_S = 0.1
"""How often a drain looks at the active runs."""


class StopSignals:
    """SIGTERM and SIGINT as events: :attr:`asked` at the first, :attr:`forced` at the second.

    Installed on the running loop (``loop.add_signal_handler``); a platform without it (Windows) keeps the
    default handlers.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.asked = asyncio.Event()
        self.forced = asyncio.Event()
        self.name = ""
        self._installed: list[signal.Signals] = []

    def __repr__(self) -> str:
        return f"StopSignals(asked={self.asked.is_set()}, forced={self.forced.is_set()})"

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self.SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._received, sig)
                self._installed.append(sig)

    def remove(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._installed:
            loop.remove_signal_handler(sig)
        self._installed.clear()

    def _received(self, sig: signal.Signals) -> None:
        if self.asked.is_set():
            _log.warning("%s again: stopping now", sig.name)
            self.forced.set()
        else:
            self.name = sig.name
            self.asked.set()


def _secrets(
    settings: Settings, clients: list[tuple[ClientLimits, str]], metrics_token: str | None
) -> tuple[list[str], dict[str, SecretStr]]:
    """Every secret the process holds (for the log redactor) and the channels' bot tokens.

    Raises:
        ConfigError: a channel's token variable is not set.
    """
    tokens = {name: channel.token(name) for name, channel in settings.channels.items()}
    values = [token for _, token in clients] + ([metrics_token] if metrics_token else [])
    redis_url = settings.service.redis_url.get_secret_value() if settings.service.redis_url else ""
    with contextlib.suppress(ValueError):
        password = urlsplit(redis_url).password
        values += [password] if password else []
    values += [secret.get_secret_value() for secret in tokens.values() if secret.get_secret_value()]
    values += [os.environ[name] for name in (APP_SECRET_ENV, VERIFY_TOKEN_ENV) if os.environ.get(name)]
    return values, tokens


APP_SECRET_ENV = "WHATSAPP_APP_SECRET"
"""The Meta app's secret: WhatsApp status webhooks are served (and checked with it) when it is set."""
VERIFY_TOKEN_ENV = "WHATSAPP_VERIFY_TOKEN"
"""The App Dashboard's Verify Token, for the webhook's GET verification (optional)."""


def whatsapp_webhook(
    receipts: Receipts,
    decide: Callable[[str, str, str, str], Awaitable[dict[str, Any]]] | None = None,
    owner_of: Callable[[str], Awaitable[str | None]] | None = None,
) -> list[BaseRoute]:
    """The WhatsApp webhook's routes (:mod:`adapters.whatsapp.webhook`) recording statuses into ``receipts`` and
    deciding approval button taps through ``decide`` (on replicas, the taps of runs another replica owns, as
    ``owner_of`` tells, are posted on to it), when ``WHATSAPP_APP_SECRET`` is set; none otherwise (uncertain
    WhatsApp sends then stay uncertain, reported; taps reach nobody)."""
    secret = os.environ.get(APP_SECRET_ENV, "")
    if not secret:
        return []
    from streamrelay.adapters.whatsapp.webhook import WEBHOOK_PATH, WhatsAppWebhook

    verify = os.environ.get(VERIFY_TOKEN_ENV, "")
    _log.info("whatsapp status webhook served on %s", WEBHOOK_PATH)
    verifying = SecretStr(verify) if verify else None
    return WhatsAppWebhook(receipts, SecretStr(secret), verifying, decide=decide, owner_of=owner_of).routes()


async def load_channels(
    relay: Relay,
    settings: Settings,
    names: Sequence[str],
    *,
    tokens: Mapping[str, SecretStr],
    metrics: ServiceMetrics | None = None,
    history: CallHistory | None = None,
    receipts: Receipts | None = None,
) -> None:
    """Build the channels ``names`` and add them to ``relay`` (``serve``, once it listens); ``history``: the ledger's
    recent calls their rate budgets begin from (:mod:`core.budgets.history`).

    Their SDKs are imported in a worker thread, so the event loop keeps answering the probes; the adapters are then
    built in the loop (cheap). Until they are in the relay the service stays ``starting``, and :class:`IngestGate`
    answers ingest 503 with ``Retry-After: 1``. That is the simple, correct choice: a line for a channel that does not
    exist yet cannot be admitted (its target cannot be checked, its rate budgets do not exist), the journal's
    unfinished runs must resume before new lines arrive (the gate exists for that already), nothing is accepted
    that could then be lost, and every client (:class:`app.client.RelayClient`, ``replay``, the demo) sends the
    lines again after the pause, as after any 503. The pause is the SDK import: about 4 s for aiogram here.

    Raises:
        ConfigError: a channel cannot be built (a malformed token).
    """
    from streamrelay.app.service import build_channels

    platforms = {settings.channels[name].platform for name in names}
    await asyncio.get_running_loop().run_in_executor(None, load_platforms, platforms)
    channels = build_channels(settings, tokens=tokens, metrics=metrics, names=names, receipts=receipts)
    for runtime in channels.values():
        runtime.history = history
    relay.channels.update(channels)


async def drain(relay: Relay, health: Health, drain_s: float, signals: StopSignals) -> list[str]:
    """Let active runs finish: until none is active, ``drain_s`` seconds passed, or a second signal.

    Returns:
        The runs still active when the drain ended (they resume at the next start).
    """
    from streamrelay.adapters.ops import ServiceState

    active = relay.active_runs()
    health.set(ServiceState.DRAINING, f"{len(active)} active runs, at most {drain_s:g} s")
    if active:
        _log.info(
            "%s: draining %d active runs for up to %g s (send it again to stop now)",
            signals.name or "stop",
            len(active),
            drain_s,
            extra={"active_runs": len(active), "drain_s": drain_s},
        )
    deadline = time.monotonic() + drain_s
    while relay.active_runs() and time.monotonic() < deadline and not signals.forced.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(signals.forced.wait(), min(DRAIN_POLL_S, max(0.0, deadline - time.monotonic())))
    left = relay.active_runs()
    if left:
        _log.warning(
            "stopping with %d active runs: they resume from the journal at the next start",
            len(left),
            extra={"active_runs": len(left)},
        )
    return left


async def serve(
    config: Path,
    *,
    host: str | None = None,
    port: int | None = None,
    log_format: str | None = None,
    log_level: str | None = None,
    signals: StopSignals | None = None,
) -> None:
    """Run the sidecar until a signal, then drain and stop (see the module docstring).

    Args:
        config: the channels TOML.
        host: overrides ``[service].host``.
        port: overrides ``[service].port``.
        log_format: overrides ``[service].log_format`` (``json`` | ``console``).
        log_level: overrides ``[service].log_level``.
        signals: when to drain and stop, set by the caller (``streamrelay run``: when its bot exits); None: SIGTERM
            and SIGINT, installed here.

    Raises:
        ConfigError: the settings are wrong or a token variable is not set.
        RuntimeError: a listener could not start (its port is in use).
    """
    settings = load_settings(config)
    service = settings.service
    clients = [(limits, token.get_secret_value()) for limits, token in settings.client_tokens()]
    if len({token for _, token in clients}) != len(clients):
        raise ConfigError("two clients have the same token: give every [clients.NAME] a token of its own")
    metrics_token = os.environ.get(service.metrics_token_env, "") or None
    secrets, tokens = _secrets(settings, clients, metrics_token)
    fmt = log_format or service.log_format
    if fmt not in (None, "json", "console"):
        raise ConfigError(f"log format {fmt!r} is not json or console")
    from streamrelay.adapters.ops import configure_logging

    try:
        configure_logging(fmt, log_level or service.log_level, secrets=secrets)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    from streamrelay.adapters.ops.otlp import start_export

    export = start_export(service.otlp_endpoint, version=version())
    try:
        await _serve_configured(settings, clients, metrics_token, tokens, host, port, log_level, signals)
    finally:
        if export is not None:
            await asyncio.to_thread(export.shutdown)  # flush the queued spans (bounded by the exporter's timeout)


async def _serve_configured(
    settings: Settings,
    clients: list[tuple[ClientLimits, str]],
    metrics_token: str | None,
    tokens: dict[str, SecretStr],
    host: str | None,
    port: int | None,
    log_level: str | None,
    signals: StopSignals | None,
) -> None:
    """:func:`serve` once the settings are read, logging configured and spans exported: the backend's service."""
    from streamrelay.adapters.ops import Health, MeteredJournal, MeteredLedger, ServiceMetrics, ServiceState
    from streamrelay.adapters.sqlite import SqliteJournal, SqliteLedger, SqliteStore
    from streamrelay.adapters.sqlite.receipts import SqliteReceipts
    from streamrelay.app.service import build_relay, service_sidecar
    from streamrelay.core.run.corrections import Corrections
    from streamrelay.core.run.desk import Desk

    service = settings.service
    metrics = ServiceMetrics(version())
    if service.backend == "redis":
        await _serve_replica(settings, clients, metrics_token, tokens, metrics, host, port, log_level, signals)
        return
    _log.info("journal and ledger: %s", service.ledger, extra={"ledger": service.ledger})
    store = await SqliteStore.open(service.ledger)  # the journal and the ledger: one file, one connection
    sqlite_ledger = await SqliteLedger.on(store)
    # A restart's rate budgets begin where the platform's count is (the calls of the last minute), not full.
    history = await CallHistory.read(sqlite_ledger, MonotonicClock().now())
    _log.info("rate budgets seeded from %d calls of the last %.0f s", len(history), SEED_LOOKBACK_S)
    ledger = MeteredLedger(sqlite_ledger, metrics)
    journal = MeteredJournal(await SqliteJournal.on(store), metrics)
    receipts = await SqliteReceipts.on(store)  # WhatsApp's status webhooks, which settle its uncertain sends

    async def decide_tap(run16: str, id16: str, decision: str, by: str) -> dict[str, Any]:
        return await relay.decide_approval(run16, id16, decision, by)  # relay: built below, before serving

    webhook = whatsapp_webhook(receipts, decide_tap)
    settling = receipts if webhook else None
    own = signals is None
    signals = StopSignals() if signals is None else signals
    pending = unloaded_channels(settings)
    try:
        ready_now = [name for name in settings.channels if name not in pending]
        trim = heap_trim(metrics, service.heap_trim_s)
        relay = build_relay(
            settings,
            ledger,
            journal=journal,
            tokens=tokens,
            metrics=metrics,
            names=ready_now,
            observer=trim,
            receipts=settling,
        )
        for runtime in relay.channels.values():
            runtime.history = history
        health = Health(lambda: store.ping(STORE_TABLES), state=ServiceState.STARTING)
        desk = Desk(ledger, sqlite_ledger, relay.channels, MonotonicClock())
        corrections = Corrections(ledger, sqlite_ledger, relay.channels, MonotonicClock(), shown=relay.corrected)
        sidecar = service_sidecar(
            relay,
            service,
            clients=clients,
            host=host or service.host,
            port=service.port if port is None else port,
            log_level=log_level or service.log_level,
            metrics=metrics,
            health=health,
            metrics_token=metrics_token,
            desk=desk,
            routes=webhook,
            corrections=corrections,
        )
        if own:
            signals.install()
        try:
            load = (
                load_channels(
                    relay, settings, pending, tokens=tokens, metrics=metrics, history=history, receipts=settling
                )
                if pending
                else None
            )
            healing = asyncio.create_task(resume_when_writable(relay, lambda: store.ping(STORE_TABLES)))
            trimming = keep_heap_trim(trim)
            keeping = asyncio.create_task(keep_desk(desk, metrics, service.deliveries_retention_days), name="desk")
            resuming = asyncio.create_task(resume_corrections(corrections, relay), name="corrections")
            pruning = asyncio.create_task(
                keep_receipts(receipts, metrics, service.receipts_retention_hours), name="receipts"
            )
            expiring = asyncio.create_task(keep_text_retention(relay), name="retention")
            background = [healing, trimming, keeping, resuming, pruning, expiring]
            if (sampler := sample_audits(relay, service, metrics)) is not None:
                background.append(asyncio.create_task(sampler.keep(), name="audit"))
            try:
                await _run(sidecar, relay, health, service.drain_s, signals, load, pending)
            finally:
                await stop_all(background)
        finally:
            if own:
                signals.remove()
            await relay.close()
    finally:
        await journal.close()
        await store.close()


async def resume_corrections(corrections: Corrections, relay: Relay, poll_s: float = 0.5) -> None:
    """Apply again the corrections a restart cut (:meth:`core.run.corrections.Corrections.resume`), once every channel
    they need is loaded (a channel still loading is waited for, up to a minute, then resumed as far as it can); a
    failure is logged and left for the same correction sent again."""
    needed = {record.channel for record in await corrections.store.open_corrections()}
    for _ in range(120):
        if needed <= set(relay.channels):
            break
        await asyncio.sleep(poll_s)
    try:
        resumed = await corrections.resume()
    except Exception:
        _log.exception("corrections: resuming those a restart cut failed; each is applied when sent again")
        return
    if resumed:
        _log.info("corrections: %d cut by a restart resumed", resumed)


def heap_trim(metrics: ServiceMetrics, interval_s: float) -> HeapTrim | None:
    """The relay's observer of ended runs that trims the C heap after them (:class:`adapters.ops.heap.HeapTrim`,
    passing each end on to ``metrics``), or None when ``interval_s`` (``[service] heap_trim_s``) is 0 or the C library
    is not glibc; the caller runs its :meth:`~adapters.ops.heap.HeapTrim.keep` as a task."""
    from streamrelay.adapters.ops.heap import HeapTrim

    if interval_s <= 0:
        return None
    trim = HeapTrim(metrics, interval_s=interval_s)
    return trim if trim.available else None


async def _nothing() -> None:
    """What :func:`keep_heap_trim` and :func:`keep_audits` run without a trim, without a sampler."""


def keep_heap_trim(trim: HeapTrim | None) -> asyncio.Task[None]:
    """The task that keeps ``trim`` (:meth:`adapters.ops.heap.HeapTrim.keep`; one that ends at once for None)."""
    return asyncio.create_task(trim.keep() if trim is not None else _nothing(), name="heap:trim")


def keep_audits(sampler: AuditSampler | None) -> asyncio.Task[None]:
    """The task that keeps ``sampler`` (:meth:`core.run.audit_sampler.AuditSampler.keep`; one that ends at once for
    None: ``audit_sample`` is 0)."""
    return asyncio.create_task(sampler.keep() if sampler is not None else _nothing(), name="audit")


DESK_POLL_S = 30.0
"""How often the desk is pruned past its retention and its gauges refreshed (seconds)."""
DAY_S = 86_400.0


async def keep_desk(desk: Desk, metrics: ServiceMetrics, retention_days: float, poll_s: float = DESK_POLL_S) -> None:
    """Keep the desk (:mod:`core.run.desk`) within ``[service] deliveries_retention_days``: every ``poll_s`` seconds
    (and at once) entries of runs that ended longer ago are deleted, and ``streamrelay_deliveries{state}`` is set to
    the ledger's counts. A store that fails is tried again at the next turn (logged). Runs forever."""
    while True:
        try:
            pruned = await desk.prune(retention_days * DAY_S)
            if pruned:
                _log.info("desk: %d entries older than %g days pruned", pruned, retention_days)
            for state, count in (await desk.store.delivery_counts()).items():
                metrics.deliveries.labels(str(state)).set(count)
        except Exception:
            _log.exception("desk: pruning or counting failed; tried again in %g s", poll_s)
        await asyncio.sleep(poll_s)


HOUR_S = 3_600.0


async def keep_receipts(
    receipts: Receipts, metrics: ServiceMetrics, retention_hours: float, poll_s: float = DESK_POLL_S
) -> None:
    """Keep the status receipts (:mod:`core.records.receipts`) within ``[service] receipts_retention_hours``: every
    ``poll_s`` seconds (the first one turn after start, so the runs the journal resumes settle first) receipts last
    recorded longer ago are deleted and counted in ``streamrelay_receipts_pruned``. A store that fails is tried again
    at the next turn (logged). Runs forever."""
    while True:
        await asyncio.sleep(poll_s)
        try:
            pruned = await receipts.prune(time.time() - retention_hours * HOUR_S)
            if pruned:
                metrics.receipts_pruned.inc(pruned)
                _log.info("receipts: %d older than %g hours pruned", pruned, retention_hours)
        except Exception:
            _log.exception("receipts: pruning failed; tried again in %g s", poll_s)


def sample_audits(relay: Relay, service: ServiceSettings, metrics: ServiceMetrics) -> AuditSampler | None:
    """The sampled background audit of ``service.audit_sample`` of the relay's delivered runs, ``audit_after_s`` after
    their end (:func:`audit_sampler` on the relay's :meth:`~core.run.relay.Relay.audit` and channels): set as the
    relay's observer of ended runs (in front of the one it had) and as its ``audits``. None when ``audit_sample`` is
    0. Its :meth:`~AuditSampler.keep` is the caller's task to run."""
    sampler = audit_sampler(relay.audit, relay.channels, service, metrics, then=relay.observer)
    if sampler is not None:
        relay.observer = sampler
        relay.audits = sampler
    return sampler


def audit_sampler(
    audit: Callable[[str], Awaitable[AuditReport]],
    channels: Mapping[str, ChannelRuntime],
    service: ServiceSettings,
    metrics: ServiceMetrics,
    then: RunEndObserver | None,
) -> AuditSampler | None:
    """One process's sampled background audit (:mod:`core.run.audit_sampler`): ``service.audit_sample`` of the runs
    it is told of, audited by ``audit`` (a run's key → its :class:`~core.run.audit.AuditReport`) ``audit_after_s``
    after their end, each ended run passed on to ``then`` first; drift counted in ``metrics``. Only the runs of a
    channel of ``channels`` (looked up when the run ends: a channel loaded later counts) that can be read back are
    queued. None when ``audit_sample`` is 0. One process has one (one relay's, or every owned partition's on a
    replica: :mod:`app.replicas.serving`); the caller makes it the observer of ended runs and runs its
    :meth:`~AuditSampler.keep`."""
    if service.audit_sample <= 0:
        return None

    def readable(channel: str) -> bool:
        runtime = channels.get(channel)
        adapter = runtime.adapter if runtime is not None else None
        return isinstance(adapter, ReadBack) and adapter.unreadable() is None

    return AuditSampler(
        audit,
        sample=service.audit_sample,
        after_s=service.audit_after_s,
        clock=MonotonicClock(),
        readable=readable,
        then=then,
        on_drift=metrics.drift_found,
    )


RETENTION_POLL_S = 60.0
"""How often the channels' ``text_retention_hours`` are applied (seconds)."""


async def keep_text_retention(relay: Relay, poll_s: float = RETENTION_POLL_S) -> None:
    """Apply every channel's ``text_retention_hours`` (:meth:`core.run.relay.Relay.expire_texts`) every ``poll_s``
    seconds, the first one turn after start; a channel without it is never touched. A store that fails is tried
    again at the next turn (logged). Runs forever."""
    while True:
        await asyncio.sleep(poll_s)
        try:
            await relay.expire_texts(time.time())
        except Exception:
            _log.exception("retention: dropping expired text failed; tried again in %g s", poll_s)


HEAL_POLL_S = 1.0
"""How often runs stopped by a store that could not be written are tried again (seconds)."""


async def resume_when_writable(relay: Relay, check: Callable[[], Awaitable[None]], poll_s: float = HEAL_POLL_S) -> None:
    """Runs a failed journal or ledger write stopped (a full or read-only disk: ``relay.interrupted``) wait; once
    ``check`` (the readiness probe: a probe write) succeeds, they resume from the journal and go on. Runs forever."""
    while True:
        await asyncio.sleep(poll_s)
        if not relay.interrupted:
            continue
        try:
            await check()
        except Exception as exc:
            _log.debug("store still not writable (%s): %d runs wait", type(exc).__name__, len(relay.interrupted))
            continue
        try:
            resumed = await relay.resume()
        except Exception:
            _log.exception("runs stopped by a store failure could not be resumed yet")
            continue
        _log.warning("the store is writable again: %d runs resumed", len(resumed), extra={"resumed_runs": resumed[:20]})


async def _serve_replica(
    settings: Settings,
    clients: list[tuple[ClientLimits, str]],
    metrics_token: str | None,
    tokens: dict[str, SecretStr],
    metrics: ServiceMetrics,
    host: str | None,
    port: int | None,
    log_level: str | None,
    given: StopSignals | None = None,
) -> None:
    """One replica on Redis (:mod:`app.replicas.serving`), with this module's stop signals (or ``given``)."""
    from streamrelay.app.replicas.serving import serve_replica

    service = settings.service
    signals = StopSignals() if given is None else given
    if given is None:
        signals.install()
    try:
        await serve_replica(
            settings,
            clients=clients,
            metrics_token=metrics_token,
            tokens=tokens,
            metrics=metrics,
            host=host or service.host,
            port=service.port if port is None else port,
            log_level=log_level or service.log_level,
            stop=signals.asked,
            forced=signals.forced,
        )
    finally:
        if given is None:
            signals.remove()


async def _loaded(load: Coroutine[Any, Any, None], signals: StopSignals) -> bool:
    """Await ``load``; False when a stop signal came first (``load`` is then cancelled: an import under way in its
    thread finishes on its own before the process exits)."""
    loading = asyncio.ensure_future(load)
    asked = asyncio.ensure_future(signals.asked.wait())
    try:
        await asyncio.wait({loading, asked}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        asked.cancel()
    if not loading.done():
        loading.cancel()
        return False
    loading.result()
    return True


async def _run(
    sidecar: Sidecar,
    relay: Relay,
    health: Health,
    drain_s: float,
    signals: StopSignals,
    load: Coroutine[Any, Any, None] | None,
    pending: Sequence[str],
) -> None:
    """Listen, load the chat platforms' channels (``load``: :func:`load_channels` for ``pending``), resume, serve
    until a signal (or the listener ends), drain, stop.

    What start-up built (modules, settings, the SDKs, the app: some 240k objects) is moved out of the garbage
    collector's sight once the channels are loaded (:func:`gc.freeze`): a full collection no longer walks it, which cut
    the loop's longest stalls under load from about 360 ms to 45 ms (100 runs of the recorded answer in one process,
    as the loop-lag probe saw them; such a stall holds every send and every run).

    Raises:
        ConfigError: a channel could not be built (the listeners are stopped first).
    """
    from streamrelay.adapters.ops import ServiceState

    if load is not None:
        health.set(ServiceState.STARTING, f"loading channels: {', '.join(pending)}")
    try:
        url = await sidecar.start(probe_lag=False)  # started once ready, below
    except BaseException:
        if load is not None:
            load.close()  # never awaited
        raise
    fields = {"url": url, "ops_url": sidecar.ops_url, "version": version(), "loading": list(pending)}
    loading = f"; loading channels: {', '.join(pending)}" if load is not None else ""
    _log.info("streamrelay %s listening on %s%s", version(), url, loading, extra=fields)
    try:
        loaded = load is None or await _loaded(load, signals)
    except BaseException:
        health.set(ServiceState.STOPPING)
        await sidecar.stop()
        raise
    if not loaded:
        health.set(ServiceState.STOPPING)
        await sidecar.stop()
        _log.info("stopped before the channels were loaded")
        return
    gc.collect()
    gc.freeze()
    health.set(ServiceState.RESUMING)
    _log.info("channels %s loaded, resuming the journal", ", ".join(relay.channels) or "none")
    resumed = await relay.resume()
    if sidecar.pressure is not None:  # the SDK import in its thread and gc.collect made the loop late: not load
        sidecar.pressure.start()
    health.set(ServiceState.READY)
    _log.info(
        "ready: %d unfinished runs resumed; channels: %s",
        len(resumed),
        ", ".join(relay.channels) or "none",
        extra={"resumed": len(resumed), "resumed_runs": resumed[:20]},
    )
    serving = asyncio.ensure_future(sidecar.wait())
    asked = asyncio.ensure_future(signals.asked.wait())
    try:
        await asyncio.wait({serving, asked}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        asked.cancel()
    if not serving.done():
        await drain(relay, health, drain_s, signals)
        health.set(ServiceState.STOPPING)
        await sidecar.stop()
    await serving
    _log.info("stopped")
