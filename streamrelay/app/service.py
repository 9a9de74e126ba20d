"""The composition root: settings → adapters → core, and the sidecar's HTTP server.

``build_relay`` wires configured channels to their adapters (metered when the service keeps metrics; a platform's
SDK is imported only when a channel on it is built: :mod:`app.platform_loading`); ``Sidecar`` runs the ingest app,
with the probes ``/healthz``, ``/readyz`` and ``/metrics`` (:mod:`adapters.ops.probes`), on uvicorn inside the
current event loop, and optionally the probes alone on an ops listener of their own (``serve`` runs it until stopped:
:mod:`app.serving`; the demo and the case runner start it on a free loopback port and stop it when done).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Collection, Generator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import uvicorn
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp
from uvicorn.config import LOGGING_CONFIG

from streamrelay.adapters.ingest_http import Callers, as_callers, create_app
from streamrelay.adapters.ingest_http.connections import ConnectionGuard
from streamrelay.adapters.ingest_http.protocols import uvicorn_options
from streamrelay.adapters.ops import Health, IngestGate, ServiceMetrics, ServiceState, metered, probe_routes
from streamrelay.adapters.ops.traced import RunSpans, traced
from streamrelay.adapters.registry import REGISTRY
from streamrelay.adapters.web import ReadTokens, web_routes
from streamrelay.app.connections import connection_guards
from streamrelay.app.overload import service_pressure
from streamrelay.app.version import version
from streamrelay.config.actions import load_actions
from streamrelay.config.connections import ConnectionSettings
from streamrelay.config.settings import ChannelSettings, ServiceSettings, Settings
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import Clock, MonotonicClock
from streamrelay.core.errors import ConfigError
from streamrelay.core.ingest.clients import ClientLimits
from streamrelay.core.ingest.pressure import Pressure
from streamrelay.core.ingest.surface import RunRelay
from streamrelay.core.ports import ChannelAdapter
from streamrelay.core.records.journal import Journal
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.records.receipts import Receipts
from streamrelay.core.run.corrections import CorrectionService
from streamrelay.core.run.desk import Desk
from streamrelay.core.run.ended import RunEndObserver
from streamrelay.core.run.relay import Relay


def make_adapter(
    name: str, channel: ChannelSettings, token: SecretStr, *, receipts: Receipts | None = None
) -> ChannelAdapter:
    """The adapter of one configured channel (its SDK, imported now if it is not yet, pointed at ``api_base``). With
    ``receipts`` (the platform's status webhooks are served), an adapter that settles by them gets them
    (``use_receipts``: WhatsApp) with the channel's ``settle_window_ms``; a channel's ``window_template`` is given
    to an adapter that sends one (``use_window_template``: WhatsApp); ``media_fetch_private`` to an adapter that
    fetches media itself (``allow_private_media``: Matrix); a Teams channel with ``settle_with_graph``
    settles through Microsoft Graph (``use_graph``, adapters/teams/graph.py).

    Raises:
        ConfigError: the platform has no adapter yet, or the token is malformed.
    """
    if channel.platform not in REGISTRY:
        raise ConfigError(f"channels.{name}: platform {channel.platform!r} has no adapter yet")
    build = REGISTRY[channel.platform].build
    rendered_max = channel.policy(name).rendered_max  # what the adapter's measure counts, not the chunk length
    adapter = build(
        token, channel.api_base or None, channel.send_timeout_ms / 1000, rendered_max, markup=channel.markup()
    )
    use_receipts = getattr(adapter, "use_receipts", None)
    if receipts is not None and use_receipts is not None:
        use_receipts(receipts, channel.settle_window_ms / 1000)
    allow_private_media = getattr(adapter, "allow_private_media", None)
    if channel.media_fetch_private and allow_private_media is not None:
        allow_private_media()
    use_window_template = getattr(adapter, "use_window_template", None)
    if channel.window_template is not None and use_window_template is not None:
        template = channel.window_template
        use_window_template(template.name, template.language, template.parameter, template.text)
    use_graph = getattr(adapter, "use_graph", None)
    if channel.settle_with_graph and channel.graph_tenant is not None and use_graph is not None:
        use_graph(channel.graph_tenant, channel.graph_team, channel.settle_window_ms / 1000)
    return adapter


def make_runtime(
    name: str,
    channel: ChannelSettings,
    token: SecretStr,
    *,
    metrics: ServiceMetrics | None = None,
    receipts: Receipts | None = None,
) -> ChannelRuntime:
    """One configured channel at run time: its policy, its adapter and its rate budgets.

    Args:
        name: the channel's name.
        channel: its settings.
        token: its bot token.
        metrics: when given, the adapter's calls are metered (:func:`adapters.ops.metered.metered`: a metric and a
            log line per platform call). Each call of a traced run is a span (:func:`adapters.ops.traced.traced`).
        receipts: the status receipts the platform webhooks record (:func:`make_adapter`).

    Raises:
        ConfigError: as :func:`make_adapter`.
    """
    budgets = [sourced.budget for sourced in channel.budgets()]
    adapter = make_adapter(name, channel, token, receipts=receipts)
    if metrics is not None:
        adapter = metered(adapter, metrics, name)
    adapter = traced(adapter, name)  # a span per call of a run that names a trace context (docs/tracing.md)
    return ChannelRuntime(channel.policy(name), adapter, budgets)


def build_channels(
    settings: Settings,
    *,
    tokens: Mapping[str, SecretStr] | None = None,
    metrics: ServiceMetrics | None = None,
    names: Collection[str] | None = None,
    receipts: Receipts | None = None,
) -> dict[str, ChannelRuntime]:
    """Every configured channel at run time (:func:`make_runtime`), by name; only those in ``names`` when given.

    Raises:
        ConfigError: a token is missing or a platform has no adapter.
    """
    channels: dict[str, ChannelRuntime] = {}
    for name, channel in settings.channels.items():
        if names is not None and name not in names:
            continue
        token = tokens[name] if tokens and name in tokens else channel.token(name)
        channels[name] = make_runtime(name, channel, token, metrics=metrics, receipts=receipts)
    return channels


def build_relay(
    settings: Settings,
    ledger: Ledger,
    *,
    clock: Clock | None = None,
    tokens: Mapping[str, SecretStr] | None = None,
    journal: Journal | None = None,
    metrics: ServiceMetrics | None = None,
    names: Collection[str] | None = None,
    observer: RunEndObserver | None = None,
    receipts: Receipts | None = None,
) -> Relay:
    """A relay with every configured channel, or those in ``names`` (``serve`` adds the others once loaded).

    Args:
        settings: loaded settings.
        ledger: the ledger to record into.
        clock: defaults to the real monotonic clock.
        tokens: tokens by channel name (default: read from each channel's ``token_env``).
        journal: the journal of accepted lines (default: in memory, nothing survives a restart).
        metrics: the service's metrics: every channel's adapter is metered (None: adapters as they are).
        names: only these channels (None: every configured one).
        observer: told of every ended run (default: ``metrics``; ``serve`` gives its
            :class:`adapters.ops.heap.HeapTrim`, which passes each end on to the metrics).
        receipts: the platforms' status receipts (WhatsApp's webhook records them; None: not served).

    Raises:
        ConfigError: a token is missing, a platform has no adapter, or the action catalog is wrong.
    """
    channels = build_channels(settings, tokens=tokens, metrics=metrics, names=names, receipts=receipts)
    catalog, validate = load_actions(settings.service.actions or None)
    return Relay(
        channels,
        ledger,
        clock or MonotonicClock(),
        journal=journal,
        run_idle_timeout_s=settings.service.run_idle_timeout_s,
        retry_window_s=settings.service.retry_window_s,
        live_buffer=settings.service.live_buffer,
        catalog=catalog,
        validator=validate,
        clients=settings.client_limits(),
        observer=observer if observer is not None else metrics,
        tracer=RunSpans(),  # a traced run's span, its parts' and calls' parent (docs/tracing.md)
    )


SHUTDOWN_GRACE_S = 3
"""Seconds a stopping sidecar lets open requests finish before it cuts them."""


class _Server(uvicorn.Server):
    """uvicorn's server; with ``signals=False`` it leaves SIGINT and SIGTERM to the caller (``serve`` drains first)."""

    def __init__(self, config: uvicorn.Config, *, signals: bool) -> None:
        super().__init__(config)
        self._signals = signals

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's start-up, without its ``sys.exit`` when the port cannot be bound (a SystemExit raised in a task
        would stop the whole event loop): the server then ends at once, never started, and :meth:`Sidecar.start`
        raises."""
        try:
            await super().startup(sockets)
        except SystemExit:
            self.should_exit = True

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if self._signals:
            with super().capture_signals():
                yield
        else:
            yield


class Sidecar:
    """The ingest HTTP server for a relay, on uvicorn in the running event loop, with the probes and metrics.

    Args:
        relay: the relay to feed.
        token: the bearer token of the one default client (when ``clients`` is not given).
        clients: the clients that may call, each with its limits and bearer token (``Settings.client_tokens``), or
            :class:`adapters.ingest_http.Callers` built from them.
        host: interface (loopback by default).
        port: 0 picks a free port; read :attr:`url` after :meth:`start`.
        keepalive_s: seconds of silence after which a pipeline stream gets a keepalive.
        metrics: the service's metrics (default: a registry of its own, with the active runs and the ingest
            answers; pass the one :func:`build_relay` got to serve the platform calls too).
        health: the service's state for ``/healthz`` and ``/readyz`` (default: always ready); while it is starting
            or resuming, every other route answers 503.
        metrics_token: the bearer token ``/metrics`` wants (None: loopback clients only).
        ops_host: interface of the ops listener (probes and metrics only).
        ops_port: its port (None: no ops listener; 0 picks a free one: read :attr:`ops_url`).
        uvicorn_logging: uvicorn installs its own log handlers (False: its records reach the root logger, as
            :func:`adapters.ops.configure_logging` set it up).
        signals: uvicorn stops on SIGINT and SIGTERM (False: the caller handles them and calls :meth:`stop`).
        wrap: wraps the app before the ingest gate (replicas: the proxy that forwards what only a run's owner can
            answer).
        connections: read timeouts, connection caps and keepalive of both listeners (``[service.connections]``;
            None: the defaults); :func:`app.connections.connection_guards` fits them to the open-file limit.
        pressure: pushes ingest back past capacity (``[service] overload_lag_ms``); its loop-lag probe runs while
            the sidecar serves. None: never pushed back.
        desk: the desk of what ended runs did not deliver (``/v1/deliveries``), or None: not served.
        routes: more routes on the ingest listener, which authenticate themselves (WhatsApp's signed status
            webhook: :mod:`adapters.whatsapp.webhook`).
        corrections: corrections and retractions of ended runs (``/v1/runs/{run}/corrections``), or None: answered
            501, not served.
    """

    def __init__(
        self,
        relay: RunRelay,
        *,
        token: str | None = None,
        clients: Callers | Sequence[tuple[ClientLimits, str]] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        max_body_bytes: int = 16 * 1024 * 1024,
        max_line_bytes: int = 1024 * 1024,
        log_level: str = "warning",
        keepalive_s: float = 15.0,
        metrics: ServiceMetrics | None = None,
        health: Health | None = None,
        metrics_token: str | None = None,
        ops_host: str = "127.0.0.1",
        ops_port: int | None = None,
        uvicorn_logging: bool = True,
        signals: bool = True,
        wrap: Callable[[ASGIApp], ASGIApp] | None = None,
        connections: ConnectionSettings | None = None,
        pressure: Pressure | None = None,
        desk: Desk | None = None,
        routes: Sequence[BaseRoute] = (),
        corrections: CorrectionService | None = None,
    ) -> None:
        self.pressure = pressure
        self.callers = as_callers(token, clients)
        self.tokens = ReadTokens(self.callers.secret)
        self.metrics = metrics if metrics is not None else ServiceMetrics(version())
        self.health = health if health is not None else Health()
        self.health.active_runs = lambda: len(relay.active_runs())
        self.metrics.watch_active_runs(self.health.active_runs)
        self.metrics.ready.set_function(lambda: 1.0 if self.health.state is ServiceState.READY else 0.0)
        self.guards = connection_guards(connections, self.metrics, ops=ops_port is not None)
        # A request with a client's token is never refused for idle connections (adapters/ingest_http/connections.py)
        self.guards["ingest"].vouch = lambda header: self.callers.identify(header) is not None
        probes = probe_routes(self.health, self.metrics, metrics_token=metrics_token)
        app = create_app(
            relay,
            clients=self.callers,
            max_body_bytes=max_body_bytes,
            max_line_bytes=max_line_bytes,
            keepalive_s=keepalive_s,
            watch_url=self.watch_path,
            extra_routes=[*web_routes(relay, self.tokens, keepalive_s=keepalive_s), *probes, *routes],
            observer=self.metrics,
            pressure=pressure,
            desk=desk,
            corrections=corrections,
        )

        def server(asgi: Any, bind: str, bind_port: int, *, catch_signals: bool, guard: ConnectionGuard) -> _Server:
            config = uvicorn.Config(
                asgi,
                host=bind,
                port=bind_port,
                log_level=log_level,
                log_config=LOGGING_CONFIG if uvicorn_logging else None,
                lifespan="off",
                access_log=False,
                # Open streams (a parent following its pipeline lane) would hold a shutdown forever: after this
                # long they are cut, and the client resumes where it was (Last-Event-ID / ?after).
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
                **uvicorn_options(guard),  # caps, read timeouts, keepalive (adapters/ingest_http/connections.py)
            )
            return _Server(config, signals=catch_signals)

        asgi: ASGIApp = wrap(app) if wrap is not None else app
        self._server = server(
            IngestGate(asgi, self.health, open_paths=frozenset(r.path for r in routes if isinstance(r, Route))),
            host,
            port,
            catch_signals=signals,
            guard=self.guards["ingest"],
        )
        self._ops = (
            server(Starlette(routes=list(probes)), ops_host, ops_port, catch_signals=False, guard=self.guards["ops"])
            if ops_port is not None
            else None
        )
        self._task: asyncio.Task[None] | None = None
        self._ops_task: asyncio.Task[None] | None = None
        self.host = host
        self.port = port
        self.ops_host = ops_host
        self.ops_port = ops_port

    def __repr__(self) -> str:
        return f"Sidecar(url={self.url!r})"

    def watch_path(self, run: str, *, stop: bool = False, viewer: str | None = None) -> str:
        """The path of ``run``'s live page, with its read token (and its stop token when ``stop``; ``viewer`` and
        its decide token when ``viewer``: adapters/web/tokens.py)."""
        return f"/runs/{quote(run, safe='')}?{self.tokens.query(run, stop=stop, viewer=viewer)}"

    def watch_url(self, run: str) -> str:
        """The full URL of ``run``'s live page (after :meth:`start`)."""
        return self.url + self.watch_path(run)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def ops_url(self) -> str | None:
        """The ops listener's base URL (after :meth:`start`), or None without one."""
        return f"http://{self.ops_host}:{self.ops_port}" if self._ops is not None else None

    @staticmethod
    async def _serve(server: _Server, name: str) -> tuple[asyncio.Task[None], int | None]:
        """Start ``server`` as a task; return it and the port it listens on, once it does."""
        task = asyncio.create_task(server.serve(), name=name)
        while not server.started:
            if task.done():
                await task
                raise RuntimeError(f"the {name} stopped during start-up (is the port in use?)")
            await asyncio.sleep(0.01)
        servers = getattr(server, "servers", [])
        port = servers[0].sockets[0].getsockname()[1] if servers and servers[0].sockets else None
        return task, port

    async def start(self, *, probe_lag: bool = True) -> str:
        """Start serving (the ops listener too, when there is one); return the base URL.

        Args:
            probe_lag: start :attr:`pressure`'s loop-lag probe now (False: the caller does; ``serve``, once ready).

        Raises:
            RuntimeError: a listener could not start (its port is in use).
        """
        if self.pressure is not None and probe_lag:
            self.pressure.start()
        self._task, port = await self._serve(self._server, "sidecar")
        self.port = port if port is not None else self.port
        if self._ops is not None:
            try:
                self._ops_task, ops_port = await self._serve(self._ops, "sidecar-ops")
            except BaseException:
                await self.stop()  # never one listener without the other
                raise
            self.ops_port = ops_port if ops_port is not None else self.ops_port
        return self.url

    async def wait(self) -> None:
        """Serve until stopped (a signal or :meth:`stop`)."""
        if self._task is not None:
            await self._task

    async def stop(self) -> None:
        """Stop both listeners (open requests get :data:`SHUTDOWN_GRACE_S` to finish)."""
        self._server.should_exit = True
        if self._ops is not None:
            self._ops.should_exit = True
        for task in (self._task, self._ops_task):
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for guard in self.guards.values():
            guard.close()  # the last summary of refused and cut connections
        if self.pressure is not None:
            await self.pressure.stop()


