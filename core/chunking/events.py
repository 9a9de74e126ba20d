"""Events inside a line: the moments a chunk is emitted or cut, and the state a cut reads at them.

A line is read lazily and only as far as an event needs: the break before it completes at its first
character that is not indentation or a ``>`` marker (an emit at the preferred break may be due); the
pending text may stop fitting at some character (a cut is due: :mod:`core.chunking.cutter`); under a
SENTENCE preference a sentence break may complete mid-line. Each event is handled with the state the
text held at its moment (the line's structure and inline state read up to it, never past it), so the
output does not depend on how the text was split into appends. :class:`LineEvents` is the part of
:class:`core.chunking.Chunker` that does this; it also answers the cutter's questions about that moment
(what is protected, how long the chunk is, which breaks lie inside the lines).
"""

from __future__ import annotations

import re

from core.chunking.breaks import (
    CJK_BREAK,
    R_FLINE,
    R_FPARA,
    R_LINE,
    R_PARA,
    R_SENT,
    R_SPACE,
    SENTENCE_BREAK,
    Break,
    inner_breaks,
)
from core.chunking.cutter import BIG, Cutter
from core.chunking.inline import InlineScanner
from core.chunking.lines import FLINE, OPEN, RUN, SPACES, Fence, LineRead, ReaderState, read_prefix, run_length
from core.chunking.store import TextStore, units_of

__all__ = ["M_FENCE", "M_INFO", "M_NONE", "M_RUN", "M_TEXT", "LineEvents"]

_NONWS = re.compile(r"[^ \t\r\f\v]")
_WS = " \t\n\r\f\v"
M_NONE, M_TEXT, M_RUN, M_INFO, M_FENCE = range(5)  # what the current line is, as read so far


