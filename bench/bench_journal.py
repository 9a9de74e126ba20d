"""Benchmark: what the journal costs at ingest (every accepted line durable before it counts).

R runs stream L text deltas each into one relay, in batches of B lines (the lines an HTTP request read at once),
all runs concurrently; the adapter answers instantly, so the time is ingest + journal + delivery core. Variants:

- ``memory``: the in-memory journal (the baseline: nothing durable);
- ``sqlite``: the SQLite journal, group commit (``synchronous=FULL``: an fsync per commit);
- ``sqlite, batch 1``: the same with one line per batch (what a client that sends line by line costs).

Prints lines/s, commits, and the p50 / p99 time for a batch to be accepted.

    uv run python bench/bench_journal.py [--runs 100] [--lines 400] [--batch 8]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_pipeline import NullAdapter
from streamrelay.adapters.sqlite import SqliteJournal, SqliteLedger, SqliteStore
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.journal import Journal, MemoryJournal
from streamrelay.core.records.ledger import Ledger, MemoryLedger
from streamrelay.core.run.relay import Relay


async def _run_one(relay: Relay, run: str, lines: int, batch: int, waits: list[float]) -> None:
    start: dict[str, Any] = {"kind": "run.start", "channel": "c", "target": {"chat_id": hash(run) % 10_000}}
    body: list[tuple[Any, str | None]] = [(start, None)]
    body += [({"kind": "text", "text": f"word {i} ", "seq": i + 1}, None) for i in range(lines)]
    body.append(({"kind": "end", "seq": lines + 1}, None))
    for i in range(0, len(body), batch):
        t0 = time.perf_counter()
        await relay.submit_lines(body[i : i + batch], run)
        waits.append(time.perf_counter() - t0)
        await asyncio.sleep(0)


async def _variant(name: str, runs: int, lines: int, batch: int, journal: Journal, ledger: Ledger) -> list[str]:
    policy = ChannelPolicy(name="c", throttle_s=0.05)
    relay = Relay({"c": ChannelRuntime(policy, NullAdapter())}, ledger, MonotonicClock(), journal=journal)
    waits: list[float] = []
    t0 = time.perf_counter()
    await asyncio.gather(*(_run_one(relay, f"{name}-{r}", lines, batch, waits) for r in range(runs)))
    accepted_s = time.perf_counter() - t0
    for r in range(runs):
        await relay.wait_done(f"{name}-{r}", 120)
    await relay.close()
    total = runs * (lines + 2)
    store = getattr(journal, "_store", None)
    commits = store.commits if store is not None else getattr(journal, "commits", 0)
    p50, p99 = statistics.median(waits), sorted(waits)[int(len(waits) * 0.99)]
    return [name, f"{total / accepted_s:,.0f}", str(commits), f"{p50 * 1000:.2f}", f"{p99 * 1000:.2f}"]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--lines", type=int, default=400)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    rows = [await _variant("memory", args.runs, args.lines, args.batch, MemoryJournal(), MemoryLedger())]
    for name, batch in (("sqlite", args.batch), ("sqlite, batch 1", 1)):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bench.sqlite3"
            store = await SqliteStore.open(path)
            journal, ledger = await SqliteJournal.on(store), await SqliteLedger.on(store)
            try:
                rows.append(await _variant(name, args.runs, args.lines, batch, journal, ledger))
            finally:
                await journal.close()
                await store.close()
    print(f"{args.runs} runs x {args.lines} deltas, batches of {args.batch} lines")
    header = ["journal", "lines/s", "commits", "accept p50 ms", "accept p99 ms"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    asyncio.run(main())
