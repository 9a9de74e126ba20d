"""Containers across a cut: a chunk that starts inside a list item or a block quote renders alone as it
did in the whole (CommonMark, https://spec.commonmark.org/0.31.2/#list-items, #block-quotes).

- Block quotes: every line keeps its own ``>`` markers; a chunk that starts mid-line gets the line's
  markers back in front (they count in ``max_chars``, like a reopened fence).
- List items: a chunk that starts inside an item (its marker in an earlier chunk) holds the item's rest
  dedented by the item's content column, so a continuation indented four spaces or more never becomes
  an indented code block and a fence at six spaces is reopened as a fence. When the item's content
  column is at most 3 and the chunk opens with a fence there, the fence already renders alone as in the
  whole (its content is stripped relative to the opener), so the chunk is kept as it is.

A chunk's context is ``(width, quote_prefix)``: the content column of the item it starts inside, and the
``>`` markers it must begin with when it starts inside a line. Dedenting only removes spaces, so a chunk
measured before it still fits.
"""

from __future__ import annotations

import re

from streamrelay.core.chunking.lines import FLINE, LIST_MARKER, OPEN, QSTEP, Fence, LineRead, items_at, line_reach

__all__ = ["NO_CONTEXT", "Context", "dedent", "line_context"]

Context = tuple[tuple[int, ...], str]
NO_CONTEXT: Context = ((), "")

_QUOTES = re.compile(r"(?:[ ]{0,3}>[ ]?)*")
_FENCE_FIRST = re.compile(r"[ ]{0,3}(?:```|~~~)")
_CONFIRMED_MARKER = re.compile(r"(?:[-*+]|\d{1,9}[.)])(?=[ \t])")


def _spaces(m: re.Match[str]) -> str:
    return " " * len(m.group(0))


def line_context(line: str, lr: LineRead, lists_before: list[int], fence: Fence | None, idx: int) -> Context:
    """The context of a chunk that starts at index ``idx`` of a line read with ``lr``.

    Args:
        line: the line (so far). lr: its prefix read. lists_before: the items open before it.
        fence: the fence its content lies in, if any. idx: where the chunk starts in the line.

    Returns:
        ``(content columns of the items it starts in, block quote markers to give back)``; only characters before
        ``idx`` (and the line's prefix when ``idx`` is past it) decide it. A prefix not decided yet (``lr`` OPEN:
        ``- -`` may be two list markers or a thematic break) holds ``idx`` past it as it would hold it inside:
        the items are those before the line and the quote markers are read up to ``idx`` with the list markers a
        space already confirms (so a chunk read whole, whose prefix is known, gets the same context).
    """
    if lr.kind == FLINE and fence is not None:
        return fence.items, fence.quote_prefix
    # the items that hold the line: around its > markers (a quote in an item), inside them (an item in
    # a quote), or both; each item entry carries its quote depth (core/chunking/lines.py)
    if idx == 0:
        return items_at(lists_before, line_reach(line, lr.start, True)), ""
    inside = idx <= lr.start  # a cut inside the prefix: the markers after it are not known yet
    undecided = not inside and lr.kind == OPEN  # past what decides the prefix so far: inside it too
    quote = ""
    if lr.quotes:
        if undecided:  # the markers a space or tab already confirms (the character at idx is known at a cut)
            prefix = _CONFIRMED_MARKER.sub(_spaces, line[: idx + 1])[:idx]
        else:
            prefix = LIST_MARKER.sub(_spaces, line[: idx if inside else lr.start])
        gt = prefix.rfind(">")
        if gt >= 0:
            quote = prefix[: gt + 1] + (" " if prefix[gt + 1 : gt + 2] == " " else "")
    if inside or undecided:
        return items_at(lists_before, line_reach(line, lr.start, True)), quote
    return items_at(lr.lists, line_reach(line, lr.start, False)), quote


def dedent(chunk: str, widths: tuple[int, ...]) -> str:
    """``chunk`` with the indentation of the list items it starts in removed: at each block quote depth
    of a line (before its first ``>``, between ``>`` markers, after the last), up to the content column
    of the innermost item at that depth. A text line indented less after a blank line belongs to an outer
    item (dedented by its column) or to none (it and the lines after it are kept as they are); a blank
    line with fewer ``>`` markers ends the items inside the quotes it leaves. See the module docstring
    for when the chunk is kept whole.

    Args:
        chunk: the chunk's text.
        widths: the items it starts in, outermost first (entries ``quote depth * QSTEP + content
            column``, core/chunking/lines.py; empty: no item).
    """
    if not widths:
        return chunk
    lines = chunk.split("\n")
    m = _QUOTES.match(lines[0])
    first = lines[0][m.end() if m else 0 :]
    if widths[-1] % QSTEP <= 3 and _FENCE_FIRST.match(first):
        return chunk
    stack = list(widths)
    out: list[str] = []
    blank = False
    for i, line in enumerate(lines):
        head, k, d = _markers(line, stack)
        lead = _lead(line, k)
        if k + lead < len(line):
            if blank and stack[-1] > d * QSTEP + lead:  # less indented after a blank line
                while stack and stack[-1] > d * QSTEP + lead:
                    stack.pop()
                if not stack:
                    out += lines[i:]
                    break
            blank = False
        else:
            while len(stack) > 1 and stack[-1] >= (d + 1) * QSTEP:
                stack.pop()  # a blank line outside a quote ends it, and the items in it
            blank = True
        out.append(head + line[k + min(lead, _width_at(stack, d)) :])
    return "\n".join(out)


def _lead(line: str, k: int) -> int:
    """Spaces at ``line[k:]``."""
    j = k
    while j < len(line) and line[j] == " ":
        j += 1
    return j - k


def _width_at(stack: list[int], depth: int) -> int:
    """Content column of the innermost item of ``stack`` at block quote depth ``depth`` (0: none)."""
    lo = depth * QSTEP
    for e in reversed(stack):
        if e < lo:
            break
        if e < lo + QSTEP:
            return e - lo
    return 0


def _markers(line: str, stack: list[int]) -> tuple[str, int, int]:
    """A line's ``>`` markers, dedented: ``(the markers as kept, index after them, quote depth)``. Up to 3
    spaces before a marker are kept as they are; more are its item's indentation, removed."""
    parts: list[str] = []
    k = d = 0
    n = len(line)
    while True:
        lead = _lead(line, k)
        j = k + lead
        w = _width_at(stack, d)
        if j >= n or line[j] != ">" or lead > 3 + w:
            return "".join(parts), k, d
        parts.append(line[k + (min(lead, w) if lead > 3 else 0) : j + 1])
        k = j + 1
        if k < n and line[k] == " ":
            parts.append(" ")
            k += 1
        d += 1
