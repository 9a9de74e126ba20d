"""The processes a campaign runs, each on its own: one mock platform server per platform and one sidecar
(``streamrelay serve``) on a campaign config and ledger, all on 127.0.0.1 with free ports.

The sidecar is killed with SIGKILL (by its process id) and started again on the same journal and ledger. Every
process this module starts is stopped by :meth:`Services.close`, whatever happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from app.chaos.plan import Options
from app.dry_run import DRY_RUN

HOST = "127.0.0.1"
READY_TIMEOUT_S = 90.0
"""How long a process may take to answer (the sidecar imports aiogram, slack-sdk and discord.py: seconds)."""
API_PREFIX = {"telegram": "", "slack": "/api/", "discord": "/api/v10"}
TOKEN_ENV = {"telegram": "CHAOS_TELEGRAM_TOKEN", "slack": "CHAOS_SLACK_TOKEN", "discord": "CHAOS_DISCORD_TOKEN"}
THROTTLE_MS = {"telegram": 1000, "slack": 1000, "discord": 1200}
FORMAT = {"telegram": "plain", "slack": "markdown", "discord": "markdown"}
"""Telegram's Markdown is rendered to entities (the chat's text then lacks the markup): plain, so the chat's text
can be compared with the answer; Slack and Discord show Markdown as written."""


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (asked of the kernel)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


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


class Proc:
    """One child process: its command, environment and log file (appended to across restarts).

    Args:
        pids: the file that records every started process's id and command line (:func:`stop_leftovers`).
    """

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path, pids: Path) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.log = log
        self.pids = pids
        self.popen: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self._close_log()
        self._log_file = self.log.open("ab")
        stamp = time.strftime("%H:%M:%S")
        self._log_file.write(f"\n===== chaos: start #{self.starts} of {self.name} at {stamp} =====\n".encode())
        self._log_file.flush()
        self.popen = subprocess.Popen(
            self.argv,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl+C of the campaign reaches it only through close()
        )
        known = json.loads(self.pids.read_text(encoding="utf-8")) if self.pids.is_file() else {}
        known[self.name] = {"pid": self.popen.pid, "argv": self.argv}
        self.pids.write_text(json.dumps(known, indent=1), encoding="utf-8")

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


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    # no STREAMRELAY_* of the caller's shell: they would override the campaign's config
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMRELAY_")}
    env.update({"COLUMNS": "240", "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


def write_config(path: Path, options: Options, port: int, mocks: dict[str, int], ledger: Path) -> None:
    """The sidecar's campaign config: one channel per platform pointed at its mock."""
    lines = [
        "# written by streamrelay chaos",
        "[service]",
        f'host = "{HOST}"',
        f"port = {port}",
        'token_env = "STREAMRELAY_TOKEN"',
        f'ledger = "{ledger}"',
        f"run_idle_timeout_s = {options.idle_s}",
        'actions = ""',
    ]
    for platform, mock_port in mocks.items():
        lines += [
            "",
            f"[channels.{platform}]",
            f'platform = "{platform}"',
            f'token_env = "{TOKEN_ENV[platform]}"',
            f'api_base = "http://{HOST}:{mock_port}{API_PREFIX[platform]}"',
            'delivery = "preview"',
            f'format = "{FORMAT[platform]}"',
            f"throttle_ms = {THROTTLE_MS[platform]}",
            f"send_timeout_ms = {options.send_timeout_ms}",
            "typing = false",
            f"exclusive_bot = {'true' if options.exclusive_bot and platform == 'telegram' else 'false'}",
        ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@dataclass
class KillRecord:
    """One kill -9 of the sidecar."""

    number: int
    reason: str
    run: str | None
    at_s: float
    """Seconds since the campaign started."""
    down_s: float = 0.0
    """How long until the restarted sidecar answered."""
    unfinished: list[str] = field(default_factory=list)
    """Runs started and not yet reported done when it died."""


class Services:
    """The mocks and the sidecar of one campaign.

    Args:
        options: the campaign's options.
        out: the transcript folder (logs, config, ledger).
    """

    def __init__(self, options: Options, out: Path) -> None:
        self.options = options
        self.out = out
        self.token = secrets.token_hex(16)
        self.mock_ports = {p: free_port() for p in options.platforms}
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.config = out / "config.toml"
        self.ledger = out / "ledger.sqlite3"
        self.mocks: dict[str, Proc] = {}
        tokens = {TOKEN_ENV[p]: DRY_RUN[p].token for p in options.platforms}
        self.sidecar = Proc(
            "sidecar",
            [sys.executable, "-m", "app", "serve", "--config", str(self.config)],
            _child_env({"STREAMRELAY_TOKEN": self.token, **tokens}),
            out / "sidecar.log",
            out / PIDS,
        )
        self.up = asyncio.Event()
        """Set while the sidecar answers; cleared from a kill until the restarted one answers."""
        self.generation = 0
        """How many times the sidecar was started (a request that began in an older generation saw a kill)."""
        self.kills: list[KillRecord] = []
        self.crashes: list[str] = []
        """The sidecar died by itself (not killed by the campaign): a finding."""
        self.t0 = time.monotonic()
        self._lock = asyncio.Lock()

    def mock_url(self, platform: str) -> str:
        return f"http://{HOST}:{self.mock_ports[platform]}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def start(self) -> None:
        """Start every mock (documented rate limits on), then the sidecar; wait until all answer.

        Raises:
            RuntimeError: a process exited or did not answer within :data:`READY_TIMEOUT_S`.
        """
        for platform, port in self.mock_ports.items():
            proc = Proc(
                f"mock {platform}",
                [sys.executable, "-m", "app", "mock", platform, "--port", str(port)],
                _child_env({}),
                self.out / f"mock-{platform}.log",
                self.out / PIDS,
            )
            self.mocks[platform] = proc
            proc.start()
        for platform, proc in self.mocks.items():
            await self._ready(proc, f"{self.mock_url(platform)}/_mock/state")
        write_config(self.config, self.options, self.port, self.mock_ports, self.ledger)
        await self._start_sidecar()

    async def _ready(self, proc: Proc, url: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if not proc.alive:
                    raise RuntimeError(f"{proc.name} exited with {proc.exit_code} while starting (log: {proc.log})")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(url)).status_code < 500:
                        return
                await asyncio.sleep(0.05)
        raise RuntimeError(f"{proc.name} did not answer within {READY_TIMEOUT_S:g} s (log: {proc.log})")

    async def _start_sidecar(self) -> None:
        for attempt in range(3):
            self.sidecar.start()
            try:
                await self._ready(self.sidecar, f"{self.url}/readyz")  # listening, and the journal resumed
            except RuntimeError as exc:
                self.crashes.append(f"start #{self.sidecar.starts}: {exc}")
                self.sidecar.kill()
                if attempt == 2:
                    raise
                await asyncio.sleep(1.0)
                continue
            self.generation += 1
            self.up.set()
            return

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    async def kill_and_restart(self, reason: str, run: str | None, unfinished: list[str]) -> KillRecord | None:
        """Kill -9 the sidecar, then start it again on the same journal and ledger; None when another kill or
        restart is under way (this one is skipped)."""
        if self._lock.locked() or not self.up.is_set():
            return None
        async with self._lock:
            record = KillRecord(len(self.kills) + 1, reason, run, round(self.elapsed(), 3), unfinished=unfinished)
            self.up.clear()
            self.sidecar.kill()
            self.kills.append(record)
            t = time.monotonic()
            await self._start_sidecar()
            record.down_s = round(time.monotonic() - t, 3)
            return record

    async def watch(self) -> None:
        """Restart the sidecar whenever it dies by itself (recorded in :attr:`crashes`); runs until cancelled."""
        while True:
            await asyncio.sleep(0.5)
            if self._lock.locked() or self.sidecar.alive or not self.up.is_set():
                continue
            async with self._lock:
                self.crashes.append(
                    f"the sidecar exited by itself with {self.sidecar.exit_code} at {self.elapsed():.1f} s"
                )
                self.up.clear()
                await self._start_sidecar()

    async def script(self, client: httpx.AsyncClient, platform: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST /_mock/script`` on ``platform``'s mock; its answer (``{"applied"}`` or ``{"error"}``)."""
        answer = await client.post(f"{self.mock_url(platform)}/_mock/script", json=body)
        result: dict[str, Any] = answer.json()
        return result

    async def state(self, client: httpx.AsyncClient, platform: str) -> dict[str, Any]:
        """``GET /_mock/state`` of ``platform``'s mock."""
        answer = await client.get(f"{self.mock_url(platform)}/_mock/state", timeout=120.0)
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return result

    def close(self) -> None:
        """Stop the sidecar and every mock (SIGTERM, then SIGKILL)."""
        self.up.clear()
        self.sidecar.stop()
        for proc in self.mocks.values():
            proc.stop()
