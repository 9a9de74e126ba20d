"""Benchmark: N concurrent runs streaming through HTTP into one sidecar process (issue 13, item 4's load benchmark).

A ``streamrelay serve`` process (SQLite journal and ledger, one Telegram channel in ``preview``, plain text) delivers
to a mock Telegram Bot API running in a process of its own. Each of ``--runs`` agents streams the recorded Markdown
answer (tests/streams/anthropic/markdown-long-fences.jsonl: 739 text deltas, 8.5k characters) into its own chat as
one chunked NDJSON request (the README's live-run shape), a delta every 20-50 ms, then ``end``; an agent that is
behind writes what is due as one chunk. A request the sidecar pushes back (503, ``pushed_back_from``) is sent again
from that line after ``Retry-After``.

Two budget settings: ``off`` (the mock answers every call; the sidecar's budgets are lifted, only the preview's
``throttle_ms`` = 1 s paces a chat) and ``on`` (the documented limits: the mock answers 429 past them and the sidecar
keeps its config/channels.toml budgets: 1/s per chat, 25/s per bot).

Printed per scenario: the sidecar's CPU while the agents stream (its process time over that wall time, in cores),
its RSS and RSS growth per active run, events taken per second, p50 / p99 event-to-call latency beyond the rate-
budget wait (for each call: its arrival at the mock minus the later of the production time of the oldest delta it
newly shows and the earliest moment the chat's throttle allowed it, i.e. the previous call plus ``throttle_ms``, or
the run's ``end`` if sooner: a final is not throttled; with ``on`` the bot budget's own wait is inside the figure),
429s, calls per second while text flowed against the binding budget (``on``), the calls in the first 2 s after runs
began to end (previews of runs still streaming : calls of runs whose ``end`` was due, i.e. finals first),
pushed-back requests, and whether every chat ended showing the whole answer exactly once (whitespace-insensitive).
Latency runs from when the agent wrote the line (``Agent.sent``); how late the agents wrote their lines against their
schedule (p99; a pushed-back line's wait counts) is printed beside it: when the load generator falls behind, the
sidecar is not blamed, and the column says the offered load was lower than asked.
The issue's goals are printed beside the figures. Shared cores make it noisy: run it once or twice and read medians.

    uv run python bench/bench_load.py --runs 100 1000 [--limits off on] [--runs-on 200] [--events 739] [--pin]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import pickle
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from load_agents import TOKEN, Agent, agent_run, make_agents, nonspace  # noqa: E402

from bench.serving import free_port, serve  # noqa: E402
from streamrelay.app.client import recorded_events  # noqa: E402
from streamrelay.core.events import ProviderFormat  # noqa: E402
from streamrelay.mocks.telegram import MockTelegram  # noqa: E402

BOT = "123456:BENCH-load-token"
RECORDING = ROOT / "tests" / "streams" / "anthropic" / "markdown-long-fences.jsonl"
THROTTLE_S = 1.0
BOT_BUDGET_PER_S = 25.0
TICK = os.sysconf("SC_CLK_TCK")
SIDECAR_CPU = 0
"""The CPU ``--pin`` gives the sidecar."""
GOALS = (
    "goals: 1,000 runs in one process, p99 event-to-call <= 50 ms beyond the budget wait, <= 64 KB per run, "
    "past capacity slower but nothing lost; >= 90% of the binding budget used while text flows, 0 x 429"
)


def _mock_child(port: int, conn: Connection) -> None:
    """Serve a mock Telegram on ``port``; answer ``conn``'s commands: ("limits", bool), ("calls",), ("stop",)."""

    async def main() -> None:
        mock = MockTelegram(rate_limits=False)
        await mock.start(port=port)
        stop = asyncio.Event()

        def command() -> None:
            what = conn.recv()
            if what[0] == "limits":
                mock.reset()
                mock.rate_limits = bool(what[1])
                conn.send("ok")
            elif what[0] == "calls":
                conn.send([(c.method, c.chat_id, c.message_id, c.text, c.t, c.status) for c in mock.calls])
            else:
                stop.set()

        asyncio.get_running_loop().add_reader(conn.fileno(), command)
        await stop.wait()
        await mock.stop()

    asyncio.run(main())


