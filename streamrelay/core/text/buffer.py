"""A text that grows by appends, kept once as blocks of one byte a character, never joined whole.

Why: a Python ``str`` takes 1, 2 or 4 bytes a character for all of its characters, as its widest one needs, so one
emoji in an 8.5k-character Markdown answer makes the joined answer 34 KB instead of 8.5 KB, and one arrow or em dash
makes it 17 KB. Here every block is Latin-1 (one byte a character): the few characters past it (the recorded
answer's 6 emoji and 33 arrows, dashes and signs) are kept apart with their positions and put back in place when a
range is read (an 8.5k answer: about 9 KB). And a text that is never joined whole has no second copy beside it: a
reader that wants a range (:meth:`TextBuffer.slice`) joins that range only, one that wants the whole text
(:meth:`TextBuffer.value`) gets a fresh string that is not kept.

Cost: an append costs O(len(piece)) amortized: pieces wait in a short tail and are joined into the last block (at most
:data:`BLOCK_CHARS` characters copied per :data:`TAIL_PIECES` pieces; a join with characters past Latin-1 in it takes
a Python step for each of them). A slice costs O(its length + log blocks + the characters past Latin-1 in it),
:meth:`TextBuffer.value` O(length), :meth:`TextBuffer.common_with` O(the shorter text).
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right
from typing import Protocol

__all__ = ["BLOCK_CHARS", "TAIL_PIECES", "LinearText", "Pinned", "TextBuffer", "TextSource"]

BLOCK_CHARS = 2048
"""A block grows by joined tails up to this many characters (a text given whole may be one larger block)."""
TAIL_PIECES = 32
"""Pieces appended since the last join; more are joined into the last block."""
_WIDE = re.compile("[^\x00-\xff]")
"""A character past Latin-1."""


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
    """An append-only text: blocks of one byte a character (each joined once, at most :data:`BLOCK_CHARS` characters
    when built from appends), the few characters past Latin-1 kept apart, and a tail of recent pieces.

    Args:
        text: the text it starts with (kept as one block).
    """

    __slots__ = ("_blocks", "_ends", "_stored", "_tail", "_xchars", "_xpos", "length")

    def __init__(self, text: str = "") -> None:
        self._xpos = array("q")
        """Positions of the characters past Latin-1 (U+0100 on), in order: a block holds ``?`` there."""
        self._xchars = ""
        """Those characters, in the same order (one string: a few dozen in a long answer)."""
        self._blocks: list[str] = [self._narrow(text, 0)] if text else []
        self._ends: list[int] = [len(text)] if text else []
        """Each block's end position (for bisection)."""
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

    def _narrow(self, text: str, at: int) -> str:
        """``text`` (starting at position ``at``) as a string of one byte a character: each character past Latin-1 is
        noted apart and stands as ``?``. O(len(text)) in C, plus a Python step per such character."""
        if text.isascii() or _WIDE.search(text) is None:  # (in C: ``max(text)`` makes a string per character)
            return text
        wide = [(at + m.start(), m.group()) for m in _WIDE.finditer(text)]  # found in C: a few dozen in an answer
        self._xpos.extend(p for p, _ in wide)
        self._xchars += "".join(ch for _, ch in wide)
        return text.encode("latin-1", "replace").decode("latin-1")

    def _join_tail(self) -> None:
        """The tail's pieces joined into the last block (or a new one when it has no room left)."""
        tail = self._tail
        if not tail:
            return
        self._tail = []
        joined = self._narrow(tail[0] if len(tail) == 1 else "".join(tail), self._stored)
        blocks = self._blocks
        self._stored += len(joined)
        if blocks and len(blocks[-1]) + len(joined) <= BLOCK_CHARS:
            blocks[-1] += joined
            self._ends[-1] += len(joined)
        else:
            blocks.append(joined)
            self._ends.append(self._stored)

    def value(self) -> str:
        """The whole text: a new string each time (not kept). O(length)."""
        if not self._tail and len(self._blocks) == 1 and not self._xpos:
            return self._blocks[0]
        return self.slice(0, self.length)

    def slice(self, start: int, end: int) -> str:
        """The characters from ``start`` to ``end`` (clamped to the text). O(end - start + log blocks)."""
        start, end = max(0, start), min(end, self.length)
        if start >= end:
            return ""
        self._join_tail()  # at most one join per read: the tail is short
        blocks, ends = self._blocks, self._ends
        k = bisect_right(ends, start)
        out: list[str] = []
        a = start
        while a < end:
            block = blocks[k]
            begin = ends[k] - len(block)
            stop = min(end, ends[k])
            out.append(block if a == begin and stop == ends[k] else block[a - begin : stop - begin])
            a, k = stop, k + 1
        text = out[0] if len(out) == 1 else "".join(out)
        xpos = self._xpos
        if not xpos:
            return text
        i, j = bisect_left(xpos, start), bisect_left(xpos, end)
        if i == j:
            return text
        parts, prev, xchars = [], 0, self._xchars  # the characters past Latin-1 put back in their places
        for x in range(i, j):
            at = xpos[x] - start
            parts.append(text[prev:at])
            parts.append(xchars[x])
            prev = at + 1
        parts.append(text[prev:])
        return "".join(parts)

    def pin(self, start: int, end: int) -> Pinned:
        """The range from ``start`` to ``end`` (clamped to the text) as a :class:`Pinned` (no copy). O(1)."""
        start, end = max(0, start), min(end, self.length)
        return Pinned(((self, start, max(start, end)),))

    def pieces(self) -> list[str]:
        """The text in pieces, in order (their concatenation is the text): the blocks, each built with its characters
        past Latin-1 back in place (the tail joined first). O(length)."""
        self._join_tail()
        ends = self._ends
        return [self.slice(ends[k] - len(block), ends[k]) for k, block in enumerate(self._blocks)]

    def common_with(self, text: str) -> bool:
        """Whether ``text`` and this text agree over the shorter one's length. O(min(len(text), length))."""
        n = min(len(text), self.length)
        return text.startswith(self.slice(0, n)) if len(text) > n else self.slice(0, n) == text

    def reset_to(self, text: str) -> None:
        """Keep ``text`` as the whole text, one block (``text`` extends or equals the current text)."""
        self._xpos, self._xchars = array("q"), ""
        self._blocks, self._ends = ([self._narrow(text, 0)], [len(text)]) if text else ([], [])
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
        messages = self._messages
        if len(messages) == 1:  # the common case, one message: its own slice (what its one pinned range gives)
            for text in messages.values():
                return text.slice(start, end)
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
