"""``streamrelay run -- <bot command>``: the sidecar and a bot in one command (as ``dapr run -- python app.py``).

1. The sidecar starts as ``serve`` does, with the same configuration (:func:`app.serving.serve`, in this process).
   Without ``$STREAMRELAY_TOKEN`` (``[service] token_env``) a random token is made for this run. Port 0 picks a free
   port.
2. Once ``/readyz`` answers 200 the bot starts, its environment this process's plus ``STREAMRELAY_URL`` (the ingest
   base URL, ``http://127.0.0.1:8787``) and ``STREAMRELAY_TOKEN`` (the bearer token), in a session (and process
   group) of its own.
3. SIGINT, SIGTERM and SIGHUP are forwarded to the bot (once: a terminal's Ctrl+C reaches this process alone). A
   signal before the bot started stops the sidecar instead.
4. When the bot exits the sidecar drains (its active runs finish for up to ``drain_s``) and stops; the exit code is
   the bot's (128 + N when a signal N ended it). A sidecar that stops by itself first ends the bot (SIGTERM) and
   exits 1; one that cannot start exits as ``serve`` would (2: configuration), the bot never started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from streamrelay.app.serving import StopSignals, serve
from streamrelay.config.settings import load_settings

_log = logging.getLogger("streamrelay.run")

READY_POLL_S = 0.1
"""How often ``/readyz`` is asked while the sidecar starts."""

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals passed on to the bot."""


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def base_url(host: str, port: int) -> str:
    """The ingest URL a bot on this machine uses (``0.0.0.0`` and ``::`` are reached on loopback)."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def exit_code(returncode: int) -> int:
    """A child's exit code as a shell reports it: its own, or 128 + N when signal N ended it."""
    return returncode if returncode >= 0 else 128 - returncode


class _Forwarder:
    """The signal handlers of ``run``: to the bot while it runs, else to the sidecar's stop (then its forced stop)."""

    def __init__(self, stop: StopSignals) -> None:
        self.stop = stop
        self.child: asyncio.subprocess.Process | None = None
        self._installed: list[signal.Signals] = []

    def __repr__(self) -> str:
        return f"_Forwarder(child={self.child.pid if self.child else None})"

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in FORWARDED:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._received, sig)
                self._installed.append(sig)

    def remove(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._installed:
            loop.remove_signal_handler(sig)
        self._installed.clear()

    def _received(self, sig: signal.Signals) -> None:
        child = self.child
        if child is not None and child.returncode is None:
            _log.info("%s: passed on to the bot (pid %d)", sig.name, child.pid)
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(sig)
            return
        if self.stop.asked.is_set():
            self.stop.forced.set()
        else:
            self.stop.name = sig.name
            self.stop.asked.set()


async def _until_ready(url: str, serving: asyncio.Task[None], stop: StopSignals) -> bool:
    """True once ``url``/readyz answers 200; False when the sidecar stopped (or was asked to) before that."""
    async with httpx.AsyncClient(timeout=5.0) as http:
        while not serving.done() and not stop.asked.is_set():
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(f"{url}/readyz")).status_code == 200:
                    return True
            await asyncio.sleep(READY_POLL_S)
    return False


async def run_bot(
    config: Path,
    command: Sequence[str],
    *,
    host: str | None = None,
    port: int | None = None,
    log_format: str | None = None,
    log_level: str | None = None,
) -> int:
    """Serve, run ``command`` beside the sidecar, drain when it exits (module docstring); the exit code to use.

    Raises:
        ConfigError: the settings are wrong or a token variable is not set (the bot is not started).
        RuntimeError: a listener could not start.
        OSError: ``command`` cannot be started (the sidecar is drained and stopped first).
    """
    settings = load_settings(config)
    service = settings.service
    token_env = service.token_env
    if not os.environ.get(token_env):
        os.environ[token_env] = secrets.token_hex(24)  # this run's own: serve reads it from the environment too
    host = host or service.host
    port = service.port if port is None else port
    port = port or _free_port(host)
    url = base_url(host, port)
    stop = StopSignals()  # set by the forwarder (before the bot runs) or when the bot exits
    forwarder = _Forwarder(stop)
    forwarder.install()
    serving = asyncio.ensure_future(
        serve(config, host=host, port=port, log_format=log_format, log_level=log_level, signals=stop)
    )
    try:
        if not await _until_ready(url, serving, stop):
            stop.asked.set()
            await serving  # its error, if it failed to start
            return 130 if stop.name else 1
        return await _beside(command, url, os.environ[token_env], serving, stop, forwarder)
    finally:
        forwarder.remove()
        if not serving.done():
            stop.asked.set()
            await serving


async def _beside(
    command: Sequence[str],
    url: str,
    token: str,
    serving: asyncio.Task[None],
    stop: StopSignals,
    forwarder: _Forwarder,
) -> int:
    """Run the bot until it exits (or the sidecar stops), then drain the sidecar; the bot's exit code."""
    env = {**os.environ, "STREAMRELAY_URL": url, "STREAMRELAY_TOKEN": token}
    started = time.monotonic()
    try:
        child = await asyncio.create_subprocess_exec(*command, env=env, start_new_session=True)
    except OSError as exc:
        raise OSError(f"cannot start {command[0]!r}: {exc.strerror or exc}") from None
    forwarder.child = child
    _log.info("bot started (pid %d): %s; STREAMRELAY_URL=%s", child.pid, " ".join(command), url)
    waiting = asyncio.ensure_future(child.wait())
    await asyncio.wait({waiting, serving}, return_when=asyncio.FIRST_COMPLETED)
    if not waiting.done():  # the sidecar stopped under the bot
        _log.error("the sidecar stopped before the bot: stopping the bot (SIGTERM)")
        with contextlib.suppress(ProcessLookupError):
            child.terminate()
        await waiting
        with contextlib.suppress(Exception):
            serving.result()
        return 1
    code = exit_code(waiting.result())
    _log.info("bot exited with %d after %.1f s: draining the sidecar", code, time.monotonic() - started)
    stop.name = stop.name or "bot exited"
    stop.asked.set()
    await serving
    return code
