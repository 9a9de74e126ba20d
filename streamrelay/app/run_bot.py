"""``streamrelay run -- <bot command>``: the sidecar and a bot in one command (as ``dapr run -- python app.py``).

1. The sidecar starts as ``serve`` does, with the same configuration (:func:`app.serving.serve`, in this process).
   Without ``$STREAMRELAY_TOKEN`` (``[service] token_env``) a random token is made for this run. Port 0 picks a free
   port.
2. Once ``/readyz`` answers 200 the bot starts, its environment this process's plus ``STREAMRELAY_URL`` (the ingest
   base URL, ``http://127.0.0.1:8787``) and ``STREAMRELAY_TOKEN`` (the bearer token), in a session (and process
   group) of its own.
3. SIGINT, SIGTERM and SIGHUP are forwarded to the bot's process group (``os.killpg``: the bot and what it
   started, e.g. the ``sleep`` under ``sh -c``; a terminal's Ctrl+C reaches this process alone, the bot being in a
   session of its own). A bot still running :data:`GRACE_S` seconds after the first, or at a second signal, is
   killed (SIGKILL to its group). A signal before the bot started stops the sidecar instead and ``run`` exits
   128 + N (130 on SIGINT, 143 on SIGTERM).
4. When the bot exits the sidecar drains (its active runs finish for up to ``drain_s``) and stops; the exit code is
   the bot's (128 + N when a signal N ended it). A sidecar that stops by itself first ends the bot (SIGTERM to its
   group, SIGKILL after :data:`GRACE_S`) and exits 1; one that cannot start exits as ``serve`` would (2:
   configuration), the bot never started. A command that cannot start exits 127 (not found) or 126 (not
   executable, or another error), with one line saying so, as a shell would.
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

GRACE_S = 10.0
"""Seconds a bot has to exit after a forwarded signal (or after the sidecar stopped under it) before its process
group gets SIGKILL; a second signal to ``run`` kills at once."""


class BotNotStarted(OSError):
    """The bot's command could not be started; :attr:`exit_code` is a shell's (127: not found, 126: otherwise)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def signal_group(child: asyncio.subprocess.Process, sig: int) -> bool:
    """Send ``sig`` to the process group the bot ``child`` leads (it runs in a session of its own), while the bot
    runs; False when it had already exited (its pid, hence its group id, may be another's by then)."""
    if child.returncode is not None:
        return False
    try:
        os.killpg(child.pid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a group we may not signal: the bot itself, at least
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(sig)
    return True


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
        self.first: signal.Signals | None = None
        """The first signal received (whether it went to the bot or stopped the sidecar)."""
        self._installed: list[signal.Signals] = []
        self._forwarded = 0
        self._kill_timer: asyncio.TimerHandle | None = None

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
        if self._kill_timer is not None:
            self._kill_timer.cancel()
            self._kill_timer = None

    def kill(self) -> None:
        """SIGKILL to the bot's process group, if the bot still runs."""
        child = self.child
        if child is not None and signal_group(child, signal.SIGKILL):
            _log.warning("the bot (pid %d) is killed (SIGKILL to its process group)", child.pid)

    def _received(self, sig: signal.Signals) -> None:
        self.first = self.first or sig
        child = self.child
        if child is not None and child.returncode is None:
            self._forwarded += 1
            if self._forwarded > 1:
                self.kill()
                return
            _log.info("%s: passed on to the bot's process group (pid %d)", sig.name, child.pid)
            signal_group(child, sig)
            self._kill_timer = asyncio.get_running_loop().call_later(GRACE_S, self.kill)
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
            return 128 + int(forwarder.first) if forwarder.first else 1
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
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        raise BotNotStarted(f"cannot start {command[0]!r}: {exc.strerror or exc}", code) from None
    forwarder.child = child
    _log.info("bot started (pid %d): %s; STREAMRELAY_URL=%s", child.pid, " ".join(command), url)
    waiting = asyncio.ensure_future(child.wait())
    await asyncio.wait({waiting, serving}, return_when=asyncio.FIRST_COMPLETED)
    if not waiting.done():  # the sidecar stopped under the bot
        _log.error("the sidecar stopped before the bot: stopping the bot (SIGTERM to its process group)")
        signal_group(child, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(waiting), GRACE_S)
        except TimeoutError:
            forwarder.kill()
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
