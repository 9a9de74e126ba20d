"""Benchmark: how fast streamrelay starts (issue 14: ``serve`` listens and the demo prints its first line within 2 s).

Every command runs as a newcomer types it (``uv run streamrelay ...``, a new process each time), in rounds: each round
runs every measure once, in turn, so a machine that slows down during the call slows them all alike. Measures:

- ``demo``: time until ``streamrelay demo`` prints its first line (Telegram, the default; then it is stopped).
- ``serve`` with Telegram and the web channel (``config/channels.toml``'s defaults), and with only the web channel:
  time until ``/healthz`` answers (it listens) and until ``/readyz`` answers 200 (channels built, journal resumed).
- a configuration error (an unknown key): time until the process has printed it and exited.
- idle RSS of the ``serve`` process 1 s after it is ready.

Baselines measured in the same rounds: ``uv run python -c pass`` (an empty interpreter started through uv) and
``uv run python -c "import aiogram"`` (what the Telegram SDK's import costs by itself), both to their exit, and their
RSS. Prints medians (min-max) as a Markdown table.

    uv run python bench/bench_start.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.serving import free_port  # noqa: E402

UV = ["uv", "run", "--quiet"]
STREAMRELAY = [*UV, "streamrelay"]
BOT_TOKEN = "123456:bench-start-token"
Measure = Callable[[Path], Awaitable[dict[str, float]]]


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def rss_mb(pid: int) -> float:
    """The largest resident set among ``pid`` and its descendants (``uv run`` waits on a child python), in MB."""
    best = 0.0
    for each in [pid, *_children(pid)]:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{each}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    best = max(best, int(line.split()[1]) / 1024)
    return best


async def _spawn(
    cmd: list[str], env: dict[str, str] | None = None, log: Path | None = None
) -> asyncio.subprocess.Process:
    """``cmd`` started in the checkout; its output in a pipe, or in ``log`` (a pipe nobody reads would fill)."""
    return await asyncio.create_subprocess_exec(
        *cmd,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=log.open("wb") if log is not None else asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group: stopped whole, uv and its child alike
    )


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.communicate(), 30)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


async def to_exit(cmd: list[str], *, expect: str = "") -> dict[str, float]:
    """Seconds until ``cmd`` exits (its output must contain ``expect``)."""
    start = time.perf_counter()
    proc = await _spawn(cmd)
    out, _ = await proc.communicate()
    took = time.perf_counter() - start
    if expect.encode() not in out:
        raise RuntimeError(f"{cmd} did not print {expect!r}: {out[-600:]!r}")
    return {"exit": took}


async def first_line(cmd: list[str], *, rss_after: str = "") -> dict[str, float]:
    """Seconds until ``cmd`` prints its first line; with ``rss_after``, also its RSS once a line containing it came."""
    start = time.perf_counter()
    proc = await _spawn(cmd)
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 120)
        result = {"line": time.perf_counter() - start}
        if not line:
            raise RuntimeError(f"{cmd} ended without a line")
        while rss_after and rss_after.encode() not in line:
            line = await asyncio.wait_for(proc.stdout.readline(), 120)
        if rss_after:
            result["rss"] = rss_mb(proc.pid)
        return result
    finally:
        await _stop(proc)


def _config(folder: Path, port: int, *, telegram: bool) -> Path:
    lines = ["[service]", f"port = {port}", f'ledger = "{folder / "ledger.sqlite3"}"', "", "[channels.web]"]
    lines += ['platform = "web"']
    if telegram:
        lines += ["", "[channels.telegram]", 'platform = "telegram"', 'token_env = "TELEGRAM_BOT_TOKEN"']
        lines += ['api_base = "http://127.0.0.1:9"']  # never called while idle
    config = folder / f"channels-{port}.toml"
    config.write_text("\n".join(lines) + "\n")
    return config


async def serve(folder: Path, *, telegram: bool) -> dict[str, float]:
    """Seconds until ``serve`` listens (``/healthz``) and is ready (``/readyz`` 200); its RSS 1 s later, in MB."""
    port = free_port()
    config = _config(folder, port, telegram=telegram)
    env = {"STREAMRELAY_TOKEN": "bench-start-ingest", "TELEGRAM_BOT_TOKEN": BOT_TOKEN}
    start = time.perf_counter()
    log = folder / "serve.log"
    proc = await _spawn([*STREAMRELAY, "serve", "--config", str(config)], env, log)
    result: dict[str, float] = {}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            for path, key in (("/healthz", "listen"), ("/readyz", "ready")):
                while key not in result:
                    if proc.returncode is not None:
                        raise RuntimeError(f"serve ended: {log.read_text()[-800:]}")
                    with contextlib.suppress(httpx.TransportError):
                        if (await client.get(path)).status_code == 200:
                            result[key] = time.perf_counter() - start
                            break
                    await asyncio.sleep(0.01)
        await asyncio.sleep(1.0)
        result["rss"] = rss_mb(proc.pid)
        return result
    finally:
        await _stop(proc)


async def config_error(folder: Path) -> dict[str, float]:
    """Seconds until ``serve`` with an unknown key has named it and exited."""
    bad = folder / "bad.toml"
    bad.write_text('[service]\nportt = 8787\n\n[channels.web]\nplatform = "web"\n')
    return await to_exit([*STREAMRELAY, "serve", "--config", str(bad)], expect="portt")


MEASURES: dict[str, Measure] = {
    "python -c pass": lambda _: to_exit([*UV, "python", "-c", "pass"]),
    "python -c 'import aiogram'": lambda _: first_line(
        [*UV, "python", "-c", "import aiogram, time; print('imported', flush=True); time.sleep(60)"], rss_after="imp"
    ),
    "demo": lambda _: first_line([*STREAMRELAY, "demo"]),
    "serve, telegram + web": lambda folder: serve(folder, telegram=True),
    "serve, web only": lambda folder: serve(folder, telegram=False),
    "config error": config_error,
}


def _cell(values: list[float], unit: str = "s") -> str:
    if not values:
        return "-"
    digits = 0 if unit == "MB" else 2
    med = f"{statistics.median(values):.{digits}f}"
    return f"{med} {unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def table(samples: dict[str, dict[str, list[float]]]) -> str:
    """The Markdown table of the medians."""

    def get(name: str, key: str, unit: str = "s") -> str:
        return _cell(samples.get(name, {}).get(key, []), unit)

    empty = get("python -c pass", "exit")
    aiogram = get("python -c 'import aiogram'", "line")
    aiogram_rss = get("python -c 'import aiogram'", "rss", "MB")
    rows = [
        ("`streamrelay demo`: first line", get("demo", "line"), f"empty python {empty}; import aiogram {aiogram}"),
        ("`serve` (telegram + web) listens", get("serve, telegram + web", "listen"), f"import aiogram {aiogram}"),
        ("`serve` (telegram + web) ready", get("serve, telegram + web", "ready"), f"import aiogram {aiogram}"),
        ("`serve` (web only) listens", get("serve, web only", "listen"), f"empty python {empty}"),
        ("`serve` (web only) ready", get("serve, web only", "ready"), f"empty python {empty}"),
        ("a configuration error printed, exit", get("config error", "exit"), f"empty python {empty}"),
        (
            "idle RSS after ready (telegram + web)",
            get("serve, telegram + web", "rss", "MB"),
            f"import aiogram {aiogram_rss}",
        ),
        ("idle RSS after ready (web only)", get("serve, web only", "rss", "MB"), ""),
    ]
    lines = ["| measure | median (min-max) | baseline, same run |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


async def main(rounds: int, only: list[str]) -> None:
    """``rounds`` rounds of every measure (or those in ``only``), then the table."""
    samples: dict[str, dict[str, list[float]]] = {}
    names = [name for name in MEASURES if not only or name in only]
    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        await to_exit([*UV, "python", "-c", "import aiogram, app.cli"])  # warm-up: uv's environment, the caches
        for done in range(rounds):
            for name in names:
                result = await MEASURES[name](Path(tmp))
                for key, value in result.items():
                    samples.setdefault(name, {}).setdefault(key, []).append(value)
            print(f"round {done + 1}/{rounds} done", file=sys.stderr, flush=True)
    print(table(samples))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every measure (medians are reported)")
    parser.add_argument("--only", nargs="*", default=[], choices=list(MEASURES), help="measure only these")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.only))
