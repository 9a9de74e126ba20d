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

from core.chunking.lines import FLINE, LIST_MARKER, Fence, LineRead, items_at

__all__ = ["NO_CONTEXT", "Context", "dedent", "line_context"]

Context = tuple[tuple[int, ...], str]
NO_CONTEXT: Context = ((), "")

_QUOTES = re.compile(r"(?:[ ]{0,3}>[ ]?)*")
_FENCE_FIRST = re.compile(r"[ ]{0,3}(?:```|~~~)")


def _spaces(m: re.Match[str]) -> str:
    return " " * len(m.group(0))


def line_context(line: str, lr: LineRead, lists_before: list[int], fence: Fence | None, idx: int) -> Context:
    """The context of a chunk that starts at index ``idx`` of a line read with ``lr``.

    Args:
        line: the line (so far). lr: its prefix read. lists_before: the items open before it.
        fence: the fence its content lies in, if any. idx: where the chunk starts in the line.

    Returns:
        ``(content columns of the items it starts in, block quote markers to give back)``; only characters before
        ``idx`` (and the line's prefix when ``idx`` is past it) decide it.
    """
    if lr.kind == FLINE and fence is not None:
        return fence.items, fence.quote_prefix
    # the items that hold the line: around its > markers (a quote in an item) or inside them (an item in
    # a quote); the reader keeps one stack of item columns for both
    col = max(lr.col0, lr.colq)
    if idx == 0:
        return items_at(lists_before, col), ""
    inside = idx <= lr.start  # a cut inside the prefix: the markers after it are not known yet
    quote = ""
    if lr.quotes:
        prefix = LIST_MARKER.sub(_spaces, line[: idx if inside else lr.start])
        gt = prefix.rfind(">")
        if gt >= 0:
            quote = prefix[: gt + 1] + (" " if prefix[gt + 1 : gt + 2] == " " else "")
    return (items_at(lists_before, col) if inside else items_at(lr.lists, max(lr.col, lr.col0))), quote


def dedent(chunk: str, widths: tuple[int, ...]) -> str:
    """``chunk`` with the indentation of the list items it starts in removed, after each line's ``>``
    markers: up to the innermost item's content column; a text line indented less after a blank line
    belongs to an outer item (dedented by its column) or to none (it and the lines after it are kept
    as they are). See the module docstring for when the chunk is kept whole.

    Args:
        chunk: the chunk's text.
        widths: content columns of the items it starts in, outermost first (empty: no item).
    """
    if not widths:
        return chunk
    lines = chunk.split("\n")
    m = _QUOTES.match(lines[0])
    first = lines[0][m.end() if m else 0 :]
    if widths[-1] <= 3 and _FENCE_FIRST.match(first):
        return chunk
    stack = list(widths)
    out: list[str] = []
    blank = False
    for i, line in enumerate(lines):
        q = _QUOTES.match(line)
        k = q.end() if q else 0
        lead = len(line) - k - len(line[k:].lstrip(" "))
        if blank and lead < stack[-1] and k + lead < len(line):  # less indented after a blank line
            while stack and lead < stack[-1]:
                stack.pop()
            if not stack:
                out += lines[i:]
                break
        blank = k + lead == len(line)
        out.append(line[:k] + line[k + min(lead, stack[-1]) :])
    return "\n".join(out)
