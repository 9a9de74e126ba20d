"""matrix-nio answers and aiohttp failures → streamrelay's :mod:`core.errors`, by table.

matrix-nio answers an error as a value (``RoomSendError`` and kin: ``status_code`` is the Matrix ``errcode``,
``retry_after_ms`` the 429's wait, ``transport_response.status`` the HTTP status); the adapter turns it off as a
retry layer (``max_limit_exceeded=0``, ``max_timeouts=0``: nio would otherwise sleep on every 429 and retry every
timeout, forever by default). Read in this order, first match wins
(https://spec.matrix.org/latest/client-server-api/#common-error-codes):

0. A 2xx nio could not read as the call's answer (an HTML page or an empty body from a proxy, a ``send`` answer
   without its ``event_id``): :class:`core.errors.UnreadableAnswerError`, unknown, as Slack and Discord say (the event
   may be stored: a ``send`` is settled by its transaction id; ``whoami``, a read, is ``PlatformUnavailableError``).
   HTTP 5xx: for a ``send`` that creates a message ``UncertainDeliveryError`` (the homeserver may have stored it; the
   same transaction id again settles it, :meth:`~adapters.matrix.adapter.MatrixAdapter.settle_send`), else
   ``PlatformUnavailableError`` (:func:`adapters.http_failures.server_error`).
1. :data:`ERRCODE_RULES`: ``M_LIMIT_EXCEEDED`` (429) is ``RateLimitedError`` with ``retry_after_ms`` / 1000 (else the
   ``Retry-After`` header, else 5 s as nio assumes), scope ``bot``: Synapse limits messages per user
   (``rc_message``); ``M_TOO_LARGE`` is ``PayloadRejectedError(TOO_LONG)`` (the 65,536-byte event limit);
   ``M_FORBIDDEN`` (not in the room, no power to redact), ``M_UNKNOWN_TOKEN``, ``M_MISSING_TOKEN`` are
   ``ForbiddenError``; ``M_NOT_FOUND`` is ``TargetNotFoundError``; ``M_BAD_JSON``, ``M_NOT_JSON``,
   ``M_INVALID_PARAM`` are ``PayloadRejectedError(OTHER)``. Matrix has no formatting errors: a homeserver does not
   parse ``formatted_body``.
2. Anything else: ``PermanentDeliveryError`` with the errcode and message.

Network failures (aiohttp beneath nio) follow :data:`adapters.http_failures.NETWORK_OUTCOMES`; a call that ran past
``send_timeout_s`` is ``AnswerTimeoutError`` (unknown: sent, no answer).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from streamrelay.adapters.error_factories import ErrorFactory, plain_error, rejected_error
from streamrelay.adapters.http_failures import NETWORK_OUTCOMES, server_error, unreadable_answer
from streamrelay.core.errors import (
    DeliveryError,
    ForbiddenError,
    PermanentDeliveryError,
    PlatformUnavailableError,
    RateLimitedError,
    RateScope,
    RejectReason,
    TargetNotFoundError,
)

PLATFORM = "matrix"
DEFAULT_RETRY_AFTER_S = 5.0
"""What nio waits after a 429 that names no wait; the same here."""

READS = frozenset({"whoami"})
"""The calls that read and change nothing: an unreadable answer to one is only unavailable (tried again)."""

_plain = functools.partial(plain_error, PLATFORM)
_rejected = functools.partial(rejected_error, PLATFORM)


def _limited(retry_after_s: float) -> ErrorFactory:
    def make(message: str, target: str, _original: BaseException) -> DeliveryError:
        return RateLimitedError(
            message, retry_after_s=retry_after_s, scope=RateScope.BOT, platform=PLATFORM, target=target
        )

    return make


ERRCODE_RULES: dict[str, ErrorFactory] = {
    "M_TOO_LARGE": _rejected(RejectReason.TOO_LONG),
    "M_FORBIDDEN": _plain(ForbiddenError),
    "M_UNKNOWN_TOKEN": _plain(ForbiddenError),
    "M_MISSING_TOKEN": _plain(ForbiddenError),
    "M_NOT_FOUND": _plain(TargetNotFoundError),
    "M_BAD_JSON": _rejected(RejectReason.OTHER),
    "M_NOT_JSON": _rejected(RejectReason.OTHER),
    "M_INVALID_PARAM": _rejected(RejectReason.OTHER),
}


class ErrorAnswer(Exception):
    """An error answer nio returned as a value, raised so the boundary handles it like any failure.

    Attributes:
        status: the HTTP status (None when nio kept no transport response).
        errcode: the Matrix ``errcode`` (``M_FORBIDDEN``…), None when the body had none.
        retry_after_s: a 429's wait (``retry_after_ms`` / 1000, else ``Retry-After``), None otherwise.
    """

    def __init__(
        self, status: int | None, errcode: str | None, message: str, retry_after_s: float | None, body: bytes = b""
    ) -> None:
        super().__init__(f"HTTP {status if status is not None else '?'} {errcode or 'no errcode'}: {message}")
        self.status, self.errcode, self.retry_after_s = status, errcode, retry_after_s
        self.message, self.body = message, body

    @classmethod
    def of(cls, answer: Any) -> ErrorAnswer:
        """From a nio ``ErrorResponse``."""
        transport = getattr(answer, "transport_response", None)
        status = getattr(transport, "status", None)
        retry_ms = getattr(answer, "retry_after_ms", None)
        retry_after_s = retry_ms / 1000 if isinstance(retry_ms, int | float) and retry_ms > 0 else None
        if retry_after_s is None and transport is not None:
            header = transport.headers.get("Retry-After", "")
            retry_after_s = float(header) if header.replace(".", "", 1).isdigit() else None
        code = getattr(answer, "status_code", None)
        body = getattr(transport, "_body", None)  # aiohttp keeps the body nio read (no public sync accessor)
        return cls(
            status,
            code if isinstance(code, str) else None,
            str(getattr(answer, "message", "")),
            retry_after_s,
            body if isinstance(body, bytes) else b"",
        )


def translate(
    exc: BaseException, *, method: str, creates: bool, target: str, scrub: Callable[[str], str]
) -> DeliveryError:
    """Map one failed call to a :class:`core.errors.DeliveryError` (module docstring).

    Args:
        exc: an :class:`ErrorAnswer` or what aiohttp raised.
        method: the call's name (``send``, ``redact``, ``typing``, ``whoami``), for the message.
        creates: the call makes a new message (a 5xx is then uncertain).
        target: the room id, for the error's ``target``.
        scrub: removes the access token from text.

    Returns:
        The error to raise (outside the ``except`` block: the original may hold the request's headers).
    """
    message = scrub(f"matrix {method}: {type(exc).__name__}: {exc}")
    if isinstance(exc, ErrorAnswer):
        if exc.status is not None and 200 <= exc.status < 300:
            why = f"not the call's answer ({exc.errcode or 'no errcode'}: {exc.message or 'nio read nothing'})"
            unread = unreadable_answer(
                PLATFORM, method, status=exc.status, why=why, body=exc.body, target=target, scrub=scrub
            )
            return (
                PlatformUnavailableError(str(unread), platform=PLATFORM, target=target) if method in READS else unread
            )
        if exc.status is not None and exc.status >= 500:
            return server_error(creates=creates)(message, platform=PLATFORM, target=target)
        if exc.errcode == "M_LIMIT_EXCEEDED" or exc.status == 429:
            return _limited(exc.retry_after_s or DEFAULT_RETRY_AFTER_S)(message, target, exc)
        rule = ERRCODE_RULES.get(exc.errcode or "")
        return (rule or _plain(PermanentDeliveryError))(message, target, exc)
    outcome = next((kind for cls, kind in NETWORK_OUTCOMES if isinstance(exc, cls)), PlatformUnavailableError)
    return outcome(message, platform=PLATFORM, target=target)
