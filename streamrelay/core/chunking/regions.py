"""Protected regions: spans of the pending text that a cut avoids while anything else fits.

A region is ``[start, end)`` in absolute code point positions (offsets from the stream's first appended
character). Two sorts: *inline* regions (complete links ``[text](url)`` and inline code spans, reported by
:class:`core.chunking.inline.InlineScanner`), which the first plans of a cut avoid, and *structural* ones
(a fence's opener and closer lines, reported by the line scanner), which every plan avoids but the last
(:mod:`core.chunking.cutter`). Regions are recorded as they close; one that starts at or before the
start of regions already recorded encloses them and replaces them (nested: the outer one is kept).
Lookups bisect; regions wholly before the pending text are dropped as cuts move past them.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right

__all__ = ["Regions"]


class Regions:
    """The protected regions of the pending text, in order.

    Attributes:
        starts: start of each region (increasing), absolute code point positions (an array of machine integers).
        ends: end (exclusive) of each region, parallel to ``starts``.
        inline: whether each region is inline (link, code span: 1) rather than a fence marker line (0).
        lo: index of the first region that may still lie in the pending text.
    """

    __slots__ = ("ends", "inline", "lo", "starts")

    def __init__(self) -> None:
        self.starts = array("q")
        self.ends = array("q")
        self.inline = bytearray()  # 1: inline
        self.lo = 0

    def add(self, start: int, end: int, inline: bool = True) -> None:
        """Record the region ``[start, end)``; regions it encloses (starting at or after ``start``) go."""
        starts = self.starts
        while len(starts) > self.lo and starts[-1] >= start:  # nested regions: keep the outer one
            starts.pop()
            self.ends.pop()
            self.inline.pop()
        starts.append(start)
        self.ends.append(end)
        self.inline.append(inline)

    def index(self, pos: int, inline: bool) -> int:
        """Index of the region holding the code point boundary ``pos`` (strictly after its start, before its
        end), or -1; inline regions count only when ``inline``."""
        k = bisect_left(self.starts, pos, self.lo) - 1
        if k >= self.lo and self.ends[k] > pos and (inline or not self.inline[k]):
            return k
        return -1

    def forget(self, pos: int) -> None:
        """The pending text now starts at ``pos``: regions that end at or before it no longer matter.
        Cost: a bisection; the dead regions are dropped once they are at least half of the lists (so they
        never outnumber the live ones; amortized O(1) per region)."""
        lo = self.lo = bisect_right(self.ends, pos, self.lo)
        if lo and 2 * lo >= len(self.ends):
            del self.starts[:lo]
            del self.ends[:lo]
            del self.inline[:lo]
            self.lo = 0
