"""The processes a campaign runs, each on its own, all on 127.0.0.1 with free ports: one mock platform server per
platform, and the sidecar (``streamrelay serve``) on a campaign config and ledger, or (``--backend redis``) its
replicas on a redis-server of the campaign's own (:class:`RedisServer`).

:class:`Proc` is one such process: started, killed with SIGKILL by its process id, started again. Every process a
campaign starts is stopped by :meth:`app.chaos.services.Services.close`, whatever happened, and recorded in the
transcript folder (:func:`stop_leftovers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from streamrelay.adapters.redis import connect
from streamrelay.adapters.registry import REGISTRY
from streamrelay.app.chaos.plan import Options
from streamrelay.app.preloaded import Forked, Preloaded

HOST = "127.0.0.1"
READY_TIMEOUT_S = 90.0
"""How long a process may take to answer (the sidecar imports aiogram, slack-sdk and discord.py: seconds)."""
API_PREFIX = {name: dry.api_path for name, p in REGISTRY.items() if (dry := p.dry_run) is not None}
"""Where each platform's SDK is pointed on its mock's host and port."""
TOKEN_ENV = {name: f"CHAOS_{name.upper()}_TOKEN" for name in API_PREFIX}
CHANNEL_DEFAULTS = {"delivery": '"preview"', "format": '"markdown"', "throttle_ms": "1000"}
"""A campaign channel's settings (TOML values) unless its platform's registration says otherwise
(:attr:`adapters.platform.DryRunFacts.campaign`)."""


PORTS = range(20_000, 32_768)
"""Where the campaign's listeners go: below Linux's ephemeral range (32768-60999), which outgoing connections draw
from. A port the kernel handed out for a listener (bind to 0) goes back to that pool when the probe closes, and an
outgoing connection (the campaign's own to its Redis) could take it before the process meant to listen there binds
it: "port in use" (a mock failed to start once in CI that way)."""
PORTS_ENV = "STREAMRELAY_LISTEN_PORTS"
"""``low-high`` (inclusive), a part of :data:`PORTS` for this process and its children: the test suite gives each
pytest-xdist worker its own part (tests/ports.py), so two workers never hand out the same port."""


def listen_ports() -> range:
    """The ports :func:`free_port` draws from: :data:`PORTS_ENV` when set, else :data:`PORTS`.

    Raises:
        ValueError: :data:`PORTS_ENV` is not ``low-high`` with ``0 < low <= high < 65536``.
    """
    spec = os.environ.get(PORTS_ENV, "")
    if not spec:
        return PORTS
    low, _, high = spec.partition("-")
    first, last = int(low), int(high)
    if not 0 < first <= last < 65_536:
        raise ValueError(f"{PORTS_ENV}={spec!r}: expected low-high with 0 < low <= high < 65536")
    return range(first, last + 1)


_next: dict[range, int] = {}
"""Per range, where this process's next :func:`free_port` looks (starts at random, then goes round)."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1 in :func:`listen_ports`: the next one after the last handed out (from a random
    start) that binds now. A process never hands out the same port twice until it has gone round the whole range,
    so ports asked for together (a mock's and a sidecar's, before either listens) always differ.

    Raises:
        RuntimeError: no port in the range binds.
    """
    ports = listen_ports()
    at = _next.get(ports, random.SystemRandom().randrange(len(ports)))
    for step in range(len(ports)):
        port = ports[(at + step) % len(ports)]
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((HOST, port))
            except OSError:
                continue
        _next[ports] = (at + step + 1) % len(ports)
        return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1} on {HOST}")


PIDS = "pids.json"
"""The transcript folder's record of the processes a campaign started (:func:`stop_leftovers` reads it)."""


