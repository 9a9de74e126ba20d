"""Chunker throughput: cost must grow linearly with the text, whatever the size of one append.

Run: ``uv run python bench/bench_chunker.py [--repeat N]``

Feeds a real recorded stream (tests/streams/anthropic/markdown-long-fences.jsonl, its ``text_delta``
texts in order) and synthetic Markdown of 10k, 100k and 1M characters cut into small deltas (1 to 16
characters) through one :class:`core.chunker.Chunker` each, with Telegram's parameters (4096 UTF-16 units,
the preview / final split with ``min = max``) and block-mode parameters (800..4096, code points). Prints
one row per input and parameter set: text size, appends, chunks, total seconds and microseconds per KiB
of text (KiB = 1024 characters). Linear cost shows as a flat us/KiB column; a chunker that rescanned its
buffer on every append would grow with the buffer size instead.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from pathlib import Path

from core.chunker import BreakKind, Chunker, ChunkParams
from core.units import LengthUnit

ROOT = Path(__file__).resolve().parents[1]

STREAM = ROOT / "tests" / "streams" / "anthropic" / "markdown-long-fences.jsonl"

PARAMS = {
    "telegram 4096/4096 utf16": ChunkParams(4096, 4096, BreakKind.PARAGRAPH, LengthUnit.UTF16),
    "block 800..4096 chars": ChunkParams(800, 4096, BreakKind.PARAGRAPH, LengthUnit.CHARS),
}


def recorded_deltas() -> list[str]:
    """The ``text_delta`` texts of the recorded Anthropic stream, in order."""
    deltas = []
    for line in STREAM.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        delta = event.get("delta") if event.get("type") == "content_block_delta" else None
        if isinstance(delta, dict) and delta.get("type") == "text_delta":
            deltas.append(str(delta["text"]))
    return deltas


def synthetic_text(size: int, seed: int = 7) -> str:
    """Markdown of ``size`` code points: paragraphs, lists, inline code, links, emoji, CJK, fences."""
    rnd = random.Random(seed)
    words = ["stream", "delivery", "sidecar", "chunk", "the", "a", "message", "limit", "Telegram", "preview"]
    extras = ["`code span`", "[a link](https://example.com/docs)", "😀", "👨\u200d👩\u200d👧", "中文字符", "done."]
    parts: list[str] = []
    total = 0
    while total < size:
        kind = rnd.random()
        if kind < 0.15:
            lines = [f"    result = compute({i}, value)  # step {i}" for i in range(rnd.randint(3, 60))]
            block = "```python\n" + "\n".join(lines) + "\n```"
        elif kind < 0.3:
            block = "\n".join(f"- {' '.join(rnd.choices(words, k=8))}" for _ in range(rnd.randint(2, 6)))
        else:
            sentence = [*rnd.choices(words, k=rnd.randint(5, 20)), rnd.choice(extras)]
            block = " ".join(sentence).capitalize() + ". " + " ".join(rnd.choices(words, k=10)) + "."
        parts.append(block)
        total += len(block) + 2
    return "\n\n".join(parts)[:size]


def small_deltas(text: str, seed: int = 11) -> list[str]:
    """``text`` cut into deltas of 1 to 16 code points, like a model's token stream."""
    rnd = random.Random(seed)
    out, i = [], 0
    while i < len(text):
        n = rnd.randint(1, 16)
        out.append(text[i : i + n])
        i += n
    return out


def run(params: ChunkParams, deltas: list[str], repeat: int) -> tuple[float, int]:
    """Best wall time (seconds) of ``repeat`` runs, and the number of chunks."""
    best, chunks = float("inf"), 0
    for _ in range(repeat):
        chunker = Chunker(params)
        started = time.perf_counter()
        n = 0
        for delta in deltas:
            n += len(chunker.append(delta))
        n += len(chunker.drain(force=True))
        best = min(best, time.perf_counter() - started)
        chunks = n
    return best, chunks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the best time is shown")
    args = parser.parse_args(argv)
    inputs: list[tuple[str, Callable[[], list[str]]]] = [
        ("recorded anthropic markdown", recorded_deltas),
        ("synthetic 10k", lambda: small_deltas(synthetic_text(10_000))),
        ("synthetic 100k", lambda: small_deltas(synthetic_text(100_000))),
        ("synthetic 1M", lambda: small_deltas(synthetic_text(1_000_000))),
    ]
    header = f"{'input':30} {'params':26} {'chars':>9} {'appends':>8} {'chunks':>7} {'total s':>9} {'us/KiB':>8}"
    print(header)
    print("-" * len(header))
    for name, make in inputs:
        deltas = make()
        size = sum(len(d) for d in deltas)
        for label, params in PARAMS.items():
            seconds, chunks = run(params, deltas, args.repeat)
            per_kib = seconds / size * 1024 * 1e6
            print(f"{name:30} {label:26} {size:>9} {len(deltas):>8} {chunks:>7} {seconds:>9.4f} {per_kib:>8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