def _config(folder: Path, api: str, limits: bool, overload_lag_ms: float, overload_backlog: int) -> Path:
    lifted = (
        ""
        if limits
        else """
[channels.telegram.rate.per_chat]
per_s = 1000.0
burst = 1000
[channels.telegram.rate.per_group]
per_min = 60000
burst = 1000
[channels.telegram.rate.per_bot]
per_s = 100000.0
burst = 1000
"""
    )
    text = f"""
[service]
ledger = "{folder / "ledger.sqlite3"}"
actions = ""
log_level = "warning"
drain_s = 0
connections = {{ max_connections = 8192, max_connections_per_peer = 8192 }}
overload_lag_ms = {overload_lag_ms:g}
overload_backlog_events = {overload_backlog}

[channels.telegram]
platform = "telegram"
token_env = "BENCH_BOT_TOKEN"
api_base = "{api}"
delivery = "preview"
format = "plain"
typing = false
throttle_ms = {int(THROTTLE_S * 1000)}
{lifted}
[clients.bench]
token_env = "BENCH_INGEST_TOKEN"
max_active_runs = 100000
max_runs_per_request = 1000
events_per_s = 1000000
"""
    path = folder / "channels.toml"
    path.write_text(text)
    return path


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


Call = tuple[str, Any, Any, str | None, float, int | None]


@dataclass
class Judged:
    extra_s: list[float] = field(default_factory=list)
    whole: int = 0
    rate_limited: int = 0


