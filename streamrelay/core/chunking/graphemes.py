"""Grapheme cluster facts the chunker needs to avoid cutting inside a user-perceived character.

Python's standard library has no grapheme cluster segmentation (UAX #29), and core imports only the
standard library and pydantic, so the few rules that matter for a cut are written here: no boundary
before a combining mark (categories Mn, Me, Mc), a zero width joiner, a variation selector, an emoji
modifier or a tag character; none after a zero width joiner; and regional indicator symbols pair into
flags (https://unicode.org/reports/tr29/#Grapheme_Cluster_Boundary_Rules, GB9, GB11, GB12).
core/text/chunk_checks.py uses the same helpers to check chunker output.
"""

from __future__ import annotations

import unicodedata

__all__ = ["NO_START", "ZWJ", "is_extend", "is_regional"]

ZWJ = "\u200d"
"""Zero width joiner (U+200D): no cluster boundary after it."""

# A forced cut does not put these first: closing punctuation, also fullwidth (CJK) forms.
NO_START = frozenset(".,;:!?)]}\u2026\u3001\u3002\uff0c\uff01\uff1f\uff1a\uff1b\uff09\u300d\u300f\u3011\u300b")


def is_extend(ch: str) -> bool:
    """True when no grapheme cluster boundary may come before the code point ``ch``.

    Args:
        ch: one code point.

    Returns:
        True for combining marks, ZWJ, variation selectors, emoji modifiers and tag characters.
    """
    o = ord(ch)
    if o < 0x300:
        return False
    if o == 0x200D or 0xFE00 <= o <= 0xFE0F or 0x1F3FB <= o <= 0x1F3FF:
        return True
    if 0xE0020 <= o <= 0xE007F or 0xE0100 <= o <= 0xE01EF:
        return True
    return unicodedata.category(ch) in ("Mn", "Me", "Mc")


def is_regional(ch: str) -> bool:
    """True when the code point ``ch`` is a regional indicator symbol (two make a flag)."""
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF
