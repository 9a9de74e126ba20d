"""Chunker: cuts a stream's visible text into chunks at safe breaks (shared/DESIGN.md section 4).

The rule (shared/cases/README.md), applied as if the text arrived one code point at a time, so that the
output never depends on how the text was split into appends:

- A *break* is a run of whitespace (``" \\t\\n\\r\\f\\v"``; block quote markers at the start of a
  line belong to it, so a quoted blank line is a paragraph break) after some text: a paragraph (two
  newlines or more), a line (one newline), a sentence (no newline, after ``.!?`` or an ellipsis and
  optional closing quotes or brackets; also a CJK full stop U+3002, U+FF01, U+FF1F followed directly by
  text) or a space. A break counts once the first character after its whitespace has arrived.
- Emit: as soon as the pending text ends at a break of the preferred kind or stronger (paragraph >
  newline > sentence) that lies outside fences, links and inline code spans, and the text before the
  break is at least ``min_chars`` long, that text is a chunk. ``min_chars`` gates only this.
- Cut: only when the pending text no longer fits in ``max_chars`` (trailing whitespace not counted; a
  closer counted once the last line is fence content) is it cut, at the last break of the best kind
  whose chunk fits: paragraph > line (breaks outside fences before breaks inside fences, so a fence
  that fits moves whole to the next chunk) > sentence > space > code point boundary. Breaks and
  boundaries inside links ``[text](url)``, inline code spans, fence marker lines and grapheme clusters
  (combining marks, ZWJ sequences, variation selectors, emoji modifiers, flag pairs) are used only when
  nothing else fits. A chunk never leaves an empty fence behind a cut, and a chunk that begins
  mid-line never begins with three backticks or tildes (that would open a fence).
- A cut drops the break's whitespace; the indentation of the next line is kept. A fence cut in two is
  closed (a closer line with the fence's container prefix) and reopened at the start of the next chunk
  (a line continued mid-way also gets its block quote markers back); those markers count in
  ``max_chars``. The reopened opener keeps the info string while opener, closer and their newlines take
  at most half of ``max_chars``, else it is bare; when even the first chunk cannot hold the original
  opener, one code point and a closer, the opener is emitted closed at once and the fence continues bare.
- The forced drain emits what is pending, as it is (trailing whitespace dropped; no closer is invented
  for a fence the text left open); chunks made of whitespace only are dropped: chunks are never empty.

Fences are CommonMark fences (`````` ``` `````` or ``~~~``, at most 3 spaces of indentation relative to
their container, closed by a line of the same character at least as long), also inside block quotes
and list items. A fence whose opener and closer cannot fit together in ``max_chars`` (or whose opener
line alone is longer) is cut like text. Lengths are in the channel's unit
(:class:`core.units.LengthUnit`): code points, or UTF-16 code units for Telegram, where a character
beyond the BMP costs 2 and is never split.

Cost: one pass. Each append costs time proportional to its own length (runs of ordinary characters are
skipped with a regular expression; the scanner keeps the line, fence, inline code and link state, the
breaks found so far and running unit counts, never rescanning the pending text); a cut costs time
proportional to the text it emits. bench/bench_chunker.py measures it.
"""

from __future__ import annotations

import enum
import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter

from core.units import LengthUnit, text_units

__all__ = ["BreakKind", "ChunkParams", "Chunker", "chunk_text"]


class BreakKind(enum.StrEnum):
    """The break a chunker waits for before emitting a chunk under ``max_chars``."""

    PARAGRAPH = "paragraph"
    NEWLINE = "newline"
    SENTENCE = "sentence"


@dataclass(frozen=True)
class ChunkParams:
    """How a :class:`Chunker` cuts.

    Attributes:
        min_chars: the shortest chunk emitted at a preferred break, in ``unit`` (0 or more).
        max_chars: the longest chunk ever emitted, fence markers included, in ``unit`` (2 or more,
            so that any code point fits).
        break_preference: the break that ends a chunk as soon as ``min_chars`` is reached.
        unit: how lengths are counted (code points, or UTF-16 code units).

    Raises:
        ValueError: when ``max_chars < 2`` or ``min_chars`` is outside ``0..max_chars``.
    """

    min_chars: int
    max_chars: int
    break_preference: BreakKind = BreakKind.PARAGRAPH
    unit: LengthUnit = LengthUnit.CHARS

    def __post_init__(self) -> None:
        object.__setattr__(self, "break_preference", BreakKind(self.break_preference))
        object.__setattr__(self, "unit", LengthUnit(self.unit))
        if self.max_chars < 2:
            raise ValueError(f"max_chars must be at least 2, got {self.max_chars}")
        if not 0 <= self.min_chars <= self.max_chars:
            raise ValueError(f"min_chars must be in 0..max_chars ({self.max_chars}), got {self.min_chars}")


# --- characters ----------------------------------------------------------------------------------------

