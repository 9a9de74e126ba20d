"""Chunker against a CommonMark oracle: every chunk rendered alone gives, in order, the code and the text of
the whole (issue 13, item 2).

The oracle is markdown-it-py in CommonMark mode with raw HTML off. The whole text and each chunk are parsed on
their own; from each token stream come, in order,

- the *code*: the content of every ``fence`` and ``code_block`` token, with the block quote depth it sits at;
- the *words*: the text of every ``inline`` token (its ``text`` and ``code_inline`` children, soft and hard
  breaks as spaces) split on whitespace, each with its block quote depth.

The chunks agree with the whole when, over the chunks in order:

- **words**: the chunks' words are the whole's words, each at the same quote depth. A cut drops the break's
  whitespace, which is a word boundary anyway; only a code point cut (the last resort, when no break fits)
  may split a word, and then only as the last word of one chunk and the first of the next.
- **code**: the chunks' code blocks are the whole's, except that a fence cut in two (or more) shows as
  consecutive blocks, the last of one chunk and the first of the next, at the fence's quote depth, whose
  contents make the original: ``piece₁`` without its closing newline, then the whitespace the cut dropped, then
  ``piece₂`` … The dropped whitespace is either spaces and tabs only (a cut inside a line) or ends with a
  newline (a cut at a line or paragraph break: the indentation of the next line is kept, so it is in the
  next piece). A reopened fence at the wrong indentation, a continuation that turned into an indented code
  block, or a closer read as an opener all change the code or the words, and fail.

Fence info strings are not compared: a reopened fence may be bare (tests/cases/chunk-long-info-string.json).
List nesting is not compared: a chunk that starts inside a list item holds the item's rest dedented, no longer
in a list; block quote depth is compared: a chunk that starts inside a quote keeps its ``>`` markers.

The generator writes nested containers (bullet and ordered items, ``1.  foo`` with four-space continuations,
nested ``>`` quotes, an item holding a quote holding an item), fences (backticks or tildes, 3 to 5, with info
strings, at their container's indentation or up to 3 spaces in, inside items and quotes), paragraphs, and fence
openers longer than ``max_chars``.
Nesting is kept to what a chunk can hold: the deepest reopened fence (opener, one content line, closer, with
their container prefixes) fits in ``max_chars``; below that the chunker's documented fallbacks apply, which
tests/unit/test_chunker.py covers.

The chunker comes from ``core.chunking`` when that package exports ``Chunker``, else from ``core.chunking``.
Every property passes and shrinks; one issue case below is a strict ``xfail`` with its reason (a documented
fallback that does not render the same).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from streamrelay.core.units import LengthUnit, text_units


def _chunker() -> ModuleType:
    """``core.chunking`` (issue 13's package) once it exports ``Chunker``, else ``core.chunking``."""
    try:
        package: ModuleType | None = importlib.import_module("streamrelay.core.chunking")
    except ImportError:
        package = None
    if package is not None and hasattr(package, "Chunker"):
        return package
    return importlib.import_module("streamrelay.core.chunking")


CHUNKER = _chunker()
if TYPE_CHECKING:  # the public API, the same in both
    from streamrelay.core.chunking import BreakKind, ChunkParams, chunk_text
else:
    BreakKind, ChunkParams, chunk_text = CHUNKER.BreakKind, CHUNKER.ChunkParams, CHUNKER.chunk_text


SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
"""Reproducible (derandomized, no example database), as tests/fuzz/conftest.py has it."""


# --- the oracle ---------------------------------------------------------------------------------------------

MD = MarkdownIt("commonmark", {"html": False})


@dataclass
class Rendering:
    """What a text renders to: its code blocks and its words, in order, each with its block quote depth."""

    code: list[tuple[int, str]] = field(default_factory=list)
    words: list[tuple[int, str]] = field(default_factory=list)


def _inline_text(token: Token) -> str:
    parts = []
    for child in token.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return " ".join(parts)


def render(text: str) -> Rendering:
    """Parse ``text`` as CommonMark (raw HTML off) and collect its code blocks and words."""
    out = Rendering()
    depth = 0
    for token in MD.parse(text):
        if token.type == "blockquote_open":
            depth += 1
        elif token.type == "blockquote_close":
            depth -= 1
        elif token.type in ("fence", "code_block"):
            out.code.append((depth, token.content))
        elif token.type == "inline":
            out.words.extend((depth, word) for word in _inline_text(token).split())
    return out


_DROPPED = r"(?:[^\S\n]*|\s*\n)"
"""Whitespace a cut inside a fence may drop: within a line, or up to the newline before the kept indentation."""


def _pieces_make(pieces: Sequence[str], original: str) -> bool:
    """True when the contents of a fence's pieces, one per chunk, make the original content."""
    bodies = [p.removesuffix("\n") for p in pieces[:-1]] + [pieces[-1]]
    pattern = _DROPPED.join(re.escape(b) for b in bodies)
    return re.fullmatch(pattern, original) is not None


def code_failure(whole: list[tuple[int, str]], chunks: Sequence[list[tuple[int, str]]]) -> str | None:
    """Why the chunks' code blocks are not the whole's (None when they are); see the module docstring."""
    blocks = [(i, j, depth, content) for i, code in enumerate(chunks) for j, (depth, content) in enumerate(code)]

    def match(w: int, b: int) -> bool:
        if w == len(whole):
            return b == len(blocks)
        depth, original = whole[w]
        end = b
        while end < len(blocks) and blocks[end][2] == depth:
            if end > b:  # the next piece must open the chunk right after the one the previous piece ended
                prev, cur = blocks[end - 1], blocks[end]
                if cur[0] != prev[0] + 1 or cur[1] != 0 or prev[1] != len(chunks[prev[0]]) - 1:
                    break
            end += 1
            if _pieces_make([blk[3] for blk in blocks[b:end]], original) and match(w + 1, end):
                return True
        return False

    if match(0, 0):
        return None
    return f"code differs:\n  whole:  {whole}\n  chunks: {[c for c in chunks if c]}"


def words_failure(whole: list[tuple[int, str]], chunks: Sequence[list[tuple[int, str]]]) -> str | None:
    """Why the chunks' words are not the whole's (None when they are); see the module docstring."""
    i, partial = 0, ""
    for words in chunks:
        for j, (depth, word) in enumerate(words):
            if partial and j > 0:
                return f"word {whole[i]} split across chunks around other words"
            if i >= len(whole):
                return f"extra word {word!r} (depth {depth})"
            want_depth, want = whole[i]
            have = partial + word
            if depth != want_depth:
                return f"word {word!r} at quote depth {depth}, the whole has {want!r} at {want_depth}"
            if have == want:
                i, partial = i + 1, ""
            elif want.startswith(have) and j == len(words) - 1:
                partial = have  # a code point cut inside the word: the next chunk continues it
            else:
                return f"word {word!r} where the whole has {want!r} (word {i})"
    if partial or i != len(whole):
        return f"missing words from {whole[i : i + 5]}"
    return None


def oracle_failures(text: str, chunks: Sequence[str], quote_depth: bool = True) -> list[str]:
    """Differences between ``text`` and its ``chunks`` rendered alone (empty when they agree).

    Args:
        text: the whole input.
        chunks: the chunks cut from it, in order.
        quote_depth: compare each word's and code block's block quote depth too (else content only).
    """
    whole = render(text)
    parts = [render(chunk) for chunk in chunks]
    if not quote_depth:
        whole = Rendering([(0, c) for _, c in whole.code], [(0, w) for _, w in whole.words])
        parts = [Rendering([(0, c) for _, c in p.code], [(0, w) for _, w in p.words]) for p in parts]
    failures = [
        code_failure(whole.code, [p.code for p in parts]),
        words_failure(whole.words, [p.words for p in parts]),
    ]
    return [f for f in failures if f]


def assert_renders_the_same(text: str, params: ChunkParams, quote_depth: bool = True) -> list[str]:
    """Cut ``text`` with ``params``, check every chunk fits and the oracle agrees; return the chunks."""
    chunks: list[str] = chunk_text(text, params)
    assert all(text_units(c, params.unit) <= params.max_chars for c in chunks), chunks
    failures = oracle_failures(text, chunks, quote_depth)
    assert not failures, "\n".join([*failures, "chunks:", *(f"  {c!r}" for c in chunks)])
    return chunks


# --- the generator ------------------------------------------------------------------------------------------

WORD_MAX = 8
plain_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=WORD_MAX)
word = st.one_of(
    plain_word,
    plain_word,
    plain_word.map(lambda w: w + "."),
    plain_word.map(lambda w: w + ","),
    plain_word.map(lambda w: w + "?"),
    st.sampled_from(["été", "über", "中文", "😀", "naïve"]),
)


