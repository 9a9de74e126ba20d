"""The composition root: settings → adapters → core, and the sidecar's HTTP server.

``build_relay`` wires configured channels to their adapters; ``Sidecar`` runs the ingest app on uvicorn
inside the current event loop (``serve`` runs it until stopped; the demo and the case runner start it on
a free loopback port and stop it when done).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import uvicorn
from pydantic import SecretStr

from adapters.discord import DiscordAdapter
from adapters.ingest_http import create_app
from adapters.slack import SlackAdapter
from adapters.telegram.adapter import TelegramAdapter
from adapters.web import ReadTokens, WebAdapter, web_routes
from config.actions import load_actions
from config.settings import ChannelSettings, Settings
from core.channel import ChannelRuntime
from core.clock import Clock, MonotonicClock
from core.errors import ConfigError
from core.journal import Journal
from core.ledger import Ledger
from core.ports import ChannelAdapter
from core.relay import Relay


def make_adapter(name: str, channel: ChannelSettings, token: SecretStr) -> ChannelAdapter:
    """The adapter of one configured channel (its SDK pointed at ``api_base`` when one is set).

    Raises:
        ConfigError: the platform has no adapter yet, or the token is malformed.
    """
    policy = channel.policy(name)
    common: dict[str, Any] = {
        "base_url": channel.api_base or None,
        "send_timeout_s": channel.send_timeout_ms / 1000,
        "max_units": policy.max_units,
    }
    secret = token.get_secret_value()
    if channel.platform == "telegram":
        return TelegramAdapter(secret, **common)
    if channel.platform == "slack":
        return SlackAdapter(secret, **common)
    if channel.platform == "discord":
        return DiscordAdapter(secret, **common)
    if channel.platform == "web":
        return WebAdapter(max_units=policy.max_units)
    raise ConfigError(f"channels.{name}: platform {channel.platform!r} has no adapter yet")


def make_runtime(name: str, channel: ChannelSettings, token: SecretStr) -> ChannelRuntime:
    """One configured channel at run time: its policy, its adapter and its rate budgets.

    Raises:
        ConfigError: as :func:`make_adapter`.
    """
    budgets = [sourced.budget for sourced in channel.budgets()]
    return ChannelRuntime(channel.policy(name), make_adapter(name, channel, token), budgets)


def build_relay(
    settings: Settings,
    ledger: Ledger,
    *,
    clock: Clock | None = None,
    tokens: Mapping[str, SecretStr] | None = None,
    journal: Journal | None = None,
) -> Relay:
    """A relay with every configured channel.

    Args:
        settings: loaded settings.
        ledger: the ledger to record into.
        clock: defaults to the real monotonic clock.
        tokens: tokens by channel name (default: read from each channel's ``token_env``).
        journal: the journal of accepted lines (default: in memory, nothing survives a restart).

    Raises:
        ConfigError: a token is missing, a platform has no adapter, or the action catalog is wrong.
    """
    channels: dict[str, ChannelRuntime] = {}
    for name, channel in settings.channels.items():
        token = tokens[name] if tokens and name in tokens else channel.token(name)
        channels[name] = make_runtime(name, channel, token)
    catalog, validate = load_actions(settings.service.actions or None)
    return Relay(
        channels,
        ledger,
        clock or MonotonicClock(),
        journal=journal,
        run_idle_timeout_s=settings.service.run_idle_timeout_s,
        live_buffer=settings.service.live_buffer,
        catalog=catalog,
        validator=validate,
    )


SHUTDOWN_GRACE_S = 3
"""Seconds a stopping sidecar lets open requests finish before it cuts them."""


class Sidecar:
    """The ingest HTTP server for a relay, on uvicorn in the running event loop.

    Args:
        relay: the relay to feed.
        token: the bearer token clients must send.
        host: interface (loopback by default).
        port: 0 picks a free port; read :attr:`url` after :meth:`start`.
        keepalive_s: seconds of silence after which a pipeline stream gets a keepalive.
    """

    def __init__(
        self,
        relay: Relay,
        *,
        token: str,
        host: str = "127.0.0.1",
        port: int = 0,
        max_body_bytes: int = 16 * 1024 * 1024,
        max_line_bytes: int = 1024 * 1024,
        log_level: str = "warning",
        keepalive_s: float = 15.0,
    ) -> None:
        self.tokens = ReadTokens(token)
        app = create_app(
            relay,
            token=token,
            max_body_bytes=max_body_bytes,
            max_line_bytes=max_line_bytes,
            keepalive_s=keepalive_s,
            watch_url=self.watch_path,
            extra_routes=web_routes(relay, self.tokens, keepalive_s=keepalive_s),
        )
        self._server = uvicorn.Server(
            uvicorn.Config(
                app,
                host=host,
                port=port,
                log_level=log_level,
                lifespan="off",
                access_log=False,
                # Open streams (a parent following its pipeline lane) would hold a shutdown forever: after this
                # long they are cut, and the client resumes where it was (Last-Event-ID / ?after).
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            )
        )
        self._task: asyncio.Task[None] | None = None
        self.host = host
        self.port = port

    def __repr__(self) -> str:
        return f"Sidecar(url={self.url!r})"

    def watch_path(self, run: str) -> str:
        """The path of ``run``'s live page, with its read token."""
        return f"/runs/{quote(run, safe='')}?token={self.tokens.token(run)}"

    def watch_url(self, run: str) -> str:
        """The full URL of ``run``'s live page (after :meth:`start`)."""
        return self.url + self.watch_path(run)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> str:
        """Start serving; return the base URL."""
        self._task = asyncio.create_task(self._server.serve(), name="sidecar")
        while not self._server.started:
            if self._task.done():
                await self._task
                raise RuntimeError("the sidecar stopped during start-up (is the port in use?)")
            await asyncio.sleep(0.01)
        servers = getattr(self._server, "servers", [])
        if servers and servers[0].sockets:
            self.port = servers[0].sockets[0].getsockname()[1]
        return self.url

    async def wait(self) -> None:
        """Serve until stopped (a signal or :meth:`stop`)."""
        if self._task is not None:
            await self._task

    async def stop(self) -> None:
        self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
