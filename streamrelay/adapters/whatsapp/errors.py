"""Graph API error answers (as pywa raises them) and httpx failures → streamrelay's :mod:`core.errors`, by table.

An error answer is ``{"error": {"message", "type", "code", "error_subcode", "error_data": {"details"},
"fbtrace_id"}}``; pywa raises it as a ``WhatsAppError`` with ``code`` and the ``httpx.Response``. Read in this order,
first match wins (codes: https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes):

0. HTTP 5xx, or code 1 / 2 / 131000 (unknown error, service unavailable, something went wrong): for a send that
   creates a message ``UncertainDeliveryError`` (the platform may have sent it; nothing can tell, so it is reported
   uncertain, never sent again), else ``PlatformUnavailableError`` (:func:`adapters.http_failures.server_error`).
1. :data:`CODE_RULES`: rate limits are ``RateLimitedError`` (the Graph API names no wait: :data:`RETRY_AFTER_S`,
   unless the answer has a ``Retry-After`` header);
   131047 (more than 24 hours since the person last wrote: only a template message may be sent) is ``ForbiddenError``
   saying so; 131026 (undeliverable: not a WhatsApp user, old client, terms not accepted) ``TargetNotFoundError``;
   190 (access token expired or invalid), 10 / 200-299 (permission), 131030 (not in the test number's allowed list),
   368 (blocked for policy) ``ForbiddenError``; 100 (invalid parameter) and 131009 ``PayloadRejectedError``
   (``too_long`` when it names the text body's 4,096-character limit, else ``other``: a caption too long is
   not re-cut); 131051-131053 (media type, download,
   upload) ``PayloadRejectedError(OTHER)``.
2. Anything else: ``PermanentDeliveryError`` with the code and message.

Network failures (httpx beneath pywa) follow :data:`NETWORK_OUTCOMES`; a call that ran past ``send_timeout_s`` is
``AnswerTimeoutError`` (unknown: sent, no answer).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import httpx

from streamrelay.adapters.error_factories import ErrorFactory, plain_error, rejected_error
from streamrelay.adapters.http_failures import server_error
from streamrelay.core.errors import (
    DeliveryError,
    ForbiddenError,
    PermanentDeliveryError,
    PlatformUnavailableError,
    RateLimitedError,
    RateScope,
    RejectReason,
    TargetNotFoundError,
    UncertainDeliveryError,
)

PLATFORM = "whatsapp"
WINDOW_CLOSED = 131047
"""Re-engagement message: more than 24 hours since the person's last message (the customer service window,
https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-messages#customer-service-windows)."""
PAIR_LIMIT = 131056
"""Pair rate limit: too many messages from this business number to this user in a short time."""
THROUGHPUT_LIMIT = 130429
"""Cloud API throughput reached (80 messages a second per number by default)."""
RETRY_AFTER_S = {PAIR_LIMIT: 6.0, THROUGHPUT_LIMIT: 1.0, 4: 60.0, 80007: 60.0, 133016: 60.0}
"""Waits after a rate-limit error (the Graph API sends no Retry-After): the pair limit's one message per 6 s, a
second for throughput, a minute for the app's call limit (4), the WABA's (80007) and registration's (133016)."""
SERVER_CODES = frozenset({1, 2, 131000})
"""Unknown error, service temporarily unavailable, something went wrong: treated as a 5xx."""
TOO_LONG_WORDS = ("4096", "4,096", "too long", "at most")

_plain = functools.partial(plain_error, PLATFORM)
_rejected = functools.partial(rejected_error, PLATFORM)


def _limited(code: int) -> ErrorFactory:
    scope = RateScope.CONVERSATION if code == PAIR_LIMIT else RateScope.BOT

    def make(message: str, target: str, original: BaseException) -> DeliveryError:
        header = original.retry_after_s if isinstance(original, GraphError) else None
        wait = header if header is not None else RETRY_AFTER_S[code]
        return RateLimitedError(message, retry_after_s=wait, scope=scope, platform=PLATFORM, target=target)

    return make