@st.composite
def text_line(draw: st.DrawFn, max_words: int = 7) -> str:
    """Words, the first a plain word (a line never starts a list, a quote, a fence or a heading)."""
    return " ".join([draw(plain_word), *draw(st.lists(word, max_size=max_words - 1))])


@st.composite
def paragraph(draw: st.DrawFn) -> list[str]:
    return draw(st.lists(text_line(), min_size=1, max_size=3))


@dataclass(frozen=True)
class Room:
    """What the generator may still nest, given ``max_chars`` and the container prefix width so far."""

    max_chars: int
    width: int = 0
    depth: int = 0
    kinds: str = "plq"
    long_openers: bool = False

    def fence_fits(self, run: int, pad: int) -> bool:
        """A reopened fence (opener, one content line, closer, with prefixes and newlines) fits."""
        indent = self.width + pad
        return 2 * (indent + run + 1) + indent + 4 + WORD_MAX + 2 <= self.max_chars

    def inside(self, width: int) -> Room:
        return Room(self.max_chars, self.width + width, self.depth + 1, self.kinds, self.long_openers)


@st.composite
def fence(draw: st.DrawFn, room: Room) -> list[str]:
    """A fence at the container's indentation (or up to 3 spaces in), its content indented 0, 2 or 4 more."""
    char = draw(st.sampled_from("`~"))
    run = char * draw(st.integers(3, 5))
    pad = " " * draw(st.sampled_from([0, 0, 0, 1, 3]))
    if not room.fence_fits(len(run), len(pad)):
        run, pad = run[:3], ""
    if room.long_openers and draw(st.booleans()):
        size = room.max_chars + draw(st.integers(1, 20))
        info = draw(st.sampled_from(["", " "])) + ("x" * size if draw(st.booleans()) else f"py title={'y' * size}")
    else:
        info = draw(st.sampled_from(["", "", "py", " json", "sh"]))
    body = []
    for _ in range(draw(st.integers(0, 5))):
        extra = " " * draw(st.sampled_from([0, 0, 2, 4])) if room.fence_fits(len(run), len(pad) + 4) else ""
        body.append(pad + extra + draw(text_line(max_words=4)))
    if body and draw(st.integers(0, 3)) == 0:
        body.insert(draw(st.integers(1, len(body))), "")
    return [pad + run + info, *body, pad + run]


