"""Inline keyboards on the mock Telegram: validated as the Bot API does, kept on the message, pressed by tests.

Rules (https://core.telegram.org/bots/api#inlinekeyboardmarkup, #inlinekeyboardbutton):

- ``reply_markup`` of sendMessage / editMessageText / editMessageReplyMarkup: an InlineKeyboardMarkup
  ``{"inline_keyboard": [[button, ...], ...]}`` (an Array of Arrays; other keyboard kinds are refused here: the
  mock serves only inline ones), each button an object with a non-empty ``text`` and exactly one action; a
  ``callback_data`` of 1-64 bytes (else 400 ``BUTTON_DATA_INVALID``), or a ``url``.
- editMessageText without ``reply_markup`` leaves the message without its inline keyboard; editMessageReplyMarkup
  sets it (an empty keyboard or none takes it off); the same markup again is 400 "message is not modified".
- A press (``POST /_mock/press``, :meth:`ButtonMethods.press`) of a callback button makes the ``callback_query``
  update Telegram delivers to the bot (https://core.telegram.org/bots/api#callbackquery):
  ``{"update_id", "callback_query": {"id", "from", "message", "chat_instance", "data"}}``; the bot answers it
  once with answerCallbackQuery (https://core.telegram.org/bots/api#answercallbackquery): an unknown or already
  answered ``callback_query_id`` is 400 "query is too old and response timeout expired or query ID is invalid".
- sendMessageDraft's ``can_stop`` shows the person a button that stops the generation, ``keep_on_stop`` keeps the
  draft when it is pressed (Bot API 10.3, https://core.telegram.org/bots/api#sendmessagedraft). A press of it
  (``POST /_mock/press`` with ``message_id`` ``"draft:<draft_id>"``) makes the ``stopped_message_generation``
  update ``{"update_id", "stopped_message_generation": {"chat", "draft_id", "message_thread_id"?}}``
  (https://core.telegram.org/bots/api#messagegenerationstopped) and, without ``keep_on_stop``, the draft goes.
  (Assumed: later sendMessageDraft calls of that id are accepted as before; the Bot API does not say.)
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from streamrelay.mocks.common import ChatId, RecordedCall
from streamrelay.mocks.telegram.wire import (
    NOT_MODIFIED,
    ApiError,
    bad,
    chat_json,
    chat_key,
    int_param,
    json_param,
    person_user,
)

MAX_CALLBACK_BYTES = 64
BUTTON_DATA_INVALID = "BUTTON_DATA_INVALID"
QUERY_INVALID = "query is too old and response timeout expired or query ID is invalid"
_ACTIONS = ("callback_data", "url", "switch_inline_query", "switch_inline_query_current_chat", "pay", "copy_text")
PRESSER_ID = 5_000_000_002
"""The user id of the person who presses buttons."""

Keyboard = list[list[dict[str, Any]]]


def inline_keyboard(params: Mapping[str, Any]) -> Keyboard | None:
    """The validated inline keyboard of a call's ``reply_markup`` (None: no markup, or an empty keyboard).

    Raises:
        ApiError: 400 naming what Telegram would refuse.
    """
    markup = json_param(params, "reply_markup")
    if markup is None:
        return None
    if not isinstance(markup, dict) or "inline_keyboard" not in markup:
        raise bad("can't parse reply keyboard markup JSON object (the mock serves inline keyboards only)")
    rows = markup["inline_keyboard"]
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        raise bad('field "inline_keyboard" of the InlineKeyboardMarkup should be an Array of Arrays')
    for row in rows:
        for button in row:
            _check_button(button)
    kept = [list(row) for row in rows if row]
    return kept or None


def _check_button(button: Any) -> None:
    if not isinstance(button, dict) or not isinstance(button.get("text"), str) or not button["text"]:
        raise bad("can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
    actions = [a for a in _ACTIONS if a in button]
    if len(actions) != 1:
        raise bad("can't parse inline keyboard button: exactly one of its optional fields must be used")
    data = button.get("callback_data")
    if "callback_data" in button and (not isinstance(data, str) or not 1 <= len(data.encode()) <= MAX_CALLBACK_BYTES):
        raise bad(BUTTON_DATA_INVALID)


def draft_flags(params: Mapping[str, Any]) -> tuple[bool, bool]:
    """``can_stop`` and ``keep_on_stop`` of a sendMessageDraft (Booleans; a form body sends ``true`` / ``false``).

    Raises:
        ApiError: 400 when one is not a Boolean.
    """
    flags = []
    for name in ("can_stop", "keep_on_stop"):
        value = params.get(name)
        if isinstance(value, str):
            value = {"true": True, "false": False, "": None}.get(value.lower(), value)
        if value is not None and not isinstance(value, bool):
            raise bad(f"invalid {name} specified: a Boolean is expected")
        flags.append(bool(value))
    return flags[0], flags[1]


class ButtonMethods:
    """editMessageReplyMarkup, answerCallbackQuery and presses of :class:`~mocks.telegram.chats.ChatStore` (mixed
    in: it provides ``_find``, ``_admit``, ``_message_json`` and ``_bot_owns``)."""

    _queries: dict[str, bool]
    _update_ids: itertools.count[int]

    def _buttons_init(self) -> None:
        self._queries = {}
        self._update_ids = itertools.count(1)

    def _find(self, chat: ChatId, params: Mapping[str, Any], missing: str) -> Any:
        raise NotImplementedError

    def _admit(self, token: str, chat: ChatId) -> None:
        raise NotImplementedError

    def _message_json(self, message: Any, *, nested: bool = False) -> dict[str, Any]:
        raise NotImplementedError

    def _live_drafts(self, chat: ChatId | None) -> dict[int, Any]:
        raise NotImplementedError

    _drafts: dict[ChatId, dict[int, Any]]

    def _press_draft(self, chat: ChatId, draft_id: int) -> dict[str, Any]:
        """The person stops a draft's generation: its ``stopped_message_generation`` update."""
        draft = self._live_drafts(chat).get(draft_id)
        if draft is None or not draft.can_stop:
            raise ValueError(f"chat {chat} shows no draft {draft_id} with a stop button (can_stop)")
        if not draft.keep_on_stop:
            self._drafts[chat].pop(draft_id, None)
        stopped: dict[str, Any] = {"chat": chat_json(chat), "draft_id": draft_id}
        if draft.thread_id is not None:
            stopped["message_thread_id"] = draft.thread_id
        return {"update_id": next(self._update_ids), "stopped_message_generation": stopped}

    def _edit_reply_markup(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        """editMessageReplyMarkup (https://core.telegram.org/bots/api#editmessagereplymarkup)."""
        chat = chat_key(params.get("chat_id"))
        if chat is None:
            raise bad("chat not found")
        keyboard = inline_keyboard(params)
        message = self._find(chat, params, "message to edit not found")
        if not message.from_bot or message.sender_id != int(token.partition(":")[0]):
            raise bad("message can't be edited")
        if message.markup == keyboard:
            raise ApiError(400, NOT_MODIFIED)
        self._admit(token, chat)
        message.markup = keyboard
        return self._message_json(message)

    def _answer_callback(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        """answerCallbackQuery: once per pressed query."""
        query = params.get("callback_query_id")
        if not isinstance(query, str) or self._queries.get(query) is not False:
            raise bad(QUERY_INVALID)
        text = params.get("text")
        if text is not None and (not isinstance(text, str) or len(text) > 200):
            raise bad("MESSAGE_TOO_LONG: the callback answer text is 0-200 characters")
        self._queries[query] = True
        return True

    def press(self, chat_id: Any, message_id: Any, data: Any = None, user: Any = None) -> dict[str, Any]:
        """A person presses a callback button of message ``message_id`` in ``chat_id`` (the one whose
        ``callback_data`` is ``data``; the first callback button when ``data`` is None): the ``callback_query``
        update the bot receives, ``from`` the user ``user`` (an integer id; None: :data:`PRESSER_ID`).

        Raises:
            ValueError: no such message, or it has no such button (the message says which), or ``user`` is not an
                integer id.
        """
        try:
            presser = PRESSER_ID if user is None else int(user)
        except (TypeError, ValueError):
            raise ValueError(f"a Telegram user id is an integer, got {user!r}") from None
        chat = chat_key(chat_id)
        if chat is not None and isinstance(message_id, str) and message_id.startswith("draft:"):
            try:
                draft = int_param({"draft_id": message_id.removeprefix("draft:")}, "draft_id")
            except ApiError:
                raise ValueError(f"{message_id!r}: a draft is named draft:<integer draft_id>") from None
            return self._press_draft(chat, draft or 0)
        number = int_param({"message_id": message_id}, "message_id") if message_id is not None else None
        if chat is None or number is None:
            raise ValueError("a press needs a chat_id and an integer message_id")
        try:
            message = self._find(chat, {"message_id": number}, "message not found")
        except ApiError:
            raise ValueError(f"message {number} of chat {chat} does not exist (or was deleted)") from None
        buttons = [b for row in (message.markup or []) for b in row if "callback_data" in b]
        chosen = next((b for b in buttons if data is None or b["callback_data"] == data), None)
        if chosen is None:
            shown = [b["callback_data"] for b in buttons]
            raise ValueError(f"message {number} has no callback button {data!r}: its buttons are {shown}")
        query = str(9_000_000_000 + len(self._queries) + 1)
        self._queries[query] = False
        callback = {
            "id": query,
            "from": person_user(presser),
            "message": self._message_json(message),
            "chat_instance": str(chat),
            "data": chosen["callback_data"],
        }
        return {"update_id": next(self._update_ids), "callback_query": callback}
