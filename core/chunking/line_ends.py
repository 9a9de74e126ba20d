"""Line ends: what a complete line leaves to the next, and the container context a cut reads.

A line read whole (``_fast_line`` for a line that needs no prefix read and cannot make the pending text
overflow: text that begins with a letter-like character, a plain ``- text`` bullet item, content of a
top-level fence; ``_whole_line`` otherwise) or completed after arriving in pieces ends in ``_finish_line``: an
opener line opens its fence (bare when its info string could not fit), a closer closes it, a blank line
ends tentative inline ranges, the whitespace run across the newline begins, and the line is stored with
what a cut needs later (its body, its last non-space character, its fence, its prefix read for its
container context: core/chunking/containers.py).
"""

from __future__ import annotations

import re

from core.chunking.containers import NO_CONTEXT, Context, line_context
from core.chunking.events import M_FENCE, M_INFO, M_TEXT, LineEvents
from core.chunking.lines import FLINE, TEXT, Fence, LineRead, read_prefix, run_length
from core.chunking.opener import open_fence
from core.chunking.params import ChunkParams
from core.chunking.store import Line, units_of

__all__ = ["LineEnds"]

_SPECIAL = re.compile(r"[`\\\[\]()]")
_SLOW_START = frozenset(" \t\r\f\v>-*+0123456789`~")
_OPENS = re.compile(r"[`\[]")
_NONSPACE = re.compile(r"[^ \t\r\f\v]")
_SIMPLE_ITEM = re.compile(r"[-*+] (?:[^ \t\r\f\v>`~*+\-0-9]|\*\*)")
"""A bullet item at column 0 whose text begins with no marker, fence run or quote: its content column is 2."""
_WS = " \t\n\r\f\v"


def _fence_body(line: str, fence: Fence | None) -> int:
    """Where the content of ``line`` begins when it needs no prefix read: an ordinary line outside fences
    that begins with a letter-like character (0), or a content line of a top-level fence that cannot be
    its closer; else -1."""
    if fence is None:
        return -1 if line and line[0] in _SLOW_START else 0
    if fence.quote_depth or fence.item_indent or not line:
        return -1
    if line[0] not in _SLOW_START:
        return 0
    m = _NONSPACE.search(line)
    if m is None:
        return -1
    body = m.start()
    if body <= 3 and line[body] == fence.char and "\t" not in line[:body]:
        return -1
    return body


_NO_LISTS: list[int] = []  # never changed: the items open before a line outside containers


