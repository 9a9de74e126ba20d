"""Bot Framework Connector error answers and httpx failures → streamrelay's :mod:`core.errors`, by table.

The Teams SDK (``microsoft_teams.common.http.Client``) raises ``httpx.HTTPStatusError`` for a non-2xx answer
(``raise_for_status``); the answer's body is ``{"error": {"code", "message"}}``
(https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-api-reference#errorresponse-object).
Read in this order, first match wins:

0. HTTP 5xx: for a call that creates a message ``UncertainDeliveryError`` (Teams may have stored it; nothing can
   tell, see :meth:`~adapters.teams.adapter.TeamsAdapter.settle_send`), else ``PlatformUnavailableError``
   (:func:`adapters.http_failures.server_error`). 412 (precondition failed) is ``PlatformUnavailableError``: Teams
   documents 412, 502 and 504 as transient, to be retried with 429
   (https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/rate-limit#handle-http-429-responses).
1. 429: ``RateLimitedError`` with the ``Retry-After`` header's seconds (else :data:`DEFAULT_RETRY_AFTER_S`), scope
   ``conversation``: the per bot per thread limit is the one a sidecar meets
   (https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/rate-limit#per-bot-per-thread-limit).
2. 413 or code ``MessageSizeTooBig``: ``PayloadRejectedError(TOO_LONG)`` (the ~100 KB message limit,
   https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/format-your-bot-messages).
3. 403 ``ContentStreamNotAllowed`` (a native stream refused, timed out after two minutes, stopped by the user, or
   too large, https://learn.microsoft.com/en-us/microsoftteams/platform/bots/streaming-ux#error-codes):
   :class:`StreamRefused` carrying the message, read by the adapter's native streaming.
4. 401 and other 403s (``BotNotInConversationRoster``, ``ConversationBlockedByUser``, not the bot's activity):
   ``ForbiddenError``; 404 (``ConversationNotFound``, ``ActivityNotFound``): ``TargetNotFoundError``; 400
   (``BadArgument``, ``BadSyntax``): ``PayloadRejectedError(OTHER)``.
5. Anything else: ``PermanentDeliveryError`` with the status, code and message.

Network failures (httpx beneath the SDK) follow :data:`NETWORK_OUTCOMES`; a call that ran past ``send_timeout_s`` is
``AnswerTimeoutError`` (unknown: sent, no answer).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx

from streamrelay.adapters.http_failures import server_error
from streamrelay.core.errors import (
    DeliveryError,
    ForbiddenError,
    PayloadRejectedError,
    PermanentDeliveryError,
    PlatformUnavailableError,
    RateLimitedError,
    RateScope,
    RejectReason,
    TargetNotFoundError,
    UncertainDeliveryError,
)

PLATFORM = "teams"
DEFAULT_RETRY_AFTER_S = 2.0
"""The wait after a 429 that names none: the per-thread limit allows 8 operations in 2 s."""
STREAM_NOT_ALLOWED = "ContentStreamNotAllowed"
STREAM_TIMED_OUT = "Content stream finished due to exceeded streaming time."
"""The 403's message when a stream ran past its two minutes: the rest goes in a new message."""
STREAM_CANCELLED = "Content stream was canceled by user."
"""The 403's message when the person pressed the stream's Stop."""
STREAM_COMPLETED = "already completed streamed message"
"""In the 403's message when a final (or any stream activity) names a stream whose final Teams took: "Content stream
is not allowed on an already completed streamed message" (the docs spell it "a already" and "an already" in two
versions of the page: matched by this part, https://learn.microsoft.com/en-us/microsoftteams/platform/bots/streaming-ux#error-codes)."""

NETWORK_OUTCOMES: tuple[tuple[type[BaseException], type[DeliveryError]], ...] = (
    (httpx.ConnectTimeout, PlatformUnavailableError),  # connect timed out: nothing sent
    (httpx.ConnectError, PlatformUnavailableError),  # refused, DNS, TLS: nothing sent
    (httpx.PoolTimeout, PlatformUnavailableError),  # no connection to send on: nothing sent
    (httpx.TimeoutException, UncertainDeliveryError),  # read or write timed out: maybe sent
    (httpx.TransportError, UncertainDeliveryError),  # reset, closed while the answer was awaited: maybe sent
)
"""httpx failures, first match wins."""