def service_sidecar(
    relay: RunRelay,
    service: ServiceSettings,
    *,
    clients: Callers | Sequence[tuple[ClientLimits, str]],
    host: str,
    port: int,
    log_level: str,
    metrics: ServiceMetrics,
    health: Health,
    metrics_token: str | None,
    wrap: Callable[[ASGIApp], ASGIApp] | None = None,
    desk: Desk | None = None,
    routes: Sequence[BaseRoute] = (),
    corrections: CorrectionService | None = None,
) -> Sidecar:
    """The sidecar as ``streamrelay serve`` runs it, one process or a replica: ``[service]``'s size limits, keepalive,
    ops listener and connection limits; its logs through the service's logging; SIGTERM and SIGINT left to the
    caller (it drains first). ``host``, ``port`` and ``log_level`` are the settings with the command line's
    overrides applied."""
    return Sidecar(
        relay,
        clients=clients,
        host=host,
        port=port,
        max_body_bytes=service.max_body_bytes,
        max_line_bytes=service.max_line_bytes,
        log_level=log_level,
        keepalive_s=service.keepalive_s,
        metrics=metrics,
        health=health,
        metrics_token=metrics_token,
        ops_host=service.ops_host,
        ops_port=service.ops_port,
        uvicorn_logging=False,
        signals=False,
        wrap=wrap,
        connections=service.connections,
        pressure=service_pressure(relay, service),
        desk=desk,
        routes=routes,
        corrections=corrections,
    )