def _prefix(shown: str, answer: str) -> int:
    """How many characters of ``answer`` the chat shows in order from its start (a fence closed and reopened at a
    cut adds markers the answer does not have: the shown prefix ends there until the answer passes them)."""
    low, high = 0, min(len(shown), len(answer))
    while low < high:  # the longest common prefix, by halves (slices compare in C)
        mid = (low + high + 1) // 2
        if shown[:mid] == answer[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _judge_chat(agent: Agent, calls: list[Call], answer: str, judged: Judged) -> None:
    """One chat's calls: each call's latency beyond the throttle, and whether the chat shows the answer once."""
    messages: dict[int, str] = {}
    shown, prev_t = 0, None
    for method, _chat, message_id, text, t, status in calls:
        if status == 429:
            judged.rate_limited += 1
        if status != 200 or method not in ("sendMessage", "editMessageText") or text is None:
            continue
        messages[int(message_id)] = text
        now_shown = _prefix(nonspace("".join(messages[k] for k in sorted(messages))), answer)
        if now_shown > shown:
            oldest = next((i for i, s in enumerate(agent.shown_after) if s > shown), len(agent.sent) - 1)
            # the chat's throttle holds a preview until prev_t + THROTTLE_S; the run's end lifts it (a final is not
            # throttled): text sent before the end may wait for the earlier of the two
            allowed = min(prev_t + THROTTLE_S, agent.sent[-1]) if prev_t is not None else agent.sent[oldest]
            earliest = max(agent.sent[oldest], allowed)
            judged.extra_s.append(max(0.0, t - earliest))
        shown, prev_t = now_shown, t
    if nonspace("".join(messages[k] for k in sorted(messages))) == answer:
        judged.whole += 1


def _judge(agents: list[Agent], calls: list[Call], answer: str) -> Judged:
    by_chat: dict[str, list[Call]] = {}
    for call in calls:
        by_chat.setdefault(str(call[1]), []).append(call)
    judged = Judged()
    for agent in agents:
        _judge_chat(agent, sorted(by_chat.get(str(agent.chat), []), key=lambda c: c[4]), answer, judged)
    return judged


def _first_seconds_after_ends(agents: list[Agent], calls: list[Call], window_s: float = 2.0) -> tuple[int, int]:
    """Calls in the first ``window_s`` after the first run's ``end`` was due: (previews of runs still streaming,
    calls of runs whose ``end`` was due: their finalization)."""
    end_due = {str(a.chat): a.due[-1] for a in agents}
    first = min(end_due.values())
    previews = finals = 0
    for _method, chat, _mid, _text, t, status in calls:
        if status == 200 and first <= t <= first + window_s:
            if t >= end_due.get(str(chat), float("inf")):
                finals += 1
            else:
                previews += 1
    return previews, finals


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _sample_rss(pid: int, peak: list[int], stop: asyncio.Event, timeline: list[tuple[float, float, int]]) -> None:
    """Keep the peak RSS in ``peak[0]``; append (monotonic s, CPU s, RSS bytes) to ``timeline`` every 0.25 s."""
    while not stop.is_set():
        with contextlib.suppress(OSError):
            rss = _rss_bytes(pid)
            peak[0] = max(peak[0], rss)
            timeline.append((time.monotonic(), _cpu_s(pid), rss))
        await asyncio.sleep(0.25)


async def _scenario(
    runs: int,
    limits: bool,
    events: list[dict[str, Any]],
    mock: Connection,
    api: str,
    overload_lag_ms: float,
    overload_backlog: int,
    pin: bool = False,
) -> dict[str, Any]:
    mock.send(("limits", limits))
    mock.recv()
    answer = nonspace("".join(e["text"] for e in events))
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        config = _config(Path(folder), api, limits, overload_lag_ms, overload_backlog)
        env = {**os.environ, "BENCH_BOT_TOKEN": BOT, "BENCH_INGEST_TOKEN": TOKEN}
        taskset = ["taskset", "-c", str(SIDECAR_CPU)] if pin else []
        proc = await serve([*taskset, sys.executable, "-m", "streamrelay", "serve"], config, port, env)
        try:
            await asyncio.sleep(1.0)
            base_rss = _rss_bytes(proc.pid)
            agents = make_agents(runs, events, 100_000)
            peak, stop = [base_rss], asyncio.Event()
            timeline: list[tuple[float, float, int]] = []
            sampler = asyncio.create_task(_sample_rss(proc.pid, peak, stop, timeline))
            if os.environ.get("BENCH_LOAD_PYSPY"):  # a profile of the sidecar while the runs stream (py-spy installed)
                at_s, for_s = os.environ.get("BENCH_LOAD_PYSPY_AT", "2.5"), os.environ.get("BENCH_LOAD_PYSPY_S", "8")
                spy = ["py-spy", "record", "-p", str(proc.pid), "-d", for_s, "-r", "50", "--idle", "--format", "raw"]
                cmd = [*spy, "--nonblocking", "-o", os.environ["BENCH_LOAD_PYSPY"]]
                popen = lambda: subprocess.Popen(cmd, stdout=subprocess.DEVNULL)  # noqa: E731
                asyncio.get_running_loop().call_later(float(at_s), popen)
            await asyncio.gather(*(agent_run(a, port) for a in agents))
            posted = time.monotonic()
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=900) as http:
                headers = {"Authorization": f"Bearer {TOKEN}"}
                reports = await asyncio.gather(
                    *(http.get(f"/v1/runs/{a.run}", params={"wait_s": 600}, headers=headers) for a in agents)
                )
            stop.set()
            await sampler
            end_rss = _rss_bytes(proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    mock.send(("calls",))
    calls: list[Call] = mock.recv()
    if os.environ.get("BENCH_LOAD_DUMP"):  # for a closer look: every call and every agent's due times
        with open(os.environ["BENCH_LOAD_DUMP"], "wb") as dump:
            due, sent = [a.due for a in agents], [a.sent for a in agents]
            pickle.dump(
                {"calls": calls, "due": due, "sent": sent, "chats": [a.chat for a in agents], "timeline": timeline},
                dump,
            )
    judged = _judge(agents, calls, answer)
    flowing = (min(a.due[0] for a in agents), max(a.due[-2] for a in agents))
    in_window = sum(1 for c in calls if flowing[0] <= c[4] <= flowing[1] and c[5] == 200)
    statuses = [r.json().get("status") if r.status_code == 200 else str(r.status_code) for r in reports]
    return {
        "runs": runs,
        "limits": "on" if limits else "off",
        "cpu": _busy(timeline, flowing[0], posted),
        "rss_mb": peak[0] / 2**20,
        "kb_active": (peak[0] - base_rss) / runs / 1024,
        "kb_finished": (end_rss - base_rss) / runs / 1024,
        "events_s": runs * len(events) / max(1e-9, posted - flowing[0]),
        "p50_ms": _pct(judged.extra_s, 0.50) * 1000,
        "p99_ms": _pct(judged.extra_s, 0.99) * 1000,
        "late_ms": _pct([s - d for a in agents for s, d in zip(a.sent, a.due, strict=True)], 0.99) * 1000,
        "429": judged.rate_limited,
        "budget": in_window / (flowing[1] - flowing[0]) / BOT_BUDGET_PER_S if limits else None,
        "pushed_back": sum(a.pushed_back for a in agents),
        "after_ends": _first_seconds_after_ends(agents, calls),
        "whole": judged.whole,
        "delivered": statuses.count("delivered"),
        "failures": [f for a in agents for f in a.failures][:3],
    }


def _busy(timeline: list[tuple[float, float, int]], start: float, end: float) -> float:
    """The sidecar's CPU (cores) from ``start`` to ``end``, from the samples' process times."""
    inside = [(t, cpu) for t, cpu, _ in timeline if start <= t <= end]
    if len(inside) < 2:
        return float("nan")
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def _row(r: dict[str, Any]) -> str:
    budget = f"{r['budget'] * 100:.0f}%" if r["budget"] is not None else "-"
    return (
        f"| {r['runs']:,} | {r['limits']} | {r['cpu']:.2f} | {r['rss_mb']:.0f} | {r['kb_active']:.0f} | "
        f"{r['kb_finished']:.0f} | {r['events_s']:,.0f} | {r['p50_ms']:.0f} | {r['p99_ms']:.0f} | {r['late_ms']:.0f} | "
        f"{r['429']} | "
        f"{budget} | {r['after_ends'][0]} : {r['after_ends'][1]} | {r['pushed_back']} | {r['whole']}/{r['runs']} | "
        f"{r['delivered']}/{r['runs']} |"
    )


async def main(args: argparse.Namespace) -> None:
    events = [e for e in recorded_events(RECORDING, ProviderFormat.ANTHROPIC, "x") if e["kind"] == "text"][
        : args.events
    ]
    events = [{k: v for k, v in e.items() if k != "run"} for e in events]
    port = free_port()
    if args.pin:  # the agents and the mock (forked below) on the other cores, the sidecar alone on its own
        os.sched_setaffinity(0, set(range(os.cpu_count() or 2)) - {SIDECAR_CPU})
    ours, theirs = multiprocessing.get_context("fork").Pipe()
    child = multiprocessing.get_context("fork").Process(target=_mock_child, args=(port, theirs), daemon=True)
    child.start()
    api = f"http://127.0.0.1:{port}"
    rows = []
    try:
        for limits in args.limits:
            for runs in args.runs if limits == "off" else [args.runs_on]:
                rows.append(
                    await _scenario(
                        runs, limits == "on", events, ours, api, args.overload_lag_ms, args.overload_backlog, args.pin
                    )
                )
                print(_row(rows[-1]), *rows[-1]["failures"], flush=True)
    finally:
        ours.send(("stop",))
        child.join(timeout=10)
    n_chars = sum(len(e["text"]) for e in events)
    print(f"\n{len(events)} text deltas ({n_chars:,} characters) per run, 20-50 ms apart, one chat per run; {GOALS}")
    print(
        "| runs | mock limits | CPU (cores) | RSS MB | KB per active run | KB per finished run (RSS) | events/s | "
        "p50 ms | p99 ms | agents' lines late p99 ms | 429s | bot budget used | "
        "previews : finals 2 s after ends begin | pushed back | whole once | delivered |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(_row(row))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--limits", nargs="+", choices=["off", "on"], default=["off", "on"])
    parser.add_argument("--runs-on", type=int, default=200, help="runs of the 'on' scenario (the bot budget binds)")
    parser.add_argument("--overload-lag-ms", type=float, default=100.0, help="[service] overload_lag_ms (0: off)")
    parser.add_argument("--overload-backlog", type=int, default=2000, help="[service] overload_backlog_events (0: off)")
    parser.add_argument("--events", type=int, default=739, help="text deltas per run (739: the whole answer)")
    parser.add_argument(
        "--pin",
        action="store_true",
        help=f"the sidecar on CPU {SIDECAR_CPU} alone (taskset), the agents and the mock on the others: on a small "
        "machine the load generator otherwise takes the sidecar's CPU (see the agents' lateness column)",
    )
    asyncio.run(main(parser.parse_args()))
