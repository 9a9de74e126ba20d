"""streamrelay.core.chunking: containers across a cut, long fence openers, the shared fence reader, and delta
invariance over a raw Markdown alphabet (issue 13, items 1 and 2).

tests/unit/test_chunker_commonmark.py checks the rendering with a CommonMark oracle over generated
documents; these are the exact chunks of the issue's cases and the fuzzing that found the chunker's
moment-of-cut bugs (text split anywhere, tiny max_chars, prefixes and markers everywhere).
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamrelay.core.chunking import BreakKind, Chunker, ChunkParams, chunk_text
from streamrelay.core.text.fences import scan_fences
from streamrelay.core.units import LengthUnit, text_units
from tests.unit.test_chunker_commonmark import LIST_CONTINUATION, LONG_OPENER, NESTED_SIX, QUOTE

ITEM_QUOTE_ITEM = (
    "1.  outer\n\n    > 1.  inner words\n    >\n    >     more words of the inner item that go on\n    >\n"
    "    >     ```py\n    >     x = 1\n    >     y = 2\n    >     ```\n\n    after the quote"
)


def test_a_list_items_rest_is_dedented_in_the_next_chunk() -> None:
    assert chunk_text(LIST_CONTINUATION, ChunkParams(0, 30)) == [
        "1.  foo",
        "```\ncode\n```",
        "para after the fence",
        "2.  bar",
    ]


def test_a_fence_at_six_spaces_in_a_nested_item_is_reopened_as_a_fence() -> None:
    assert chunk_text(NESTED_SIX, ChunkParams(0, 60)) == [
        "1.  outer item",
        "- inner item",
        "```py\nline one\nline two\n```",
        "```py\nline three\n```",
        "after the fence",
    ]


def test_a_fence_at_three_spaces_in_an_item_is_kept_as_it_renders_the_same() -> None:
    text = "1. Run:\n\n   ```sh\n   make alpha\n   make beta\n   ```"
    assert chunk_text(text, ChunkParams(1, 36))[1:] == [
        "   ```sh\n   make alpha\n   ```",
        "   ```sh\n   make beta\n   ```",
    ]


def test_a_list_in_a_quote_in_a_list_item_is_dedented_at_both_depths() -> None:
    """The outer item's indentation goes before the ``>``, the inner item's after it: the inner item's
    paragraph and fence stay a paragraph and a fence (not indented code) in the chunks after its marker."""
    assert chunk_text(ITEM_QUOTE_ITEM, ChunkParams(0, 60)) == [
        "1.  outer",
        "> 1.  inner words",
        "> more words of the inner item that go on",
        "> ```py\n> x = 1\n> ```",
        "> ```py\n> y = 2\n> ```",
        "after the quote",
    ]


def test_a_quote_line_less_indented_than_an_item_ends_the_item() -> None:
    text = "- a\n\n  - b\n\n    para\n\n> - c\n>\n>   - d\n>\n>     ```\n>     x\n>     ```"
    assert chunk_text(text, ChunkParams(0, 52))[-3:] == ["> - c", "> - d", "> ```\n> x\n> ```"]


def test_a_quoted_line_cut_mid_way_gets_its_markers_back() -> None:
    assert chunk_text(QUOTE, ChunkParams(0, 30)) == [
        "> a quoted line of words that",
        "> is cut somewhere in the",
        "> middle\n> and a second line",
        "> quoted paragraph",
    ]


def test_an_opener_longer_than_max_goes_on_bare_and_its_closer_still_closes() -> None:
    for max_chars in (20, 30):
        assert chunk_text(LONG_OPENER, ChunkParams(0, max_chars)) == [
            "```\ncode line\n```",
            "paragraph one",
            "paragraph two",
        ]


def test_an_opener_with_a_backtick_in_its_long_info_string_is_text() -> None:
    text = "```" + "x" * 30 + "` and more words here\n\nafter"
    chunks = chunk_text(text, ChunkParams(0, 20))
    assert all(len(c) <= 20 for c in chunks) and chunks[-1] == "after"


def test_scan_fences_reads_fences_as_commonmark_and_as_the_chunker() -> None:
    assert scan_fences("para\n\n        ```\n        x").markers == []  # an indented code block
    assert scan_fences("- a\n\n  ```\n  x\n  ```").markers == [2, 4]  # in a list item
    assert scan_fences("- a\n\n      ```\n      x").markers == []  # 4 past the item's content: code
    quoted = scan_fences("> ```\n> x\n\nout ```")
    assert quoted.markers == [0] and quoted.open_line is None  # the quote's end ends the fence
    assert scan_fences("```a`b\n```").markers == [1]  # a backtick in the info string: no opener
    assert scan_fences("~~~~\n~~~\n~~~~").markers == [0, 2]


def test_a_cut_inside_list_markers_not_decided_yet_keeps_its_space_whatever_the_split() -> None:
    """A last-resort cut beside whitespace inside ``- -`` (nested markers or a thematic break: not decided
    until ``a`` arrives) starts a chunk in the line's prefix: no item is dedented there, whole or fed one
    character at a time (fed, the space before the third ``-`` was dropped as an item's indentation)."""
    for unit, kind, lo in itertools.product(LengthUnit, BreakKind, (1, 2)):
        params = ChunkParams(lo, 2, kind, unit)
        assert chunk_text("1. - - a", params) == ["1.", " -", " -", " a"]
        assert feed(params, list("1. - - a")) == ["1.", " -", " -", " a"]
        assert feed(params, list("1. - - - a")) == chunk_text("1. - - - a", params)
    # in a block quote: the markers given back are the same (``>`` then an item's marker: "> ", too long for 3)
    params = ChunkParams(1, 3)
    assert chunk_text(">- -1", params) == feed(params, list(">- -1")) == [">-", "-1"]
    params = ChunkParams(1, 2)  # fed, the cut after ">-" gave ">" back before " -" (a chunk ">" alone)
    assert chunk_text(">- -11", params) == feed(params, list(">- -11")) == [">-", " -", "11"]


# --- delta invariance over a raw alphabet -----------------------------------------------------------------

PIECES = [*"ab `~>-*1.)[]()\\\n\t。é😀\u0301", "\n\n", "  ", "```", "~~~", "- ", "> ", "1. ", "    ", "[a](b)", "`c`"]
raw_text = st.lists(st.sampled_from(PIECES), max_size=60).map("".join)


@st.composite
def any_params(draw: st.DrawFn) -> ChunkParams:
    max_chars = draw(st.integers(2, 60))
    return ChunkParams(
        draw(st.integers(0, max_chars)), max_chars, draw(st.sampled_from(BreakKind)), draw(st.sampled_from(LengthUnit))
    )


def feed(params: ChunkParams, pieces: list[str]) -> list[str]:
    chunker = Chunker(params)
    out: list[str] = []
    for piece in pieces:
        out += chunker.append(piece)
    return out + chunker.drain(force=True)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw_text, any_params(), st.lists(st.integers(0, 100), max_size=8))
def test_any_split_gives_the_same_chunks_and_every_chunk_fits(text: str, params: ChunkParams, cuts: list[int]) -> None:
    whole = chunk_text(text, params)
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    assert feed(params, [text[a:b] for a, b in itertools.pairwise(points)]) == whole
    assert feed(params, list(text)) == whole
    assert all(text_units(c, params.unit) <= params.max_chars and c.strip() for c in whole)
