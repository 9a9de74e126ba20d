"""Benchmark: how many events one sidecar process takes over HTTP, and its CPU per event.

A server process runs the ingest app (adapters/ingest_http/app.py) on a relay with an in-memory journal and ledger
and a platform that answers at once, under uvicorn as ``serve`` runs it: the connection guard of
``[service.connections]`` on uvicorn's httptools protocol (``--http httptools``, serve's default) or its h11
protocol (``--http h11``), on uvloop or asyncio's loop, what start-up built frozen out of the garbage collector's
scans as ``serve`` does (``gc.freeze``). A client (raw keep-alive HTTP/1.1 on
asyncio streams, cheaper than a client library) posts, over ``--connections`` connections, each run's
1-character ``text`` deltas either as NDJSON bodies of ``--batch`` lines or one event per request (``--batch 1``).
Prints events per second (wall) and the server's CPU µs per event (its own process time: the machine is shared),
with the machine's load average (1, 5, 15 min) at the end of each measurement beside it.

``--text recorded`` sends the recorded Markdown answer instead (tests/streams/anthropic/markdown-long-fences.jsonl:
its 739 text deltas as normalized events, each with its ``seq``), every run the whole answer then ``end``: the shape
of issue 24's end-to-end figure (``--runs 100 --batch 20``). ``--compare`` measures several servers in the same
sitting, interleaved over ``--rounds`` rounds, and prints each one's median CPU per event and its ratio to the null
sidecar's: ``null`` (uvicorn + Starlette on the same loop and HTTP protocol, ``json.loads`` of every line, nothing
else: the cost of the parts), ``sidecar`` (this tree) and any other checkout given by its path (e.g. a worktree of
main, whose ``streamrelay`` package the server then imports; the client is this script's).

    uv run python bench/bench_ingest.py [--http h11|httptools] [--loop uvloop|asyncio] [--batch 1|64] [--events N]
    uv run python bench/bench_ingest.py --text recorded --runs 100 --batch 20 --compare null sidecar ../base --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench.serving import free_port

TOKEN = "bench-token"


RECORDING = Path(__file__).resolve().parent.parent / "tests/streams/anthropic/markdown-long-fences.jsonl"


def load() -> str:
    """The machine's load average (1, 5, 15 minutes), as printed beside every figure (the cores are shared)."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def null_app() -> Any:
    """The null sidecar: Starlette, the same route, the body read as it arrives, ``json.loads`` of every line,
    ``{"accepted": n}``; nothing else (no auth, no admission, no journal, no delivery)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def events(request: Request) -> JSONResponse:
        accepted = 0
        buffer = b""
        async for piece in request.stream():
            *lines, buffer = (buffer + piece).split(b"\n")
            for line in lines:
                if line.strip():
                    json.loads(line)
                    accepted += 1
        if buffer.strip():
            json.loads(buffer)
            accepted += 1
        return JSONResponse({"accepted": accepted})

    return Starlette(routes=[Route("/v1/runs/{run}/events", events, methods=["POST"])])


def _freeze() -> None:
    """What start-up built kept out of every later collection's scan, as ``serve`` does once its channels are loaded
    (``app/serving.py``: ``gc.collect()`` then ``gc.freeze()``); the null sidecar's too, alike."""
    gc.collect()
    gc.freeze()


def serve(port: int, http: str, loop: str, null: bool = False) -> None:
    """The server process: the ingest app (or with ``null`` the null sidecar) on ``port`` until killed."""
    import uvicorn

    if null:
        config = uvicorn.Config(null_app(), host="127.0.0.1", port=port, log_level="warning", lifespan="off", http=http)
        server = uvicorn.Server(config)
        _freeze()
        if loop == "uvloop":
            import uvloop

            uvloop.run(server.serve())
        else:
            asyncio.run(server.serve())
        return

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
    _freeze()
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


