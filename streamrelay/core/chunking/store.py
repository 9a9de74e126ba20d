"""The chunker's text store: the pending text, read where it is kept, with only offsets of its own.

The line still arriving is kept as the pieces it arrived in (joined once, when read). A complete line keeps no
object and no copy: its start position (an ``array`` of machine integers) and what its reading left that a cut
needs and its text cannot tell again (:data:`LineMeta`: most lines none). Its text is read where it is kept: the
run's one copy of the answer when the chunker is given it (:meth:`TextStore.share`: a chunker position plus an offset
is a position of that text), else the store's own list of line texts (a chunker used alone: block mode,
:func:`core.chunking.chunk_text`; the strings the appends were cut into, not copies). Units before a position are
counted from the characters outside the BMP seen so far (UTF-16: two units each), never kept per line.

This is the chunker's one interface to the text itself (positions are absolute code point offsets from the stream's
first appended character): writes are :meth:`TextStore.add`, :meth:`TextStore.take_current`,
:meth:`TextStore.set_current`, :meth:`TextStore.push_line` and :meth:`TextStore.push_lines`; reads are
:meth:`TextStore.current`, :meth:`TextStore.slice`, :meth:`TextStore.char_at`, :meth:`TextStore.cum_at`,
:meth:`TextStore.line_at` and :meth:`TextStore.lines_from`; :meth:`TextStore.forget` releases what lies before the
pending text.
"""

from __future__ import annotations

import codecs
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Protocol

from streamrelay.core.chunking.lines import Fence, LineRead
from streamrelay.core.units import LengthUnit

__all__ = ["LineMeta", "TextReader", "TextStore", "astral_positions", "units_of"]

LineMeta = None | Fence | list[int] | tuple[int, Fence | None, bool, LineRead, list[int]]
"""What a complete line's reading left that a cut needs (the line scanner writes and reads it): None, a text line
outside fences and containers (breaks from its start, CJK full stops make breaks, no container context); a
:class:`~core.chunking.lines.Fence`, a content line of that top-level fence read whole (its body is where its
indentation ends); a list, a plain bullet item read whole (the items open before it); else ``(body, fence its content
lies in or None, whether CJK full stops make breaks, its prefix read, the items open before it)``."""


class TextReader(Protocol):
    """A text read by ranges (:class:`core.text.buffer.TextSource`)."""

    def slice(self, start: int, end: int) -> str: ...


_UTF16 = codecs.getencoder("utf-16-le")
"""The UTF-16 encoder itself: ``str.encode("utf-16-le")`` looks the codec up by name on every call (only UTF-8, Latin-1
and ASCII are found without the lookup), several times the cost of encoding a short text."""
_HIGH_SURROGATES = (b"\xd8", b"\xd9", b"\xda", b"\xdb")
"""The high byte of a UTF-16 high surrogate (U+D800..U+DBFF), which begins each character outside the BMP."""


def astral_positions(text: str, pos: int) -> list[int]:
    """Positions of the characters of ``text`` outside the BMP (two UTF-16 code units each), ``text`` starting at
    absolute position ``pos``, in order.

    Found in its UTF-16-LE encoding by ``bytes.find`` (memchr) of the high surrogates' high byte at odd offsets: a
    regular-expression search for the range in the text costs about 10 ns a character (0.85 ms for the 85k answer),
    the encoding and the finds about 1. The ``k``-th high surrogate (from 0) at code unit ``u`` is character
    ``u - k``. O(len(text)) in C plus O(characters found)."""
    data = _UTF16(text)[0]
    units: list[int] = []
    for byte in _HIGH_SURROGATES:
        i = data.find(byte)
        while i >= 0:
            if i & 1:  # a code unit's high byte (little-endian), not the low byte of some other character
                units.append(i >> 1)
            i = data.find(byte, i + 1)
    units.sort()
    return [pos + u - k for k, u in enumerate(units)]


def units_of(text: str, utf16: bool) -> int:
    """Length of ``text`` in code points, or in UTF-16 code units when ``utf16``."""
    if not utf16 or text.isascii():
        return len(text)
    return len(_UTF16(text)[0]) >> 1


