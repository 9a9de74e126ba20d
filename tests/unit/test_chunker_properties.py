"""Chunker properties over generated Markdown-ish text (hypothesis).

The generator writes what models write: words and punctuation, CJK, emoji (with ZWJ sequences and
combining marks), inline code, links, lists, block quotes, blank lines, and CommonMark fences (backtick
or tilde, indented up to 3 spaces, with info strings, inside list items and block quotes). Fence marker
lines are kept short enough for ``max_chars`` (``max_chars >= 40``): with less room than the markers and
one indented content line need, no cut can keep a fence balanced and non-empty; test_chunker.py covers
those fallbacks.
"""

from __future__ import annotations

import itertools
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from streamrelay.core.chunking import BreakKind, Chunker, ChunkParams, chunk_text
from streamrelay.core.text.chunk_checks import chunk_property_failures, content_key
from streamrelay.core.units import LengthUnit, text_units

SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéüß"
plain_word = st.text(alphabet=LETTERS, min_size=1, max_size=10)
word = st.one_of(
    plain_word,
    plain_word.map(lambda w: w + "."),
    plain_word.map(lambda w: w + "?\u201d"),
    plain_word.map(lambda w: w + ","),
    st.sampled_from(
        [
            "😀",
            "👨\u200d👩\u200d👧",
            "🇺🇸🇫🇷",
            "e\u0301",
            "❤\ufe0f",
            "中文字",
            "你好。",
            "多字\uff01",
            "3.14",
            "(see)",
            "x" * 25,
        ]
    ),
    plain_word.map(lambda w: f"`{w} {w}`"),
    plain_word.map(lambda w: f"``a ` {w}``"),
    plain_word.map(lambda w: f"[{w} link](https://example.com/{w})"),
    plain_word.map(lambda w: f"![{w}](i.png)"),
    plain_word.map(lambda w: f"[{w}]"),
    plain_word.map(lambda w: f"```{w}```"),  # inline runs of fence characters, never first on a line
    plain_word.map(lambda w: f"``` {w}"),
    plain_word.map(lambda w: f"~~~{w}"),
)


@st.composite
def line(draw: st.DrawFn) -> str:
    first = draw(plain_word)  # a letter first: no accidental list marker, quote or fence
    return " ".join([first, *draw(st.lists(word, max_size=12))])


paragraph = st.lists(line(), min_size=1, max_size=4).map("\n".join)


