"""Checks of chunker output: the ``properties`` of chunker cases (tests/cases/README.md) and the Markdown
facts they rest on (CommonMark fence lines, including fences in list items and block quotes).

Used by the case runner and the tests; the chunker itself never calls them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from streamrelay.core.chunking import ChunkParams, chunk_text
from streamrelay.core.chunking.graphemes import ZWJ, is_extend, is_regional
from streamrelay.core.text.fences import scan_fences
from streamrelay.core.units import text_units


def _fence_lines(text: str) -> tuple[list[int], list[bool], bool]:
    """Fence marker lines of ``text``: (marker line indices, per fence whether it has content, left open)."""
    scan = scan_fences(text)
    return scan.markers, scan.has_content, scan.open_line is not None


_QUOTE_MARKERS = re.compile(r"[ \t]*(?:>[ \t]?)+")


def content_key(text: str, quotes: bool = True) -> str:
    """``text`` without its fence marker lines and without any whitespace (what a cut may not change).

    Args:
        text: one chunk, or the whole input.
        quotes: also drop block quote markers at line starts (a quoted line that is cut mid-line, in a
            fence or not, continues after a reopened ``> `` prefix); False keeps them.
    """
    markers = set(_fence_lines(text)[0])
    kept = [line for idx, line in enumerate(text.split("\n")) if idx not in markers]
    if quotes:
        kept = [_QUOTE_MARKERS.sub("", line, count=1) if line.lstrip().startswith(">") else line for line in kept]
    return "".join("".join(kept).split())


def fences_balanced(text: str) -> bool:
    """True when every fence opened in ``text`` is closed in it."""
    return not _fence_lines(text)[2]


def _grapheme_failures(chunks: Sequence[str]) -> list[str]:
    failures: list[str] = []
    bodies = []
    for chunk in chunks:
        lines = chunk.split("\n")
        markers = _fence_lines(chunk)[0]
        lo = 1 if markers and markers[0] == 0 and len(lines) > 1 else 0
        hi = len(lines) - 1 if markers and markers[-1] == len(lines) - 1 and len(lines) > 1 else len(lines)
        bodies.append("\n".join(lines[lo:hi]))
    for i, body in enumerate(bodies):
        if body and (is_extend(body[0]) and i > 0):
            failures.append(f"chunk {i} starts inside a grapheme cluster: {body[:8]!r}")
        if body and body[-1] == ZWJ:
            failures.append(f"chunk {i} ends with a zero width joiner")
        if i and body and bodies[i - 1] and is_regional(body[0]):
            tail = bodies[i - 1]
            n = len(tail) - len(tail.rstrip("".join(chr(c) for c in range(0x1F1E6, 0x1F200))))
            if n % 2:
                failures.append(f"chunk {i} splits a flag")
    return failures


def chunk_property_failures(
    chunks: Sequence[str], props: Mapping[str, object], params: ChunkParams, appends: Sequence[str]
) -> list[str]:
    """Check the chunker ``properties`` of a unit case (shared/cases/README.md).

    Args:
        chunks: the chunks emitted for ``appends`` (every append, then a forced drain).
        props: property name to expected value: ``max_units`` (int, in ``params.unit``),
            ``each_starts_with`` / ``each_ends_with`` (str), ``count_of`` ({substring: n} over all
            chunks), and the flags ``fences_balanced``, ``no_empty_fence``, ``joined_equals_input``,
            ``no_split_grapheme``, ``chunks_equal_single_append`` (checked when true).
        params: the chunker parameters.
        appends: the appended texts, in order.

    Returns:
        One message per failure (an unknown property is a failure); empty when every property holds.
    """
    failures: list[str] = []
    for name, want in props.items():
        check = _PROPERTY_CHECKS.get(name)
        if check is None:
            failures.append(f"unknown chunker property {name!r}")
        elif want is not False:
            failures.extend(check(want, list(chunks), params, appends))
    return failures


_Check = Callable[[object, list[str], ChunkParams, Sequence[str]], list[str]]


def _check_max_units(want: object, chunks: list[str], params: ChunkParams, appends: Sequence[str]) -> list[str]:
    limit = want if isinstance(want, int) else params.max_chars
    return [
        f"chunk {i} has {text_units(c, params.unit)} {params.unit} units > {limit}"
        for i, c in enumerate(chunks)
        if text_units(c, params.unit) > limit
    ]


def _check_starts(want: object, chunks: list[str], params: ChunkParams, appends: Sequence[str]) -> list[str]:
    return [
        f"chunk {i} does not start with {want!r}: {c[:40]!r}"
        for i, c in enumerate(chunks)
        if not c.startswith(str(want))
    ]


def _check_ends(want: object, chunks: list[str], params: ChunkParams, appends: Sequence[str]) -> list[str]:
    return [
        f"chunk {i} does not end with {want!r}: {c[-40:]!r}" for i, c in enumerate(chunks) if not c.endswith(str(want))
    ]


def _check_count_of(want: object, chunks: list[str], params: ChunkParams, appends: Sequence[str]) -> list[str]:
    failures = []
    for sub, n in want.items() if isinstance(want, Mapping) else ():
        got = sum(c.count(str(sub)) for c in chunks)
        if got != n:
            failures.append(f"{sub!r} occurs {got} times in the chunks, expected {n}")
    return failures


def _check_balanced(want: object, chunks: list[str], params: ChunkParams, appends: Sequence[str]) -> list[str]:
    return [f"chunk {i} leaves a fence open: {c[-60:]!r}" for i, c in enumerate(chunks) if not fences_balanced(c)]


def _check_no_empty_fence(want: object, chunks: list[str], params: ChunkParams, appends: Sequence[str]) -> list[str]:
    return [f"chunk {i} holds an empty fence: {c[:60]!r}" for i, c in enumerate(chunks) if not all(_fence_lines(c)[1])]


_TABLE_DELIMITER = re.compile(r" {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*")


def _is_row(line: str) -> bool:
    return line[:4].lstrip(" ").startswith("|")


def without_repeated_table_heads(chunks: list[str]) -> list[str]:
    """``chunks`` with the table header and delimiter rows a chunk begins with removed where they repeat those of
    the table the chunk before ended in (the chunker repeats them after a cut between rows, as it reopens a cut
    fence: :mod:`core.chunking.cutter`)."""
    out: list[str] = []
    head: str | None = None  # the head of the table the previous chunk ended in
    for chunk in chunks:
        lines = chunk.split("\n")
        if head is not None and len(lines) > 2 and "\n".join(lines[:2]) == head:
            chunk = "\n".join(lines[2:])
        out.append(chunk)
        tables = [i for i in range(len(lines) - 1) if _is_row(lines[i]) and _TABLE_DELIMITER.fullmatch(lines[i + 1])]
        ends_in_table = bool(tables) and all(_is_row(line) for line in lines[tables[-1] :])
        head = "\n".join(lines[tables[-1] : tables[-1] + 2]) if ends_in_table else None
    return out


def _check_joined(want: object, chunks: list[str], params: ChunkParams, appends: Sequence[str]) -> list[str]:
    shown = without_repeated_table_heads(chunks)
    if "".join(content_key(c) for c in shown) == content_key("".join(appends)):
        return []
    return ["the chunks joined (fence marker lines and whitespace ignored) differ from the input"]


def _check_graphemes(want: object, chunks: list[str], params: ChunkParams, appends: Sequence[str]) -> list[str]:
    return _grapheme_failures(chunks)


def _check_single(want: object, chunks: list[str], params: ChunkParams, appends: Sequence[str]) -> list[str]:
    single = chunk_text("".join(appends), params)
    return [] if single == chunks else [f"one append gives {single!r}, not {chunks!r}"]


_PROPERTY_CHECKS: dict[str, _Check] = {
    "max_units": _check_max_units,
    "each_starts_with": _check_starts,
    "each_ends_with": _check_ends,
    "count_of": _check_count_of,
    "fences_balanced": _check_balanced,
    "no_empty_fence": _check_no_empty_fence,
    "joined_equals_input": _check_joined,
    "no_split_grapheme": _check_graphemes,
    "chunks_equal_single_append": _check_single,
}
