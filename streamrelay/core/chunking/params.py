"""The chunker's parameters: lengths, the preferred break, the length unit."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from streamrelay.core.units import LengthUnit

__all__ = ["BreakKind", "ChunkParams"]


class BreakKind(enum.StrEnum):
    """The break a chunker waits for before emitting a chunk under ``max_chars``."""

    PARAGRAPH = "paragraph"
    NEWLINE = "newline"
    SENTENCE = "sentence"


@dataclass(frozen=True, slots=True)
class ChunkParams:
    """How a :class:`core.chunking.Chunker` cuts.

    Attributes:
        min_chars: the shortest chunk emitted at a preferred break, in ``unit`` (0 or more).
        max_chars: the longest chunk ever emitted, fence markers included, in ``unit`` (2 or more,
            so that any code point fits).
        break_preference: the break that ends a chunk as soon as ``min_chars`` is reached.
        unit: how lengths are counted (code points, or UTF-16 code units).

    Raises:
        ValueError: when ``max_chars < 2`` or ``min_chars`` is outside ``0..max_chars``.
    """

    min_chars: int
    max_chars: int
    break_preference: BreakKind = BreakKind.PARAGRAPH
    unit: LengthUnit = LengthUnit.CHARS

    def __post_init__(self) -> None:
        object.__setattr__(self, "break_preference", BreakKind(self.break_preference))
        object.__setattr__(self, "unit", LengthUnit(self.unit))
        if self.max_chars < 2:
            raise ValueError(f"max_chars must be at least 2, got {self.max_chars}")
        if not 0 <= self.min_chars <= self.max_chars:
            raise ValueError(f"min_chars must be in 0..max_chars ({self.max_chars}), got {self.min_chars}")
