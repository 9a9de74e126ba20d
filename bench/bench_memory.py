"""Benchmark: what holds memory per active run and per finished run (issue 13, item 3), by allocation site.

A relay as ``serve`` builds it (the SQLite journal and ledger in one file) with a ``web`` channel (no platform I/O,
the live page's delivery), ``--runs`` runs each fed the recorded Markdown answer
(tests/streams/anthropic/markdown-long-fences.jsonl: 739 text deltas, 8.5k characters) in batches of ``--batch``
deltas; a tracemalloc snapshot before and after (after a garbage collection) gives the bytes each run holds while
active (no ``end`` yet) and once finished (``end`` taken, the run done), grouped by the line that allocated them.
Ingest's HTTP side (uvicorn, one connection per agent) is not in it: bench/bench_load.py's RSS figures hold that too.

    uv run python bench/bench_memory.py [--runs 30] [--batch 8] [--top 15]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

from pydantic import SecretStr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.sqlite import SqliteJournal, SqliteLedger, SqliteStore  # noqa: E402
from app.client import recorded_events  # noqa: E402
from app.service import make_runtime  # noqa: E402
from config.settings import ChannelSettings  # noqa: E402
from core.clock import MonotonicClock  # noqa: E402
from core.events import ProviderFormat  # noqa: E402
from core.run.relay import Relay  # noqa: E402

RECORDING = ROOT / "tests" / "streams" / "anthropic" / "markdown-long-fences.jsonl"
GOAL_KB = 64


async def _feed(relay: Relay, run: str, events: list[dict[str, Any]], batch: int, *, end: bool) -> None:
    await relay.submit_lines([({"kind": "run.start", "run": run, "channel": "web", "target": {"chat_id": run}}, None)])
    for k in range(0, len(events), batch):
        await relay.submit_lines([({**e, "run": run}, None) for e in events[k : k + batch]])
        await asyncio.sleep(0.001)
    if end:
        await relay.submit_lines([({"kind": "end", "run": run, "status": "ok"}, None)])
        await relay.wait_done(run, 30)


async def _measure(relay: Relay, events: list[dict[str, Any]], args: argparse.Namespace, *, end: bool) -> None:
    name = "finished" if end else "active"
    await _feed(relay, f"warm-{name}", events, args.batch, end=True)  # first-use caches are not a run's
    await asyncio.sleep(0.5)
    gc.collect()
    before = tracemalloc.take_snapshot()
    await asyncio.gather(*(_feed(relay, f"{name}-{i}", events, args.batch, end=end) for i in range(args.runs)))
    await asyncio.sleep(2.0)  # the workers catch up
    gc.collect()
    after = tracemalloc.take_snapshot()
    diff = after.compare_to(before, "lineno")
    total = sum(d.size_diff for d in diff) / args.runs / 1024
    print(f"\nper {name} run: {total:.1f} KB (goal <= {GOAL_KB} KB per active run), top allocation sites:")
    print("| KB per run | objects per run | allocated at |\n|---:|---:|---|")
    for stat in diff[: args.top]:
        frame = stat.traceback[0]
        where = frame.filename.replace(str(ROOT) + "/", "")
        print(
            f"| {stat.size_diff / args.runs / 1024:.1f} | {stat.count_diff / args.runs:.0f} | {where}:{frame.lineno} |"
        )


async def main(args: argparse.Namespace) -> None:
    events = [e for e in recorded_events(RECORDING, ProviderFormat.ANTHROPIC, "x") if e["kind"] == "text"]
    events = [{k: v for k, v in e.items() if k != "run"} for e in events]
    settings = ChannelSettings.model_validate({"platform": "web", "throttle_ms": 1000})
    with tempfile.TemporaryDirectory() as folder:
        store = await SqliteStore.open(str(Path(folder) / "ledger.sqlite3"))
        ledger, journal = await SqliteLedger.on(store), await SqliteJournal.on(store)
        relay = Relay({"web": make_runtime("web", settings, SecretStr(""))}, ledger, MonotonicClock(), journal=journal)
        tracemalloc.start()
        try:
            await _measure(relay, events, args, end=False)
            await _measure(relay, events, args, end=True)
        finally:
            tracemalloc.stop()
            await relay.close()
            await journal.close()
            await store.close()
    print(f"\n{args.runs} runs of {len(events)} deltas ({sum(len(e['text']) for e in events):,} characters) each")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--batch", type=int, default=8, help="deltas per submitted batch")
    parser.add_argument("--top", type=int, default=15)
    asyncio.run(main(parser.parse_args()))
