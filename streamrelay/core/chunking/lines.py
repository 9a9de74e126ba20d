"""The line reader: CommonMark block structure a line at a time (block quotes, list items, fences).

One reading of fences for the whole project: the chunker reads its pending text with it, and
:func:`core.text.fences.scan_fences` (coverage, chunk checks, case checks) reads whole texts with it.

Rules (https://spec.commonmark.org/0.31.2/#block-quotes, #list-items, #fenced-code-blocks), kept to
what a cut needs:

- A line's prefix is block quote markers (``>`` at most 3 columns in, one optional space after) and
  list markers (``-``, ``*``, ``+`` or 1-9 digits and ``.`` / ``)``, then a space or tab, at most 3
  columns past the enclosing item's content); an item's content column is where its first line's
  text begins, counted from the block quote it lies in (an item in a quote in an item keeps both
  items, each with its quote depth). A line after a blank line indented less than an open item ends
  that item.
- A fence opener is a run of 3 or more backticks or tildes at most 3 columns past the content column
  of the innermost open list item that holds it (so an 8-space-indented run in a top-level paragraph
  is an indented code block, not a fence); a backtick fence's info string holds no backtick.
- Inside a fence, a line that leaves the fence's container (fewer ``>`` markers, a blank line in a
  block quote, or text indented less than the item's content) ends the fence before it; a closer is a
  run of the fence's character at least as long, at most 3 columns past the item's content, with only
  spaces after it.

Columns expand tabs to multiples of 4. Lines are given without their newline.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field

__all__ = [
    "QSTEP",
    "Fence",
    "LineRead",
    "ReaderState",
    "items_at",
    "line_reach",
    "list_base",
    "read_prefix",
    "run_length",
]

SPACES = " \t\r\f\v"
LIST_MARKER = re.compile(r"[-*+]|\d{1,9}[.)]")
_RUN = {"`": re.compile(r"`*"), "~": re.compile(r"~*")}
_BLANKS = re.compile(r"[ \t\r\f\v]*")

QSTEP = 1 << 32
"""An open list item is the entry ``quote depth * QSTEP + content column`` (the column relative to the
block quote it lies in), so one increasing stack holds the items of every quote depth: an item in a
quote in an item is ``[outer, QSTEP + inner]``."""

# Line kinds.
TEXT, RUN, FLINE, OPEN = 0, 1, 2, 3  # OPEN: a prefix not decided yet (the line is still arriving)


class Fence:
    """An open (or recently closed) fence. Positions are absolute code point offsets in a stream."""

    __slots__ = (
        "char",
        "closer",
        "closer_line",
        "closer_units",
        "content_cum",
        "content_start",
        "end_line",
        "info",
        "item_indent",
        "items",
        "length",
        "marks",
        "opener_start",
        "prefix",
        "quote_depth",
        "quote_prefix",
        "reopen",
        "reopen_full",
        "splittable",
    )

    def __init__(self, char: str, length: int, opener_start: int, content_start: int, content_cum: int) -> None:
        self.char = char
        self.length = length
        self.opener_start = opener_start
        self.content_start = content_start  # first position a chunk of this fence may hold as content
        self.content_cum = content_cum
        self.end_line = -1  # line where the fence ended (closer line, or the line that left its container)
        self.closer_line = -1  # line of its explicit closer
        self.quote_depth = 0
        self.quote_prefix = ""
        self.prefix = ""  # the opener's container prefix, list markers turned into spaces
        self.info = ""
        self.item_indent = 0
        self.items: tuple[int, ...] = ()  # content columns of the list items that hold it, outermost first
        self.closer = ""  # "\n" + container prefix + run
        self.closer_units = 0
        self.reopen = ""  # the opener line of a continuation chunk
        self.reopen_full = True  # reopen carries the info string
        self.splittable = True  # markers fit in max_chars: the fence can be closed and reopened
        self.marks = array("q")  # where each content line's content begins (quote markers aside)

    def has_content(self, a: int, b: int) -> bool:
        """True when some content line begins its content in ``[a, b)``."""
        k = bisect_left(self.marks, a)
        return k < len(self.marks) and self.marks[k] < b


@dataclass(slots=True)
class ReaderState:
    """What one line's reading leaves to the next: open list items, blank line, open fence.

    Attributes:
        lists: the open list items, increasing: ``quote depth * QSTEP + content column`` each.
        prev_blank: the previous line was blank (only whitespace and ``>`` markers).
        fence: the open fence, or None.
    """

    lists: list[int] = field(default_factory=list)
    prev_blank: bool = True
    fence: Fence | None = None


@dataclass(slots=True)
class LineRead:
    """The prefix of one line.

    Attributes:
        kind: TEXT, RUN (a fence character run where an opener may start), FLINE (a line of the open
            fence: content or closer) or OPEN (the prefix is not decided by the characters so far).
        q: index of the first character that is not whitespace and not a ``>`` of the break before
            the line (when ``break_open``), -1 if none yet.
        start: TEXT: where inline scanning starts; RUN: the run's index; FLINE: the content's index.
        body: index where breaks inside the line may begin (after indentation and markers).
        quotes: block quote markers read. col: the column of ``start`` (relative to its block quote).
        lists: the open items after this line. blank: no content (whitespace and ``>`` only).
        implicit_end: the line left the open fence's container (the fence ends before the line).
        new_item: index of the space or tab that confirmed the line's last list marker (tentative
            inline code and links end there), -1 when none.
    """

    kind: int
    q: int
    start: int
    body: int
    quotes: int
    col: int
    lists: list[int]
    blank: bool
    implicit_end: bool
    new_item: int


def items_at(lists: list[int], reach: list[int]) -> tuple[int, ...]:
    """The open list items (entries of ``lists``) that hold a line whose columns are ``reach``, outermost first.

    Args:
        lists: item entries (``quote depth * QSTEP + content column``), increasing.
        reach: per block quote depth of the line, the column it reaches there (:func:`line_reach`).
    """
    out = []
    for e in lists:
        d, c = divmod(e, QSTEP)
        if d >= len(reach) or reach[d] < c:
            break
        out.append(e)
    return tuple(out)


def list_base(lists: list[int], quotes: int, col: int) -> int:
    """Content column (relative to its block quote) of the innermost open list item at quote depth
    ``quotes`` that column ``col`` lies in (0: none)."""
    lo = quotes * QSTEP
    for e in reversed(lists):
        if e < lo:
            break
        if e <= lo + col:
            return e - lo
    return 0


def line_reach(line: str, stop: int, lead: bool) -> list[int]:
    """Per block quote depth of ``line[:stop]`` (a line's prefix: spaces, ``>`` and list markers), the
    column it reaches there: where its first non-space character is (``lead``), or where the next ``>``
    or the content begins (list markers passed). The last entry is for the innermost depth."""
    reach: list[int] = []
    col, first, after_gt = 0, -1, False
    for i in range(min(stop, len(line))):
        c = line[i]
        if c in SPACES:
            if c == "\t":
                col, after_gt = (col // 4 + 1) * 4, False
            elif after_gt:
                after_gt = False
            else:
                col += 1
            continue
        after_gt = False
        if first < 0:
            first = col
        if c == ">":
            reach.append(first if lead else col)
            col, first, after_gt = 0, -1, True
            continue
        col += 1
    reach.append(first if lead and first >= 0 else col)
    return reach


def _marker_end(line: str, i: int, n: int, complete: bool) -> int:
    """Index after a list marker starting at ``i`` that a space or tab follows; -1 when none, -2 when
    the characters so far cannot tell."""
    c = line[i]
    if c in "-*+":
        j = i + 1
    else:
        j = i
        while j < n and "0" <= line[j] <= "9" and j - i < 9:
            j += 1
        if j >= n:
            return -1 if complete else -2
        if line[j] not in ".)":
            return -1
        j += 1
    if j >= n:
        return -1 if complete else -2
    return j if line[j] in " \t" else -1


_MARKS_SO_FAR = {c: re.compile(rf"\{c}(?:[ \t]*\{c})*[ \t]*") for c in "-*"}


def _thematic_break(line: str, i: int, n: int, complete: bool) -> bool | None:
    """Whether ``line[i:n]`` (from a ``-`` or ``*``) is a thematic break, which wins over a list item ("* * *" is
    no nested list: https://spec.commonmark.org/0.31.2/#thematic-breaks); None while the characters so far (the
    marker and spaces only) cannot tell."""
    if not _MARKS_SO_FAR[line[i]].fullmatch(line, i, n):
        return False
    if not complete:
        return None
    return line.count(line[i], i, n) >= 3


def read_prefix(line: str, n: int, st: ReaderState, break_open: bool, complete: bool) -> LineRead:  # noqa: C901
    """Read the prefix of ``line[:n]`` (a whole line when ``complete``) in the state ``st``.

    Args:
        line: the line (without its newline), or its beginning while it arrives.
        n: how many characters of ``line`` to read.
        st: the state the previous lines left; not changed (the result carries the new lists).
        break_open: a break (whitespace run) is open before the line: its leading ``>`` markers belong to it.
        complete: ``line[:n]`` is the whole line.

    Returns:
        The prefix read; ``kind`` OPEN while the characters so far cannot decide it.
    """
    col, quotes, after_gt, q = 0, 0, False, -1
    fence = st.fence
    lists = st.lists
    copied = False
    implicit_end = False
    new_item = -1
    item_quotes = 0
    blank = True
    i = 0
    while i < n:
        c = line[i]
        if c in SPACES:
            if c == "\t":
                col = (col // 4 + 1) * 4
                after_gt = False
            elif after_gt:
                after_gt = False
            else:
                col += 1
            i += 1
            continue
        if fence is not None and not implicit_end:
            if quotes < fence.quote_depth and c == ">" and col <= 3 + list_base(lists, quotes, col):
                if q < 0 and not break_open:
                    q = i
                quotes, col, after_gt = quotes + 1, 0, True
                i += 1
                continue
            if quotes >= fence.quote_depth and col >= fence.item_indent:
                if q < 0:
                    q = i
                return LineRead(FLINE, q, i, i, quotes, col, lists, False, False, new_item)
            implicit_end = True
        if c == ">" and col <= 3 + list_base(lists, quotes, col):
            if q < 0 and not break_open:
                q = i
            if lists and lists[-1] > quotes * QSTEP + col:  # items at this depth it is not indented into end
                lists, copied = _end_items(lists, quotes, col), True
            quotes, col, after_gt = quotes + 1, 0, True
            i += 1
            continue
        after_gt = False
        if q < 0:
            q = i
        blank = False
        if col <= 3 + list_base(lists, quotes, col) and (c in "-*+" or "0" <= c <= "9"):
            brk = _thematic_break(line, i, n, complete) if c in "-*" else False
            j = -1 if brk else -2 if brk is None else _marker_end(line, i, n, complete)
            if j == -2:
                return LineRead(OPEN, q, i, i, quotes, col, lists, False, implicit_end, new_item)
            if j >= 0:
                key = quotes * QSTEP + col
                if not copied:
                    lists, copied = list(lists), True
                while lists and lists[-1] > key:
                    lists.pop()
                col += j - i
                lists.append(key + j - i + 1)
                new_item, item_quotes = j, quotes
                i = j
                continue
        # end of the prefix: the content starts at col
        if new_item >= 0:
            if item_quotes == quotes:
                if not copied:
                    lists, copied = list(lists), True
                lists[-1] = quotes * QSTEP + col
        elif st.prev_blank and lists:
            held = items_at(lists, line_reach(line, i, True))  # after a blank line, less indented: items end
            if len(held) < len(lists):
                lists, copied = list(held), True
        kind = RUN if c in "`~" and col <= 3 + list_base(lists, quotes, col) else TEXT
        return LineRead(kind, q, i, i, quotes, col, lists, False, implicit_end, new_item)
    # whitespace and markers only (so far)
    if not complete:
        return LineRead(OPEN, q, n, n, quotes, col, lists, blank, implicit_end, new_item)
    if fence is not None and not implicit_end and quotes < fence.quote_depth:
        implicit_end = True  # a blank line (or fewer markers) ends a fence in a block quote
    return LineRead(TEXT, q, n, n, quotes, col, lists, blank, implicit_end, new_item)


def _end_items(lists: list[int], quotes: int, col: int) -> list[int]:
    """``lists`` without the items at quote depth ``quotes`` whose content column is past ``col`` (a ``>``
    there) and the items inside them; a new list."""
    lo, hi = quotes * QSTEP + col, (quotes + 1) * QSTEP
    for k, e in enumerate(lists):
        if lo < e < hi:
            return lists[:k]
    return list(lists)


def run_length(line: str, i: int, char: str) -> int:
    """Length of the run of ``char`` (a backtick or a tilde) at ``line[i:]``."""
    m = _RUN[char].match(line, i)
    return m.end() - i if m else 0


def info_has_backtick(line: str, i: int, j: int) -> bool:
    """True when ``line[i:j]`` (a backtick fence's info string) holds a backtick: no fence then."""
    return line.find("`", i, j) >= 0


def blanks_end(line: str, i: int) -> int:
    """Index after the spaces and tabs at ``line[i:]``."""
    m = _BLANKS.match(line, i)
    return m.end() if m else i
