"""The cutter: where a chunk that no longer fits is cut, and how fences are closed and reopened.

Plans, tried in order until one finds a cut inside ``max_chars``: the last break of the best kind outside
links and code spans (paragraph > line > fence paragraph > fence line > sentence > space); the last
safe code point boundary (not inside a grapheme cluster, not before closing punctuation, not next to
whitespace); then the same inside a link or code span longer than the budget; an opener whose info
string leaves no room for content (emitted closed, the fence continues bare); anything (never loop).
A cut inside a fence closes it (a closer line with the fence's container prefix) and reopens it at the
start of the next chunk; a cut never leaves an empty fence behind and never begins a chunk mid-line
with a run of three backticks or tildes, nor (but for the two last-resort plans that may cut beside
whitespace) with a block start (:func:`opens_block`): an earlier break or boundary is
taken instead.

Markdown tables (GFM: a header row, a delimiter row ``|---|``, body rows; rows are lines that begin with ``|``)
are kept whole like fences: a line break between two rows is not a chunk's end when one is emitted
(:meth:`Cutter.emit_at`), and ranks after every other line break when a chunk is cut (after fence lines, before
sentences), so a table that fits moves whole to the next chunk. A longer table is cut between two body rows (never
after its header or delimiter row alone), and the next chunk begins with the header and delimiter rows again (they
count in ``max_chars``; left out when they take more than half of it), so each part renders as a table.

The cutter keeps no state of its own between cuts: it reads the break table
(:class:`core.chunking.breaks.BreakTable`), the protected regions (:class:`core.chunking.regions.Regions`),
the text (:class:`core.chunking.store.TextStore`) and a :class:`Moment` (the line scanner: what the text
held at the time of the cut), appends each chunk to the output list, and tells the moment where the
pending text starts next (:meth:`Moment.restart`). Positions are absolute code point offsets, ``cum``
values are units (``core.units``) from the stream's start.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable
from typing import Protocol

from streamrelay.core.chunking.breaks import R_LINE, R_SENT, RANKS, Break, BreakTable
from streamrelay.core.chunking.containers import dedent
from streamrelay.core.chunking.graphemes import NO_START, ZWJ, is_extend, is_regional
from streamrelay.core.chunking.lines import Fence
from streamrelay.core.chunking.params import ChunkParams
from streamrelay.core.chunking.regions import Regions
from streamrelay.core.chunking.store import TextStore, units_of
from streamrelay.core.units import LengthUnit

__all__ = ["BIG", "BLOCK_STARTERS", "LOOK", "Cutter", "Moment", "opens_block"]

_WS = " \t\n\r\f\v"
_TRAILING_MARKERS = re.compile(r"(?:\n[ \t>]*)+\Z")  # quoted lines with no content yet end no chunk
_TABLE_DELIMITER = re.compile(r" {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")
"""A GFM table's delimiter row (https://github.github.com/gfm/#tables-extension-): ``|---|:--:|``."""


def _is_row(line: str) -> bool:
    """A line that is a table row here: it begins with ``|`` (after at most 3 spaces)."""
    return line[:4].lstrip(" ").startswith("|")


BIG = 1 << 62

BLOCK_STARTERS = frozenset(">|#-*+_<0123456789")
"""The first characters of the block starts :func:`opens_block` knows (fences: :meth:`Cutter.rest_ok`)."""
LOOK = 12
"""Characters of a rest :func:`opens_block` is given at most: enough to decide ``123456789.`` and ``######``."""


def opens_block(s: str, complete: bool) -> bool:
    """True when a message that begins with ``s`` begins a block (CommonMark; GFM table rows), or may
    begin one once more text follows.

    Args:
        s: the first characters of the rest of a line cut mid-way (at least one, no newline).
        complete: ``s`` reaches the end of its line (else more of the line may follow).

    Returns:
        True for ``>`` and ``|`` (a block quote, a table row), ``#`` to ``######`` then a space, a tab or
        the line end (a heading), ``-``, ``*``, ``+`` or 1 to 9 digits and ``.`` or ``)`` then the same (a
        list item), a line of three or more ``-``, ``*`` or ``_`` and spaces (a thematic break), ``<`` and a
        letter, ``/``, ``!`` or ``?`` (an HTML block); also when ``s`` is a prefix of one of those and not
        ``complete``. False otherwise.
    """
    ch, n = s[0], len(s)
    if ch == ">" or ch == "|":
        return True
    if ch == "<":
        return (n == 1 and not complete) or (n > 1 and (s[1] in "/!?" or ("a" <= s[1].lower() <= "z")))
    if ch == "#":
        i = 1
        while i < n and s[i] == "#":
            i += 1
        return i <= 6 and (i == n or s[i] in " \t")
    if "0" <= ch <= "9":
        i = 1
        while i < n and "0" <= s[i] <= "9":
            i += 1
        if i == n:
            return not complete and i <= 9
        return i <= 9 and s[i] in ".)" and (i + 1 == n or s[i + 1] in " \t")
    if ch in "-*+" and (n == 1 or s[1] in " \t"):
        return True  # a list item (an empty one at the line end), or maybe one
    if ch == "+":
        return False
    body = s.replace(" ", "").replace("\t", "")
    if body.strip(ch):
        return False  # another character on the line: no thematic break
    return not complete or len(body) >= 3


