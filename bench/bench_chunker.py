"""Chunker benchmark (issue 13, item 4): speed, growth and chunk quality, beside a naive baseline.

Run: ``uv run python bench/bench_chunker.py [--repeat N] [--sizes 1,10,100] [--quick] [--memory] [--cpu] [--chunker M]``

Input: the recorded 8.5k-character Markdown answer (the ``text_delta`` texts of
tests/streams/anthropic/markdown-long-fences.jsonl, joined), repeated x1, x10 and x100 (joined with a blank
line). Each size is fed at δ=1 (one code point per append, as the worst token stream), δ=8, δ=64 characters per
append, and as the whole text in one append, each followed by the forced drain, with two parameter sets:
Telegram's (4096/4096 UTF-16 units, paragraph) and block mode's (800..4096 code points, paragraph).

Two chunkers are measured by the same harness: the project's (``core.chunking``; ``--chunker`` names other
modules with the same API to measure beside it), and
:class:`NaiveChunker`, the baseline: a Python buffer that rescans itself for its last paragraph break on every
append (its whole-text growth is quadratic: each cut copies the rest of the buffer).

Columns: ``ms`` the median wall time (``time.perf_counter``; with ``--cpu`` the process's CPU time,
``time.process_time``, which waiting for a shared core does not count) of ``--repeat`` runs; ``M ch/s`` millions of
characters per second; ``ns/ev`` nanoseconds per append; ``growth`` the time per character against the size
ten times smaller at the same δ (1.0: linear); quality: ``para`` the chunks ending at a paragraph break among
those whose window (the ``max_chars`` characters from the chunk's start in the text) held one outside fences,
``fences`` the chunks with every fence closed, ``δ-inv`` whether the chunks equal those of the whole text in
one append. ``--memory`` adds a tracemalloc run per row (peak KiB; tracemalloc slows Python 5-8 times, so it is
never on during the timed runs).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from bench.chunk_quality import NaiveChunker, Quality, StreamChunker, TextMap, quality
from streamrelay.core.chunking import BreakKind, ChunkParams
from streamrelay.core.units import LengthUnit

ROOT = Path(__file__).resolve().parents[1]


CHUNKER: ModuleType = importlib.import_module("streamrelay.core.chunking")
"""The project's chunker package (``--chunker`` measures other modules with the same API beside it)."""

STREAM = ROOT / "tests" / "streams" / "anthropic" / "markdown-long-fences.jsonl"

PARAMS = {
    "telegram": ChunkParams(4096, 4096, BreakKind.PARAGRAPH, LengthUnit.UTF16),
    "block": ChunkParams(800, 4096, BreakKind.PARAGRAPH, LengthUnit.CHARS),
}
DELTAS: dict[str, int | None] = {"1": 1, "8": 8, "64": 64, "whole": None}
"""Characters per append (None: the whole text in one append)."""

GOAL_MCHARS_S = 10.0
GOAL_NS_PER_1CHAR_EVENT = 1_000.0
GOALS = (
    f"goals: ≥ {GOAL_MCHARS_S:.0f} M chars/s at 64/append and whole; ≤ {GOAL_NS_PER_1CHAR_EVENT:,.0f} ns per"
    " 1-char event; growth ≈ 1.0 (linear); quality: para 100%, fences all, δ-inv yes"
)


Factory = Callable[[ChunkParams], StreamChunker]

CLOCK: Callable[[], float] = time.perf_counter
"""The clock of the timed runs: wall time, or the process's CPU time with ``--cpu``."""


def module_factory(module: ModuleType) -> Factory:
    """A factory of ``module.Chunker`` (``core.chunking`` or ``core.chunking``), given parameters of either."""

    def make(params: ChunkParams) -> StreamChunker:
        own = module.ChunkParams(
            params.min_chars, params.max_chars, module.BreakKind(params.break_preference.value), params.unit
        )
        chunker: StreamChunker = module.Chunker(own)
        return chunker

    return make


def recorded_text() -> str:
    """The recorded answer: the ``text_delta`` texts of the Anthropic stream, joined (8,512 characters)."""
    texts = []
    for line in STREAM.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        delta = event.get("delta") if event.get("type") == "content_block_delta" else None
        if isinstance(delta, dict) and delta.get("type") == "text_delta":
            texts.append(str(delta["text"]))
    return "".join(texts)


def split(text: str, size: int | None) -> list[str]:
    """``text`` as appends of ``size`` code points (the whole text as one when ``size`` is None)."""
    if size is None:
        return [text]
    if size == 1:
        return list(text)
    return [text[i : i + size] for i in range(0, len(text), size)]


