"""Benchmark: one client's delivery time with and without a noisy neighbour (issue 12, "Done when").

A ``streamrelay serve`` process (as an operator runs it: SQLite journal and ledger, two ``[clients.NAME]``) delivers
to a mock Telegram Bot API that enforces the documented limits (1 message per second per chat, ~30 per second per
bot: https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this; 429 past them). The victim
replays a recorded provider stream (openai-chat long-text, 662 lines, ``--pace-ms`` apart) into its chat and waits
for the report: its time-to-final is from its first line to the report saying done. The neighbour keeps
``--neighbour-runs`` runs streaming at once (each a recorded stream into its own chat, restarted as it ends) for the
victim's whole run; ``inside`` its limits (``max_active_runs`` = the runs it keeps, ``events_per_s`` above its
pace), or ``over`` them (it tries three times as many runs and its extra starts get 429).

Scenarios, in the same run, each ``--repeats`` times (median): ``alone`` (the baseline), ``neighbour inside its
limits``, ``neighbour over its limits``. Prints the victim's time-to-final, its ratio to the baseline, the
neighbour's runs and 429s from the platform. The goal: within 10% of the baseline while the neighbour stays inside
its limits.

    uv run python bench/bench_neighbour.py [--neighbour-runs 60] [--pace-ms 10] [--repeats 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.serving import free_port, serve  # noqa: E402
from streamrelay.app.ingest_client import recording_lines, replay  # noqa: E402
from streamrelay.core.events import ProviderFormat  # noqa: E402
from streamrelay.mocks.telegram import MockTelegram  # noqa: E402

VICTIM, NEIGHBOUR = "victim-token-bench-0123456789", "neighbour-token-bench-9876543210"
BOT = "123456:BENCH-neighbour-token"
STREAMS = ROOT.parent / "shared" / "streams"


def _config(folder: Path, api: str, neighbour_runs: int) -> Path:
    text = f"""
[service]
ledger = "{folder / "ledger.sqlite3"}"
actions = ""
log_level = "warning"
drain_s = 0

[channels.telegram]
platform = "telegram"
token_env = "BENCH_BOT_TOKEN"
api_base = "{api}"
delivery = "preview"

[clients.victim]
token_env = "BENCH_VICTIM_TOKEN"

[clients.neighbour]
token_env = "BENCH_NEIGHBOUR_TOKEN"
max_active_runs = {neighbour_runs}
events_per_s = {neighbour_runs * 120}
"""
    path = folder / "channels.toml"
    path.write_text(text)
    return path


async def _neighbour(url: str, runs: int, attempts: int, pace_ms: float, stop: asyncio.Event) -> dict[str, int]:
    """Keep ``attempts`` runs going (``runs`` fit the neighbour's limits) until ``stop``; count runs and 429s."""
    events = recording_lines(STREAMS / "openai-chat" / "text.jsonl")
    counts = {"runs": 0, "refused": 0, "failed": 0}

    async def lane(i: int, http: httpx.AsyncClient) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            start = {
                "kind": "run.start",
                "channel": "telegram",
                "target": {"chat_id": 10_000 + i},
                "format": "openai-chat",
            }
            probe = await http.post(f"/v1/runs/n{i}-{n}/events", content=json.dumps(start).encode() + b"\n")
            if probe.status_code == 429:  # past the neighbour's active runs: try again in a moment
                counts["refused"] += 1
                await asyncio.sleep(float(probe.headers.get("retry-after", "1")))
                continue
            try:
                await replay(
                    url,
                    NEIGHBOUR,
                    run=f"n{i}-{n}",
                    channel="telegram",
                    chat_id=10_000 + i,
                    fmt=ProviderFormat.OPENAI_CHAT,
                    events=events,
                    pace_ms=pace_ms,
                )
                counts["runs"] += 1
            except RuntimeError:
                counts["failed"] += 1

    headers = {"Authorization": f"Bearer {NEIGHBOUR}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
        tasks = [asyncio.create_task(lane(i, http)) for i in range(attempts)]
        await stop.wait()
        await asyncio.gather(*tasks, return_exceptions=True)
    return counts


async def _scenario(url: str, mock: MockTelegram, name: str, args: argparse.Namespace, run: int) -> dict[str, object]:
    mock.reset()
    stop = asyncio.Event()
    attempts = {"alone": 0, "inside": args.neighbour_runs, "over": args.neighbour_runs * 3}[name]
    noise = asyncio.create_task(_neighbour(url, args.neighbour_runs, attempts, args.pace_ms * 2, stop))
    if attempts:
        await asyncio.sleep(3.0)  # the neighbour at full load first
    events = recording_lines(STREAMS / "openai-chat" / "long-text.jsonl")
    began = time.monotonic()
    report = await replay(
        url,
        VICTIM,
        run=f"victim-{name}-{run}",
        channel="telegram",
        chat_id=1,
        fmt=ProviderFormat.OPENAI_CHAT,
        events=events,
        pace_ms=args.pace_ms,
    )
    took = time.monotonic() - began
    stop.set()
    counts = await noise
    refused = sum(1 for call in mock.calls if call.status == 429)
    return {
        "took": took,
        "status": report["status"],
        "runs": counts["runs"],
        "starts_refused": counts["refused"],
        "platform_429": refused,
    }


async def main(args: argparse.Namespace) -> None:
    mock = MockTelegram(rate_limits=True)
    api = await mock.start()
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        env = {**os.environ, "BENCH_BOT_TOKEN": BOT, "BENCH_VICTIM_TOKEN": VICTIM, "BENCH_NEIGHBOUR_TOKEN": NEIGHBOUR}
        cmd = ["uv", "run", "--frozen", "streamrelay", "serve"]
        proc = await serve(cmd, _config(Path(folder), api, args.neighbour_runs), port, env)
        url = f"http://127.0.0.1:{port}"
        rows: dict[str, list[dict[str, object]]] = {"alone": [], "inside": [], "over": []}
        try:
            for run in range(args.repeats):
                for name in rows:
                    rows[name].append(await _scenario(url, mock, name, args, run))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            await mock.stop()
    base = statistics.median(float(r["took"]) for r in rows["alone"])  # type: ignore[arg-type]
    print(
        f"victim: openai-chat long-text (662 lines, {args.pace_ms:g} ms apart) into one Telegram chat; "
        f"neighbour: {args.neighbour_runs} runs at once, median of {args.repeats}"
    )
    print(f"{'scenario':<28}{'victim s':>10}{'vs alone':>10}{'status':>12}{'nb runs':>9}{'nb 429':>8}{'tg 429':>8}")
    labels = {"alone": "alone (baseline)", "inside": "neighbour inside limits", "over": "neighbour over limits"}
    for name, results in rows.items():
        took = statistics.median(float(r["took"]) for r in results)  # type: ignore[arg-type]
        statuses = ",".join(sorted({str(r["status"]) for r in results}))
        nb_runs = sum(int(r["runs"]) for r in results)  # type: ignore[call-overload]
        nb_refused = sum(int(r["starts_refused"]) for r in results)  # type: ignore[call-overload]
        tg = sum(int(r["platform_429"]) for r in results)  # type: ignore[call-overload]
        print(f"{labels[name]:<28}{took:>10.2f}{took / base:>9.2f}x{statuses:>12}{nb_runs:>9}{nb_refused:>8}{tg:>8}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--neighbour-runs", type=int, default=60)
    parser.add_argument("--pace-ms", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=2)
    asyncio.run(main(parser.parse_args()))
