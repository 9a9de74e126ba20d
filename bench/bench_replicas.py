"""Benchmark: events/s through the whole service as replica processes are added on one Redis (issue 11, item 6).

One process uses one core; replicas are how a machine's other cores are used. Each variant starts its own
``streamrelay serve`` processes (as an operator runs them) and a redis-server, streams R runs of L text deltas
each through HTTP (``POST /v1/events``, batches of B lines, spread over the replicas round-robin), and waits until
every run's report says done. The channel is the web page (platform ``web``): no platform server takes CPU, so
what is measured is ingest, Redis, the journal, the run, the planner and the ledger.

Variants, in the same run: ``sqlite`` (the embedded single process: the baseline), ``redis x1``, ``redis x2``
(and ``x3`` with ``--max-replicas 3``). Prints events/s, seconds, and the speed-up over
``redis x1``. On a machine with 2 cores the load generator, redis-server and the replicas share them.

Beside the rates it prints what capacity is made of, which a shared 2-core machine measures fairly where it cannot
host a side-by-side: the CPU the ``serve`` processes spent per event (user + system, from ``/proc``), the CPU
redis-server spent per event, and the Redis commands per event and per request (``INFO commandstats`` deltas,
commands run inside Lua scripts included), each beside the machine's load average. ``--cpu`` runs only the two
variants that figure compares (``sqlite`` and ``redis x1``).

    uv run python bench/bench_replicas.py [--runs 200] [--lines 200] [--batch 2000] [--max-replicas 2] [--cpu]
        [--per-run] [--delivery preview|final]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.serving import free_port  # noqa: E402

TOKEN = "bench-replicas-token"


def _config(folder: Path, backend: str, delivery: str) -> Path:
    lines = [
        "[service]",
        f'backend = "{backend}"',
        f'ledger = "{folder / "ledger.sqlite3"}"',
        "partitions = 16",
        "lease_ttl_s = 5",
        'actions = ""',
        'log_level = "warning"',
        "",
        "[channels.web]",
        'platform = "web"',
        f'delivery = "{delivery}"',
        "typing = false",
        "throttle_ms = 100",
        "",
    ]
    path = folder / "channels.toml"
    path.write_text("\n".join(lines))
    return path


PUSHED_BACK = (429, 503)
"""Answers a client sends again after their Retry-After (the sidecar's back pressure, e.g. a replica waiting for
Redis or a run not yet owned): counted and resent as RelayClient does, never a reason to stop the benchmark."""


async def _post(http: httpx.AsyncClient, url: str, body: bytes, pushed: list[int]) -> None:
    """POST ``body`` until it is taken (200), resending after each 429/503's Retry-After (at most 60 times);
    ``pushed[0]`` counts the resends. Any other answer stops the benchmark with what the sidecar said."""
    for _ in range(60):
        answer = await http.post(url, content=body)
        if answer.status_code == 200:
            return
        if answer.status_code not in PUSHED_BACK:
            break
        pushed[0] += 1
        await asyncio.sleep(min(5.0, float(answer.headers.get("Retry-After", "0.2") or 0.2)))
    raise SystemExit(f"{answer.request.url} answered {answer.status_code}: {answer.text[:300]}")


def _body(runs: list[str], lines: int) -> list[bytes]:
    """Every run's lines, interleaved as concurrent agents would send them, as NDJSON lines."""
    out: list[bytes] = []
    for run in runs:
        out.append(
            json.dumps(
                {"run": run, "kind": "run.start", "channel": "web", "target": {"chat_id": run}, "seq": 0}
            ).encode()
        )
    for i in range(lines):
        for run in runs:
            text = f"word{i} " if i % 20 else "\n\nA new paragraph begins here. "
            out.append(json.dumps({"run": run, "kind": "text", "mode": "delta", "text": text, "seq": i + 1}).encode())
    for run in runs:
        out.append(json.dumps({"run": run, "kind": "end", "status": "ok", "seq": lines + 1}).encode())
    return out


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds process ``pid`` spent so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _commandstats(port: int) -> dict[str, int]:
    """Calls per command of the redis-server on ``port`` (``INFO commandstats``)."""
    out = subprocess.run(
        ["redis-cli", "-p", str(port), "info", "commandstats"], capture_output=True, text=True, check=True
    ).stdout
    calls: dict[str, int] = {}
    for line in out.splitlines():
        if line.startswith("cmdstat_"):
            name, _, rest = line.partition(":")
            calls[name.removeprefix("cmdstat_")] = int(rest.split("calls=", 1)[1].split(",", 1)[0])
    return calls


