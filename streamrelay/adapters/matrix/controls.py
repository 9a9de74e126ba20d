"""Buttons on Matrix (:class:`core.ports.StopControls`): reactions the bot puts on its own message.

Matrix messages carry no buttons (``m.room.message`` has none; bot buttons are an open proposal, MSC3006). What
Matrix bots do instead is ask for a reaction: the bot puts the choices on its message as its own ``m.reaction``
annotations (``✅``, ``❌``; ``⏹`` for Stop), a person taps one, which sends their own ``m.reaction`` with the same key
(https://spec.matrix.org/latest/client-server-api/#event-annotations-and-reactions), and the bot reads it from its
sync. So:

- Putting a control on message ``E``: one ``m.reaction`` per button, ``m.relates_to`` ``{"rel_type":
  "m.annotation", "event_id": E, "key": <the label's emoji>}`` and :data:`CONTROL_KEY` naming the control id
  (``approve:<run16>:<id16>``, ``stop:<run16>``), sent by transaction id (``ctl-`` and a hash of the message and the
  control id: a repeat is deduplicated by the homeserver), a 400 ``M_DUPLICATE_ANNOTATION`` (the same key again,
  after the transaction ids were forgotten) counts as done.
- Taking it off: the bot's own reactions on ``E`` that carry :data:`CONTROL_KEY` are redacted (found with ``GET
  /_matrix/client/v1/rooms/{roomId}/relations/{E}/m.annotation/m.reaction``, nio's ``room_get_event_relations``).
  A person's reactions stay (they are theirs); a later reaction on ``E`` has no bot reaction of its key to name a
  control, so the bot forwards nothing.
- A press: a person's ``m.reaction`` on ``E`` whose key is that of a bot reaction on ``E`` with :data:`CONTROL_KEY`:
  the bot forwards that control id (docs/approvals.md, the Matrix snippet: :func:`control_of`).

Edits (``m.replace``) do not touch reactions: the adapter's edits of a message keep its control.
"""

from __future__ import annotations

import hashlib
from typing import Any

CONTROL_KEY = "io.streamrelay.control"
"""The content key of the bot's own reactions naming the control id a reaction with their key presses (namespaced
custom key, https://spec.matrix.org/latest/#namespacing)."""
REACTION = "m.reaction"
ANNOTATION = "m.annotation"


def reaction_key(label: str) -> str:
    """The key a button's ``label`` is offered as: its leading emoji (``✅ Approve`` → ``✅``), else the label."""
    head = label.split(" ", 1)[0]
    return head if head and not any(ch.isalnum() for ch in head) else label


def seed_content(message_id: str, control_id: str, label: str) -> dict[str, Any]:
    """The bot's ``m.reaction`` offering button ``control_id`` on message ``message_id``."""
    return {
        "m.relates_to": {"rel_type": ANNOTATION, "event_id": message_id, "key": reaction_key(label)},
        CONTROL_KEY: control_id,
    }


def seed_txn(message_id: str, control_id: str) -> str:
    """The transaction id of that reaction: the same for the same message and control (a repeat dedupes)."""
    return "ctl-" + hashlib.sha256(f"{message_id}\n{control_id}".encode()).hexdigest()[:32]


def control_of(reactions: list[dict[str, Any]], bot_user: str, key: str) -> str | None:
    """The control id a person's reaction with ``key`` presses, from the reactions on the message (each an event's
    JSON: ``sender``, ``content``): the bot's own reaction with that key and a :data:`CONTROL_KEY`; None: no such
    button (taken off, or a reaction of the person's own choosing)."""
    for event in reactions:
        content = event.get("content") or {}
        relates = content.get("m.relates_to") or {}
        if event.get("sender") == bot_user and relates.get("key") == key and isinstance(content.get(CONTROL_KEY), str):
            return str(content[CONTROL_KEY])
    return None