@st.composite
def list_block(draw: st.DrawFn, room: Room) -> list[str]:
    """A bullet or ordered list of 1 to 3 items, each with 1 to 3 blocks (the first on the marker line)."""
    kind = draw(st.sampled_from(["-", "*", "1.", "1. "]))
    lines: list[str] = []
    for n in range(draw(st.integers(1, 3))):
        marker = kind if kind in "-*" else f"{n + 1}.{kind[2:]}"
        width = len(marker) + 1
        inner = room.inside(width)
        blocks = [draw(paragraph()), *draw(st.lists(block(inner), max_size=2))]
        item = blank_joined(blocks)
        lines += [marker + " " + item[0], *(" " * width + ln if ln else "" for ln in item[1:])]
        lines.append("")
    return lines[:-1]


@st.composite
def quote_block(draw: st.DrawFn, room: Room) -> list[str]:
    """A block quote of 1 to 3 blocks; every line has its ``>`` (no lazy continuations)."""
    blocks = draw(st.lists(block(room.inside(2)), min_size=1, max_size=3))
    return ["> " + ln if ln else ">" for ln in blank_joined(blocks)]


@st.composite
def deep_fence(draw: st.DrawFn, room: Room) -> list[str]:
    """An item holding a nested item whose fence sits at 4 to 8 spaces (``1.  foo`` then ``- bar``: 6),
    then maybe a paragraph at the fence's indentation."""
    outer, inner = draw(st.sampled_from(["-", "1.", "1. "])), draw(st.sampled_from(["-", "1.", "1. "]))
    outer_width, inner_width = len(outer) + 1, len(inner) + 1
    lines = draw(fence(room.inside(outer_width).inside(inner_width)))
    if draw(st.booleans()):
        lines += ["", *draw(paragraph())]
    lines = [f"{inner} {draw(text_line())}", "", *(" " * inner_width + ln if ln else "" for ln in lines)]
    return [f"{outer} {draw(text_line())}", "", *(" " * outer_width + ln if ln else "" for ln in lines)]


