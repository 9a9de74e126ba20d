"""Settling an uncertain Telegram send by probing message ids with editMessageText.

The Bot API has no way to list a chat's messages, and a sendMessage carries nothing that could name it later
(https://core.telegram.org/bots/api#sendmessage). What it has: message ids only grow, and an editMessageText of a
message with exactly its current text answers "message is not modified" only for the bot's own message, "message
can't be edited" for another sender's and "message to edit not found" for an id that holds no message of this
chat (https://core.telegram.org/bots/api#editmessagetext). When the bot token is the sidecar's alone
(``PendingSend.exclusive``), every message of the bot is the sidecar's, so a bot message it cannot account for,
newer than the last one it knew, is the uncertain one. Without ``exclusive`` no call is made: ``unknown``.

The probe, id by id from ``after_id + 1`` (1 without ``after_id``), skipping ``known_ids``, at most
:data:`core.ports.PROBE_LIMIT` calls, with ``pending.text`` rendered exactly as ``sendMessage`` rendered it (a media
send: editMessageCaption with its caption, https://core.telegram.org/bots/api#editmessagecaption; a message of the
other kind, text or media, answers "there is no caption / text in the message to edit": the next id):

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

In a private chat or basic group a missing id proves nothing, so the probe needs an upper bound: without
``before_id``, when the first :data:`UNBOUNDED_PROBES` ids hold nothing of ours, it answers ``needs_bound``; the
core sends the part again, and settles with the new message's id as ``before_id``: every id between ``after_id``
and it (skipping ``known_ids``, at most :data:`core.ports.PROBE_LIMIT`) is probed; none ours → ``not_sent`` (the
new message is the only copy); more candidates than the budget → ``unknown``. (Ids this process saw in other chats
are not skipped: where a chat counts its own ids, the same number in another chat is another message.)

Caution: in a channel a bot admin with ``can_edit_messages`` may edit other admins' posts
(https://core.telegram.org/bots/api#chatadministratorrights): a probe there could rewrite one. Declare
``exclusive_bot`` only where no one else's message can be edited by the bot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiogram.methods import EditMessageCaption, EditMessageText

from streamrelay.adapters.telegram.errors import NoMessageToEditError
from streamrelay.adapters.telegram.render import Rendered
from streamrelay.core.errors import MessageFrozenError, PayloadRejectedError, RejectReason
from streamrelay.core.events import Target
from streamrelay.core.ports import PROBE_LIMIT, PendingSend, Settlement, SettleOutcome, TextFormat

Edit = Callable[[EditMessageText | EditMessageCaption], Awaitable[object]]
"""One editMessageText (editMessageCaption for a media send), one attempt, failures translated
(:meth:`TelegramAdapter._call` bound to the target)."""
Render = Callable[[str, TextFormat], Rendered]
"""The adapter's rendering of a text (:meth:`TelegramAdapter.render`)."""

UNKNOWN = Settlement(SettleOutcome.UNKNOWN)
NOT_SENT = Settlement(SettleOutcome.NOT_SENT)
NEEDS_BOUND = Settlement(SettleOutcome.NEEDS_BOUND)


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


UNBOUNDED_PROBES = 3
"""Ids probed in a private chat or basic group before asking for a bound: a stored message is usually right after
the last one known; past these, sending again gives the bound that makes the answer certain."""


