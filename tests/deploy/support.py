"""What the deploy tests share: the repository's paths, the CLI's own parser (does it accept these arguments?), and
a service started as its own process the way a deploy form starts it (stopped with SIGTERM, as they stop it)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import redis
import typer

from streamrelay.app.cli import app
from tests.contention import wait_scale

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
START_TIMEOUT_S = 60.0
"""A hang guard for a service to answer on an idle machine; stretched by the load as the wait starts (wait_scale)."""
NO_REDIS = (
    "no redis-server on PATH (the Redis form needs one): install Debian's redis-server: apt-get install redis-server"
)


def cli_accepts(args: Sequence[str]) -> None:
    """Parse ``streamrelay ARGS`` with the CLI's own parser, without running the command.

    Raises:
        typer.exceptions.TyperException: an unknown command or option, or a bad value (a usage error).
    """
    command = typer.main.get_command(app)
    context = command.make_context("streamrelay", list(args))
    assert isinstance(command, typer.core.TyperGroup)
    sub = command.get_command(context, args[0])
    assert sub is not None, f"no command {args[0]!r}"
    sub.make_context(args[0], list(args[1:]), parent=context)


@dataclass
class Process:
    """A started process and its combined output (a file)."""

    popen: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_http(self, url: str, status: int = 200, timeout_s: float = START_TIMEOUT_S) -> httpx.Response:
        """GET ``url`` until it answers ``status``.

        Raises:
            AssertionError: the process exited, or ``url`` did not answer ``status`` in time (``timeout_s`` on an
                idle machine, stretched by the load).
        """
        timeout_s *= wait_scale()
        deadline = time.monotonic() + timeout_s
        last = "no answer"
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise AssertionError(f"exited with {self.popen.returncode}: {self.output()[-3000:]}")
            try:
                answer = httpx.get(url, timeout=5)
                if answer.status_code == status:
                    return answer
                last = f"{answer.status_code} {answer.text[:200]}"
            except httpx.TransportError as exc:
                last = type(exc).__name__
            time.sleep(0.1)
        raise AssertionError(f"{url} did not answer {status} within {timeout_s:g} s (last: {last})")

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, as every deploy form stops it (to the started process only: ``uv run`` forwards it once to the
        service); the exit code (the whole process group is killed past ``timeout_s``, stretched by the load)."""
        timeout_s *= wait_scale()
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"still running {timeout_s:g} s after SIGTERM: {self.output()[-3000:]}") from None

    def kill(self) -> None:
        """SIGKILL to the process group: the started process and what it started (``uv run``'s child)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)


@contextmanager
def started(command: Sequence[str], env: Mapping[str, str], log: Path, cwd: Path = ROOT) -> Iterator[Process]:
    """Run ``command`` (in ``cwd``, with ``env`` over a copy of this process's environment) in a process group of its
    own; the group is killed at the end (a stopped process's leftovers too)."""
    full_env = {**os.environ, "NO_COLOR": "1", **env}
    with log.open("ab") as out:
        popen = subprocess.Popen(
            list(command), cwd=cwd, env=full_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    process = Process(popen, log)
    try:
        yield process
    finally:
        process.kill()  # its own process group: nothing it started outlives the test


def read_unit(path: Path) -> dict[str, dict[str, list[str]]]:
    """A systemd unit file: section → key → every value given (a key may repeat), comments and blanks left out."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{path}: {line!r} before any section"
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def redis_server() -> str:
    """The ``redis-server`` binary; without one the test skips (fails with ``STREAMRELAY_REQUIRE_REDIS=1``, as CI
    sets: tests/redis/conftest.py does the same)."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("STREAMRELAY_REQUIRE_REDIS") == "1":
            pytest.fail(NO_REDIS, pytrace=False)
        pytest.skip(NO_REDIS)
    return binary


@contextmanager
def started_redis(port: int, folder: Path) -> Iterator[Process]:
    """A throwaway redis-server on 127.0.0.1:``port`` (its append-only file in ``folder``: ``serve`` refuses a Redis
    without one), answering PING when this yields; killed at the end."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = [redis_server(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes"]
    argv += ["--dir", str(folder)]
    with started(argv, {}, folder / "redis.log", cwd=folder) as process:
        probe = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10.0
        try:
            while True:
                if process.popen.poll() is not None:
                    raise AssertionError(f"redis-server exited with {process.popen.returncode}: {process.output()}")
                try:
                    if probe.ping():
                        break
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise AssertionError(f"redis-server did not answer PING: {process.output()}") from None
                    time.sleep(0.05)
        finally:
            probe.close()
        yield process
