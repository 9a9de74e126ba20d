"""A fence's markers as a chunk needs them: the closer that ends a cut, the opener that reopens it.

The closer is the opener's container prefix (block quote markers, list markers turned into spaces) and
its run; the reopened opener keeps the info string while opener, closer and their newlines take at most
half of ``max_chars``, else it is bare. A fence is split at all only when its bare markers, one code
point and the opener line fit (``splittable``); otherwise it is cut like text.
"""

from __future__ import annotations

import re

from streamrelay.core.chunking.lines import LIST_MARKER, Fence, LineRead, items_at, line_reach, list_base
from streamrelay.core.chunking.params import ChunkParams
from streamrelay.core.chunking.store import units_of

__all__ = ["open_fence"]

_WS = " \t\n\r\f\v"


def _spaces(m: re.Match[str]) -> str:
    return " " * len(m.group(0))


def open_fence(line: str, lr: LineRead, lists: list[int], run_start: int, run_len: int, params: ChunkParams) -> Fence:
    """The fence an opener line opens (positions left to the caller).

    Args:
        line: the opener line, without its newline.
        lr: its prefix read. lists: the open list items' content columns.
        run_start: index of its backtick or tilde run; run_len: the run's length.
        params: for ``max_chars`` and the unit the markers are counted in.
    """
    max_chars = params.max_chars
    utf16 = params.unit == "utf16"
    char = line[run_start]
    run_end = run_start + run_len
    raw = line[:run_start]
    info = line[run_end:].rstrip(_WS)
    run = char * run_len
    fence = Fence(char, run_len, 0, 0, 0)
    prefix = LIST_MARKER.sub(_spaces, raw) if raw else ""
    gt = prefix.rfind(">")
    if gt >= 0:
        fence.quote_prefix = prefix[: gt + 1] + (" " if prefix[gt + 1 : gt + 2] == " " else "")
    fence.prefix, fence.info = prefix, info
    fence.quote_depth = lr.quotes
    if lists:  # (none open: no item holds it, as the defaults say)
        fence.item_indent = list_base(lists, lr.quotes, lr.col)
        fence.items = items_at(lists, line_reach(line, run_start, False))  # the items around its quote markers too
    fence.closer = "\n" + prefix + run
    fence.closer_units = units_of(fence.closer, utf16)
    full = prefix + run + info
    cp_max = 2 if utf16 else 1
    fence.reopen_full = not info or 2 * (units_of(full, utf16) + 1 + fence.closer_units) <= max_chars
    fence.reopen = full if fence.reopen_full else prefix + run
    room = max_chars - fence.closer_units - 1 - cp_max
    fence.splittable = (
        units_of(prefix + run, utf16) <= room and units_of(raw + run + info, utf16) + fence.closer_units <= max_chars
    )
    return fence