async def probe_ids(edit: Edit, render: Render, target: Target, pending: PendingSend) -> Settlement:
    """Settle ``pending`` by the probe (module docstring).

    Args:
        edit: sends one editMessageText (each failure a :class:`core.errors.DeliveryError`).
        render: renders the text (or caption) the probes show, once for all the ids probed.
        target: the conversation of the uncertain send; ``chat_id`` is used.
        pending: what was sent and what is known; ``after_id``, ``before_id`` and ``known_ids`` hold integer ids.

    Returns:
        ``found`` with the message id; ``not_sent``; ``needs_bound`` (a private chat or basic group without
        ``before_id``, nothing found); ``unknown`` (not exclusive, or more candidates than
        :data:`core.ports.PROBE_LIMIT`).

    Raises:
        core.errors.DeliveryError: a failure other than the three probe answers (429, 5xx, timeout, a chat that
            does not exist, ...), as every call.
    """
    if not pending.exclusive:
        return UNKNOWN
    after = 0 if pending.after_id is None else _int(pending.after_id)
    before = None if pending.before_id is None else _int(pending.before_id)
    if after is None or (pending.before_id is not None and before is None):
        return UNKNOWN  # not Telegram message ids: nothing to count from
    own_ids = ids_per_chat(target.chat_id)
    known = {k for k in map(_int, pending.known_ids) if k is not None}
    if before is not None:
        candidates = [i for i in range(after + 1, before) if i not in known]
        if len(candidates) > PROBE_LIMIT:
            return UNKNOWN
        found = await _probe(edit, _probed(render, pending), target, pending, candidates, stop_at_missing=False)
        return found or NOT_SENT  # every id between the last known message and the bound was looked at
    top_known = max(known, default=0)
    candidates, message_id = [], after
    while len(candidates) < (PROBE_LIMIT if own_ids else UNBOUNDED_PROBES):
        message_id += 1
        if message_id not in known:
            candidates.append(message_id)
    shown = _probed(render, pending)
    found = await _probe(edit, shown, target, pending, candidates, stop_at_missing=own_ids, past=top_known)
    # the bot's shared counter (a private chat, a basic group): only a later message of ours can bound the search
    return found or (UNKNOWN if own_ids else NEEDS_BOUND)


def _probed(render: Render, pending: PendingSend) -> Rendered:
    """What the probe edits show: the text as sendMessage rendered it, or a media send's caption ("" without one)."""
    if pending.media is None:
        return render(pending.text, pending.fmt)
    return render(pending.media.caption, pending.fmt) if pending.media.caption else Rendered("", None, 0)


async def _probe(
    edit: Edit,
    shown: Rendered,
    target: Target,
    pending: PendingSend,
    ids: list[int],
    *,
    stop_at_missing: bool,
    past: int = 0,
) -> Settlement | None:
    """Probe ``ids`` in order: ``found`` at the first that is ours; with ``stop_at_missing`` (a chat whose ids are
    its own), ``not_sent`` at the first missing id past ``past``; None when none answered."""
    for message_id in ids:
        method = probe_method(target, pending, message_id, shown)
        try:
            await edit(method)
        except PayloadRejectedError as exc:
            if exc.reason is not RejectReason.NOT_MODIFIED:
                raise
        except MessageFrozenError:
            continue  # someone else's message
        except NoMessageToEditError:
            if stop_at_missing and message_id > past:
                return NOT_SENT
            continue  # a deleted message, or an id of another chat
        return Settlement(SettleOutcome.FOUND, str(message_id))
    return None


def probe_method(
    target: Target, pending: PendingSend, message_id: int, shown: Rendered
) -> EditMessageText | EditMessageCaption:
    """The edit that probes ``message_id`` for ``pending``: editMessageText of ``shown``, its text rendered as
    sendMessage rendered it, or, for a media send, editMessageCaption of its caption rendered as the media send
    rendered it (https://core.telegram.org/bots/api#editmessagecaption: the same caption again is "message is not
    modified"; a text message answers "there is no caption in the message to edit", read as another message: the
    next id)."""
    if pending.media is None:
        return EditMessageText(chat_id=target.chat_id, message_id=message_id, text=shown.text, entities=shown.entities)
    return EditMessageCaption(
        chat_id=target.chat_id, message_id=message_id, caption=shown.text, caption_entities=shown.entities
    )


def _int(value: str) -> int | None:
    return int(value) if value.isascii() and value.isdigit() else None
