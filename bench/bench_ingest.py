"""Benchmark: how many events one sidecar process takes over HTTP, and its CPU per event.

A server process runs the ingest app (adapters/ingest_http/app.py) on a relay with an in-memory journal and ledger
and a platform that answers at once, under uvicorn as ``serve`` runs it: the connection guard of
``[service.connections]`` on uvicorn's httptools protocol (``--http httptools``, serve's default) or its h11
protocol (``--http h11``), on uvloop or asyncio's loop. A client (raw keep-alive HTTP/1.1 on
asyncio streams, cheaper than a client library) posts, over ``--connections`` connections, each run's
1-character ``text`` deltas either as NDJSON bodies of ``--batch`` lines or one event per request (``--batch 1``).
Prints events per second (wall) and the server's CPU µs per event (its own process time: the machine is shared).

    uv run python bench/bench_ingest.py [--http h11|httptools] [--loop uvloop|asyncio] [--batch 1|64] [--events N]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench.serving import free_port

TOKEN = "bench-token"


def serve(port: int, http: str, loop: str) -> None:
    """The server process: the ingest app on ``port`` until killed."""
    import uvicorn

    from bench.bench_pipeline import NullAdapter
    from streamrelay.adapters.ingest_http.app import create_app
    from streamrelay.adapters.ingest_http.connections import ConnectionGuard
    from streamrelay.adapters.ingest_http.protocols import uvicorn_options
    from streamrelay.app.connections import connection_limits
    from streamrelay.core.channel import ChannelRuntime
    from streamrelay.core.clock import MonotonicClock
    from streamrelay.core.events import DeliveryMode
    from streamrelay.core.ingest.clients import DEFAULT_CLIENT, ClientLimits
    from streamrelay.core.policy import ChannelPolicy
    from streamrelay.core.records.ledger import MemoryLedger
    from streamrelay.core.run.relay import Relay

    policy = ChannelPolicy(name="c", delivery=DeliveryMode.PREVIEW)
    limits = ClientLimits(events_per_s=1e9, max_events_per_run=10**7, max_chars_per_run=10**8, max_active_runs=10**5)
    relay = Relay(
        {"c": ChannelRuntime(policy, NullAdapter())},
        MemoryLedger(),
        MonotonicClock(),
        clients={DEFAULT_CLIENT: limits},
        max_active_runs=10**5,
    )
    app = create_app(relay, clients=[(limits, TOKEN)])  # no pacing: the benchmark measures the ceiling
    options = uvicorn_options(ConnectionGuard(connection_limits(None)), http)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", **options)
    server = uvicorn.Server(config)
    profile = os.environ.get("BENCH_INGEST_PROFILE")  # a path: the server's cProfile is written there at exit
    profiler = cProfile.Profile() if profile else None
    if profiler is not None:
        signal.signal(signal.SIGTERM, lambda *_: None)  # uvicorn raises it again once stopped: the dump comes first
        profiler.enable()
    if loop == "uvloop":
        import uvloop

        uvloop.run(server.serve())
    else:
        asyncio.run(server.serve())
    if profiler is not None and profile:
        profiler.disable()
        profiler.dump_stats(profile)


async def _request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str, body: bytes) -> bytes:
    """One keep-alive POST, written and read by hand (an HTTP client library would cost more CPU than the server)."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/x-ndjson\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    writer.write(head.encode() + body)
    status = await reader.readuntil(b"\r\n")
    length = 0
    while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    answer = await reader.readexactly(length)
    if b" 200 " not in status:
        raise RuntimeError(f"{status!r}: {answer[:200]!r}")
    return answer


async def client(port: int, runs: int, events: int, batch: int, connections: int) -> float:
    """Post every run's events over ``connections`` connections (each run on one); the wall seconds it took (run
    starts and ends excluded)."""
    streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(connections)]
    start = json.dumps({"kind": "run.start", "channel": "c", "target": {"chat_id": 1}}).encode() + b"\n"
    for r in range(runs):
        await _request(*streams[r % connections], f"/v1/runs/r{r}/events", start)
    body = (json.dumps({"kind": "text", "text": "x"}).encode() + b"\n") * batch
    per_run = events // runs // batch

    async def post(c: int) -> None:
        mine = [r for r in range(runs) if r % connections == c]
        for i in range(per_run * len(mine)):
            await _request(*streams[c], f"/v1/runs/r{mine[i % len(mine)]}/events", body)

    t0 = time.perf_counter()
    await asyncio.gather(*(post(c) for c in range(connections)))
    seconds = time.perf_counter() - t0
    end = json.dumps({"kind": "end"}).encode() + b"\n"
    for r in range(runs):
        await _request(*streams[r % connections], f"/v1/runs/r{r}/events", end)
    for _, writer in streams:
        writer.close()
    return seconds


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", choices=("h11", "httptools"), default="httptools")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--batch", type=int, default=64, help="lines per request (1: one event per request)")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.events < args.runs * args.batch:
        parser.error(
            f"--events must be at least --runs x --batch ({args.runs * args.batch}): each run sends whole batches"
        )
    if args.serve:
        serve(args.serve, args.http, args.loop)
        return
    port = free_port()
    cmd = [sys.executable, __file__, "--serve", str(port), "--http", args.http, "--loop", args.loop]
    server = subprocess.Popen(cmd)
    try:
        for _ in range(100):
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        cpu0 = _cpu_s(server.pid)
        seconds = asyncio.run(client(port, args.runs, args.events, args.batch, args.connections))
        cpu = _cpu_s(server.pid) - cpu0
    finally:
        server.terminate()
        server.wait(10)
    events = args.events // args.runs // args.batch * args.runs * args.batch
    print(
        f"http={args.http} loop={args.loop} batch={args.batch}: {events} events in {seconds:.2f} s = "
        f"{events / seconds:,.0f} events/s; server CPU {cpu / events * 1e6:.1f} µs/event"
    )


if __name__ == "__main__":
    main()
