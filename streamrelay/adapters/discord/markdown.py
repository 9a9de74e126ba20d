"""Standard Markdown into the subset Discord renders, so a person never reads raw markup.

Discord renders ``#``, ``##`` and ``###`` headings, emphasis, lists, quotes, code spans and fenced code blocks, but
not ``####``-``######`` headings, thematic breaks (``---``) or tables
(https://support.discord.com/hc/en-us/articles/210298617-Markdown-Text-101-Chat-Formatting-Bold-Italic-Underline):
those show as typed (``#### Setup``, ``|---|---|``). Outside fenced code:

- a ``####``-``######`` heading becomes a bold line (``**Setup**``);
- a thematic break becomes a line of box-drawing characters, a setext heading (text over ``---`` or ``===``) an
  ATX one (``## text``);
- a GFM table (a header row, its delimiter row, the rows after it) becomes a fenced code block with its columns
  padded to one width, which a monospace font lines up.

Fences are read with the project's one fence reader (:func:`core.text.fences.scan_fences`): nothing inside code changes.
Cost: one pass over the lines, compiled regular expressions per line; a text with none of ``#``, ``|``, ``-``, ``*``
or ``_`` at a line start returns at once. (No library does this conversion for Discord's subset; markdown-it-py
would parse all of CommonMark to change three constructs.)
"""

from __future__ import annotations

import re

from streamrelay.core.text.fences import scan_fences

_HEADING = re.compile(r" {0,3}#{4,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*")
_BREAK = re.compile(r" {0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})")
_DELIMITER = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")
_SETEXT = re.compile(r" {0,3}(?:-+|=+)[ \t]*")
_PARAGRAPH = re.compile(r" {0,3}(?:[-+*>#|]|\d+[.)]|```|~~~)")  # a line that does not begin a paragraph's text
_MAYBE = re.compile(r"^ {0,3}(?:#{4}|[-*_][ \t]*[-*_][ \t]*[-*_]|=)|\|", re.M)
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
RULE = "─" * 12
"""What a thematic break becomes."""
REWRITTEN = re.compile(r"[|+#*`─—-]")
"""The characters the rewrite adds, moves or drops (pipes, rules, heading and bold marks, fences): a check that
compares what Discord shows with the Markdown written leaves them out on both sides (a table cut across two
messages is a code block in the first and pipes in the second); words, their order and their count still compare."""


def discord_markdown(text: str) -> str:
    """``text`` with the constructs Discord does not render rewritten (module docstring); the rest unchanged."""
    if _MAYBE.search(text) is None:
        return text
    lines = text.split("\n")
    fenced = _fenced_lines(text, len(lines))
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if i in fenced:
            out.append(line)
            i += 1
            continue
        if "|" in line and i + 1 < len(lines) and i + 1 not in fenced and _is_delimiter(lines[i + 1]):
            end = i + 2
            while end < len(lines) and end not in fenced and "|" in lines[end] and lines[end].strip():
                end += 1
            out.extend(_table(lines[i], lines[i + 2 : end]) or lines[i:end])
            i = end
            continue
        previous = out[-1] if out and i - 1 not in fenced else ""
        if previous.strip() and _SETEXT.fullmatch(line) and not _PARAGRAPH.match(previous):
            out[-1] = ("# " if "=" in line else "## ") + previous.strip()  # a setext heading, as an ATX one
        else:
            out.append(_line(line))
        i += 1
    return "\n".join(out)


def _fenced_lines(text: str, count: int) -> set[int]:
    """Indices of the lines that are fence markers or inside a fence."""
    markers = scan_fences(text).markers
    inside: set[int] = set()
    for k in range(0, len(markers), 2):
        start = markers[k]
        stop = markers[k + 1] if k + 1 < len(markers) else count - 1
        inside.update(range(start, stop + 1))
    return inside


def _line(line: str) -> str:
    heading = _HEADING.fullmatch(line)
    if heading is not None:
        title = (heading.group(1) or "").strip()
        return f"**{title}**" if title else ""
    if _BREAK.fullmatch(line) is not None:  # (after paragraph text a "---" was read as a setext heading)
        return RULE
    return line


def _is_delimiter(line: str) -> bool:
    return "-" in line and "|" in line and _DELIMITER.fullmatch(line) is not None


def _cells(row: str) -> list[str]:
    row = row.strip()
    row = row.removeprefix("|")
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    return [cell.strip().replace("\\|", "|") for cell in _CELL_SPLIT.split(row)]


def _table(header: str, rows: list[str]) -> list[str]:
    """A table as a fenced code block, its columns padded to one width."""
    table = [_cells(header), *(_cells(row) for row in rows)]
    if any("```" in cell for row in table for cell in row):  # it would close the block: left as typed
        return []
    width = max(len(row) for row in table)
    sizes = [max(len(row[c]) if c < len(row) else 0 for row in table) for c in range(width)]

    def joined(row: list[str]) -> str:
        return " | ".join((row[c] if c < len(row) else "").ljust(sizes[c]) for c in range(width)).rstrip()

    rule = "-+-".join("-" * size for size in sizes)
    return ["```", joined(table[0]), rule, *(joined(row) for row in table[1:]), "```"]


__all__ = ["REWRITTEN", "RULE", "discord_markdown"]
