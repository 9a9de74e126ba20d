"""The line scanner: reads the appended text line by line and says when a chunk is due, with what the text
held at that moment.

It tracks, incrementally, what each line leaves to the next (CommonMark block structure: open list items,
block quotes, the open fence, a blank line; :mod:`core.chunking.lines`), the inline state of the current
paragraph (:class:`core.chunking.inline.InlineScanner`), the whitespace run open across lines, and where
the pending text starts (the *window*: ``base``, ``head``). It records each break that holds a newline
in the break table as the line after it begins, each fence marker line as a protected region, and each
line in the text store.

A line is read lazily and only as far as an event needs: the break before it completes at its first
character that is not indentation or a ``>`` marker (an emit at the preferred break may be due: the
cutter's :meth:`~core.chunking.cutter.Cutter.cut_break`); the pending text may stop fitting at some
character (a cut is due: :meth:`~core.chunking.cutter.Cutter.overflow`); under a SENTENCE preference a
sentence break may complete mid-line. Each event is handled with the state the text held at its moment
(the line's structure and inline state read up to it, never past it), so the output does not depend on
how the text was split into appends. The scanner is the cutter's :class:`~core.chunking.cutter.Moment`:
it answers what is protected at that moment, how long the chunk is, which breaks lie inside the lines.

A line read whole (``_fast_line`` for a line that needs no prefix read and cannot make the pending text
overflow: text that begins with a letter-like character, a plain ``- text`` bullet item, content of a
top-level fence; ``_whole_line`` otherwise) or completed after arriving in pieces ends in ``_finish_line``:
an opener line opens its fence (bare when its info string could not fit), a closer closes it, a blank
line ends tentative inline ranges, the whitespace run across the newline begins, and the line is stored
with what a cut needs later (its body, its last non-space character, its fence, its prefix read for its
container context: :mod:`core.chunking.containers`).

Cost: an append does O(1) work for a small delta (it stores and counts the piece, and reads further only
when the pending text may no longer fit or a break may emit) and reads each line once.
"""

from __future__ import annotations

import codecs
import re

from streamrelay.core.chunking.breaks import (
    CJK_BREAK,
    EMIT_RANKS,
    R_FLINE,
    R_FPARA,
    R_LINE,
    R_PARA,
    SENTENCE_BREAK,
    BreakTable,
    InnerLine,
)
from streamrelay.core.chunking.containers import NO_CONTEXT, Context, line_context
from streamrelay.core.chunking.cutter import BIG, Cutter
from streamrelay.core.chunking.inline import InlineScanner
from streamrelay.core.chunking.lines import (
    FLINE,
    OPEN,
    RUN,
    SPACES,
    TEXT,
    Fence,
    LineRead,
    ReaderState,
    read_prefix,
    run_length,
)
from streamrelay.core.chunking.opener import open_fence
from streamrelay.core.chunking.params import BreakKind, ChunkParams
from streamrelay.core.chunking.regions import Regions
from streamrelay.core.chunking.store import LineMeta, TextStore, units_of
from streamrelay.core.units import LengthUnit

__all__ = ["LineScanner"]

_UTF16 = codecs.getencoder("utf-16-le")
"""The UTF-16 encoder (as :func:`core.chunking.store.units_of` counts units), called inline where a call per append or
line would cost more than the count."""
_NONWS = re.compile(r"[^ \t\r\f\v]")
_SPECIAL = re.compile(r"[`\\\[\]()]")
_SLOW_START = frozenset(" \t\r\f\v>-*+0123456789`~")
_OPENS = re.compile(r"[`\[]")
_LINE_HEAD = re.compile(
    r"(?P<simple>[-*+] (?=[^ \t\r\f\v>`~*+\-0-9]|\*\*(?![ \t*]*\Z)))"
    r"|(?P<item>(?P<ind> {0,3})(?:[-*+]|[0-9]{1,9}[.)]) (?=[^ \t\r\f\v>`~*+\-0-9]|\*\*(?![ \t*]*\Z)))"
    r"|(?P<run>`{3,}+|~{3,}+)"
    r"|(?P<text>-(?:[ \t]*-){2,}[ \t]*\Z|\*(?:[ \t]*\*){2,}[ \t]*\Z|[-*+](?![ \t])|[0-9]{1,9}+(?![.)][ \t]))"
)
"""What :func:`core.chunking.lines.read_prefix` says of a line outside fences that begins with a marker character,
when one match can tell (else the general path reads it), whatever the open items and the blank line before:

- ``simple``: a bullet item at column 0 whose text begins with no marker, fence run or quote (content column 2:
  :data:`_SIMPLE_ITEM_READ`); ``**`` may begin it (bold text) unless only ``*``, spaces and tabs follow: ``* **``
  and ``* ***`` are thematic breaks, which win over an item;
- ``item``: any other such list item, a bullet or an ordered marker (1-9 digits and ``.`` or ``)``) at most 3
  spaces in and one space after it: its content column is the match's end, the items it keeps are those whose
  content column is at most its indentation;
- ``run``: a backtick or tilde run of 3 or more at column 0, a fence opener (its run: the match);
- ``text``: text at column 0 that opens no item (a thematic break, a marker character that no space or tab follows,
  digits that are no ordered marker): read as a text line.

tests/unit/test_chunker_heads.py checks it against ``read_prefix``."""
_SIMPLE_ITEM_READ = LineRead(TEXT, 0, 2, 2, 0, 2, [2], False, False, 1)
"""What :func:`core.chunking.lines.read_prefix` says of a ``simple`` line (shared: line reads are never changed, and
their ``lists`` are copied before any change)."""
_HEAD_READS: dict[str | None, tuple[int, LineRead | None]] = {"simple": (2, _SIMPLE_ITEM_READ), "text": (0, None)}
"""The lines of :data:`_LINE_HEAD` that :meth:`LineScanner._fast_line` reads itself: their body, their prefix read
(None: a text line)."""
_ITEM_READS: dict[tuple[int, ...], LineRead] = {}
"""The prefix reads of ``item`` lines (:data:`_LINE_HEAD`) made so far, by their marker's indentation, content column
and the items open before them (at most 256, then afresh): they depend on nothing else, and line reads and their
``lists`` are never changed (shared, as :data:`_SIMPLE_ITEM_READ`)."""
_CLOSER = re.compile(r"(`{3,}+|~{3,}+)[ \t\r\f\v]*\Z")
"""A closer candidate at column 0: a fence run and only whitespace after it."""
_WS = " \t\n\r\f\v"
M_NONE, M_TEXT, M_RUN, M_INFO, M_FENCE = range(5)  # what the current line is, as read so far
_NO_LISTS: list[int] = []  # never changed (line reads copy theirs before a change): no items open