class LineEvents(Cutter):
    """Line events and the state at their moment (see the module docstring)."""

    _min: int
    _cum: int
    _end: int
    _sentence: bool
    _emit_ranks: frozenset[int]
    _store: TextStore
    _inline: InlineScanner
    _rs: ReaderState
    _inner_key: tuple[int, int]
    _tnonws: int
    _ws_open: bool
    _ws_leading: bool
    _ws_start: int
    _ws_cum: int
    _ws_nl: int
    _ws_last_nl: int
    _lpos: int
    _lcum: int
    _lr: LineRead | None
    _lr_peek: LineRead | None
    _lists_before: list[int]
    _q_done: bool
    _mode: int
    _ldone: int
    _ochk: int
    _sent_from: int
    _cf: int
    _run_start: int
    _run_len: int
    _cancel_at: int
    _cancelled: int

    def _break_open(self) -> bool:
        return self._ws_open and not self._ws_leading

    def _advance(self, complete: bool) -> None:
        line = self._store.current()
        n = len(line)
        if self._lr is None:
            lr = read_prefix(line, n, self._rs, self._break_open(), complete)
            if lr.q >= 0 and not self._q_done:
                self._lr_peek = lr
                self._complete_break(lr.q)
                self._lr_peek = None
            if lr.kind == OPEN:  # a list marker or not: the pending text may overflow meanwhile
                self._lr, self._lists_before = lr, self._rs.lists
                self._cancel_at = lr.new_item if lr.new_item > self._cancelled else -1
                self._body(line, n, False)
                self._lr = None
                return
            self._start_line(lr)
        self._body(line, n, complete)

    def _complete_break(self, q: int) -> None:
        """The first character of the line that is not part of the break before it arrived at ``q``."""
        self._q_done = True
        self._p_blank = False
        if not self._ws_open:
            return
        self._ws_open = False
        start = self._ws_start
        if self._ws_leading or start < self._base:
            return
        fenced = self._fence is not None
        rank = (R_FPARA if fenced else R_PARA) if self._ws_nl >= 2 else (R_FLINE if fenced else R_LINE)
        brk: Break = (start, self._ws_cum, self._ws_last_nl + 1, self._fence)
        self._breaks[rank].append(brk)
        if brk[3] is None and rank in self._emit_ranks and self._head_units + brk[1] - self._base_cum >= self._min:
            guard = self._inline.guard()
            if guard < 0 or start < guard:
                self._set_time(self._lpos + q, self._lcum + units_of(self._store.current()[:q], self._utf16))
                self._cut_break(brk)

    def _start_line(self, lr: LineRead) -> None:
        self._lr = lr
        fence = self._fence
        if lr.implicit_end and fence is not None:
            fence.end_line = self._lpos  # the line left the fence's container
            self._fence = self._rs.fence = None
        self._cancel_at = lr.new_item if lr.new_item > self._cancelled else -1
        self._lists_before = self._rs.lists
        self._rs.lists = lr.lists
        self._ldone = lr.start
        if lr.kind == FLINE:
            assert self._fence is not None
            self._fence.marks.append(self._lpos + lr.start)
            self._mode = M_FENCE
        elif lr.kind == RUN:
            self._mode = M_RUN
            self._run_start = lr.start
        else:
            self._mode = M_TEXT

    def _set_time(self, t: int, cum: int) -> None:
        self._tend, self._tcum, self._tnonws = t, cum, cum

    def _body(self, line: str, n: int, complete: bool) -> None:
        while True:
            k = self._next_overflow(line, n)
            r = self._next_sentence(line, n) if self._sentence else None
            if r is not None and (k < 0 or r[1] <= k):
                self._sent_from = r[1]
                self._process_to(line, r[1], False)
                self._sentence_event(line, r[0], r[1])
                continue
            if k < 0:
                break
            self._ochk = k + 1
            self._process_to(line, k + 1, False)  # the newline after it is not read yet
            self._set_time(self._lpos + k + 1, self._lcum + units_of(line[: k + 1], self._utf16))
            self._overflow()
        if complete:
            self._process_to(line, n, True)

    def _next_overflow(self, line: str, n: int) -> int:
        """Index of the first character after which the pending text no longer fits, or -1."""
        lr = self._lr
        if lr is None or lr.q < 0:
            return -1
        lo = max(self._ochk, lr.q)
        if lo >= n:
            return -1
        budget = self._max - self._head_units + self._base_cum - self._lcum
        fence, closer, cf = self._fence, 0, -1
        if fence is not None and fence.splittable and self._mode == M_FENCE:
            cf = self._content_from(line, n)
            if cf >= 0:
                closer = fence.closer_units
        total = self._cum - self._lcum
        if total <= budget - closer:
            self._ochk = n
            return -1
        bmp = total == n
        k = self._first_over(line, lo, n, budget, bmp)
        if closer:
            k = min(k, self._first_over(line, max(lo, cf), n, budget - closer, bmp))
        drop, back = self._info_drop(line, n, bmp)
        if drop <= k < back:
            k = back  # an info string too long to fit is not counted while the line may open a fence
        m = _NONWS.search(line, k, n) if k < n else None
        if m is None:
            self._ochk = n
            return -1
        return m.start()

    def _info_drop(self, line: str, n: int, bmp: bool) -> tuple[int, int]:
        """An opener line whose info string cannot fit in a chunk with one code point and a closer: the
        range of its info string that does not count, ``(first index, index where the line turned into
        text or n)``; ``(n, n)`` otherwise. The fence opens bare (core/chunking/chunker.py)."""
        if self._mode not in (M_RUN, M_INFO):
            return n, n
        s = self._run_start
        char = line[s]
        e = s + run_length(line, s, char)
        if e - s < 3 or e >= n:
            return n, n
        back = line.find("`", e, n) if char == "`" else -1
        back = n if back < 0 else back
        budget = self._max - (1 + e) - 1 - (2 if self._utf16 else 1)  # newline, prefix and run of a closer
        drop = max(self._first_over(line, e, n, budget, bmp), e)
        return (drop, back) if drop < back else (n, n)

    def _first_over(self, line: str, lo: int, n: int, budget: int, bmp: bool) -> int:
        """Smallest index ``k >= lo`` with ``units(line[:k + 1]) > budget`` (``n`` when none)."""
        if bmp:
            return min(max(lo, budget), n)
        used = units_of(line[:lo], True)
        for k in range(lo, n):
            used += 2 if line[k] > "\uffff" else 1
            if used > budget:
                return k
        return n

    def _content_from(self, line: str, n: int) -> int:
        """Fence line: index where it becomes content (not a closer), -1 while it may be a closer."""
        if self._cf >= 0:
            return self._cf
        fence, lr = self._fence, self._lr
        assert fence is not None and lr is not None
        s = lr.start
        if line[s] != fence.char or lr.col > fence.item_indent + 3:
            self._cf = s
            return s
        e = s + run_length(line, s, fence.char)
        if e >= n:
            return -1
        if line[e] in SPACES and e - s >= fence.length:
            m = _NONWS.search(line, e, n)
            if m is None:
                return -1
            e = m.start()
        self._cf = e
        return e

    def _next_sentence(self, line: str, n: int) -> tuple[int, int] | None:
        """The next sentence break of the line that its next character completed: (whitespace, rest)."""
        lr = self._lr
        if lr is None or self._fence is not None or self._head_units + self._cum - self._base_cum < self._min:
            return None
        lo = max(self._sent_from, lr.body, self._base - self._lpos)
        m = SENTENCE_BREAK.search(line, lo, n)
        c = CJK_BREAK.search(line, lo, n)
        if c is not None and (m is None or c.end() < m.end()):
            return c.end(), c.end()  # a CJK full stop that text follows: a zero-width break after it
        if m is None:
            self._sent_from = max(lo, n - 32)
            return None
        return m.start() + len(m.group().rstrip(_WS)), m.end()

    def _sentence_event(self, line: str, a: int, r: int) -> None:
        ws_start = self._lpos + a
        if ws_start <= self._base or (a == r and (self._inline.code is not None or line[a - 2 : a - 1] == "\\")):
            return
        cum = self._lcum + units_of(line[:a], self._utf16)
        if self._head_units + cum - self._base_cum < self._min:
            return
        self._set_time(self._lpos + r, self._lcum + units_of(line[:r], self._utf16))
        guard = self._protect(True)
        if ws_start < guard and self._rest_ok(self._lpos + r, self._tend + 1):
            self._cut_break((ws_start, cum, self._lpos + r, None))

    def _process_to(self, line: str, upto: int, at_end: bool) -> None:
        """Read the line's structure and inline state up to ``upto`` (``at_end``: the newline follows)."""
        if 0 <= self._cancel_at < upto:
            self._cancelled, self._cancel_at = self._cancel_at, -1
            self._inline.cancel()  # a list item begins: no span or link crosses it
        if self._ldone >= upto:
            return
        if self._mode == M_RUN:
            s = self._run_start
            e = min(s + run_length(line, s, line[s]), upto)
            if e >= upto and not at_end:
                return
            if e - s < 3:
                self._mode, self._ldone = M_TEXT, s
            else:
                self._run_len = e - s
                self._inline.cancel()
                self._mode, self._ldone = M_INFO, e
        if self._mode == M_INFO:
            b = line.find("`", self._ldone, upto) if line[self._run_start] == "`" else -1
            if b < 0:
                self._ldone = upto
                return
            self._mode, self._ldone = M_TEXT, b
            self._inline.code = (self._run_len, self._lpos + self._run_start)
        if self._mode == M_TEXT:
            j = upto if at_end else self._inline.safe_end(line, self._ldone, upto)
            if j > self._ldone:
                self._inline.scan(line, self._ldone, j, self._lpos)
                self._ldone = j

    def _candidate(self) -> bool:
        """At the time of the cut, the current line may still be a fence marker line."""
        mode = self._mode
        lr = self._lr
        if lr is None or self._tend - self._lpos <= lr.start:  # still in its prefix at that time
            return self._fence is not None
        if mode in (M_RUN, M_INFO):
            return True
        if mode == M_FENCE:
            cf = self._cf
            return cf < 0 or cf >= self._tend - self._lpos
        return mode == M_NONE and self._fence is not None

    def _protect(self, inline: bool) -> int:
        best = BIG
        if inline:
            g = self._inline.guard()
            if g >= 0:
                best = g
            if self._mode == M_TEXT:
                tg = self._inline.tail_guard(self._store.current(), self._ldone, self._tend - self._lpos, self._lpos)
                if 0 <= tg < best:
                    best = tg
        if self._candidate() and self._lpos < best:
            best = self._lpos
        return best

    def _rendered(self) -> int:
        nonws = self._tnonws
        if self._p_blank or nonws < self._base_cum:
            nonws = self._base_cum
        units = self._head_units + nonws - self._base_cum
        fence = self._fence
        if fence is not None and fence.splittable and self._mode == M_FENCE and not self._candidate():
            units += fence.closer_units
        return units

    def _content_limit(self) -> int:
        return self._lpos if self._candidate() else self._tend

    def _line_cut(self, p: int) -> None:
        lr = self._lr
        if self._mode in (M_RUN, M_INFO) and lr is not None and p > self._lpos + lr.start:
            self._mode = M_TEXT  # a line cut in two opens no fence
            self._ldone = self._tend - self._lpos

    def _fill_inner_breaks(self) -> None:
        """Sentence and space breaks between the pending text's start and the time of the cut."""
        key = (self._base, self._tend)
        if key == self._inner_key:
            return
        self._inner_key = key
        sent: list[Break] = []
        space: list[Break] = []
        lines: list[tuple[str, int, int, int, int, Fence | None, bool]] = [
            (ln.text, ln.pos, ln.cum, ln.body, ln.end, ln.fence, ln.cjk) for ln in self._store.lines_from(self._base)
        ]
        lr = self._lr
        if lr is not None and lr.q >= 0:
            fence = self._fence if self._mode == M_FENCE else None
            cur = self._store.current()
            lines.append((cur, self._lpos, self._lcum, lr.body, self._tend - self._lpos, fence, self._mode == M_TEXT))
        for text, pos, cum, body, end, fence, cjk in lines:
            last, used = 0, cum
            for s, e, is_sent in inner_breaks(text, max(body, self._base - pos), end, cjk):
                used += s - last if not self._utf16 else units_of(text[last:s], True)
                last = s
                (sent if is_sent else space).append((pos + s, used, pos + e, fence))
        self._breaks[R_SENT], self._breaks[R_SPACE] = sent, space
        self._bstart[R_SENT] = self._bstart[R_SPACE] = 0
