"""A text that grows by appends, kept once as blocks of at most a few thousand characters, never joined whole.

Why blocks: a Python ``str`` takes 1, 2 or 4 bytes a character for all of its characters, as its widest one needs,
so one emoji in an 8.5k-character Markdown answer makes the joined answer 34 KB instead of 8.5 KB. Kept as blocks of
at most :data:`BLOCK_CHARS`, an emoji's block grown only by pieces that have one too, only the pieces that hold an emoji
are 4 bytes a character
(the recorded answer's six emoji: 12 KB instead of 34). And a text that is never joined whole has no second copy
beside it: a reader that wants a range (:meth:`TextBuffer.slice`) joins that range only, one that wants the whole text
(:meth:`TextBuffer.value`) gets a fresh string that is not kept.

Cost: an append costs O(len(piece)) amortized: pieces wait in a short tail and are joined into the last block (at most
:data:`BLOCK_CHARS` characters copied per :data:`TAIL_PIECES` pieces). A slice costs O(its length + log blocks),
:meth:`TextBuffer.value` O(length), :meth:`TextBuffer.common_with` O(the shorter text).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Protocol

__all__ = ["BLOCK_CHARS", "TAIL_PIECES", "LinearText", "Pinned", "TextBuffer", "TextSource"]

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

    def pin(self, start: int, end: int) -> Pinned: ...


class Pinned:
    """A range of a text that only grows (:class:`TextBuffer`: the characters it holds never change), kept as references
    to it, not as a string of its own: what a message part showed once its call is done (the run's answer holds the
    characters once; a ``str`` of an 8.5k answer with one emoji in it is 34 KB). It stays exact whatever the text does
    later: a replaced message is a new buffer, the old one is kept alive by the pin.

    Args:
        pieces: the range's pieces in order: ``(buffer, start, end)`` or a string (a separator between messages).
    """

    __slots__ = ("length", "pieces")

    def __init__(self, pieces: tuple[tuple[TextBuffer, int, int] | str, ...]) -> None:
        self.pieces = pieces
        self.length = sum(len(p) if isinstance(p, str) else p[2] - p[1] for p in pieces)

    def value(self) -> str:
        """The text: a new string each time (not kept). O(length)."""
        out = [p if isinstance(p, str) else p[0].slice(p[1], p[2]) for p in self.pieces]
        return out[0] if len(out) == 1 else "".join(out)

    def slice(self, start: int, end: int) -> str:
        """The characters from ``start`` to ``end``. O(length)."""
        return self.value()[start:end]

    def __len__(self) -> int:
        return self.length


class TextBuffer:
    """An append-only text: blocks (each joined once, at most :data:`BLOCK_CHARS` characters when built from
    appends) and a tail of recent pieces.

    Args:
        text: the text it starts with (kept as one block).
    """

    __slots__ = ("_blocks", "_ends", "_stored", "_tail", "_wide", "length")

    def __init__(self, text: str = "") -> None:
        self._blocks: list[str] = [text] if text else []
        self._ends: list[int] = [len(text)] if text else []
        """Each block's end position (for bisection)."""
        self._wide: list[bool] = [_astral(text)] if text else []
        """Whether each block holds characters outside the BMP (4 bytes a character)."""
        self._stored = len(text)
        """Characters in the blocks (the tail's follow)."""
        self._tail: list[str] = []
        self.length = len(text)

    @property
    def generation(self) -> int:
        """Always 0: text already in it never changes (:class:`TextSource`; :meth:`reset_to` only extends it)."""
        return 0

    def append(self, piece: str) -> None:
        """Add ``piece`` at the end. Amortized O(len(piece))."""
        if piece:
            tail = self._tail
            tail.append(piece)
            self.length += len(piece)
            if len(tail) > TAIL_PIECES or self.length - self._stored >= BLOCK_CHARS:
                self._join_tail()

    def _join_tail(self) -> None:
        """The tail's pieces joined into the last block, or into a block of their own when that block has room no more
        or holds characters outside the BMP and they do not (or the other way round: then each run of pieces alike goes
        its own way), so an emoji makes only its own few pieces 4 bytes a character."""
        tail = self._tail
        if not tail:
            return
        self._tail = []
        joined = tail[0] if len(tail) == 1 else "".join(tail)
        wide = _astral(joined)
        if not wide or len(tail) == 1 or (self._blocks and self._wide[-1]):
            self._add_block(joined, wide)  # the common case: one join, no piece looked at alone
            return
        start, wide = 0, _astral(tail[0])
        for k in range(1, len(tail) + 1):
            next_wide = _astral(tail[k]) if k < len(tail) else not wide
            if next_wide != wide:
                self._add_block(tail[start] if k - start == 1 else "".join(tail[start:k]), wide)
                start, wide = k, next_wide

    def _add_block(self, text: str, wide: bool) -> None:
        blocks = self._blocks
        self._stored += len(text)
        if blocks and len(blocks[-1]) + len(text) <= BLOCK_CHARS and self._wide[-1] == wide:
            blocks[-1] += text
            self._ends[-1] += len(text)
        else:
            blocks.append(text)
            self._ends.append(self._stored)
            self._wide.append(wide)

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

    def pin(self, start: int, end: int) -> Pinned:
        """The range from ``start`` to ``end`` (clamped to the text) as a :class:`Pinned` (no copy). O(1)."""
        start, end = max(0, start), min(end, self.length)
        return Pinned(((self, start, max(start, end)),))

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
        self._blocks, self._ends, self._wide = ([text], [len(text)], [_astral(text)]) if text else ([], [], [])
        self._tail, self._stored = [], len(text)
        self.length = len(text)


