"""The chunker's former home: the chunker is the package :mod:`core.chunking` (its docstring has the rule)."""

from core.chunking import BreakKind, Chunker, ChunkParams, chunk_text

__all__ = ["BreakKind", "ChunkParams", "Chunker", "chunk_text"]
