"""Attacks on the chunker's one-match marker lines (``_LINE_HEAD``, ``_head_line``, ``_closer_line``): generated
Markdown of list markers, ordered items, indents, tabs, fences of both characters and varying lengths, closers with
trailing text, quotes, CRLF and unicode spaces. The chunks must be those of the general path (the scanner with its
whole-line fast path off) and must not depend on how the text is appended (whole, or 1, 7, 64 characters at a time)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamrelay.core.chunking import BreakKind, Chunker, ChunkParams
from streamrelay.core.chunking.lines import read_prefix
from streamrelay.core.chunking.scanner import LineScanner
from streamrelay.core.units import LengthUnit
from tests.unit.test_chunker_heads import STATES, _expected, _fields

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

HEADS = [
    "",
    " ",
    "  ",
    "   ",
    "    ",
    "\t",
    "> ",
    ">",
    "> - ",
    "- ",
    "* ",
    "+ ",
    "-\t",
    "1. ",
    "1) ",
    "12. ",
    "123456789) ",
    "1234567890. ",
    "  - ",
    "   1. ",
    " * ",
    "- - ",
    "1. - ",
    "\u00a0- ",
    "\u2003",
    "* **",
    " * ***",
    "   * ** ",
]
BODIES = [
    "word",
    "**bold** text",
    "`code` x",
    "[link](https://e.x/a)",
    "😀 emoji 👨\u200d👩\u200d👧",
    "```",
    "````",
    "~~~",
    "~~~~~",
    "```py",
    "``` x ` y",
    "~~~ info `x`",
    "``` trailing",
    "```   ",
    "~~~\t",
    "---",
    "- - -",
    "***",
    "* * *",
    "-x",
    "12345",
    "1.x",
    "",
    "中文字。",
    "a sentence. Another one! ",
]
ENDS = ["\n", "\n", "\n", "\r\n", "\n\n"]


@st.composite
def markdown(draw: st.DrawFn) -> str:
    lines = draw(
        st.lists(
            st.tuples(st.sampled_from(HEADS), st.sampled_from(BODIES), st.sampled_from(ENDS)), min_size=1, max_size=40
        )
    )
    return "".join(h + b + e for h, b, e in lines)


PARAMS = st.sampled_from(
    [
        ChunkParams(1, 30),
        ChunkParams(1, 60),
        ChunkParams(20, 200),
        ChunkParams(0, 900),
        ChunkParams(10, 80, BreakKind.NEWLINE),
        ChunkParams(10, 80, BreakKind.SENTENCE),
        ChunkParams(5, 50, unit=LengthUnit.UTF16),
    ]
)


def _general_path_only(mp: pytest.MonkeyPatch) -> None:
    """Turn the scanner's whole-line fast paths off: the one-line path (``_fast_line``: marker lines by one match) and
    the loop over ordinary lines (``_ordinary``: lines read in one loop as ``_fast_line`` would read them)."""
    mp.setattr(LineScanner, "_fast_line", lambda self, line, units: False)
    mp.setattr(LineScanner, "_ordinary", False)


def _chunks(params: ChunkParams, text: str, size: int) -> list[str]:
    chunker = Chunker(params)
    got: list[str] = []
    for i in range(0, len(text), size):
        got += chunker.append(text[i : i + size])
    return got + chunker.drain(force=True)


@SETTINGS
@given(text=markdown(), params=PARAMS)
def test_marker_lines_chunk_as_the_general_path(text: str, params: ChunkParams) -> None:
    """Whole and in pieces of 1, 7 and 64: the fast path's chunks are the general path's (today's merge's claim)."""
    for size in (len(text), 1, 7, 64):
        fast = _chunks(params, text, size)
        with pytest.MonkeyPatch.context() as mp:
            _general_path_only(mp)
            general = _chunks(params, text, size)
        assert fast == general, size


@pytest.mark.xfail(
    strict=True,
    reason="older than today's merge (same chunks before c974a1d): one character per append cuts before a CRLF "
    "line that the whole text (and 7 or 64 per append) cuts inside, a thematic break split '- -' / '-'",
)
def test_chunks_do_not_depend_on_the_appends_crlf_item_after_quoted_fence() -> None:
    text = "> ~~~~~\n   1. ````\r\n   1. - - -\n"
    params = ChunkParams(1, 30)
    expected = _chunks(params, text, len(text))
    for size in (1, 7, 64):
        assert _chunks(params, text, size) == expected, size


THEMATIC_BREAKS = ["* **", "* ***", "* ** *", "* **\t", " * **", "  * ** ", "   * ***", "* ****"]


def test_a_star_thematic_break_after_one_space_is_no_item() -> None:
    """``* **`` (one star, a space, two stars: a thematic break, which wins over an item) was read as a list item
    by ``_LINE_HEAD``'s ``\\*\\*`` lookahead (the bold-text case), at column 0 (older: ``_SIMPLE_ITEM``) and, since
    today, 1-3 spaces in: its own lines and the lines after it lost their indentation in the chunks."""
    for line in THEMATIC_BREAKS:
        for state in STATES:
            want = _expected(line, state)
            if want is not None:
                assert _fields(read_prefix(line, len(line), state, True, True)) == want, (line, state)


def test_a_star_thematic_break_chunks_as_the_general_path() -> None:
    texts = [
        "  * ***\n* **\n    code line here\n  ```py\n  * ***\n    code line here\n```\n  - nested\n  - nested\n",
        "  - nested\ntext\n * **\n  text in item\ntext\n   * ** *\n* **\t\n  text in item\ntext\n * **\n",
        "  ```\n  ```py\n```\n* **\n    code line here\n> quote\n```\n  ```py\n  text in item\n- item\n",
    ]
    for text in texts:
        for params in (ChunkParams(1, 30), ChunkParams(10, 60)):
            fast = _chunks(params, text, len(text))
            with pytest.MonkeyPatch.context() as mp:
                _general_path_only(mp)
                general = _chunks(params, text, len(text))
            assert fast == general, (text, params)


def test_line_heads_agree_with_read_prefix_around_other_whitespace() -> None:
    """CR (a CRLF line), form feed, vertical tab, unicode spaces and stars: ``_LINE_HEAD`` reads what ``read_prefix``
    reads (test_chunker_heads.py's alphabet has none of them)."""
    chars = [" ", "-", "*", "1", ".", ")", "`", "~", "\t", "\r", "\f", "\v", "\u2003", "a"]
    lines = {"".join(t) for n in range(1, 5) for t in itertools.product(chars, repeat=n)}
    checked = 0
    for line in sorted(lines):
        for state in STATES:
            want = _expected(line, state)
            if want is not None:
                assert _fields(read_prefix(line, len(line), state, True, True)) == want, (line, state)
                checked += 1
    assert checked > 10_000
