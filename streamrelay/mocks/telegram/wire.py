"""The Bot API's wire format as the mock speaks it: method names, parameters in, error answers and objects out.

Requests are ``POST|GET /bot{token}/{method}`` with form-encoded, multipart, JSON or query parameters; answers
are ``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code", "description", "parameters"?}``
(https://core.telegram.org/bots/api#making-requests).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from aiohttp import web

from streamrelay.mocks.common import ChatId, Fault

METHODS = (
    "getMe",
    "sendMessage",
    "editMessageText",
    "deleteMessage",
    "sendChatAction",
    "sendMessageDraft",
    "sendPhoto",
    "sendDocument",
    "sendAudio",
    "sendVideo",
    "editMessageCaption",
    "editMessageReplyMarkup",
    "answerCallbackQuery",
    "getUpdates",
)
"""The Bot API methods the mock serves (names are case-insensitive, as on Telegram)."""

NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are exactly the "
    "same as a current content and reply markup of the message"
)
"""Telegram's answer to an edit that changes nothing (https://core.telegram.org/bots/api#editmessagetext)."""

GAVE_UP = {"ok": False, "error_code": 504, "description": "Gateway Timeout"}
"""Answer of a scripted hang once it is released (nobody reads it: the client has gone)."""

TOKEN_RE = re.compile(r"^\d+:[A-Za-z0-9_-]+$")


class ApiError(Exception):
    """An error answer: HTTP ``status`` and ``description``; a 429 carries ``retry_after`` (whole seconds)."""

    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after

    @classmethod
    def too_many_requests(cls, wait_s: float) -> ApiError:
        """A 429 for a wait of ``wait_s`` seconds: ``retry_after`` rounded up to whole seconds, at least 1."""
        retry_after = max(1, math.ceil(wait_s - 1e-9))
        return cls(429, f"Too Many Requests: retry after {retry_after}", retry_after)

    @classmethod
    def from_fault(cls, fault: Fault) -> ApiError:
        """A scripted :class:`mocks.common.Fault` in Telegram's shape (5xx default to the HTTP phrase)."""
        if fault.status == 429:
            error = cls.too_many_requests(fault.retry_after_s if fault.retry_after_s is not None else 1.0)
            error.description = fault.description or error.description
            return error
        try:
            phrase = HTTPStatus(fault.status).phrase
        except ValueError:
            phrase = "Error"
        return cls(fault.status, fault.description or phrase)

    def response(self) -> web.Response:
        """The HTTP answer: JSON body, plus ``parameters.retry_after`` and ``Retry-After`` on a 429."""
        body: dict[str, Any] = {"ok": False, "error_code": self.status, "description": self.description}
        headers: dict[str, str] = {}
        if self.retry_after is not None:
            body["parameters"] = {"retry_after": self.retry_after}
            headers["Retry-After"] = str(self.retry_after)
        return web.json_response(body, status=self.status, headers=headers)


def bad(description: str) -> ApiError:
    """A 400 ``Bad Request: <description>``."""
    return ApiError(400, f"Bad Request: {description}")


# ---------------------------------------------------------------- parameters


async def read_params(request: web.Request) -> dict[str, Any]:
    """Query parameters, then a JSON, form-encoded or multipart body (file parts are ignored)."""
    params: dict[str, Any] = dict(request.query)
    if not request.body_exists:
        return params
    if request.content_type == "application/json":
        try:
            body = await request.json()
        except ValueError:
            raise bad("can't parse JSON object") from None
        if not isinstance(body, dict):
            raise bad("can't parse JSON object")
        params.update(body)
    else:
        form = await request.post()
        params.update({k: v for k, v in form.items() if isinstance(v, str)})
    return params


def chat_key(value: Any) -> ChatId | None:
    """A chat id as Telegram reads it: an integer, or an ``@username`` string; ``None`` if missing."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        return text


def require_chat(params: Mapping[str, Any]) -> ChatId:
    """``chat_id``, or a 400 when it is missing or neither an integer nor ``@username``."""
    chat = chat_key(params.get("chat_id"))
    if chat is None:
        raise bad("chat_id is empty")
    if isinstance(chat, str) and not (chat.startswith("@") and len(chat) > 1):
        raise bad("chat not found")
    return chat


def int_param(params: Mapping[str, Any], name: str) -> int | None:
    """An optional integer parameter; a 400 ``invalid <name> specified`` when it is not one."""
    value = params.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise bad(f"invalid {name} specified") from None


def json_param(params: Mapping[str, Any], name: str) -> Any:
    """A JSON-serialized parameter (already decoded when the body was JSON)."""
    value = params.get(name)
    if not isinstance(value, str):
        return value
    if value == "":
        return None
    try:
        return json.loads(value)
    except ValueError:
        raise bad(f"can't parse {name} JSON object") from None


def safe_int(value: Any) -> int | None:
    """``value`` as an integer for the call record, or None (never raises)."""
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- objects


def chat_type(chat: ChatId) -> str:
    """``private`` (positive id), ``group``, ``supergroup`` (``-100…`` ids) or ``channel`` (``@username``)."""
    if isinstance(chat, str):
        return "channel"
    if chat > 0:
        return "private"
    return "supergroup" if chat <= -1_000_000_000_000 else "group"


def bot_user(bot_id: int) -> dict[str, Any]:
    """The bot's User object (https://core.telegram.org/bots/api#user)."""
    return {"id": bot_id, "is_bot": True, "first_name": "streamrelay mock", "username": "sr_mock_bot"}


def person_user(user_id: int) -> dict[str, Any]:
    """A person's User object (https://core.telegram.org/bots/api#user)."""
    return {"id": user_id, "is_bot": False, "first_name": "Person"}


def chat_json(chat: ChatId) -> dict[str, Any]:
    """A Chat object (https://core.telegram.org/bots/api#chat)."""
    kind = chat_type(chat)
    if isinstance(chat, str):
        fake_id = -1_000_000_000_000 - sum(map(ord, chat))
        return {"id": fake_id, "type": kind, "username": chat[1:], "title": chat}
    if kind == "private":
        return {"id": chat, "type": kind, "first_name": "Person"}
    return {"id": chat, "type": kind, "title": "Mock group"}
