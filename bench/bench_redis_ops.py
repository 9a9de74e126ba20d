"""Benchmark: what one Redis primary takes of the replicas' per-batch operations, with ``redis-benchmark`` (issue 24).

A batch of lines (one request of one run) costs the replicas four Redis calls, each one script or command:

- the client gate (:mod:`adapters.redis.client_limits`): pace and run count, one script on the client's tag;
- the front's append (:meth:`adapters.redis.InputStream.append_open`): epoch check, stop mark, one XADD of the
  run's lines as they came;
- the owner's read (a blocking XREAD from where it got to, which returns the entry: here COUNT 1 from the start of
  the stream, one entry, one batch; a fenced XREADGROUP only when it is granted the partition);
- the owner's journal append (:meth:`adapters.redis.RedisJournal.append`): fence check, XACK + XDEL of the entry,
  one RPUSH of the lines, the run's order and time.

This script starts a throwaway redis-server (no persistence: the figure is Redis's CPU, not a disk's), loads the
scripts as the replicas do, and runs ``redis-benchmark`` on each with a batch of ``--lines`` text deltas (their
real NDJSON text), then prints requests per second per call, the calls per second one primary takes for the four
together, and the events per second that makes at ``--lines`` events per batch. Beside every figure: the load.

    uv run python bench/bench_redis_ops.py [--lines 20] [--requests 50000] [--clients 50]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_replicas import _cpu_s, load  # noqa: E402
from bench.serving import free_port  # noqa: E402
from streamrelay.adapters.redis.client_limits import _GATE  # noqa: E402
from streamrelay.adapters.redis.journal import _APPEND  # noqa: E402
from streamrelay.adapters.redis.stream import _APPEND_OPEN  # noqa: E402


def _cli(port: int, *args: str) -> str:
    return subprocess.run(
        ["redis-cli", "-p", str(port), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _bench(server: int, port: int, requests: int, clients: int, *command: str) -> tuple[float, float]:
    """Requests per second ``redis-benchmark`` measured for ``command`` (``__rand_int__`` varies keys), and the CPU
    microseconds redis-server (process ``server``) spent per request meanwhile: what a primary's capacity is made
    of, whatever else the machine runs (the requests per second are not: the benchmark's client shares the cores)."""
    cpu = _cpu_s(server)
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-n", str(requests), "-c", str(clients), "-r", "1000", "--csv", *command],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    cpu_us = (_cpu_s(server) - cpu) / requests * 1e6
    last = [line for line in out.splitlines() if line.strip()][-1]
    return float(re.findall(r'"([0-9.]+)"', last)[-7]), cpu_us  # rps, then avg, min, p50, p95, p99, max (ms)


def _server(folder: str) -> tuple[subprocess.Popen[bytes], int]:
    """A redis-server of this run's own on a free port, answering (another port when that one was taken meanwhile:
    the benchmark must never run against another process's Redis)."""
    for _ in range(5):
        port = free_port()
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            cwd=folder,
            stdout=subprocess.DEVNULL,
        )
        for _ in range(100):
            if server.poll() is not None:
                break
            if subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).returncode == 0:
                time.sleep(0.1)
                if server.poll() is None and f"process_id:{server.pid}" in _cli(port, "info", "server"):
                    return server, port
                break
            time.sleep(0.05)
        server.kill()
        server.wait()
    raise SystemExit("redis-server did not start on a free port")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=20, help="events per batch (one request of one run)")
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument("--clients", type=int, default=50)
    args = parser.parse_args()
    if shutil.which("redis-benchmark") is None:
        sys.exit("redis-benchmark is not installed (it comes with redis-server: apt-get install redis-server)")
    lines = "\n".join(
        json.dumps({"kind": "text", "mode": "delta", "text": f"word{i} ", "seq": i + 1}) for i in range(args.lines)
    )
    with tempfile.TemporaryDirectory() as tmp:
        server, port = _server(tmp)
        try:
            gate = _cli(port, "script", "load", _GATE)
            append_open = _cli(port, "script", "load", _APPEND_OPEN)
            journal = _cli(port, "script", "load", _APPEND)
            run = "bench-run"
            stream = "sr:{p__rand_int__}:in"
            figures = {
                "client gate (EVALSHA)": _bench(
                    server.pid,
                    port,
                    args.requests,
                    args.clients,
                    "evalsha",
                    gate,
                    "2",
                    "sr:{c:bench}:active",
                    "sr:{c:bench}:tat",
                    str(args.lines),
                    "0.0001",
                    "1000.0",
                    "1000",
                    "60000",
                ),
                "front append (EVALSHA: XADD)": _bench(
                    server.pid,
                    port,
                    args.requests,
                    args.clients,
                    "evalsha",
                    append_open,
                    "3",
                    stream,
                    "sr:{p__rand_int__}:epoch",
                    "sr:{p__rand_int__}:stop:" + run,
                    "",
                    "3",
                    run,
                    lines,
                    "1",  # every line a text event the front validated
                ),
            }
            for p in range(1000):  # the owners' consumer group on every stream the appends made
                subprocess.run(
                    ["redis-cli", "-p", str(port), "xgroup", "create", f"sr:{{p{p:012d}}}:in", "owners", "0"],
                    capture_output=True,
                )
            figures["owner read (XREAD)"] = _bench(  # its wake-up: a plain read from where it got to, one entry
                server.pid,
                port,
                args.requests,
                args.clients,
                "xread",
                "count",
                "1",
                "streams",
                stream,
                "0-0",
            )
            figures["owner journal (EVALSHA: RPUSH)"] = _bench(
                server.pid,
                port,
                args.requests,
                args.clients,
                "evalsha",
                journal,
                "6",
                "sr:{p__rand_int__}:fence",
                "sr:{p__rand_int__}:j:seq",
                "sr:{p__rand_int__}:j:runs",
                "sr:{p__rand_int__}:j:at",
                stream,
                "sr:{p__rand_int__}:j:lines:" + run,
                "",
                "owners",
                "1",
                "0-1",
                run,
                lines,
            )
        finally:
            server.kill()
            server.wait()
    print(f"\nredis-benchmark, {args.requests} requests x {args.clients} connections, batches of {args.lines} lines")
    print(f"{load()}\n")
    print(f"{'call':<32} {'calls/s':>10} {'us per call':>12} {'Redis CPU us':>13}")
    wall = cpu = 0.0
    for name, (rate, cpu_us) in figures.items():
        wall += 1e6 / rate
        cpu += cpu_us
        print(f"{name:<32} {rate:>10,.0f} {1e6 / rate:>12.1f} {cpu_us:>13.1f}")
    print(f"{'one batch (the four)':<32} {1e6 / wall:>10,.0f} {wall:>12.1f} {cpu:>13.1f}")
    print(
        f"\none primary's core: {1e6 / cpu:,.0f} batches/s = {args.lines * 1e6 / cpu:,.0f} events/s at {args.lines} a "
        f"batch, from Redis's CPU per batch ({args.lines * 1e6 / wall:,.0f} events/s from calls/s on this machine)"
    )


if __name__ == "__main__":
    main()