def feed(factory: Factory, params: ChunkParams, appends: Sequence[str]) -> tuple[float, list[str]]:
    """One run: seconds (:data:`CLOCK`) to append everything and force the drain, and the chunks."""
    chunker = factory(params)
    append = chunker.append
    out: list[str] = []
    extend = out.extend
    clock = CLOCK
    started = clock()
    for piece in appends:
        extend(append(piece))
    extend(chunker.drain(force=True))
    return clock() - started, out


def peak_kib(factory: Factory, params: ChunkParams, appends: Sequence[str]) -> float:
    """Peak traced memory (KiB) of one run under tracemalloc."""
    tracemalloc.start()
    try:
        feed(factory, params, appends)
        return tracemalloc.get_traced_memory()[1] / 1024
    finally:
        tracemalloc.stop()


# --- the table -------------------------------------------------------------------------------------------------


@dataclass
class Row:
    """One measured configuration."""

    chunker: str
    params: str
    size: int
    delta: str
    chars: int
    events: int
    chunks: int
    seconds: float
    quality: Quality
    invariant: bool
    peak_kib: float | None = None
    growth: float | None = None

    @property
    def mchars_s(self) -> float:
        return self.chars / self.seconds / 1e6 if self.seconds else float("inf")

    @property
    def ns_per_event(self) -> float:
        return self.seconds / self.events * 1e9

    @property
    def ns_per_char(self) -> float:
        return self.seconds / self.chars * 1e9


COLUMNS = [
    ("chunker", "<14"),
    ("params", "<8"),
    ("size", ">4"),
    ("δ", ">5"),
    ("chars", ">7"),
    ("events", ">7"),
    ("chunks", ">6"),
    ("ms", ">9"),
    ("M ch/s", ">6"),
    ("ns/ev", ">9"),
    ("growth", ">6"),
    ("para", ">12"),
    ("fences", ">7"),
    ("δ-inv", ">5"),
]


def _cells(row: Row) -> list[str]:
    growth = f"{row.growth:.2f}" if row.growth is not None else ""
    cells = [
        row.chunker,
        row.params,
        f"x{row.size}",
        row.delta,
        f"{row.chars:,}",
        f"{row.events:,}",
        str(row.chunks),
        f"{row.seconds * 1e3:,.2f}",
        f"{row.mchars_s:.2f}",
        f"{row.ns_per_event:,.0f}",
        growth,
        row.quality.para(),
        row.quality.fences(),
        "yes" if row.invariant else "NO",
    ]
    if row.peak_kib is not None:
        cells.append(f"{row.peak_kib:,.0f}")
    return cells


def format_table(rows: Sequence[Row]) -> str:
    """The rows as one aligned table (with a peak KiB column when measured)."""
    columns = list(COLUMNS) + ([("peak KiB", ">9")] if any(r.peak_kib is not None for r in rows) else [])
    head = " ".join(f"{name:{spec}}" for name, spec in columns)
    lines = [head, "-" * len(head)]
    previous = None
    for row in rows:
        if previous is not None and (row.chunker, row.params) != previous:
            lines.append("")
        previous = (row.chunker, row.params)
        lines.append(" ".join(f"{cell:{spec}}" for cell, (_, spec) in zip(_cells(row), columns, strict=True)))
    return "\n".join(lines)


def verdict(rows: Sequence[Row], chunker: str) -> str:
    """One line: how far ``chunker`` is from the goals (worst rows)."""
    mine = [r for r in rows if r.chunker == chunker]
    fast = [r for r in mine if r.delta in ("64", "whole")]
    one = [r for r in mine if r.delta == "1"]
    growth = [r.growth for r in mine if r.growth is not None]
    parts = []
    if fast:
        worst = min(r.mchars_s for r in fast)
        parts.append(f"64/whole ≥ {worst:.2f} M chars/s {'✓' if worst >= GOAL_MCHARS_S else '✗'}")
    if one:
        worst = max(r.ns_per_event for r in one)
        parts.append(f"1-char event ≤ {worst:,.0f} ns {'✓' if worst <= GOAL_NS_PER_1CHAR_EVENT else '✗'}")
    if growth:
        parts.append(f"growth {min(growth):.2f}..{max(growth):.2f}")
    parts.append("δ-invariant" if all(r.invariant for r in mine) else "NOT δ-invariant")
    parts.append("fences balanced" if all(r.quality.balanced == r.quality.chunks for r in mine) else "fences OPEN")
    return f"{chunker}: " + "; ".join(parts)