class LineEnds(LineEvents):
    """Reading whole lines and ending lines (see the module docstring)."""

    params: ChunkParams
    _cp_max: int

    def _new_line(self) -> None:
        raise NotImplementedError

    def _fast_line(self, line: str, units: int) -> bool:
        """Read a whole ordinary line at once (text that begins with a letter-like character, or content
        of a top-level fence, that cannot make the pending text overflow); False when the general path
        must."""
        used = self._head_units + self._cum + units - self._base_cum
        if self._sentence and used >= self._min:
            return False
        fence = self._fence
        body = _fence_body(line, fence)
        lr = None
        if body < 0:
            if fence is not None or _SIMPLE_ITEM.match(line) is None:
                return False
            body, lr = 2, LineRead(TEXT, 0, 2, 2, 0, 2, [2], False, False, 1)  # what read_prefix would say
        closer = fence.closer_units if fence is not None and fence.splittable else 0
        if used + closer > self._max:
            return False
        pos, n = self._lpos, len(line)
        lists = _NO_LISTS
        if line:
            if self._ws_open:
                self._complete_break(0)
            else:
                self._q_done, self._p_blank = True, False
            end = len(line.rstrip(_WS))
            if fence is not None:
                fence.marks.append(pos + body)
            else:
                lists = self._text_line(line, pos, lr)
            self._rs.prev_blank = False
            self._ws_open, self._ws_leading = True, self._p_blank
            self._ws_start, self._ws_cum, self._ws_nl = pos + end, self._cum + units - (n - end), 1
        else:
            end = 0
            if fence is None:
                self._inline.cancel()
            self._rs.prev_blank = True
            if self._ws_open:
                self._ws_nl += 1
            else:
                self._ws_open, self._ws_leading = True, self._p_blank
                self._ws_start, self._ws_cum, self._ws_nl = pos, self._cum, 1
        self._ws_last_nl = pos + n
        self._end += n + 1
        self._cum += units + 1
        self._store.push_line(Line(pos, self._lcum, line + "\n", body, end, fence, fence is None, lr, lists), self._cum)
        if self._p_blank and not self._head:
            self._base, self._base_cum = self._end, self._cum  # blank lines at the start of a block are dropped
            self._store.forget(self._base)
        self._lpos, self._lcum, self._q_done = self._store.cur_pos, self._cum, False
        return True

    def _text_line(self, line: str, pos: int, lr: LineRead | None) -> list[int]:
        """A whole text line outside fences (``lr``: a bullet item's prefix): its list items and inline
        ranges; returns the items open before it."""
        rs = self._rs
        before = rs.lists
        if lr is not None:
            self._inline.cancel()  # a list item begins: no span or link crosses it
            rs.lists = lr.lists
        elif rs.prev_blank and before:
            rs.lists = []
        inline = self._inline
        # with no span or link open, only a backtick or a "[" can change the inline state
        if _OPENS.search(line) if inline.code is None and not inline.links else _SPECIAL.search(line):
            inline.scan(line, lr.start if lr is not None else 0, len(line), pos)
        return before if lr is not None else _NO_LISTS

    def _end_info_drop(self) -> None:
        """The block ends inside an opener line whose info string was not counted: it opened no fence,
        so it is text, cut where it no longer fits."""
        line = self._store.current()
        n = len(line)
        if self._lr is None or self._info_drop(line, n, self._cum - self._lcum == n)[0] >= n:
            return
        self._mode, self._ldone = M_TEXT, n
        self._set_time(self._end, self._cum)
        self._tnonws = self._lcum + units_of(line.rstrip(_WS), self._utf16)
        self._overflow()

    def _whole_line(self, line: str, units: int) -> None:
        """A line that arrived whole in one append: read it, handle its events, end it."""
        self._store.parts.append(line)
        n = len(line)
        self._end += n
        self._cum += units
        lr = read_prefix(line, n, self._rs, self._ws_open and not self._ws_leading, True)
        if lr.q >= 0:
            self._lr_peek = lr
            self._complete_break(lr.q)
            self._lr_peek = None
        self._start_line(lr)
        fence = self._fence
        closer = fence.closer_units if fence is not None and fence.splittable else 0
        used = self._head_units + self._cum - self._base_cum
        if used + closer > self._max or (self._sentence and used >= self._min):
            self._body(line, n, True)
        else:
            self._process_to(line, n, True)
        self._finish_line(line)

    def _finish_line(self, line: str) -> None:
        store = self._store
        n = len(line)
        lr = self._lr
        assert lr is not None
        if self._mode == M_INFO and self._info_drop(line, n, self._cum - self._lcum == n)[0] < n:
            end = lr.start + run_length(line, lr.start, line[lr.start])  # the opener goes on bare
            self._end -= n - end
            self._cum -= units_of(line[end:], self._utf16)
            line, n = line[:end], end
            store.parts[:] = [line]
        nl_pos = self._lpos + n
        interior = self._fence if self._mode == M_FENCE else None
        if self._mode == M_INFO:
            self._open_fence(line, lr)
        elif self._is_closer(line, n, lr):
            self._close_fence(lr.start)
        if self._fence is None and lr.blank:
            self._inline.cancel()  # a blank line ends the paragraph: no span or link crosses it
        self._rs.prev_blank = lr.blank
        end = len(line.rstrip(_WS))
        if lr.q >= 0:
            ws_idx = max(lr.body, end)
            self._ws_open, self._ws_leading = True, self._p_blank
            self._ws_start = self._lpos + ws_idx
            self._ws_cum = self._cum - (n - ws_idx)  # trailing whitespace: one unit each
            self._ws_nl = 1
        elif self._ws_open:
            self._ws_nl += 1
        else:
            self._ws_open, self._ws_leading = True, self._p_blank
            self._ws_start, self._ws_cum, self._ws_nl = nl_pos, self._cum, 1
        self._ws_last_nl = nl_pos
        self._end += 1
        self._cum += 1
        text = line + "\n"
        store.push_line(
            Line(self._lpos, self._lcum, text, lr.body, end, interior, self._mode == M_TEXT, lr, self._lists_before),
            self._cum,
        )
        if self._p_blank and not self._head:
            self._base, self._base_cum = self._end, self._cum  # blank lines at the start of a block are dropped
            store.forget(self._base)
        self._new_line()

    def _context(self, pos: int) -> Context:
        """The container context of a chunk starting at ``pos`` (core/chunking/containers.py)."""
        line = self._store.line_at(pos)
        if line is not None:
            if line.lr is None:
                return NO_CONTEXT
            return line_context(line.text[:-1], line.lr, line.lists, line.fence, pos - line.pos)
        lr = self._lr or self._lr_peek
        if lr is None:
            return NO_CONTEXT
        fence = self._fence if lr.kind == FLINE else None
        lists = self._lists_before if self._lr is not None else self._rs.lists
        return line_context(self._store.current(), lr, lists, fence, pos - self._lpos)

    def _context_width(self, pos: int) -> tuple[int, ...]:
        return self._context(pos)[0]

    def _quote_head(self, pos: int) -> str:
        head = self._context(pos)[1]  # given back while it takes at most half of max_chars
        units = units_of(head, self._utf16)
        return head if 2 * units <= self._max and units + self._cp_max <= self._max else ""

    def _is_closer(self, line: str, n: int, lr: LineRead) -> bool:
        fence = self._fence
        if self._mode != M_FENCE or fence is None or self._content_from(line, n) >= 0:
            return False
        return run_length(line, lr.start, fence.char) >= fence.length

    def _open_fence(self, line: str, lr: LineRead) -> None:
        fence = open_fence(line, lr, self._rs.lists, self._run_start, self._run_len, self.params)
        fence.opener_start = self._lpos
        fence.content_start = self._lpos + len(line) + 1
        fence.content_cum = self._cum + 1
        self._add_region(self._lpos, self._lpos + len(line.rstrip(_WS)), False)
        self._fence = self._rs.fence = fence
        self._fences.append(fence)

    def _close_fence(self, start: int) -> None:
        fence = self._fence
        assert fence is not None
        fence.closer_line = fence.end_line = self._lpos
        if fence.marks and fence.marks[-1] >= self._lpos:
            fence.marks.pop()
        self._add_region(self._lpos, self._lpos + start + run_length(self._store.current(), start, fence.char), False)
        self._fence = self._rs.fence = None