@st.composite
def item_quote_item(draw: st.DrawFn, room: Room) -> list[str]:
    """An item holding a block quote that holds an item with more blocks after its marker line (a
    paragraph or a fence), so a cut leaves the inner item's rest, indented on both sides of the ``>``, in
    the next chunk."""
    outer, inner = draw(st.sampled_from(["-", "1.", "1. "])), draw(st.sampled_from(["-", "1.", "1. "]))
    outer_width, inner_width = len(outer) + 1, len(inner) + 1
    deep = room.inside(outer_width).inside(2).inside(inner_width)
    rest = draw(st.lists(st.one_of(paragraph(), fence(deep)), min_size=1, max_size=2))
    item = blank_joined([draw(paragraph()), *rest])
    quoted = [f"{inner} {item[0]}", *(" " * inner_width + ln if ln else "" for ln in item[1:])]
    quoted = ["> " + ln if ln else ">" for ln in quoted]
    return [f"{outer} {draw(text_line())}", "", *(" " * outer_width + ln for ln in quoted)]


def blank_joined(blocks: list[list[str]]) -> list[str]:
    out: list[str] = []
    for b in blocks:
        out += [*([""] if out else []), *b]
    return out


def block(room: Room) -> st.SearchStrategy[list[str]]:
    """One block: a paragraph, a fence, or (while a fence can still fit deeper) a list or a quote, as the
    room's ``kinds`` allow (l: lists, q: quotes)."""
    leaves = [paragraph(), paragraph(), fence(room)]
    deeper = room.inside(4)
    if room.depth >= 3 or not deeper.fence_fits(3, 0):
        return st.one_of(leaves)
    nested = [list_block(room)] * ("l" in room.kinds) + [quote_block(room)] * ("q" in room.kinds)
    if "l" in room.kinds and room.inside(8).fence_fits(3, 0):
        nested.append(deep_fence(room))
    if "l" in room.kinds and "q" in room.kinds and room.inside(10).fence_fits(3, 0):
        nested.append(item_quote_item(room))
    return st.one_of([*leaves, *nested])


