"""Text rendering for WhatsApp: the ``text.body`` of a message and its length (at most 4,096 characters).

WhatsApp shows its own formatting, not Markdown (https://faq.whatsapp.com/539178204879377, and the Cloud API's text
messages, https://developers.facebook.com/docs/whatsapp/cloud-api/messages/text-messages): ``*bold*``, ``_italic_``,
``~strikethrough~``, three backticks around monospace, one backtick around inline code, ``* `` or ``- `` bulleted
lists, ``1. `` numbered lists, ``> `` quotes. ``markdown``: the agent's Markdown (CommonMark with tables and
strikethrough, parsed by markdown-it-py) is written in those forms:

- ``**bold**`` and ``__bold__`` are ``*bold*``; ``*em*`` and ``_em_`` are ``_em_``; ``~~strike~~`` is ``~strike~``;
  ``code`` stays in one backtick; a fenced or indented code block is fenced in three backticks (its language
  dropped: WhatsApp shows none).
- A heading is its text in bold on a line of its own (WhatsApp has no headings).
- A link is its text and the URL in parentheses (WhatsApp makes bare URLs clickable, it has no link text); a link
  whose text is its URL is the URL alone. An image is its alt text and its URL the same way.
- Lists keep their bullets (``- ``) and numbers, nested ones indented by two spaces; a quote is ``> `` per line.
- A table is a monospace block with its columns padded to the same width (WhatsApp has no tables).
- A thematic break is a line of ``———``; raw HTML is shown as written (WhatsApp renders no HTML).

``plain``: the text as written. ``stripped``: the Markdown's markup removed
(:func:`adapters.markdown_strip.strip_markdown`). Invisible characters are removed first, in every format
(:func:`adapters.invisible.strip_invisible`).

Size: :attr:`Rendered.units` is the body's length in UTF-16 code units (at least its characters: safe against the
4,096-character limit whichever way Meta counts).
"""

from __future__ import annotations

from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from streamrelay.adapters.invisible import strip_invisible
from streamrelay.adapters.markdown_strip import strip_markdown
from streamrelay.core.ports import TextFormat
from streamrelay.core.units import LengthUnit, text_units

_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
INLINE_MARKS = {"strong": "*", "em": "_", "s": "~"}
"""Markdown's emphasis tokens and WhatsApp's marks for them."""


@dataclass(frozen=True)
class Rendered:
    """A text as WhatsApp gets it: ``body`` (the ``text.body`` field) and its length in UTF-16 units."""

    body: str
    units: int


def render(text: str, fmt: TextFormat) -> Rendered:
    """``text`` rendered in ``fmt`` (module docstring). Pure: the same input gives the same body."""
    text = strip_invisible(text)
    if fmt is TextFormat.MARKDOWN:
        body = markdown_to_whatsapp(text)
    elif fmt is TextFormat.STRIPPED:
        body = strip_markdown(text)
    else:
        body = text
    return Rendered(body, text_units(body, LengthUnit.UTF16))


def markdown_to_whatsapp(text: str) -> str:
    """The Markdown ``text`` in WhatsApp's formatting (module docstring); blocks separated by one blank line."""
    tokens = _MD.parse(text)
    blocks = _Blocks(tokens).render()
    return "\n\n".join(b for b in blocks if b.strip()).strip("\n")


def _inline(children: list[Token] | None) -> str:
    """An inline token's children as WhatsApp text."""
    out: list[str] = []
    link_stack: list[tuple[str, int]] = []
    for tok in children or []:
        kind = tok.type
        if kind == "text":
            out.append(tok.content)
        elif kind in ("softbreak", "hardbreak"):
            out.append("\n")
        elif kind == "code_inline":
            out.append(f"`{tok.content}`")
        elif kind.endswith("_open") and kind[:-5] in INLINE_MARKS:
            out.append(INLINE_MARKS[kind[:-5]])
        elif kind.endswith("_close") and kind[:-6] in INLINE_MARKS:
            out.append(INLINE_MARKS[kind[:-6]])
        elif kind == "link_open":
            link_stack.append((str(tok.attrs.get("href", "")), len(out)))
        elif kind == "link_close" and link_stack:
            href, start = link_stack.pop()
            label = "".join(out[start:])
            del out[start:]
            out.append(href if label.strip() in ("", href) else f"{label} ({href})")
        elif kind == "image":
            src = str(tok.attrs.get("src", ""))
            alt = tok.content or "image"
            out.append(f"{alt} ({src})")
        elif kind in ("html_inline",):
            out.append(tok.content)
    return "".join(out)


