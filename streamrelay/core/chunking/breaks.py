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
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator

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
absolute code point offsets, units count from the stream's start in the chunker's unit. The table keeps the
positions and the fence only (the units are the text store's :meth:`~core.chunking.store.TextStore.cum_at`); a break
is made a tuple when a cut looks at it."""

InnerLine = tuple[int, int, int, int, Fence | None, bool]
"""A line whose inner breaks a cut may need, as indices into the text :meth:`BreakTable.fill_inner` is given:
(where the line begins, where its body begins (after indentation and markers), the end of the text to consider,
units before the line, the fence its content lies in or None, whether CJK full stops make breaks in it)."""

_WS_RUN = re.compile(r"[ \t\r\f\v]+")
_CLOSERS = "\"')\\]}*_\u2019\u201d\u00bb"
_SENT_END = re.compile(f"[.!?\u2026{CJK_STOPS}][{_CLOSERS}]*$")
_CJK = re.compile(f"[{CJK_STOPS}](?=[^ \t\n\r\f\v])")
_CJK_ANY = re.compile(f"[{CJK_STOPS}]")
SENTENCE_BREAK = re.compile(f"[.!?\u2026{CJK_STOPS}][{_CLOSERS}]*[ \\t\\r\\f\\v]+(?=[^ \\t\\r\\f\\v])")
"""A sentence break inside a line: a sentence end, closers and whitespace that text follows (match end:
where the rest begins)."""
CJK_BREAK = re.compile(f"[{CJK_STOPS}](?=[^ \\t\\r\\f\\v])")
"""A CJK full stop that text follows directly: a zero-width sentence break after it."""


def sentence_end_before(text: str, a: int, line_start: int = 0) -> bool:
    """True when the text of the line starting at index ``line_start`` of ``text`` ends a sentence before index
    ``a``."""
    return _SENT_END.search(text, max(line_start, a - 24), a) is not None


def inner_breaks(text: str, ls: int, a: int, b: int, cjk: bool) -> Iterator[tuple[int, int, bool]]:
    """Whitespace runs inside ``text[a:b]`` (one line's, which begins at index ``ls``) that text follows before
    ``b``, in order.

    Args:
        text: the text (one line or more; read in place, never copied). ls: where the line begins.
        a: where its body begins (after indentation and markers).
        b: the end of the text to consider (the line's last non-space character + 1, or the time of
            a cut in the line still arriving).
        cjk: also yield the zero-width breaks after CJK full stops (text lines, not fence content).

    Yields:
        ``(whitespace start, rest start, is a sentence break)`` as indices of ``text``.
    """
    runs = [(m.start(), m.end(), False) for m in _WS_RUN.finditer(text, a, b) if m.end() < b and m.start() > a]
    if cjk and _CJK_ANY.search(text, a, b) is not None:
        extra = [
            (m.end(), m.end(), True)
            for m in _CJK.finditer(text, a, b)
            if m.end() < b and (m.start() == ls or text[m.start() - 1] != "\\")
        ]
        runs = sorted(runs + extra)
    for s, e, is_cjk in runs:
        yield s, e, is_cjk or sentence_end_before(text, s, ls)


class BreakTable:
    """The candidate breaks of the pending text, one set of arrays per rank, each in increasing position.

    Attributes:
        starts: for each rank (``R_PARA`` .. ``R_SPACE``), its breaks' whitespace starts in order.
        rests: for each rank, where the rest begins after each break. fences: for each rank, each break's
            enclosing fence (None for ``R_PARA`` and ``R_LINE``, whose breaks lie outside fences).
        lo: for each rank, the index of its first break after the pending text's start (those before it
            cut nothing and are trimmed lazily).
    """

    __slots__ = ("_inner_key", "fences", "lo", "rests", "starts")

    def __init__(self) -> None:
        self.starts = [array("q") for _ in RANKS]
        self.rests = [array("q") for _ in RANKS]
        self.fences: list[list[Fence | None] | None] = [None if r in (R_PARA, R_LINE) else [] for r in RANKS]
        self.lo = [0] * len(RANKS)
        self._inner_key = (-1, -1)

    def add(self, rank: int, start: int, rest: int, fence: Fence | None) -> None:
        """Record a break of ``rank`` (paragraph or line, in or out of fences) after those recorded: its whitespace
        start, the start of the rest, its fence (None for ``R_PARA`` and ``R_LINE``)."""
        self.starts[rank].append(start)
        self.rests[rank].append(rest)
        fences = self.fences[rank]
        if fences is not None:
            fences.append(fence)

    def forget(self, pos: int) -> None:
        """The pending text now starts at ``pos``: a break at or before it cuts nothing. Cost: a bisection
        per rank; a list drops its dead breaks once they are at least half of it (so dead breaks never
        outnumber live ones, and each break is moved O(1) times on average)."""
        lo = self.lo
        for r, starts in enumerate(self.starts):
            k = bisect_right(starts, pos, lo[r])  # a break at pos cuts nothing
            if k and 2 * k >= len(starts):
                del starts[:k]
                del self.rests[r][:k]
                fences = self.fences[r]
                if fences is not None:
                    del fences[:k]
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

    def fill_inner(self, text: str, at: int, lines: Iterable[InnerLine], base: int, utf16: bool) -> None:
        """Replace the sentence and space breaks by those inside ``lines`` after position ``base``.

        Args:
            text: the text of the lines the chunk could hold (the last may be the line still arriving, read up to
                the time of the cut). at: the absolute position of ``text[0]``.
            lines: those lines, in order (:data:`InnerLine`: indices into ``text``).
            base: the pending text's start (absolute); breaks before it are not wanted.
            utf16: count units in UTF-16 code units (else code points).
        """
        sent_s, sent_r, sent_f = array("q"), array("q"), []
        space_s, space_r, space_f = array("q"), array("q"), []
        for ls, body, end, cum, fence, cjk in lines:
            last, used = ls, cum
            for s, e, is_sent in inner_breaks(text, ls, max(body, base - at), end, cjk):
                used += s - last if not utf16 else units_of(text[last:s], True)
                last = s
                if is_sent:
                    sent_s.append(at + s)
                    sent_r.append(at + e)
                    sent_f.append(fence)
                else:
                    space_s.append(at + s)
                    space_r.append(at + e)
                    space_f.append(fence)
        self.starts[R_SENT], self.rests[R_SENT], self.fences[R_SENT] = sent_s, sent_r, sent_f
        self.starts[R_SPACE], self.rests[R_SPACE], self.fences[R_SPACE] = space_s, space_r, space_f
        self.lo[R_SENT] = self.lo[R_SPACE] = 0
