"""The chunker: the public class, composed of its parts, and the whole-text helper.

A :class:`Chunker` holds one text block's parts: the text store (:class:`~core.chunking.store.TextStore`),
the break table (:class:`~core.chunking.breaks.BreakTable`), the protected regions
(:class:`~core.chunking.regions.Regions`), the cutter (:class:`~core.chunking.cutter.Cutter`) and the line
scanner (:class:`~core.chunking.scanner.LineScanner`) that reads each append and calls the cutter when a
chunk is due. A forced drain ends the block: the parts are built afresh (positions go on counting).

Given the text its appends are kept in (:meth:`Chunker.share`: a run's one copy of the answer), the chunker keeps no
copy of the lines it has read: it reads them there by offsets.
"""

from __future__ import annotations

from streamrelay.core.chunking.breaks import BreakTable
from streamrelay.core.chunking.containers import dedent
from streamrelay.core.chunking.cutter import Cutter
from streamrelay.core.chunking.params import ChunkParams
from streamrelay.core.chunking.regions import Regions
from streamrelay.core.chunking.scanner import LineScanner
from streamrelay.core.chunking.store import TextReader, TextStore

__all__ = ["Chunker", "chunk_text"]


class Chunker:
    """Incremental chunker of one text block (the rule: :mod:`core.chunking`).

    Args:
        params: lengths and preferences.

    Attributes:
        params: the parameters it was made with.

    Example:
        >>> c = Chunker(ChunkParams(min_chars=1, max_chars=40))
        >>> c.append("Intro\\n\\nBody")
        ['Intro']
        >>> c.pending, c.drain(force=True)
        ('Body', ['Body'])
    """

    __slots__ = ("_cutter", "_drops", "_off", "_out", "_scan", "_src", "_starts", "_store", "params")

    def __init__(self, params: ChunkParams) -> None:
        self.params = params
        self._out: list[str] = []
        self._starts: list[int] = []
        """Beside ``_out``: each chunk's absolute start when it is exactly the text from there, else -1."""
        self._src: TextReader | None = None
        self._off = 0
        self._drops: list[tuple[int, int]] = []
        """``(position, characters)`` of each info string dropped from the text (see :mod:`core.chunking`): from
        that position on, the chunker's positions are that many characters short of the appends'."""
        self._new_block(0, 0)

    def share(self, source: TextReader, offset: int) -> None:
        """The appends are kept in ``source`` from ``offset`` on (the first appended character is ``source``'s
        character ``offset``, and it grows with each append before the append is given here): the chunker reads the
        lines it has read there instead of keeping them. Call it before the first append.

        Args:
            source: a text read by ranges (:class:`core.text.buffer.TextSource`: ``slice(start, end)``).
            offset: where the chunker's first character is in ``source``.
        """
        self._src, self._off = source, offset
        self._store.share(source, offset + sum(n for _, n in self._drops))

    def _new_block(self, end: int, cum: int) -> None:
        """Fresh parts for a block starting at absolute position ``end`` (``cum`` units before it)."""
        params = self.params
        self._store = store = TextStore(params.unit, end, cum, self._drops)
        if self._src is not None:
            store.share(self._src, self._off + sum(n for _, n in self._drops))
        breaks, regions = BreakTable(), Regions()
        # The cutter reads chunk text from this block's store (what :meth:`_slice` reads): not through a method of
        # the chunker, which would make chunker and cutter a reference cycle (a dropped chunker then waits, with its
        # lines and tables, for a full collection instead of being freed at once).
        self._cutter = cutter = Cutter(params, store, breaks, regions, store.slice, self._out, self._starts)
        self._scan = LineScanner(params, store, breaks, regions, cutter, end, cum)

    def append(self, text: str) -> list[str]:
        """Append text, then drain normally.

        Args:
            text: the next delta of visible text (any length, may be empty).

        Returns:
            The chunks this append completed, in order. Cost O(len(text)) plus the emitted text.
        """
        if text:
            self._scan.append(text)
        out = self._out
        if out:
            chunks = out.copy()
            out.clear()
            self._starts.clear()
            return chunks
        return []

    def append_ranges(self, text: str) -> list[tuple[str, int]]:
        """:meth:`append`, each chunk with where it lies in the appended text.

        Returns:
            ``(chunk, start)`` pairs in order: ``chunk`` is the appended text from ``start`` on (code points from the
            first appended character; ``start`` + the offset given to :meth:`share` is its position in the shared
            text), or ``start`` is -1 when it is not one range of it (a reopened fence's opener or quote markers
            before it, a closer after it, list items dedented, an info string dropped inside it). Cost as
            :meth:`append`.
        """
        if text:
            self._scan.append(text)
        return self._ranged() if self._out else []

    def drain_ranges(self, force: bool = False) -> list[tuple[str, int]]:
        """:meth:`drain`, each chunk with where it lies in the appended text (as :meth:`append_ranges`)."""
        if force:
            self._drain_block()
        return self._ranged()

    def _ranged(self) -> list[tuple[str, int]]:
        """The chunks emitted since the last drain with their starts in the appended text (then forgotten)."""
        drops = self._drops
        pairs = []
        for chunk, start in zip(self._out, self._starts, strict=True):
            if start >= 0 and drops:
                end = start + len(chunk)
                before = sum(n for at, n in drops if at <= start)
                start = start + before if before == sum(n for at, n in drops if at < end) else -1
            pairs.append((chunk, start))
        self._out.clear()
        self._starts.clear()
        return pairs

    def drain(self, force: bool = False) -> list[str]:
        """Return the chunks emitted since the last drain.

        Args:
            force: end of the text block: also emit everything pending (trailing whitespace dropped;
                it always fits in ``max_chars``) and start afresh, as at the beginning of a block.

        Returns:
            Chunks, in order; never empty strings.
        """
        if force:
            self._drain_block()
        out = self._out.copy()
        self._out.clear()
        self._starts.clear()
        return out

    def _drain_block(self) -> None:
        """End the text block: emit everything pending and start afresh (:meth:`drain` with ``force``)."""
        scan = self._scan
        scan.end_block()  # (appends waiting to be read are read first)
        self._cutter.emit(scan.head + self._slice(scan.base, scan.end), scan.ctx_w, -1 if scan.head else scan.base)
        self._new_block(scan.end, scan.cum)

    @property
    def pending(self) -> str:
        """The text not emitted yet, exactly as the next chunk would begin (with a reopened fence opener).

        Without its trailing whitespace (and the ``>`` markers of a trailing quoted line that has no
        content yet) it fits in ``max_chars``, with room for a closer while its last line is fence
        content. Cost O(len(pending)).
        """
        scan = self._scan
        scan.catch_up()
        return dedent(scan.head + self._slice(scan.base, scan.end), scan.ctx_w)

    def pending_range(self) -> tuple[str, int, int, tuple[int, ...], int]:
        """Where the pending text (:attr:`pending`) lies, without building it: ``(head, start, end, widths, units)``:
        the reopened fence opener before it, the absolute positions of the appended text it is (``start`` to
        ``end``; ``start`` is -1 when it is not one range of it: an opener's info string too long to fit was
        dropped inside it), the list items it starts in (:func:`~core.chunking.containers.dedent`) and its length in
        units before dedenting (more than ``params.max_chars`` while the chunker holds more than a message, waiting
        to see where a protected range or a block ends). ``dedent(head + text[start:end], widths)`` is
        :attr:`pending`. O(1) (O(info strings dropped) after one was)."""
        scan = self._scan
        if not self._drops:
            return scan.head, scan.base, scan.end, scan.ctx_w, scan.head_units + scan.cum - scan.base_cum
        start, end = scan.base, scan.end
        before = sum(n for at, n in self._drops if at <= start)
        upto = sum(n for at, n in self._drops if at < end)
        start, end = (start + before, end + upto) if before == upto else (-1, -1)
        return scan.head, start, end, scan.ctx_w, scan.head_units + scan.cum - scan.base_cum

    def _slice(self, a: int, b: int) -> str:
        """The appended text between absolute positions ``a`` and ``b`` (``a`` not before the pending text):
        the one reader of chunk text, which the cutter is given."""
        return self._store.slice(a, b)


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
