"""Settling an uncertain Telegram send by probing message ids with editMessageText.

The Bot API has no way to list a chat's messages, and a sendMessage carries nothing that could name it later
(https://core.telegram.org/bots/api#sendmessage). What it has: message ids only grow, and an editMessageText of a
message with exactly its current text answers "message is not modified" only for the bot's own message, "message
can't be edited" for another sender's and "message to edit not found" for an id that holds no message of this
chat (https://core.telegram.org/bots/api#editmessagetext). When the bot token is the sidecar's alone
(``PendingSend.exclusive``), every message of the bot is the sidecar's, so a bot message it cannot account for,
newer than the last one it knew, is the uncertain one. Without ``exclusive`` no call is made: ``unknown``.

The probe, id by id from ``after_id + 1`` (1 without ``after_id``), skipping ``known_ids``, at most
:data:`core.ports.PROBE_LIMIT` calls, with ``pending.text`` rendered exactly as ``sendMessage`` rendered it:

- "message is not modified": the message is ours and shows the text → ``found``;
- the edit succeeds: a bot message, so the sidecar's, that showed another text (another uncertain send of the
  sidecar's: settle them oldest first and add each found id to the later ones' ``known_ids``) and now shows this
  text → ``found``;
- "message can't be edited": someone else's message → the next id;
- "message to edit not found": a gap or the end. Below a known id it is a gap (a deleted message) → the next
  id. Past every known id, in a supergroup or channel (ids ``-100…`` of 13 digits and more, or ``@username``),
  whose ids are its own and consecutive, nothing later exists → ``not_sent``. In a private chat or basic group
  the ids come from one counter of the bot's, shared by all its private chats and basic groups (MTProto: ids
  are per channel, otherwise per account: https://telegramplayground.github.io/pyrogram/topics/message-identifiers.html,
  https://github.com/LonamiWebs/Telethon/issues/1308), so the id may be another chat's → the next id;
- the budget spent → ``unknown``.

Caution: in a channel a bot admin with ``can_edit_messages`` may edit other admins' posts
(https://core.telegram.org/bots/api#chatadministratorrights): a probe there could rewrite one. Declare
``exclusive_bot`` only where no one else's message can be edited by the bot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiogram.methods import EditMessageText

from adapters.telegram.errors import NoMessageToEditError
from adapters.telegram.render import render
from core.errors import MessageFrozenError, PayloadRejectedError, RejectReason
from core.events import Target
from core.ports import PROBE_LIMIT, PendingSend, Settlement, SettleOutcome

Edit = Callable[[EditMessageText], Awaitable[object]]
"""One editMessageText, one attempt, failures translated (:meth:`TelegramAdapter._call` bound to the target)."""

UNKNOWN = Settlement(SettleOutcome.UNKNOWN)
NOT_SENT = Settlement(SettleOutcome.NOT_SENT)


SUPERGROUP_IDS_BELOW = -1_000_000_000_000
"""Supergroup and channel chat ids are ``-100`` followed by the channel id: at most this (Bot API ids)."""


def ids_per_chat(chat_id: int | str) -> bool:
    """True for a supergroup or channel (ids up to :data:`SUPERGROUP_IDS_BELOW`, or ``@username``): its message ids
    are its own, one after another. False for a private chat (positive id) or basic group (a small negative id),
    whose message ids come from the bot's counter shared by all of them."""
    if isinstance(chat_id, str) and chat_id.startswith("@"):
        return True
    try:
        return int(chat_id) <= SUPERGROUP_IDS_BELOW
    except ValueError:
        return False


async def probe_ids(edit: Edit, target: Target, pending: PendingSend) -> Settlement:
    """Settle ``pending`` by the probe (module docstring).

    Args:
        edit: sends one editMessageText (each failure a :class:`core.errors.DeliveryError`).
        target: the conversation of the uncertain send; ``chat_id`` is used.
        pending: what was sent and what is known; ``after_id`` and ``known_ids`` hold integer message ids.

    Returns:
        ``found`` with the message id, ``not_sent``, or ``unknown`` (not exclusive, or the budget spent).

    Raises:
        core.errors.DeliveryError: a failure other than the three probe answers (429, 5xx, timeout, a chat that
            does not exist, ...), as every call.
    """
    if not pending.exclusive:
        return UNKNOWN
    after = 0 if pending.after_id is None else _int(pending.after_id)
    if after is None:
        return UNKNOWN  # not a Telegram message id: nothing to count from
    body, entities = render(pending.text, pending.fmt)
    known = {k for k in map(_int, pending.known_ids) if k is not None}
    top_known = max(known, default=0)
    message_id = after
    for _ in range(PROBE_LIMIT):
        message_id += 1
        while message_id in known:
            message_id += 1
        method = EditMessageText(chat_id=target.chat_id, message_id=message_id, text=body, entities=entities)
        try:
            await edit(method)
        except PayloadRejectedError as exc:
            if exc.reason is not RejectReason.NOT_MODIFIED:
                raise
        except MessageFrozenError:
            continue  # someone else's message
        except NoMessageToEditError:
            if message_id > top_known and ids_per_chat(target.chat_id):
                return NOT_SENT
            continue  # a deleted message, or an id of another chat
        return Settlement(SettleOutcome.FOUND, str(message_id))
    return UNKNOWN


def _int(value: str) -> int | None:
    return int(value) if value.isascii() and value.isdigit() else None
