"""Benchmark: the whole delivery core per delta (visible text → answer → mode → reconciler) without I/O.

Feeds text deltas into a RunController whose adapter answers instantly, for growing texts, and prints
a table: total seconds, microseconds per KiB (with ``--memory``, peak memory). Costs must grow linearly
with the text.
Variants: ``plain`` answer deltas; ``think``: the first half inside an inline ``<think>`` block; ``shown``: the
first half as reasoning with ``reasoning = "shown"``; ``children``: every delta from one of 50 sub-agents in
turn (``subagents = "status"``), then the root's answer; ``unsafe``: every 8th delta carries control and bidi
override characters that :mod:`core.text.safe_text` removes.

    uv run python bench/bench_pipeline.py [--memory]

``--memory`` adds the peak memory of each row, from one more run under tracemalloc (never the timed run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streamrelay.core.clock import MonotonicClock
from streamrelay.core.delivery.calls import Call, CallResult, perform_call
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.events import DeliveryMode, End, Event, RunStart, Source, Target, TextEvent, Visibility
from streamrelay.core.policy import ChannelPolicy, ReasoningPolicy, SubagentPolicy
from streamrelay.core.ports import PendingSend, Settlement, SettleOutcome, TextFormat
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.controller import RunController
from streamrelay.core.units import LengthUnit, text_units

RECORDING = Path(__file__).resolve().parent.parent / "tests/streams/anthropic/markdown-long-fences.jsonl"


class NullAdapter:
    """A platform that answers every call at once (the benchmarks measure the core, not I/O)."""

    platform = "null"
    max_units = 4096
    unit = LengthUnit.UTF16

    observer = None

    def __init__(self) -> None:
        self.calls = 0

    async def perform(self, call: Call) -> CallResult:
        return await perform_call(self, call)

    def measure(self, text: str, fmt: TextFormat) -> int:
        return text_units(text, self.unit)

    def check_target(self, target: Target) -> str | None:
        return None

    def is_group(self, target: Target) -> bool:
        return False

    async def send_text(self, target: Target, text: str, fmt: TextFormat, *, delivery_id: str | None = None) -> str:
        self.calls += 1
        return str(self.calls)

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        return Settlement(SettleOutcome.NOT_SENT)

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> bool:
        self.calls += 1
        return True

    async def delete_message(self, target: Target, message_id: str) -> None:
        self.calls += 1

    async def send_typing(self, target: Target) -> None:
        return None

    async def close(self) -> None:
        return None


def recorded_deltas() -> list[str]:
    out = []
    for line in RECORDING.read_text().splitlines():
        event = json.loads(line)
        delta = event.get("delta", {})
        if event.get("type") == "content_block_delta" and delta.get("type") == "text_delta":
            out.append(delta["text"])
    return out


CHILDREN = [Source(agent_id=f"child{i}", session_id=f"s{i}", depth=1) for i in range(50)]


def events(deltas: list[str], variant: str) -> list[Event]:
    half = len(deltas) // 2
    if variant == "think":
        return [TextEvent(run="b", text=d) for d in ["<think>", *deltas[:half], "</think>", *deltas[half:]]]
    if variant == "shown":
        first = [TextEvent(run="b", text=d, visibility=Visibility.REASONING) for d in deltas[:half]]
        return [*first, *(TextEvent(run="b", text=d) for d in deltas[half:])]
    if variant == "children":
        kids = [TextEvent(run="b", text=d, source=CHILDREN[i % 50]) for i, d in enumerate(deltas[:half])]
        return [*kids, *(TextEvent(run="b", text=d) for d in deltas[half:])]
    if variant == "unsafe":  # every 8th delta carries a NUL and a bidi override (core.text.safe_text removes them)
        return [TextEvent(run="b", text=d + "\x00\u202e" if i % 8 == 0 else d) for i, d in enumerate(deltas)]
    return [TextEvent(run="b", text=d) for d in deltas]


async def run_once(deltas: list[str], mode: DeliveryMode, variant: str) -> tuple[float, int, int]:
    adapter = NullAdapter()
    clock = MonotonicClock()
    policy = ChannelPolicy(name="bench", delivery=mode, throttle_s=0.05)
    if variant == "shown":
        policy = replace(policy, reasoning=ReasoningPolicy.SHOWN, throttle_s=0.0)
    if variant == "children":
        policy = replace(policy, subagents=SubagentPolicy.STATUS)
    start = RunStart(run="b", channel="bench", target=Target(chat_id=1))
    controller = RunController(start, policy, adapter, SendChain(clock), MemoryLedger(), clock)
    await controller.open()
    feed = events(deltas, variant)
    t0 = time.perf_counter()
    for i, event in enumerate(feed):
        controller.handle(event)
        if i % 64 == 0:
            await asyncio.sleep(0)
    await controller.end(End(run="b"))
    return time.perf_counter() - t0, adapter.calls, sum(len(d) for d in deltas)


def main(argv: list[str] | None = None) -> None:
    """Print the table; ``--memory`` adds a peak MiB column from one more run per row under tracemalloc (it slows
    Python 5-8 times, so the timed run never has it on)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--memory", action="store_true", help="one more run per row under tracemalloc: peak MiB")
    args = parser.parse_args(argv)
    base = recorded_deltas()
    head = f"{'mode':8} {'variant':9} {'chars':>10} {'deltas':>8} {'seconds':>9} {'µs/KiB':>9} {'calls':>6}"
    print(head + (f" {'peak MiB':>9}" if args.memory else ""))
    runs = [(m, "plain") for m in (DeliveryMode.PREVIEW, DeliveryMode.BLOCK, DeliveryMode.FINAL)]
    runs += [(DeliveryMode.PREVIEW, "think"), (DeliveryMode.FINAL, "shown"), (DeliveryMode.PREVIEW, "children")]
    runs += [(DeliveryMode.PREVIEW, "unsafe")]
    for mode, variant in runs:
        for copies in (1, 10, 100):
            deltas = base * copies
            seconds, calls, chars = asyncio.run(run_once(deltas, mode, variant))
            per_kib = seconds / (chars / 1024) * 1e6
            row = f"{mode:8} {variant:9} {chars:>10} {len(deltas):>8} {seconds:>9.3f} {per_kib:>9.1f} {calls:>6}"
            if args.memory:
                tracemalloc.start()
                asyncio.run(run_once(deltas, mode, variant))
                peak = tracemalloc.get_traced_memory()[1] / 2**20
                tracemalloc.stop()
                row += f" {peak:>9.1f}"
            print(row)


if __name__ == "__main__":
    main()