def against_naive(rows: Sequence[Row], chunker: str) -> str:
    """One line: ``chunker``'s speed at 64 characters per append over the naive baseline's, per parameter set and
    size (the issue's goal: at least 8 times)."""
    naive = {(r.params, r.size): r.mchars_s for r in rows if r.chunker == "naive baseline" and r.delta == "64"}
    parts = [
        f"{r.params} x{r.size} x{r.mchars_s / naive[(r.params, r.size)]:.2f}"
        for r in rows
        if r.chunker == chunker and r.delta == "64" and naive.get((r.params, r.size))
    ]
    return f"{chunker} over the naive baseline at 64/append (goal: x8 or more): " + ", ".join(parts)


def measure(chunkers: dict[str, Factory], base: str, sizes: Sequence[int], repeat: int, memory: bool) -> list[Row]:
    """Every chunker x parameter set x size x δ, in table order; growth filled in against size / 10."""
    rows: list[Row] = []
    for name, factory in chunkers.items():
        for label, params in PARAMS.items():
            per_char: dict[tuple[int, str], float] = {}
            for size in sizes:
                text = "\n\n".join([base] * size)
                text_map = TextMap(text)
                whole: list[str] | None = None
                for delta, step in reversed(DELTAS.items()):  # the whole text first: the reference chunks
                    appends = split(text, step)
                    times: list[float] = []
                    chunks: list[str] = []
                    for _ in range(repeat):
                        seconds, chunks = feed(factory, params, appends)
                        times.append(seconds)
                    whole = chunks if whole is None else whole
                    row = Row(
                        chunker=name,
                        params=label,
                        size=size,
                        delta=delta,
                        chars=len(text),
                        events=len(appends),
                        chunks=len(chunks),
                        seconds=statistics.median(times),
                        quality=quality(text, text_map, chunks, params.max_chars),
                        invariant=chunks == whole,
                        peak_kib=peak_kib(factory, params, appends) if memory else None,
                    )
                    smaller = per_char.get((size // 10, delta))
                    row.growth = row.ns_per_char / smaller if smaller and size % 10 == 0 else None
                    per_char[(size, delta)] = row.ns_per_char
                    rows.append(row)
    order = list(DELTAS)
    rows.sort(
        key=lambda r: (list(chunkers).index(r.chunker), list(PARAMS).index(r.params), r.size, order.index(r.delta))
    )
    return rows


def load() -> str:
    """The machine's load average (1, 5, 15 minutes) and its cores, to print beside the figures."""
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def main(argv: list[str] | None = None) -> int:
    """Measure and print the table, the goals and each chunker's verdict. Returns the exit status (0)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per row; the median is shown (3)")
    parser.add_argument("--sizes", default="1,10,100", help="copies of the recorded answer, e.g. 1,10 (1,10,100)")
    parser.add_argument("--quick", action="store_true", help="sizes 1,10 and one run per row")
    parser.add_argument("--memory", action="store_true", help="one more run per row under tracemalloc: peak KiB")
    parser.add_argument("--head", type=int, default=0, help="use only the first N characters of the answer")
    parser.add_argument("--cpu", action="store_true", help="time the process's CPU time, not wall time")
    parser.add_argument("--no-baseline", action="store_true", help="measure the project's chunker only")
    parser.add_argument(
        "--chunker",
        default=CHUNKER.__name__,
        help=f"the chunker module(s) to measure, e.g. core.chunking,core.chunking ({CHUNKER.__name__})",
    )
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.cpu else time.perf_counter
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    repeat = args.repeat
    if args.quick:
        sizes, repeat = [s for s in sizes if s <= 10] or [1], 1
    base = recorded_text()
    if args.head:
        base = base[: args.head]
    chunkers = {name: module_factory(importlib.import_module(name)) for name in args.chunker.split(",")}
    if not args.no_baseline:
        chunkers["naive baseline"] = NaiveChunker
    print(f"input: {STREAM.relative_to(ROOT)} ({len(base):,} chars) x{', x'.join(map(str, sizes))}; ", end="")
    print(f"median of {repeat}, {'CPU' if args.cpu else 'wall'} time; Python {sys.version.split()[0]}; {load()}")
    for label, params in PARAMS.items():
        print(
            f"  {label}: ChunkParams({params.min_chars}, {params.max_chars}, {params.break_preference}, {params.unit})"
        )
    rows = measure(chunkers, base, sizes, max(1, repeat), args.memory)
    print(format_table(rows))
    print(f"after: {load()}")
    print(GOALS)
    for name in chunkers:
        print(verdict(rows, name))
    for name in chunkers:
        if name != "naive baseline" and "naive baseline" in chunkers:
            print(against_naive(rows, name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
