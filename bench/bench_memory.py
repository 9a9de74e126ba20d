"""Benchmark: the memory an open run and a finished run hold (issue 23, item 5; issue 13, item 3), as RSS and by
allocation site.

A relay as ``serve`` builds it (the SQLite journal and ledger in one file, both metered, the adapter metered and the
service's metrics told of every run's end; no HTTP ingest) with one channel: ``web``
(the live page's delivery: no platform I/O, but the page's messages are kept in the process, the page being the
chat) or ``telegram`` (``preview`` mode against a mock Bot API in a process of its own, budgets lifted, ``throttle_ms``
1 s). Each run is fed the recorded Markdown answer (tests/streams/anthropic/markdown-long-fences.jsonl: 739 text
deltas, 8.5k characters) in batches of ``--batch`` deltas, one batch every ``--pace-ms`` per run (as agents stream:
queues stay short, so the RSS is the runs' own and not the peak of a backlog).

Two measurements, each in a fresh child process (one must not inherit the other's heap):

- ``rss``: the process's RSS (/proc/self/status ``VmRSS``, no tracemalloc) after a warm-up run (the baseline), then
  with ``--runs`` runs open (every delta taken and delivered, no ``end``): per open run; then ``--finished`` runs
  taken to their end ``--group`` at a time: per finished run, counted from the RSS after the first group, so the
  active runs' own peak (whose freed memory stays in the allocator's arenas) is not charged to the finished ones.
  Every RSS is read settled: deliveries done, the service's heap trim done (``--heap-trim-s``, as ``serve`` has it:
  :mod:`adapters.ops.heap`), a garbage collection. Printed beside it, the same figure over the later half of the
  finished runs alone: a true growth per run shows in both, while a one-off high-water (the allocator's heap
  reaching the peak of a group that happened to overlap more, or the machine's load holding more deltas in flight at
  once: 0.3-7 MB once, i.e. 1-25 KB a run over 280 runs) shows in the first only. ``--rounds`` repeats the RSS
  measurement (each in a fresh process); ``--curve`` prints the RSS after the groups. (Measured with 1,500 finished
  runs on web, before the heap trim: the RSS grew 1.0 KB a run from the first group to the last, steadily.)
- ``trace``: tracemalloc snapshots before and after (after a garbage collection): the bytes each open run and each
  finished run holds, with the top allocation sites. The finished runs are counted as the RSS counts them: the
  snapshot before is taken after a first ``--group`` of them, so the containers' growth to hold that many runs at
  once (the event loop's set of tasks, the registry's table) is not charged to the finished ones. (Before, the
  ``--runs`` finished runs streamed all at once from the first snapshot: 0.2-0.4 KB a run of such high-water marks.)

Why metered (since the finished-run work of issue 23): ``serve`` always keeps metrics, and the metered ledger kept
each run's channel after its end (0.1 KB a run, as many as 100,000 runs); a bench without them did not see it.
Each finished run streams to a chat of its own (the worst case: what a chat keeps after its runs, its send chain's
memo and rate budgets, is charged to that run).

With the heap trim (the default, as ``serve``), the open runs' RSS is read trimmed at both ends: the baseline after
the warm-up run's trim and one more, the open runs' RSS right after a trim too (the bench calls it: no run ended, so
the service would not have trimmed yet; in a service where runs end all the time it trims every ``heap_trim_s``).
Counted from a trimmed baseline to an untrimmed reading (the bench before 2026-12-07's mem-tg), the open runs were
charged the holes the trim gave back on one side only: they refilled them (30-40 KB a run more than without the
trim). ``--heap-trim-s 0`` reads both ends untrimmed (the open runs fill the holes the warm-up run left, about
2.5 MB, so the figure is lower than what they hold by up to 25 KB a run).

``--slope N`` adds a third measurement (a fresh child process too): the open runs' RSS in steps, ``--runs`` more runs
opened at once per step, ``N`` steps after the first, each reading trimmed as above; printed per run from the baseline
(the first step is the figure above) and per run of each later step (the marginal cost of one more open run). Why:
the first step's figure holds, beside what the runs keep, the one-off high-water of ``--runs`` runs streaming at once
(transient objects of the calls and chunks in flight leave pymalloc arenas partly used; CPython gives an arena back
only when all of it is free): a later step that streams as many at once reuses that space, so its per-run figure is
what one more open run costs. Both are printed; the goal is read on the first (docs/benchmarks.md).

Printed beside them: the baseline (the bare process's RSS) and the answer's own size (one ``str`` of it), and the
goals (issue 23: at most 64 KB of RSS per open run, at most 4 KB per finished run in memory).

    uv run python bench/bench_memory.py [--platform web telegram] [--runs 100] [--finished 300] [--batch 8]
        [--pace-ms 20] [--top 12] [--heap-trim-s 5] [--rounds 1] [--curve] [--slope 0]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import SecretStr

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.serving import free_port  # noqa: E402
from streamrelay.adapters.ops import ServiceMetrics  # noqa: E402
from streamrelay.adapters.ops.heap import HEAP_TRIM_S, HeapTrim, glibc_trim  # noqa: E402
from streamrelay.adapters.ops.stores import MeteredJournal, MeteredLedger  # noqa: E402
from streamrelay.adapters.sqlite import SqliteJournal, SqliteLedger, SqliteStore  # noqa: E402
from streamrelay.app.client import recorded_events  # noqa: E402
from streamrelay.app.service import make_runtime  # noqa: E402
from streamrelay.config.settings import ChannelSettings  # noqa: E402
from streamrelay.core.clock import MonotonicClock  # noqa: E402
from streamrelay.core.events import ProviderFormat  # noqa: E402
from streamrelay.core.run.relay import Relay  # noqa: E402

RECORDING = ROOT / "tests" / "streams" / "anthropic" / "markdown-long-fences.jsonl"
GOAL_OPEN_KB = 64
GOAL_FINISHED_KB = 4
SETTLE_S = 2.5
"""Seconds given to deliveries after the last delta was taken (the preview's throttle is 1 s)."""
LIFTED = {"per_s": 100_000.0, "burst": 1000}
"""A rate budget that never binds: memory, not the platform's pace, is measured."""


def _events() -> list[dict[str, Any]]:
    events = [e for e in recorded_events(RECORDING, ProviderFormat.ANTHROPIC, "x") if e["kind"] == "text"]
    return [{k: v for k, v in e.items() if k != "run"} for e in events]


def _rss_kb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return float(line.split()[1])
    return float("nan")


class _TimedTrim:
    """glibc's ``malloc_trim(0)`` (:func:`adapters.ops.heap.glibc_trim`), its calls and CPU seconds counted."""

    def __init__(self) -> None:
        self.trim = glibc_trim()
        self.calls = 0
        self.cpu_s = 0.0

    def __call__(self) -> int:
        assert self.trim is not None
        began = time.process_time()
        done = self.trim()
        self.cpu_s += time.process_time() - began
        self.calls += 1
        return done


TRIMS = _TimedTrim()
HEAP: HeapTrim | None = None
"""The relay's heap trim, as ``serve`` builds it (None with ``--heap-trim-s 0`` or without glibc)."""


@contextlib.asynccontextmanager
async def _relay(platform: str, api: str, heap_trim_s: float) -> AsyncIterator[Relay]:
    global HEAP
    if platform == "telegram":
        rate = {name: LIFTED for name in ("per_chat", "per_group", "per_bot")}
        fields = {"platform": "telegram", "api_base": api, "typing": False, "rate": rate}
        token = SecretStr("123456:BENCH-memory-token")
    else:
        fields, token = {"platform": "web"}, SecretStr("")
    settings = ChannelSettings.model_validate({**fields, "throttle_ms": 1000, "format": "plain"})
    with tempfile.TemporaryDirectory() as folder:
        store = await SqliteStore.open(str(Path(folder) / "ledger.sqlite3"))
        metrics = ServiceMetrics()
        ledger = MeteredLedger(await SqliteLedger.on(store), metrics)
        journal = MeteredJournal(await SqliteJournal.on(store), metrics)
        runtime = make_runtime(platform, settings, token, metrics=metrics)
        HEAP = HeapTrim(metrics, interval_s=heap_trim_s, trim=TRIMS) if heap_trim_s > 0 and TRIMS.trim else None
        observer = HEAP if HEAP is not None else metrics
        relay = Relay({platform: runtime}, ledger, MonotonicClock(), journal=journal, observer=observer)
        trimming = asyncio.create_task(HEAP.keep()) if HEAP is not None else None
        try:
            yield relay
        finally:
            if trimming is not None:
                trimming.cancel()
            await relay.close()
            await journal.close()
            await store.close()


PACE_S = 0.02
"""Seconds between a run's batches (``--pace-ms``)."""


async def _feed(relay: Relay, channel: str, run: str, events: list[dict[str, Any]], batch: int, *, end: bool) -> None:
    start = {"kind": "run.start", "run": run, "channel": channel, "target": {"chat_id": abs(hash(run)) % 10**9}}
    await relay.submit_lines([(start, None)])
    for k in range(0, len(events), batch):
        await relay.submit_lines([({**e, "run": run}, None) for e in events[k : k + batch]])
        await asyncio.sleep(PACE_S)
    if end:
        await relay.submit_lines([({"kind": "end", "run": run, "status": "ok"}, None)])
        report = await relay.wait_done(run, 60)
        assert report is not None and report.status == "delivered", report


async def _settle(relay: Relay) -> None:
    while relay.backlog():
        await asyncio.sleep(0.05)
    await asyncio.sleep(SETTLE_S)
    while HEAP is not None and HEAP.ended:  # the service's next trim (within --heap-trim-s)
        await asyncio.sleep(0.05)
    gc.collect()


async def _open_runs(relay: Relay, channel: str, name: str, events: list[dict[str, Any]], args: Any) -> None:
    await asyncio.gather(
        *(_feed(relay, channel, f"{name}-{i}", events, args.batch, end=False) for i in range(args.runs))
    )
    await _settle(relay)


async def _finish(relay: Relay, channel: str, name: str, first: int, count: int, events: list[Any], args: Any) -> None:
    runs = range(first, first + count)
    await asyncio.gather(*(_feed(relay, channel, f"{name}-{i}", events, args.batch, end=True) for i in runs))


async def _measure_rss(args: argparse.Namespace) -> dict[str, Any]:
    events = _events()
    async with _relay(args.platform, args.api, args.heap_trim_s) as relay:
        await _feed(relay, args.platform, "warm", events, args.batch, end=True)  # first-use caches are not a run's
        await _settle(relay)
        base = _trimmed_rss_kb()
        await _open_runs(relay, args.platform, "open", events, args)
        opened = _trimmed_rss_kb()
        group = min(args.group, args.finished)
        await _finish(relay, args.platform, "done", 0, group, events, args)
        await _settle(relay)
        settled = {group: _rss_kb()}  # finished runs -> RSS KB, settled (deliveries done, the service's trim, gc)
        curve = [(group, settled[group])]  # ... and right after each group (gc only): how the RSS went
        half = group * max(1, round(args.finished / group / 2))
        for first in range(group, args.finished, group):
            count = min(group, args.finished - first)
            await _finish(relay, args.platform, "done", first, count, events, args)
            gc.collect()
            curve.append((first + count, _rss_kb()))
            if first + count in (half, args.finished):
                await _settle(relay)
                settled[first + count] = _rss_kb()
    trim_ms = TRIMS.cpu_s / TRIMS.calls * 1000 if TRIMS.calls else float("nan")
    ends = sorted(settled)
    return {
        "base_mb": base / 1024,
        "open_kb": (opened - base) / args.runs,
        "finished_kb": _per_run(settled, ends[0], ends[-1]),
        "later_kb": _per_run(settled, half, ends[-1]) if half in settled and half < ends[-1] else float("nan"),
        "curve": curve,
        "trims": TRIMS.calls,
        "trim_ms": trim_ms,
    }


async def _measure_slope(args: argparse.Namespace) -> dict[str, Any]:
    """The open runs' RSS in steps of ``--runs`` runs opened at once (``--slope`` steps after the first), each read
    settled and trimmed as :func:`_measure_rss` reads it: RSS KB and process file descriptors (sockets: the bot
    session's connections) after each step."""
    events = _events()
    async with _relay(args.platform, args.api, args.heap_trim_s) as relay:
        await _feed(relay, args.platform, "warm", events, args.batch, end=True)
        await _settle(relay)
        steps = [(0, _trimmed_rss_kb(), _sockets())]
        for step in range(args.slope + 1):
            first = step * args.runs
            await asyncio.gather(
                *(
                    _feed(relay, args.platform, f"open-{first + i}", events, args.batch, end=False)
                    for i in range(args.runs)
                )
            )
            await _settle(relay)
            steps.append((first + args.runs, _trimmed_rss_kb(), _sockets()))
    return {"steps": steps}


def _sockets() -> int:
    """The process's open sockets (/proc/self/fd)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
    return count


def _trimmed_rss_kb() -> float:
    """The RSS in KB, read right after a heap trim when the bench trims (``--heap-trim-s`` > 0): the open runs' figure
    is counted from a trimmed heap to a trimmed heap, so it is what the runs hold, not the holes the trim gave back
    on one side only. No trim with ``--heap-trim-s 0`` (both read untrimmed, as before the trim)."""
    if HEAP is not None:
        gc.collect()
        TRIMS()
    return _rss_kb()


def _per_run(settled: dict[int, float], since: int, until: int) -> float:
    """RSS KB per finished run between two settled points (finished-run counts)."""
    return (settled[until] - settled[since]) / max(1, until - since)


async def _measure_trace(args: argparse.Namespace) -> dict[str, Any]:
    events = _events()
    out: dict[str, Any] = {}
    async with _relay(args.platform, args.api, args.heap_trim_s) as relay:
        tracemalloc.start()
        try:
            for name, end in (("open", False), ("finished", True)):
                await _feed(relay, args.platform, f"warm-{name}", events, args.batch, end=True)
                await _settle(relay)
                if end:  # counted from after a first group, as the RSS is
                    await _finish(relay, args.platform, name, 0, args.group, events, args)
                    await _settle(relay)
                before = tracemalloc.take_snapshot()
                if end:
                    for first in range(args.group, args.group + args.runs, args.group):
                        count = min(args.group, args.group + args.runs - first)
                        await _finish(relay, args.platform, name, first, count, events, args)
                else:
                    await _open_runs(relay, args.platform, name, events, args)
                await _settle(relay)
                diff = tracemalloc.take_snapshot().compare_to(before, "lineno")
                sites = []
                for stat in diff[: args.top]:
                    frame = stat.traceback[0]
                    where = frame.filename.replace(str(ROOT) + "/", "")
                    sites.append(
                        (stat.size_diff / args.runs / 1024, stat.count_diff / args.runs, f"{where}:{frame.lineno}")
                    )
                out[name] = {"kb": sum(d.size_diff for d in diff) / args.runs / 1024, "sites": sites}
        finally:
            tracemalloc.stop()
    return out


def _child(measure: str, platform: str, api: str, args: argparse.Namespace) -> Any:
    cmd = [sys.executable, __file__, "--child", measure, "--platform", platform, "--api", api]
    for flag in ("runs", "finished", "group", "batch", "top", "pace_ms", "heap_trim_s", "slope"):
        cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{measure} on {platform} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def _mock_telegram() -> Any:
    port = free_port()
    cmd = [sys.executable, "-m", "streamrelay", "mock", "telegram", "--port", str(port), "--no-rate-limits"]
    mock = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import httpx

        for _ in range(300):
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"http://127.0.0.1:{port}/")
                break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        mock.terminate()
        mock.wait(timeout=10)


def main(args: argparse.Namespace) -> None:
    global PACE_S
    PACE_S = args.pace_ms / 1000
    if args.child:
        run = {"rss": _measure_rss, "trace": _measure_trace, "slope": _measure_slope}[args.child]
        print(json.dumps(asyncio.run(run(args))))
        return
    events = _events()
    answer = "".join(e["text"] for e in events)
    one = sys.getsizeof(answer) / 1024
    rows, traces, slopes = [], [], []
    for platform in args.platform:
        with _mock_telegram() if platform == "telegram" else contextlib.nullcontext("") as api:
            rounds = [_child("rss", platform, api, args) for _ in range(args.rounds)]
            trace = _child("trace", platform, api, args)
            if args.slope:
                slopes.append((platform, _child("slope", platform, api, args)))
        rows += [(platform, rss, trace) for rss in rounds]
        traces.append((platform, trace))
    print(
        f"\nthe answer: {len(answer):,} characters, one str of it {one:.1f} KB"
        f" ({(max(answer) > chr(0xFFFF) and '4 bytes') or 'fewer'} a character); {len(events)} deltas,"
        f" batches of {args.batch} every {args.pace_ms:g} ms; {args.runs} runs open, {args.finished} finished"
        f" ({args.group} at a time); heap trim every {args.heap_trim_s:g} s after runs ended (0: none);"
        f" load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}\n"
    )
    print(
        "| channel | bare process RSS MB | RSS KB per open run | traced KB per open run | RSS KB per finished run |"
        " ... in the later half | traced KB per finished run | heap trims (ms CPU each) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for platform, rss, trace in rows:
        print(
            f"| {platform} | {rss['base_mb']:.0f} | {rss['open_kb']:.1f} | {trace['open']['kb']:.1f} |"
            f" {rss['finished_kb']:.1f} | {rss['later_kb']:.1f} | {trace['finished']['kb']:.1f} |"
            f" {rss['trims']} ({rss['trim_ms']:.2f}) |"
        )
    print(f"| goal | | <= {GOAL_OPEN_KB} | | <= {GOAL_FINISHED_KB} | <= {GOAL_FINISHED_KB} | <= {GOAL_FINISHED_KB} | |")
    for platform, slope in slopes:
        print(f"\n{platform}: open runs in steps of {args.runs} opened at once (RSS read trimmed after each step)")
        print("| open runs | RSS MB | sockets | RSS KB per open run from the baseline | ... of this step alone |")
        print("|---:|---:|---:|---:|---:|")
        steps = slope["steps"]
        base_kb = steps[0][1]
        for (n0, kb0, _), (n, kb, socks) in itertools.pairwise(steps):
            print(f"| {n} | {kb / 1024:.1f} | {socks} | {(kb - base_kb) / n:.1f} | {(kb - kb0) / (n - n0):.1f} |")
    if args.curve:
        for platform, rss, _ in rows:
            points = rss["curve"][:: max(1, len(rss["curve"]) // 8)] + rss["curve"][-1:]
            print(f"\n{platform}: RSS MB after n finished runs (right after each group): ", end="")
            print(", ".join(f"{n}: {kb / 1024:.1f}" for n, kb in points))
    for platform, trace in traces:
        for name in ("open", "finished"):
            print(f"\n{platform}, per {name} run: {trace[name]['kb']:.1f} KB traced; top allocation sites:")
            print("| KB per run | objects per run | allocated at |\n|---:|---:|---|")
            for kb, count, where in trace[name]["sites"]:
                print(f"| {kb:.1f} | {count:.0f} | {where} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--platform", nargs="+", default=["web", "telegram"], choices=["web", "telegram"])
    parser.add_argument("--runs", type=int, default=100, help="runs open at once")
    parser.add_argument("--finished", type=int, default=300, help="runs taken to their end for the RSS figure")
    parser.add_argument("--group", type=int, default=20, help="finished runs streaming at once")
    parser.add_argument("--batch", type=int, default=8, help="deltas per submitted batch")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--pace-ms", type=float, default=20.0, help="a run's pause between batches")
    parser.add_argument(
        "--heap-trim-s", type=float, default=HEAP_TRIM_S, help="[service] heap_trim_s as serve has it (0: no trims)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="RSS measurements per platform (each a fresh process)")
    parser.add_argument("--curve", action="store_true", help="print the RSS after the finished groups")
    parser.add_argument(
        "--slope", type=int, default=0, help="also open --runs more runs this many times: RSS per run of each step"
    )
    parser.add_argument("--child", choices=["rss", "trace", "slope"], help=argparse.SUPPRESS)
    parser.add_argument("--api", default="", help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.child:
        parsed.platform = parsed.platform[0]
    main(parsed)
