"""Markdown tables in the chunker (issue 25, item 6): a table that fits is never cut between its rows (neither where
line breaks emit nor where a chunk must be cut), a longer one is cut between body rows with its header and delimiter
rows repeated, and the output does not depend on how the text was split into appends."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamrelay.core.chunking import BreakKind, Chunker, ChunkParams, chunk_text
from streamrelay.core.units import LengthUnit

HEAD = "| city | temp |\n|---|---|"


def table(rows: int) -> str:
    return HEAD + "".join(f"\n| city{i} | {i * 7} |" for i in range(rows))


def by_appends(text: str, params: ChunkParams, cuts: list[int]) -> list[str]:
    chunker, out, last = Chunker(params), [], 0
    for at in sorted({c % (len(text) + 1) for c in cuts}):
        out += chunker.append(text[last:at])
        last = at
    out += chunker.append(text[last:])
    return out + chunker.drain(True)


@pytest.mark.parametrize("preference", list(BreakKind))
@pytest.mark.parametrize("min_chars", [1, 30])
def test_a_table_that_fits_is_one_chunk_whatever_breaks_emit(preference: BreakKind, min_chars: int) -> None:
    text = f"Here are the temperatures:\n{table(6)}\nThat is all for today, see you tomorrow."
    params = ChunkParams(min_chars=min_chars, max_chars=len(table(6)) + 5, break_preference=preference)
    chunks = chunk_text(text, params)
    assert table(6) in chunks, chunks


def test_a_table_after_text_in_the_same_paragraph_moves_whole_to_the_next_chunk() -> None:
    text = "Results of the week, one city a row:\n" + table(5)
    chunks = chunk_text(text, ChunkParams(min_chars=1, max_chars=len(table(5)) + 10))
    assert chunks == ["Results of the week, one city a row:", table(5)]


@pytest.mark.parametrize("max_chars", [60, 64, 90, 150])
def test_a_long_table_is_cut_between_body_rows_with_its_header_again(max_chars: int) -> None:
    text = table(20)
    chunks = chunk_text(text, ChunkParams(min_chars=1, max_chars=max_chars))
    assert len(chunks) > 1 and all(len(c) <= max_chars for c in chunks)
    assert all(c.startswith(HEAD + "\n| city") for c in chunks)  # a header, a delimiter and at least one row
    rows = [line for c in chunks for line in c.split("\n")[2:]]
    assert rows == text.split("\n")[2:]  # every body row once, in order


def test_a_header_too_long_to_repeat_is_left_out() -> None:
    chunks = chunk_text(table(10), ChunkParams(min_chars=1, max_chars=50))  # header and delimiter: 26 of 50
    assert chunks[0].startswith(HEAD) and not any(c.startswith(HEAD) for c in chunks[1:])
    assert [line for c in chunks for line in c.split("\n")] == table(10).split("\n")


def test_lines_that_begin_with_a_pipe_without_a_delimiter_row_are_no_table() -> None:
    text = "| not | a table |\n| just | lines |\n| of | pipes |"
    assert chunk_text(text, ChunkParams(min_chars=1, max_chars=40)) == [
        "| not | a table |\n| just | lines |",
        "| of | pipes |",
    ]


def test_a_table_in_a_fence_is_code() -> None:
    text = "```\n" + table(3) + "\n```"
    assert chunk_text(text, ChunkParams(min_chars=1, max_chars=200, break_preference=BreakKind.NEWLINE)) == [text]


@settings(max_examples=150, deadline=None)
@given(
    rows=st.integers(0, 12),
    max_chars=st.integers(40, 200),
    min_chars=st.integers(1, 60),
    preference=st.sampled_from(list(BreakKind)),
    cuts=st.lists(st.integers(0, 2000), max_size=12),
    utf16=st.booleans(),
)
def test_the_chunks_do_not_depend_on_how_the_text_was_appended(
    rows: int, max_chars: int, min_chars: int, preference: BreakKind, cuts: list[int], utf16: bool
) -> None:
    text = f"Intro line 😀.\n{table(rows)}\n\nAfter.\n| x |\n|---|\n| y |"
    unit = LengthUnit.UTF16 if utf16 else LengthUnit.CHARS
    params = ChunkParams(
        min_chars=min(min_chars, max_chars), max_chars=max_chars, break_preference=preference, unit=unit
    )
    assert by_appends(text, params, cuts) == chunk_text(text, params)