def _params(draw: st.DrawFn, max_chars: int) -> ChunkParams:
    return ChunkParams(
        min_chars=draw(st.sampled_from([0, 0, max_chars // 2, max_chars])),
        max_chars=max_chars,
        break_preference=draw(st.sampled_from(BreakKind)),
        unit=draw(st.sampled_from(LengthUnit)),
    )


@dataclass(frozen=True)
class Example:
    """A generated document and the parameters to cut it with."""

    text: str
    params: ChunkParams

    def __repr__(self) -> str:
        p = self.params
        return f"Example({self.text!r}, ChunkParams({p.min_chars}, {p.max_chars}, {p.break_preference}, {p.unit}))"


@st.composite
def example(draw: st.DrawFn, kinds: str = "plq", long_openers: bool = False) -> Example:
    """A document of 1 to 5 blocks (``kinds``: paragraphs and fences always; l: lists, q: quotes)."""
    max_chars = draw(st.integers(20, 200))
    room = Room(max_chars, kinds=kinds, long_openers=long_openers)
    blocks = draw(st.lists(block(room), min_size=1, max_size=5))
    return Example("\n".join(blank_joined(blocks)), _params(draw, max_chars))


@st.composite
def nesting_example(draw: st.DrawFn) -> Example:
    """A document of 1 to 3 blocks, at least one an item holding a quote holding an item."""
    max_chars = draw(st.integers(52, 160))
    room = Room(max_chars)
    blocks = draw(st.lists(st.one_of(item_quote_item(room), block(room)), min_size=1, max_size=2))
    blocks.insert(draw(st.integers(0, len(blocks))), draw(item_quote_item(room)))
    return Example("\n".join(blank_joined(blocks)), _params(draw, max_chars))


# --- properties ---------------------------------------------------------------------------------------------


@SETTINGS
@given(example(kinds="pq"))
def test_paragraphs_fences_and_quotes_keep_their_code_and_words(ex: Example) -> None:
    """Top-level fences and fences in nested quotes: the content survives every cut (quote depth aside)."""
    assert_renders_the_same(ex.text, ex.params, quote_depth=False)


@SETTINGS
@given(example(kinds="pq"))
def test_a_chunk_that_starts_inside_a_quote_stays_in_the_quote(ex: Example) -> None:
    """As above, and every word and code block keeps its block quote depth (``>`` markers given back)."""
    assert_renders_the_same(ex.text, ex.params)


@SETTINGS
@given(example(kinds="pl"))
def test_list_items_render_alone_as_in_the_whole(ex: Example) -> None:
    """Nested bullet and ordered items with fences and paragraphs: a chunk that starts inside an item holds
    its rest dedented, never as an indented code block, and a reopened fence at the item's indentation."""
    assert_renders_the_same(ex.text, ex.params)


@SETTINGS
@given(example(kinds="plq"))
def test_nested_lists_quotes_and_fences_render_alone_as_in_the_whole(ex: Example) -> None:
    """Everything together: lists in quotes, quotes in lists, fences in both."""
    assert_renders_the_same(ex.text, ex.params)


@settings(SETTINGS, max_examples=100)
@given(nesting_example())
def test_a_list_in_a_quote_in_a_list_item_renders_alone_as_in_the_whole(ex: Example) -> None:
    """The inner item's rest, indented before the ``>`` by the outer item and after it by the inner one,
    is dedented at both depths in the chunks after its marker."""
    assert_renders_the_same(ex.text, ex.params)


@SETTINGS
@given(example(kinds="p", long_openers=True))
def test_an_opener_longer_than_max_chars_never_turns_the_rest_into_code(ex: Example) -> None:
    """Fence openers whose info string alone is longer than ``max_chars``: never cut inside, so the closer
    still closes and the paragraphs after it stay text."""
    assert_renders_the_same(ex.text, ex.params)


# --- the oracle itself ----------------------------------------------------------------------------------------


def test_the_oracle_accepts_a_fence_cut_in_two_and_refuses_a_lost_indentation() -> None:
    text = "```py\nfirst line\n\n    indented\n```"
    good = ["```py\nfirst line\n```", "```py\n    indented\n```"]
    assert oracle_failures(text, good) == []
    lost = ["```py\nfirst line\n```", "```py\nindented\n```"]
    assert oracle_failures(text, lost) != []
    mid_line = ["```\nfirst\n```", "```\nline\n\n    indented\n```"]
    assert oracle_failures(text, mid_line) == []


def test_the_oracle_refuses_code_that_was_text_and_a_lost_quote() -> None:
    text = "1.  foo\n\n    para\n\n> quoted words here"
    assert oracle_failures(text, ["1.  foo", "para", "> quoted words here"]) == []
    assert oracle_failures(text, ["1.  foo", "    para", "> quoted words here"]) != []
    assert oracle_failures(text, ["1.  foo\n\n    para\n\n> quoted", "> words here"]) == []
    assert oracle_failures(text, ["1.  foo\n\n    para\n\n> quoted", "words here"]) != []
    assert oracle_failures(text, ["1.  foo\n\n    para\n\n> quoted", "words here"], quote_depth=False) == []


def test_the_oracle_accepts_a_word_cut_only_at_a_chunk_boundary() -> None:
    assert oracle_failures("abcdef ghi", ["abc", "def ghi"]) == []
    assert oracle_failures("abcdef ghi", ["abc def ghi"]) != []


# --- the issue's cases ----------------------------------------------------------------------------------------

LIST_CONTINUATION = "1.  foo\n\n    ```\n    code\n    ```\n\n    para after the fence\n\n2.  bar"
NESTED_SIX = (
    "1.  outer item\n\n    - inner item\n\n      ```py\n      line one\n      line two\n      line three\n      ```"
    "\n\n      after the fence"
)
QUOTE = "> a quoted line of words that is cut somewhere in the middle\n> and a second line\n>\n> quoted paragraph"
LONG_OPENER = "```" + "x" * 40 + "\ncode line\n```\n\nparagraph one\n\nparagraph two"

FENCE_TOO_WIDE_BEFORE_DEDENT = (
    "a fence's room is measured before its item's dedent: at max_chars=12 the bare opener, one code point and "
    "the closer at 4 spaces take 21, so the fence is cut like text (the documented fallback) into '```', "
    "'code', '```', which render as two empty fences and a paragraph"
)

IDEAL = [
    (LIST_CONTINUATION, ["1.  foo", "```\ncode\n```", "para after the fence", "2.  bar"]),
    (NESTED_SIX, ["1.  outer item", "- inner item", "```py\nline one\nline two\n```", "```py\nline three\n```"]),
    (QUOTE, ["> a quoted line of words that", "> is cut somewhere in the", "> middle\n> and a second line"]),
    (LONG_OPENER, ["```\ncode line\n```", "paragraph one", "paragraph two"]),
]
"""The issue's cases cut as it asks (containers dedented, ``>`` kept, a bare reopened fence)."""


@pytest.mark.parametrize(("text", "chunks"), IDEAL, ids=["list", "nested", "quote", "opener"])
def test_the_oracle_accepts_what_the_issue_asks_for(text: str, chunks: list[str]) -> None:
    tail = {NESTED_SIX: ["after the fence"], QUOTE: ["> quoted paragraph"]}.get(text, [])
    assert oracle_failures(text, chunks + tail) == []


def no_indented_code(chunks: list[str]) -> bool:
    return all(t.type != "code_block" for chunk in chunks for t in MD.parse(chunk))


@pytest.mark.parametrize(
    "max_chars",
    [
        pytest.param(12, marks=pytest.mark.xfail(strict=True, reason=FENCE_TOO_WIDE_BEFORE_DEDENT)),
        20,
        30,
    ],
)
def test_a_list_items_fence_and_paragraph_moved_to_the_next_chunk_stay_a_fence_and_a_paragraph(
    max_chars: int,
) -> None:
    chunks = assert_renders_the_same(LIST_CONTINUATION, ChunkParams(0, max_chars))
    assert len(chunks) > 1 and no_indented_code(chunks)


@pytest.mark.parametrize("max_chars", [40, 60])
def test_a_fence_at_six_spaces_in_a_nested_list_cut_inside_is_reopened_as_a_fence(max_chars: int) -> None:
    chunks = assert_renders_the_same(NESTED_SIX, ChunkParams(0, max_chars))
    fences = [t for chunk in chunks for t in MD.parse(chunk) if t.type == "fence"]
    assert len(fences) >= 2 and no_indented_code(chunks)


def test_a_block_quote_cut_mid_way_keeps_its_markers_in_the_next_chunk() -> None:
    chunks = assert_renders_the_same(QUOTE, ChunkParams(0, 30))
    assert len(chunks) > 2 and all(chunk.startswith(">") for chunk in chunks)


def test_a_block_quote_cut_at_its_lines_keeps_its_markers() -> None:
    chunks = assert_renders_the_same("> a quoted line of words\n> and a second line\n>\n> quoted", ChunkParams(0, 30))
    assert len(chunks) > 1 and all(chunk.startswith(">") for chunk in chunks)


@pytest.mark.parametrize("max_chars", [20, 30])
def test_a_fence_opener_longer_than_max_chars_leaves_the_paragraphs_as_text(max_chars: int) -> None:
    chunks = assert_renders_the_same(LONG_OPENER, ChunkParams(0, max_chars))
    code = [t.content for chunk in chunks for t in MD.parse(chunk) if t.type in ("fence", "code_block")]
    assert "".join(code).split() == ["code", "line"]


def test_a_fence_in_a_list_item_cut_inside_is_reopened_at_the_items_indentation() -> None:
    chunks = assert_renders_the_same("- item\n\n  ```\n  a\n  b\n  ```", ChunkParams(0, 16))
    assert len(chunks) == 3
