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

from adapters.markdown_strip import strip_markdown
from core.ports import TextFormat

_MD_SPECIAL = re.compile(r"([\\`*_~\[\]<>&#|])")


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
