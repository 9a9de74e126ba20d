"""Buttons on the mock Slack: ``actions`` blocks checked as Block Kit does, and a press as the app receives it.

Rules (https://docs.slack.dev/reference/block-kit/blocks/actions-block,
https://docs.slack.dev/reference/block-kit/block-elements/button-element):

- An ``actions`` block has ``elements``: 1-25 interactive elements; ``block_id`` at most 255 characters.
- A ``button`` has ``text`` (a ``plain_text`` object, at most 75 characters), ``action_id`` (at most 255
  characters, unique in the message), optional ``value`` (at most 2000 characters), ``style`` ``primary`` or
  ``danger``. Anything else is ``invalid_blocks``.
- A press reaches the app as an interaction payload of type ``block_actions``
  (https://docs.slack.dev/reference/interaction-payloads/block_actions-payload): ``{"type": "block_actions",
  "user", "team", "api_app_id", "container": {"type": "message", "message_ts", "channel_id"}, "channel",
  "message", "trigger_id", "response_url", "actions": [{"type": "button", "action_id", "block_id", "value",
  "text", "action_ts"}]}``; :func:`block_actions` builds it.
"""

from __future__ import annotations

import time
from typing import Any

from streamrelay.mocks.slack.workspace import TEAM_ID, SlackError

MAX_ELEMENTS = 25
MAX_BUTTON_TEXT = 75
MAX_ACTION_ID = 255
MAX_VALUE = 2000
MAX_BLOCK_ID = 255
PRESSER_ID = "U0PRESSER"
"""The user who presses buttons."""


def check_actions(block: dict[str, Any], seen: set[str]) -> None:
    """Check one ``actions`` block (module docstring); ``seen`` collects the message's action ids.

    Raises:
        SlackError: ``invalid_blocks``.
    """
    elements = block.get("elements")
    block_id = block.get("block_id")
    if block_id is not None and (not isinstance(block_id, str) or not block_id or len(block_id) > MAX_BLOCK_ID):
        raise SlackError("invalid_blocks")
    if not isinstance(elements, list) or not 1 <= len(elements) <= MAX_ELEMENTS:
        raise SlackError("invalid_blocks")
    for element in elements:
        if not isinstance(element, dict) or element.get("type") != "button":
            raise SlackError("invalid_blocks")  # the mock knows buttons only
        text = element.get("text")
        if not isinstance(text, dict) or text.get("type") != "plain_text":
            raise SlackError("invalid_blocks")
        label = text.get("text")
        if not isinstance(label, str) or not label or len(label) > MAX_BUTTON_TEXT:
            raise SlackError("invalid_blocks")
        action_id = element.get("action_id")
        if not isinstance(action_id, str) or not action_id or len(action_id) > MAX_ACTION_ID or action_id in seen:
            raise SlackError("invalid_blocks")
        seen.add(action_id)
        value = element.get("value")
        if value is not None and (not isinstance(value, str) or len(value) > MAX_VALUE):
            raise SlackError("invalid_blocks")
        if element.get("style") not in (None, "primary", "danger"):
            raise SlackError("invalid_blocks")


def buttons(blocks: list[dict[str, Any]] | None) -> list[tuple[str | None, dict[str, Any]]]:
    """``(block_id, button)`` of every button in ``blocks``, in order."""
    return [
        (block.get("block_id"), element)
        for block in blocks or []
        if block.get("type") == "actions"
        for element in block.get("elements", [])
    ]


def block_actions(
    message: dict[str, Any], channel: str, block_id: str | None, button: dict[str, Any], *, user: str | None = None
) -> dict[str, Any]:
    """The ``block_actions`` payload of a press of ``button`` on ``message`` (a message object) in ``channel`` by
    ``user`` (a Slack user id; None: :data:`PRESSER_ID`)."""
    now = f"{time.time():.6f}"
    action = {
        "type": "button",
        "action_id": button["action_id"],
        "block_id": block_id,
        "text": button["text"],
        "value": button.get("value"),
        "action_ts": now,
    }
    return {
        "type": "block_actions",
        "user": {"id": user or PRESSER_ID, "username": "person", "team_id": TEAM_ID},
        "api_app_id": "A0MOCKAPP",
        "team": {"id": TEAM_ID, "domain": "streamrelay-mock"},
        "container": {"type": "message", "message_ts": message["ts"], "channel_id": channel, "is_ephemeral": False},
        "channel": {"id": channel, "name": channel},
        "message": message,
        "trigger_id": f"{now}.mock",
        "response_url": "https://hooks.slack.com/actions/mock",
        "actions": [action],
    }