@st.composite
def fence(draw: st.DrawFn, indent: str = "") -> str:
    char = draw(st.sampled_from("`~"))
    run = char * draw(st.integers(3, 5))
    info = draw(st.sampled_from(["", "py", "ts", " sh", "json"]))
    pad = indent + " " * draw(st.integers(0, 3))
    body = [pad + " " * draw(st.sampled_from([0, 0, 2, 4])) + draw(line()) for _ in range(draw(st.integers(0, 8)))]
    blank = draw(st.booleans())
    if blank and body:
        body.insert(len(body) // 2, "")
    return "\n".join([pad + run + info, *body, pad + run])


@st.composite
def list_item_fence(draw: st.DrawFn) -> str:
    return f"- {draw(line())}\n\n" + draw(fence(indent="  "))


@st.composite
def quoted_fence(draw: st.DrawFn) -> str:
    return "\n".join("> " + ln if ln else ">" for ln in draw(fence()).split("\n"))


block = st.one_of(paragraph, paragraph, fence(), list_item_fence(), quoted_fence(), st.just("- one\n- two"))


@st.composite
def document(draw: st.DrawFn) -> str:
    blocks = draw(st.lists(block, min_size=1, max_size=6))
    seps = draw(
        st.lists(st.sampled_from(["\n", "\n\n", "\n\n\n", "\n \n"]), min_size=len(blocks), max_size=len(blocks))
    )
    return "".join(b + sep for b, sep in zip(blocks, seps, strict=True)).rstrip("\n") + draw(
        st.sampled_from(["", "\n"])
    )


@st.composite
def chunk_params(draw: st.DrawFn) -> ChunkParams:
    max_chars = draw(st.integers(40, 300))
    return ChunkParams(
        min_chars=draw(st.integers(0, max_chars)),
        max_chars=max_chars,
        break_preference=draw(st.sampled_from(BreakKind)),
        unit=draw(st.sampled_from(LengthUnit)),
    )


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


def feed(params: ChunkParams, appends: list[str]) -> list[str]:
    chunker = Chunker(params)
    out: list[str] = []
    for piece in appends:
        out.extend(chunker.append(piece))
    return out + chunker.drain(force=True)


@SETTINGS
@given(document(), chunk_params(), st.lists(st.integers(0, 10_000), max_size=40))
def test_output_does_not_depend_on_how_the_text_was_split(text: str, params: ChunkParams, cuts: list[int]) -> None:
    assert feed(params, split(text, cuts)) == chunk_text(text, params)


@SETTINGS
@given(document(), chunk_params())
def test_one_code_point_at_a_time_equals_one_append(text: str, params: ChunkParams) -> None:
    assert feed(params, list(text)) == chunk_text(text, params)


@SETTINGS
@given(document(), chunk_params())
def test_every_chunk_fits_is_not_empty_and_keeps_graphemes_whole(text: str, params: ChunkParams) -> None:
    chunks = chunk_text(text, params)
    assert all(text_units(c, params.unit) <= params.max_chars for c in chunks)
    assert all(c.strip() and c == c.rstrip() for c in chunks)
    assert chunk_property_failures(chunks, {"no_split_grapheme": True}, params, [text]) == []


@SETTINGS
@given(document(), chunk_params())
def test_fences_are_balanced_and_never_empty_in_every_chunk(text: str, params: ChunkParams) -> None:
    chunks = chunk_text(text, params)
    assert chunk_property_failures(chunks, {"fences_balanced": True}, params, [text]) == []
    if not _has_empty_fence(text):
        assert _unexplained_empty_fences(chunks) == []


@SETTINGS
@given(document(), chunk_params())
def test_nothing_is_lost_or_doubled(text: str, params: ChunkParams) -> None:
    """Joined, with the dropped whitespace, fence marker lines (closers and reopened openers) and
    block quote markers ignored, the chunks are the input."""
    chunks = chunk_text(text, params)
    assert "".join(content_key(c, quotes=True) for c in chunks) == content_key(text, quotes=True)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document(), chunk_params())
def test_pending_is_the_rest_and_fits(text: str, params: ChunkParams) -> None:
    """At every step the emitted chunks and the pending text hold exactly the text so far (dropped
    whitespace and fence markers aside), and pending fits without its trailing whitespace (and the
    markers of a trailing quoted line with no content yet)."""
    chunker = Chunker(params)
    emitted = ""
    for i, ch in enumerate(text):
        emitted += "".join(content_key(c, quotes=True) for c in chunker.append(ch))
        pending = chunker.pending
        shown = _TRAILING_QUOTE_MARKERS.sub("", pending.rstrip())
        assert text_units(shown, params.unit) <= params.max_chars
        assert emitted + content_key(pending, quotes=True) == content_key(text[: i + 1], quotes=True)


@SETTINGS
@given(st.lists(line(), min_size=1, max_size=30), st.integers(1, 60), st.sampled_from(BreakKind))
def test_emits_at_each_preferred_break_once_min_is_reached(lines: list[str], min_chars: int, pref: BreakKind) -> None:
    """With max_chars out of reach, chunks are exactly the paragraphs merged until min_chars is met."""
    text = "\n\n".join(lines)
    params = ChunkParams(min_chars, 10_000, pref)
    expected: list[str] = []
    current = ""
    for para in lines:
        current = f"{current}\n\n{para}" if current else para
        if len(current) >= min_chars:
            expected.append(current)
            current = ""
    if current:
        expected.append(current)
    if pref is BreakKind.PARAGRAPH:
        assert chunk_text(text, params) == expected
    else:  # a weaker preference cuts at least as often, and never inside a line of words
        chunks = chunk_text(text, params)
        assert len(chunks) >= len(expected)
        assert "".join(content_key(c) for c in chunks) == content_key(text)


_ANY = ChunkParams(0, 10**6)
_TRAILING_QUOTE_MARKERS = re.compile(r"(?:\n[ \t>]*)+$")  # trailing blank or marker-only lines
_OPENER_WITH_INFO = re.compile(r"(?P<prefix>[ >\-*+.)0-9]*?)(?P<run>`{3,}|~{3,})(?P<info>.*\S.*)")