class Moment(Protocol):
    """The pending text at the time of a cut, as the line scanner read it (what the cutter asks).

    Attributes:
        base: absolute position where the pending text starts. base_cum: units before it.
        head: the text that precedes it in the next chunk (a reopened fence opener, quote markers).
        head_units: ``head``'s length in units. ctx_w: the list items the pending text starts in
            (:func:`core.chunking.containers.dedent`). tend: the time of the cut: the position up to
            which the text was read when the cut became due. fence: the open fence, or None.
    """

    base: int
    base_cum: int
    head: str
    head_units: int
    ctx_w: tuple[int, ...]
    tend: int
    fence: Fence | None

    def protect(self, inline: bool) -> int:
        """Position from which nothing may be cut (a tentative link or code span, a line that may still be
        a fence marker line; ``inline`` False: fence marker lines only); ``BIG`` when none."""
        ...

    def rendered(self) -> int:
        """Units the pending text takes as a chunk now (trailing whitespace not counted; a closer counted
        once the last line is fence content)."""
        ...

    def content_limit(self) -> int:
        """Position before which fence content is known at the time of the cut."""
        ...

    def fence_at(self, p: int) -> Fence | None:
        """The fence whose content holds the code point boundary ``p``, or None."""
        ...

    def fill_inner_breaks(self) -> None:
        """Have the break table hold the sentence and space breaks of the text read so far."""
        ...

    def quote_head(self, pos: int) -> str:
        """The block quote markers a chunk starting mid-line at ``pos`` gets back ("" when none fit)."""
        ...

    def line_cut(self, p: int) -> None:
        """A cut falls at ``p``, maybe inside the line being read (which then opens no fence)."""
        ...

    def restart(self, pos: int, cum: int, head: str) -> None:
        """The pending text now starts at ``pos`` (``cum`` units before it), after ``head``."""
        ...


