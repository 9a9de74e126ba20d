"""CommonMark fenced code blocks, as a line scan: which lines are fence markers (openers and closers).

One reading shared by the stages that must agree on it (the chunker, coverage, the chunk checks, the case
checks): :mod:`core.chunking.lines` reads each line's container prefix (block quotes, list items) and says
whether it opens, continues or closes a fence. An opener is 3+ backticks or tildes at most 3 columns past
its container's content column (a backtick fence's info string holds no backtick); a closer is a run of the
same character, at least as long, at most 3 columns in, with nothing after it; a line that leaves the
fence's container ends it. A line that looks like an opener inside an open fence (e.g. a second "```py") is
content (https://spec.commonmark.org/0.31.2/#fenced-code-blocks).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamrelay.core.chunking.lines import FLINE, RUN, SPACES, Fence, ReaderState, list_base, read_prefix, run_length


@dataclass
class FenceScan:
    """Fence marker lines of a text.

    Attributes:
        markers: indices of marker lines (0-based line numbers), in order.
        spans: ``(start, end)`` character offsets of each marker line (without its newline).
        has_content: per opened fence, whether any line inside it has content.
        open_line: the opener line of a fence left open at the end, else None.
    """

    markers: list[int] = field(default_factory=list)
    spans: list[tuple[int, int]] = field(default_factory=list)
    has_content: list[bool] = field(default_factory=list)
    open_line: str | None = None


def _closes(line: str, start: int, col: int, fence: Fence) -> bool:
    if line[start] != fence.char or col > fence.item_indent + 3:
        return False
    end = start + run_length(line, start, fence.char)
    return end - start >= fence.length and not line[end:].strip(SPACES)


def _opens(line: str, start: int) -> Fence | None:
    char = line[start]
    end = start + run_length(line, start, char)
    if end - start < 3 or (char == "`" and "`" in line[end:]):
        return None
    return Fence(char, end - start, 0, 0, 0)


def scan_fences(text: str) -> FenceScan:
    """Scan ``text`` line by line for fence marker lines. Cost O(len(text))."""
    scan = FenceScan()
    state = ReaderState()
    opener = ""
    pos = 0
    for idx, line in enumerate(text.split("\n")):
        lr = read_prefix(line, len(line), state, True, True)
        span = (pos, pos + len(line))
        pos += len(line) + 1
        if lr.implicit_end:
            state.fence = None
        state.lists, state.prev_blank = lr.lists, lr.blank
        fence = state.fence
        if lr.kind == FLINE and fence is not None:
            if _closes(line, lr.start, lr.col, fence):
                state.fence = None
                scan.markers.append(idx)
                scan.spans.append(span)
            else:
                scan.has_content[-1] = True
        elif lr.kind == RUN:
            fence = _opens(line, lr.start)
            if fence is not None:
                fence.quote_depth, fence.item_indent = lr.quotes, list_base(lr.lists, lr.quotes, lr.col)
                state.fence, opener = fence, line
                scan.markers.append(idx)
                scan.spans.append(span)
                scan.has_content.append(False)
    scan.open_line = opener if state.fence is not None else None
    return scan
