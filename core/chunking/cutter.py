"""The cutter: where a chunk that no longer fits is cut, and how fences are closed and reopened.

Plans, tried in order until one finds a cut inside ``max_chars``: the last break of the best kind outside
links and code spans (paragraph > line > fence paragraph > fence line > sentence > space); the last
safe code point boundary (not inside a grapheme cluster, not before closing punctuation, not next to
whitespace); then the same inside a link or code span longer than the budget; an opener whose info
string leaves no room for content (emitted closed, the fence continues bare); anything (never loop).
A cut inside a fence closes it (a closer line with the fence's container prefix) and reopens it at the
start of the next chunk; a cut never leaves an empty fence behind and never begins a chunk mid-line
with a run of three backticks or tildes.

:class:`Cutter` holds the state the cutter shares with the scanner (:mod:`core.chunking.chunker`);
positions are absolute code point offsets, ``cum`` values are units (``core.units``) from the stream's
start, and ``_tend`` / ``_tcum`` are the time of the cut (what the scanner had read).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from operator import itemgetter

from core.chunking.breaks import R_SENT, RANKS, Break
from core.chunking.containers import dedent
from core.chunking.graphemes import NO_START, ZWJ, is_extend, is_regional
from core.chunking.lines import Fence
from core.units import LengthUnit, text_units

_WS = " \t\n\r\f\v"
_TRAILING_MARKERS = re.compile(r"(?:\n[ \t>]*)+\Z")  # quoted lines with no content yet end no chunk
_FIRST = itemgetter(0)
BIG = 1 << 62


class Cutter:
    """Cutting and the state it shares with the scanner (see the module docstring)."""

    _max: int
    _unit: LengthUnit
    _utf16: bool
    _out: list[str]
    _base: int
    _base_cum: int
    _head: str
    _head_units: int
    _p_blank: bool
    _breaks: list[list[Break]]
    _bstart: list[int]
    _reg_starts: list[int]
    _reg_ends: list[int]
    _reg_inline: list[bool]
    _rlo: int
    _fences: list[Fence]
    _fence: Fence | None
    _tend: int
    _tcum: int
    _ctx_w: tuple[int, ...]

    # --- provided by the scanner ------------------------------------------------------------------

    def _slice(self, a: int, b: int) -> str:
        raise NotImplementedError

    def _char_at(self, p: int) -> str:
        raise NotImplementedError

    def _cum_at(self, p: int) -> int:
        raise NotImplementedError

    def _protect(self, inline: bool) -> int:
        raise NotImplementedError

    def _rendered(self) -> int:
        raise NotImplementedError

    def _line_cut(self, p: int) -> None:
        raise NotImplementedError

    def _fill_inner_breaks(self) -> None:
        raise NotImplementedError

    def _content_limit(self) -> int:
        raise NotImplementedError

    def _forget(self, pos: int) -> None:
        raise NotImplementedError

    def _context_width(self, pos: int) -> tuple[int, ...]:
        raise NotImplementedError

    def _quote_head(self, pos: int) -> str:
        raise NotImplementedError

    # --- emitting -----------------------------------------------------------------------------------

    def _emit(self, text: str) -> None:
        text = _TRAILING_MARKERS.sub("", dedent(text, self._ctx_w).rstrip(_WS)).rstrip(_WS)
        if text.strip():
            self._out.append(text)

    def _set_base(self, pos: int, cum: int, head: str) -> None:
        """The pending text now starts at ``pos``, after ``head``; forget what lies before it."""
        self._base, self._base_cum = pos, cum
        self._head = head
        self._head_units = text_units(head, self._unit) if head else 0
        self._p_blank = False
        for r in RANKS:
            lst = self._breaks[r]
            lo = bisect_right(lst, pos, self._bstart[r], key=_FIRST)  # a break at pos cuts nothing
            if lo > 64 and 2 * lo > len(lst):
                del lst[:lo]
                lo = 0
            self._bstart[r] = lo
        self._rlo = bisect_right(self._reg_ends, pos, self._rlo)
        if self._rlo > 64 and 2 * self._rlo > len(self._reg_ends):
            del self._reg_starts[: self._rlo]
            del self._reg_ends[: self._rlo]
            del self._reg_inline[: self._rlo]
            self._rlo = 0
        self._fences = [f for f in self._fences if f is self._fence or f.end_line < 0 or f.end_line > pos]
        self._forget(pos)
        self._ctx_w = self._context_width(pos)

    def _cut_break(self, brk: Break) -> None:
        ws_start, ws_cum, rest, fence = brk
        chunk = self._head + self._slice(self._base, ws_start)
        head = ""
        if fence is not None and fence.splittable:
            chunk += fence.closer
            if fence.end_line < 0 or fence.end_line > rest:
                head = self._reopen(fence, rest)
        if not head and self._char_at(rest - 1) != "\n":
            head = self._quote_head(rest)  # a quoted line continued mid-way gets its markers back
        self._emit(chunk)
        self._set_base(rest, ws_cum + rest - ws_start, head)  # whitespace and ">": one unit each

    def _reopen(self, fence: Fence, rest: int) -> str:
        """The head of a chunk that continues ``fence`` at ``rest`` (a line continued mid-way keeps its
        block quote markers)."""
        fence.content_start = rest
        del fence.marks[: bisect_left(fence.marks, rest)]
        head = fence.reopen + "\n"
        if self._char_at(rest - 1) != "\n":  # a line continued mid-way: its content starts here
            if not fence.marks or fence.marks[0] != rest:
                fence.marks.insert(0, rest)
            head += fence.quote_prefix
        return head

    def _cut_at(self, p: int, cum: int) -> None:
        fence = self._fence_at(p)
        chunk = self._head + self._slice(self._base, p)
        head = ""
        if fence is not None and fence.splittable:
            chunk = chunk.rstrip(_WS) + fence.closer
            head = self._reopen(fence, p)
        else:
            head = self._quote_head(p)
        self._line_cut(p)
        self._emit(chunk)
        self._set_base(p, cum, head)

    # --- cutting ------------------------------------------------------------------------------------

    def _overflow(self) -> None:
        while self._rendered() > self._max:
            before = (self._base, self._head)
            if not self._cut_once() or (self._base, self._head) == before:
                return  # cannot happen while max_chars >= 2; never loop

    def _cut_once(self) -> bool:
        """Cut the pending text once, by the first plan that finds a cut inside the budget."""
        full = self._protect(True)
        struct = self._protect(False)
        plans: tuple[Callable[[], bool], ...] = (
            lambda: self._try_break(full, True),  # the best break outside links and code spans
            lambda: self._try_code_point(full, True, True, False),  # the last safe code point boundary
            lambda: self._try_break(struct, False),  # a link or code span longer than the budget
            lambda: self._try_code_point(struct, False, True, False),
            self._empty_fence_cut,  # an opener whose info string leaves no room for content
            lambda: self._try_code_point(struct, False, True, True),  # beside whitespace, clusters kept whole
            lambda: self._try_code_point(struct, False, False, False),  # a grapheme cluster over max
            lambda: self._try_code_point(BIG, False, False, True),  # anything: never loop
        )
        return any(plan() for plan in plans)

    def _try_break(self, guard: int, inline: bool) -> bool:
        for rank in RANKS:
            if rank == R_SENT:
                self._fill_inner_breaks()  # found only when a cut needs them
            brk = self._last_valid(rank, guard, inline)
            if brk is not None:
                self._cut_break(brk)
                return True
        return False

    def _last_valid(self, rank: int, guard: int, inline: bool) -> Break | None:
        """The last break of ``rank`` before ``guard`` (outside protected regions) that fits, or None."""
        lst, lo = self._breaks[rank], self._bstart[rank]
        j = bisect_left(lst, guard, lo, key=_FIRST) - 1
        while j >= lo:
            brk = lst[j]
            k = self._region_index(brk[0], inline)
            if k >= 0:
                j = bisect_left(lst, self._reg_starts[k], lo, j, key=_FIRST) - 1
                continue
            fence = brk[3]
            units = self._head_units + brk[1] - self._base_cum
            if fence is not None and fence.splittable:
                units += fence.closer_units
            if units <= self._max and self._fence_ok(brk) and self._rest_ok(brk[2], self._tend):
                return brk
            j -= 1
        return None

    def _fence_ok(self, brk: Break) -> bool:
        """A cut at a break inside a fence leaves content on both sides (no empty fence)."""
        ws_start, _, rest, fence = brk
        if fence is None or not fence.splittable:
            return True
        if not fence.has_content(fence.content_start, ws_start):
            return False
        if self._char_at(rest - 1) != "\n":
            return True  # the rest continues a content line
        if fence.closer_line >= 0:
            return fence.has_content(rest, fence.closer_line)
        if fence is self._fence:  # still open: content must already follow, before a possible closer
            return fence.has_content(rest, self._content_limit())
        return True  # the fence ended with its container: the rest is outside it

    def _rest_ok(self, rest: int, known: int) -> bool:
        """A chunk that begins mid-line at ``rest`` must not begin with a fence marker: a run of three
        backticks or tildes inside a line would open a fence at the start of a message. A run that
        reaches ``known`` (the end of the text seen so far) may still grow, so it does not qualify."""
        if rest >= known or self._char_at(rest - 1) == "\n":
            return True
        ch = self._char_at(rest)
        if ch != "`" and ch != "~":
            return True
        n = 1
        while n < 3 and rest + n < known and self._char_at(rest + n) == ch:
            n += 1
        return n < 3 and rest + n < known

    def _region_index(self, pos: int, inline: bool) -> int:
        k = bisect_left(self._reg_starts, pos, self._rlo) - 1
        if k >= self._rlo and self._reg_ends[k] > pos and (inline or not self._reg_inline[k]):
            return k
        return -1

    def _fence_at(self, p: int) -> Fence | None:
        """The fence whose content holds the code point boundary ``p``."""
        for fence in reversed(self._fences):
            if fence.opener_start < p:
                if p > fence.content_start and (fence.end_line < 0 or p < fence.end_line):
                    return fence
                return None
        return None

    def _try_code_point(self, guard: int, inline: bool, grapheme: bool, any_ws: bool) -> bool:
        """Cut at the last code point boundary inside the budget, outside protected regions."""
        lo = self._base + 1
        # Start at the last boundary whose chunk could fit (each code point costs 1 unit or more).
        p = min(self._tend - 1, self._base + self._max - self._head_units)
        if p < lo:
            return False
        if guard < p:
            p = guard
        cum = self._cum_at(p) if p >= lo else 0
        while p >= lo:
            k = self._region_index(p, inline)
            if k >= 0:
                p = self._reg_starts[k]
                cum = self._cum_at(p) if p >= lo else 0
                continue
            fence = self._fence_at(p)
            units = self._head_units + cum - self._base_cum
            if fence is not None and fence.splittable:
                units += fence.closer_units
                if not any_ws and not fence.has_content(fence.content_start, p):
                    units = BIG  # no content before p: the chunk would hold an empty fence
            if units <= self._max and self._boundary_ok(p, grapheme, any_ws):
                self._cut_at(p, cum)
                return True
            p -= 1
            cum -= 2 if self._utf16 and self._char_at(p) > "\uffff" else 1
        return False

    def _boundary_ok(self, p: int, grapheme: bool, any_ws: bool) -> bool:
        ch, prev = self._char_at(p), self._char_at(p - 1)
        if not any_ws and (ch in _WS or prev in _WS or not self._rest_ok(p, self._tend)):
            return False  # next to whitespace: that is a break, tried before
        if not grapheme:
            return True
        if is_extend(ch) or prev == ZWJ or ch in NO_START:
            return False
        if is_regional(ch) and is_regional(prev):
            q = p - 1
            while q > self._base and is_regional(self._char_at(q - 1)):
                q -= 1
            return (p - q) % 2 == 0  # not between the two flags of a pair
        return True

    def _empty_fence_cut(self) -> bool:
        """Last resort for a fence whose opener with its info string leaves no room for content.

        Emits the opener with a closer and reopens the fence bare.
        """
        fence = self._fence
        if (
            fence is None
            or not fence.splittable
            or fence.reopen_full
            or self._head
            or fence.opener_start != self._base
            or self._tend <= fence.content_start
        ):
            return False
        self._emit(self._slice(self._base, fence.content_start).rstrip(_WS) + fence.closer)
        self._set_base(fence.content_start, fence.content_cum, fence.reopen + "\n")
        return True

    def _add_region(self, start: int, end: int, inline: bool = True) -> None:
        starts = self._reg_starts
        while len(starts) > self._rlo and starts[-1] >= start:  # nested regions: keep the outer one
            starts.pop()
            self._reg_ends.pop()
            self._reg_inline.pop()
        starts.append(start)
        self._reg_ends.append(end)
        self._reg_inline.append(inline)
