"""Approval buttons on WhatsApp: an interactive reply-buttons message (:class:`ButtonMessages`).

A reply-buttons message is ``type: interactive`` with ``interactive: {"type": "button", "body": {"text"}, "action":
{"buttons": [{"type": "reply", "reply": {"id", "title"}}]}}``: at most 3 buttons, a title at most 20 characters, an
id at most 256 (https://developers.facebook.com/documentation/business-messaging/whatsapp/messages/interactive-reply-buttons-messages).
A tap reaches the app's webhook as a ``messages`` entry of ``type: interactive`` with ``interactive.button_reply``
``{"id", "title"}``, from the person (``from``: their WhatsApp id), and ``context.id`` the buttons message
(:mod:`adapters.whatsapp.webhook` reads it). It may only be sent inside the customer service window, like text.

WhatsApp cannot add buttons to a sent message, edit one or take buttons off, so the approval's buttons are a second
message: a reply to the approval's message (``context.message_id``) saying :data:`BODY`, with Approve and Deny. The
buttons stay after the decision (taking them off is refused, and the report says so); a tap after it is answered
with the first decision (409), nothing changes.

A send has no idempotency key, and the core puts buttons on again after an unknown outcome or a restart. So each
buttons message carries ``biz_opaque_callback_data`` ``btn-`` and a hash of the message and the control
(:func:`tracker`): before sending, its status webhook (the receipts) says whether it went already; a send whose
outcome is unknown is settled by its status like a text (:mod:`adapters.whatsapp.settle`), and without receipts it
is reported ("may have been sent"), never sent again blind.
"""

from __future__ import annotations

import hashlib

BODY = "Tap a button to decide."
"""The buttons message's text (the question is in the message it replies to)."""
MAX_BUTTONS = 3
MAX_TITLE = 20
MAX_ID = 256


def tracker(message_id: str, control_id: str) -> str:
    """The ``biz_opaque_callback_data`` of the buttons of ``control_id`` on ``message_id``: the same for a repeat."""
    return "btn-" + hashlib.sha256(f"{message_id}\n{control_id}".encode()).hexdigest()[:24]


def check_buttons(buttons: tuple[tuple[str, str], ...]) -> None:
    """Raise ``ValueError`` naming what WhatsApp would refuse: more than 3 buttons, a title over 20 characters, an id
    over 256."""
    if not 1 <= len(buttons) <= MAX_BUTTONS:
        raise ValueError(f"a reply-buttons message has 1-{MAX_BUTTONS} buttons, got {len(buttons)}")
    for control_id, title in buttons:
        if not 1 <= len(title) <= MAX_TITLE or not 1 <= len(control_id) <= MAX_ID:
            raise ValueError(f"button {title!r}: a title is 1-{MAX_TITLE} characters, an id 1-{MAX_ID}")
