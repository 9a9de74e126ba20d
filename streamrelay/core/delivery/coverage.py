"""Coverage: which part of a final text the channel already shows (whitespace-insensitive).

Finalization sends the final text minus what is already acknowledged or queued, so nothing is shown
twice and nothing is lost (DESIGN §4). Comparison ignores whitespace, fence marker lines and block quote
markers at line starts, because chunk cuts drop the whitespace of a break, close / reopen fences and give a
quoted line continued mid-way its markers back.

The final may cover every shown part (the runtime sends the whole answer) or only the last ones (the
runtime sends its last assistant message as ``final_text``), so coverage is searched from each part's
start: the final's longest prefix that runs, from a part's start, either to the end of what is shown or
to the end of the final. If no part start matches, the final diverged from what was streamed and is
shown whole. Cost: O(parts x length) in the worst case, O(length) in the usual one.
"""

from __future__ import annotations

import re

from streamrelay.core.text.fences import scan_fences

_QUOTE_MARKERS = re.compile(r"^[ \t]*(?:>[ \t]?)+", re.MULTILINE)


def _signature(text: str) -> tuple[str, list[int]]:
    """Non-whitespace characters of ``text`` outside fence marker lines and block quote markers at line
    starts (a chunk cut mid-line in a quote gets its markers back), with their index in ``text``."""
    chars = list(text)
    for start, end in scan_fences(text).spans:
        chars[start:end] = " " * (end - start)
    for m in _QUOTE_MARKERS.finditer(text):
        chars[m.start() : m.end()] = " " * (m.end() - m.start())
    masked = "".join(chars)
    positions = [i for i, ch in enumerate(masked) if not ch.isspace()]
    return "".join(masked[i] for i in positions), positions


def covered_prefix(final_sig: str, shown: list[str]) -> int:
    """How many signature characters of the final are already shown (see the module docstring)."""
    sigs = [_signature(part)[0] for part in shown]
    joined = "".join(sigs)
    best = 0
    start = 0
    for sig in sigs:
        if sig and final_sig.startswith(sig[:1]):
            rest = joined[start:]
            n = _common_prefix(final_sig, rest)
            if n == len(final_sig) or n == len(rest):
                best = max(best, n)
        start += len(sig)
    return best


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # binary search on slices: C-speed comparisons
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def uncovered_tail(final_text: str, shown: list[str]) -> str:
    """The tail of ``final_text`` that the ``shown`` parts (in order) do not already show.

    Args:
        final_text: the committed final answer.
        shown: texts of the parts already shown or queued, in order.

    Returns:
        The uncovered tail ('' when everything is shown), starting at the first uncovered character
        (or at the start of its line when a fence is open there, reopened with its opener line).
    """
    final_sig, positions = _signature(final_text)
    n = covered_prefix(final_sig, shown)
    if n >= len(final_sig):
        return ""
    start = positions[n]
    opener = open_fence_before(final_text, start)
    tail = final_text[start:]
    # The tail starts on a content line (marker lines are not in the signature): inside an open fence it
    # needs the fence's opener again, even when that line looks like an opener itself.
    return f"{opener}\n{tail}" if opener else tail


def split_covered(final_text: str, shown: str) -> tuple[str, str]:
    """``final_text`` cut where ``shown`` stops covering it: ``(head, tail)``, ``head`` the start of it that
    ``shown`` covers (whitespace-insensitive, as :func:`uncovered_tail`), ``tail`` the rest as
    :func:`uncovered_tail` gives it (a fence open at the cut reopened). A final that does not start with ``shown``
    has an empty head (its leading whitespace at most)."""
    final_sig, positions = _signature(final_text)
    n = covered_prefix(final_sig, [shown])
    if n >= len(final_sig):
        return final_text, ""
    start = positions[n]
    opener = open_fence_before(final_text, start)
    tail = final_text[start:]
    return final_text[:start], f"{opener}\n{tail}" if opener else tail


def open_fence_before(text: str, pos: int) -> str | None:
    """The opener line (stripped) of the code fence still open at ``pos`` of ``text``, or None. O(``pos``)."""
    opener = scan_fences(text[:pos]).open_line
    return opener.strip() if opener is not None else None


class ShownCursor:
    """What a channel already shows (parts restored after a restart), consumed in order by the blocks a replayed
    run emits again, so a block that is already shown is not sent twice, even when the replay cuts its blocks
    elsewhere than the first life did (a coalescer's idle flush depends on timing; a replay has none).

    Args:
        shown: the restored parts' texts, in order.
    """

    def __init__(self, shown: list[str]) -> None:
        self._sig = "".join(_signature(text)[0] for text in shown)
        self._pos = 0

    def uncovered(self, text: str) -> str:
        """``text`` minus what the shown parts still cover at the cursor (whitespace-insensitive); '' when all of
        it is shown. A text that diverges from what is shown ends the alignment: it and all later text go out."""
        if self._pos >= len(self._sig):
            return text
        sig, positions = _signature(text)
        rest = self._sig[self._pos :]
        n = _common_prefix(sig, rest)
        if n == len(sig):
            self._pos += n
            return ""
        if n == len(rest):
            self._pos += n
            start = positions[n]
            opener = open_fence_before(text, start)
            return f"{opener}\n{text[start:]}" if opener else text[start:]
        self._pos = len(self._sig)
        return text
