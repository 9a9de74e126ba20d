"""What the benchmarks that run a real sidecar share: a free loopback port, and ``serve`` started and awaited."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def serve(cmd: Sequence[str], config: Path, port: int, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """Start ``cmd`` (a ``serve`` command line) with ``--config config --port port`` and wait until ``/readyz``
    answers 200 (up to 60 s). Its log goes to ``serve.log`` beside the config, never to a pipe nobody reads (a full
    pipe blocks the sidecar's logging).

    Raises:
        RuntimeError: the process ended, or did not become ready in time (with the log's tail).
    """
    log_path = config.parent / "serve.log"
    args = [*cmd, "--config", str(config), "--port", str(port)]
    proc = subprocess.Popen(args, cwd=ROOT, env=dict(env), stdout=subprocess.DEVNULL, stderr=log_path.open("wb"))
    async with httpx.AsyncClient() as client:
        for _ in range(600):
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200:
                    return proc
            if proc.poll() is not None:
                raise RuntimeError(f"serve ended: {log_path.read_text()[-2000:]}")
            await asyncio.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"serve did not become ready: {log_path.read_text()[-2000:]}")
