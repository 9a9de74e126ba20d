"""Message components on the mock Discord: checked as the API does, kept on the message, pressed by tests.

Rules (https://discord.com/developers/docs/components/reference):

- ``components`` of a create or an edit: at most 5 action rows (type 1), each with 1-5 buttons (type 2); a button
  has ``style`` 1-5, a ``label`` of at most 80 characters, and a ``custom_id`` of 1-100 characters (unique in the
  message) unless it is a link button (style 5, ``url``). Anything else is 400 code 50035 naming the field.
- An edit without ``components`` keeps them; ``"components": []`` removes them
  (https://discord.com/developers/docs/resources/message#edit-message).
- A press reaches the app as a gateway dispatch ``INTERACTION_CREATE`` with an interaction of type 3
  (MESSAGE_COMPONENT): ``{"op": 0, "t": "INTERACTION_CREATE", "s", "d": {"id", "application_id", "type": 3,
  "data": {"custom_id", "component_type": 2}, "guild_id", "channel_id", "channel", "member": {"user", "roles",
  "joined_at", …}, "token", "version": 1,
  "message", "entitlements", "attachment_size_limit"}}``
  (https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-object; discord.py 2.7
  reads ``attachment_size_limit`` as required);
  :func:`interaction_create` builds it.
"""

from __future__ import annotations

import itertools
import secrets
from typing import Any

from streamrelay.mocks.discord.threads import GUILD_ID
from streamrelay.mocks.discord.wire import ApiError, form_error, user_json

ATTACHMENT_SIZE_LIMIT = 10 * 1024 * 1024
"""An interaction's ``attachment_size_limit`` in bytes (a server without boosts: 10 MiB)."""
MAX_ROWS = 5
MAX_BUTTONS = 5
MAX_LABEL = 80
MAX_CUSTOM_ID = 100
PRESSER_ID = "500000000000000002"
"""The user who presses buttons."""
APPLICATION_ID = "400000000000000001"
_interaction_ids = itertools.count(900_000_000_000_000_001)
_sequence = itertools.count(1)


def components_of(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The checked ``components`` of a create or edit body (None: not given).

    Raises:
        ApiError: 400 50035 naming the bad field.
    """
    if "components" not in body or body["components"] is None:
        return None
    rows = body["components"]
    if not isinstance(rows, list) or len(rows) > MAX_ROWS:
        raise form_error("components", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_ROWS} or fewer in length.")
    seen: set[str] = set()
    for r, row in enumerate(rows):
        items = row.get("components") if isinstance(row, dict) and row.get("type") == 1 else None
        if not isinstance(items, list) or not 1 <= len(items) <= MAX_BUTTONS:
            raise form_error(f"components.{r}", "COMPONENT_LAYOUT_WIDTH_EXCEEDED", "An action row holds 1-5 buttons.")
        for c, button in enumerate(items):
            _check_button(button, f"components.{r}.components.{c}", seen)
    return rows


def _check_button(button: Any, where: str, seen: set[str]) -> None:
    if not isinstance(button, dict) or button.get("type") != 2:
        raise form_error(f"{where}.type", "UNION_TYPE_CHOICES", 'Value of field "type" must be one of (2,).')
    style = button.get("style")
    if style not in (1, 2, 3, 4, 5):
        raise form_error(f"{where}.style", "BASE_TYPE_CHOICES", "Value must be one of (1, 2, 3, 4, 5).")
    label = button.get("label")
    if label is not None and (not isinstance(label, str) or len(label) > MAX_LABEL):
        raise form_error(f"{where}.label", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_LABEL} or fewer in length.")
    if style == 5:
        if not isinstance(button.get("url"), str):
            raise form_error(f"{where}.url", "BASE_TYPE_REQUIRED", "This field is required")
        return
    custom_id = button.get("custom_id")
    if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= MAX_CUSTOM_ID:
        message = f"Must be between 1 and {MAX_CUSTOM_ID} in length."
        raise form_error(f"{where}.custom_id", "BASE_TYPE_BAD_LENGTH", message)
    if custom_id in seen:
        raise form_error(f"{where}.custom_id", "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id is duplicated")
    seen.add(custom_id)


def custom_ids(rows: list[dict[str, Any]] | None) -> list[str]:
    """The ``custom_id`` of every button in ``rows``, in order."""
    return [c["custom_id"] for row in rows or [] for c in row.get("components", []) if "custom_id" in c]


def interaction_create(message: dict[str, Any], custom_id: str, user: str | None = None) -> dict[str, Any]:
    """The gateway dispatch of a press of button ``custom_id`` on ``message`` (a message object) by ``user`` (a
    user id; None: :data:`PRESSER_ID`)."""
    interaction = {
        "id": str(next(_interaction_ids)),
        "application_id": APPLICATION_ID,
        "type": 3,
        "data": {"custom_id": custom_id, "component_type": 2},
        "guild_id": GUILD_ID,  # the mock's channels are a guild's: a press there carries the guild and the member
        "channel_id": message["channel_id"],
        "channel": {  # the partial channel an interaction carries
            "id": message["channel_id"],
            "type": 0,
            "guild_id": GUILD_ID,
            "name": "general",
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
        },
        "member": {
            "user": user_json(user or PRESSER_ID, bot=False),
            "roles": [],
            "joined_at": "2026-01-01T00:00:00.000000+00:00",
            "deaf": False,
            "mute": False,
            "flags": 0,
            "permissions": "0",
        },
        "token": secrets.token_urlsafe(24),
        "version": 1,
        "message": message,
        "entitlements": [],
        "attachment_size_limit": ATTACHMENT_SIZE_LIMIT,
    }
    return {"op": 0, "t": "INTERACTION_CREATE", "s": next(_sequence), "d": interaction}


__all__ = ["ApiError", "components_of", "custom_ids", "interaction_create"]