class ConnectorError(Exception):
    """A Bot Framework Connector error answer: ``status``, ``code`` and ``message`` of its ``error`` object,
    ``retry_after_s`` from a ``Retry-After`` header (None without one)."""

    def __init__(self, status: int, code: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(f"HTTP {status} {code or 'no code'}: {message}")
        self.status, self.code, self.message, self.retry_after_s = status, code, message, retry_after_s

    @classmethod
    def of(cls, response: httpx.Response) -> ConnectorError:
        """From an error answer (a body that is no JSON keeps its start as the message)."""
        code, message = "", ""
        try:
            body = json.loads(response.content or b"{}")
        except ValueError:
            message = response.content[:200].decode("utf-8", "replace")
        else:
            error = body.get("error") if isinstance(body, dict) else None
            if isinstance(error, dict):
                code, message = str(error.get("code") or ""), str(error.get("message") or "")
        header = response.headers.get("Retry-After", "")
        wait = float(header) if header.replace(".", "", 1).isdigit() else None
        return cls(response.status_code, code, message, wait)


class StreamRefused(PermanentDeliveryError):
    """Teams refused a native stream's activity (403 ``ContentStreamNotAllowed``): ``reason`` is its message
    (:data:`STREAM_TIMED_OUT`, :data:`STREAM_CANCELLED`, ``Content stream is not allowed``, …)."""

    def __init__(self, message: str, *, reason: str, target: str) -> None:
        super().__init__(message, platform=PLATFORM, target=target)
        self.reason = reason


def translate(
    exc: BaseException, *, method: str, creates: bool, target: str, scrub: Callable[[str], str]
) -> DeliveryError:
    """Map one failed call to a :class:`core.errors.DeliveryError` (module docstring).

    Args:
        exc: a :class:`ConnectorError` or what httpx raised.
        method: the call's name (``sendToConversation``, ``updateActivity``…), for the message.
        creates: the call makes a new message (a 5xx or a lost answer is then uncertain).
        target: the conversation id, for the error's ``target``.
        scrub: removes the client secret and the access token from text.
    """
    message = scrub(f"teams {method}: {type(exc).__name__}: {exc}")
    if isinstance(exc, ConnectorError):
        status = exc.status
        if status >= 500:
            return server_error(creates=creates)(message, platform=PLATFORM, target=target)
        if status == 412:
            return PlatformUnavailableError(message, platform=PLATFORM, target=target)
        if status == 429:
            wait = exc.retry_after_s if exc.retry_after_s is not None else DEFAULT_RETRY_AFTER_S
            return RateLimitedError(
                message, retry_after_s=wait, scope=RateScope.CONVERSATION, platform=PLATFORM, target=target
            )
        if status == 413 or exc.code == "MessageSizeTooBig":
            return PayloadRejectedError(message, reason=RejectReason.TOO_LONG, platform=PLATFORM, target=target)
        if status == 403 and exc.code == STREAM_NOT_ALLOWED:
            return StreamRefused(message, reason=exc.message, target=target)
        if status in (401, 403):
            return ForbiddenError(message, platform=PLATFORM, target=target)
        if status == 404:
            return TargetNotFoundError(message, platform=PLATFORM, target=target)
        if status == 400:
            return PayloadRejectedError(message, reason=RejectReason.OTHER, platform=PLATFORM, target=target)
        return PermanentDeliveryError(message, platform=PLATFORM, target=target)
    outcome = next((kind for cls, kind in NETWORK_OUTCOMES if isinstance(exc, cls)), PlatformUnavailableError)
    if outcome is UncertainDeliveryError and not creates:
        outcome = PlatformUnavailableError
    return outcome(message, platform=PLATFORM, target=target)
