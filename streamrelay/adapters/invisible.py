"""Invisible characters out of every text a platform adapter renders: one documented rule, one compiled pattern.

The run stage already removes control characters and bidi overrides from every event, character by character
(:mod:`core.text.safe_text`: it must be, so that each delta's sanitized text extends the one before). What is left are
characters a person does not see but a model (or a prompt-injected tool result it repeats) can put in an answer: hidden
text in Unicode tag characters ("ASCII smuggling"), zero-width characters that split a word so that a filter or a
person's search misses it, fillers that look like an empty message. Some of these are harmless, even needed, next to
certain neighbours (a family emoji is joined by ZWJ; Persian needs ZWNJ), so the rule looks at neighbours, and it runs
where whole texts are at hand: in each adapter's ``render`` (Telegram, Slack, Discord, the web channel's parts) before
the platform's own escaping, and in the live page's script for the text it renders (``live-markdown.js``,
``stripInvisible``: the same rule).

:func:`strip_invisible`, per character:

- removed always: SOFT HYPHEN U+00AD; COMBINING GRAPHEME JOINER U+034F; the Hangul fillers U+3164, U+FFA0 (and
  U+115F, U+1160 outside a conjoining-jamo syllable: U+1160 is kept after a leading consonant U+1100-U+115E,
  U+A960-U+A97C, U+115F before a vowel U+1161-U+11A7, U+D7B0-U+D7C6; KS X 1026-1); the Khmer inherent vowels
  U+17B4, U+17B5 (Unicode: "should not be used"); MONGOLIAN VOWEL SEPARATOR U+180E;
  ZERO WIDTH SPACE U+200B; WORD JOINER U+2060, the invisible operators U+2061-U+2064 and the deprecated
  format characters U+206A-U+206F; the bidi embeddings, overrides and isolates U+202A-U+202E, U+2066-U+2069 and
  U+FEFF (again: the run stage removes them, this guards texts built elsewhere); the interlinear annotation
  characters U+FFF9-U+FFFB; the shorthand format controls U+1BCA0-U+1BCA3; the musical format characters
  U+1D173-U+1D17A (begin / end beam, tie, slur, phrase: nothing outside a music renderer).
- BRAILLE PATTERN BLANK U+2800 (a blank that is no space: a message of it looks empty, a name of it looks absent):
  kept between two braille cells (U+2801-U+28FF: a word space in braille text), removed elsewhere.
- tag characters U+E0000-U+E007F: removed, except in the three subdivision flags of the emoji standard's
  recommended set (UTS #51 ED-14a and emoji-sequences.txt, https://www.unicode.org/reports/tr51/#valid-emoji-tag-sequences):
  U+1F3F4 WAVING BLACK FLAG, the tag letters ``gbeng``, ``gbsct`` or ``gbwls``, U+E007F CANCEL TAG: England,
  Scotland, Wales. So a flag carries no hidden letters however often it is repeated; any other tag sequence
  (hidden text U+E0041..., or a subdivision no platform draws: it shows as the black flag) loses its tags.
- ZERO WIDTH JOINER U+200D and ZERO WIDTH NON-JOINER U+200C: kept inside an emoji ZWJ sequence (UTS #51 ED-16: the
  character before is an emoji, possibly with VS16 or a skin tone modifier after it, and the character after is an
  emoji: 👨‍👩‍👧, 🏳️‍🌈) and between two letters of a script that uses them to shape its letters (Arabic, Syriac, Thaana,
  N'Ko, the Brahmic scripts of India and Sri Lanka, Myanmar, Khmer, Mongolian: Unicode §23.2, "Cursive
  Connection and Ligatures"); a ZWJ also right after a virama (U+094D ... U+0DCA, Myanmar U+1039, Khmer U+17D2),
  whatever follows: a Malayalam chillu written the pre-5.1 way, a Bengali khanda ta, at a word's end. Removed
  everywhere else (between Latin letters, at a text's ends, in runs; a ZWNJ between emoji: only ZWJ joins them).
- variation selectors (Unicode §23.4) are kept only right after a character they can apply to, else removed (one
  after each Latin letter carries a hidden byte per letter; a run of them carries data, never presentation):
  U+FE00-U+FE0F after an emoji (text or emoji presentation: ☺︎, ❤️), U+FE0F after a keycap's base ``#``, ``*``,
  ``0``-``9`` only in a keycap sequence (U+20E3 after it: 1️⃣; so a number carries no selectors), a CJK
  ideograph, a mathematical operator (U+2200-U+22FF, U+2A00-U+2AFF), a Myanmar or Phags-pa letter
  (their standardized variation sequences); U+E0100-U+E01EF (ideographic variation sequences) after a CJK
  ideograph; the Mongolian free variation selectors U+180B-U+180D, U+180F after a Mongolian letter.

- the implicit bidi marks LRM U+200E, RLM U+200F, ALM U+061C: removed (a run of them too) between two letters or
  digits of left-to-right scripts (Latin, Greek, Cyrillic, kana, Hangul, CJK: ``pass\u200eword``), where they change
  nothing a reader sees but split the word for a filter; kept elsewhere (between RTL and LTR runs, after
  punctuation: that is where they order text).

Everything else is kept: combining marks, every script's letters, spaces,
the prepended concatenation marks (U+0600-U+0605, U+06DD, U+070F, U+0890, U+0891, U+08E2, U+110BD, U+110CD: they
are drawn), the Egyptian hieroglyph format controls. A variation selector still rides on each emoji or CJK
ideograph it may follow: data there needs as many visible characters as it hides values.
Cost: one C-level ``re.search`` of a character class per text (:data:`_RULED`); the rule's pattern runs only when one
of these characters is there.

Markdown converters decode HTML character references (``&#x200B;``, ``&#173;``, ``&ZeroWidthSpace;``,
``&#xE0041;``) after this rule ran on the text: :func:`strip_invisible_markdown` judges each reference outside code
as the character it decodes into (Telegram's render, the live page's ``stripInvisible``); inside code spans and
fences a reference is shown as written, and stays.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

_EMOJI = (
    "\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u2199\u21a9\u21aa\u231a-\u23ff\u24c2\u25aa-\u27bf\u2934\u2935"
    "\u2b05-\u2b55\u3030\u303d\u3297\u3299\U0001f000-\U0001faff"
)
"""Code points with the Extended_Pictographic property (Unicode emoji-data.txt), by their blocks: what a ZWJ sequence
joins."""
_EMOJI_MODIFIER = "\ufe0f\U0001f3fb-\U0001f3ff"
"""VS16 (emoji presentation) and the five skin tone modifiers: may stand between an emoji and its ZWJ."""
_JOINING = (
    "\u0600-\u08ff"  # Arabic, Syriac, Arabic Supplement, Thaana, N'Ko, Samaritan, Mandaic, Arabic Extended
    "\u0900-\u0dff"  # Devanagari ... Sinhala
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u18af"  # Khmer, Mongolian
    "\ua8e0-\ua8ff"  # Devanagari Extended
    "\ufb50-\ufdff\ufe70-\ufefe"  # Arabic presentation forms
)
"""Scripts whose letters ZWJ / ZWNJ shape (Unicode §23.2)."""
_TAG_FLAG = (
    "\U0001f3f4\U000e0067\U000e0062(?:\U000e0065\U000e006e\U000e0067|\U000e0073\U000e0063\U000e0074"
    "|\U000e0077\U000e006c\U000e0073)\U000e007f"
)
"""England, Scotland, Wales: the black flag, the tag letters gbeng / gbsct / gbwls, the cancel tag (UTS #51)."""
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"
"""CJK ideographs (unified, extensions, compatibility): what ideographic variation sequences follow."""
_VS_BASE = rf"{_EMOJI}{_CJK}\u2200-\u22ff\u2a00-\u2aff\u1000-\u109f\uaa60-\uaa7f\ua9e0-\ua9ff\ua840-\ua877"
"""What U+FE00-U+FE0F may follow: emoji, CJK ideographs, math operators, Myanmar, Phags-pa (a keycap base ``#*0-9``
only in a keycap: U+FE0F then U+20E3)."""
_VIRAMA = "\u094d\u09cd\u0a4d\u0acd\u0b4d\u0bcd\u0c4d\u0ccd\u0d4d\u0dca\u1039\u17d2"
"""The viramas of the Brahmic scripts, Myanmar and Khmer: a ZWJ after one shapes the letter before it (a Malayalam
chillu, a Bengali khanda ta, a Devanagari half form), even at a word's end."""
_LTR_WORD = (
    "0-9A-Za-z\u00aa\u00b5\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02af\u0370-\u03ff\u0400-\u052f"
    "\u1e00-\u1fff\u3040-\u30ff\uac00-\ud7a3" + _CJK
)
"""Letters and digits of left-to-right scripts (Latin, Greek, Cyrillic, kana, Hangul syllables, CJK ideographs): an
implicit bidi mark between two of them changes nothing a reader sees."""
_BRAILLE = "\u2801-\u28ff"

INVISIBLE = re.compile(
    rf"(?P<flag>{_TAG_FLAG})"
    r"|(?P<joiner>[\u200c\u200d])"
    rf"|(?<![{_VS_BASE}#*0-9])[\ufe00-\ufe0f]"
    r"|(?<=[#*0-9])(?!\ufe0f\u20e3)[\ufe00-\ufe0f]"
    rf"|(?<=[{_LTR_WORD}])[\u200e\u200f\u061c]+(?=[{_LTR_WORD}])"
    r"|(?<![\u1100-\u115e\ua960-\ua97c])\u1160|\u115f(?![\u1161-\u11a7\ud7b0-\ud7c6])"
    rf"|(?<![{_CJK}])[\U000e0100-\U000e01ef]"
    r"|(?<![\u1820-\u18af])[\u180b-\u180d\u180f]"
    rf"|(?<![\u2800{_BRAILLE}])\u2800+|\u2800+(?![\u2800{_BRAILLE}])"
    "|[\u00ad\u034f\u17b4\u17b5\u180e\u3164\uffa0\u200b\u2060-\u2064\u206a-\u206f\u202a-\u202e"
    "\u2066-\u2069\ufeff\ufff9-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f]"
)
"""Every character :func:`strip_invisible` may remove (a flag sequence is matched whole, to be kept whole)."""

_EMOJI_BEFORE = re.compile(rf"[{_EMOJI}][{_EMOJI_MODIFIER}]?\Z")
_EMOJI_AFTER = re.compile(rf"[{_EMOJI}]")
_JOINING_CHAR = re.compile(rf"[{_JOINING}]")


def _keep_joiner(text: str, at: int) -> bool:
    """The ZWJ / ZWNJ at ``text[at]`` joins two letters of a joining script, or (ZWJ only) two emoji, or follows a
    virama."""
    if text[at] == "\u200d" and at > 0 and text[at - 1] in _VIRAMA:
        return True
    after = text[at + 1 : at + 2]
    if not after:
        return False
    before = text[max(0, at - 2) : at]
    if text[at] == "\u200d" and _EMOJI_AFTER.match(after) and _EMOJI_BEFORE.search(before):
        return True
    return bool(before) and _JOINING_CHAR.match(before[-1]) is not None and _JOINING_CHAR.match(after) is not None


def strip_invisible(text: str) -> str:
    """``text`` without the invisible characters of the module docstring's rule. Pure, idempotent, O(len(text));
    returns ``text`` itself when there is nothing to remove.

    Each match of :data:`INVISIBLE` holds a character of :data:`_RULED` (a plain character class, searched ~40x faster
    than the pattern's lookbehinds at every position): a text without one is returned at that cost."""
    if _RULED.search(text) is None or INVISIBLE.search(text) is None:
        return text

    def replace(match: re.Match[str]) -> str:
        if match.group("flag") is not None:
            return match.group()
        if match.group("joiner") is not None:
            return match.group() if _keep_joiner(text, match.start()) else ""
        return ""

    while True:  # a removal can make new neighbours (a joiner between two removed fillers): until nothing changes
        stripped = INVISIBLE.sub(replace, text)
        if stripped == text:
            return text
        text = stripped


_RULED = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e01ef]"
)
"""Every character the rule looks at (removed always or by its neighbours)."""
NAMED_REFERENCES = {
    "ApplyFunction": "\u2061",
    "af": "\u2061",
    "InvisibleComma": "\u2063",
    "ic": "\u2063",
    "InvisibleTimes": "\u2062",
    "it": "\u2062",
    "NegativeMediumSpace": "\u200b",
    "NegativeThickSpace": "\u200b",
    "NegativeThinSpace": "\u200b",
    "NegativeVeryThinSpace": "\u200b",
    "ZeroWidthSpace": "\u200b",
    "NoBreak": "\u2060",
    "lrm": "\u200e",
    "rlm": "\u200f",
    "shy": "\u00ad",
    "zwj": "\u200d",
    "zwnj": "\u200c",
}
"""The HTML named character references (https://html.spec.whatwg.org/entities.json, with their ``;``) whose value is
one character the rule looks at. (The others holding one, ``&caps;`` and kin, are a math operator + U+FE00: a
standardized variation sequence the rule keeps.)"""
_REFERENCE = re.compile(r"&(?:#[xX]([0-9a-fA-F]{1,6})|#([0-9]{1,7})|([A-Za-z][A-Za-z0-9]{1,31}));")
"""A character reference as CommonMark reads one (https://spec.commonmark.org/0.31.2/#entity-and-numeric-character-references)."""
_LINE_PREFIX = r"(?:[ \t]*(?:>|[-+*][ \t]|[0-9]{1,9}[.)][ \t]))*[ \t]{0,3}"
_FENCE_OPEN = re.compile(rf"{_LINE_PREFIX}(`{{3,}}|~{{3,}})([^\n]*)")
_FENCE_CLOSE = re.compile(rf"{_LINE_PREFIX}(`{{3,}}|~{{3,}})[ \t]*")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


