"""The chunker benchmark's baseline and its chunk-quality measure (bench/bench_chunker.py, issue 13 item 4).

:class:`NaiveChunker` is the baseline measured beside the project's chunker in the same run; :func:`quality`
finds where each chunk lies in the text (by its content characters, ignoring reopened fence openers and added
closers) and whether it ends at a paragraph break, and counts the chunks whose fences are balanced.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from streamrelay.core.chunking import ChunkParams
from streamrelay.core.text.fences import scan_fences


class StreamChunker(Protocol):
    """What the harness drives: the project's :class:`Chunker` and the baseline alike."""

    def append(self, text: str) -> list[str]: ...

    def drain(self, force: bool = False) -> list[str]: ...


class NaiveChunker:
    """The baseline: the simplest paragraph chunker one would write in Python.

    A string buffer; on every append it rescans the buffer for its last paragraph break (``"\\n\\n"``). Past
    ``max_chars`` it cuts at the last break within ``max_chars`` (else at ``max_chars``); once the buffer
    holds a break at or past ``min_chars`` it emits up to its last break. Lengths are code points whatever
    the unit; no fence, link or grapheme handling (so its chunks may leave fences open).

    Args:
        params: the chunk parameters (``min_chars``, ``max_chars``; the preference and unit are ignored).
    """

    def __init__(self, params: ChunkParams) -> None:
        self.min_chars = params.min_chars
        self.max_chars = params.max_chars
        self.buf = ""

    def append(self, text: str) -> list[str]:
        """Add ``text``; return the chunks now complete."""
        self.buf += text
        out: list[str] = []
        while True:
            buf = self.buf
            if len(buf) > self.max_chars:
                cut = buf.rfind("\n\n", 0, self.max_chars)
                if cut <= 0:
                    cut = self.max_chars
            else:
                cut = buf.rfind("\n\n")
                if cut < max(self.min_chars, 1):
                    return out
            chunk = buf[:cut].rstrip()
            self.buf = buf[cut:].lstrip()
            if chunk:
                out.append(chunk)

    def drain(self, force: bool = False) -> list[str]:
        """The rest of the buffer as a last chunk when ``force`` (nothing otherwise)."""
        rest, self.buf = (self.buf.strip(), "") if force else ("", self.buf)
        return [rest] if rest else []


_QUOTE_PREFIX = re.compile(r"(?m)^[ \t]*(?:>[ \t]?)+")
_NON_WS = re.compile(r"\S")
_PARA_BREAK = re.compile(r"(?<=\S)(?:[ \t>]*\n){2,}")


@dataclass
class Quality:
    """Chunk quality of one row."""

    para_ends: int = 0
    para_windows: int = 0
    balanced: int = 0
    chunks: int = 0
    aligned: bool = True

    def para(self) -> str:
        if not self.aligned:
            return "n/a"
        if not self.para_windows:
            return "-"
        return f"{100 * self.para_ends / self.para_windows:.0f}% {self.para_ends}/{self.para_windows}"

    def fences(self) -> str:
        return "all" if self.balanced == self.chunks else f"{self.chunks - self.balanced} open"


class TextMap:
    """Positions of a text's content characters (not whitespace, not block quote markers), to find where
    each chunk lies in the text, and its paragraph breaks outside fences."""

    def __init__(self, text: str) -> None:
        quoted = {i for m in _QUOTE_PREFIX.finditer(text) for i in range(m.start(), m.end())}
        self.pos = [m.start() for m in _NON_WS.finditer(text) if m.start() not in quoted]
        self.key = "".join(text[p] for p in self.pos)
        scan = scan_fences(text)
        inside = [(a[1], b[0]) for a, b in zip(scan.spans[::2], scan.spans[1::2], strict=False)]
        if scan.open_line is not None:
            inside.append((scan.spans[-1][1], len(text)))
        self.breaks = [m.start() for m in _PARA_BREAK.finditer(text) if not any(a <= m.start() < b for a, b in inside)]


def _content_key(line: str) -> str:
    return "".join(_QUOTE_PREFIX.sub("", line, count=1).split())


def _chunk_key(chunk: str, text_map: TextMap, at: int) -> str:
    """The chunk's content characters, without a reopened fence opener or an added closer (marker lines
    the text does not have at that place)."""
    lines = chunk.split("\n")
    markers = scan_fences(chunk).markers
    keys = [_content_key(line) for line in lines]
    if markers and markers[0] == 0 and not text_map.key.startswith(keys[0], at):
        keys[0] = ""
    if len(markers) % 2 == 0 and markers and markers[-1] == len(lines) - 1 and len(lines) > 1:
        body = "".join(keys[:-1])
        if not text_map.key.startswith(keys[-1], at + len(body)):
            keys[-1] = ""
    return "".join(keys)


def quality(text: str, text_map: TextMap, chunks: Sequence[str], max_chars: int) -> Quality:
    """Where each chunk ends in ``text`` (paragraph breaks outside fences), and its fences' balance."""
    q = Quality(chunks=len(chunks))
    q.balanced = sum(scan_fences(chunk).open_line is None for chunk in chunks)
    at = 0
    breaks = set(text_map.breaks)
    for i, chunk in enumerate(chunks):
        key = _chunk_key(chunk, text_map, at)
        if not key or not text_map.key.startswith(key, at):
            q.aligned = False
            return q
        start, end = text_map.pos[at], text_map.pos[at + len(key) - 1] + 1
        at += len(key)
        if i == len(chunks) - 1:
            break
        lo, hi = bisect_left(text_map.breaks, start + 1), bisect_left(text_map.breaks, start + max_chars + 1)
        if hi > lo:
            q.para_windows += 1
            q.para_ends += end in breaks
    return q