def recorded_bodies(batch: int) -> list[bytes]:
    """The recorded answer's text deltas as normalized event lines (``seq`` from 1; ``run`` left to the URL), in
    bodies of ``batch`` lines, then ``end`` in a body of its own."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from streamrelay.app.client import recorded_events
    from streamrelay.core.events import ProviderFormat

    texts = [e for e in recorded_events(RECORDING, ProviderFormat.ANTHROPIC, "x") if e["kind"] == "text"]
    lines = []
    for seq, event in enumerate(texts, start=1):
        event = {k: v for k, v in event.items() if k != "run"}
        lines.append(json.dumps({**event, "seq": seq}, ensure_ascii=False).encode() + b"\n")
    end = json.dumps({"kind": "end", "status": "ok", "seq": len(lines) + 1}).encode() + b"\n"
    return [b"".join(lines[i : i + batch]) for i in range(0, len(lines), batch)] + [end]


async def recorded_client(port: int, runs: int, batch: int, connections: int, run_tag: str) -> tuple[float, int]:
    """Every run streams the recorded answer (:func:`recorded_bodies`) over ``connections`` connections, runs
    interleaved; the wall seconds it took (run starts included) and the events sent (``end`` included)."""
    bodies = recorded_bodies(batch)
    streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(connections)]
    start = json.dumps({"kind": "run.start", "channel": "c", "target": {"chat_id": 1}}).encode() + b"\n"
    t0 = time.perf_counter()

    async def post(c: int) -> None:
        mine = [r for r in range(runs) if r % connections == c]
        for r in mine:
            await _request(*streams[c], f"/v1/runs/{run_tag}{r}/events", start)
        for body in bodies:
            for r in mine:
                await _request(*streams[c], f"/v1/runs/{run_tag}{r}/events", body)

    await asyncio.gather(*(post(c) for c in range(connections)))
    seconds = time.perf_counter() - t0
    for _, writer in streams:
        writer.close()
    return seconds, runs * (1 + sum(body.count(b"\n") for body in bodies))


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


def _settled_cpu_s(pid: int) -> float:
    """The process's CPU seconds once it is idle (the runs' workers may still deliver what was taken): sampled every
    0.2 s until it used under 2% of a core in one interval (at most 30 s)."""
    before = _cpu_s(pid)
    for _ in range(150):
        time.sleep(0.2)
        now = _cpu_s(pid)
        if now - before < 0.004:
            return now
        before = now
    return before


def measure(args: argparse.Namespace, server_kind: str, run_tag: str = "r") -> tuple[int, float, float]:
    """One server (``null``, ``sidecar``, or a checkout's path) started, loaded and stopped: ``(events, wall seconds,
    server CPU seconds)``."""
    port = free_port()
    cmd = [sys.executable, __file__, "--serve", str(port), "--http", args.http, "--loop", args.loop]
    env = dict(os.environ)
    if server_kind == "null":
        cmd.append("--null")
    elif server_kind != "sidecar":
        env["BENCH_INGEST_TREE"] = str(Path(server_kind).resolve())
    server = subprocess.Popen(cmd, env=env)
    try:
        for _ in range(600):  # up to 60 s: imports are slow on a loaded machine
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if server.poll() is not None:
                raise RuntimeError(f"the {server_kind} server ended with {server.returncode}")
            time.sleep(0.1)
        cpu0 = _cpu_s(server.pid)
        if args.text == "recorded":
            seconds, events = asyncio.run(recorded_client(port, args.runs, args.batch, args.connections, run_tag))
        else:
            seconds = asyncio.run(client(port, args.runs, args.events, args.batch, args.connections))
            events = args.events // args.runs // args.batch * args.runs * args.batch
        cpu = _settled_cpu_s(server.pid) - cpu0
    finally:
        server.terminate()
        server.wait(10)
    return events, seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", choices=("h11", "httptools"), default="httptools")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--batch", type=int, default=64, help="lines per request (1: one event per request)")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument("--text", choices=("x", "recorded"), default="x", help="1-character deltas, or the answer")
    parser.add_argument("--compare", nargs="+", help="servers to measure in turn: null, sidecar, a checkout's path")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --compare (medians printed)")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--null", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.text == "x" and args.events < args.runs * args.batch:
        parser.error(
            f"--events must be at least --runs x --batch ({args.runs * args.batch}): each run sends whole batches"
        )
    if args.serve:
        tree = os.environ.get("BENCH_INGEST_TREE")
        if tree:  # another checkout's streamrelay (a baseline): imported before this tree's
            sys.path.insert(0, tree)
        serve(args.serve, args.http, args.loop, null=args.null)
        return
    shape = f"http={args.http} loop={args.loop} text={args.text} runs={args.runs} batch={args.batch}"
    if not args.compare:
        events, seconds, cpu = measure(args, "sidecar")
        print(
            f"{shape}: {events} events in {seconds:.2f} s = {events / seconds:,.0f} events/s; "
            f"server CPU {cpu / events * 1e6:.1f} µs/event; {load()}"
        )
        return
    figures: dict[str, list[float]] = {name: [] for name in args.compare}
    print(shape)
    for round_no in range(args.rounds):
        for name in args.compare:
            events, seconds, cpu = measure(args, name, run_tag=f"r{round_no}-")
            figures[name].append(cpu / events * 1e6)
            print(
                f"  round {round_no + 1} {Path(name).name:>16}: {events} events in {seconds:.2f} s, "
                f"server CPU {cpu / events * 1e6:6.1f} µs/event; {load()}"
            )
    null = statistics.median(figures["null"]) if "null" in figures else None
    print(f"medians over {args.rounds} rounds ({load()}):")
    for name, values in figures.items():
        ratio = f"  x{statistics.median(values) / null:.2f} the null sidecar" if null else ""
        print(f"  {Path(name).name:>16}: {statistics.median(values):6.1f} µs/event{ratio}")
    if null:
        print("  goal (issue 24): end to end <= x2.5 the null sidecar's CPU per event")


if __name__ == "__main__":
    main()
