"""Message content as Telegram reads it: text + entities (UTF-16 offsets), ``parse_mode=HTML``, trimming, length.

Rules (https://core.telegram.org/bots/api#sendmessage, https://core.telegram.org/bots/api#formatting-options):

- Text is trimmed of leading and trailing whitespace before it is stored (entities shift with it); empty text
  is 400 ``Bad Request: message text is empty``; more than 4096 code points after entity parsing is 400
  ``Bad Request: message is too long`` (the server counts code points; a text of <= 4096 UTF-16 code units
  always fits, so clients may split by UTF-16 units safely).
- ``entities`` (JSON array, UTF-16 offsets) are validated: known type, offset/length inside the text, ``url``
  for ``text_link``; else 400 ``Bad Request: can't parse entities: ...``. Given entities win over
  ``parse_mode``, as on Telegram.
- ``parse_mode=HTML`` is parsed with the supported tags into text + entities (unsupported or unbalanced tags
  are 400 ``can't parse entities``). ``MarkdownV2``/``Markdown`` are NOT parsed: the text is stored verbatim
  and its escaping rules are not checked (the streamrelay adapter never sends ``parse_mode``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html.parser import HTMLParser
from typing import Any

from streamrelay.mocks.common import utf16_len
from streamrelay.mocks.telegram.wire import ApiError, bad, json_param

MAX_TEXT_CHARS = 4096
"""Text limit in code points after entity parsing (https://core.telegram.org/bots/api#sendmessage)."""

Entity = dict[str, Any]
"""A MessageEntity as JSON (https://core.telegram.org/bots/api#messageentity)."""

_ENTITY_TYPES = frozenset((
    "mention", "hashtag", "cashtag", "bot_command", "url", "email", "phone_number", "bold", "italic",
    "underline", "strikethrough", "spoiler", "blockquote", "expandable_blockquote", "code", "pre",
    "text_link", "text_mention", "custom_emoji", "date_time",
))  # fmt: skip
_ENTITY_EXTRAS = ("url", "user", "language", "custom_emoji_id", "unix_time", "date_time_format")

_HTML_TAGS = {
    "b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline", "ins": "underline",
    "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough", "tg-spoiler": "spoiler",
    "span": "spoiler", "code": "code", "pre": "pre", "a": "text_link", "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}  # fmt: skip


def _bad_entities(detail: str) -> ApiError:
    return bad(f"can't parse entities: {detail}")


def validate_entities(value: Any, text: str) -> list[Entity]:
    """Given ``entities`` checked against ``text`` and normalized; a 400 ``can't parse entities`` if wrong."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad_entities("entities must be an array")
    size = utf16_len(text)
    out: list[Entity] = []
    for i, raw in enumerate(value):
        if not isinstance(raw, dict):
            raise _bad_entities(f"entity {i} is not an object")
        kind, offset, length = raw.get("type"), raw.get("offset"), raw.get("length")
        if kind not in _ENTITY_TYPES:
            raise _bad_entities(f"unsupported entity type {kind!r}")
        if not (type(offset) is int and type(length) is int) or offset < 0 or length <= 0:
            raise _bad_entities(f"entity {i} has a bad offset or length")
        if offset + length > size:
            raise _bad_entities(f"entity {i} ends at {offset + length}, beyond the text ({size} UTF-16)")
        if kind == "text_link" and not raw.get("url"):
            raise _bad_entities(f"entity {i}: text_link needs a url")
        entity: Entity = {"type": kind, "offset": offset, "length": length}
        entity.update({k: raw[k] for k in _ENTITY_EXTRAS if raw.get(k) is not None})
        out.append(entity)
    return out


def trim(text: str, entities: list[Entity]) -> tuple[str, list[Entity]]:
    """Strip surrounding whitespace as Telegram does; shift and clip entities with the text."""
    body = text.strip()
    shift = utf16_len(text[: len(text) - len(text.lstrip())])
    size = utf16_len(body)
    out: list[Entity] = []
    for entity in entities:
        start = max(entity["offset"] - shift, 0)
        end = min(entity["offset"] + entity["length"] - shift, size)
        if end > start:
            out.append({**entity, "offset": start, "length": end - start})
    return body, out


class HtmlEntities(HTMLParser):
    """parse_mode=HTML → (text, entities), for the tags listed at https://core.telegram.org/bots/api#html-style."""

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self._source = source
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", source)]
        self.parts: list[str] = []
        self.entities: list[Entity] = []
        self._size = 0
        self._open: list[tuple[str, Entity | None]] = []

    def _byte_offset(self) -> int:
        line, col = self.getpos()
        return len(self._source[: self._line_starts[line - 1] + col].encode())

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        kind = _HTML_TAGS.get(tag)
        if kind is None or (tag == "span" and attr.get("class") != "tg-spoiler"):
            raise _bad_entities(f'Unsupported start tag "{tag}" at byte offset {self._byte_offset()}')
        entity: Entity = {"type": kind, "offset": self._size}
        if tag == "a":
            entity["url"] = attr.get("href") or ""
        elif tag == "blockquote" and "expandable" in attr:
            entity["type"] = "expandable_blockquote"
        elif tag == "tg-emoji":
            entity["custom_emoji_id"] = attr.get("emoji-id") or ""
        elif tag == "code" and self._open and self._open[-1][0] == "pre":
            pre = self._open[-1][1]
            language = (attr.get("class") or "").removeprefix("language-")
            if pre is not None and language:
                pre["language"] = language
            self._open.append((tag, None))  # <pre><code class="language-x"> is one pre entity
            return
        self._open.append((tag, entity))

    def handle_endtag(self, tag: str) -> None:
        if not self._open or self._open[-1][0] != tag:
            expected = f'"</{self._open[-1][0]}>"' if self._open else "nothing"
            at = self._byte_offset()
            raise _bad_entities(f'Unmatched end tag at byte offset {at}, expected {expected}, found "</{tag}>"')
        _, entity = self._open.pop()
        if entity is not None and self._size > entity["offset"]:
            self.entities.append({**entity, "length": self._size - entity["offset"]})

    def handle_data(self, data: str) -> None:
        self.parts.append(data)
        self._size += utf16_len(data)

    def parse(self) -> tuple[str, list[Entity]]:
        self.feed(self._source)
        self.close()
        if self._open:
            raise _bad_entities(f'Can\'t find end tag corresponding to start tag "{self._open[-1][0]}"')
        return "".join(self.parts), sorted(self.entities, key=lambda e: int(e["offset"]))


def parsed(
    params: Mapping[str, Any], text_key: str = "text", entities_key: str = "entities"
) -> tuple[str, list[Entity]]:
    """``params[text_key]`` with ``params[entities_key]`` or ``parse_mode`` as a person would see it: parsed and
    trimmed (may be empty); a 400 ``can't parse entities`` like Telegram's."""
    raw = params.get(text_key)
    text = str(raw) if isinstance(raw, str | int | float) and not isinstance(raw, bool) else ""
    given = json_param(params, entities_key)
    mode = str(params.get("parse_mode") or "").lower()
    if given is not None or not mode:
        entities = validate_entities(given, text)
    elif mode == "html":
        text, entities = HtmlEntities(text).parse()
    elif mode in ("markdownv2", "markdown"):
        entities = []  # stored verbatim: MarkdownV2 is not parsed by the mock (module docstring)
    else:
        raise bad("unsupported parse_mode")
    return trim(text, entities)


def message_content(params: Mapping[str, Any]) -> tuple[str, list[Entity]]:
    """The ``text`` and entities a person would see (trimmed, parsed), or a 400 like Telegram's.

    Used alike by sendMessage, editMessageText and sendMessageDraft.
    """
    text, entities = parsed(params)
    if not text:
        raise bad("message text is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise bad("message is too long")
    return text, entities
