"""CommonMark fenced code blocks, as a line scan: which lines are fence markers (openers and closers).

One reading shared by the stages that must agree on it (coverage, the chunk checks, the case checks):
an opener is 3+ backticks or tildes at a line start (after block quote and list markers; a backtick fence's
info string holds no backtick); a closer is a run of the same character, at least as long, with nothing
after it. A line that looks like an opener inside an open fence (e.g. a second "```py") is content
(https://spec.commonmark.org/0.31.2/#fenced-code-blocks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FENCE_LINE = re.compile(r"(?P<prefix>[ \t>]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)*[ \t]*)(?P<run>`{3,}|~{3,})(?P<rest>.*)")


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


def scan_fences(text: str) -> FenceScan:
    """Scan ``text`` line by line for fence marker lines. Cost O(len(text))."""
    scan = FenceScan()
    open_char, open_len, opener = "", 0, ""
    pos = 0
    for idx, line in enumerate(text.split("\n")):
        m = FENCE_LINE.fullmatch(line)
        if not open_char:
            if m and not (m["run"][0] == "`" and "`" in m["rest"]):
                open_char, open_len, opener = m["run"][0], len(m["run"]), line
                scan.markers.append(idx)
                scan.spans.append((pos, pos + len(line)))
                scan.has_content.append(False)
        elif m and m["run"][0] == open_char and len(m["run"]) >= open_len and not m["rest"].strip():
            open_char = ""
            scan.markers.append(idx)
            scan.spans.append((pos, pos + len(line)))
        elif line.strip(" \t>"):
            scan.has_content[-1] = True
        pos += len(line) + 1
    scan.open_line = opener if open_char else None
    return scan
