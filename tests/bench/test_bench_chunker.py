"""The chunker benchmark runs (bench/bench_chunker.py, issue 13): its main on a tiny input, so it cannot rot."""

from __future__ import annotations

import pytest

from bench import bench_chunker, chunk_quality
from streamrelay.core.chunking import ChunkParams


def test_the_chunker_bench_prints_its_table_goals_and_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_chunker.main(["--sizes", "1,10", "--repeat", "1", "--head", "600", "--memory"]) == 0
    out = capsys.readouterr().out
    assert "M ch/s" in out and "peak KiB" in out and "goals:" in out
    ratio = f"{bench_chunker.CHUNKER.__name__} over the naive baseline at 64/append (goal: x8 or more): "
    assert ratio in out  # the x-naive goal's line, which names the sizes too: not a row
    rows = [line for line in out.splitlines() if (" x1 " in line or " x10 " in line) and not line.startswith(ratio)]
    assert len(rows) == 2 * 2 * 2 * 4  # chunkers x params x sizes x deltas
    assert all(line.split()[-2] == "yes" for line in rows if line.startswith(bench_chunker.CHUNKER.__name__))
    assert f"{bench_chunker.CHUNKER.__name__}: " in out and "naive baseline: " in out


def test_the_baseline_cuts_at_its_last_paragraph_break_within_max() -> None:
    params = ChunkParams(0, 12)
    chunker = chunk_quality.NaiveChunker(params)
    assert chunker.append("aaa\n\nbbb") == ["aaa"]
    assert chunker.append(" cccc dddd") == ["bbb cccc ddd"]
    assert chunker.drain(force=True) == ["d"]


def test_quality_finds_each_chunks_place_and_its_paragraph_end() -> None:
    text = "one two\n\n```\ncode\n```\n\nthree"
    chunks = ["one two", "```\ncode\n```", "three"]
    q = chunk_quality.quality(text, chunk_quality.TextMap(text), chunks, 40)
    assert q.aligned and (q.para_ends, q.para_windows, q.balanced) == (2, 2, 3)
    cut = ["one two\n\n```\nco\n```", "```\nde\n```\n\nthree"]
    q = chunk_quality.quality(text, chunk_quality.TextMap(text), cut, 20)
    assert q.aligned and (q.para_ends, q.para_windows) == (0, 1)
