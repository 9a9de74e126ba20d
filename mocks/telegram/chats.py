"""What the mock Telegram keeps: the chats' messages and live drafts, and the Bot API methods that change them.

Method rules (https://core.telegram.org/bots/api#available-methods):

- sendMessage / editMessageText: content per :mod:`mocks.telegram.content`. Editing with the same text and
  entities is 400 ``message is not modified: ...``; editing or deleting a message (or in a chat) that does not
  exist is 400 ``message to edit not found`` / ``message to delete not found``; a reply to a missing message
  is 400 ``message to be replied not found`` unless ``allow_sending_without_reply``.
- sendMessageDraft (https://core.telegram.org/bots/api#sendmessagedraft): see :meth:`ChatStore.send_draft`.
- Flood control (:mod:`mocks.telegram.flood`) is checked after validation, just before a change is stored:
  sends, edits and drafts count.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from mocks.common import ChatId, RecordedCall
from mocks.telegram.content import Entity, message_content
from mocks.telegram.flood import FloodControl, TelegramLimits
from mocks.telegram.wire import (
    NOT_MODIFIED,
    ApiError,
    bad,
    bot_user,
    chat_json,
    chat_key,
    int_param,
    json_param,
    require_chat,
)

DRAFT_PEER_INVALID = "Bad Request: TEXTDRAFT_PEER_INVALID"
"""sendMessageDraft to a group, supergroup or channel. Assumed text: seen in the wild
(https://github.com/nullclaw/nullclaw/issues/626), not documented."""

DRAFT_ID_INVALID = "Bad Request: draft_id must be non-zero"
"""sendMessageDraft with a missing or zero ``draft_id``. Assumed text (the rule is documented, the text not)."""

_CHAT_ACTIONS = frozenset((
    "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
    "upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note",
))  # fmt: skip


@dataclass
class StoredMessage:
    """A message as a person sees it: current text and entities (UTF-16 offsets)."""

    message_id: int
    chat_id: ChatId
    text: str
    entities: list[Entity]
    date: int
    edit_date: int | None = None
    thread_id: int | None = None
    reply_to: int | None = None
    deleted: bool = False


@dataclass
class Draft:
    """A streamed draft as a person sees it (https://core.telegram.org/bots/api#sendmessagedraft).

    Attributes:
        chat_id: the private chat.
        draft_id: the bot's non-zero id; updates with the same id replace the text (animated on Telegram).
        text: current text (trimmed, after entity parsing); entities: its entities (UTF-16 offsets).
        thread_id: ``message_thread_id`` of the latest update, if any.
        started_at_s: the mock's clock (seconds) when this draft appeared; updated_at_s: at its latest update.
        updates: how many sendMessageDraft calls shaped it.
    """

    chat_id: ChatId
    draft_id: int
    text: str
    entities: list[Entity]
    thread_id: int | None
    started_at_s: float
    updated_at_s: float
    updates: int = 1


class Policy(Protocol):
    """The mock's switches the store reads on every call (they may change while it runs)."""

    rate_limits: bool
    draft_ttl_s: float


Handler = Callable[[str, RecordedCall, Mapping[str, Any]], Any]


class ChatStore:
    """Messages and drafts per chat, and the methods that change them (one store per mock, rebuilt on reset).

    Args:
        policy: ``rate_limits`` (enforce ``limits``) and ``draft_ttl_s`` (a draft not updated for that long
            is gone), read live.
        limits: flood-control numbers.
        clock: monotonic seconds, for flood control and draft lifetimes.
    """

    def __init__(self, policy: Policy, limits: TelegramLimits, clock: Callable[[], float]) -> None:
        self._policy = policy
        self._clock = clock
        self._flood = FloodControl(limits)
        self._messages: dict[ChatId, dict[int, StoredMessage]] = {}
        self._next_id: defaultdict[ChatId, int] = defaultdict(lambda: 1)
        self._drafts: dict[ChatId, dict[int, Draft]] = {}
        self._handlers: dict[str, Handler] = {
            "getMe": self._get_me,
            "sendMessage": self._send_message,
            "editMessageText": self._edit_message_text,
            "deleteMessage": self._delete_message,
            "sendChatAction": self._send_chat_action,
            "sendMessageDraft": self.send_draft,
        }

    # ------------------------------------------------------------ reading

    def chats(self) -> list[ChatId]:
        """Chats that ever received a message, in first-message order (drafts do not count)."""
        return list(self._messages)

    def messages(self, chat_id: ChatId) -> list[StoredMessage]:
        """The visible stored messages of ``chat_id`` (with entities), by message id."""
        key = chat_key(chat_id)
        stored = self._messages.get(key, {}) if key is not None else {}
        return [m for _, m in sorted(stored.items()) if not m.deleted]

    def drafts(self, chat_id: ChatId) -> list[Draft]:
        """The live drafts of ``chat_id``, oldest first (expired ones are forgotten)."""
        key = chat_key(chat_id)
        return list(self._live_drafts(key).values()) if key is not None else []

    # ------------------------------------------------------------ methods

    def dispatch(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        """Run ``call.method`` (a known method) and return its ``result``; raise :class:`ApiError` on refusal."""
        return self._handlers[call.method](token, call, params)

    def _get_me(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        return bot_user(_bot_id(token))

    def _send_chat_action(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        require_chat(params)
        if params.get("action") not in _CHAT_ACTIONS:
            raise bad("wrong parameter action in request")
        return True

    def _delete_message(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        self._find(require_chat(params), params, "message to delete not found").deleted = True
        return True

    def _send_message(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        chat = require_chat(params)
        text, entities = message_content(params)
        reply = json_param(params, "reply_parameters")
        reply_to = int_param(reply, "message_id") if isinstance(reply, dict) else None
        reply_to = reply_to or int_param(params, "reply_to_message_id")
        allow_missing = isinstance(reply, dict) and bool(reply.get("allow_sending_without_reply"))
        if reply_to is not None:
            target = self._messages.get(chat, {}).get(reply_to)
            if target is None or target.deleted:
                if not allow_missing:
                    raise bad("message to be replied not found")
                reply_to = None
        self._admit(token, chat)
        message_id = self._next_id[chat]
        self._next_id[chat] += 1
        message = StoredMessage(
            message_id=message_id,
            chat_id=chat,
            text=text,
            entities=entities,
            date=int(time.time()),
            thread_id=int_param(params, "message_thread_id"),
            reply_to=reply_to,
        )
        self._messages.setdefault(chat, {})[message_id] = message
        self._drafts.pop(chat, None)  # the persisted answer replaces the chat's drafts (assumption)
        call.message_id = message_id
        return self._message_json(message, _bot_id(token))

    def _edit_message_text(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        chat = require_chat(params)
        text, entities = message_content(params)
        if params.get("inline_message_id"):
            raise bad("inline messages are not supported by the mock")
        message = self._find(chat, params, "message to edit not found")
        if message.text == text and message.entities == entities:
            raise ApiError(400, NOT_MODIFIED)
        self._admit(token, chat)
        message.text, message.entities, message.edit_date = text, entities, int(time.time())
        return self._message_json(message, _bot_id(token))

    def send_draft(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        """sendMessageDraft: show (or replace) the draft ``draft_id`` in a private chat; ``True`` on success.

        Parameters: ``chat_id`` (a private chat: positive id, else 400 :data:`DRAFT_PEER_INVALID`),
        ``draft_id`` (non-zero integer, else 400 :data:`DRAFT_ID_INVALID`), ``text`` + ``entities`` /
        ``parse_mode`` (validated like sendMessage: 1-4096 characters after entity parsing),
        ``message_thread_id`` (optional). Each accepted call counts toward flood control and refreshes the
        draft's life (``draft_ttl_s``, about 30 s on Telegram); the same text again is accepted (a refresh).
        """
        chat = require_chat(params)
        if not isinstance(chat, int) or chat <= 0:
            raise ApiError(400, DRAFT_PEER_INVALID)
        draft_id = int_param(params, "draft_id")
        if not draft_id:
            raise ApiError(400, DRAFT_ID_INVALID)
        text, entities = message_content(params)
        thread_id = int_param(params, "message_thread_id")
        self._admit(token, chat)
        now = self._clock()
        self._live_drafts(chat)  # an expired draft is gone: the same id starts a new one
        drafts = self._drafts.setdefault(chat, {})
        prior = drafts.get(draft_id)
        started_at_s, updates = (prior.started_at_s, prior.updates + 1) if prior else (now, 1)
        drafts[draft_id] = Draft(chat, draft_id, text, entities, thread_id, started_at_s, now, updates)
        return True

    # ------------------------------------------------------------ helpers

    def _live_drafts(self, chat: ChatId | None) -> dict[int, Draft]:
        """The chat's drafts updated within ``draft_ttl_s``; expired ones are dropped."""
        if chat is None or chat not in self._drafts:
            return {}
        now, ttl_s = self._clock(), self._policy.draft_ttl_s
        live = {k: d for k, d in self._drafts[chat].items() if now - d.updated_at_s < ttl_s}
        self._drafts[chat] = live
        return dict(live)

    def _find(self, chat: ChatId, params: Mapping[str, Any], missing: str) -> StoredMessage:
        message_id = int_param(params, "message_id")
        if message_id is None:
            raise bad("message identifier is not specified")
        message = self._messages.get(chat, {}).get(message_id)
        if message is None or message.deleted:
            raise bad(missing)
        return message

    def _admit(self, token: str, chat: ChatId) -> None:
        """Flood control: raise a 429 past the limits, else count this call."""
        if not self._policy.rate_limits:
            return
        now = self._clock()
        wait_s = self._flood.wait_s(token, chat, now)
        if wait_s > 0:
            raise ApiError.too_many_requests(wait_s)
        self._flood.consume(token, chat, now)

    def _message_json(self, message: StoredMessage, bot_id: int, *, nested: bool = False) -> dict[str, Any]:
        """A Message object (https://core.telegram.org/bots/api#message); a reply nests its target once."""
        body: dict[str, Any] = {
            "message_id": message.message_id,
            "date": message.date,
            "chat": chat_json(message.chat_id),
            "from": bot_user(bot_id),
            "text": message.text,
        }
        if message.entities:
            body["entities"] = message.entities
        if message.edit_date is not None:
            body["edit_date"] = message.edit_date
        if message.thread_id is not None:
            body["message_thread_id"] = message.thread_id
        chat = self._messages.get(message.chat_id, {})
        target = chat.get(message.reply_to) if message.reply_to is not None else None
        if target is not None and not nested:
            body["reply_to_message"] = self._message_json(target, bot_id, nested=True)
        return body


def _bot_id(token: str) -> int:
    return int(token.partition(":")[0])