def stop_leftovers(out: Path) -> list[int]:
    """SIGKILL the processes a campaign in ``out`` started that are still running (when the campaign itself was
    killed before it could stop them): only those whose command line is still the one recorded. Returns their ids.
    """
    path = out / PIDS
    if not path.is_file():
        return []
    stopped: list[int] = []
    for entry in json.loads(path.read_text(encoding="utf-8")).values():
        pid, argv = int(entry["pid"]), list(entry["argv"])
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
        except OSError:
            continue
        if [part.decode(errors="replace") for part in cmdline] == argv:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                stopped.append(pid)
    return stopped


def record_pid(pids: Path, name: str, pid: int, argv: list[str]) -> None:
    """Write ``name``'s process id and command line to the record :func:`stop_leftovers` reads."""
    known = json.loads(pids.read_text(encoding="utf-8")) if pids.is_file() else {}
    known[name] = {"pid": pid, "argv": argv}
    pids.write_text(json.dumps(known, indent=1), encoding="utf-8")


class Proc:
    """One child process: its command, environment and log file (appended to across restarts).

    Args:
        pids: the file that records every started process's id and command line (:func:`stop_leftovers`).
        preloaded: fork ``argv`` (``python -m streamrelay ...``) from this zygote (:mod:`app.preloaded`: its imports
            already done, seconds of CPU less per start) instead of starting a new interpreter.
    """

    def __init__(
        self, name: str, argv: list[str], env: dict[str, str], log: Path, pids: Path, preloaded: Preloaded | None = None
    ) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.log = log
        self.pids = pids
        self.preloaded = preloaded
        self.popen: subprocess.Popen[bytes] | Forked | None = None
        self._log_file: IO[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self._close_log()
        self._log_file = self.log.open("ab")
        stamp = time.strftime("%H:%M:%S")
        self._log_file.write(f"\n===== chaos: start #{self.starts} of {self.name} at {stamp} =====\n".encode())
        self._log_file.flush()
        if self.preloaded is not None:
            assert self.argv[1:3] == ["-m", "streamrelay"], self.argv
            self.popen = self.preloaded.start(self.argv[3:], self.env, self.log)
            try:  # a fork's command line is the zygote's
                cmdline = Path(f"/proc/{self.popen.pid}/cmdline").read_bytes().split(b"\0")[:-1]
                argv = [part.decode(errors="replace") for part in cmdline]
            except OSError:
                argv = self.argv
        else:
            self.popen = subprocess.Popen(
                self.argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl+C of the campaign reaches it only through close()
            )
            argv = self.argv
        record_pid(self.pids, self.name, self.popen.pid, argv)

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def exit_code(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None

    def kill(self) -> None:
        """SIGKILL this process (by its id) and reap it."""
        if self.popen is not None and self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGKILL)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=10)

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after ``grace_s``."""
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_log()

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None


def child_env(extra: dict[str, str]) -> dict[str, str]:
    # no STREAMRELAY_* of the caller's shell: they would override the campaign's config
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMRELAY_")}
    env.update({"COLUMNS": "240", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def write_config(path: Path, options: Options, port: int, mocks: dict[str, int], ledger: Path) -> None:
    """The sidecar's campaign config: one channel per platform pointed at its mock (``redis``: the replicas'
    backend, partitions and lease ttl; the Redis URL is in their environment, the port on their command line)."""
    lines = [
        "# written by streamrelay chaos",
        "[service]",
        f'host = "{HOST}"',
        f"port = {port}",
        'token_env = "STREAMRELAY_TOKEN"',
    ]
    if options.replicated:
        lines += ['backend = "redis"', f"partitions = {options.partitions}", f"lease_ttl_s = {options.lease_ttl_s:g}"]
    else:
        lines.append(f'ledger = "{ledger}"')
    lines += [f"run_idle_timeout_s = {options.idle_s}", 'actions = ""']
    for platform, mock_port in mocks.items():
        dry = REGISTRY[platform].dry_run
        assert dry is not None  # mocks run only for platforms with one
        settings = {**CHANNEL_DEFAULTS, **dry.campaign}
        lines += [
            "",
            f"[channels.{platform}]",
            f'platform = "{platform}"',
            f'token_env = "{TOKEN_ENV[platform]}"',
            f'api_base = "http://{HOST}:{mock_port}{API_PREFIX[platform]}"',
            *(f"{key} = {value}" for key, value in settings.items()),
            f"send_timeout_ms = {options.send_timeout_ms}",
            "typing = false",
            f"exclusive_bot = {'true' if options.exclusive_bot and platform == 'telegram' else 'false'}",
        ]
        for budget, keys in dry.campaign_rates.items():
            lines += ["", f"[channels.{platform}.rate.{budget}]", *(f"{k} = {v}" for k, v in keys.items())]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@dataclass
class KillRecord:
    """One kill -9 of the sidecar (or of one replica)."""

    number: int
    reason: str
    run: str | None
    at_s: float
    """Seconds since the campaign started."""
    down_s: float = 0.0
    """How long until the restarted sidecar answered."""
    unfinished: list[str] = field(default_factory=list)
    """Runs started and not yet reported done when it died (``redis``: those the killed replica held, as the owner
    of their partition or with a request of their agent open on it)."""
    replica: str | None = None
    """``redis``: the replica killed (``replica-2``); its restart is a new process, a new replica id."""

    def to_json(self) -> dict[str, Any]:
        """The record as JSON (``replica`` only for replicas)."""
        out = dict(self.__dict__)
        if self.replica is None:
            del out["replica"]
        return out


def redis_server() -> str:
    """The path of ``redis-server``.

    Raises:
        RuntimeError: there is none on PATH (the message says how to get one).
    """
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError(
            "--backend redis starts a redis-server of its own, and there is none on PATH: install it (Debian,"
            " Ubuntu: apt-get install redis-server) or run the campaign with --backend sqlite"
        )
    return binary


def redis_argv(binary: str, port: int, folder: Path) -> list[str]:
    """The command line of a campaign's Redis data node on ``port`` of :data:`HOST`: an append-only file fsynced at
    every write (``serve`` refuses a Redis without one; Redis 7.0 has no ``WAITAOF``, so the fsync is what makes a
    write durable on the node itself), no RDB snapshots, its data in ``folder``, its log on stdout."""
    argv = [binary, "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "yes"]
    return [*argv, "--appendfsync", "always", "--dir", str(folder), "--logfile", "", "--loglevel", "warning"]


class RedisServer:
    """A redis-server of the campaign's own (``--backend redis``): a free port on 127.0.0.1, an append-only file, its
    data in a temporary folder, its log in the transcript folder.

    Args:
        out: the transcript folder (``redis.log``; its process is recorded in ``pids.json``).

    Raises:
        RuntimeError: no ``redis-server`` on PATH.
    """

    def __init__(self, out: Path) -> None:
        binary = redis_server()
        self.port = free_port()
        self.url = f"redis://{HOST}:{self.port}/0"
        self.folder = Path(tempfile.mkdtemp(prefix="streamrelay-chaos-redis-"))
        argv = redis_argv(binary, self.port, self.folder)
        self.proc = Proc("redis-server", argv, child_env({}), out / "redis.log", out / PIDS)

    async def start(self) -> None:
        """Start it and wait until it answers PING.

        Raises:
            RuntimeError: it exited or did not answer within :data:`READY_TIMEOUT_S`.
        """
        self.proc.start()
        client = connect(self.url, client_name="streamrelay-chaos", socket_timeout_s=2.0)
        deadline = time.monotonic() + READY_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                if not self.proc.alive:
                    raise RuntimeError(f"redis-server exited with {self.proc.exit_code} (log: {self.proc.log})")
                with contextlib.suppress(Exception):
                    if await client.ping():
                        return
                await asyncio.sleep(0.05)
        finally:
            await client.aclose()
        raise RuntimeError(f"redis-server did not answer within {READY_TIMEOUT_S:g} s (log: {self.proc.log})")

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL) and remove its folder."""
        self.proc.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
