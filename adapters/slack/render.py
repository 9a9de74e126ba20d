"""Text rendering for Slack: what goes in ``markdown_text``, what goes in ``text``.

Slack takes standard Markdown in ``markdown_text`` (chat.postMessage, chat.update and the stream methods) and
its own mrkdwn in ``text`` (https://docs.slack.dev/messaging/formatting-message-text). So:

- ``markdown``: the Markdown as written, in ``markdown_text`` (no conversion, nothing to fail to convert).
- ``plain``: ``text`` with ``&``, ``<``, ``>`` escaped as ``&amp;``, ``&lt;``, ``&gt;`` (Slack's control
  characters: https://docs.slack.dev/messaging/formatting-message-text#escaping) and ``mrkdwn=false``.
- ``stripped``: the Markdown with its markup removed (parsed with markdown-it-py, CommonMark plus tables and
  strikethrough), then sent like ``plain``.

Streams take ``markdown_text`` only: plain text is streamed with Markdown's inline markup characters
backslash-escaped (:func:`escape_markdown`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from core.ports import TextFormat

_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_MD_SPECIAL = re.compile(r"([\\`*_~\[\]<>&#|])")
_BLOCK_JOIN = "\n\n"


@dataclass(frozen=True)
class Rendered:
    """One message body: ``field`` is ``markdown_text`` or ``text``; ``body`` the string sent in it."""

    field: str
    body: str

    def args(self) -> dict[str, Any]:
        """Keyword arguments for chat.postMessage / chat.update."""
        if self.field == "markdown_text":
            return {"markdown_text": self.body}
        return {"text": self.body, "mrkdwn": False}


def escape_text(text: str) -> str:
    """Escape Slack's control characters for ``text`` (https://docs.slack.dev/messaging/formatting-message-text#escaping)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_markdown(text: str) -> str:
    """Backslash-escape the characters that start Markdown markup (CommonMark allows a backslash before any
    ASCII punctuation), so plain text shows as written in ``markdown_text``. Character by character: the
    escape of a longer text extends the escape of its prefix, which streaming relies on."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def render(text: str, fmt: TextFormat) -> Rendered:
    """The body of a chat.postMessage / chat.update for ``text`` in ``fmt`` (module docstring)."""
    if fmt is TextFormat.MARKDOWN:
        return Rendered("markdown_text", text)
    plain = strip_markdown(text) if fmt is TextFormat.STRIPPED else text
    return Rendered("text", escape_text(plain))


def stream_markdown(text: str, fmt: TextFormat) -> str:
    """The ``markdown_text`` a stream shows for ``text`` in ``fmt``."""
    if fmt is TextFormat.MARKDOWN:
        return text
    return escape_markdown(strip_markdown(text) if fmt is TextFormat.STRIPPED else text)


# ---------------------------------------------------------------- stripping


def strip_markdown(text: str) -> str:
    """``text`` with its Markdown markup removed: emphasis, code and fence markers, headings' ``#``, quotes'
    ``>``, table pipes of the delimiter row; list items become ``• `` / ``N. ``; a link keeps its URL in
    parentheses when the label differs; raw HTML is kept as text."""
    return _blocks(SyntaxTreeNode(_MD.parse(text)).children, _BLOCK_JOIN)


def _blocks(nodes: list[SyntaxTreeNode], joiner: str) -> str:
    return joiner.join(part for part in (_block(node) for node in nodes) if part)


def _block(node: SyntaxTreeNode) -> str:
    kind = node.type
    if kind in ("paragraph", "heading"):
        return _inline(node.children)
    if kind in ("fence", "code_block", "html_block"):
        return node.content.rstrip("\n")
    if kind == "blockquote":
        return _blocks(node.children, _BLOCK_JOIN)
    if kind in ("bullet_list", "ordered_list"):
        return _list(node)
    if kind == "table":
        rows = [row for section in node.children for row in section.children]
        return "\n".join(" | ".join(_inline(cell.children) for cell in row.children) for row in rows)
    if kind == "hr":
        return "———"
    return _inline(node.children)


def _list(node: SyntaxTreeNode) -> str:
    start = int(str(node.attrs.get("start", 1))) if node.type == "ordered_list" else 0
    items = []
    for n, item in enumerate(node.children, start):
        marker = f"{n}. " if node.type == "ordered_list" else "• "
        body = _blocks(item.children, "\n").replace("\n", "\n" + " " * len(marker))
        items.append(marker + body)
    return "\n".join(items)


def _inline(nodes: list[SyntaxTreeNode]) -> str:
    parts: list[str] = []
    for node in nodes:
        kind = node.type
        if kind in ("text", "code_inline", "html_inline"):
            parts.append(node.content)
        elif kind in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif kind == "link":
            label, href = _inline(node.children), str(node.attrs.get("href", ""))
            parts.append(label if not href or href in (label, f"mailto:{label}") else f"{label} ({href})")
        else:  # inline (the block's content), strong, em, s, image (its alt text)
            parts.append(_inline(node.children))
    return "".join(parts)
