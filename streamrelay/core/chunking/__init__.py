"""Chunker: cuts a stream's visible text into chunks at safe breaks (shared/DESIGN.md section 4).

The rule (shared/cases/README.md), applied as if the text arrived one code point at a time, so that the
output never depends on how the text was split into appends:

- A *break* is a run of whitespace (``" \\t\\n\\r\\f\\v"``; block quote markers at the start of a
  line belong to it, so a quoted blank line is a paragraph break) after some text: a paragraph (two
  newlines or more), a line (one newline), a sentence (no newline, after ``.!?`` or an ellipsis and
  optional closing quotes or brackets; also a CJK full stop U+3002, U+FF01, U+FF1F followed directly by
  text) or a space. A break counts once the first character after its whitespace has arrived.
- Emit: as soon as the pending text ends at a break of the preferred kind or stronger (paragraph >
  newline > sentence) that lies outside fences, links and inline code spans, and the text before the
  break is at least ``min_chars`` long, that text is a chunk. ``min_chars`` gates only this. A sentence
  break whose first character after it may begin a block (below: ``-``, ``1``, ``#``...) emits nothing.
- Cut: only when the pending text no longer fits in ``max_chars`` (trailing whitespace not counted; a
  closer counted once the last line is fence content) is it cut, at the last break of the best kind
  whose chunk fits: paragraph > line (breaks outside fences before breaks inside fences, so a fence
  that fits moves whole to the next chunk) > sentence > space > code point boundary. Breaks and
  boundaries inside links ``[text](url)``, inline code spans, fence marker lines and grapheme clusters
  (combining marks, ZWJ sequences, variation selectors, emoji modifiers, flag pairs) are used only when
  nothing else fits. A chunk never leaves an empty fence behind a cut, and a chunk that begins
  mid-line never begins with three backticks or tildes (that would open a fence), nor with what
  Markdown reads as a block start at a message's start (``>``, ``|``, a heading's
  ``#``, a list marker, a thematic break, an HTML block; or a start of one that the text read so far
  leaves open): an earlier break or boundary is taken; only the last resorts that may cut beside
  whitespace still cut there.
- A cut drops the break's whitespace; the indentation of the next line is kept. A fence cut in two is
  closed (a closer line with the fence's container prefix) and reopened at the start of the next chunk
  (a line continued mid-way also gets its block quote markers back); those markers count in
  ``max_chars``. The reopened opener keeps the info string while opener, closer and their newlines take
  at most half of ``max_chars``, else it is bare; when even the first chunk cannot hold the original
  opener, one code point and a closer, the opener is emitted closed at once and the fence continues bare.
- Containers (each chunk renders alone as it did in the whole, CommonMark): a chunk that starts inside a
  list item holds the item's rest dedented by the item's content column, at each block quote depth (an
  item in a quote in an item: before and after the ``>``; kept as it is when that column
  is at most 3 and the chunk opens with a fence, which renders the same), so a continuation never
  becomes an indented code block and a reopened fence sits at its container's indentation; every line
  keeps its own ``>`` markers, and a chunk that starts mid-line in a block quote gets the line's markers
  back while they take at most half of ``max_chars`` (counted, like a reopened opener). Lengths are
  measured before the dedent (a chunk only gets shorter).
- An opener line whose info string cannot fit with one code point and a closer is never cut inside: the
  info string does not count while the line may still open a fence, and the fence opens bare (its closer
  still closes it; what follows stays text). If the line turns out to be text (a backtick in a backtick
  fence's info string, or the block ends on it), it is cut like text.
- The forced drain emits what is pending, as it is (trailing whitespace and trailing quoted lines with
  no content dropped; no closer is invented for a fence the text left open); chunks made of whitespace
  only are dropped: chunks are never empty.

Fences are CommonMark fences (`````` ``` `````` or ``~~~``, at most 3 spaces of indentation relative to
their container, closed by a line of the same character at least as long), also inside block quotes
and list items; a line that leaves the fence's container ends it (core/chunking/lines.py reads them, for
the whole project: core.text.fences.scan_fences uses it). A fence whose bare opener, one code point and closer
cannot fit in ``max_chars`` is cut like text. Lengths are in the channel's unit
(:class:`core.units.LengthUnit`): code points, or UTF-16 code units for Telegram, where a character
beyond the BMP costs 2 and is never split.

Parts (one concept per module; the :class:`Chunker` holds them, no class is split across modules):

- ``chunker``: :class:`Chunker` (appends, drains, the pending text) and :func:`chunk_text`; it builds the
  parts below for each text block and wires them together.
- ``scanner``: the line scanner: reads each line once (block structure, fences, inline state, the
  whitespace run across lines), records breaks and regions, and calls the cutter at the moments a chunk
  is due; it is the cutter's ``Moment`` (what the text held at the time of the cut).
- ``breaks``: the break table (candidate breaks by kind; sentence and space breaks found on demand).
- ``regions``: protected regions (links, code spans, fence marker lines).
- ``cutter``: picks the cut inside ``max_chars``, closes and reopens fences, emits chunks.
- ``store``: the text store (the chunker's one interface to the text): complete lines as offsets, their text read
  where it is kept (the run's one copy of the answer: :meth:`Chunker.share`, or the store's own list of lines).
- ``inline``: the inline scanner the line scanner holds (code spans and links by regular expression).
- functions and values: ``lines`` (the CommonMark line reader, shared with ``core.text.fences``),
  ``opener`` (fence markers), ``containers`` (dedent and quote markers across a cut), ``graphemes``,
  ``params``.

Cost: an append does O(1) work for a small delta (it stores and counts the piece, and reads further only
when the pending text may no longer fit or a break may emit) and reads each line once; a cut costs time
proportional to the text it emits. bench/bench_chunker.py measures it. Memory: a complete line of the pending text
costs a position and a reference (its reading's leftovers only where its text cannot tell them again), a break two
positions, a protected region two; the text itself is the run's (bench/bench_memory.py measures a run).
"""

from streamrelay.core.chunking.chunker import Chunker, chunk_text
from streamrelay.core.chunking.params import BreakKind, ChunkParams

__all__ = ["BreakKind", "ChunkParams", "Chunker", "chunk_text"]
