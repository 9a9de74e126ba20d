"""Text rendering for Telegram: plain text, or Markdown as text + entities (never ``parse_mode``), and its length.

Entities carry UTF-16 offsets and cannot fail to parse, unlike ``parse_mode`` MarkdownV2/HTML
(https://core.telegram.org/bots/api#formatting-options). The conversion is telegramify-markdown's
``convert`` (https://github.com/sudoskys/telegramify-markdown).

Agent text is made inert first: invisible characters are removed (:func:`adapters.invisible.strip_invisible`; in
Markdown also a character reference outside code that the converter would decode into one:
:func:`adapters.invisible.strip_invisible_markdown`, code located by the converter's own parser), and a
link entity keeps only a target a person can safely follow (https://core.telegram.org/bots/api#formatting-options,
``text_link``: "URL that will be opened after user taps on the text"): ``http`` and ``https`` always; ``tg://user?id=``
(a mention: it opens, and in groups notifies, that user) only when the channel allows mentions; other ``tg://`` links
(join a chat, resolve a username) only when it allows platform links (:class:`core.ports.MarkupPermissions`);
``javascript:``, ``data:``, ``file:`` and every other scheme never. A refused link loses its link, never its text.
A ``text_mention`` entity (a user by id) is kept only with mentions allowed.

Agent text is never dropped: the converter drops what its parser reads as raw HTML (an HTML block, an inline tag
or comment: ``Vec<String>``, ``a<b and c>d``, ``<!-- x -->``, ``<!channel>``), so before conversion every ``<``
outside code becomes the CommonMark backslash escape ``\\<`` (literal text,
https://spec.commonmark.org/0.31.2/#backslash-escapes), but for one that opens an autolink (``<https://…>``,
``<a@b.example>``, still a link). Code (inline code spans, fenced and indented code blocks, math) is the parser's own
reading (pyromark, the converter's CommonMark parser, with the converter's options) of the text with its ``<`` made
inert, so the escape never lands where it would show as a backslash.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import pyromark
import telegramify_markdown
from aiogram.types import MessageEntity
from telegramify_markdown.config import RenderConfig
from telegramify_markdown.converter import STANDARD_OPTIONS

from streamrelay.adapters.invisible import strip_invisible, strip_invisible_markdown
from streamrelay.core.ports import MarkupPermissions, TextFormat
from streamrelay.core.units import LengthUnit, text_units

INERT = MarkupPermissions()
"""Neither mentions nor platform links: the default of every channel."""


def _render_config() -> RenderConfig:
    """An isolated config (the library's global one is shared mutable state).

    Heading markers are blanked: the library prefixes headings with emoji (📌, ✏, 📚, 🔖), which would add
    text the agent never wrote; headings stay bold + underlined.
    """
    config = RenderConfig.isolated()
    symbols = config.markdown_symbol
    symbols.heading_level_1 = symbols.heading_level_2 = ""
    symbols.heading_level_3 = symbols.heading_level_4 = ""
    return config


_CONFIG = _render_config()


class Rendered(NamedTuple):
    """What a sendMessage / editMessageText (or a caption) carries for one text: ``text`` and ``entities`` (None when
    there are none to send), and ``units``, the length Telegram counts: UTF-16 units of the text after entity
    parsing (the 1-4096 limit, https://core.telegram.org/bots/api#sendmessage)."""

    text: str
    entities: list[MessageEntity] | None
    units: int


_LT = re.compile(
    r"(\\[\s\S])"  # a backslash escape (``\\<`` is one already, ``\\\\`` is a backslash before a tag)
    r"|(<(?:[A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*|[A-Za-z0-9.!#$%&'*+/=?^_`{|}~\-]+@[A-Za-z0-9.\-]+)>)"  # autolink
    r"|<"
)
"""Outside code: a backslash escape and an autolink (https://spec.commonmark.org/0.31.2/#autolinks) are kept, any
other ``<`` is escaped."""


def _escape_lt(part: str) -> str:
    return _LT.sub(lambda m: m.group(1) or m.group(2) or "\\<", part)


def _code_ranges(text: str) -> list[tuple[int, int]]:
    """UTF-8 byte ranges of ``text`` that the converter's parser reads as code or math, once no ``<`` opens HTML
    (each ``<`` read as a letter of the same byte length: what the text becomes after :func:`_escape_lt`)."""
    ranges: list[tuple[int, int]] = []
    for payload, span in pyromark.events_with_range(text.replace("<", "a"), options=STANDARD_OPTIONS):
        if not isinstance(payload, dict):
            continue
        start = payload.get("Start")
        if (isinstance(start, dict) and "CodeBlock" in start) or any(
            kind in payload for kind in ("Code", "InlineMath", "DisplayMath")
        ):
            ranges.append((span["start"], span["end"]))
    return ranges


class _Reading:
    """The converter's parser's code ranges (:func:`_code_ranges`) of the last text asked: one render parses each
    text it looks at once, whether the invisible-character pass or :func:`literal_angles` asks first (a text whose
    references change nothing is parsed once for both)."""

    def __init__(self) -> None:
        self._text: str | None = None
        self._ranges: list[tuple[int, int]] = []

    def ranges(self, text: str) -> list[tuple[int, int]]:
        """UTF-8 byte ranges of the code in ``text`` (:func:`_code_ranges`)."""
        if text != self._text:
            self._text, self._ranges = text, _code_ranges(text)
        return self._ranges

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """The code ranges as code point offsets in ``text`` (sorted, nested ranges dropped)."""
        data = text.encode("utf-8")
        offsets: list[tuple[int, int]] = []
        byte_at = char_at = 0
        for start, end in self.ranges(text):
            if start < byte_at:
                continue
            char_start = char_at + len(data[byte_at:start].decode("utf-8"))
            char_end = char_start + len(data[start:end].decode("utf-8"))
            offsets.append((char_start, char_end))
            byte_at, char_at = end, char_end
        return offsets


def literal_angles(text: str, reading: _Reading | None = None) -> str:
    """``text`` (Markdown) with every ``<`` outside code that does not open an autolink backslash-escaped (module
    docstring), so that the converter keeps it as text; ``text`` itself when it holds no ``<``. Cost O(len(text)):
    one parse (none when ``reading`` parsed this text already) and one regular-expression pass."""
    if "<" not in text:
        return text
    data = text.encode("utf-8")
    out: list[str] = []
    at = 0
    for start, end in (reading or _Reading()).ranges(text):
        if start < at:  # nested (a code block's own range was taken already)
            continue
        out.append(_escape_lt(data[at:start].decode("utf-8")))
        out.append(data[start:end].decode("utf-8"))
        at = end
    out.append(_escape_lt(data[at:].decode("utf-8")))
    return "".join(out)


def link_allowed(url: str, allowed: MarkupPermissions = INERT) -> bool:
    """Whether a ``text_link`` to ``url`` may stay a link (module docstring)."""
    scheme, colon, rest = url.partition(":")
    scheme = scheme.strip().lower()
    if not colon:
        return False
    if scheme in ("http", "https"):
        return True
    if scheme == "tg":
        if rest.lstrip("/").lower().startswith("user"):
            return allowed.mentions
        return allowed.platform_links
    return False


def _entity_allowed(entity: MessageEntity, allowed: MarkupPermissions) -> bool:
    if entity.type == "text_link":
        return link_allowed(entity.url or "", allowed)
    if entity.type == "text_mention":
        return allowed.mentions
    return True


def render(text: str, fmt: TextFormat, allowed: MarkupPermissions = INERT) -> Rendered:
    """Render ``text`` for ``sendMessage`` / ``editMessageText`` (pure: the adapter keeps the renderings of the texts
    in flight, :class:`adapters.rendering.RenderCache`).

    Args:
        text: the text as the agent wrote it (Markdown for ``markdown`` / ``stripped``).
        fmt: ``plain`` sends it as is; ``markdown`` converts to text + entities; ``stripped`` converts and
            drops the entities (the fallback after a formatting rejection).
        allowed: the mentions and links the channel keeps (module docstring); invisible characters are removed
            in every format.

    Returns:
        ``(text, entities, units)``; ``entities`` is ``None`` when there are none to send.
    """
    if fmt is TextFormat.PLAIN:
        text = strip_invisible(text)
        return Rendered(text, None, text_units(text, LengthUnit.UTF16))
    # The converter decodes character references: none may bring an invisible character back. Its parser's reading
    # of code is taken once per text: the reference pass and the escape of "<" share it.
    reading = _Reading()
    text = strip_invisible_markdown(text, reading.offsets)
    plain, entities = telegramify_markdown.convert(literal_angles(text, reading), config=_CONFIG)
    units = text_units(plain, LengthUnit.UTF16)
    if fmt is TextFormat.STRIPPED or not entities:
        return Rendered(plain, None, units)
    kept = [MessageEntity.model_validate(entity.to_dict()) for entity in entities]
    kept = [entity for entity in kept if _entity_allowed(entity, allowed)]
    return Rendered(plain, kept or None, units)