class WindowClosedError(ForbiddenError):
    """131047: the customer service window is closed (a ``ForbiddenError``: the core refuses the part; the adapter
    may send the channel's window template, :mod:`adapters.whatsapp.window`)."""


def _window_closed(message: str, target: str, _original: BaseException) -> DeliveryError:
    return WindowClosedError(
        f"{message} (the 24-hour customer service window is closed: the person has not written for more than 24 "
        "hours, and only a template message may be sent until they write again; "
        "https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-messages#customer-service-windows)",
        platform=PLATFORM,
        target=target,
    )


CODE_RULES: dict[int, ErrorFactory] = {
    **{code: _limited(code) for code in RETRY_AFTER_S},
    WINDOW_CLOSED: _window_closed,
    131026: _plain(TargetNotFoundError),
    190: _plain(ForbiddenError),
    10: _plain(ForbiddenError),
    131030: _plain(ForbiddenError),
    368: _plain(ForbiddenError),
    131051: _rejected(RejectReason.OTHER),
    131052: _rejected(RejectReason.OTHER),
    131053: _rejected(RejectReason.OTHER),
}

NETWORK_OUTCOMES: tuple[tuple[type[BaseException], type[DeliveryError]], ...] = (
    (httpx.ConnectTimeout, PlatformUnavailableError),  # connect timed out: nothing sent
    (httpx.ConnectError, PlatformUnavailableError),  # refused, DNS, TLS: nothing sent
    (httpx.PoolTimeout, PlatformUnavailableError),  # no connection to send on: nothing sent
    (httpx.TimeoutException, UncertainDeliveryError),  # read or write timed out: maybe sent
    (httpx.TransportError, UncertainDeliveryError),  # reset, closed while the answer was awaited: maybe sent
)
"""httpx failures, first match wins."""


class GraphError(Exception):
    """A Graph API error answer: ``status`` (HTTP), ``code`` (the error code), ``message``, ``details`` and
    ``retry_after_s`` (a ``Retry-After`` header's seconds: Meta documents none, a gateway in front may send one;
    when present it is honoured over :data:`RETRY_AFTER_S`)."""

    def __init__(
        self,
        status: int | None,
        code: int | None,
        message: str,
        details: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(
            f"HTTP {status if status is not None else '?'} code {code}: {message}"
            + (f" ({details})" if details else "")
        )
        self.status, self.code, self.message, self.details = status, code, message, details
        self.retry_after_s = retry_after_s


def translate(
    exc: BaseException, *, method: str, creates: bool, target: str, scrub: Callable[[str], str]
) -> DeliveryError:
    """Map one failed call to a :class:`core.errors.DeliveryError` (module docstring).

    Args:
        exc: a :class:`GraphError` or what httpx raised.
        method: the call's name (``messages``), for the message.
        creates: the call makes a new message (a 5xx is then uncertain).
        target: the person's phone number, for the error's ``target``.
        scrub: removes the access token from text.
    """
    message = scrub(f"whatsapp {method}: {type(exc).__name__}: {exc}")
    if isinstance(exc, GraphError):
        if (exc.status is not None and exc.status >= 500) or exc.code in SERVER_CODES:
            return server_error(creates=creates)(message, platform=PLATFORM, target=target)
        code = exc.code or 0
        rule = CODE_RULES.get(code)
        if rule is None and 200 <= code < 300:
            rule = _plain(ForbiddenError)
        if rule is None and code in (100, 131009):
            text = f"{exc.message} {exc.details or ''}".lower()
            too_long = "body" in text and any(word in text for word in TOO_LONG_WORDS)  # a caption's: other
            rule = _rejected(RejectReason.TOO_LONG if too_long else RejectReason.OTHER)
        if rule is None and exc.status == 429:
            rule = _limited(THROUGHPUT_LIMIT)
        return (rule or _plain(PermanentDeliveryError))(message, target, exc)
    outcome = next((kind for cls, kind in NETWORK_OUTCOMES if isinstance(exc, cls)), PlatformUnavailableError)
    if outcome is UncertainDeliveryError and not creates:
        outcome = PlatformUnavailableError
    return outcome(message, platform=PLATFORM, target=target)
