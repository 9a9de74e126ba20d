"""What the mock Telegram keeps: the chats' messages and live drafts, and the Bot API methods that change them.

Method rules (https://core.telegram.org/bots/api#available-methods):

- sendMessage / editMessageText: content per :mod:`mocks.telegram.content`. Editing or deleting a message (or
  in a chat) that does not exist is 400 ``message to edit not found`` / ``message to delete not found``;
  editing a message the bot did not send (a person's, :meth:`ChatStore.user_message`, or another bot's) is 400
  ``message can't be edited``, whatever the text; editing the bot's own with the same text and entities
  (after the same trimming and entity parsing as a send) is 400 :data:`~mocks.telegram.wire.NOT_MODIFIED`.
  A reply to a missing message is 400 ``message to be replied not found`` unless
  ``allow_sending_without_reply``. These three edit answers are what an id probe reads
  (https://core.telegram.org/bots/api#editmessagetext).
- Message ids increase by one per chat, shared by the bot's and the person's messages (a person's message
  takes the next id too). With ``account_ids`` on, private chats and basic groups draw their ids from one
  counter instead, as on Telegram, where a bot account's private chats and basic groups share its message
  counter and only supergroups and channels count per chat (MTProto; see
  https://docs.pyrogram.org/topics/message-identifiers): ids in such a chat then have gaps.
- sendPhoto / sendDocument / sendAudio / sendVideo: :mod:`mocks.telegram.media` (stored with their caption as
  their text).
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

from streamrelay.mocks.common import ChatId, RecordedCall
from streamrelay.mocks.telegram import media
from streamrelay.mocks.telegram.buttons import ButtonMethods, draft_flags, inline_keyboard
from streamrelay.mocks.telegram.content import Entity, message_content
from streamrelay.mocks.telegram.flood import FloodControl, TelegramLimits
from streamrelay.mocks.telegram.wire import (
    NOT_MODIFIED,
    ApiError,
    bad,
    bot_user,
    chat_json,
    chat_key,
    chat_type,
    int_param,
    json_param,
    person_user,
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


PERSON_USER_ID = 5_000_000_001
"""The author of a person's message in a group (in a private chat the person's id is the chat's id)."""


@dataclass
class StoredMessage:
    """A message as a person sees it: current text and entities (UTF-16 offsets); ``sender_id`` is the bot's
    user id (from its token) or the person's."""

    message_id: int
    chat_id: ChatId
    text: str
    entities: list[Entity]
    date: int
    sender_id: int = 0
    from_bot: bool = True
    edit_date: int | None = None
    thread_id: int | None = None
    reply_to: int | None = None
    deleted: bool = False
    media: tuple[str, str] | None = None
    """``(kind, file)`` of a photo or document (then ``text`` and ``entities`` are its caption)."""
    markup: list[list[dict[str, Any]]] | None = None
    """Its inline keyboard (:mod:`mocks.telegram.buttons`), or None."""


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
    can_stop: bool = False
    """It shows the person a button to stop the generation (Bot API 10.3, :mod:`mocks.telegram.buttons`)."""
    keep_on_stop: bool = False


class Policy(Protocol):
    """The mock's switches the store reads on every call (they may change while it runs)."""

    rate_limits: bool
    draft_ttl_s: float
    account_ids: bool


Handler = Callable[[str, RecordedCall, Mapping[str, Any]], Any]


