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

Agent text is made inert before it is sent (:func:`inert_markdown`, :func:`escape_text`; Slack's rule:
https://docs.slack.dev/messaging/formatting-message-text/#escaping): invisible characters go first
(:func:`adapters.invisible.strip_invisible`); then Slack's control sequences (``<!channel>``, ``<!here>``,
``<!everyone>``, ``<!subteam^…>``, ``<@U…>``, ``<#C…>``, and links ``<url|label>``) are escaped, ``<`` as ``&lt;``,
unless the channel allows them (:class:`core.ports.MarkupPermissions`). In ``text`` every ``&``, ``<``, ``>`` is
escaped as Slack asks. In ``markdown_text`` (CommonMark, where ``&lt;`` is a literal ``<`` too) only the ``<`` that
opens a control sequence or a ``<scheme:`` autolink is, and the ``&`` that opens a character reference (so that
``&lt;!channel&gt;`` stays those characters); code spans and fenced code are left as written (their text is shown
verbatim, escaped it would show ``&lt;``) except Slack's own mentions (``<!channel>``, ``<@U…>``: never code).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from streamrelay.adapters.invisible import strip_invisible
from streamrelay.adapters.markdown_strip import strip_markdown
from streamrelay.core.media import MediaItem, MediaKind
from streamrelay.core.ports import MarkupPermissions, TextFormat
from streamrelay.core.units import LengthUnit, text_units

_MD_SPECIAL = re.compile(r"([\\`*_~\[\]<>&#|])")
INERT = MarkupPermissions()
"""Neither mentions nor platform links: the default of every channel."""

_CONTROL = re.compile(r"(?P<mention><[!@#][^<>\n]*>)|(?P<link><[A-Za-z][A-Za-z0-9+.\-]*:[^<>|\s]*(?:\|[^<>\n]*)?>)")
"""Slack's control sequences in ``text`` (https://docs.slack.dev/messaging/formatting-message-text): special mentions
``<!…>``, user and channel mentions ``<@…>``, ``<#…>``; links ``<url>`` and ``<url|label>``."""
_MD_OPENER = re.compile(
    r"(?P<mention><(?=[!@#]))|(?P<link><(?=[A-Za-z][A-Za-z0-9+.\-]*:))"
    r"|(?P<ref>&(?=#[0-9]{1,7};|#[xX][0-9A-Fa-f]{1,6};|[A-Za-z][A-Za-z0-9]{1,31};))"
)
"""In ``markdown_text``: the ``<`` that opens a mention or a link, the ``&`` that opens a character reference. Each
decided by the characters right after it, so that a streamed text's rendering extends its prefix's."""
_LINE_BREAKS_SPAN = r"\n(?:[ \t]*(?:\n|\Z)| {0,3}[>#*+=_`~<|0-9-])"
"""A line break a code span does not cross: a blank line (a paragraph break,
https://spec.commonmark.org/0.31.2/#code-spans: spans are inline, inside one paragraph), or a line that may start
another block (a quote, heading, list item, fence, HTML, table, setext underline or thematic break). Ending a span
early only escapes more: what is wrongly read as text gets ``&lt;``; what is wrongly read as code would reach Slack."""
_CODE = re.compile(
    r"^ {0,3}(?P<fence>`{3,}(?=[^`\n]*$)|~{3,})[^\n]*(?:\n.*?(?:\n {0,3}(?P=fence)[`~]*[ \t]*(?=\n|\Z)|\Z)|\Z)"
    rf"|(?<!`)(?P<ticks>`+)(?!`)(?:(?!{_LINE_BREAKS_SPAN}).)+?(?<!`)(?P=ticks)(?!`)",
    re.MULTILINE | re.DOTALL,
)
"""Fenced code blocks (to their closing fence or the end; a backtick fence's info string holds no backtick,
https://spec.commonmark.org/0.31.2/#fenced-code-blocks) and inline code spans within one paragraph
(:data:`_LINE_BREAKS_SPAN`): left as written, but for :data:`_MENTION_IN_CODE`."""
_MENTION_IN_CODE = re.compile(r"<(?=!(?:channel|here|everyone|subteam\^)|@[UWB][A-Z0-9]+[>|]|#C[A-Z0-9]+[>|])")
"""Inside code, only the ``<`` of Slack's own mentions (never code: ``<!DOCTYPE>`` and ``<!--`` stay as written), in
case Slack's Markdown conversion still reads them there; escaped, code shows ``&lt;`` in their place."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """One message body: ``field`` is ``markdown_text`` or ``text``; ``body`` the string sent in it; ``units`` its
    length in UTF-16 units (the adapter's ``max_units`` counts them)."""

    field: str
    body: str
    units: int

    def args(self) -> dict[str, Any]:
        """Keyword arguments for chat.postMessage / chat.update."""
        if self.field == "markdown_text":
            return {"markdown_text": self.body}
        return {"text": self.body, "mrkdwn": False}


def _escape_all(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_text(text: str, allowed: MarkupPermissions = INERT) -> str:
    """Escape Slack's control characters for ``text``: ``&``, ``<``, ``>`` as ``&amp;``, ``&lt;``, ``&gt;``
    (https://docs.slack.dev/messaging/formatting-message-text#escaping), except the mentions and links ``allowed``
    keeps (:data:`_CONTROL`)."""
    if not (allowed.mentions or allowed.platform_links):
        return _escape_all(text)
    out: list[str] = []
    at = 0
    for match in _CONTROL.finditer(text):
        if (allowed.mentions and match.group("mention")) or (allowed.platform_links and match.group("link")):
            out.append(_escape_all(text[at : match.start()]))
            out.append(match.group())
            at = match.end()
    out.append(_escape_all(text[at:]))
    return "".join(out)


def inert_markdown(text: str, allowed: MarkupPermissions = INERT) -> str:
    """``text`` (Markdown for ``markdown_text``) with Slack's control sequences that ``allowed`` does not keep made
    inert (module docstring): outside code, the ``<`` opening ``<!…>``, ``<@…>``, ``<#…>`` or ``<scheme:…`` becomes
    ``&lt;`` and the ``&`` opening a character reference ``&amp;``. Returns ``text`` itself when nothing changes."""
    if "<" not in text and "&" not in text:
        return text

    def opener(match: re.Match[str]) -> str:
        if match.group("ref") is not None:
            return "&amp;"
        if (match.group("mention") and allowed.mentions) or (match.group("link") and allowed.platform_links):
            return "<"
        return "&lt;"

    out: list[str] = []
    at = 0
    for code in _CODE.finditer(text):
        out.append(_MD_OPENER.sub(opener, text[at : code.start()]))
        out.append(code.group() if allowed.mentions else _MENTION_IN_CODE.sub("&lt;", code.group()))
        at = code.end()
    out.append(_MD_OPENER.sub(opener, text[at:]))
    return "".join(out)


def escape_markdown(text: str) -> str:
    """Backslash-escape the characters that start Markdown markup (CommonMark allows a backslash before any
    ASCII punctuation), so plain text shows as written in ``markdown_text``. Character by character: the
    escape of a longer text extends the escape of its prefix, which streaming relies on."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def render(text: str, fmt: TextFormat, allowed: MarkupPermissions = INERT) -> Rendered:
    """The body of a chat.postMessage / chat.update for ``text`` in ``fmt`` (module docstring): invisible characters
    removed, control sequences inert unless ``allowed``; pure (the adapter keeps the renderings of the texts in
    flight, :class:`adapters.rendering.RenderCache`)."""
    text = strip_invisible(text)
    if fmt is TextFormat.MARKDOWN:
        body = inert_markdown(text, allowed)
        return Rendered("markdown_text", body, text_units(body, LengthUnit.UTF16))
    body = escape_text(strip_markdown(text) if fmt is TextFormat.STRIPPED else text, allowed)
    return Rendered("text", body, text_units(body, LengthUnit.UTF16))


def stream_markdown(text: str, fmt: TextFormat, allowed: MarkupPermissions = INERT) -> str:
    """The ``markdown_text`` a stream shows for ``text`` in ``fmt`` (invisible characters removed, control sequences
    inert unless ``allowed``, like :func:`render`)."""
    text = strip_invisible(text)
    if fmt is TextFormat.MARKDOWN:
        return inert_markdown(text, allowed)
    return escape_markdown(strip_markdown(text) if fmt is TextFormat.STRIPPED else text)


MEDIA_ICONS = {"image": "🖼", "file": "📎", "audio": "🎵", "video": "🎬"}
"""What starts a media link's line, per kind."""
MAX_ALT_TEXT = 2000
"""An image block's ``alt_text`` and ``title`` limit (https://docs.slack.dev/reference/block-kit/blocks/image-block)."""


def media_message(media: MediaItem, fmt: TextFormat) -> tuple[str, list[dict[str, Any]]]:
    """``(text, blocks)`` of a chat.postMessage that shows ``media`` as its own message.

    An image: one image block (``image_url``, ``alt_text`` = the caption or "image", ``title`` = the caption when
    there is one; https://docs.slack.dev/reference/block-kit/blocks/image-block). A file, an audio or a video: one
    section block whose mrkdwn text is a link ``<url|label>``, the label being the caption or the file's name
    (https://docs.slack.dev/messaging/formatting-message-text#linking-urls). ``text`` is the notification fallback
    (https://docs.slack.dev/reference/methods/chat.postMessage: "the fallback string to display in notifications").
    The caption is plain text in either block: Markdown (``fmt`` ``markdown``) has its markup removed.
    """
    caption = strip_invisible(media.caption or "")
    if caption and fmt is not TextFormat.PLAIN:
        caption = strip_markdown(caption)
    name = media.url.rstrip("/").rsplit("/", 1)[-1] or media.url
    fallback = f"{MEDIA_ICONS[media.kind]} {escape_text(caption or name)}"  # mrkdwn: "<!channel>" would notify
    if media.kind is MediaKind.IMAGE:
        block: dict[str, Any] = {
            "type": "image",
            "image_url": media.url,
            "alt_text": (caption or "image")[:MAX_ALT_TEXT],
        }
        if caption:
            block["title"] = {"type": "plain_text", "text": caption[:MAX_ALT_TEXT]}
        return fallback, [block]
    label = escape_text(caption or name).replace("|", "¦")  # a label holds no "|" (it ends the URL part)
    link = f"<{media.url}|{label}>"  # the caption alone is what a person reads (Slack unfurls the link below it)
    return fallback, [{"type": "section", "text": {"type": "mrkdwn", "text": link}}]
