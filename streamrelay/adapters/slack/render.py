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

from streamrelay.adapters.markdown_strip import strip_markdown
from streamrelay.core.media import MediaItem, MediaKind
from streamrelay.core.ports import TextFormat
from streamrelay.core.units import LengthUnit, text_units

_MD_SPECIAL = re.compile(r"([\\`*_~\[\]<>&#|])")


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


def escape_text(text: str) -> str:
    """Escape Slack's control characters for ``text`` (https://docs.slack.dev/messaging/formatting-message-text#escaping)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_markdown(text: str) -> str:
    """Backslash-escape the characters that start Markdown markup (CommonMark allows a backslash before any
    ASCII punctuation), so plain text shows as written in ``markdown_text``. Character by character: the
    escape of a longer text extends the escape of its prefix, which streaming relies on."""
    return _MD_SPECIAL.sub(r"\\\1", text)


def render(text: str, fmt: TextFormat) -> Rendered:
    """The body of a chat.postMessage / chat.update for ``text`` in ``fmt`` (module docstring); pure (the adapter
    keeps the renderings of the texts in flight, :class:`adapters.rendering.RenderCache`)."""
    if fmt is TextFormat.MARKDOWN:
        return Rendered("markdown_text", text, text_units(text, LengthUnit.UTF16))
    body = escape_text(strip_markdown(text) if fmt is TextFormat.STRIPPED else text)
    return Rendered("text", body, text_units(body, LengthUnit.UTF16))


def stream_markdown(text: str, fmt: TextFormat) -> str:
    """The ``markdown_text`` a stream shows for ``text`` in ``fmt``."""
    if fmt is TextFormat.MARKDOWN:
        return text
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
    caption = media.caption or ""
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
