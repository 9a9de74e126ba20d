"""aiogram / aiohttp failures → streamrelay's :mod:`core.errors`, by table.

Four tables, read in this order, first match wins:

1. ``NATIVE_RULES``, only for the native streaming methods (``NATIVE_METHODS``: sendMessageDraft,
   https://core.telegram.org/bots/api#sendmessagedraft): an aiogram exception type plus a substring of the
   description (empty: any) that means "no drafts here" → ``NativeUnavailableError``, so the core falls back
   to ``preview``. A 404 ``Not Found`` (a server without the method: before Bot API 9.5, or
   :class:`mocks.telegram.MockTelegram` with ``drafts_enabled`` off) and a 400 refusing a chat that is not
   private count; other failures of these methods go through the tables below like any call.
2. ``DESCRIPTION_RULES``: substrings of Telegram's ``description`` (lower-cased), because Telegram sends
   most refusals as 400 and only the text says which (https://core.telegram.org/bots/api#editmessagetext,
   https://core.telegram.org/bots/api#formatting-options). "message is not modified" becomes
   ``PayloadRejectedError(NOT_MODIFIED)``, which :class:`~adapters.telegram.adapter.TelegramAdapter` turns
   into success for edits; "message can't be edited" (a message past its edit window, or not the bot's) is
   ``MessageFrozenError``; "message to edit not found" is :class:`NoMessageToEditError`, a
   ``TargetNotFoundError`` that says which (the settle probe reads it, :mod:`adapters.telegram.settle`).
3. ``NETWORK_RULES``: the cause of an aiogram ``TelegramNetworkError`` (aiogram wraps both
   ``asyncio.TimeoutError`` and ``aiohttp.ClientError``). A connection that never opened is
   ``PlatformUnavailableError``; a timeout or broken connection after the request may have been written
   is ``UncertainDeliveryError`` (it may have landed).
4. ``TYPE_RULES``: the aiogram exception type (its HTTP status), e.g. ``TelegramRetryAfter`` (429 with
   ``parameters.retry_after``, https://core.telegram.org/bots/api#responseparameters) →
   ``RateLimitedError(retry_after_s)``.

An answer in no Bot API shape (:class:`adapters.telegram.session.MalformedAnswerError`, or aiogram's own
``ClientDecodeError``), read before everything else, is :class:`core.errors.UnreadableAnswerError` for every method
(:func:`adapters.http_failures.unreadable_answer`): unknown, never the SDK's decode error.

A 5xx (``TelegramServerError``) is read before the descriptions: for a create (``CREATE_METHODS``: sendMessage and
the media sends) it is ``UncertainDeliveryError`` (Telegram may have stored the message), for any other call
``PlatformUnavailableError`` (:func:`adapters.http_failures.server_error`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

import aiohttp
from aiogram.exceptions import (
    AiogramError,
    ClientDecodeError,
    TelegramAPIError,
    TelegramBadRequest,
    TelegramConflictError,
    TelegramEntityTooLarge,
    TelegramForbiddenError,
    TelegramMigrateToChat,
    TelegramNetworkError,
    TelegramNotFound,
    TelegramRetryAfter,
    TelegramServerError,
    TelegramUnauthorizedError,
)

from streamrelay.adapters.error_factories import ErrorFactory, plain_error, rejected_error
from streamrelay.adapters.http_failures import NETWORK_OUTCOMES, server_error, unreadable_answer
from streamrelay.adapters.telegram.session import MalformedAnswerError
from streamrelay.core.errors import (
    AnswerTimeoutError,
    DeliveryError,
    ForbiddenError,
    MessageFrozenError,
    NativeUnavailableError,
    PermanentDeliveryError,
    PlatformUnavailableError,
    RateLimitedError,
    RejectReason,
    TargetNotFoundError,
)

PLATFORM = "telegram"


_plain = functools.partial(plain_error, PLATFORM)
_rejected = functools.partial(rejected_error, PLATFORM)


class NoMessageToEditError(TargetNotFoundError):
    """editMessageText found no message with that id in the chat ("message to edit not found",
    https://core.telegram.org/bots/api#editmessagetext): it was deleted, the id is not yet used, or (in a
    private chat or basic group, whose ids come from one counter of the bot's) the id is another chat's."""


CREATE_METHODS = frozenset({"sendMessage", "sendPhoto", "sendDocument", "sendAudio", "sendVideo"})
"""Bot API methods that make a new message: a 5xx answer to them is uncertain (the message may be stored)."""


def _rate_limited(message: str, target: str, original: BaseException) -> DeliveryError:
    retry_after_s = float(original.retry_after) if isinstance(original, TelegramRetryAfter) else 1.0
    return RateLimitedError(message, retry_after_s=retry_after_s, platform=PLATFORM, target=target)


NATIVE_METHODS = frozenset({"sendMessageDraft"})
"""Bot API methods of the platform's own streaming preview (:class:`core.ports.NativeStreaming`)."""

NATIVE_RULES: tuple[tuple[type[BaseException], str], ...] = (
    (TelegramNotFound, ""),  # 404 Not Found: this API server has no such method
    (TelegramBadRequest, "textdraft_peer_invalid"),  # a group or channel (observed: nullclaw/nullclaw#626)
    (TelegramBadRequest, "private chat"),  # a worded "… only in private chats" refusal
    (TelegramBadRequest, "method is not available"),
    (TelegramBadRequest, "method not available"),
)
"""``(aiogram exception type, lower-case description substring)`` → ``NativeUnavailableError``."""

DESCRIPTION_RULES: tuple[tuple[str, ErrorFactory], ...] = (
    ("message is not modified", _rejected(RejectReason.NOT_MODIFIED)),
    ("message to edit not found", _plain(NoMessageToEditError)),
    ("message to delete not found", _plain(TargetNotFoundError)),
    ("message to be replied not found", _plain(TargetNotFoundError)),
    ("message can't be edited", _plain(MessageFrozenError)),
    ("there is no text in the message to edit", _plain(MessageFrozenError)),  # a media message: edit its caption
    ("there is no caption in the message to edit", _plain(MessageFrozenError)),  # a text message
    ("message can't be deleted", _plain(TargetNotFoundError)),
    ("message thread not found", _plain(TargetNotFoundError)),
    ("chat not found", _plain(TargetNotFoundError)),
    ("message is too long", _rejected(RejectReason.TOO_LONG)),
    ("message caption is too long", _rejected(RejectReason.TOO_LONG)),
    ("text is too long", _rejected(RejectReason.TOO_LONG)),
    ("message text is empty", _rejected(RejectReason.EMPTY)),
    ("text must be non-empty", _rejected(RejectReason.EMPTY)),
    ("can't parse entities", _rejected(RejectReason.BAD_FORMAT)),
    ("unsupported parse_mode", _rejected(RejectReason.BAD_FORMAT)),
    ("bot was blocked", _plain(ForbiddenError)),
    ("bot was kicked", _plain(ForbiddenError)),
    ("not enough rights", _plain(ForbiddenError)),
    ("have no rights", _plain(ForbiddenError)),
    ("topic_closed", _plain(ForbiddenError)),
)

NETWORK_RULES: tuple[tuple[type[BaseException], ErrorFactory], ...] = tuple(
    (kind, _plain(outcome)) for kind, outcome in NETWORK_OUTCOMES
)

TYPE_RULES: tuple[tuple[type[BaseException], ErrorFactory], ...] = (
    (TelegramRetryAfter, _rate_limited),
    (TelegramNetworkError, _plain(PlatformUnavailableError)),  # cause not in NETWORK_RULES
    (TelegramServerError, _plain(PlatformUnavailableError)),  # 5xx of a non-create, RestartingTelegram
    (TelegramForbiddenError, _plain(ForbiddenError)),  # 403
    (TelegramUnauthorizedError, _plain(ForbiddenError)),  # 401: token revoked or wrong
    (TelegramMigrateToChat, _plain(TargetNotFoundError)),  # group became a supergroup
    (TelegramEntityTooLarge, _rejected(RejectReason.TOO_LONG)),  # 413
    (TelegramBadRequest, _rejected(RejectReason.OTHER)),  # 400 with an unknown description
    (TelegramNotFound, _plain(PermanentDeliveryError)),  # 404: wrong API base URL or method
    (TelegramConflictError, _plain(PermanentDeliveryError)),  # 409
    (TelegramAPIError, _plain(PermanentDeliveryError)),
    (asyncio.TimeoutError, _plain(AnswerTimeoutError)),
    (aiohttp.ClientError, _plain(PlatformUnavailableError)),
)

BOUNDARY_ERRORS: tuple[type[BaseException], ...] = (AiogramError, aiohttp.ClientError, asyncio.TimeoutError)
"""What :func:`translate` accepts: everything aiogram's session can raise for one call."""


def _first(rules: tuple[tuple[type[BaseException], ErrorFactory], ...], exc: BaseException) -> ErrorFactory:
    return next((make for kind, make in rules if isinstance(exc, kind)), _plain(PermanentDeliveryError))


def _native_refusal(exc: BaseException, method: str, lowered: str) -> bool:
    if method not in NATIVE_METHODS:
        return False
    return any(isinstance(exc, kind) and needle in lowered for kind, needle in NATIVE_RULES)


def _factory(exc: BaseException, method: str) -> tuple[ErrorFactory, str]:
    if isinstance(exc, TelegramNetworkError) and exc.__cause__ is not None:
        cause = exc.__cause__
        return _first(NETWORK_RULES, cause), f"{type(cause).__name__}: {cause}".rstrip(": ")
    description = exc.message if isinstance(exc, TelegramAPIError) else f"{type(exc).__name__}: {exc}"
    if isinstance(exc, TelegramServerError):
        return _plain(server_error(creates=method in CREATE_METHODS)), description
    lowered = description.lower()
    if _native_refusal(exc, method, lowered):
        return _plain(NativeUnavailableError), description
    by_text = next((make for needle, make in DESCRIPTION_RULES if needle in lowered), None)
    return by_text or _first(TYPE_RULES, exc), description


def translate(exc: BaseException, *, method: str, target: str, scrub: Callable[[str], str]) -> DeliveryError:
    """Map one failed call to a :class:`core.errors.DeliveryError`.

    Args:
        exc: what aiogram (or aiohttp beneath it) raised; one of :data:`BOUNDARY_ERRORS`.
        method: the Bot API method, e.g. ``sendMessage`` (for the message; ``NATIVE_METHODS`` read
            ``NATIVE_RULES`` first).
        target: the chat id, for the error's ``target``.
        scrub: removes secrets (the bot token) from text; applied to the whole message.

    Returns:
        The error to raise; its message is ``telegram <method>: <description>``, token-free. Chain it
        ``from None``: the original may carry the request URL, which holds the token.
    """
    if isinstance(exc, ClientDecodeError):
        status, why = (exc.status, exc.why) if isinstance(exc, MalformedAnswerError) else (None, exc.message)
        body = exc.content if isinstance(exc, MalformedAnswerError) else str(exc.data)
        return unreadable_answer(PLATFORM, method, status=status, why=why, body=body, target=target, scrub=scrub)
    make, description = _factory(exc, method)
    return make(scrub(f"telegram {method}: {description}"), target, exc)
