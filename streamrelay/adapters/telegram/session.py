"""aiogram's HTTP session as the adapter uses it: each call's request traced (:class:`adapters.deadline.SendDeadline`)
and each answer read strictly, so an answer in no Bot API shape is one error, whatever the method.

Every Bot API answer is a JSON object with a Boolean ``ok``; when ``ok`` is true "the result of the query can be
found in the 'result' field", when it is false "the error is explained in the 'description'"
(https://core.telegram.org/bots/api#making-requests). aiogram reads answers in one place,
``BaseSession.check_response`` (aiogram/client/session/base.py), and lets some answers out of that shape through:

- ``{"ok": true}`` without ``result`` (or ``"result": null``) on a 2xx: aiogram returns None, and the caller's
  ``sent.message_id`` was an ``AttributeError`` that stopped the run's whole delivery;
- ``{"ok": false}`` without ``description``, and ``{"ok": true}`` on a status that is not 2xx: aiogram raises its
  error with a None message, whose ``str`` is a ``TypeError``;
- a body that is not JSON (empty, an HTML page from a proxy) or JSON of another shape: aiogram's
  ``ClientDecodeError``, whose text is the whole body;
- a body that is not text in its charset: aiohttp's ``UnicodeDecodeError`` while aiogram reads it.

:class:`TelegramSession` raises :class:`MalformedAnswerError` for each (with the HTTP status and the body), which
:func:`adapters.telegram.errors.translate` turns into :class:`core.errors.UnreadableAnswerError`: unknown, so a
send is settled (an id probe with an exclusive bot token) or reported uncertain, and an edit is retried.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.exceptions import ClientDecodeError, TelegramAPIError
from aiogram.methods import TelegramMethod
from aiogram.methods.base import Response, TelegramType
from aiohttp import ClientSession
from pydantic import ValidationError

from streamrelay.adapters.deadline import traced


class MalformedAnswerError(ClientDecodeError):
    """An answer in no Bot API shape (module docstring).

    Attributes:
        why: what is wrong with it, for people (``ok without a result``, ``not JSON``, ...).
        status: its HTTP status, or None when aiohttp could not read the body (so the status was not kept).
        content: its body as received (text; the part aiohttp could decode).
    """

    def __init__(self, why: str, status: int | None, content: str, original: Exception | None = None) -> None:
        super().__init__(why, original or ValueError(why), content)
        self.why = why
        self.status = status
        self.content = content

    def __str__(self) -> str:
        code = "?" if self.status is None else self.status
        return f"unreadable answer (HTTP {code}): {self.why}"


class TelegramSession(AiohttpSession):
    """aiogram's aiohttp session whose client tells each call's :class:`~adapters.deadline.SendDeadline` when its
    request is written, and whose answers are read strictly (module docstring)."""

    async def create_session(self) -> ClientSession:
        return traced(await super().create_session())

    async def make_request(
        self, bot: Bot, method: TelegramMethod[TelegramType], timeout: int | None = None
    ) -> TelegramType:
        """aiogram's request; a body aiohttp cannot decode as text raises :class:`MalformedAnswerError`."""
        try:
            return await super().make_request(bot, method, timeout)
        except (UnicodeError, LookupError) as exc:  # resp.text() in aiogram's make_request
            raw = getattr(exc, "object", b"")
            content = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else ""
            raise MalformedAnswerError(f"not text in its charset ({type(exc).__name__})", None, content) from None

    def check_response(
        self, bot: Bot, method: TelegramMethod[TelegramType], status_code: int, content: str
    ) -> Response[TelegramType]:
        """aiogram's reading of an answer, with every answer outside the Bot API's shape raised as
        :class:`MalformedAnswerError` (module docstring).

        Raises:
            MalformedAnswerError: not JSON, not an answer object of this method, ``ok`` without ``result``, ``ok``
                on an error status, or an error without ``description``.
            aiogram.exceptions.TelegramAPIError: a well-formed error answer (as aiogram raises it).
        """
        if not HTTPStatus.OK <= status_code <= HTTPStatus.IM_USED:  # an error: read once more, it is rare
            problem = _error_problem(content)
            if problem is not None:  # aiogram would fail on it ("restart" in None: TypeError)
                raise MalformedAnswerError(problem, status_code, content)
        try:
            response = super().check_response(bot, method, status_code, content)
        except ClientDecodeError as exc:
            raise MalformedAnswerError(_decode_problem(exc), status_code, content, exc.original) from None
        except TelegramAPIError as exc:
            if isinstance(exc.message, str):
                raise
            raise MalformedAnswerError("an error without a description", status_code, content) from None
        if response.result is None:
            raise MalformedAnswerError("ok without a result", status_code, content)
        return response


def _error_problem(content: str) -> str | None:
    """What is wrong with an answer on an error status, if it is JSON: ``ok`` true, or no ``description`` (None: a
    well-formed error, or not JSON at all, which aiogram's own reading reports)."""
    try:
        data = json.loads(content)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if data.get("ok") is True:
        return "ok on an error status"
    return None if isinstance(data.get("description"), str) else "an error without a description"


def _decode_problem(exc: ClientDecodeError) -> str:
    """What aiogram could not read: not JSON, or JSON that is not an answer of this method (its first field error)."""
    original: Any = exc.original
    if isinstance(original, ValidationError):
        first = original.errors()[0] if original.errors() else None
        if first is None:
            return "not a Bot API answer"
        where = ".".join(str(part) for part in first["loc"]) or "answer"
        return f"not a Bot API answer ({where}: {first['msg']})"
    return "not JSON"
