"""The chunker's front: appends, the pending text's lines, and what each line leaves to the next.

An append stores its text and, for a small delta, does O(1) work: it updates the unit count and looks
again only when something may happen (the first characters of a line, whose prefix completes the
break before it; pending text that may no longer fit; a sentence break under a SENTENCE preference).
A complete line is read once: one prefix read (lines.py), one regular expression pass over its inline
specials (inline.py), one break record. Each decision is taken with what the text held at its moment
(the overflow's character, a break's next character), so the output does not depend on the deltas.
"""

from __future__ import annotations

import re

from core.chunking.breaks import EMIT_RANKS, Break
from core.chunking.containers import dedent
from core.chunking.events import M_NONE
from core.chunking.inline import InlineScanner
from core.chunking.line_ends import LineEnds
from core.chunking.lines import Fence, LineRead, ReaderState
from core.chunking.params import BreakKind, ChunkParams
from core.chunking.store import TextStore, units_of
from core.units import LengthUnit

_SPECIAL = re.compile(r"[`\\\[\]()]")
_SLOW_START = frozenset(" \t\r\f\v>-*+0123456789`~")
_WS = " \t\n\r\f\v"


class Chunker(LineEnds):
    """Incremental chunker of one text block (the rule: :mod:`core.chunking`).

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
        self._emit_ranks = EMIT_RANKS[params.break_preference]
        self._sentence = params.break_preference is BreakKind.SENTENCE
        self._out: list[str] = []
        self._end = 0  # code points appended
        self._cum = 0  # units appended
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
            nl = text.find("\n")
            if nl >= 0:
                self._add_lines(text, nl)
            elif self._sentence or (self._utf16 and not text.isascii()) or (self._lr is None and self._prefix_due()):
                self._add_partial(text)
            else:  # the common small delta: store it, count it, look again only if it may not fit
                self._store.parts.append(text)
                self._end += len(text)
                self._cum += len(text)
                fence = self._fence
                closer = fence.closer_units if fence is not None and fence.splittable else 0
                if self._head_units + self._cum - self._base_cum + closer > self._max:
                    self._advance(False)
        out = self._out
        if out:
            self._out = []
            return out
        return []

    def drain(self, force: bool = False) -> list[str]:
        """Return the chunks emitted since the last drain.

        Args:
            force: end of the text block: also emit everything pending (trailing whitespace dropped;
                it always fits in ``max_chars``) and start afresh, as at the beginning of a block.

        Returns:
            Chunks, in order; never empty strings.
        """
        if force:
            self._end_info_drop()
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
        return dedent(self._head + self._slice(self._base, self._end), self._ctx_w)

    # --- block state ----------------------------------------------------------------------------------

    def _reset_block(self) -> None:
        self._base = self._end  # first code point of the pending text
        self._base_cum = self._cum
        self._head = ""  # reopened fence opener that precedes the pending text
        self._head_units = 0
        self._ctx_w: tuple[int, ...] = ()  # content columns of the list items the pending text starts in
        self._p_blank = True  # the pending text holds no non-whitespace yet
        self._store = TextStore(self._unit, self._end, self._cum)
        self._breaks: list[list[Break]] = [[] for _ in range(6)]
        self._bstart = [0] * 6
        self._inner_key = (-1, -1)
        self._reg_starts: list[int] = []
        self._reg_ends: list[int] = []
        self._reg_inline: list[bool] = []
        self._rlo = 0
        self._fences: list[Fence] = []
        self._fence: Fence | None = None
        self._rs = ReaderState()
        self._inline = InlineScanner(self._add_region)
        self._tend = self._tcum = self._tnonws = 0
        # the whitespace run open across lines
        self._ws_open = False
        self._ws_start = self._ws_cum = self._ws_nl = self._ws_last_nl = 0
        self._ws_leading = False
        self._new_line()

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

    # --- text store -----------------------------------------------------------------------------------

    def _slice(self, a: int, b: int) -> str:
        """Appended text between absolute positions ``a`` and ``b`` (``a`` not before the pending text)."""
        return self._store.slice(a, b) if a < b else ""

    def _char_at(self, p: int) -> str:
        return self._store.char_at(p)

    def _cum_at(self, p: int) -> int:
        return self._store.cum_at(p)

    def _forget(self, pos: int) -> None:
        self._store.forget(pos)

    # --- appending ------------------------------------------------------------------------------------

    def _add_partial(self, text: str, units: int = -1) -> None:
        self._store.parts.append(text)
        self._end += len(text)
        self._cum += units_of(text, self._utf16) if units < 0 else units
        fence = self._fence
        closer = fence.closer_units if fence is not None and fence.splittable else 0
        used = self._head_units + self._cum - self._base_cum
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
            and self._head_units + self._ws_cum - self._base_cum >= self._min
            and self._ws_start >= self._base
        )

    def _add_lines(self, text: str, nl: int) -> None:
        store, start = self._store, 0
        bmp = not self._utf16 or units_of(text, True) == len(text)
        while nl >= 0:
            piece = text[start:nl]
            units = len(piece) if bmp else units_of(piece, True)
            if store.parts and self._lr is None and not self._q_done:  # nothing of the line read yet
                head = store.current()
                store.parts = []
                self._end -= len(head)
                self._cum -= units_of(head, self._utf16)
                piece = head + piece
                units = units_of(piece, self._utf16)
            if store.parts:
                store.parts.append(piece)
                self._end += len(piece)
                self._cum += units
                self._advance(True)
                self._finish_line(store.current())
            elif not self._fast_line(piece, units):
                self._whole_line(piece, units)
            start = nl + 1
            nl = text.find("\n", start)
        if start < len(text):
            piece = text[start:]
            self._add_partial(piece, len(piece) if bmp else -1)

    # --- line ends ------------------------------------------------------------------------------------


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