class TextStore:
    """Complete lines as offsets (``starts``, ``meta``) and the current line's pieces (starting at ``cur_pos``).

    Args:
        unit: how units are counted (``cum`` values).
        pos: absolute position where the store begins. cum: units before it.
        drops: where each info string dropped from the text goes (:attr:`drops`; the chunker's, for every block).

    Attributes:
        add: appends a piece (no newline in it) to the current line; O(1), it is joined when read (the
            pieces list's own ``append``, so that a one-character delta costs no Python call).
        cur_pos: absolute position of the current line's first character. cur_cum: units before it.
        starts: each complete line's start (from index ``lo``: earlier ones are forgotten). meta: each one's
            :data:`LineMeta`.
    """

    __slots__ = (
        "_astral",
        "_c",
        "_lines",
        "_off",
        "_parts",
        "_src",
        "add",
        "cur_cum",
        "cur_pos",
        "drops",
        "lo",
        "meta",
        "starts",
        "utf16",
    )

    def __init__(self, unit: LengthUnit, pos: int, cum: int, drops: list[tuple[int, int]] | None = None) -> None:
        self.utf16 = unit is LengthUnit.UTF16
        self.starts = array("q")
        self.meta: list[LineMeta] = []
        self.lo = 0
        self._lines: list[str] | None = []
        """The complete lines' texts (without their newline), parallel to ``starts``; None while the text is read
        from a shared source."""
        self._src: TextReader | None = None
        self._off = 0
        """A chunker position plus this is a position of ``_src``."""
        self._astral: list[int] = []
        """Positions of the complete lines' characters outside the BMP (UTF-16 only), from the first not forgotten."""
        self._c = cum - pos
        """Units before position ``p`` of a complete line: ``p + _c + (characters of _astral before p)``."""
        self.drops: list[tuple[int, int]] = [] if drops is None else drops
        """``(position, characters)`` of each info string dropped (:meth:`set_current`): the chunker's text then
        lacks characters the appends had, from that position on."""
        self._parts: list[str] = []
        self.add: Callable[[str], object] = self._parts.append
        """Append a piece (no newline in it) to the current line. Cost O(1): it is joined when read."""
        self.cur_pos = pos
        self.cur_cum = cum

    def share(self, source: TextReader, offset: int) -> None:
        """Read complete lines from ``source`` (the text the appends are kept in, growing with them) instead of
        keeping them: chunker position ``p`` is ``source`` position ``p + offset``. Call it before the first append
        (nothing is kept then), or any time: the lines kept are dropped."""
        self._src, self._off, self._lines = source, offset, None

    @property
    def shared(self) -> bool:
        """True while complete lines are read from a shared source (:meth:`share`)."""
        return self._src is not None

    def appended(self, a: int, b: int) -> str:
        """The appended text between absolute positions ``a`` and ``b``, read in the shared source (only while
        :attr:`shared`; ``b`` not past what was appended). O(b - a)."""
        assert self._src is not None
        return self._src.slice(a + self._off, b + self._off)

    def _unshare(self) -> None:
        """Keep the complete lines' texts from now on (the chunker's text leaves the shared one)."""
        lo = self.lo
        self._lines = ["" if k < lo else self._line(k) for k in range(len(self.starts))]
        self._src = None

    def has_current(self) -> bool:
        """True when the current line holds some text."""
        return bool(self._parts)

    def current(self) -> str:
        """The current line so far (joined once)."""
        parts = self._parts
        if len(parts) > 1:
            parts[:] = ["".join(parts)]
        return parts[0] if parts else ""

    def take_current(self) -> str:
        """Remove the current line's text and return it (the caller adds it again, longer)."""
        parts = self._parts
        text = "".join(parts)  # the piece itself when there is one
        parts.clear()
        return text

    def set_current(self, text: str) -> None:
        """Replace the current line's text by ``text`` (a prefix of it: an opener whose info string goes). The
        chunker's text then differs from a shared source's: complete lines are kept from now on."""
        dropped = len(self.current()) - len(text)
        if dropped > 0:
            self.drops.append((self.cur_pos + len(text), dropped))
            if self._src is not None:
                self._unshare()
        self._parts[:] = [text]

    def push_line(self, line: str, cum: int, meta: LineMeta) -> None:
        """The current line ended: ``line`` is its text (without the newline, which follows it), ``cum`` the units
        before the next line, ``meta`` what a cut needs of it (:data:`LineMeta`)."""
        pos = self.cur_pos
        self.starts.append(pos)
        self.meta.append(meta)
        lines = self._lines
        if lines is not None:
            lines.append(line)
        self._parts.clear()
        end = pos + len(line) + 1
        if cum - self.cur_cum != end - pos:  # characters outside the BMP (UTF-16): where they are
            self._astral.extend(astral_positions(line, pos))
        self.cur_pos = end
        self.cur_cum = cum

    def push_lines(self, starts: list[int], lines: list[str], meta: list[LineMeta], cum: int) -> None:
        """Complete lines read at once (:meth:`push_line` for each, in one call): ``starts`` their positions (the
        first at ``cur_pos``, each line followed by its newline), ``lines`` their texts, ``meta`` what a cut needs of
        each, ``cum`` the units before the next line."""
        pos, end = self.cur_pos, starts[-1] + len(lines[-1]) + 1
        self.starts.extend(starts)
        self.meta.extend(meta)
        kept = self._lines
        if kept is not None:
            kept.extend(lines)
        self._parts.clear()
        if cum - self.cur_cum != end - pos:  # characters outside the BMP (UTF-16): where they are
            # the lines are contiguous, each followed by its newline: joined, index i is position pos + i
            self._astral.extend(astral_positions("\n".join(lines), pos))
        self.cur_pos = end
        self.cur_cum = cum

    def _line(self, k: int) -> str:
        """Complete line ``k``'s text, without its newline."""
        lines = self._lines
        if lines is not None:
            return lines[k]
        starts = self.starts
        a = starts[k]
        b = starts[k + 1] if k + 1 < len(starts) else self.cur_pos
        assert self._src is not None
        return self._src.slice(a + self._off, b - 1 + self._off)

    def _done(self, a: int, b: int) -> str:
        """Text of the complete lines between absolute positions ``a`` and ``b`` (``a < b <= cur_pos``)."""
        src = self._src
        if src is not None:
            return src.slice(a + self._off, b + self._off)
        lines, starts = self._lines, self.starts
        assert lines is not None
        k = bisect_right(starts, a, self.lo) - 1
        j = bisect_right(starts, b - 1, k) - 1  # the line that holds the last character
        at = starts[k]
        text = lines[k] if k == j else "\n".join(lines[k : j + 1])  # the lines are contiguous: one join
        lo, hi = a - at, b - at
        if hi > len(text):  # up to the last line's newline
            text += "\n"
        return text if lo == 0 and hi == len(text) else text[lo:hi]  # (a chunk from a line's start: no copy)

    def slice(self, a: int, b: int) -> str:
        """Text between absolute positions ``a`` and ``b`` (both inside the store; empty when ``a >= b``)."""
        if a >= b:
            return ""
        cur = self.cur_pos
        if a >= cur:
            return self.current()[a - cur : b - cur]
        if b <= cur:
            return self._done(a, b)
        return self._done(a, cur) + self.current()[: b - cur]

    def char_at(self, p: int) -> str:
        """The character at absolute position ``p``."""
        cur = self.cur_pos
        if p >= cur:
            return self.current()[p - cur]
        src = self._src
        if src is not None:
            return src.slice(p + self._off, p + 1 + self._off)
        lines = self._lines
        assert lines is not None
        k = bisect_right(self.starts, p, self.lo) - 1
        text = lines[k]
        i = p - self.starts[k]
        return text[i] if i < len(text) else "\n"

    def cum_at(self, p: int) -> int:
        """Units before absolute position ``p``. Cost O(log) on a complete line, O(p's index) on the current one."""
        if p >= self.cur_pos:
            return self.cur_cum + units_of(self.current()[: p - self.cur_pos], self.utf16)
        astral = self._astral
        return p + self._c + (bisect_left(astral, p) if astral else 0)

    def line_at(self, p: int) -> tuple[int, str, LineMeta] | None:
        """The complete line that holds absolute position ``p``: its start, its text (without its newline) and its
        :data:`LineMeta`; None: the current line."""
        if p >= self.cur_pos:
            return None
        k = bisect_right(self.starts, p, self.lo) - 1
        return self.starts[k], self._line(k), self.meta[k]

    def lines_from(self, p: int) -> tuple[int, int]:
        """The complete lines that end after ``p``: the index of the first in ``starts`` and ``meta``, and the
        number of complete lines (their text: :meth:`slice` from the first one's start)."""
        return max(bisect_right(self.starts, p, self.lo) - 1, self.lo), len(self.starts)

    def forget(self, p: int) -> None:
        """Drop the complete lines that end at or before ``p``."""
        starts, lo, n = self.starts, self.lo, len(self.starts)
        lo = max(bisect_right(starts, p, lo) - 1, lo)
        if lo < n and (starts[lo + 1] if lo + 1 < n else self.cur_pos) <= p:
            lo += 1
        if lo and 2 * lo >= n:  # dead lines never outnumber live ones; amortized O(1) a line
            del starts[:lo]
            del self.meta[:lo]
            if self._lines is not None:
                del self._lines[:lo]
            lo = 0
        self.lo = lo
        astral = self._astral
        if astral and astral[0] < p:
            k = bisect_left(astral, min(p, self.cur_pos))
            self._c += k
            del astral[:k]
