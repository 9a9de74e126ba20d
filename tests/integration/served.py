"""A real ``streamrelay serve`` process for the tests that need one (:func:`serve_process`): started on a config,
its output in a log file, waited for until ready (:meth:`Served.ready`), killed at the exit if still running. Each is
forked from the worker's zygote (tests/preloaded.py: the imports done once per worker, not the ~1 CPU-s with only
the web channel and ~5 more with a Telegram channel, aiogram's import, each process)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.contention import wait_scale
from tests.preloaded import Started, streamrelay_process

ROOT = Path(__file__).resolve().parents[2]


class Served:
    """A running ``serve``: its process, its port, its log, and an HTTP client on it (no credentials of its own).

    Args:
        token: the ingest token :meth:`post` sends (``STREAMRELAY_TOKEN`` of the process).
    """

    def __init__(self, proc: Started, port: int, log: Path, token: str) -> None:
        self.proc, self.port, self.log, self.token = proc, port, log, token
        self.client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30)

    def lines(self) -> list[dict[str, Any]]:
        """The log's lines, each parsed as JSON (``log_format = "json"``).

        Raises:
            json.JSONDecodeError: a line is not JSON.
        """
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    async def ready(self) -> None:
        """Return once ``/readyz`` answers 200.

        Raises:
            AssertionError: the process exited (the log's end in the message), or not ready in 60 s times the load.
        """
        timeout_s = 60 * wait_scale()  # a hang guard, scaled as the timeouts are
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            try:
                if (await self.client.get("/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
        raise AssertionError(f"not ready in {timeout_s:g} s")

    async def post(self, run: str, *lines: dict[str, Any], headers: Mapping[str, str] | None = None) -> httpx.Response:
        """POST ``lines`` (NDJSON) to ``run``'s events as its agent, with :attr:`token` and ``headers``."""
        body = "".join(json.dumps(line) + "\n" for line in lines)
        sent = {"Authorization": f"Bearer {self.token}", **(headers or {})}
        return await self.client.post(f"/v1/runs/{run}/events", content=body, headers=sent)

    async def exit_code(self, timeout_s: float) -> int:
        """The process's exit code, waited for up to ``timeout_s`` (times the load).

        Raises:
            AssertionError: still running then.
        """
        deadline = time.monotonic() + timeout_s * wait_scale()
        while (code := self.proc.poll()) is None:
            assert time.monotonic() < deadline, f"still running after {timeout_s:g} s (times the load)"
            await asyncio.sleep(0.05)
        return code


@asynccontextmanager
async def serve_process(
    config: Path, port: int, env: Mapping[str, str], *args: str, token: str
) -> AsyncIterator[Served]:
    """``streamrelay serve --config config *args`` with the environment ``env`` (whole: pass ``os.environ`` and
    what to add), listening on ``port`` (the config's), its output in ``serve.log`` beside ``config``; killed at
    the exit if still running. Not waited for: call :meth:`Served.ready`."""
    log = config.parent / "serve.log"
    log.write_bytes(b"")
    proc = streamrelay_process(["serve", "--config", str(config), *args], env, log)
    served = Served(proc, port, log, token)
    try:
        yield served
    finally:
        await served.client.aclose()
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
