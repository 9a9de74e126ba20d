"""Block Kit ``blocks`` of a chat.postMessage as the mock Slack checks them, and what a person reads of them.

Rules (https://docs.slack.dev/reference/block-kit/blocks, https://docs.slack.dev/reference/methods/chat.postMessage):

- ``blocks``: a JSON array (a JSON string in a form body) of at most :data:`MAX_BLOCKS` objects, each with a known
  ``type``; anything else is ``invalid_blocks`` (Slack adds the reason in ``response_metadata.messages``; the mock
  answers the error alone). With ``blocks`` the top-level ``text`` is optional: it becomes the notification fallback.
- ``image`` (https://docs.slack.dev/reference/block-kit/blocks/image-block): ``alt_text`` required, at most 2000
  characters; ``image_url`` (at most 3000 characters, http(s)) or ``slack_file`` required; ``title`` optional, a
  ``plain_text`` object of at most 2000 characters.
- ``section`` (https://docs.slack.dev/reference/block-kit/blocks/section-block): ``text`` (a ``mrkdwn`` or
  ``plain_text`` object, 1-3000 characters) or ``fields`` required.
- ``actions``: buttons, checked by :mod:`mocks.slack.actions` (text 75, action_id 255, value 2000).
- ``markdown`` (``text`` 1-12000 characters), ``context``, ``divider``, ``header``, ``rich_text``: their
  type is taken; only ``markdown``'s text is checked.

What a person reads of a message with blocks (the mock's ``text`` of it, what ``visible`` and the control API show):
an image's title (``""`` without one: a media message shows its caption), a section's text with each mrkdwn link
``<url|label>`` read as its label, a markdown block's text; one block per line. A message with an image block keeps
``media`` = ``{"kind": "image", "url", "caption"}``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from streamrelay.mocks.slack.actions import check_actions
from streamrelay.mocks.slack.workspace import SlackError

MAX_BLOCKS = 50
MAX_ALT_TEXT = 2000
MAX_IMAGE_URL = 3000
MAX_TITLE = 2000
MAX_SECTION_TEXT = 3000
MAX_MARKDOWN_BLOCK = 12_000
KNOWN_TYPES = frozenset({"image", "section", "markdown", "actions", "context", "divider", "header", "rich_text"})
_LINK = re.compile(r"<([^<>|]+)\|([^<>]*)>|<([^<>|]+)>")


@dataclass(frozen=True)
class BlocksView:
    """Checked blocks: ``blocks`` as given, ``text`` what a person reads of them, ``media`` of an image block."""

    blocks: list[dict[str, Any]]
    text: str
    media: dict[str, Any] | None = None


def read_blocks(params: Mapping[str, Any]) -> BlocksView | None:
    """The checked ``blocks`` of a call, or None without any.

    Raises:
        SlackError: ``invalid_blocks`` (not a JSON array of objects, too many, a required field missing or too
            long), ``invalid_blocks_format`` (a string that is not JSON).
    """
    raw = params.get("blocks")
    if raw is None or raw == "":
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise SlackError("invalid_blocks_format") from None
    if not isinstance(raw, list) or not raw or len(raw) > MAX_BLOCKS:
        raise SlackError("invalid_blocks")
    lines: list[str] = []
    media: dict[str, Any] | None = None
    action_ids: set[str] = set()
    for block in raw:
        if not isinstance(block, dict) or block.get("type") not in KNOWN_TYPES:
            raise SlackError("invalid_blocks")
        if block["type"] == "image":
            media = _image(block)
            lines.append(media["caption"] or "")
        elif block["type"] == "section":
            lines.append(_section(block))
        elif block["type"] == "markdown":
            lines.append(_text(block.get("text"), MAX_MARKDOWN_BLOCK))
        elif block["type"] == "actions":
            check_actions(block, action_ids)  # buttons: mocks/slack/actions.py
    return BlocksView(raw, "\n".join(line for line in lines if line) if len(lines) > 1 else "".join(lines), media)


def _image(block: dict[str, Any]) -> dict[str, Any]:
    alt = block.get("alt_text")
    if not isinstance(alt, str) or not alt or len(alt) > MAX_ALT_TEXT:
        raise SlackError("invalid_blocks")
    url = block.get("image_url")
    if url is None and isinstance(block.get("slack_file"), dict):
        url = ""
    elif not isinstance(url, str) or not url.startswith(("http://", "https://")) or len(url) > MAX_IMAGE_URL:
        raise SlackError("invalid_blocks")
    title = block.get("title")
    caption = None
    if title is not None:
        if not isinstance(title, dict) or title.get("type") != "plain_text":
            raise SlackError("invalid_blocks")
        caption = _text(title, MAX_TITLE)
    return {"kind": "image", "url": url, "caption": caption}


def _section(block: dict[str, Any]) -> str:
    text, fields = block.get("text"), block.get("fields")
    if text is None and not fields:
        raise SlackError("invalid_blocks")
    if text is None:
        return ""
    if not isinstance(text, dict) or text.get("type") not in ("mrkdwn", "plain_text"):
        raise SlackError("invalid_blocks")
    shown = _text(text, MAX_SECTION_TEXT)
    if text["type"] == "mrkdwn":
        shown = _LINK.sub(lambda m: m.group(2) if m.group(1) else m.group(3), shown)
    return shown.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _text(obj: Any, limit: int) -> str:
    """A text object's (or a markdown block's) text: 1 to ``limit`` characters."""
    text = obj.get("text") if isinstance(obj, dict) else obj
    if not isinstance(text, str) or not text or len(text) > limit:
        raise SlackError("invalid_blocks")
    return text