class _Blocks:
    """Walks the block tokens of one document and writes each top-level block."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0

    def render(self) -> list[str]:
        blocks: list[str] = []
        while self.i < len(self.tokens):
            blocks.append(self._block())
        return blocks

    def _block(self) -> str:
        tok = self.tokens[self.i]
        kind = tok.type
        if kind == "heading_open":
            inline = self.tokens[self.i + 1]
            self.i += 3
            content = _inline(inline.children).strip()
            return f"*{content}*" if content else ""
        if kind == "paragraph_open":
            inline = self.tokens[self.i + 1]
            self.i += 3
            return _inline(inline.children)
        if kind in ("fence", "code_block"):
            self.i += 1
            return "```\n" + tok.content.rstrip("\n") + "\n```"
        if kind == "hr":
            self.i += 1
            return "———"
        if kind == "html_block":
            self.i += 1
            return tok.content.rstrip("\n")
        if kind in ("bullet_list_open", "ordered_list_open"):
            return self._list(0)
        if kind == "blockquote_open":
            return self._quote()
        if kind == "table_open":
            return self._table()
        self.i += 1
        return ""

    def _until_close(self, close: str) -> list[str]:
        """The blocks up to the matching ``close`` token (consumed)."""
        blocks: list[str] = []
        while self.i < len(self.tokens) and self.tokens[self.i].type != close:
            blocks.append(self._block())
        self.i += 1
        return blocks

    def _quote(self) -> str:
        self.i += 1
        inner = "\n\n".join(b for b in self._until_close("blockquote_close") if b.strip())
        return "\n".join(f"> {line}" if line else ">" for line in inner.split("\n"))

    def _list(self, depth: int) -> str:
        opener = self.tokens[self.i]
        ordered = opener.type == "ordered_list_open"
        number = int(opener.attrs.get("start", 1) or 1) if ordered else 0
        close = "ordered_list_close" if ordered else "bullet_list_close"
        self.i += 1
        lines: list[str] = []
        indent = "  " * depth
        while self.tokens[self.i].type != close:
            self.i += 1  # list_item_open
            parts: list[str] = []
            while self.tokens[self.i].type != "list_item_close":
                tok = self.tokens[self.i]
                if tok.type in ("bullet_list_open", "ordered_list_open"):
                    parts.append(self._list(depth + 1))
                else:
                    block = self._block()
                    if block:
                        parts.append(block)
            self.i += 1  # list_item_close
            marker = f"{number}. " if ordered else "- "
            number += 1
            first, *rest = parts or [""]
            first_lines = first.split("\n")
            item = [indent + marker + first_lines[0], *(indent + "  " + ln for ln in first_lines[1:])]
            for part in rest:
                item += (
                    part.split("\n")
                    if part.startswith(indent + "  ")
                    else [indent + "  " + ln for ln in part.split("\n")]
                )
            lines += item
        self.i += 1
        return "\n".join(lines)

    def _table(self) -> str:
        rows: list[list[str]] = []
        row: list[str] = []
        while self.tokens[self.i].type != "table_close":
            tok = self.tokens[self.i]
            if tok.type == "tr_open":
                row = []
            elif tok.type == "inline":
                row.append(_inline(tok.children).replace("\n", " "))
            elif tok.type == "tr_close":
                rows.append(row)
            self.i += 1
        self.i += 1
        width = max((len(r) for r in rows), default=0)
        cols = [max((len(r[c]) if c < len(r) else 0) for r in rows) for c in range(width)]
        lines = [" | ".join((r[c] if c < len(r) else "").ljust(cols[c]) for c in range(width)).rstrip() for r in rows]
        if len(lines) > 1:
            lines.insert(1, "-+-".join("-" * w for w in cols))
        return "```\n" + "\n".join(lines) + "\n```"