def _has_empty_fence(text: str) -> bool:
    return chunk_property_failures([text], {"no_empty_fence": True}, _ANY, [text]) != []


def _unexplained_empty_fences(chunks: list[str]) -> list[str]:
    """Empty fences other than the documented last resort: an opener whose info string cannot fit
    with any content is closed at once, and the fence continues with a bare opener in the next chunk."""
    bad = []
    for i, chunk in enumerate(chunks):
        if not _has_empty_fence(chunk):
            continue
        lines = chunk.split("\n")
        m = _OPENER_WITH_INFO.fullmatch(lines[0])
        following = chunks[i + 1].split("\n")[0] if i + 1 < len(chunks) else ""
        bare = re.sub(r"[-*+]|\d{1,9}[.)]", lambda g: " " * len(g.group(0)), m["prefix"]) + m["run"] if m else None
        if not (m and len(lines) == 2 and following == bare):
            bad.append(chunk)
    return bad


# --- a cut mid-line never makes the rest a block start ------------------------------------------------------

BLOCK_MD = MarkdownIt("commonmark").enable("table")
STARTER = st.sampled_from(
    [">", "#", "##", "######", "-", "*", "+", "1.", "2)", "10.", "***", "---", "___", "- - -", "|", "<div>"]
)


@st.composite
def starter_line(draw: st.DrawFn) -> str:
    """One paragraph line (maybe quoted): words, each maybe after a token that starts a block at a line start."""
    items = draw(st.lists(st.tuples(st.one_of(st.just(""), STARTER), plain_word), min_size=1, max_size=60))
    body = " ".join(f"{s} {w}" if s else w for s, w in items)
    return draw(st.sampled_from(["", "> "])) + draw(plain_word) + " " + body


def _blocks(text: str) -> list[str]:
    return [t.type for t in BLOCK_MD.parse(text) if t.type != "inline"]


@SETTINGS
@given(starter_line(), chunk_params(), st.lists(st.integers(0, 10_000), max_size=20))
def test_a_cut_line_renders_as_the_same_blocks_in_every_chunk(text: str, params: ChunkParams, cuts: list[int]) -> None:
    chunks = chunk_text(text, params)
    assert feed(params, split(text, cuts)) == chunks
    whole = _blocks(text)  # a paragraph, maybe in a quote
    assert whole[-2:] in (["paragraph_open", "paragraph_close"], ["paragraph_close", "blockquote_close"])
    assert all(_blocks(c) == whole for c in chunks), [c for c in chunks if _blocks(c) != whole]
    assert "".join(content_key(c) for c in chunks) == content_key(text)  # a quote's chunks reopen "> "


@SETTINGS
@given(document(), chunk_params(), st.lists(st.integers(0, 10_000), max_size=40))
def test_a_chunk_given_a_start_is_that_range_of_the_text(text: str, params: ChunkParams, cuts: list[int]) -> None:
    """``append_ranges`` and ``drain_ranges`` give the chunks ``append`` and ``drain`` give, in any split, each with a
    start from which it is exactly the appended text (or -1); a chunk that starts its block with no head is one."""
    chunker = Chunker(params)
    pairs: list[tuple[str, int]] = []
    for piece in split(text, cuts):
        pairs.extend(chunker.append_ranges(piece))
    pairs.extend(chunker.drain_ranges(force=True))
    assert [chunk for chunk, _ in pairs] == chunk_text(text, params)
    for chunk, start in pairs:
        assert start == -1 or text[start : start + len(chunk)] == chunk


@SETTINGS
@given(st.lists(line(), min_size=1, max_size=30), chunk_params(), st.lists(st.integers(0, 10_000), max_size=40))
def test_chunks_of_plain_lines_are_ranges_of_the_text(lines: list[str], params: ChunkParams, cuts: list[int]) -> None:
    """Lines with no fence, quote or list item: every chunk is a range of the text (no head, closer or dedent)."""
    text = "\n\n".join(lines)
    chunker = Chunker(params)
    pairs: list[tuple[str, int]] = []
    for piece in split(text, cuts):
        pairs.extend(chunker.append_ranges(piece))
    pairs.extend(chunker.drain_ranges(force=True))
    for chunk, start in pairs:
        if not chunk.lstrip().startswith((">", "`", "~")):
            assert start >= 0 and text[start : start + len(chunk)] == chunk
