"""Benchmark: a client's time-to-final while another client keeps N runs on the bot's budget (issue 12, item 3).

One relay in this process delivers through aiogram to a mock Telegram Bot API on loopback that enforces the
documented limits (1 message per second per chat, about 30 per second per bot, 429 past them:
https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this); the bot's budget is the
shipped default (25 calls a second, ``streamrelay/config/platforms.py``) unless ``--rate`` says otherwise.

The victim streams one answer into its chat (a delta every 0.3 s for ``--victim-s`` seconds, then its end) and waits
for the report: its time-to-final is from its first line to the report saying done. The neighbour (another client)
keeps ``--neighbour-runs`` runs streaming at once, each in its own chat, until the victim's end: every run ends after
a few deltas and a new one starts in its chat, faster than the budget delivers them, so the neighbour's previews and
hundreds of its finals wait for the bot's budget when the victim's final does.

Scenarios, in the same run: ``alone`` (the baseline), ``first come`` (the neighbour, the bot's budget polled first
come, first served: the policy before fair service, ``ChannelRuntime(fair=False)``), ``fair`` (the neighbour, the
shipped fair service). Prints the victim's time-to-final, its ratio to the baseline, the calls each client got
while the victim ran, and 429s. A victim still unfinished after ``--timeout-s`` shows as ``> timeout``.

    uv run python bench/bench_fairness.py [--neighbour-runs 2000] [--victim-s 3] [--rate 25] [--timeout-s 120]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import SecretStr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streamrelay.app.service import make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.ingest.clients import ClientLimits, run_key
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram

BOT = "123456:BENCH-fairness"
VICTIM_CHAT = 7
NEIGHBOUR_CHAT = 100_000
DELTAS_PER_RUN = 3
"""Deltas a neighbour run streams before it ends (and a new run starts in its chat)."""


class Feeder:
    """Writes runs' lines into the relay (``seq`` counted per run)."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self._seq: dict[str, int] = {}

    async def line(self, key: str, line: dict[str, Any]) -> None:
        seq = self._seq.get(key, 0)
        self._seq[key] = seq + 1
        await self.relay.submit_line({**line, "run": key, "seq": seq})

    async def start(self, key: str, chat: int) -> None:
        await self.line(key, {"kind": "run.start", "channel": "telegram", "target": {"chat_id": chat}})
        await self.line(key, {"kind": "text", "mode": "delta", "text": f"Answer of {key}."})


async def _neighbour(feeder: Feeder, runs: int, stop: asyncio.Event) -> None:
    """Keep ``runs`` neighbour runs streaming until ``stop``: a delta each in turn, each run one every 4 s."""
    gen = [0] * runs
    for i in range(runs):
        await feeder.start(run_key("neighbour", f"n{i}-0"), NEIGHBOUR_CHAT + i)
    k = 0
    while not stop.is_set():
        i = k % runs
        key = run_key("neighbour", f"n{i}-{gen[i]}")
        await feeder.line(key, {"kind": "text", "mode": "delta", "text": f" more {k}."})
        if (k // runs) % DELTAS_PER_RUN == DELTAS_PER_RUN - 1:  # this run ends; the next one starts in its chat
            await feeder.line(key, {"kind": "end", "status": "ok"})
            gen[i] += 1
            await feeder.start(run_key("neighbour", f"n{i}-{gen[i]}"), NEIGHBOUR_CHAT + i)
        k += 1
        if k % max(1, runs // 40) == 0:
            await asyncio.sleep(0.1)


async def _victim(feeder: Feeder, key: str, victim_s: float, timeout_s: float, stop: asyncio.Event) -> float | None:
    began = time.monotonic()
    await feeder.start(key, VICTIM_CHAT)
    for j in range(round(victim_s / 0.3)):
        await asyncio.sleep(0.3)
        await feeder.line(key, {"kind": "text", "mode": "delta", "text": f" Part {j}."})
    await feeder.line(key, {"kind": "end", "status": "ok"})
    stop.set()  # the neighbour's queue stays as it is
    report = await feeder.relay.wait_done(key, timeout_s)
    return time.monotonic() - began if report is not None and report.done else None


async def _scenario(name: str, args: argparse.Namespace) -> dict[str, Any]:
    mock = MockTelegram(rate_limits=True)
    api = await mock.start()
    table: dict[str, Any] = {"api_base": api, "platform": "telegram", "throttle_ms": 0, "typing": False}
    if args.rate is not None:
        table["rate"] = {"per_bot": {"per_s": args.rate}}
    runtime = make_runtime("telegram", ChannelSettings.model_validate(table), SecretStr(BOT))
    runtime.fair = name != "first come"
    clients = {"neighbour": ClientLimits(name="neighbour", max_active_runs=1_000_000)}
    relay = Relay({"telegram": runtime}, MemoryLedger(), MonotonicClock(), clients=clients)
    stop = asyncio.Event()
    noise = None
    try:
        if name != "alone":
            noise = asyncio.create_task(_neighbour(Feeder(relay), args.neighbour_runs, stop))
            await asyncio.sleep(3.0)  # the neighbour's queue first
        calls_before = len(mock.calls)
        took = await _victim(Feeder(relay), run_key("victim", f"v-{name}"), args.victim_s, args.timeout_s, stop)
        during = mock.calls[calls_before:]
    finally:
        stop.set()
        if noise is not None:
            await asyncio.gather(noise, return_exceptions=True)
        await relay.close()
        await mock.stop()
    return {
        "took": took,
        "victim calls": sum(c.chat_id == VICTIM_CHAT for c in during),
        "neighbour calls": sum(c.chat_id != VICTIM_CHAT for c in during),
        "429s": sum(c.status == 429 for c in mock.calls),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--neighbour-runs", type=int, default=2000)
    parser.add_argument("--victim-s", type=float, default=3.0)
    parser.add_argument("--rate", type=float, default=None, help="the bot's budget, calls per second")
    parser.add_argument("--timeout-s", type=float, default=120.0)
    args = parser.parse_args()
    print(f"neighbour {args.neighbour_runs} runs; victim streams {args.victim_s} s; bot budget {args.rate or 25}/s")
    head = ("scenario", "time-to-final", "x alone", "victim calls", "neighbour calls", "429s")
    print(f"{head[0]:<12} {head[1]:>14} {head[2]:>8} {head[3]:>13} {head[4]:>16} {head[5]:>5}")
    baseline = None
    for name in ("alone", "first come", "fair"):
        row = await _scenario(name, args)
        took = row["took"]
        baseline = took if name == "alone" else baseline
        shown = f"> {args.timeout_s:.0f} s" if took is None else f"{took:.1f} s"
        ratio = "" if took is None or not baseline else f"{took / baseline:.1f}"
        print(
            f"{name:<12} {shown:>14} {ratio:>8} {row['victim calls']:>13} {row['neighbour calls']:>16} {row['429s']:>5}"
        )


if __name__ == "__main__":
    asyncio.run(main())
