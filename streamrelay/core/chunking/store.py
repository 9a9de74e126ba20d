"""The chunker's text store: the pending text, kept as the lines it arrived in.

Complete lines and the line still arriving. Appending never copies the pending text: a piece joins the
current line's pieces, and a line is joined once, when it is read. Reads (a slice, one character, the
units before a position) find their line by bisection; lines wholly before the pending text are dropped
as cuts move past them.

This is the chunker's one interface to the text itself (positions are absolute code point offsets from
the stream's first appended character): writes are :meth:`TextStore.add`, :meth:`TextStore.take_current`,
:meth:`TextStore.set_current` and :meth:`TextStore.push_line`; reads are :meth:`TextStore.current`,
:meth:`TextStore.slice`, :meth:`TextStore.char_at`, :meth:`TextStore.cum_at`, :meth:`TextStore.line_at` and
:meth:`TextStore.lines_from`; :meth:`TextStore.forget` releases what lies before the pending text.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from streamrelay.core.chunking.lines import Fence, LineRead
from streamrelay.core.units import LengthUnit

__all__ = ["Line", "TextStore", "units_of"]


def units_of(text: str, utf16: bool) -> int:
    """Length of ``text`` in code points, or in UTF-16 code units when ``utf16``."""
    if not utf16 or text.isascii():
        return len(text)
    return len(text.encode("utf-16-le")) >> 1


class Line:
    """A complete line of the pending text.

    Attributes:
        pos: absolute position of its first character. cum: units before it.
        text: its text with the newline. body: index where breaks inside it may begin.
        end: index after its last non-space character. fence: the fence its content lies in, or None.
        cjk: its text is inline Markdown (CJK full stops make sentence breaks).
        lr: its prefix read (None: an ordinary line outside containers); lists: the list items open before
            it (for its container context, core/chunking/containers.py).
    """

    __slots__ = ("body", "cjk", "cum", "end", "fence", "lists", "lr", "pos", "text")

    def __init__(
        self,
        pos: int,
        cum: int,
        text: str,
        body: int,
        end: int,
        fence: Fence | None,
        cjk: bool,
        lr: LineRead | None,
        lists: list[int],
    ) -> None:
        self.pos, self.cum, self.text, self.body, self.end, self.fence, self.cjk = pos, cum, text, body, end, fence, cjk
        self.lr, self.lists = lr, lists


class TextStore:
    """Complete lines (``lines``) and the current line's pieces (starting at ``cur_pos``).

    Args:
        unit: how units are counted (``cum`` values).
        pos: absolute position where the store begins. cum: units before it.

    Attributes:
        add: appends a piece (no newline in it) to the current line; O(1), it is joined when read (the
            pieces list's own ``append``, so that a one-character delta costs no Python call).
        cur_pos: absolute position of the current line's first character. cur_cum: units before it.
    """

    __slots__ = ("_parts", "add", "cur_cum", "cur_pos", "lines", "lo", "starts", "utf16")

    def __init__(self, unit: LengthUnit, pos: int, cum: int) -> None:
        self.utf16 = unit is LengthUnit.UTF16
        self.lines: list[Line] = []
        self.starts: list[int] = []
        self.lo = 0
        self._parts: list[str] = []
        self.add: Callable[[str], object] = self._parts.append
        """Append a piece (no newline in it) to the current line. Cost O(1): it is joined when read."""
        self.cur_pos = pos
        self.cur_cum = cum

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
        text = self.current()
        self._parts.clear()
        return text

    def set_current(self, text: str) -> None:
        """Replace the current line's text by ``text`` (a prefix of it: an opener whose info string goes)."""
        self._parts[:] = [text]

    def push_line(self, line: Line, cum: int) -> None:
        """The current line ended (its text and newline are in ``line``); a new one begins after
        ``cum`` units."""
        self.lines.append(line)
        self.starts.append(line.pos)
        self._parts.clear()
        self.cur_pos = line.pos + len(line.text)
        self.cur_cum = cum

    def _find(self, p: int) -> tuple[str, int, int]:
        if p >= self.cur_pos:
            return self.current(), self.cur_pos, self.cur_cum
        k = bisect_right(self.starts, p, self.lo) - 1
        line = self.lines[k]
        return line.text, line.pos, line.cum

    def slice(self, a: int, b: int) -> str:
        """Text between absolute positions ``a`` and ``b`` (both inside the store; empty when ``a >= b``)."""
        if a >= b:
            return ""
        cur = self.cur_pos
        if a >= cur:
            return self.current()[a - cur : b - cur]
        lines = self.lines
        k = bisect_right(self.starts, a, self.lo) - 1
        out = []
        while k < len(lines):
            line = lines[k]
            pos, text = line.pos, line.text
            end = pos + len(text)
            out.append(text if a == pos and end <= b else text[a - pos : min(b, end) - pos])
            if b <= end:
                return "".join(out)
            a, k = end, k + 1
        out.append(self.current()[: b - cur])
        return "".join(out)

    def char_at(self, p: int) -> str:
        """The character at absolute position ``p``."""
        text, pos, _ = self._find(p)
        return text[p - pos]

    def cum_at(self, p: int) -> int:
        """Units before absolute position ``p``. Cost O(length of its line)."""
        text, pos, cum = self._find(p)
        return cum + units_of(text[: p - pos], self.utf16)

    def line_at(self, p: int) -> Line | None:
        """The complete line that holds absolute position ``p`` (None: the current line)."""
        if p >= self.cur_pos:
            return None
        return self.lines[bisect_right(self.starts, p, self.lo) - 1]

    def lines_from(self, p: int) -> list[Line]:
        """The complete lines that end after ``p``, in order."""
        k = max(bisect_right(self.starts, p, self.lo) - 1, self.lo)
        return self.lines[k:]

    def forget(self, p: int) -> None:
        """Drop the complete lines that end at or before ``p``."""
        lines, lo = self.lines, self.lo
        while lo < len(lines) and lines[lo].pos + len(lines[lo].text) <= p:
            lo += 1
        if lo and 2 * lo >= len(lines):  # dead lines never outnumber live ones; amortized O(1) a line
            del lines[:lo]
            del self.starts[:lo]
            lo = 0
        self.lo = lo