_WS = " \t\n\r\f\v"
_WS_SET = frozenset(_WS)
_CJK_STOPS = frozenset("\u3002\uff01\uff1f")  # ideographic full stop, fullwidth ! and ?
_SENT_END = frozenset(".!?\u2026") | _CJK_STOPS
_CLOSERS = frozenset("\"')]}*_\u2019\u201d\u00bb")  # closing quotes and brackets after a sentence end
# A forced cut does not put these first: closing punctuation, also fullwidth (CJK) forms.
_NO_START = frozenset(".,;:!?)]}\u2026\u3001\u3002\uff0c\uff01\uff1f\uff1a\uff1b\uff09\u300d\u300f\u3011\u300b")
_ZWJ = "\u200d"
_BMP_MAX = "\uffff"

# Runs of characters that change no state in a line state (see Chunker._scan).
_RX_TEXT = re.compile("[^ \t\n\r\f\v`\\[\\]()\\\\\u3002\uff01\uff1f]+")
_RX_NO_BACKTICK = re.compile(r"[^ \t\n\r\f\v`]+")
_RX_NON_WS = re.compile(r"[^ \t\n\r\f\v]+")
_RX_LIST_MARKER = re.compile(r"[-*+]|\d{1,9}[.)]")


def _is_extend(ch: str) -> bool:
    """True when no grapheme cluster boundary may come before ``ch`` (marks, ZWJ, selectors, modifiers)."""
    o = ord(ch)
    if o < 0x300:
        return False
    if o == 0x200D or 0xFE00 <= o <= 0xFE0F or 0x1F3FB <= o <= 0x1F3FF:
        return True
    if 0xE0020 <= o <= 0xE007F or 0xE0100 <= o <= 0xE01EF:
        return True
    return unicodedata.category(ch) in ("Mn", "Me", "Mc")


def _is_regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def _spaces(m: re.Match[str]) -> str:
    return " " * len(m.group(0))


# --- scanner states ------------------------------------------------------------------------------------

# Cut ranks, best first. Breaks outside fences come before breaks inside fences ("a fence that fits is
# never cut"); sentence and space breaks hold both.
_R_PARA, _R_LINE, _R_FPARA, _R_FLINE, _R_SENT, _R_SPACE = range(6)
_RANKS = range(6)
_EMIT_RANKS = {
    BreakKind.PARAGRAPH: frozenset({_R_PARA}),
    BreakKind.NEWLINE: frozenset({_R_PARA, _R_LINE}),
    BreakKind.SENTENCE: frozenset({_R_PARA, _R_LINE, _R_SENT}),
}

# Line states. Outside a fence: prefix (indentation, ``>``), list marker candidates, a fence run, an
# opener's info string, text. Inside a fence: prefix, a closer run, a closer's trailing spaces, content.
(
    _L_PREFIX,
    _L_BULLET,
    _L_NUM,
    _L_NUM_DELIM,
    _L_RUN,
    _L_INFO,
    _L_TEXT,
    _L_FPREFIX,
    _L_FRUN,
    _L_FTRAIL,
    _L_FCONTENT,
) = range(11)
_CANDIDATE_LINES = frozenset({_L_RUN, _L_INFO, _L_FPREFIX, _L_FRUN, _L_FTRAIL})

_FIRST = itemgetter(0)
_BIG = 1 << 62


