"""The line scanner's one-match classification of marker lines (``_LINE_HEAD``) says what the character-by-character
prefix read (``core.chunking.lines.read_prefix``) says, for every line it classifies and every state before it."""

from __future__ import annotations

import itertools
import random

from streamrelay.core.chunking import Chunker, ChunkParams
from streamrelay.core.chunking.lines import QSTEP, RUN, TEXT, LineRead, ReaderState, read_prefix
from streamrelay.core.chunking.scanner import _LINE_HEAD, _SIMPLE_ITEM_READ, _SLOW_START

CHARS = [" ", "-", "*", "+", "1", "9", "0", ".", ")", "`", "~", ">", "\t", "a", "[", "\xa0", "٣"]
STATES = [
    ReaderState(lists=lists, prev_blank=blank)
    for lists in ([], [2], [2, 4], [3], [5, 9], [QSTEP + 2], [2, QSTEP + 2])
    for blank in (True, False)
]


def _lines() -> list[str]:
    rnd = random.Random(24)
    lines = {"".join(t) for n in range(1, 4) for t in itertools.product(CHARS, repeat=n)}
    lines |= {"".join(rnd.choice(CHARS) for _ in range(rnd.randint(4, 12))) for _ in range(3000)}
    lines |= {"1. **Key** words", "12) x", "123456789. x", "1234567890. x", "   - x", "    - x", "- - -", "* * *"}
    return sorted(line for line in lines if line[0] in _SLOW_START)


def _expected(line: str, state: ReaderState) -> tuple[object, ...] | None:
    """What the scanner reads for ``line`` after ``state`` from the match alone (None: the general path reads it)."""
    m = _LINE_HEAD.match(line)
    if m is None:
        return None
    before = state.lists
    ended = [] if state.prev_blank and before else before  # a line at column 0 after a blank line ends every item
    if m.lastgroup == "simple":
        r = _SIMPLE_ITEM_READ
        return (r.kind, r.q, r.start, r.body, r.quotes, r.col, r.lists, r.blank, r.implicit_end, r.new_item)
    if m.lastgroup == "text":
        return (TEXT, 0, 0, 0, 0, 0, ended, False, False, -1)
    if m.lastgroup == "run":
        return (RUN, 0, 0, 0, 0, 0, ended, False, False, -1)
    e, s = m.end(), m.end("ind")
    return (TEXT, s, e, e, 0, e, [x for x in before if x <= s] + [e], False, False, e - 1)


def _fields(r: LineRead) -> tuple[object, ...]:
    return (r.kind, r.q, r.start, r.body, r.quotes, r.col, r.lists, r.blank, r.implicit_end, r.new_item)


def test_line_head_agrees_with_read_prefix() -> None:
    checked = 0
    for line in _lines():
        for state in STATES:
            want = _expected(line, state)
            if want is None:
                continue
            for break_open in (True, False):
                got = _fields(read_prefix(line, len(line), state, break_open, True))
                assert got == want, (line, state, break_open)
                checked += 1
    assert checked > 10_000


def test_marker_lines_chunk_as_whole_and_in_pieces() -> None:
    """Items, ordered and nested items, fences, closers, thematic breaks and empty fence lines: the same chunks
    whatever the appends (each path of the scanner: whole lines, lines in pieces, one character at a time)."""
    text = (
        "Intro line\n\n1. **First** item\n2) second item\n   - nested `code`\n     continued words of it\n\n"
        "     after a blank line\n   back in the outer item\n  - [link](x) item\n      ```\n      in item\n"
        "      ```\n---\n\n"
        "```python\ncode line\n\n    indented\n```\n\n* * *\n-x text\n12345 digits\n~~~ info\n~~~~\n~~~\nafter\n"
    ) * 8
    for params in (ChunkParams(1, 30), ChunkParams(1, 60), ChunkParams(20, 200), ChunkParams(200, 900)):
        whole = Chunker(params)
        expected = whole.append(text) + whole.drain(force=True)
        for size in (1, 7, 64):
            chunker = Chunker(params)
            got: list[str] = []
            for i in range(0, len(text), size):
                got += chunker.append(text[i : i + size])
            got += chunker.drain(force=True)
            assert got == expected, (params, size)