class LinearText:
    """Several texts read as one, joined by ``sep`` (empty ones skipped), in key order, without joining the whole: a
    source's messages as :meth:`core.text.assembler.TextAssembler.answer` gives them (:meth:`TextAssembler.view
    <core.text.assembler.TextAssembler.view>` makes one), read by ranges (:class:`TextSource`).

    Args:
        messages: the texts by key (the owner's own dict: it adds and replaces texts in it, this reads them).
        generations: the owner's generation per source (:attr:`TextSource.generation`), read under ``key``.
        key: the source whose generation this text has.
        sep: what stands between two non-empty texts.
    """

    __slots__ = ("_generations", "_key", "_messages", "_sep")

    def __init__(
        self, messages: dict[int, TextBuffer], generations: dict[str | None, int], key: str | None, sep: str
    ) -> None:
        self._messages, self._generations, self._key, self._sep = messages, generations, key, sep

    def _texts(self) -> list[TextBuffer]:
        messages = self._messages
        if len(messages) == 1:
            return [t for t in messages.values() if t.length]
        return [messages[m] for m in sorted(messages) if messages[m].length]

    @property
    def generation(self) -> int:
        return self._generations.get(self._key, 0)

    @property
    def length(self) -> int:
        messages = self._messages
        if len(messages) == 1:  # the common case: one message, O(1)
            for text in messages.values():
                return text.length
        texts = self._texts()
        return sum(t.length for t in texts) + len(self._sep) * max(0, len(texts) - 1)

    def slice(self, start: int, end: int) -> str:
        """The characters from ``start`` to ``end``. O(end - start + messages)."""
        return self.pin(start, end).value()

    def value(self) -> str:
        return self._sep.join(t.value() for t in self._texts())

    def pin(self, start: int, end: int) -> Pinned:
        """The characters from ``start`` to ``end`` as a :class:`Pinned`: ranges of the messages' buffers and the
        separators between them (no copy of the text). O(messages)."""
        out: list[tuple[TextBuffer, int, int] | str] = []
        pos = 0
        for k, text in enumerate(self._texts()):
            if k:
                if start < pos + len(self._sep) and end > pos:
                    out.append(self._sep[max(0, start - pos) : end - pos])
                pos += len(self._sep)
            if start < pos + text.length and end > pos:
                out.append((text, max(0, start - pos), min(text.length, end - pos)))
            pos += text.length
            if pos >= end:
                break
        return Pinned(tuple(out))


def _astral(text: str) -> bool:
    """Whether ``text`` holds a character outside the BMP (so a ``str`` of it takes 4 bytes a character). O(len(text))
    in C."""
    return not text.isascii() and len(text.encode("utf-16-le", "surrogatepass")) > 2 * len(text)
