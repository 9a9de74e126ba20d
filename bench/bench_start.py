"""Benchmark: how fast streamrelay starts (issue 14: ``serve`` listens and the demo prints its first line within 2 s).

Every command runs as a newcomer types it (``uv run streamrelay ...``, a new process each time), in rounds: each round
runs every measure once, in turn, so a machine that slows down during the call slows them all alike. Measures:

- ``demo``: time until ``streamrelay demo`` prints its first line (Telegram, the default; then it is stopped).
- ``serve`` with Telegram and the web channel (the shipped ``channels.toml``'s defaults), and with only the web channel:
  time until ``/healthz`` answers (it listens) and until ``/readyz`` answers 200 (channels built, journal resumed).
- a configuration error (an unknown key): time until the process has printed it and exited.
- idle RSS of the ``serve`` process 1 s after it is ready.

Baselines measured in the same rounds: ``uv run python -c pass`` (an empty interpreter started through uv, to its
exit) and ``uv run python -c "import aiogram"`` (what the Telegram SDK's import costs by itself, to a line printed
after it, and its RSS then). Prints medians (min-max) as a Markdown table.

A shell that sets ``PYTHONDONTWRITEBYTECODE`` (as some sandboxes and container images do) compiles every module from
source at every start: about 0.9 s of the demo's imports here. Each command then also runs with Python's default,
a bytecode cache (in a temporary folder of its own: ``PYTHONPYCACHEPREFIX``), in the same rounds.

    uv run python bench/bench_start.py [--rounds 5] [--only demo ...] [--no-bytecode]
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
Measure = Callable[[Path, dict[str, str]], Awaitable[dict[str, float]]]


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


async def to_exit(cmd: list[str], env: dict[str, str], *, expect: str = "") -> dict[str, float]:
    """Seconds until ``cmd`` exits (its output must contain ``expect``)."""
    start = time.perf_counter()
    proc = await _spawn(cmd, env)
    out, _ = await proc.communicate()
    took = time.perf_counter() - start
    if expect.encode() not in out:
        raise RuntimeError(f"{cmd} did not print {expect!r}: {out[-600:]!r}")
    return {"exit": took}


async def first_line(cmd: list[str], env: dict[str, str], *, rss_after: str = "") -> dict[str, float]:
    """Seconds until ``cmd`` prints its first line; with ``rss_after``, also its RSS once a line containing it came."""
    start = time.perf_counter()
    proc = await _spawn(cmd, env)
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


async def serve(folder: Path, variant: dict[str, str], *, telegram: bool) -> dict[str, float]:
    """Seconds until ``serve`` listens (``/healthz``) and is ready (``/readyz`` 200); its RSS 1 s later, in MB."""
    port = free_port()
    config = _config(folder, port, telegram=telegram)
    env = {**variant, "STREAMRELAY_TOKEN": "bench-start-ingest", "TELEGRAM_BOT_TOKEN": BOT_TOKEN}
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


async def config_error(folder: Path, env: dict[str, str]) -> dict[str, float]:
    """Seconds until ``serve`` with an unknown key has named it and exited."""
    bad = folder / "bad.toml"
    bad.write_text('[service]\nportt = 8787\n\n[channels.web]\nplatform = "web"\n')
    return await to_exit([*STREAMRELAY, "serve", "--config", str(bad)], env, expect="portt")


MEASURES: dict[str, Measure] = {
    "python -c pass": lambda _, env: to_exit([*UV, "python", "-c", "pass"], env),
    "python -c 'import aiogram'": lambda _, env: first_line(
        [*UV, "python", "-c", "import aiogram, time; print('imported', flush=True); time.sleep(60)"], env, rss_after="i"
    ),
    "demo": lambda _, env: first_line([*STREAMRELAY, "demo"], env),
    "serve, telegram + web": lambda folder, env: serve(folder, env, telegram=True),
    "serve, web only": lambda folder, env: serve(folder, env, telegram=False),
    "config error": config_error,
}


def _cell(values: list[float], unit: str = "s") -> str:
    if not values:
        return "-"
    digits = 0 if unit == "MB" else 2
    return f"{statistics.median(values):.{digits}f} {unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


ROWS = [
    ("`streamrelay demo`: first line", "demo", "line"),
    ("`serve` (telegram + web) listens: /healthz", "serve, telegram + web", "listen"),
    ("`serve` (telegram + web) ready: /readyz", "serve, telegram + web", "ready"),
    ("`serve` (web only) listens: /healthz", "serve, web only", "listen"),
    ("`serve` (web only) ready: /readyz", "serve, web only", "ready"),
    ("a configuration error printed (exit 2)", "config error", "exit"),
    ("idle RSS after ready (telegram + web)", "serve, telegram + web", "rss"),
    ("idle RSS after ready (web only)", "serve, web only", "rss"),
    ("baseline: `python -c pass` (to exit)", "python -c pass", "exit"),
    ("baseline: `python -c 'import aiogram'`", "python -c 'import aiogram'", "line"),
    ("baseline: RSS after `import aiogram`", "python -c 'import aiogram'", "rss"),
]
"""The table's rows: (label, measure, figure)."""


def table(samples: dict[str, dict[str, dict[str, list[float]]]]) -> str:
    """The Markdown table of the medians, one column per variant."""
    variants = list(samples)
    lines = ["| measure | " + " | ".join(variants) + " |", "|---" * (len(variants) + 1) + "|"]
    for label, name, key in ROWS:
        unit = "MB" if key == "rss" else "s"
        cells = [_cell(samples[v].get(name, {}).get(key, []), unit) for v in variants]
        if any(cell != "-" for cell in cells):
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def variants(tmp: Path, bytecode: bool) -> dict[str, dict[str, str]]:
    """The environments to run every command in: as this shell has it, and (``bytecode``) with Python's bytecode cache
    on, in a folder of its own (``PYTHONPYCACHEPREFIX``), for a shell that sets ``PYTHONDONTWRITEBYTECODE``."""
    here = "as run here" + (" (PYTHONDONTWRITEBYTECODE=1)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "")
    found: dict[str, dict[str, str]] = {here: {}}
    if bytecode and os.environ.get("PYTHONDONTWRITEBYTECODE"):
        found["with a bytecode cache"] = {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(tmp / "pyc")}
    return found


async def main(rounds: int, only: list[str], bytecode: bool) -> None:
    """``rounds`` rounds of every measure (or those in ``only``) in every variant, then the table."""
    names = [name for name in MEASURES if not only or name in only]
    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        envs = variants(Path(tmp), bytecode)
        samples: dict[str, dict[str, dict[str, list[float]]]] = {v: {} for v in envs}
        for env in envs.values():  # warm-up: uv's environment, the file cache, the bytecode cache
            await to_exit([*UV, "python", "-c", "import aiogram, slack_sdk, discord, app.demo, app.serving"], env)
        for done in range(rounds):
            for name in names:
                for variant, env in envs.items():
                    result = await MEASURES[name](Path(tmp), env)
                    for key, value in result.items():
                        samples[variant].setdefault(name, {}).setdefault(key, []).append(value)
            print(f"round {done + 1}/{rounds} done", file=sys.stderr, flush=True)
    print(table(samples))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every measure (medians are reported)")
    parser.add_argument("--only", nargs="*", default=[], choices=list(MEASURES), help="measure only these")
    parser.add_argument("--no-bytecode", action="store_true", help="skip the variant with a bytecode cache")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.only, not args.no_bytecode))