class ChatStore(ButtonMethods):
    """Messages and drafts per chat, and the methods that change them (one store per mock, rebuilt on reset).

    Args:
        policy: ``rate_limits`` (enforce ``limits``), ``draft_ttl_s`` (a draft not updated for that long
            is gone) and ``account_ids`` (one id counter for private chats and basic groups), read live.
        limits: flood-control numbers.
        clock: monotonic seconds, for flood control and draft lifetimes.
    """

    def __init__(self, policy: Policy, limits: TelegramLimits, clock: Callable[[], float]) -> None:
        self._policy = policy
        self._clock = clock
        self._flood = FloodControl(limits)
        self._messages: dict[ChatId, dict[int, StoredMessage]] = {}
        self._next_id: defaultdict[ChatId | None, int] = defaultdict(lambda: 1)
        """Next message id per chat; under ``None`` the shared one (``account_ids``)."""
        self._drafts: dict[ChatId, dict[int, Draft]] = {}
        self._buttons_init()
        self._handlers: dict[str, Handler] = {
            "getMe": self._get_me,
            "sendMessage": self._send_message,
            "editMessageText": self._edit_message_text,
            "editMessageCaption": self._edit_message_caption,
            "deleteMessage": self._delete_message,
            "sendChatAction": self._send_chat_action,
            "sendMessageDraft": self.send_draft,
            "editMessageReplyMarkup": self._edit_reply_markup,
            "answerCallbackQuery": self._answer_callback,
            **dict.fromkeys(media.MEDIA_METHODS, self._send_media),
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

    def draft_chats(self) -> list[ChatId]:
        """The chats that ever held a draft (their drafts may have lapsed since)."""
        return list(self._drafts)

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
        return self._send(token, call, chat, params, text, entities)

    def _send_media(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        """sendPhoto / sendDocument / sendAudio / sendVideo (:mod:`mocks.telegram.media`): stored with its caption as
        its text."""
        chat = require_chat(params)
        kind, file, caption, entities = media.media_content(call.method, params)
        return self._send(token, call, chat, params, caption, entities, media=(kind, file))

    def _send(
        self,
        token: str,
        call: RecordedCall,
        chat: ChatId,
        params: Mapping[str, Any],
        text: str,
        entities: list[Entity],
        media: tuple[str, str] | None = None,
    ) -> Any:
        reply_to = self._reply_to(chat, params)
        keyboard = inline_keyboard(params)
        self._admit(token, chat)
        message = self._store(chat, text, entities, sender_id=_bot_id(token), from_bot=True)
        message.thread_id, message.reply_to, message.media = int_param(params, "message_thread_id"), reply_to, media
        message.markup = keyboard
        self._drafts.pop(chat, None)  # the persisted answer replaces the chat's drafts (assumption)
        call.message_id = message.message_id
        return self._message_json(message)

    def _reply_to(self, chat: ChatId, params: Mapping[str, Any]) -> int | None:
        """The message a send replies to: 400 ``message to be replied not found`` when it is missing, unless
        ``allow_sending_without_reply`` (then no reply)."""
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
        return reply_to

    def user_message(self, chat_id: ChatId, text: str) -> StoredMessage:
        """Store a message a person wrote in ``chat_id`` (trimmed like a send); it takes the chat's next id.

        Raises:
            ValueError: no chat id, or a text Telegram would refuse (empty, too long).
        """
        chat = chat_key(chat_id)
        if chat is None:
            raise ValueError("a person's message needs a chat id")
        try:
            text, entities = message_content({"text": text})
        except ApiError as error:
            raise ValueError(f"a person's message text: {error.description}") from None
        person = chat if isinstance(chat, int) and chat > 0 else PERSON_USER_ID
        return self._store(chat, text, entities, sender_id=person, from_bot=False)

    def message_update(self, message: StoredMessage) -> dict[str, Any]:
        """The ``message`` update a bot receives for a person's message (https://core.telegram.org/bots/api#update)."""
        return {"update_id": next(self._update_ids), "message": self._message_json(message)}

    def _store(
        self, chat: ChatId, text: str, entities: list[Entity], *, sender_id: int, from_bot: bool
    ) -> StoredMessage:
        counter = None if self._policy.account_ids and chat_type(chat) in ("private", "group") else chat
        message_id = self._next_id[counter]
        self._next_id[counter] += 1
        message = StoredMessage(message_id, chat, text, entities, int(time.time()), sender_id, from_bot)
        self._messages.setdefault(chat, {})[message_id] = message
        return message

    def _edit_message_text(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        chat = require_chat(params)
        text, entities = message_content(params)
        if params.get("inline_message_id"):
            raise bad("inline messages are not supported by the mock")
        message = self._find(chat, params, "message to edit not found")
        if not message.from_bot or message.sender_id != _bot_id(token):
            raise bad("message can't be edited")
        if message.media is not None:
            raise bad(media.NO_TEXT_TO_EDIT)
        keyboard = inline_keyboard(params)  # none given: the edited message has no inline keyboard
        same = message.text == text and _entity_set(message.entities) == _entity_set(entities)
        if same and message.markup == keyboard:
            raise ApiError(400, NOT_MODIFIED)
        self._admit(token, chat)
        message.text, message.entities, message.edit_date = text, entities, int(time.time())
        message.markup = keyboard
        return self._message_json(message)

    def _edit_message_caption(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        """editMessageCaption of a media message (:mod:`mocks.telegram.media`): answered like editMessageText."""
        chat = require_chat(params)
        caption, entities = media.caption_content(params)
        message = self._find(chat, params, "message to edit not found")
        if not message.from_bot or message.sender_id != _bot_id(token):
            raise bad("message can't be edited")
        if message.media is None:
            raise bad(media.NO_CAPTION_TO_EDIT)
        if message.text == caption and _entity_set(message.entities) == _entity_set(entities):
            raise ApiError(400, NOT_MODIFIED)
        self._admit(token, chat)
        message.text, message.entities, message.edit_date = caption, entities, int(time.time())
        return self._message_json(message)

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
        can_stop, keep_on_stop = draft_flags(params)
        self._admit(token, chat)
        now = self._clock()
        self._live_drafts(chat)  # an expired draft is gone: the same id starts a new one
        drafts = self._drafts.setdefault(chat, {})
        prior = drafts.get(draft_id)
        started_at_s, updates = (prior.started_at_s, prior.updates + 1) if prior else (now, 1)
        drafts[draft_id] = Draft(
            chat, draft_id, text, entities, thread_id, started_at_s, now, updates, can_stop, keep_on_stop
        )
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

    def _message_json(self, message: StoredMessage, *, nested: bool = False) -> dict[str, Any]:
        """A Message object (https://core.telegram.org/bots/api#message); a reply nests its target once."""
        sender = bot_user(message.sender_id) if message.from_bot else person_user(message.sender_id)
        body: dict[str, Any] = {
            "message_id": message.message_id,
            "date": message.date,
            "chat": chat_json(message.chat_id),
            "from": sender,
        }
        text_key, entities_key = ("caption", "caption_entities") if message.media else ("text", "entities")
        if message.media:
            body.update(media.media_json(*message.media))
        if message.text or not message.media:
            body[text_key] = message.text
        if message.entities:
            body[entities_key] = message.entities
        if message.edit_date is not None:
            body["edit_date"] = message.edit_date
        if message.markup:
            body["reply_markup"] = {"inline_keyboard": message.markup}
        if message.thread_id is not None:
            body["message_thread_id"] = message.thread_id
        chat = self._messages.get(message.chat_id, {})
        target = chat.get(message.reply_to) if message.reply_to is not None else None
        if target is not None and not nested:
            body["reply_to_message"] = self._message_json(target, nested=True)
        return body


def _bot_id(token: str) -> int:
    return int(token.partition(":")[0])


def _entity_set(entities: list[Entity]) -> list[tuple[Any, ...]]:
    """Entities compared as the rendered message has them: the order they were given in does not matter."""
    return sorted(tuple(sorted((k, str(v)) for k, v in e.items())) for e in entities)
