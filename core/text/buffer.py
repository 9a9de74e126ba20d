"""A text that grows by appends, kept once as blocks of at most a few thousand characters, never joined whole.

Why blocks: a Python ``str`` takes 1, 2 or 4 bytes a character for all of its characters, as its widest one needs,
so one emoji in an 8.5k-character Markdown answer makes the joined answer 34 KB instead of 8.5 KB. Kept as blocks of
:data:`BLOCK_CHARS`, only the block that holds the emoji is wide. And a text that is never joined whole has no second
copy beside it: a reader that wants a range (:meth:`TextBuffer.slice`) joins that range only, one that wants the
whole text (:meth:`TextBuffer.value`) gets a fresh string that is not kept.

Cost: an append costs O(len(piece)) amortized: pieces wait in a short tail and are joined into the last block (at most
:data:`BLOCK_CHARS` characters copied per :data:`TAIL_PIECES` pieces). A slice costs O(its length + log blocks),
:meth:`TextBuffer.value` O(length), :meth:`TextBuffer.common_with` O(the shorter text).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Protocol

__all__ = ["BLOCK_CHARS", "TAIL_PIECES", "TextBuffer", "TextSource"]

BLOCK_CHARS = 2048
"""A block grows by joined tails up to this many characters (a text given whole may be one larger block)."""
TAIL_PIECES = 32
"""Pieces appended since the last join; more are joined into the last block."""


class TextSource(Protocol):
    """A text read by ranges: what a reader that refers to another's text instead of copying it needs.

    ``generation`` changes whenever text already there changes (a replacement); it stays while the text only grows,
    so a range read under one generation names the same characters for as long as the generation is the same.
    """

    @property
    def length(self) -> int: ...

    @property
    def generation(self) -> int: ...

    def slice(self, start: int, end: int) -> str: ...

    def value(self) -> str: ...


class TextBuffer:
    """An append-only text: blocks (each joined once, at most :data:`BLOCK_CHARS` characters when built from
    appends) and a tail of recent pieces.

    Args:
        text: the text it starts with (kept as one block).
    """

    __slots__ = ("_blocks", "_ends", "_tail", "_tail_chars", "length")

    def __init__(self, text: str = "") -> None:
        self._blocks: list[str] = [text] if text else []
        self._ends: list[int] = [len(text)] if text else []
        """Each block's end position (for bisection)."""
        self._tail: list[str] = []
        self._tail_chars = 0
        self.length = len(text)

    def append(self, piece: str) -> None:
        """Add ``piece`` at the end. Amortized O(len(piece))."""
        if not piece:
            return
        self._tail.append(piece)
        self._tail_chars += len(piece)
        self.length += len(piece)
        if len(self._tail) > TAIL_PIECES or self._tail_chars >= BLOCK_CHARS:
            self._join_tail()

    def _join_tail(self) -> None:
        tail = self._tail[0] if len(self._tail) == 1 else "".join(self._tail)
        self._tail, self._tail_chars = [], 0
        blocks = self._blocks
        if blocks and len(blocks[-1]) + len(tail) <= BLOCK_CHARS:
            blocks[-1] += tail
            self._ends[-1] += len(tail)
        else:
            blocks.append(tail)
            self._ends.append((self._ends[-1] if self._ends else 0) + len(tail))

    def value(self) -> str:
        """The whole text: a new string each time (not kept). O(length)."""
        if not self._tail and len(self._blocks) == 1:
            return self._blocks[0]
        return "".join(self._blocks + self._tail)

    def slice(self, start: int, end: int) -> str:
        """The characters from ``start`` to ``end`` (clamped to the text). O(end - start + log blocks)."""
        start, end = max(0, start), min(end, self.length)
        if start >= end:
            return ""
        self._join_tail()  # at most one join per read: the tail is short
        blocks, ends = self._blocks, self._ends
        k = bisect_right(ends, start)
        out: list[str] = []
        while start < end:
            block = blocks[k]
            begin = ends[k] - len(block)
            stop = min(end, ends[k])
            out.append(block if start == begin and stop == ends[k] else block[start - begin : stop - begin])
            start, k = stop, k + 1
        return out[0] if len(out) == 1 else "".join(out)

    def pieces(self) -> list[str]:
        """The blocks and the tail, in order (their concatenation is the text; read them, never change them)."""
        return self._blocks + self._tail

    def common_with(self, text: str) -> bool:
        """Whether ``text`` and this text agree over the shorter one's length. O(min(len(text), length))."""
        pos, end = 0, len(text)
        for piece in self.pieces():
            if pos >= end:
                return True
            rest = end - pos
            if len(piece) >= rest:
                return piece.startswith(text[pos:])
            if not text.startswith(piece, pos):
                return False
            pos += len(piece)
        return True

    def reset_to(self, text: str) -> None:
        """Keep ``text`` as the whole text, one block (``text`` extends or equals the current text)."""
        self._blocks, self._ends = ([text], [len(text)]) if text else ([], [])
        self._tail, self._tail_chars = [], 0
        self.length = len(text)
