"""The break table: kinds of breaks, their order for a cut, and the candidate breaks of the pending text.

A *break* is a run of whitespace after some text. Breaks that hold a newline (paragraph: two or more,
line: one) are recorded by the line scanner as each line begins (:meth:`BreakTable.add`); breaks inside
a line (sentence: after ``.!?`` or an ellipsis and optional closing quotes or brackets; also right after
a CJK full stop that text follows; space: any other run) are found only when a cut needs them, by
regular expression over the lines the chunk could hold (:meth:`BreakTable.fill_inner`), so appending
costs nothing per word. The cutter (:mod:`core.chunking.cutter`) walks the table from the best rank down.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from operator import itemgetter

from streamrelay.core.chunking.inline import CJK_STOPS
from streamrelay.core.chunking.lines import Fence
from streamrelay.core.chunking.params import BreakKind
from streamrelay.core.chunking.store import units_of

__all__ = [
    "CJK_BREAK",
    "EMIT_RANKS",
    "RANKS",
    "SENTENCE_BREAK",
    "Break",
    "BreakTable",
    "InnerLine",
    "inner_breaks",
    "sentence_end_before",
]

# Cut ranks, best first. Breaks outside fences come before breaks inside fences ("a fence that fits is
# never cut"); sentence and space breaks hold both.
R_PARA, R_LINE, R_FPARA, R_FLINE, R_SENT, R_SPACE = range(6)
RANKS = range(6)
EMIT_RANKS = {
    BreakKind.PARAGRAPH: frozenset({R_PARA}),
    BreakKind.NEWLINE: frozenset({R_PARA, R_LINE}),
    BreakKind.SENTENCE: frozenset({R_PARA, R_LINE, R_SENT}),
}

Break = tuple[int, int, int, Fence | None]
"""A break: (whitespace start, units before it, start of the rest, enclosing fence or None); positions are
absolute code point offsets, units count from the stream's start in the chunker's unit."""

InnerLine = tuple[str, int, int, int, int, Fence | None, bool]
"""A line whose inner breaks a cut may need: (text, absolute position of ``text[0]``, units before it, index
where its body begins, index after the last character to consider, the fence its content lies in or None,
whether CJK full stops make breaks in it)."""

_FIRST = itemgetter(0)

_WS_RUN = re.compile(r"[ \t\r\f\v]+")
_CLOSERS = "\"')\\]}*_\u2019\u201d\u00bb"
_SENT_END = re.compile(f"[.!?\u2026{CJK_STOPS}][{_CLOSERS}]*$")
_CJK = re.compile(f"[{CJK_STOPS}](?=[^ \t\n\r\f\v])")
SENTENCE_BREAK = re.compile(f"[.!?\u2026{CJK_STOPS}][{_CLOSERS}]*[ \\t\\r\\f\\v]+(?=[^ \\t\\r\\f\\v])")
"""A sentence break inside a line: a sentence end, closers and whitespace that text follows (match end:
where the rest begins)."""
CJK_BREAK = re.compile(f"[{CJK_STOPS}](?=[^ \\t\\r\\f\\v])")
"""A CJK full stop that text follows directly: a zero-width sentence break after it."""


def sentence_end_before(line: str, a: int) -> bool:
    """True when the text of ``line`` before index ``a`` ends a sentence."""
    return _SENT_END.search(line, max(0, a - 24), a) is not None


def inner_breaks(line: str, a: int, b: int, cjk: bool) -> Iterator[tuple[int, int, bool]]:
    """Whitespace runs inside ``line[a:b]`` that text follows before ``b``, in order.

    Args:
        line: one line's text. a: where its body begins (after indentation and markers).
        b: the end of the text to consider (the line's last non-space character + 1, or the time of
            a cut in the line still arriving).
        cjk: also yield the zero-width breaks after CJK full stops (text lines, not fence content).

    Yields:
        ``(whitespace start, rest start, is a sentence break)`` as indices of ``line``.
    """
    runs = [(m.start(), m.end(), False) for m in _WS_RUN.finditer(line, a, b) if m.end() < b and m.start() > a]
    if cjk and any(c in line for c in CJK_STOPS):
        extra = [
            (m.end(), m.end(), True)
            for m in _CJK.finditer(line, a, b)
            if m.end() < b and (m.start() == 0 or line[m.start() - 1] != "\\")
        ]
        runs = sorted(runs + extra)
    for s, e, is_cjk in runs:
        yield s, e, is_cjk or sentence_end_before(line, s)


class BreakTable:
    """The candidate breaks of the pending text, one list per rank, each in increasing position.

    Attributes:
        by_rank: for each rank (``R_PARA`` .. ``R_SPACE``), its breaks in order of whitespace start.
        lo: for each rank, the index of its first break after the pending text's start (those before it
            cut nothing and are trimmed lazily).
    """

    __slots__ = ("_inner_key", "by_rank", "lo")

    def __init__(self) -> None:
        self.by_rank: list[list[Break]] = [[] for _ in RANKS]
        self.lo = [0] * len(RANKS)
        self._inner_key = (-1, -1)

    def add(self, rank: int, brk: Break) -> None:
        """Record a break of ``rank`` (paragraph or line, in or out of fences) after those recorded."""
        self.by_rank[rank].append(brk)

    def forget(self, pos: int) -> None:
        """The pending text now starts at ``pos``: a break at or before it cuts nothing. Cost: a bisection
        per rank; a list drops its dead breaks once they are at least half of it (so dead breaks never
        outnumber live ones, and each break is moved O(1) times on average)."""
        lo = self.lo
        for r, lst in enumerate(self.by_rank):
            k = bisect_right(lst, pos, lo[r], key=_FIRST)  # a break at pos cuts nothing
            if k and 2 * k >= len(lst):
                del lst[:k]
                k = 0
            lo[r] = k

    def inner_known(self, base: int, tend: int) -> bool:
        """True when the sentence and space breaks were found for the pending text starting at ``base``
        read up to ``tend`` already; else remembers that they are about to be (:meth:`fill_inner`)."""
        key = (base, tend)
        if key == self._inner_key:
            return True
        self._inner_key = key
        return False

    def fill_inner(self, lines: Iterable[InnerLine], base: int, utf16: bool) -> None:
        """Replace the sentence and space breaks by those inside ``lines`` after position ``base``.

        Args:
            lines: the lines the chunk could hold, in order (the last may be the line still arriving, cut
                at the time of the cut).
            base: the pending text's start (absolute); breaks before it are not wanted.
            utf16: count units in UTF-16 code units (else code points).
        """
        sent: list[Break] = []
        space: list[Break] = []
        for text, pos, cum, body, end, fence, cjk in lines:
            last, used = 0, cum
            for s, e, is_sent in inner_breaks(text, max(body, base - pos), end, cjk):
                used += s - last if not utf16 else units_of(text[last:s], True)
                last = s
                (sent if is_sent else space).append((pos + s, used, pos + e, fence))
        self.by_rank[R_SENT], self.by_rank[R_SPACE] = sent, space
        self.lo[R_SENT] = self.lo[R_SPACE] = 0
