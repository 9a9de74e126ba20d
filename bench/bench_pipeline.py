"""Benchmark: the whole delivery core per delta (assembler → answer → mode → reconciler) without I/O.

Feeds text deltas into a RunController whose adapter answers instantly, for growing texts, and prints
a table: total seconds, microseconds per KiB, peak memory. Costs must grow linearly with the text.

    uv run python bench/bench_pipeline.py
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from core.clock import MonotonicClock
from core.events import DeliveryMode, End, RunStart, Target, TextEvent
from core.ledger import MemoryLedger
from core.policy import ChannelPolicy
from core.ports import TextFormat
from core.run import RunController
from core.send_chain import SendChain
from core.units import LengthUnit, text_units

RECORDING = Path(__file__).resolve().parent.parent / "tests/streams/anthropic/markdown-long-fences.jsonl"


class NullAdapter:
    platform = "null"
    max_units = 4096
    unit = LengthUnit.UTF16

    def __init__(self) -> None:
        self.calls = 0

    def measure(self, text: str, fmt: TextFormat) -> int:
        return text_units(text, self.unit)

    def check_target(self, target: Target) -> str | None:
        return None

    def is_group(self, target: Target) -> bool:
        return False

    async def send_text(self, target: Target, text: str, fmt: TextFormat) -> str:
        self.calls += 1
        return str(self.calls)

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


async def run_once(deltas: list[str], mode: DeliveryMode) -> tuple[float, int, int]:
    adapter = NullAdapter()
    clock = MonotonicClock()
    policy = ChannelPolicy(name="bench", delivery=mode, throttle_s=0.05)
    start = RunStart(run="b", channel="bench", target=Target(chat_id=1))
    controller = RunController(start, policy, adapter, SendChain(clock), MemoryLedger(), clock)
    await controller.open()
    t0 = time.perf_counter()
    for i, delta in enumerate(deltas):
        controller.handle(TextEvent(run="b", text=delta))
        if i % 64 == 0:
            await asyncio.sleep(0)
    await controller.close(End(run="b"))
    return time.perf_counter() - t0, adapter.calls, sum(len(d) for d in deltas)


def main() -> None:
    base = recorded_deltas()
    print(f"{'mode':8} {'chars':>10} {'deltas':>8} {'seconds':>9} {'µs/KiB':>9} {'calls':>6} {'peak MiB':>9}")
    for mode in (DeliveryMode.PREVIEW, DeliveryMode.BLOCK, DeliveryMode.FINAL):
        for copies in (1, 10, 100):
            deltas = base * copies
            tracemalloc.start()
            seconds, calls, chars = asyncio.run(run_once(deltas, mode))
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            per_kib = seconds / (chars / 1024) * 1e6
            print(f"{mode:8} {chars:>10} {len(deltas):>8} {seconds:>9.3f} {per_kib:>9.1f} {calls:>6} {peak:>9.1f}")


if __name__ == "__main__":
    main()
