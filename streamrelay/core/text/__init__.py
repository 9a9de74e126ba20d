"""Text: what a person may see, from received text to blocks: delta/snapshot/replace assembly (assembler), reasoning
split out (visible, think), unsafe characters removed (safe_text), CommonMark fences (fences), checks of chunker
output (chunk_checks) and coalescing chunks into blocks (coalescer). The chunker itself is :mod:`core.chunking`."""