def _fence_body(line: str, fence: Fence) -> int:
    """Where the content of ``line`` (a line inside ``fence``) begins when it needs no prefix read: a
    content line of a top-level fence that cannot be its closer, or 0 for an empty line of a fence outside block
    quotes (a blank line: ``read_prefix`` gives it no mark and no end of the fence); else -1."""
    if not line:
        return -1 if fence.quote_depth else 0  # an empty line, read as a blank line (no mark: it has no content)
    if fence.quote_depth or fence.item_indent:
        return -1
    if line[0] not in _SLOW_START:
        return 0
    m = _NONWS.search(line)
    if m is None:
        return -1
    body = m.start()
    if body <= 3 and line[body] == fence.char and "\t" not in line[:body]:
        return -1
    return body


def _item_read(ind: int, col: int, before: list[int]) -> LineRead:
    """The prefix read of an ``item`` line (:data:`_LINE_HEAD`) whose marker is ``ind`` spaces in and whose content
    begins at ``col``, after the items ``before``: made and kept in :data:`_ITEM_READS` (at most 256, then afresh)."""
    lists = [x for x in before if x <= ind]
    lists.append(col)
    known = LineRead(TEXT, ind, col, col, 0, col, lists, False, False, col - 1)
    if len(_ITEM_READS) >= 256:
        _ITEM_READS.clear()
    _ITEM_READS[(ind, col, *before)] = known
    return known


_FENCE_LINE_READS: dict[tuple[int, ...], LineRead] = {}
"""The prefix reads of the fence opener and closer lines :meth:`LineScanner._head_line` and
:meth:`LineScanner._closer_line` read (a run at column 0), by their kind and the items open before them (at most 256,
then afresh): shared as :data:`_ITEM_READS` are (a pending part of a long answer opens and closes a fence every few
lines; one read each was made and kept in the line's :data:`~core.chunking.store.LineMeta` until the part was cut)."""


def _fence_line_read(kind: int, lists: list[int]) -> LineRead:
    """The prefix read of a fence opener (``RUN``) or closer (``FLINE``) line at column 0 with the items ``lists``
    open before it (:data:`_FENCE_LINE_READS`)."""
    key = (kind, *lists)
    known = _FENCE_LINE_READS.get(key)
    if known is None:
        known = LineRead(kind, 0, 0, 0, 0, 0, lists, False, False, -1)
        if len(_FENCE_LINE_READS) >= 256:
            _FENCE_LINE_READS.clear()
        _FENCE_LINE_READS[key] = known
    return known


def _fenceless(text: str) -> bool:
    """Whether ``text``, appended between any others that are :func:`_fenceless` too, holds no part of a run of three
    backticks or tildes (so no line of it opens or closes a fence): none of two, none first or last. O(len(text))
    in C."""
    return "``" not in text and "~~" not in text and text[0] not in "`~" and text[-1] not in "`~"


def _runless(line: str) -> bool:
    """Whether ``line`` (the current line so far, before :func:`_fenceless` appends) holds no run of three backticks
    or tildes: its end and theirs make none, so the line opens or closes no fence. O(len(line)) in C."""
    return "```" not in line and "~~~" not in line


