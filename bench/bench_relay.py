"""Benchmark: the whole run per event through the relay (validate → journal → worker → stage → planner → send
chain → adapter), in memory, without tracemalloc.

Inputs: the recorded 8.5k Markdown answer x10 (85k characters) re-cut to 1-character ``text`` deltas (δ=1, 85k
events), and the recorded Anthropic stream itself (``format = "anthropic"``, 748 raw provider lines x10 runs in
turn: the normalizer's path). Two ways to feed each:

- ``batched``: lines handed to :meth:`core.run.relay.Relay.submit_lines` 256 at a time (as an NDJSON body is), the
  worker taking what has queued;
- ``one``: one :meth:`~core.run.relay.Relay.submit_line` per event, and the loop run until the worker waits again (as
  events arriving one request at a time are taken: one wake-up per event).

Prints CPU µs per event (process time: the machine may be shared; median of ``--repeat`` runs) and, with
``--profile``, the top of a cProfile of one run.

    uv run python bench/bench_relay.py [--repeat 3] [--profile batched|one] [--copies 10]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_pipeline import RECORDING, NullAdapter, recorded_deltas
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import DeliveryMode
from streamrelay.core.ingest.clients import DEFAULT_CLIENT, ClientLimits
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay

BATCH = 256


def delta_lines(copies: int) -> list[list[dict[str, Any]]]:
    """One run: run.start, one ``text`` line per character of the answer x ``copies``, end."""
    text = "".join(recorded_deltas()) * copies
    start = {"kind": "run.start", "channel": "c", "target": {"chat_id": 1}}
    return [[start, *({"kind": "text", "text": ch} for ch in text), {"kind": "end"}]]


def recorded_lines(copies: int) -> list[list[dict[str, Any]]]:
    """``copies`` runs in turn, each the recorded Anthropic stream as raw provider lines."""
    raw = [json.loads(line) for line in RECORDING.read_text().splitlines()]
    start = {"kind": "run.start", "channel": "c", "target": {"chat_id": 1}, "format": "anthropic"}
    return [[start, *raw, {"kind": "end"}] for _ in range(copies)]


def make_relay() -> tuple[Relay, NullAdapter]:
    adapter = NullAdapter()
    policy = ChannelPolicy(name="c", delivery=DeliveryMode.PREVIEW, throttle_s=0.05)
    limits = ClientLimits(events_per_s=1e9, max_events_per_run=10**7, max_chars_per_run=10**8)
    relay = Relay(
        {"c": ChannelRuntime(policy, adapter)}, MemoryLedger(), MonotonicClock(), clients={DEFAULT_CLIENT: limits}
    )
    return relay, adapter


async def feed_batched(relay: Relay, run: str, lines: list[tuple[dict[str, Any], str]]) -> None:
    for i in range(0, len(lines), BATCH):
        results = await relay.submit_lines(lines[i : i + BATCH], run)
        bad = [r for r in results if isinstance(r, Exception)]
        assert not bad, bad[:3]


async def feed_one(relay: Relay, run: str, lines: list[tuple[dict[str, Any], str]]) -> None:
    for line in lines:
        await relay.submit_lines([line], run)
        active = relay._runs.get(run)
        # Let the worker take it (and go back to waiting) before the next line arrives.
        while active is not None and not active.queue.empty():
            await asyncio.sleep(0)
        await asyncio.sleep(0)


async def run_all(inputs: list[list[dict[str, Any]]], how: str) -> tuple[float, int, int]:
    runs = [[(obj, json.dumps(obj)) for obj in lines] for lines in inputs]  # the lines' texts, as a body has them
    # The inputs (85k lines held at once, which no sidecar holds: lines arrive and go) are moved out of the
    # collector's view, as `serve` freezes what it built at start-up: else each full collection scans them.
    gc.collect()
    gc.freeze()
    relay, adapter = make_relay()
    feed = feed_batched if how == "batched" else feed_one
    events = sum(len(lines) for lines in runs)
    t0 = time.process_time()  # CPU time: the machine is shared, and the runs' throttle waits are not work
    for n, lines in enumerate(runs):
        run = f"r{n}"
        await feed(relay, run, lines)
        report = await relay.wait_done(run, 600)
        assert report is not None and report.done and str(report.status) == "delivered", report
    seconds = time.process_time() - t0
    await relay.close()
    gc.unfreeze()
    return seconds, events, adapter.calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--profile", choices=("batched", "one"))
    parser.add_argument("--input", choices=("delta1", "recorded"), default="delta1")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop", help="the service runs on uvloop")
    args = parser.parse_args()
    if args.loop == "uvloop":
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    inputs = {"delta1": delta_lines(args.copies), "recorded": recorded_lines(args.copies)}
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        asyncio.run(run_all(inputs[args.input], args.profile))
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
        return
    print(f"{'input':10} {'feed':8} {'events':>8} {'CPU µs/event':>12} {'calls':>6}")
    for name, runs in inputs.items():
        for how in ("batched", "one"):
            times = []
            for _ in range(args.repeat):
                seconds, events, calls = asyncio.run(run_all(runs, how))
                times.append(seconds / events * 1e6)
            print(f"{name:10} {how:8} {events:>8} {statistics.median(times):>12.1f} {calls:>6}")


if __name__ == "__main__":
    main()
