"""Text rendering for Microsoft Teams: the message activity that shows a text, and its size.

A bot's text message carries ``textFormat`` ``markdown``, ``plain`` or ``xml``
(https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/format-your-bot-messages). Teams renders a
subset of Markdown in a text-only message: bold, italic, preformatted text and code blocks, quotes, links, lists;
it renders no headings and no tables there ("Text-only messages don't support table formatting", same page). So,
``markdown``:

- A message without a table is the agent's Markdown with ``textFormat: markdown``, each ATX or setext heading
  written as its text in bold on a line of its own (Teams has no headings in a text message). Code blocks, inline
  code, emphasis, links and lists are passed as written.
- A message with a table (Markdown cannot carry it) is an Adaptive Card
  (https://learn.microsoft.com/en-us/microsoftteams/platform/task-modules-and-cards/cards/cards-reference#adaptive-card)
  with an empty ``text``: the Markdown around the table in ``TextBlock`` elements (``wrap``; a TextBlock renders
  bold, italic, lists and links, https://learn.microsoft.com/en-us/microsoftteams/platform/task-modules-and-cards/cards/cards-format#markdown-formatting-for-adaptive-cards),
  each fenced or indented code block a ``CodeBlock`` element (Teams' own, with its language,
  https://learn.microsoft.com/en-us/microsoftteams/platform/task-modules-and-cards/cards/cards-format#codeblock-in-adaptive-cards)
  and each table a ``Table`` element (Adaptive Cards 1.5) of ``TableCell`` elements holding a ``TextBlock``.

``plain``: the text with ``textFormat: plain``. ``stripped``: the Markdown's markup removed
(:func:`adapters.markdown_strip.strip_markdown`), plain. Invisible characters are removed first in every format
(:func:`adapters.invisible.strip_invisible`).

Size: a bot message is at most about 100 KB, counted on the whole message (text, card, mentions) encoded as UTF-16;
Microsoft recommends keeping a message within 80 KB; past the limit the bot gets 413 ``MessageSizeTooBig``
(https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/format-your-bot-messages).
:attr:`Rendered.units` is the bytes of the message's JSON in UTF-16 (two per code unit), compared with the platform's
``rendered_max`` (:data:`adapters.teams.platform.RENDERED_MAX`, 80 KB).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from streamrelay.adapters.invisible import strip_invisible
from streamrelay.adapters.markdown_strip import strip_markdown
from streamrelay.core.ports import TextFormat

_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
CARD_TYPE = "application/vnd.microsoft.card.adaptive"
"""The ``contentType`` of an Adaptive Card attachment."""
CARD_VERSION = "1.5"
"""Tables need Adaptive Cards 1.5 (https://adaptivecards.io/explorer/Table.html); Teams renders 1.5 on desktop,
web and mobile (https://learn.microsoft.com/en-us/microsoftteams/platform/task-modules-and-cards/cards/cards-reference#adaptive-card)."""


@dataclass(frozen=True)
class Rendered:
    """A text as Teams gets it.

    Attributes:
        text: the message's ``text`` ("" for a card).
        text_format: ``markdown`` or ``plain``.
        card: the Adaptive Card's content (None: a text message).
        units: bytes of the message's JSON encoded as UTF-16 (what the size limit counts).
    """

    text: str
    text_format: str
    card: dict[str, Any] | None = None
    units: int = 0

    def activity(self) -> dict[str, Any]:
        """The message activity's JSON fields (``type``, ``text``, ``textFormat``, ``attachments``)."""
        return activity_fields(self.text, self.text_format, self.card)


def activity_fields(text: str, text_format: str, card: dict[str, Any] | None) -> dict[str, Any]:
    """A message activity of ``text`` (``textFormat``) and, when given, one Adaptive Card attachment."""
    fields: dict[str, Any] = {"type": "message", "text": text, "textFormat": text_format}
    if card is not None:
        fields["attachments"] = [{"contentType": CARD_TYPE, "content": card}]
    return fields


def utf16_bytes(fields: dict[str, Any]) -> int:
    """Bytes of ``fields`` as JSON (``ensure_ascii`` off) encoded as UTF-16: the size the limit counts."""
    return len(json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode("utf-16-le", "surrogatepass"))


def render(text: str, fmt: TextFormat) -> Rendered:
    """``text`` rendered in ``fmt`` (module docstring). Pure: the same input gives the same activity."""
    text = strip_invisible(text)
    if fmt is TextFormat.MARKDOWN:
        tokens = _MD.parse(text)
        if any(tok.type == "table_open" for tok in tokens):
            card = markdown_card(text, tokens)
            return _sized("", "markdown", card)
        return _sized(headings_in_bold(text, tokens), "markdown", None)
    body = strip_markdown(text) if fmt is TextFormat.STRIPPED else text
    return _sized(body, "plain", None)


def _sized(text: str, text_format: str, card: dict[str, Any] | None) -> Rendered:
    return Rendered(text, text_format, card, utf16_bytes(activity_fields(text, text_format, card)))


def headings_in_bold(text: str, tokens: list[Token] | None = None) -> str:
    """``text`` with each heading's lines replaced by ``**heading text**`` (module docstring); the rest unchanged."""
    tokens = _MD.parse(text) if tokens is None else tokens
    lines = text.split("\n")
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.map is not None and tok.level == 0:
            start, end = tok.map
            content = tokens[i + 1].content.strip()
            lines[start] = f"**{content}**" if content else ""
            for j in range(start + 1, end):
                lines[j] = None  # type: ignore[call-overload]
    return "\n".join(line for line in lines if line is not None)


def markdown_card(text: str, tokens: list[Token] | None = None) -> dict[str, Any]:
    """An Adaptive Card showing the Markdown ``text`` (module docstring): its top-level blocks in order, text runs
    as ``TextBlock``, code as ``CodeBlock``, tables as ``Table``."""
    tokens = _MD.parse(text) if tokens is None else tokens
    lines = text.split("\n")
    body: list[dict[str, Any]] = []
    run: list[str] = []

    def flush() -> None:
        chunk = "\n".join(run).strip("\n")
        if chunk.strip():
            body.append({"type": "TextBlock", "text": headings_in_bold(chunk), "wrap": True})
        run.clear()

    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.level != 0 or tok.map is None:
            i += 1
            continue
        start, end = tok.map
        if tok.type in ("fence", "code_block"):
            flush()
            language = tok.info.split()[0] if tok.info.strip() else "PlainText"
            body.append({"type": "CodeBlock", "codeSnippet": tok.content.rstrip("\n"), "language": language})
            i += 1
            continue
        if tok.type == "table_open":
            flush()
            close = next(k for k in range(i, len(tokens)) if tokens[k].type == "table_close")
            body.append(_table(tokens[i : close + 1]))
            i = close + 1
            continue
        run.extend(lines[start:end])
        run.append("")
        i = _skip_block(tokens, i)
    flush()
    return {"type": "AdaptiveCard", "version": CARD_VERSION, "body": body, "msteams": {"width": "Full"}}


def _skip_block(tokens: list[Token], i: int) -> int:
    """The index after the top-level block that starts at ``i`` (its close token, or itself when it has none)."""
    tok = tokens[i]
    if not tok.type.endswith("_open"):
        return i + 1
    depth = 0
    for k in range(i, len(tokens)):
        depth += tokens[k].nesting
        if depth == 0:
            return k + 1
    return len(tokens)


def _table(tokens: list[Token]) -> dict[str, Any]:
    """A ``Table`` element of the table tokens (the header row shown as the first row, in bold)."""
    rows: list[list[str]] = []
    header_rows = 0
    in_head = False
    for tok in tokens:
        if tok.type == "thead_open":
            in_head = True
        elif tok.type == "thead_close":
            in_head = False
        elif tok.type == "tr_open":
            rows.append([])
            header_rows += 1 if in_head else 0
        elif tok.type == "inline" and rows:
            rows[-1].append(tok.content)
    width = max((len(r) for r in rows), default=1)
    return {
        "type": "Table",
        "columns": [{"width": 1} for _ in range(width)],
        "firstRowAsHeader": header_rows > 0,
        "rows": [
            {
                "type": "TableRow",
                "cells": [
                    {"type": "TableCell", "items": [{"type": "TextBlock", "text": cell, "wrap": True}]}
                    for cell in row + [""] * (width - len(row))
                ],
            }
            for row in rows
        ],
    }
