"""Length units of channels: plain code points, or UTF-16 code units (Telegram).

Telegram counts entity offsets in UTF-16 code units; splitting at <= 4096 UTF-16 units is safe for
its 4096-character limit (https://core.telegram.org/bots/api#sendmessage).
"""

from __future__ import annotations

import enum


class LengthUnit(enum.StrEnum):
    CHARS = "chars"
    UTF16 = "utf16"


def char_units(ch: str, unit: LengthUnit) -> int:
    """Units one code point costs: 1, or 2 for a code point beyond the BMP in UTF-16."""
    if unit is LengthUnit.UTF16 and ord(ch) > 0xFFFF:
        return 2
    return 1


def text_units(text: str, unit: LengthUnit) -> int:
    """Length of ``text`` in ``unit``. O(len(text))."""
    if unit is LengthUnit.CHARS:
        return len(text)
    return len(text.encode("utf-16-le")) // 2