def _reveal(match: re.Match[str]) -> str:
    hexadecimal, decimal, name = match.groups()
    if name is not None:
        value = NAMED_REFERENCES.get(name)
    else:
        number = int(hexadecimal, 16) if hexadecimal is not None else int(decimal)
        value = chr(number) if number <= 0x10FFFF else None  # beyond: U+FFFD, as 0 and surrogates
    return value if value is not None and _RULED.fullmatch(value) else match.group()


def reveal_references(text: str) -> str:
    """``text`` (Markdown, outside code) with each character reference whose value is a character the rule looks at
    (``&#x200B;``, ``&#173;``, ``&ZeroWidthSpace;``, ``&#xE0041;``, ``&zwj;``) written as that character, so that
    :func:`strip_invisible` judges it as it judges the character itself: a Markdown converter decodes references
    after the rule ran. Every other reference (``&amp;``, ``&#60;``, an unknown name) stays as written."""
    return _REFERENCE.sub(_reveal, text) if "&" in text else text


def markdown_code_ranges(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` offsets (code points) of the code in Markdown ``text`` that a CommonMark parser shows as
    written: fenced code blocks (also inside quotes and list items; an unclosed one runs to the end) and code spans
    (a backtick run up to the next run of the same length within the paragraph). Indented code blocks are not told
    apart from text (references there are judged as outside code: the safe side). The live page's script has the
    same scanner (``codeRanges``). O(len(text))."""
    fences: list[tuple[int, int]] = []
    at = 0
    fence: tuple[str, int, int] | None = None  # marker character, length, start
    for found in re.finditer(r"[^\n]*\n|[^\n]+\Z", text):  # lines end at "\n" only, as in markdown-it
        line = found.group()
        body = line.removesuffix("\n").removesuffix("\r")
        if fence is None:
            opened = _FENCE_OPEN.fullmatch(body)
            if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
                fence = (opened.group(1)[0], len(opened.group(1)), at)
        else:
            closed = _FENCE_CLOSE.fullmatch(body)
            if closed and closed.group(1)[0] == fence[0] and len(closed.group(1)) >= fence[1]:
                fences.append((fence[2], at + len(line)))
                fence = None
        at += len(line)
    if fence is not None:
        fences.append((fence[2], len(text)))
    ranges: list[tuple[int, int]] = []
    start = 0
    for fence_start, fence_end in [*fences, (len(text), len(text))]:
        ranges.extend(_code_spans(text, start, fence_start))
        if fence_start < fence_end:
            ranges.append((fence_start, fence_end))
        start = fence_end
    return ranges


def _code_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The code spans of ``text[start:end]`` (no fence in it), as offsets in ``text``. O(end - start): the blank
    lines are found once and number each backtick run's paragraph (a span never crosses one), and each run length
    keeps a cursor into its runs, only ever moved forward, to find an opener's closer: the next run of its length,
    in its paragraph."""
    runs = [(m.start() + start, m.end() + start) for m in re.finditer(r"`+", text[start:end])]
    blanks = [m.start() + start for m in _BLANK_LINE.finditer(text[start:end])]  # none holds a backtick
    paragraph = [bisect.bisect_left(blanks, run_start) for run_start, _ in runs]  # blank lines before the run
    by_length: dict[int, list[int]] = {}
    for k, (run_start, run_end) in enumerate(runs):
        by_length.setdefault(run_end - run_start, []).append(k)
    cursor = dict.fromkeys(by_length, 0)
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(runs):
        run_start, run_end = runs[i]
        opener = i
        i += 1
        slashes = 0
        while run_start - slashes > start and text[run_start - slashes - 1] == "\\":
            slashes += 1
        if slashes % 2:  # an escaped backtick: the rest of the run may open a span
            run_start += 1
            if run_start == run_end:
                continue
        same = by_length.get(run_end - run_start)
        if same is None:
            continue
        at = cursor[run_end - run_start]
        while at < len(same) and same[at] <= opener:
            at += 1
        cursor[run_end - run_start] = at
        if at < len(same) and paragraph[same[at]] == paragraph[opener]:
            spans.append((run_start, runs[same[at]][1]))
            i = same[at] + 1
    return spans


def strip_invisible_markdown(
    text: str, code_ranges: Callable[[str], list[tuple[int, int]]] = markdown_code_ranges
) -> str:
    """:func:`strip_invisible` for a text a Markdown converter renders: also each character reference outside code
    whose value the rule would remove (:func:`reveal_references`); inside code a reference is shown as written and
    stays. Until nothing changes: a removal can make a new reference (``&&#x200B;#x200B;``).

    Args:
        text: Markdown.
        code_ranges: the ``[start, end)`` offsets (code points, sorted) of the code in a text: the converter's own
            reading where it has one (Telegram), else :func:`markdown_code_ranges`.

    Returns:
        The text; ``text`` itself when nothing is removed. The live page's ``stripInvisible`` is this function.
    """
    text = strip_invisible(text)
    while reveal_references(text) != text:  # else nothing to judge, no parse (an "R&D" or "&amp;" text)
        out: list[str] = []
        at = 0
        for start, end in code_ranges(text):
            if start < at:
                continue
            out.append(reveal_references(text[at:start]))
            out.append(text[start:end])
            at = end
        out.append(reveal_references(text[at:]))
        stripped = strip_invisible("".join(out))
        if stripped == text:
            break
        text = stripped
    return text
