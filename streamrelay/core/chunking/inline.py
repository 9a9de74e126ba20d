"""Inline protected ranges: code spans and links, found by regular expression over a line's text.

A cut never falls inside a complete code span or link (``[text](url)``, ``![alt](src)``), and while one
may still be open (a backtick run or a ``[`` not closed yet) nothing after its start is cut or emitted:
a tentative range protects until it closes or its paragraph ends (a blank line, a list item or a fence
cancels it). Only the characters that change this state are visited (``re.finditer``): backtick runs,
backslash escapes, brackets and parentheses. The scanner is resumable: it reads ``line[i:j]`` and
stops before a trailing character whose meaning depends on the next one (a backtick run, a backslash,
a ``]``), so it never reads past ``j``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["CJK_STOPS", "InlineScanner"]

CJK_STOPS = "\u3002\uff01\uff1f"  # ideographic full stop, fullwidth ! and ?
_SPECIAL = re.compile("`+|\\\\|[\\[\\]()]")
_BACKTICKS = re.compile("`+")
_TAIL = frozenset("`\\]")
_WS = " \t\n\r\f\v"


class InlineScanner:
    """Tentative and complete inline ranges of the current paragraph.

    Args:
        add_region: called with ``(start, end)`` absolute positions of each complete range.
    """

    __slots__ = ("_add_region", "code", "links")

    def __init__(self, add_region: Callable[[int, int], None]) -> None:
        self._add_region = add_region
        self.code: tuple[int, int] | None = None  # (run length, start) of an open code span
        self.links: list[list[int]] = []  # [start, phase (0 text, 1 destination), paren depth]

    def cancel(self) -> None:
        """A paragraph ended: no tentative range crosses it."""
        self.code = None
        self.links.clear()

    def guard(self) -> int:
        """Start of the earliest tentative range, or -1."""
        best = -1
        if self.code is not None:
            best = self.code[1]
        if self.links and (best < 0 or self.links[0][0] < best):
            best = self.links[0][0]
        return best

    def safe_end(self, line: str, i: int, j: int) -> int:
        """The end (at most ``j``) up to which ``line[i:j]`` can be read without its next character."""
        while j > i and line[j - 1] in _TAIL:
            j -= 1
        return j

    def tail_guard(self, line: str, i: int, j: int, base: int) -> int:
        """Start of a backtick run left unread at ``line[i:j]`` that would open a code span, or -1."""
        if self.code is None:
            k = line.find("`", i, j)
            if k >= 0 and (k == 0 or line[k - 1] != "\\"):
                return base + k
        return -1

    def scan(self, line: str, i: int, j: int, base: int) -> None:
        """Read ``line[i:j]`` (``j`` a safe end, or the line's end before its newline).

        Args:
            line: the line's text; ``base`` is the absolute position of ``line[0]``.
            i: first index to read. j: end index (exclusive).
            base: absolute position of ``line[0]``.
        """
        k = i
        while k < j:
            m = (_BACKTICKS if self.code is not None else _SPECIAL).search(line, k, j)
            if m is None:
                return
            s, e = m.start(), m.end()
            c = line[s]
            k = e
            if c == "`":
                self._backticks(e - s, base + s, base + e)
            elif c == "\\":
                if e < j and line[e] not in _WS:
                    k = e + 1  # an escaped character
            else:
                k = self._link_char(line, c, s, j, base)

    def _backticks(self, n: int, start: int, end: int) -> None:
        code = self.code
        if code is None:
            self.code = (n, start)
        elif code[0] == n:
            self._add_region(code[1], end)
            self.code = None

    def _link_char(self, line: str, c: str, s: int, j: int, base: int) -> int:
        links = self.links
        top = links[-1] if links else None
        if c == "[":
            if top is None or top[1] == 0:
                bang = s > 0 and line[s - 1] == "!"
                links.append([base + s - bang, 0, 0])
        elif top is None:
            pass
        elif c == "]":
            if top[1] == 0:
                links.pop()
                if s + 1 < j and line[s + 1] == "(":
                    top[1], top[2] = 1, 0
                    links.append(top)
                    return s + 2
        elif top[1] == 1:
            if c == "(":
                top[2] += 1
            elif top[2]:
                top[2] -= 1
            else:
                links.pop()
                self._add_region(top[0], base + s + 1)
        return s + 1