class Cutter:
    """Cuts the pending text of a :class:`Moment` (see the module docstring).

    Args:
        params: ``max_chars`` and the unit lengths are counted in.
        store: the text. breaks: the candidate breaks. regions: the protected regions.
        read: reads the text between two absolute positions (the chunker's one reader of chunk text).
        out: the list each chunk is appended to (never an empty or whitespace-only chunk).
        starts: the list each chunk's start is appended to, beside ``out``: the absolute position from which the
            chunk is exactly the text (``read(start, start + len(chunk))``), or -1 when it is not (a reopened
            fence's opener or quote markers before it, a closer after it, list items dedented).
    """

    __slots__ = ("_breaks", "_max", "_out", "_read", "_regions", "_starts", "_store", "_utf16")

    def __init__(
        self,
        params: ChunkParams,
        store: TextStore,
        breaks: BreakTable,
        regions: Regions,
        read: Callable[[int, int], str],
        out: list[str],
        starts: list[int],
    ) -> None:
        self._max = params.max_chars
        self._utf16 = params.unit is LengthUnit.UTF16
        self._store = store
        self._breaks = breaks
        self._regions = regions
        self._read = read
        self._out = out
        self._starts = starts

    # --- emitting -----------------------------------------------------------------------------------

    def emit(self, text: str, widths: tuple[int, ...], start: int = -1) -> None:
        """Emit ``text`` as a chunk: dedented by the list items it starts in (``widths``), trailing
        whitespace and trailing quoted lines with no content dropped; nothing when that leaves no text.
        ``start``: the absolute position ``text`` is read from when it is exactly the text from there (-1: it is
        not); the chunk, a start of it, is then a range of the text (``starts``)."""
        text = dedent(text, widths).rstrip(_WS)
        if text.endswith(">"):  # only then can quoted lines with no content end it (never a scan of the chunk)
            text = _TRAILING_MARKERS.sub("", text).rstrip(_WS)
        if text and not text.isspace():  # e.g. a lone U+3000 is whitespace that _WS does not strip
            self._out.append(text)
            self._starts.append(-1 if widths else start)

    def emit_at(self, m: Moment, brk: Break, first: str) -> None:
        """The pending text ends at the break ``brk`` of an emitting kind, whose next line's first character
        (after its indentation) is ``first``: emit it there (:meth:`cut_break`), unless ``brk`` lies between two
        rows of a table (the table stays in one chunk while it fits)."""
        if first == "|" and self._table_row_break(m, brk, first):
            return
        self.cut_break(m, brk)

    def _table_row_break(self, m: Moment, brk: Break, first: str | None = None) -> bool:
        """``brk`` is one line break (outside fences) between two table rows: the next line begins with ``|``
        (``first``, else read from the text) and so does the previous one (read back to its start)."""
        ws_start, _, rest, fence = brk
        if fence is not None or self._store.char_at(rest - 1) != "\n":
            return False
        if first is None and not _is_row(self._read(rest, min(rest + 4, m.tend))):
            return False
        return _is_row((m.head + self._read(m.base, ws_start)).rsplit("\n", 1)[-1])

    def _table_rows(self, m: Moment, brk: Break) -> list[str] | None:
        """The rows of the table ``brk`` lies in, up to the break (header first), or None when ``brk`` is no
        break inside a table: not between two lines beginning with ``|`` (:meth:`_table_row_break`), or those
        lines have no delimiter row (second row, or the next line after a header alone): lines of pipes."""
        if not self._table_row_break(m, brk):
            return None
        ws_start, _, rest, _ = brk
        lines = (m.head + self._read(m.base, ws_start)).split("\n")
        k = len(lines)
        while k > 0 and _is_row(lines[k - 1]):
            k -= 1
        rows = lines[k:]
        if len(rows) >= 2 and _TABLE_DELIMITER.fullmatch(rows[1]):
            return rows
        if len(rows) == 1 and _TABLE_DELIMITER.fullmatch(self._read(rest, min(rest + 512, m.tend)).split("\n")[0]):
            return rows  # the break after the header: the delimiter row follows
        return None

    def _table_head(self, rows: list[str]) -> str | None:
        """The head of the chunk after a cut below ``rows`` (:meth:`_table_rows`): the header and delimiter rows
        (``""`` when they take more than half of ``max_chars``); None when no body row is above the cut (a cut
        after the header or the delimiter row alone)."""
        if len(rows) < 3:
            return None
        head = rows[0] + "\n" + rows[1] + "\n"
        return head if 2 * units_of(head, self._utf16) <= self._max else ""

    def cut_break(self, m: Moment, brk: Break) -> None:
        """Emit the pending text up to the break ``brk`` (closing its fence) and restart after it."""
        ws_start, ws_cum, rest, fence = brk
        chunk = m.head + self._read(m.base, ws_start)
        start = -1 if m.head else m.base
        head = ""
        if fence is not None and fence.splittable:
            chunk += fence.closer
            start = -1
            if fence.end_line < 0 or fence.end_line > rest:
                head = self._reopen(fence, rest)
        if not head and self._store.char_at(rest - 1) != "\n":
            head = m.quote_head(rest)  # a quoted line continued mid-way gets its markers back
        self.emit(chunk, m.ctx_w, start)
        m.restart(rest, ws_cum + rest - ws_start, head)  # whitespace and ">": one unit each

    def _reopen(self, fence: Fence, rest: int) -> str:
        """The head of a chunk that continues ``fence`` at ``rest`` (a line continued mid-way keeps its
        block quote markers)."""
        fence.content_start = rest
        del fence.marks[: bisect_left(fence.marks, rest)]
        head = fence.reopen + "\n"
        if self._store.char_at(rest - 1) != "\n":  # a line continued mid-way: its content starts here
            if not fence.marks or fence.marks[0] != rest:
                fence.marks.insert(0, rest)
            head += fence.quote_prefix
        return head

    def _cut_at(self, m: Moment, p: int, cum: int) -> None:
        fence = m.fence_at(p)
        chunk = m.head + self._read(m.base, p)
        start = -1 if m.head else m.base
        head = ""
        if fence is not None and fence.splittable:
            chunk = chunk.rstrip(_WS) + fence.closer
            start = -1
            head = self._reopen(fence, p)
        else:
            head = m.quote_head(p)
        m.line_cut(p)
        self.emit(chunk, m.ctx_w, start)
        m.restart(p, cum, head)

    # --- cutting ------------------------------------------------------------------------------------

    def overflow(self, m: Moment) -> None:
        """Cut until the pending text of ``m`` fits in ``max_chars`` again (each cut emits a chunk)."""
        while m.rendered() > self._max:
            before = (m.base, m.head)
            if not self._cut_once(m) or (m.base, m.head) == before:
                return  # cannot happen while max_chars >= 2; never loop

    def _cut_once(self, m: Moment) -> bool:
        """Cut the pending text once, by the first plan that finds a cut inside the budget."""
        full = m.protect(True)
        struct = m.protect(False)
        plans: tuple[Callable[[], bool], ...] = (
            lambda: self._try_break(m, full, True),  # the best break outside links and code spans
            lambda: self._try_code_point(m, full, True, True, False),  # the last safe code point boundary
            lambda: self._try_break(m, struct, False),  # a link or code span longer than the budget
            lambda: self._try_code_point(m, struct, False, True, False),
            lambda: self._empty_fence_cut(m),  # an opener whose info string leaves no room for content
            lambda: self._try_code_point(m, struct, False, True, True),  # beside whitespace, clusters kept whole
            lambda: self._try_code_point(m, struct, False, False, False),  # a grapheme cluster over max
            lambda: self._try_code_point(m, BIG, False, False, True),  # anything: never loop
        )
        return any(plan() for plan in plans)

    def _try_break(self, m: Moment, guard: int, inline: bool) -> bool:
        for rank in RANKS:
            if rank == R_SENT:  # line breaks between table rows come after every other line break
                brk = self._last_valid(m, R_LINE, guard, inline, rows=True)
                if brk is not None:
                    head = self._table_head(self._table_rows(m, brk) or [])
                    ws_start, ws_cum, rest, _ = brk
                    self.emit(m.head + self._read(m.base, ws_start), m.ctx_w, -1 if m.head else m.base)
                    m.restart(rest, ws_cum + rest - ws_start, head or "")
                    return True
                m.fill_inner_breaks()  # found only when a cut needs them
            brk = self._last_valid(m, rank, guard, inline)
            if brk is not None:
                self.cut_break(m, brk)
                return True
        return False

    def _last_valid(self, m: Moment, rank: int, guard: int, inline: bool, rows: bool = False) -> Break | None:
        """The last break of ``rank`` before ``guard`` (outside protected regions) that fits, or None. A line
        break between two table rows counts only with ``rows`` (then only such a break, between two body rows),
        and the header the next chunk repeats counts in what fits (:meth:`_table_head`)."""
        table = self._breaks
        starts, lo = table.starts[rank], table.lo[rank]
        fences = table.fences[rank]
        regions, cum_at = self._regions, self._store.cum_at
        j = bisect_left(starts, guard, lo) - 1
        while j >= lo:
            ws = starts[j]
            k = regions.index(ws, inline)
            if k >= 0:
                j = bisect_left(starts, regions.starts[k], lo, j) - 1
                continue
            fence = fences[j] if fences is not None else None
            cum = cum_at(ws)
            units = m.head_units + cum - m.base_cum
            if fence is not None and fence.splittable:
                units += fence.closer_units
            if units <= self._max:
                brk = (ws, cum, table.rests[rank][j], fence)
                if (
                    self._fence_ok(m, brk)
                    and self.rest_ok(brk[2], m.tend)
                    and (rank != R_LINE or self._row_cut_ok(m, brk, rows))
                ):
                    return brk
            j -= 1
        return None

    def _row_cut_ok(self, m: Moment, brk: Break, rows: bool) -> bool:
        """A line break ``brk`` qualifies for this pass: ``rows``, one between two body rows of a table; else
        any line break not inside a table."""
        table = self._table_rows(m, brk)
        if not rows:
            return table is None
        return table is not None and self._table_head(table) is not None

    def _fence_ok(self, m: Moment, brk: Break) -> bool:
        """A cut at a break inside a fence leaves content on both sides (no empty fence)."""
        ws_start, _, rest, fence = brk
        if fence is None or not fence.splittable:
            return True
        if not fence.has_content(fence.content_start, ws_start):
            return False
        if self._store.char_at(rest - 1) != "\n":
            return True  # the rest continues a content line
        if fence.closer_line >= 0:
            return fence.has_content(rest, fence.closer_line)
        if fence is m.fence:  # still open: content must already follow, before a possible closer
            return fence.has_content(rest, m.content_limit())
        return True  # the fence ended with its container: the rest is outside it

    def rest_ok(self, rest: int, known: int) -> bool:
        """A chunk that begins mid-line at ``rest`` must not begin with a fence marker: a run of three
        backticks or tildes inside a line would open a fence at the start of a message. A run that
        reaches ``known`` (the end of the text seen so far) may still grow, so it does not qualify.

        Nor with text that Markdown reads as a block start at the start of a message while it was text
        mid-line (:func:`opens_block`: a block quote, heading, list item, thematic break, table row or
        HTML block); text that may still become one once more arrives does not qualify either. Also in
        fence content, which is reopened as code: a cut there has other boundaries as good, and a line
        continued after ``>`` would read as a quoted fence line continued after its reopened markers.
        Cost: at most :data:`LOOK` characters read."""
        char_at = self._store.char_at
        if rest >= known or char_at(rest - 1) == "\n":
            return True
        ch = char_at(rest)
        if ch == "`" or ch == "~":
            n = 1
            while n < 3 and rest + n < known and char_at(rest + n) == ch:
                n += 1
            return n < 3 and rest + n < known
        if ch not in BLOCK_STARTERS:
            return True
        stop = min(known, rest + LOOK)
        end = rest + 1
        while end < stop and char_at(end) != "\n":
            end += 1
        return not opens_block(self._read(rest, end), end < known and char_at(end) == "\n")

    def _try_code_point(self, m: Moment, guard: int, inline: bool, grapheme: bool, any_ws: bool) -> bool:
        """Cut at the last code point boundary inside the budget, outside protected regions."""
        base, base_cum, head_units = m.base, m.base_cum, m.head_units
        lo = base + 1
        # Start at the last boundary whose chunk could fit (each code point costs 1 unit or more).
        p = min(m.tend - 1, base + self._max - head_units)
        if p < lo:
            return False
        if guard < p:
            p = guard
        store, regions = self._store, self._regions
        cum = store.cum_at(p) if p >= lo else 0
        while p >= lo:
            k = regions.index(p, inline)
            if k >= 0:
                p = regions.starts[k]
                cum = store.cum_at(p) if p >= lo else 0
                continue
            fence = m.fence_at(p)
            units = head_units + cum - base_cum
            if fence is not None and fence.splittable:
                units += fence.closer_units
                if not any_ws and not fence.has_content(fence.content_start, p):
                    units = BIG  # no content before p: the chunk would hold an empty fence
            if units <= self._max and self._boundary_ok(m, p, grapheme, any_ws):
                self._cut_at(m, p, cum)
                return True
            p -= 1
            cum -= 2 if self._utf16 and store.char_at(p) > "\uffff" else 1
        return False

    def _boundary_ok(self, m: Moment, p: int, grapheme: bool, any_ws: bool) -> bool:
        char_at = self._store.char_at
        ch, prev = char_at(p), char_at(p - 1)
        if not any_ws and (ch in _WS or prev in _WS or not self.rest_ok(p, m.tend)):
            return False  # next to whitespace: that is a break, tried before
        if not grapheme:
            return True
        if is_extend(ch) or prev == ZWJ or ch in NO_START:
            return False
        if is_regional(ch) and is_regional(prev):
            q = p - 1
            while q > m.base and is_regional(char_at(q - 1)):
                q -= 1
            return (p - q) % 2 == 0  # not between the two flags of a pair
        return True

    def _empty_fence_cut(self, m: Moment) -> bool:
        """Last resort for a fence whose opener with its info string leaves no room for content.

        Emits the opener with a closer and reopens the fence bare.
        """
        fence = m.fence
        if (
            fence is None
            or not fence.splittable
            or fence.reopen_full
            or m.head
            or fence.opener_start != m.base
            or m.tend <= fence.content_start
        ):
            return False
        self.emit(self._read(m.base, fence.content_start).rstrip(_WS) + fence.closer, m.ctx_w)
        m.restart(fence.content_start, fence.content_cum, fence.reopen + "\n")
        return True
