"""The break table: kinds of breaks, their order for a cut, and the breaks inside lines.

A *break* is a run of whitespace after some text. Breaks that hold a newline (paragraph: two or more,
line: one) are recorded as each line begins; breaks inside a line (sentence: after ``.!?`` or an
ellipsis and optional closing quotes or brackets; also right after a CJK full stop that text follows;
space: any other run) are found only when a cut needs them, by regular expression over the lines the
chunk could hold, so appending costs nothing per word.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from core.chunking.inline import CJK_STOPS
from core.chunking.lines import Fence
from core.chunking.params import BreakKind

__all__ = ["CJK_BREAK", "EMIT_RANKS", "RANKS", "SENTENCE_BREAK", "Break", "inner_breaks", "sentence_end_before"]

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
"""A break: (whitespace start, units before it, start of the rest, enclosing fence or None)."""

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
