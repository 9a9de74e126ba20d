"""Coverage: which part of a final text the channel already shows (whitespace-insensitive).

Finalization sends the final text minus what is already acknowledged or queued, so nothing is shown
twice and nothing is lost (DESIGN §4). Comparison ignores whitespace and fence marker lines, because
chunk cuts drop the whitespace of a break and close / reopen fences. Cost: linear in the texts.
"""

from __future__ import annotations

import re

_FENCE_LINE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})[^\n]*$", re.MULTILINE)


def _signature(text: str) -> list[tuple[str, int]]:
    """Non-whitespace characters of ``text`` outside fence marker lines, with their index in ``text``."""
    masked = _FENCE_LINE.sub(lambda m: " " * len(m.group(0)), text)
    return [(ch, i) for i, ch in enumerate(masked) if not ch.isspace()]


def uncovered_tail(final_text: str, shown: list[str]) -> str:
    """The tail of ``final_text`` that the ``shown`` parts (in order) do not already show.

    The shown parts, joined and compared without whitespace and fence marker lines, cover the longest
    common prefix of the final text; the rest is returned (from the start of the line of the first
    uncovered character when a fence is open there, so the fence is reopened).

    Args:
        final_text: the committed final answer.
        shown: texts of the parts already shown or queued, in order.

    Returns:
        The uncovered tail ('' when everything is shown).
    """
    final_sig = _signature(final_text)
    shown_chars = "".join(ch for part in shown for ch, _ in _signature(part))
    n = 0
    limit = min(len(final_sig), len(shown_chars))
    while n < limit and final_sig[n][0] == shown_chars[n]:
        n += 1
    if n >= len(final_sig):
        return ""
    start = final_sig[n][1]
    # Reopen a fence that is open at the cut, with its opener line.
    opener = _open_fence_before(final_text, start)
    tail = final_text[start:]
    return f"{opener}\n{tail}" if opener and not tail.lstrip().startswith(opener.strip()) else tail


def _open_fence_before(text: str, pos: int) -> str | None:
    open_line: str | None = None
    open_marker = ""
    for m in _FENCE_LINE.finditer(text, 0, pos):
        marker = m.group(1)
        if open_line is None:
            open_line, open_marker = m.group(0).strip(), marker
        elif marker[0] == open_marker[0] and len(marker) >= len(open_marker) and m.group(0).strip() == marker:
            open_line = None
    return open_line