class _Fence:
    """An open (or recently closed) fence. Positions are absolute code point offsets in the stream."""

    __slots__ = (
        "char",
        "closer",
        "closer_line",
        "closer_units",
        "content_cum",
        "content_start",
        "end_line",
        "item_indent",
        "length",
        "marks",
        "opener_start",
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
        self.item_indent = 0
        self.closer = ""  # "\n" + container prefix + run
        self.closer_units = 0
        self.reopen = ""  # the opener line of a continuation chunk
        self.reopen_full = True  # reopen carries the info string
        self.splittable = True  # markers fit in max_chars: the fence can be closed and reopened
        self.marks: list[int] = []  # where each content line's content begins (quote markers aside)

    def has_content(self, a: int, b: int) -> bool:
        """True when some content line begins its content in ``[a, b)``."""
        k = bisect_left(self.marks, a)
        return k < len(self.marks) and self.marks[k] < b


# A break: (whitespace start, cumulative units at it, start of the rest, enclosing fence or None).
_Break = tuple[int, int, int, _Fence | None]


class Chunker:
    """Incremental chunker of one text block (see the module docstring for the rule).

    Args:
        params: lengths and preferences.

    Example:
        >>> c = Chunker(ChunkParams(min_chars=1, max_chars=40))
        >>> c.append("Intro\\n\\nBody")
        ['Intro']
        >>> c.pending, c.drain(force=True)
        ('Body', ['Body'])
    """

    def __init__(self, params: ChunkParams) -> None:
        self.params = params
        self._max = params.max_chars
        self._min = max(params.min_chars, 1)
        self._unit = params.unit
        self._utf16 = params.unit is LengthUnit.UTF16
        self._cp_max = 2 if self._utf16 else 1
        self._emit_ranks = _EMIT_RANKS[params.break_preference]
        self._out: list[str] = []
        self._pieces: list[str] = []
        self._pstarts: list[int] = []
        self._plo = 0
        self._total = 0  # code points appended
        self._end = 0  # code points scanned
        self._cum = 0  # units scanned
        self._bmp = True
        self._win = ""
        self._win_lo = 0
        self._on_char: tuple[Callable[[str, int], None], ...] = (
            self._prefix_char,
            self._marker_char,
            self._marker_char,
            self._marker_char,
            self._fence_run_char,
            self._info_char,
            self._inline,
            self._fprefix_char,
            self._frun_char,
            self._ftrail_char,
            self._noop,
        )
        self._reset_block()

    # --- public ---------------------------------------------------------------------------------------

    def append(self, text: str) -> list[str]:
        """Append text, then drain normally.

        Args:
            text: the next delta of visible text (any length, may be empty).

        Returns:
            The chunks this append completed, in order. Cost O(len(text)) plus the emitted text.
        """
        if text:
            self._pieces.append(text)
            self._pstarts.append(self._total)
            self._total += len(text)
            self._bmp = not self._utf16 or text.isascii() or max(text) <= _BMP_MAX
            self._scan(text)
        return self.drain()

    def drain(self, force: bool = False) -> list[str]:
        """Return the chunks emitted since the last drain.

        Args:
            force: end of the text block: also emit everything pending (trailing whitespace dropped;
                it always fits in ``max_chars``) and start afresh, as at the beginning of a block.

        Returns:
            Chunks, in order; never empty strings.
        """
        if force:
            self._emit(self._head + self._slice(self._base, self._end))
            self._reset_block()
        out, self._out = self._out, []
        return out

    @property
    def pending(self) -> str:
        """The text not emitted yet, exactly as the next chunk would begin (with a reopened fence opener).

        Without its trailing whitespace (and the ``>`` markers of a trailing quoted line that has no
        content yet) it fits in ``max_chars``, with room for a closer while its last line is fence
        content. Cost O(len(pending)).
        """
        return self._head + self._slice(self._base, self._end)

    # --- block state ----------------------------------------------------------------------------------

    def _reset_block(self) -> None:
        self._base = self._end  # first code point of the pending text
        self._base_cum = self._cum
        self._head = ""  # reopened fence opener that precedes the pending text
        self._head_units = 0
        self._p_blank = True  # the pending text holds no non-whitespace yet
        self._pieces.clear()
        self._pstarts.clear()
        self._plo = 0
        self._win = ""
        self._win_lo = 0
        self._breaks: list[list[_Break]] = [[] for _ in _RANKS]
        self._bstart = [0 for _ in _RANKS]
        # Protected regions (complete links and code spans; fence marker lines): disjoint, sorted.
        self._reg_starts: list[int] = []
        self._reg_ends: list[int] = []
        self._reg_cums: list[int] = []
        self._reg_inline: list[bool] = []
        self._rlo = 0
        self._fences: list[_Fence] = []
        self._fence: _Fence | None = None
        # line
        self._ls = _L_PREFIX
        self._line_start = self._end
        self._line_start_cum = self._cum
        self._col = 0
        self._quotes = 0
        self._after_gt = False
        self._line_blank = True
        self._prev_blank = True
        self._marker_line = False
        self._marker_col = 0
        self._num_len = 0
        self._lists: list[int] = []  # content indents of the open list items, increasing
        self._run_char = ""
        self._run_len = 0
        self._run_start = 0
        self._run_cum = 0
        # whitespace run
        self._in_ws = False
        self._ws_start = 0
        self._ws_cum = 0
        self._ws_nl = 0
        self._ws_last_nl = 0
        self._ws_leading = False
        self._ws_sent = False
        # inline (tentative until closed; cancelled at a blank line or a new block)
        self._code: tuple[int, int, int] | None = None  # (run length, start, cum)
        self._bt_len = 0
        self._bt_start = 0
        self._bt_cum = 0
        self._links: list[list[int]] = []  # [start, cum, phase (0 text, 1 destination), paren depth]
        self._link_close: list[int] | None = None  # a link text just closed, waiting for "("
        self._escape = False
        self._cjk_stop = -1
        self._sent = False
        self._prev = ""

    # --- text store -----------------------------------------------------------------------------------

    def _slice(self, a: int, b: int) -> str:
        """Appended text between absolute positions ``a`` and ``b`` (``a`` not before the pending text)."""
        if a >= b:
            return ""
        starts, pieces = self._pstarts, self._pieces
        k = bisect_right(starts, a, self._plo) - 1
        s0, piece = starts[k], pieces[k]
        if b <= s0 + len(piece):
            return piece[a - s0 : b - s0]
        out = [piece[a - s0 :]]
        k += 1
        while b > starts[k] + len(pieces[k]):
            out.append(pieces[k])
            k += 1
        out.append(pieces[k][: b - starts[k]])
        return "".join(out)

    def _char_at(self, p: int) -> str:
        lo = self._win_lo
        if not lo <= p < lo + len(self._win):
            lo = max(self._base, p - 128)
            self._win = self._slice(lo, min(self._total, p + 64))
            self._win_lo = lo
        return self._win[p - lo]

    def _units_of(self, ch: str) -> int:
        return 2 if self._utf16 and ch > _BMP_MAX else 1

    # --- scanning -------------------------------------------------------------------------------------

    def _scan(self, s: str) -> None:
        i, n = 0, len(s)
        while i < n:
            st = self._ls
            rx: re.Pattern[str] | None = None
            if st == _L_TEXT:
                if not (self._bt_len or self._escape or self._link_close is not None):
                    rx = _RX_TEXT if self._code is None else _RX_NO_BACKTICK
            elif st == _L_FCONTENT:
                rx = _RX_NON_WS
            elif st == _L_INFO:
                rx = _RX_NO_BACKTICK if self._run_char == "`" else _RX_NON_WS
            if rx is not None:
                m = rx.match(s, i)
                if m is not None:
                    j = m.end()
                    self._plain(s, i, j)
                    i = j
                    continue
            c = s[i]
            if c in _WS_SET:
                self._ws_char(c)
            else:
                self._char(c)
            i += 1

    def _plain(self, s: str, i: int, j: int) -> None:
        """A run of non-whitespace characters that change no scanner state."""
        self._nonws_pre(self._end)
        self._p_blank = False
        k = j - 1
        while k >= i and s[k] in _CLOSERS:
            k -= 1
        if k >= i:
            self._sent = s[k] in _SENT_END
        self._prev = s[j - 1]
        while i < j:
            room = self._max - self._rendered()
            if self._bmp:
                if j - i <= room:
                    self._cum += j - i
                    self._end += j - i
                    return
                k = max(room, 0) + 1  # the k-th character is the first that does not fit
                self._cum += k
                self._end += k
                i += k
            else:
                used, k = 0, i
                while k < j:
                    used += 2 if s[k] > _BMP_MAX else 1
                    k += 1
                    if used > room:
                        break
                self._cum += used
                self._end += k - i
                if used <= room:
                    return
                i = k
            self._overflow()

    def _char(self, c: str) -> None:
        pos = self._end
        if c == ">" and self._in_ws and not self._ws_leading and self._quote_marker_next():
            # A block quote marker after a newline belongs to the break, like the indentation: a
            # quoted blank line ("a\n>\n> b") makes a paragraph break; the next line keeps its marker.
            self._on_char[self._ls](c, pos)
        else:
            self._nonws_pre(pos)
            self._on_char[self._ls](c, pos)
            self._p_blank = False
            self._sent = c in _SENT_END or (self._sent and c in _CLOSERS)
        self._prev = c
        self._cum += 2 if self._utf16 and c > _BMP_MAX else 1
        self._end = pos + 1
        if self._rendered() > self._max:
            self._overflow()

    def _quote_marker_next(self) -> bool:
        """True when a ``>`` arriving now is a block quote marker of the line's prefix."""
        if self._col > 3:
            return False
        if self._ls == _L_PREFIX:
            return True
        return self._ls == _L_FPREFIX and self._fence is not None and self._quotes < self._fence.quote_depth

    def _ws_char(self, c: str) -> None:
        pos = self._end
        newline = c == "\n"
        if newline:
            self._newline(pos)
        else:
            self._space(c, pos)
        if not self._in_ws and (newline or self._ls not in (_L_PREFIX, _L_FPREFIX)):
            self._in_ws = True
            self._ws_start = pos
            self._ws_cum = self._cum
            self._ws_nl = 0
            self._ws_leading = self._p_blank
            self._ws_sent = self._sent
        self._prev = c
        self._cum += 1
        self._end = pos + 1
        if newline:
            self._ws_nl += 1
            self._ws_last_nl = pos
            if self._p_blank and not self._head:
                self._base = pos + 1  # blank lines at the start of a block are dropped
                self._base_cum = self._cum
            elif self._rendered() > self._max:
                self._overflow()  # a fence opened: its closer now counts

    def _noop(self, c: str, pos: int) -> None:
        return None

    # --- breaks and emission --------------------------------------------------------------------------

    def _nonws_pre(self, pos: int) -> None:
        """A non-whitespace character arrives at ``pos``: the break before it (if any) is complete."""
        if self._in_ws:
            self._in_ws = False
            start = self._ws_start
            if self._ws_leading or start < self._base:
                return
            nl, fenced = self._ws_nl, self._fence is not None
            if nl >= 2:
                rank = _R_FPARA if fenced else _R_PARA
            elif nl:
                rank = _R_FLINE if fenced else _R_LINE
            else:
                rank = _R_SENT if self._ws_sent else _R_SPACE
            self._add_break(rank, start, self._ws_cum, self._ws_last_nl + 1 if nl else pos)
        elif self._cjk_stop == pos:
            self._add_break(_R_SENT, pos, self._cum, pos)

    def _add_break(self, rank: int, ws_start: int, ws_cum: int, rest: int) -> None:
        brk: _Break = (ws_start, ws_cum, rest, self._fence)
        self._breaks[rank].append(brk)
        if brk[3] is None and rank in self._emit_ranks and self._head_units + ws_cum - self._base_cum >= self._min:
            guard = self._protect(True)
            if (guard is None or ws_start < guard[0]) and self._rest_ok(rest, self._end + 1):
                self._cut_break(brk)

    def _rendered(self) -> int:
        """Units of the pending text as a chunk now: trailing whitespace dropped, a closer if needed."""
        nonws = self._ws_cum if self._in_ws else self._cum
        if self._p_blank or nonws < self._base_cum:
            nonws = self._base_cum
        units = self._head_units + nonws - self._base_cum
        fence = self._fence
        if fence is not None and fence.splittable and self._ls == _L_FCONTENT:
            units += fence.closer_units  # a line that may still be the closer counts as one
        return units

    def _closer_ready(self) -> bool:
        fence = self._fence
        return fence is not None and (self._ls == _L_FTRAIL or (self._ls == _L_FRUN and self._run_len >= fence.length))

    def _protect(self, inline: bool) -> tuple[int, int] | None:
        """Start (position, cum) of the earliest region still open that must not be cut, or None.

        ``inline`` includes tentative code spans and links; fence marker line candidates always count.
        """
        best, cum = _BIG, 0
        if inline:
            if self._code is not None:
                best, cum = self._code[1], self._code[2]
            elif self._bt_len:
                best, cum = self._bt_start, self._bt_cum
            if self._links and self._links[0][0] < best:
                best, cum = self._links[0][0], self._links[0][1]
            lc = self._link_close
            if lc is not None and lc[0] < best:
                best, cum = lc[0], lc[1]
        if self._ls in _CANDIDATE_LINES and self._line_start < best:
            best, cum = self._line_start, self._line_start_cum
        return None if best == _BIG else (best, cum)

    # --- cutting --------------------------------------------------------------------------------------

    def _emit(self, text: str) -> None:
        text = text.rstrip(_WS)
        if text.strip():
            self._out.append(text)

    def _set_base(self, pos: int, cum: int, head: str) -> None:
        """The pending text now starts at ``pos``, after ``head``; forget what lies before it."""
        self._base, self._base_cum = pos, cum
        self._head = head
        self._head_units = text_units(head, self._unit) if head else 0
        self._p_blank = False
        for r in _RANKS:
            lst = self._breaks[r]
            lo = bisect_right(lst, pos, self._bstart[r], key=_FIRST)  # a break at pos cuts nothing
            if lo > 64 and 2 * lo > len(lst):
                del lst[:lo]
                lo = 0
            self._bstart[r] = lo
        self._rlo = bisect_right(self._reg_ends, pos, self._rlo)
        if self._rlo > 64 and 2 * self._rlo > len(self._reg_ends):
            for lst2 in (self._reg_starts, self._reg_ends, self._reg_cums):
                del lst2[: self._rlo]
            del self._reg_inline[: self._rlo]
            self._rlo = 0
        self._fences = [f for f in self._fences if f is self._fence or f.end_line < 0 or f.end_line > pos]
        starts = self._pstarts
        while self._plo + 1 < len(starts) and starts[self._plo + 1] <= pos:
            self._plo += 1
        if self._plo > 32 and 2 * self._plo > len(starts):
            del starts[: self._plo]
            del self._pieces[: self._plo]
            self._plo = 0

    def _cut_break(self, brk: _Break) -> None:
        ws_start, ws_cum, rest, fence = brk
        chunk = self._head + self._slice(self._base, ws_start)
        head = ""
        if fence is not None and fence.splittable:
            chunk += fence.closer
            if fence.end_line < 0 or fence.end_line > rest:
                head = self._reopen(fence, rest)
        self._emit(chunk)
        self._set_base(rest, ws_cum + rest - ws_start, head)

    def _reopen(self, fence: _Fence, rest: int) -> str:
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
        if self._ls in (_L_RUN, _L_INFO) and p > self._line_start:
            self._ls = _L_TEXT  # a line cut in two opens no fence
        self._emit(chunk)
        self._set_base(p, cum, head)

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
            lambda: self._try_code_point(struct, False, False, False),  # a grapheme cluster over max
            lambda: self._try_code_point(None, False, False, True),  # anything: never loop
        )
        return any(plan() for plan in plans)

    def _try_break(self, guard: tuple[int, int] | None, inline: bool) -> bool:
        for rank in _RANKS:
            brk = self._last_valid(rank, guard, inline)
            if brk is not None:
                self._cut_break(brk)
                return True
        return False

    def _last_valid(self, rank: int, guard: tuple[int, int] | None, inline: bool) -> _Break | None:
        """The last break of ``rank`` before ``guard`` (outside protected regions) that fits, or None."""
        lst, lo = self._breaks[rank], self._bstart[rank]
        j = (len(lst) if guard is None else bisect_left(lst, guard[0], lo, key=_FIRST)) - 1
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
            if units <= self._max and self._fence_ok(brk) and self._rest_ok(brk[2], self._end):
                return brk
            j -= 1
        return None

    def _fence_ok(self, brk: _Break) -> bool:
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
            last = self._line_start if self._ls in _CANDIDATE_LINES else self._end
            return fence.has_content(rest, last)
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

    def _fence_at(self, p: int) -> _Fence | None:
        """The fence whose content holds the code point boundary ``p``."""
        for fence in reversed(self._fences):
            if fence.opener_start < p:
                if p > fence.content_start and (fence.end_line < 0 or p < fence.end_line):
                    return fence
                return None
        return None

    def _try_code_point(self, guard: tuple[int, int] | None, inline: bool, grapheme: bool, any_ws: bool) -> bool:
        """Cut at the last code point boundary inside the budget, outside protected regions."""
        lo = self._base + 1
        # Start at the last boundary whose chunk could fit (each code point costs 1 unit or more).
        p = min(self._end - 1, self._base + self._max - self._head_units)
        if p < lo:
            return False
        if guard is not None and guard[0] < p:
            p, cum = guard
        else:
            cum = self._cum_at(p)
        while p >= lo:
            k = self._region_index(p, inline)
            if k >= 0:
                p, cum = self._reg_starts[k], self._reg_cums[k]
                continue
            fence = self._fence_at(p)
            units = self._head_units + cum - self._base_cum
            if fence is not None and fence.splittable:
                units += fence.closer_units
                if not any_ws and not fence.has_content(fence.content_start, p):
                    units = _BIG  # no content before p: the chunk would hold an empty fence
            if units <= self._max and self._boundary_ok(p, grapheme, any_ws):
                self._cut_at(p, cum)
                return True
            p -= 1
            cum -= self._units_of(self._char_at(p))
        return False

    def _cum_at(self, p: int) -> int:
        """Cumulative units at pending position ``p``, counted from the nearer end (O(distance))."""
        if not self._utf16:
            return self._base_cum + p - self._base
        if p - self._base <= self._end - p:
            return self._base_cum + text_units(self._slice(self._base, p), self._unit)
        return self._cum - text_units(self._slice(p, self._end), self._unit)

    def _boundary_ok(self, p: int, grapheme: bool, any_ws: bool) -> bool:
        ch, prev = self._char_at(p), self._char_at(p - 1)
        if not any_ws and (ch in _WS_SET or prev in _WS_SET or not self._rest_ok(p, self._end)):
            return False  # next to whitespace: that is a break, tried before
        if not grapheme:
            return True
        if _is_extend(ch) or prev == _ZWJ or ch in _NO_START:
            return False
        if _is_regional(ch) and _is_regional(prev):
            q = p - 1
            while q > self._base and _is_regional(self._char_at(q - 1)):
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
            or self._end <= fence.content_start
        ):
            return False
        self._emit(self._slice(self._base, fence.content_start).rstrip(_WS) + fence.closer)
        self._set_base(fence.content_start, fence.content_cum, fence.reopen + "\n")
        return True

    # --- regions --------------------------------------------------------------------------------------

    def _add_region(self, start: int, cum: int, end: int, inline: bool) -> None:
        starts = self._reg_starts
        while len(starts) > self._rlo and starts[-1] >= start:  # nested regions: keep the outer one
            starts.pop()
            self._reg_ends.pop()
            self._reg_cums.pop()
            self._reg_inline.pop()
        starts.append(start)
        self._reg_ends.append(end)
        self._reg_cums.append(cum)
        self._reg_inline.append(inline)

    # --- lines ----------------------------------------------------------------------------------------

    def _newline(self, pos: int) -> None:
        st = self._ls
        if st == _L_TEXT:
            self._inline_ws(pos)
        elif st == _L_RUN:
            self._end_run()
            if self._ls == _L_INFO:
                self._open_fence(pos)
            else:
                self._inline_ws(pos)
        elif st == _L_INFO:
            self._open_fence(pos)
        elif st in (_L_FRUN, _L_FTRAIL):
            if self._closer_ready():
                self._close_fence()
        elif st == _L_FPREFIX and self._fence is not None and self._quotes < self._fence.quote_depth:
            self._implicit_end()
        if self._fence is None and self._line_blank:
            self._cancel_inline()  # a blank line ends the paragraph: no span or link crosses it
        self._prev_blank = self._line_blank
        self._line_start = pos + 1
        self._line_start_cum = self._cum + 1
        self._col = 0
        self._quotes = 0
        self._after_gt = False
        self._line_blank = True
        self._marker_line = False
        self._ls = _L_FPREFIX if self._fence is not None else _L_PREFIX

    def _space(self, c: str, pos: int) -> None:
        st = self._ls
        if st == _L_TEXT:
            self._inline_ws(pos)
        elif st in (_L_PREFIX, _L_FPREFIX):
            self._indent(c)
        elif st in (_L_BULLET, _L_NUM_DELIM):
            self._confirm_marker()
            self._indent(c)
        elif st == _L_NUM:
            self._end_prefix()
            self._ls = _L_TEXT
        elif st == _L_RUN:
            self._end_run()
            if self._ls == _L_TEXT:
                self._inline_ws(pos)
        elif st == _L_FRUN and self._fence is not None:
            self._ls = _L_FTRAIL if self._run_len >= self._fence.length else _L_FCONTENT

    def _indent(self, c: str) -> None:
        if c == "\t":
            self._col = (self._col // 4 + 1) * 4
            self._after_gt = False
        elif self._after_gt:
            self._after_gt = False  # the optional space of a ">" marker
        else:
            self._col += 1

    def _prefix_char(self, c: str, pos: int) -> None:
        """First non-whitespace characters of a line outside fences: containers, markers, fences."""
        if c == ">" and self._col <= 3:
            self._quotes += 1
            self._col = 0
            self._after_gt = True
            return
        self._after_gt = False
        if self._col <= 3 + self._list_base() and (c in "-*+" or "0" <= c <= "9"):
            self._ls = _L_BULLET if c in "-*+" else _L_NUM
            self._marker_col = self._col
            self._num_len = 1
            self._line_blank = False
            return
        self._end_prefix()
        if c in "`~" and self._col <= 3 + self._list_base():
            self._ls = _L_RUN
            self._run_char = c
            self._run_len = 1
            self._run_start = pos
            self._run_cum = self._cum
            return
        self._ls = _L_TEXT
        self._inline(c, pos)

    def _end_prefix(self) -> None:
        """The line's content starts at ``self._col``: update the open list items."""
        self._line_blank = False
        lists = self._lists
        if self._marker_line:
            lists[-1] = self._col
        elif self._prev_blank:
            while lists and lists[-1] > self._col:
                lists.pop()  # a line after a blank line, indented less than an item, ends it

    def _list_base(self) -> int:
        """Content indent of the innermost open list item that the current column lies in (0: none)."""
        for indent in reversed(self._lists):
            if indent <= self._col:
                return indent
        return 0

    def _marker_char(self, c: str, pos: int) -> None:
        if self._ls == _L_NUM:
            if "0" <= c <= "9" and self._num_len < 9:
                self._num_len += 1
                return
            if c in ".)":
                self._ls = _L_NUM_DELIM
                return
        self._end_prefix()  # not a list marker after all: text
        self._ls = _L_TEXT
        self._inline(c, pos)

    def _confirm_marker(self) -> None:
        width = 1 if self._ls == _L_BULLET else self._num_len + 1
        self._col = self._marker_col + width
        while self._lists and self._lists[-1] > self._marker_col:
            self._lists.pop()  # a sibling or an outer item: the deeper items ended
        self._lists.append(self._col + 1)
        self._marker_line = True
        self._ls = _L_PREFIX
        self._cancel_inline()

    def _fence_run_char(self, c: str, pos: int) -> None:
        if c == self._run_char:
            self._run_len += 1
            return
        self._end_run()
        if self._ls == _L_INFO:
            self._info_char(c, pos)
        else:
            self._inline(c, pos)

    def _end_run(self) -> None:
        """A fence character run at the start of a line ended: an opener candidate, or text."""
        if self._run_len >= 3:
            self._ls = _L_INFO
            self._cancel_inline()
            return
        if self._run_char == "`":
            self._bt_len, self._bt_start, self._bt_cum = self._run_len, self._run_start, self._run_cum
        self._ls = _L_TEXT

    def _info_char(self, c: str, pos: int) -> None:
        if c == "`" and self._run_char == "`":
            # A backtick in the info string: no fence, the run opens an inline code span.
            self._code = (self._run_len, self._run_start, self._run_cum)
            self._ls = _L_TEXT
            self._start_backticks(pos)

    def _open_fence(self, pos: int) -> None:
        run_end = self._run_start + self._run_len
        raw = self._slice(self._line_start, self._run_start)
        info = self._slice(run_end, pos).rstrip(_WS)
        run = self._run_char * self._run_len
        fence = _Fence(self._run_char, self._run_len, self._line_start, pos + 1, self._cum + 1)
        prefix = _RX_LIST_MARKER.sub(_spaces, raw)
        gt = prefix.rfind(">")
        if gt >= 0:
            fence.quote_prefix = prefix[: gt + 1] + (" " if prefix[gt + 1 : gt + 2] == " " else "")
        fence.quote_depth = self._quotes
        fence.item_indent = self._list_base()
        fence.closer = "\n" + prefix + run
        fence.closer_units = text_units(fence.closer, self._unit)
        # Reopen with the info string while the markers take at most half of max_chars; a fence can be
        # cut at all when a bare reopen, one code point and the closer fit.
        full = prefix + run + info
        fence.reopen_full = not info or 2 * (text_units(full, self._unit) + 1 + fence.closer_units) <= self._max
        fence.reopen = full if fence.reopen_full else prefix + run
        room = self._max - fence.closer_units - 1 - self._cp_max
        fence.splittable = (
            text_units(prefix + run, self._unit) <= room
            and text_units(raw + run + info, self._unit) + fence.closer_units <= self._max
        )
        self._add_region(self._line_start, self._line_start_cum, run_end + len(info), False)
        self._fence = fence
        self._fences.append(fence)

    def _close_fence(self) -> None:
        fence = self._fence
        assert fence is not None
        fence.closer_line = fence.end_line = self._line_start
        if fence.marks and fence.marks[-1] >= self._line_start:
            fence.marks.pop()
        self._add_region(self._line_start, self._line_start_cum, self._run_start + self._run_len, False)
        self._fence = None

    def _implicit_end(self) -> None:
        """The line left the fence's container (block quote or list item): the fence ends before it."""
        assert self._fence is not None
        self._fence.end_line = self._line_start
        self._fence = None
        self._ls = _L_PREFIX

    def _fprefix_char(self, c: str, pos: int) -> None:
        fence = self._fence
        assert fence is not None
        if self._quotes < fence.quote_depth:
            if c == ">" and self._col <= 3:
                self._quotes += 1
                self._col = 0
                self._after_gt = True
                return
            self._implicit_end()
            self._prefix_char(c, pos)
            return
        self._after_gt = False
        if self._col < fence.item_indent:
            self._implicit_end()
            self._prefix_char(c, pos)
            return
        self._line_blank = False
        fence.marks.append(pos)
        if c == fence.char and self._col <= fence.item_indent + 3:
            self._ls = _L_FRUN
            self._run_len = 1
            self._run_start = pos
        else:
            self._ls = _L_FCONTENT

    def _frun_char(self, c: str, pos: int) -> None:
        if self._fence is not None and c == self._fence.char:
            self._run_len += 1
        else:
            self._ls = _L_FCONTENT

    def _ftrail_char(self, c: str, pos: int) -> None:
        self._ls = _L_FCONTENT

    # --- inline: code spans and links -----------------------------------------------------------------

    def _inline(self, c: str, pos: int) -> None:
        lc = self._link_close
        if lc is not None:
            self._link_close = None
            if c == "(":
                lc[2], lc[3] = 1, 0
                self._links.append(lc)
                return
        if self._bt_len:
            if c == "`":
                self._bt_len += 1
                return
            self._resolve_backticks(pos)
        if self._escape:
            self._escape = False
            return
        if c == "`":
            self._start_backticks(pos)
        elif self._code is not None:
            return
        elif c == "\\":
            self._escape = True
        elif c in "[]()":
            self._link_char(c, pos)
        elif c in _CJK_STOPS:
            self._cjk_stop = pos + 1

    def _inline_ws(self, pos: int) -> None:
        self._link_close = None
        if self._bt_len:
            self._resolve_backticks(pos)
        self._escape = False

    def _start_backticks(self, pos: int) -> None:
        self._bt_len, self._bt_start, self._bt_cum = 1, pos, self._cum

    def _resolve_backticks(self, pos: int) -> None:
        """A backtick run ended before ``pos``: it opens a code span, closes the open one, or is content."""
        n, self._bt_len = self._bt_len, 0
        code = self._code
        if code is None:
            self._code = (n, self._bt_start, self._bt_cum)
        elif code[0] == n:
            self._add_region(code[1], code[2], pos, True)
            self._code = None

    def _link_char(self, c: str, pos: int) -> None:
        links = self._links
        top = links[-1] if links else None
        if c == "[":
            if top is None or top[2] == 0:
                bang = self._prev == "!"
                links.append([pos - bang, self._cum - bang, 0, 0])
        elif top is None:
            return
        elif c == "]":
            if top[2] == 0:
                self._link_close = links.pop()
        elif top[2] == 1:
            if c == "(":
                top[3] += 1
            elif top[3]:
                top[3] -= 1
            else:
                links.pop()
                self._add_region(top[0], top[1], pos + 1, True)

    def _cancel_inline(self) -> None:
        self._code = None
        self._bt_len = 0
        self._links.clear()
        self._link_close = None
        self._escape = False


def chunk_text(text: str, params: ChunkParams) -> list[str]:
    """Chunks of a whole text: one append and a forced drain.

    Args:
        text: the text to split.
        params: lengths (in ``params.unit``) and preferences.

    Returns:
        The chunks, each within ``params.max_chars``; none empty.
    """
    chunker = Chunker(params)
    return chunker.append(text) + chunker.drain(force=True)