class LineScanner:
    """Reads one text block's appends and raises the chunker's events (see the module docstring).

    Args:
        params: lengths and preferences (``max_chars``, ``min_chars``, the preferred break, the unit).
        store: the text store the lines go to. breaks: the break table. regions: the protected regions.
        cutter: cuts and emits when an event is due.
        end: absolute position where the block starts (code points appended before it).
        cum: units appended before it.

    Attributes:
        end: code points appended so far (absolute). cum: units appended so far.
        base: absolute position where the pending text starts. base_cum: units before it.
        head: the reopened fence opener (and quote markers) that precede the pending text in the next
            chunk. head_units: its length in units.
        ctx_w: the list items the pending text starts in (:func:`core.chunking.containers.dedent`).
        tend: the time of the last event: the position up to which the text was read then.
        fence: the open fence, or None.
    """

    __slots__ = (
        "_add",
        "_breaks",
        "_cancel_at",
        "_cancelled",
        "_cf",
        "_cp_max",
        "_cutter",
        "_emit_at",
        "_emit_ranks",
        "_emits",
        "_fences",
        "_inline",
        "_later",
        "_later_at",
        "_later_far",
        "_later_src",
        "_lcum",
        "_ldone",
        "_lists_before",
        "_lpos",
        "_lr",
        "_lr_peek",
        "_max",
        "_min",
        "_mode",
        "_ochk",
        "_p_blank",
        "_q_done",
        "_regions",
        "_room",
        "_rs",
        "_run_len",
        "_run_start",
        "_sent_from",
        "_sentence",
        "_store",
        "_tnonws",
        "_utf16",
        "_wait_at",
        "_wait_far",
        "_ws_cum",
        "_ws_last_nl",
        "_ws_leading",
        "_ws_nl",
        "_ws_open",
        "_ws_start",
        "base",
        "base_cum",
        "ctx_w",
        "cum",
        "end",
        "fence",
        "head",
        "head_units",
        "params",
        "tend",
    )

    _ordinary = True
    """Ordinary lines are read in one loop (:meth:`_add_lines`); tests turn it off to compare with the one-line
    paths."""
    _waits = True
    """Appends wait to be read while nothing can happen (:attr:`_later`); tests turn it off."""

    def __init__(
        self,
        params: ChunkParams,
        store: TextStore,
        breaks: BreakTable,
        regions: Regions,
        cutter: Cutter,
        end: int,
        cum: int,
    ) -> None:
        self.params = params
        self._max = params.max_chars
        self._min = max(params.min_chars, 1)
        self._utf16 = params.unit is LengthUnit.UTF16
        self._cp_max = 2 if self._utf16 else 1
        self._emit_ranks = EMIT_RANKS[params.break_preference]
        self._emits = (R_LINE in self._emit_ranks, R_PARA in self._emit_ranks)  # by "the break holds a blank line"
        self._sentence = params.break_preference is BreakKind.SENTENCE
        self._store = store
        self._add = store.add
        self._breaks = breaks
        self._regions = regions
        self._cutter = cutter
        self.end = end
        self.cum = cum
        # the window: where the pending text starts
        self.base = end
        self.base_cum = cum
        self.head = ""
        self.head_units = 0
        self.ctx_w: tuple[int, ...] = ()
        self._p_blank = True  # the pending text holds no non-whitespace yet
        # block structure
        self._fences: list[Fence] = []  # fences that may still hold pending text
        self.fence: Fence | None = None
        self._room = 0
        self._refit()
        self._later: list[str] = []
        """Appends not read yet, in order (:meth:`append`): while the pending text, them included, ends before
        ``_wait_at`` (shorter than ``min_chars`` and than half of ``max_chars``), or before ``_wait_far`` (shorter
        than ``min_chars`` and fitting in ``max_chars`` with the open fence's closer) while none of them can open or
        close a fence (each :func:`_fenceless`, the current line before them :func:`_runless`) or while the closer
        of any fence they may open fits too (``2 * cum + 4 <= _room + _lcum``: such a closer is its opener line's
        prefix and run and a newline, :func:`core.chunking.opener.open_fence`, and the opener line begins at or after
        the current line's start, so it takes at most ``cum - _lcum + 1`` units; ``_room`` already leaves room for the
        open fence's closer, which they may close first; 3 units spare, as ``_wait_at``'s), reading them could not
        emit, cut, move the window or change a length: they are read at once when that no longer holds, or when
        something reads the pending text (:meth:`catch_up`). ``end`` and ``cum`` count them; ``_later_at`` is where
        they begin."""
        self._later_at = (end, cum)
        self._later_far = False
        self._later_src = False
        """Whether the appends that wait are read in the shared text when they are read (then ``_later`` keeps only
        the first of them, to say that some wait: a waiting answer is not kept twice)."""
        """Whether every append that waits is :func:`_fenceless` (then they wait up to ``_wait_far``)."""
        self._rs = ReaderState()
        self._inline = InlineScanner(regions.add)
        self.tend = self._tnonws = 0  # the time of the last event, and the units before its last non-space
        # the whitespace run open across lines
        self._ws_open = False
        self._ws_start = self._ws_cum = self._ws_nl = self._ws_last_nl = 0
        self._ws_leading = False
        self._new_line()

    def _refit(self) -> None:
        """``_room``: the largest ``cum`` at which the pending text still fits with room for the open
        fence's closer, and ``_emit_at``: the smallest ``cum`` before a break that lets it emit (kept up to date
        wherever the window or the fence changes)."""
        fence = self.fence
        closer = fence.closer_units if fence is not None and fence.splittable else 0
        self._room = self._max - self.head_units + self.base_cum - closer
        self._emit_at = self._min - self.head_units + self.base_cum
        # appends wait while the pending text ends before these (see _later): no break can emit before _emit_at and
        # nothing overflows up to _room; half of max_chars leaves room for the closer of a fence that they may open
        # (a closer is at most its opener line and a newline)
        self._wait_far = min(self._emit_at - 1, self._room)
        self._wait_at = min(self._wait_far, (self._max - 4) // 2 - self.head_units + self.base_cum)

    def _new_line(self) -> None:
        self._lpos = self._store.cur_pos
        self._lcum = self._store.cur_cum
        self._lr: LineRead | None = None
        self._lr_peek: LineRead | None = None  # the prefix read while the line's break completes
        self._lists_before: list[int] = self._rs.lists
        self._q_done = False
        self._mode = M_NONE
        self._ldone = 0  # index up to which the line's structure and inline state are read
        self._ochk = 0  # index up to which the line is known to fit
        self._sent_from = 0
        self._cf = -1  # fence line: index where its content begins (-1: a closer so far)
        self._run_start = self._run_len = 0
        self._cancel_at = self._cancelled = -1  # a list item's space ends tentative inline ranges

    # --- appending ------------------------------------------------------------------------------------

    def append(self, text: str) -> None:
        """Read ``text`` (non-empty), the next piece of the block; chunks go to the cutter's output.

        Cost: O(1) for a small piece without a newline unless the pending text may no longer fit or a
        break may emit; else O(len(text)) plus the text emitted.
        """
        later = self._later
        if later:  # earlier appends wait to be read: this one waits too, or they are read with it (_later)
            units = len(text) if not self._utf16 or text.isascii() else len(_UTF16(text)[0]) >> 1
            cum = self.cum + units
            if self._later_far and not ("``" in text or "~~" in text or text[0] in "`~" or text[-1] in "`~"):
                waits = cum <= self._wait_far  # they all are _fenceless (inlined: once an append)
            else:
                self._later_far = False
                waits = cum <= self._wait_at or (cum <= self._wait_far and 2 * cum + 4 <= self._room + self._lcum)
            if waits:
                if not self._later_src:
                    later.append(text)
                self.end += len(text)
                self.cum = cum
                return
            if self._later_src:
                text = self._store.appended(self._later_at[0], self.end + len(text))
            else:
                later.append(text)
                text = "".join(later)
            later.clear()
            self.end, self.cum = self._later_at
        nl = text.find("\n")
        if nl >= 0:
            if (
                self.cum < self._wait_far
                and self._waits
                and not self._p_blank
                and self._lr is None
                and not self._q_done
            ):
                units = len(text) if not self._utf16 or text.isascii() else len(_UTF16(text)[0]) >> 1
                far = _fenceless(text) and (self.end == self._lpos or _runless(self._store.current()))
                cum = self.cum + units
                if cum <= (self._wait_far if far else self._wait_at) or (  # nothing can happen yet
                    cum <= self._wait_far
                    and 2 * cum + 4 <= self._room + self._lcum  # any fence they open fits (_later)
                ):
                    self._later_at = (self.end, self.cum)
                    self._later_far = far
                    self._later_src = self._store.shared
                    self._later.append(text)
                    self.end += len(text)
                    self.cum += units
                    return
            self._add_lines(text, nl)
        elif (
            self._sentence
            or (self._utf16 and not text.isascii())
            or (  # the line's prefix may be due (_prefix_due, inlined: this runs once per small delta)
                self._lr is None
                and self._ws_open
                and not self._ws_leading
                and self.head_units + self._ws_cum - self.base_cum >= self._min
                and self._ws_start >= self.base
            )
        ):
            self._add_partial(text)
        else:  # the common small delta: store it, count it, look again only if it may not fit
            self._add(text)
            n = len(text)
            self.end += n
            self.cum += n
            if self.cum > self._room:
                self._advance(False)

    def catch_up(self) -> None:
        """Read the appends that wait (:meth:`append`): before anything reads the pending text or ends the block."""
        later = self._later
        if later:
            text = self._store.appended(self._later_at[0], self.end) if self._later_src else "".join(later)
            later.clear()
            self.end, self.cum = self._later_at
            self._add_lines(text, text.find("\n"))

    def end_block(self) -> None:
        """The block ends: an opener line whose info string was not counted opened no fence, so it is
        text, cut where it no longer fits. The caller then emits what is pending (the forced drain)."""
        self.catch_up()
        line = self._store.current()
        n = len(line)
        if self._lr is None or self._info_drop(line, n, self.cum - self._lcum == n)[0] >= n:
            return
        self._mode, self._ldone = M_TEXT, n
        self._set_time(self.end, self.cum)
        self._tnonws = self._lcum + units_of(line.rstrip(_WS), self._utf16)
        self._cutter.overflow(self)

    def _add_partial(self, text: str, units: int = -1) -> None:
        self._store.add(text)
        self.end += len(text)
        self.cum += units_of(text, self._utf16) if units < 0 else units
        fence = self.fence
        closer = fence.closer_units if fence is not None and fence.splittable else 0
        used = self.head_units + self.cum - self.base_cum
        if (
            (self._lr is None and self._prefix_due())
            or used + closer > self._max
            or (self._sentence and used >= self._min)
        ):
            self._advance(False)

    def _prefix_due(self) -> bool:
        """The line's first characters may complete a break that emits: read its prefix now (else it is
        read when the line ends, or when the pending text may no longer fit)."""
        return (
            self._ws_open
            and not self._ws_leading
            and self.head_units + self._ws_cum - self.base_cum >= self._min
            and self._ws_start >= self.base
        )

    # --- events inside a line -------------------------------------------------------------------------

    def _advance(self, complete: bool) -> None:
        line = self._store.current()
        n = len(line)
        if self._lr is None:
            lr = read_prefix(line, n, self._rs, self._ws_open and not self._ws_leading, complete)
            if lr.q >= 0 and not self._q_done:
                self._lr_peek = lr
                self._complete_break(lr.q, line[lr.q : lr.q + 1])
                self._lr_peek = None
            if lr.kind == OPEN:  # a list marker or not: the pending text may overflow meanwhile
                self._lr, self._lists_before = lr, self._rs.lists
                self._cancel_at = lr.new_item if lr.new_item > self._cancelled else -1
                self._body(line, n, False)
                self._lr = None
                return
            self._start_line(lr)
        self._body(line, n, complete)

    def _complete_break(self, q: int, first: str) -> None:
        """The first character of the line that is not part of the break before it arrived at ``q`` (it is
        ``first``: the line may not be in the store yet)."""
        self._q_done = True
        self._p_blank = False
        if not self._ws_open:
            return
        self._ws_open = False
        start = self._ws_start
        if self._ws_leading or start < self.base:
            return
        fence = self.fence
        rank = (R_PARA if fence is None else R_FPARA) if self._ws_nl >= 2 else (R_LINE if fence is None else R_FLINE)
        rest = self._ws_last_nl + 1
        self._breaks.add(rank, start, rest, fence)
        if fence is None and rank in self._emit_ranks and self.head_units + self._ws_cum - self.base_cum >= self._min:
            guard = self._inline.guard()
            if guard < 0 or start < guard:
                self._set_time(self._lpos + q, self._lcum + units_of(self._store.current()[:q], self._utf16))
                self._cutter.emit_at(self, (start, self._ws_cum, rest, fence), first)  # not between two table rows

    def _start_line(self, lr: LineRead) -> None:
        self._lr = lr
        fence = self.fence
        if lr.implicit_end and fence is not None:
            fence.end_line = self._lpos  # the line left the fence's container
            self.fence = self._rs.fence = None
            self._refit()
        self._cancel_at = lr.new_item if lr.new_item > self._cancelled else -1
        self._lists_before = self._rs.lists
        self._rs.lists = lr.lists
        self._ldone = lr.start
        if lr.kind == FLINE:
            assert self.fence is not None
            self.fence.marks.append(self._lpos + lr.start)
            self._mode = M_FENCE
        elif lr.kind == RUN:
            self._mode = M_RUN
            self._run_start = lr.start
        else:
            self._mode = M_TEXT

    def _set_time(self, t: int, cum: int) -> None:
        self.tend, self._tnonws = t, cum

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
            self._cutter.overflow(self)
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
        budget = self._max - self.head_units + self.base_cum - self._lcum
        fence, closer, cf = self.fence, 0, -1
        if fence is not None and fence.splittable and self._mode == M_FENCE:
            cf = self._content_from(line, n)
            if cf >= 0:
                closer = fence.closer_units
        total = self.cum - self._lcum
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
        text or n)``; ``(n, n)`` otherwise. The fence opens bare (see :mod:`core.chunking`)."""
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
        fence, lr = self.fence, self._lr
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
        if lr is None or self.fence is not None or self.head_units + self.cum - self.base_cum < self._min:
            return None
        lo = max(self._sent_from, lr.body, self.base - self._lpos)
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
        if ws_start <= self.base or (a == r and (self._inline.code is not None or line[a - 2 : a - 1] == "\\")):
            return
        cum = self._lcum + units_of(line[:a], self._utf16)
        if self.head_units + cum - self.base_cum < self._min:
            return
        self._set_time(self._lpos + r, self._lcum + units_of(line[:r], self._utf16))
        guard = self.protect(True)
        if ws_start < guard and self._cutter.rest_ok(self._lpos + r, self.tend + 1):
            self._cutter.cut_break(self, (ws_start, cum, self._lpos + r, None))

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

    # --- the moment of a cut (what the cutter asks: core.chunking.cutter.Moment) ----------------------

    def _candidate(self) -> bool:
        """At the time of the cut, the current line may still be a fence marker line."""
        mode = self._mode
        lr = self._lr
        if lr is None or self.tend - self._lpos <= lr.start:  # still in its prefix at that time
            return self.fence is not None
        if mode in (M_RUN, M_INFO):
            return True
        if mode == M_FENCE:
            cf = self._cf
            return cf < 0 or cf >= self.tend - self._lpos
        return mode == M_NONE and self.fence is not None

    def protect(self, inline: bool) -> int:
        """Position from which nothing may be cut at the time of the cut: the start of a tentative link or
        code span (``inline``) or of the current line while it may be a fence marker line; ``BIG`` when
        none."""
        best = BIG
        if inline:
            g = self._inline.guard()
            if g >= 0:
                best = g
            if self._mode == M_TEXT:
                tg = self._inline.tail_guard(self._store.current(), self._ldone, self.tend - self._lpos, self._lpos)
                if 0 <= tg < best:
                    best = tg
        if self._candidate() and self._lpos < best:
            best = self._lpos
        return best

    def rendered(self) -> int:
        """Units the pending text takes as a chunk at the time of the cut (trailing whitespace not counted;
        a closer counted once the last line is fence content)."""
        nonws = self._tnonws
        if self._p_blank or nonws < self.base_cum:
            nonws = self.base_cum
        units = self.head_units + nonws - self.base_cum
        fence = self.fence
        if fence is not None and fence.splittable and self._mode == M_FENCE and not self._candidate():
            units += fence.closer_units
        return units

    def content_limit(self) -> int:
        """Position before which the open fence's content is known at the time of the cut."""
        return self._lpos if self._candidate() else self.tend

    def line_cut(self, p: int) -> None:
        """A cut falls at ``p``: a line cut in two inside its fence run or info string opens no fence."""
        lr = self._lr
        if self._mode in (M_RUN, M_INFO) and lr is not None and p > self._lpos + lr.start:
            self._mode = M_TEXT
            self._ldone = self.tend - self._lpos

    def fence_at(self, p: int) -> Fence | None:
        """The fence whose content holds the code point boundary ``p``, or None."""
        for fence in reversed(self._fences):
            if fence.opener_start < p:
                if p > fence.content_start and (fence.end_line < 0 or p < fence.end_line):
                    return fence
                return None
        return None

    def fill_inner_breaks(self) -> None:
        """Have the break table hold the sentence and space breaks between the pending text's start and
        the time of the cut (read over the text in place: one string of the lines, each line by its indices)."""
        if self._breaks.inner_known(self.base, self.tend):
            return
        store = self._store
        k, n = store.lines_from(self.base)
        starts, meta, cum_at = store.starts, store.meta, store.cum_at
        lpos = self._lpos
        at = starts[k] if k < n else lpos
        lr = self._lr
        current = lr is not None and lr.q >= 0
        text = store.slice(at, lpos)
        if current:
            text += store.current()
        lines: list[InnerLine] = []
        for i in range(k, n):
            ls = starts[i] - at
            le = (starts[i + 1] if i + 1 < n else lpos) - 1 - at  # its newline
            end = ls + len(text[ls:le].rstrip(_WS))
            mt = meta[i]
            if mt is None:
                lines.append((ls, ls, end, cum_at(at + ls), None, True))
            elif isinstance(mt, Fence):
                m = _NONWS.search(text, ls, le) if text[ls] in _SLOW_START else None  # as _fence_body found it
                body = ls if m is None else m.start()
                lines.append((ls, body, end, cum_at(at + ls), mt, False))
            elif isinstance(mt, list):
                lines.append((ls, ls + _SIMPLE_ITEM_READ.body, end, cum_at(at + ls), None, True))
            else:
                lines.append((ls, ls + mt[0], end, cum_at(at + ls), mt[1], mt[2]))
        if current and lr is not None:
            fence = self.fence if self._mode == M_FENCE else None
            ls = lpos - at
            lines.append((ls, ls + lr.body, self.tend - at, self._lcum, fence, self._mode == M_TEXT))
        self._breaks.fill_inner(text, at, lines, self.base, self._utf16)

    def restart(self, pos: int, cum: int, head: str) -> None:
        """The pending text now starts at ``pos`` (``cum`` units before it), after ``head``; what lies
        before it is forgotten (breaks, regions, fences that ended, stored lines)."""
        self.base, self.base_cum = pos, cum
        self.head = head
        self.head_units = units_of(head, self._utf16) if head else 0
        self._refit()
        self._p_blank = False
        self._breaks.forget(pos)
        self._regions.forget(pos)
        self._fences = [f for f in self._fences if f is self.fence or f.end_line < 0 or f.end_line > pos]
        self._store.forget(pos)
        self.ctx_w = self._context(pos)[0]

    def quote_head(self, pos: int) -> str:
        """The block quote markers a chunk starting mid-line at ``pos`` gets back, while they take at most
        half of ``max_chars`` and leave room for a code point ("" otherwise)."""
        head = self._context(pos)[1]
        units = units_of(head, self._utf16)
        return head if 2 * units <= self._max and units + self._cp_max <= self._max else ""

    def _context(self, pos: int) -> Context:
        """The container context of a chunk starting at ``pos`` (core/chunking/containers.py)."""
        line = self._store.line_at(pos)
        if line is not None:
            start, text, mt = line
            if mt is None or isinstance(mt, Fence):
                return NO_CONTEXT
            if isinstance(mt, list):
                return line_context(text, _SIMPLE_ITEM_READ, mt, None, pos - start)
            return line_context(text, mt[3], mt[4], mt[1], pos - start)
        lr = self._lr or self._lr_peek
        if lr is None:
            return NO_CONTEXT
        fence = self.fence if lr.kind == FLINE else None
        lists = self._lists_before if self._lr is not None else self._rs.lists
        return line_context(self._store.current(), lr, lists, fence, pos - self._lpos)

    # --- line ends ------------------------------------------------------------------------------------

    def _fast_line(self, line: str, units: int) -> bool:
        """Read a whole ordinary line at once (text that begins with a letter-like character, or content
        of a top-level fence, that cannot make the pending text overflow); False when the general path
        must."""
        cum = self.cum + units
        if self._sentence and self.head_units + cum - self.base_cum >= self._min:
            return False
        fence = self.fence
        lr = None
        if fence is not None:
            body = _fence_body(line, fence)
            if body < 0:
                return self._closer_line(line, units, fence)
        elif line and line[0] in _SLOW_START:
            m = _LINE_HEAD.match(line)
            known = _HEAD_READS.get(m.lastgroup if m else None)
            if known is None:  # an item or a fence opener, or a line the general path reads
                return m is not None and self._head_line(line, units, m)
            body, lr = known
        else:
            body = 0
        if cum > self._room:  # it may not fit (with room for the fence's closer)
            return False
        pos, n = self._lpos, len(line)
        lists = _NO_LISTS
        if line:
            if self._ws_open:
                self._complete_break(0, line[:1])
            else:
                self._q_done, self._p_blank = True, False
            end = len(line.rstrip(_WS))
            if fence is not None:
                fence.marks.append(pos + body)
            elif lr is None:
                self._text_line(line, pos)
            else:
                lists = self._item_line(line, pos, lr)
            self._rs.prev_blank = False
            self._ws_open, self._ws_leading = True, self._p_blank
            self._ws_start, self._ws_cum, self._ws_nl = pos + end, self.cum + units - (n - end), 1
        else:
            end = 0
            self._empty_line(pos, fence)
        self._ws_last_nl = pos + n
        self.end += n + 1
        self.cum += units + 1
        self._store.push_line(line, self.cum, fence if fence is not None else None if lr is None else lists)
        if self._p_blank and not self.head:
            self.base, self.base_cum = self.end, self.cum  # blank lines at the start of a block are dropped
            self._refit()
            self._store.forget(self.base)
        self._lpos, self._lcum, self._q_done = self._store.cur_pos, self.cum, False
        return True

    def _add_lines(self, text: str, nl: int) -> None:  # noqa: C901 (one frame: a call per line costs what it saves)
        """Read ``text``, an append whose first newline is at ``nl``: its complete lines, then the next line's
        beginning.

        Ordinary lines are read in one loop, as :meth:`_fast_line` reads them, the state in locals (written back
        once): outside fences, text that begins with a letter-like character, a list item that :data:`_LINE_HEAD`
        reads (``simple`` or ``item``: as :meth:`_head_line` reads it), text that opens no item or an empty line; in a
        top-level fence, a content line; none of them
        making the pending text overflow or completing a break that emits. Any other line goes to the one-line paths
        (:meth:`_fast_line`, else :meth:`_whole_line`), as does every line while the pending text holds no text yet,
        under a SENTENCE preference, inside a fence in a container, or with :attr:`_ordinary` off.
        """
        store = self._store
        bmp = not self._utf16 or text.isascii() or len(_UTF16(text)[0]) == 2 * len(text)
        start = 0
        line = text[:nl]
        units = nl if bmp else units_of(line, True)
        if self.end > self._lpos:  # the line so far holds text
            if self._lr is None and not self._q_done:  # nothing of it read yet: it is read whole
                line = store.take_current() + line  # the line so far is end - _lpos code points, cum - _lcum units
                units += self.cum - self._lcum
                self.end, self.cum = self._lpos, self._lcum
            else:  # it was read as it arrived
                store.add(line)
                self.end += nl
                self.cum += units
                self._advance(True)
                self._finish_line(store.current())
                start = nl + 1
                nl = text.find("\n", start)
                if nl >= 0:
                    line = text[start:nl]
                    units = nl - start if bmp or line.isascii() else len(_UTF16(line)[0]) >> 1
        rs, inline = self._rs, self._inline
        b_starts, b_rests, b_fences = self._breaks.starts, self._breaks.rests, self._breaks.fences
        while True:
            fence = self.fence
            ordinary = (
                self._ordinary
                and not self._p_blank
                and not self._sentence
                and (fence is None or not (fence.quote_depth or fence.item_indent))
            )
            room, base = self._room, self.base
            emit_at, emits = self._emit_at, self._emits
            end, cum = self.end, self.cum
            ws_open, ws_start, ws_cum, ws_nl, ws_last = (
                self._ws_open,
                self._ws_start,
                self._ws_cum,
                self._ws_nl,
                self._ws_last_nl,
            )
            ws_leading, prev_blank, lists = self._ws_leading, rs.prev_blank, rs.lists
            at: list[int] = []  # the lines read, for the store (TextStore.push_lines)
            texts: list[str] = []
            metas: list[LineMeta] = []
            why = 0  # why the loop stopped at a line: 1 a list item or fence opener (head), 2 a line that may close
            # the fence (both read by their one-line paths at once), 0 any other reason (_fast_line decides)
            head: re.Match[str] | None = None
            while ordinary and nl >= 0:
                n = len(line)
                if cum + units > room:
                    break
                lr = None
                if n:
                    c = line[0]
                    if fence is not None:
                        if c not in _SLOW_START:
                            body = 0
                        elif c == " " and line[-1] not in _WS:  # indented code (_fence_body, inlined)
                            body = n - len(line.lstrip(" \t\r\f\v"))
                            if body <= 3 and line[body] == fence.char and "\t" not in line[:body]:
                                why = 2
                                break
                        else:
                            body = _fence_body(line, fence)
                            if body < 0:
                                why = 2
                                break
                    elif c in _SLOW_START:
                        m = _LINE_HEAD.match(line)
                        group = m.lastgroup if m else None
                        if group == "simple":
                            lr = _SIMPLE_ITEM_READ
                        elif group == "item":  # (as _head_line reads it: its prefix read by its key)
                            assert m is not None
                            ind, col = m.end("ind"), m.end()
                            lr = _ITEM_READS.get((ind, col, *lists))
                            if lr is None:
                                lr = _item_read(ind, col, lists)
                        elif group != "text":
                            why, head = 1, m
                            break
                    if ws_open:  # the break before the line completes
                        if not ws_leading and ws_start >= base:
                            para = ws_nl >= 2
                            if fence is None:
                                if ws_cum >= emit_at and emits[para]:
                                    break  # it may emit
                                rank = R_PARA if para else R_LINE  # BreakTable.add, inlined (once a line)
                            else:
                                rank = R_FPARA if para else R_FLINE
                                b_fences[rank].append(fence)  # type: ignore[union-attr]
                            b_starts[rank].append(ws_start)
                            b_rests[rank].append(ws_last + 1)
                        ws_open = False
                    e = n if line[-1] not in _WS else len(line.rstrip(_WS))
                    if fence is not None:
                        fence.marks.append(end + body)
                        meta: LineMeta = fence
                    elif lr is None:
                        if prev_blank and lists:
                            lists = _NO_LISTS
                        if _OPENS.search(line) if inline.code is None and not inline.links else _SPECIAL.search(line):
                            inline.scan(line, 0, n, end)
                        meta = None
                    else:
                        meta = lists if lr is _SIMPLE_ITEM_READ else (lr.start, None, True, lr, lists)
                        if inline.code is not None or inline.links:
                            inline.cancel()  # a list item begins: no span or link crosses it
                        lists = lr.lists
                        if _OPENS.search(line, lr.start):
                            inline.scan(line, lr.start, n, end)
                    prev_blank = False
                    ws_open, ws_leading = True, False
                    ws_start, ws_cum, ws_nl = end + e, cum + units - (n - e), 1
                else:
                    meta = fence
                    if fence is None and (inline.code is not None or inline.links):
                        inline.cancel()  # a blank line ends the paragraph: no span or link crosses it
                    prev_blank = True
                    if ws_open:
                        ws_nl += 1
                    else:
                        ws_open, ws_leading = True, False
                        ws_start, ws_cum, ws_nl = end, cum, 1
                ws_last = end + n
                at.append(end)
                texts.append(line)
                metas.append(meta)
                end += n + 1
                cum += units + 1
                start = nl + 1
                nl = text.find("\n", start)
                if nl >= 0:
                    line = text[start:nl]
                    units = nl - start if bmp or line.isascii() else len(_UTF16(line)[0]) >> 1
            if at:
                store.push_lines(at, texts, metas, cum)
            self._lpos, self._lcum = end, cum
            due = False
            if nl < 0 and start < len(text):  # the next line's beginning (as _add_partial)
                piece = text[start:]
                self._add(piece)
                end += len(piece)
                cum += len(piece) if bmp else units_of(piece, True)
                due = (
                    cum > room
                    or (  # its first characters may complete a break that emits (_prefix_due, of a kind that emits)
                        ws_open
                        and not ws_leading
                        and ws_cum >= emit_at
                        and ws_start >= base
                        and fence is None
                        and emits[ws_nl > 1]
                    )
                    or (self._sentence and self.head_units + cum - self.base_cum >= self._min)
                )
            self.end, self.cum = end, cum
            self._ws_open, self._ws_start, self._ws_cum, self._ws_nl, self._ws_last_nl = (
                ws_open,
                ws_start,
                ws_cum,
                ws_nl,
                ws_last,
            )
            self._ws_leading, rs.prev_blank, rs.lists = ws_leading, prev_blank, lists
            if nl < 0:
                if due:
                    self._advance(False)
                return
            if why == 1:  # (as _fast_line reads it, without matching it again)
                done = head is not None and self._head_line(line, units, head)
            elif why == 2:
                done = self._closer_line(line, units, fence)  # type: ignore[arg-type]
            else:
                done = self._fast_line(line, units)
            if not done:  # a line the one-line fast paths do not read
                self._whole_line(line, units)
            start = nl + 1
            nl = text.find("\n", start)
            if nl >= 0:
                line = text[start:nl]
                units = nl - start if bmp or line.isascii() else len(_UTF16(line)[0]) >> 1

    def _head_line(self, line: str, units: int, m: re.Match[str]) -> bool:
        """A whole line outside fences that ``m`` (a :data:`_LINE_HEAD` match) found a list item or a fence opener
        in: read as the general path reads it (``_whole_line``), without reading its prefix character by character.
        False when the general path must: the line may make the pending text overflow, or it is an opener whose info
        string might not fit or that a backtick in its info string makes text."""
        n = len(line)
        if self.cum + units > self._room:  # it may not fit (with room for the fence's closer)
            return False
        rs = self._rs
        before = rs.lists
        e = m.end()
        if m.lastgroup == "run":
            if 3 * n + 4 > self._max or (line[0] == "`" and line.find("`", e) >= 0):
                return False
            lists = _NO_LISTS if rs.prev_blank and before else before
            lr = _fence_line_read(RUN, lists)
        else:
            s = m.end("ind")
            known = _ITEM_READS.get((s, e, *before))
            if known is None:
                known = _item_read(s, e, before)
            lr, lists = known, known.lists
        self._store.add(line)
        self.end += n
        self.cum += units
        q = lr.q
        if self._ws_open:
            self._lr_peek = lr
            self._complete_break(q, line[q])
            self._lr_peek = None
        else:
            self._q_done, self._p_blank = True, False
        rs.lists = lists
        inline = self._inline
        inline.cancel()  # a list item or a fence run begins: no span or link crosses it
        pos = self._lpos
        if lr.kind == RUN:
            fence = open_fence(line, lr, lists, 0, e, self.params)
            fence.opener_start = pos
            fence.content_start = pos + n + 1
            fence.content_cum = self.cum + 1
            self._regions.add(pos, pos + len(line.rstrip(_WS)), False)
            self.fence = rs.fence = fence
            self._refit()
            self._fences.append(fence)
            meta = (0, None, False, lr, before)
        else:
            if _OPENS.search(line, e):  # nothing is open: only a backtick or a "[" can change the inline state
                inline.scan(line, e, n, pos)
            meta = (e, None, True, lr, before)
        self._end_head_line(line, n, lr.body, meta)
        return True

    def _closer_line(self, line: str, units: int, fence: Fence) -> bool:
        """A whole line of a top-level ``fence`` that closes it (its run at column 0, only whitespace after it), that
        cannot make the pending text overflow: read as the general path reads it. False for any other line (the
        general path reads it)."""
        if fence.item_indent or fence.quote_depth or not line or line[0] != fence.char or self.cum + units > self._room:
            return False
        m = _CLOSER.match(line)
        if m is None or m.end(1) < fence.length:
            return False
        n = len(line)
        rs = self._rs
        before = rs.lists
        lr = _fence_line_read(FLINE, before)
        self._store.add(line)
        self.end += n
        self.cum += units
        if self._ws_open:
            self._lr_peek = lr
            self._complete_break(0, line[0])
            self._lr_peek = None
        else:
            self._q_done, self._p_blank = True, False
        pos = self._lpos
        fence.closer_line = fence.end_line = pos
        self._regions.add(pos, pos + m.end(1), False)
        self.fence = rs.fence = None
        self._refit()
        self._end_head_line(line, n, 0, (0, fence, False, lr, before))
        return True

    def _end_head_line(self, line: str, n: int, body: int, meta: LineMeta) -> None:
        """The end of a line read by :meth:`_head_line` or :meth:`_closer_line` (as ``_finish_line`` ends one)."""
        self._rs.prev_blank = False
        pos = self._lpos
        ws_idx = max(body, len(line.rstrip(_WS)))
        self._ws_open, self._ws_leading = True, self._p_blank
        self._ws_start = pos + ws_idx
        self._ws_cum = self.cum - (n - ws_idx)
        self._ws_nl = 1
        self._ws_last_nl = pos + n
        self.end += 1
        self.cum += 1
        store = self._store
        store.push_line(line, self.cum, meta)
        if self._p_blank and not self.head:
            self.base, self.base_cum = self.end, self.cum
            self._refit()
            store.forget(self.base)
        self._lpos, self._lcum, self._q_done = store.cur_pos, self.cum, False

    def _empty_line(self, pos: int, fence: Fence | None) -> None:
        """An empty line at ``pos`` (in ``fence`` or not): it ends a paragraph and extends the break."""
        if fence is None:
            self._inline.cancel()
        self._rs.prev_blank = True
        if self._ws_open:
            self._ws_nl += 1
        else:
            self._ws_open, self._ws_leading = True, self._p_blank
            self._ws_start, self._ws_cum, self._ws_nl = pos, self.cum, 1

    def _text_line(self, line: str, pos: int) -> None:
        """A whole text line outside fences and containers: the items it ends and its inline ranges."""
        rs = self._rs
        if rs.prev_blank and rs.lists:
            rs.lists = _NO_LISTS
        inline = self._inline
        # with no span or link open, only a backtick or a "[" can change the inline state
        if _OPENS.search(line) if inline.code is None and not inline.links else _SPECIAL.search(line):
            inline.scan(line, 0, len(line), pos)

    def _item_line(self, line: str, pos: int, lr: LineRead) -> list[int]:
        """A whole plain bullet item line (``lr``: its prefix): its list item and inline ranges; returns
        the items open before it."""
        rs = self._rs
        before = rs.lists
        self._inline.cancel()  # a list item begins: no span or link crosses it
        rs.lists = lr.lists
        inline = self._inline
        if _OPENS.search(line):  # nothing is open: only a backtick or a "[" can change the inline state
            inline.scan(line, lr.start, len(line), pos)
        return before

    def _whole_line(self, line: str, units: int) -> None:
        """A line that arrived whole in one append: read it, handle its events, end it."""
        self._store.add(line)
        n = len(line)
        self.end += n
        self.cum += units
        lr = read_prefix(line, n, self._rs, self._ws_open and not self._ws_leading, True)
        if lr.q >= 0:
            self._lr_peek = lr
            self._complete_break(lr.q, line[lr.q : lr.q + 1])
            self._lr_peek = None
        self._start_line(lr)
        fence = self.fence
        closer = fence.closer_units if fence is not None and fence.splittable else 0
        used = self.head_units + self.cum - self.base_cum
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
        if self._mode == M_INFO and self._info_drop(line, n, self.cum - self._lcum == n)[0] < n:
            end = lr.start + run_length(line, lr.start, line[lr.start])  # the opener goes on bare
            self.end -= n - end
            self.cum -= units_of(line[end:], self._utf16)
            line, n = line[:end], end
            store.set_current(line)
        nl_pos = self._lpos + n
        interior = self.fence if self._mode == M_FENCE else None
        if self._mode == M_INFO:
            self._open_fence(line, lr)
        elif self._is_closer(line, n, lr):
            self._close_fence(lr.start)
        if self.fence is None and lr.blank:
            self._inline.cancel()  # a blank line ends the paragraph: no span or link crosses it
        self._rs.prev_blank = lr.blank
        end = len(line.rstrip(_WS))
        if lr.q >= 0:
            ws_idx = max(lr.body, end)
            self._ws_open, self._ws_leading = True, self._p_blank
            self._ws_start = self._lpos + ws_idx
            self._ws_cum = self.cum - (n - ws_idx)  # trailing whitespace: one unit each
            self._ws_nl = 1
        elif self._ws_open:
            self._ws_nl += 1
        else:
            self._ws_open, self._ws_leading = True, self._p_blank
            self._ws_start, self._ws_cum, self._ws_nl = nl_pos, self.cum, 1
        self._ws_last_nl = nl_pos
        self.end += 1
        self.cum += 1
        store.push_line(line, self.cum, (lr.body, interior, self._mode == M_TEXT, lr, self._lists_before))
        if self._p_blank and not self.head:
            self.base, self.base_cum = self.end, self.cum  # blank lines at the start of a block are dropped
            self._refit()
            store.forget(self.base)
        self._new_line()

    def _is_closer(self, line: str, n: int, lr: LineRead) -> bool:
        fence = self.fence
        if self._mode != M_FENCE or fence is None or self._content_from(line, n) >= 0:
            return False
        return run_length(line, lr.start, fence.char) >= fence.length

    def _open_fence(self, line: str, lr: LineRead) -> None:
        fence = open_fence(line, lr, self._rs.lists, self._run_start, self._run_len, self.params)
        fence.opener_start = self._lpos
        fence.content_start = self._lpos + len(line) + 1
        fence.content_cum = self.cum + 1
        self._regions.add(self._lpos, self._lpos + len(line.rstrip(_WS)), False)
        self.fence = self._rs.fence = fence
        self._refit()
        self._fences.append(fence)

    def _close_fence(self, start: int) -> None:
        fence = self.fence
        assert fence is not None
        fence.closer_line = fence.end_line = self._lpos
        if fence.marks and fence.marks[-1] >= self._lpos:
            fence.marks.pop()
        self._regions.add(self._lpos, self._lpos + start + run_length(self._store.current(), start, fence.char), False)
        self.fence = self._rs.fence = None
        self._refit()
