"""Text rendering for Matrix: the ``m.room.message`` content of a text, its edit, and their size in bytes.

``markdown``: ``body`` is the Markdown as written (the plain-text version a text-only client shows, as Element's
composer sends it) and, when the Markdown formats anything, ``format: org.matrix.custom.html`` with
``formatted_body``, HTML rendered by markdown-it-py (CommonMark, tables, strikethrough) and kept inside the spec's
suggested set of tags and attributes (https://spec.matrix.org/latest/client-server-api/#mroommessage-msgtypes,
"Rich text"): raw HTML in the agent's text is escaped, never passed on; ``~~strike~~`` is ``<del>`` (``s`` is not in
the set); an image is a link to it (``img`` may only show ``mxc://`` URIs); a link whose scheme is not ``https``,
``http``, ``ftp``, ``mailto`` or ``magnet`` stays text. The tags this can produce are :data:`TAGS`. ``plain``: the text
as ``body`` alone. ``stripped``: the Markdown's markup removed (:func:`adapters.markdown_strip.strip_markdown`).
Invisible characters are removed first, in every format (:func:`adapters.invisible.strip_invisible`).

Mentions: every content carries ``m.mentions: {}`` unless the channel allows mentions: with that key present a
client's legacy push rules (display name, ``@room``) no longer fire on the body's words, and no one is mentioned
(https://spec.matrix.org/latest/client-server-api/#user-and-room-mentions).

An edit (https://spec.matrix.org/latest/client-server-api/#event-replacements) is an ``m.room.message`` whose
``m.new_content`` is the new content and whose ``m.relates_to`` is ``{"rel_type": "m.replace", "event_id"}``, with
the fallback ``body`` ``* `` + the new body for clients without edits. Its size counts: an event must stay within
65,536 bytes of JSON (https://spec.matrix.org/latest/client-server-api/#size-limits), and an edit carries the text
about twice, so :attr:`Rendered.units` is the size of the edit's content.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from streamrelay.adapters.invisible import strip_invisible
from streamrelay.adapters.markdown_strip import strip_markdown
from streamrelay.core.ports import TextFormat

HTML_FORMAT = "org.matrix.custom.html"
LINK_SCHEMES = ("https:", "http:", "ftp:", "mailto:", "magnet:")
"""``a href`` must be absolute with one of these schemes (the spec's "Rich text" attribute list)."""
TAGS = frozenset(
    {"p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "ul", "ol", "li", "strong", "em", "del"}
    | {"code", "pre", "a", "table", "thead", "tbody", "tr", "th", "td"}
)
"""Every tag :func:`render` can write: all in the spec's suggested set (``font``, ``del``, ``h1``-``h6``,
``blockquote``, ``p``, ``a``, ``ul``, ``ol``, ``sup``, ``sub``, ``li``, ``b``, ``i``, ``u``, ``strong``, ``em``,
``strike``, ``code``, ``hr``, ``br``, ``div``, ``table``, ``thead``, ``tbody``, ``tr``, ``th``, ``td``, ``caption``,
``pre``, ``span``, ``img``, ``details``, ``summary``)."""
EVENT_ID_STAND_IN = "$" + "A" * 43
"""An event id as long as a real one (room versions 4+): what an edit's size is measured with."""


def _link_ok(url: str) -> bool:
    return url.strip().lower().startswith(LINK_SCHEMES)


class _MatrixHTML(RendererHTML):
    """markdown-it's HTML renderer with the two rules the spec's set needs: ``<del>`` for strikethrough, images as
    links."""

    def s_open(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return "<del>"

    def s_close(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return "</del>"

    def image(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        token = tokens[idx]
        src = str(token.attrGet("src") or "")
        label = html.escape(self.renderInlineAsText(token.children or [], options, env) or src)
        return f'<a href="{html.escape(src)}">{label}</a>' if _link_ok(src) else label


_MD = MarkdownIt("commonmark", {"html": False}, renderer_cls=_MatrixHTML).enable(["table", "strikethrough"])
_MD.validateLink = _link_ok  # type: ignore[method-assign]


_ALIGN = re.compile(r' style="text-align:(?:left|right|center)"')
"""A table cell's alignment: ``style`` is no attribute the spec lets ``th`` / ``td`` carry."""


def markdown_html(text: str) -> str:
    """``text`` (Markdown) as the sanitized ``formatted_body`` (module docstring), its final newline removed."""
    return _ALIGN.sub("", _MD.render(text)).rstrip("\n")


@dataclass(frozen=True, slots=True)
class Rendered:
    """What a send or an edit carries for one text.

    Attributes:
        content: the ``m.room.message`` content of a new message.
        units: bytes of the JSON of its edit's content (:func:`edit_content`), the larger of the two.
    """

    content: dict[str, Any]
    units: int


def json_bytes(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON (how nio sends it and how the homeserver counts it)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def edit_content(content: dict[str, Any], event_id: str) -> dict[str, Any]:
    """The content of an edit making event ``event_id`` show ``content`` (module docstring)."""
    edit: dict[str, Any] = {
        "msgtype": content["msgtype"],
        "body": f"* {content['body']}",
        "m.new_content": content,
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
    }
    if "m.mentions" in content:
        edit["m.mentions"] = {}
    return edit


def render(text: str, fmt: TextFormat, *, mentions: bool = False) -> Rendered:
    """The content Matrix receives for ``text`` in ``fmt`` (module docstring); pure.

    Args:
        text: the text as the agent wrote it.
        fmt: ``plain``, ``markdown`` or ``stripped``.
        mentions: the channel lets agent text mention people (no ``m.mentions: {}``).
    """
    text = strip_invisible(text)
    content: dict[str, Any] = {"msgtype": "m.text"}
    if fmt is TextFormat.STRIPPED:
        content["body"] = strip_markdown(text)
    elif fmt is TextFormat.MARKDOWN:
        content["body"] = text
        formatted = markdown_html(text)
        if formatted != f"<p>{html.escape(text, quote=False)}</p>":
            content["format"], content["formatted_body"] = HTML_FORMAT, formatted
    else:
        content["body"] = text
    if not mentions:
        content["m.mentions"] = {}
    return Rendered(content, json_bytes(edit_content(content, EVENT_ID_STAND_IN)))