def load() -> str:
    """The machine's load average (1, 5, 15 min) and its cores, to read every figure beside."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def _rounds(ids: list[str], lines: int, batch: int, per_run: bool, concurrency: int) -> list[list[tuple[str, bytes]]]:
    """The requests after the run starts, as rounds sent concurrently: ``(path, body)``. Interleaved: every run's
    lines in turn, batches of ``batch`` lines to ``/v1/events`` (each request touches every run, so every partition);
    ``per_run``: each request one run's next ``batch`` lines to ``/v1/runs/{run}/events`` (the agent's mode), a
    round holding one request of each run."""
    if not per_run:
        body = _body(ids, lines)[len(ids) :]
        chunks = [("/v1/events", b"\n".join(body[i : i + batch]) + b"\n") for i in range(0, len(body), batch)]
        return [chunks[i : i + concurrency] for i in range(0, len(chunks), concurrency)]

    def line(i: int) -> bytes:
        if i == lines:
            return json.dumps({"kind": "end", "status": "ok", "seq": lines + 1}).encode()
        text = f"word{i} " if i % 20 else "\n\nA new paragraph begins here. "
        return json.dumps({"kind": "text", "mode": "delta", "text": text, "seq": i + 1}).encode()

    rounds = []
    for i in range(0, lines + 1, batch):
        chunk = b"\n".join(line(k) for k in range(i, min(i + batch, lines + 1))) + b"\n"
        rounds.append([(f"/v1/runs/{run}/events", chunk) for run in ids])
    return rounds


async def _variant(
    name: str, backend: str, replicas: int, runs: int, lines: int, batch: int, delivery: str, per_run: bool
) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = {**os.environ, "STREAMRELAY_TOKEN": TOKEN, "NO_COLOR": "1"}
        redis = None
        port = 0
        if backend == "redis":
            port = free_port()
            redis = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                stdout=subprocess.DEVNULL,
            )
            env["STREAMRELAY_SERVICE__REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
            env["STREAMRELAY_SERVICE__ALLOW_VOLATILE_REDIS"] = "true"  # no disk writes in the measured figures
        config = _config(folder, backend, delivery)
        ports = [free_port() for _ in range(replicas)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "streamrelay", "serve", "--config", str(config), "--port", str(p)],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for p in ports
        ]
        try:
            result = await _drive(name, ports, runs, lines, batch, per_run, procs, redis, redis_port=port)
            result["load"] = os.getloadavg()[0]
            return result
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
            if redis is not None:
                redis.kill()
                redis.wait()


async def _drive(
    name: str,
    ports: list[int],
    runs: int,
    lines: int,
    batch: int,
    per_run: bool,
    procs: list[subprocess.Popen[bytes]],
    redis: subprocess.Popen[bytes] | None,
    *,
    redis_port: int,
) -> dict[str, float]:
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:
        for url in urls:
            for _ in range(600):
                try:
                    if (await http.get(url + "/readyz")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        await asyncio.sleep(1.0 if len(urls) > 1 else 0.0)  # replicas that just met share the partitions
        ids = [f"{name.replace(' ', '')}-{i}" for i in range(runs)]
        body = _body(ids, lines)[: len(ids)]  # the run starts
        rounds = _rounds(ids, lines, batch, per_run, 2 * len(urls))
        cpu0 = [_cpu_s(p.pid) for p in procs]
        redis_cpu0 = _cpu_s(redis.pid) if redis is not None else 0.0
        stats0 = _commandstats(redis_port) if redis is not None else {}
        requests = -(-runs // 20) + sum(len(r) for r in rounds)
        pushed = [0]
        started = time.perf_counter()
        for i in range(0, runs, 20):  # every run.start first (20 a request: max_runs_per_request)
            first = b"\n".join(body[i : min(i + 20, runs)]) + b"\n"
            await _post(http, urls[0] + "/v1/events", first, pushed)
        k = 0
        for posts in rounds:
            answers = []
            for path, chunk in posts:
                answers.append(_post(http, urls[k % len(urls)] + path, chunk, pushed))
                k += 1
            await asyncio.gather(*answers)
        accepted = time.perf_counter() - started
        for run in ids:
            report = await http.get(urls[0] + f"/v1/runs/{run}", params={"wait_s": 120})
            report.raise_for_status()
            assert report.json()["done"], report.text
        elapsed = time.perf_counter() - started
        await asyncio.sleep(0.5)  # the last deliveries' bookkeeping
        events = runs * (lines + 2)
        cpu = sum(_cpu_s(p.pid) - c for p, c in zip(procs, cpu0, strict=True))
        result = {
            "events": events,
            "seconds": elapsed,
            "accept_s": accepted,
            "cpu_us": cpu / events * 1e6,
            "pushed_back": pushed[0],
        }
        if redis is not None:
            stats = _commandstats(redis_port)
            delta = {k: v - stats0.get(k, 0) for k, v in stats.items() if v - stats0.get(k, 0) > 0}
            result["redis_cpu_us"] = (_cpu_s(redis.pid) - redis_cpu0) / events * 1e6
            result["redis_ops"] = sum(delta.values()) / events
            result["redis_ops_per_request"] = sum(delta.values()) / requests
            top = sorted(delta.items(), key=lambda kv: -kv[1])[:8]
            print(
                f"  {name}: Redis commands per event: " + ", ".join(f"{k} {v / events:.3f}" for k, v in top),
                file=sys.stderr,
            )
        return result


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--max-replicas", type=int, default=2)
    parser.add_argument(
        "--per-run", action="store_true", help="each request one run's lines (/v1/runs/{run}/events), not every run's"
    )
    parser.add_argument("--cpu", action="store_true", help="only sqlite and redis x1: CPU per event compared")
    parser.add_argument(
        "--delivery",
        choices=("preview", "final"),
        help="the channel's delivery (default: preview; final with --cpu: one platform call per run, so a slower "
        "variant does not make more preview edits, which would count as CPU per event)",
    )
    args = parser.parse_args()
    if shutil.which("redis-server") is None:
        sys.exit("redis-server is not installed (apt-get install redis-server)")
    max_replicas = 1 if args.cpu else args.max_replicas
    delivery = args.delivery or ("final" if args.cpu else "preview")
    variants = [("sqlite", "sqlite", 1)] + [(f"redis x{n}", "redis", n) for n in range(1, max_replicas + 1)]
    rows = []
    for name, backend, n in variants:
        result = await _variant(name, backend, n, args.runs, args.lines, args.batch, delivery, args.per_run)
        rows.append((name, result))
        print(f"  {name}: {result['events'] / result['seconds']:,.0f} events/s", file=sys.stderr)
    base = next(r for name, r in rows if name == "redis x1")
    one = next(r for name, r in rows if name == "sqlite")
    shape = "of one run each" if args.per_run else "holding every run's"
    print(f"\n{args.runs} runs x {args.lines} deltas, requests of {args.batch} lines {shape}, delivery {delivery}")
    print(f"{load()}\n")
    print(
        f"{'variant':<10} {'events':>8} {'seconds':>8} {'accepted in':>12} {'events/s':>10} {'vs redis x1':>12}"
        f" {'CPU us/ev':>10} {'vs sqlite':>10} {'redis us/ev':>12} {'redis ops/ev':>13} {'ops/request':>12}"
        f" {'resent':>7} {'load 1m':>8}"
    )
    for name, r in rows:
        rate = r["events"] / r["seconds"]
        ratio = rate / (base["events"] / base["seconds"])
        cells = f"{r['events']:>8,.0f} {r['seconds']:>8.1f} {r['accept_s']:>11.1f}s {rate:>10,.0f}"
        cpu = f"{r['cpu_us']:>10.1f} {r['cpu_us'] / one['cpu_us']:>9.2f}x"
        redis = (
            f"{r['redis_cpu_us']:>12.1f} {r['redis_ops']:>13.3f} {r['redis_ops_per_request']:>12.1f}"
            if "redis_ops" in r
            else f"{'':>12} {'':>13} {'':>12}"
        )
        print(f"{name:<10} {cells} {ratio:>11.2f}x {cpu} {redis} {r['pushed_back']:>7,.0f} {r['load']:>8.2f}")


if __name__ == "__main__":
    asyncio.run(main())
