"""Markdown with its markup removed: the text a person should read when formatting was refused.

Shared by the adapters whose platforms take plain text as the fallback (Slack ``text`` with mrkdwn off,
Discord ``content``): parsed with markdown-it-py (CommonMark plus tables and strikethrough), so fences, links
and lists are read as Markdown reads them, not guessed by pattern. The parser decodes character references
(``&#x200B;``, ``&shy;``) outside code: the invisible-character rule (:mod:`adapters.invisible`) runs again on each
decoded text, so none brings back a character the adapter removed.
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from streamrelay.adapters.invisible import strip_invisible

_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_BLOCK_JOIN = "\n\n"


def strip_markdown(text: str) -> str:
    """``text`` with its Markdown markup removed: emphasis, code and fence markers, headings' ``#``, quotes'
    ``>``, table pipes of the delimiter row; list items become ``• `` / ``N. ``; a link keeps its URL in
    parentheses when the label differs; raw HTML is kept as text; a character reference outside code that decodes
    into an invisible character (:func:`adapters.invisible.strip_invisible`) is removed, in code it stays."""
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
        if kind == "text":  # references decoded: the rule again (``&#x200B;`` must not become a ZWSP)
            parts.append(strip_invisible(node.content))
        elif kind in ("code_inline", "html_inline"):  # shown as written
            parts.append(node.content)
        elif kind in ("softbreak", "hardbreak"):
            parts.append("\n")
        elif kind == "link":
            label, href = _inline(node.children), str(node.attrs.get("href", ""))
            parts.append(label if not href or href in (label, f"mailto:{label}") else f"{label} ({href})")
        else:  # inline (the block's content), strong, em, s, image (its alt text)
            parts.append(_inline(node.children))
    return "".join(parts)
