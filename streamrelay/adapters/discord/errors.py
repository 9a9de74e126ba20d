"""discord.py / aiohttp failures → streamrelay's :mod:`core.errors`, by table.

Read in this order, first match wins:

0. A 5xx answer (``DiscordServerError``, raised by the trace hook before discord.py's own retries): for a create
   (``CREATE_METHODS``: createMessage) ``UncertainDeliveryError`` (Discord may have stored the message; a re-send
   with the same nonce settles it, :meth:`~adapters.discord.adapter.DiscordAdapter.settle_send`), for any other
   call ``PlatformUnavailableError`` (:func:`adapters.http_failures.server_error`).
1. ``CODE_RULES``: the Discord JSON error code of a ``discord.HTTPException``
   (https://discord.com/developers/docs/topics/opcodes-and-status-codes#json). 10003 ``Unknown Channel`` and
   10008 ``Unknown Message`` are ``TargetNotFoundError``; 50001 / 50005 / 50007 / 50013 are
   ``ForbiddenError``; 50006 ``Cannot send an empty message`` is ``PayloadRejectedError(EMPTY)``; 50035
   ``Invalid Form Body`` is ``PayloadRejectedError(TOO_LONG)`` when a field error has code
   ``BASE_TYPE_MAX_LENGTH`` (content over 2000 characters), else ``PayloadRejectedError(OTHER)``; 50024
   ``Cannot execute action on this channel type`` and 160004 ``A thread has already been created for this
   message`` are ``PermanentDeliveryError`` (the target, not the payload). No Discord error means a message is
   frozen (``MessageFrozenError``): a bot edits its own messages for as long as they exist; 30046 "Maximum
   number of edits to messages older than 1 hour reached. Try again later" comes as a 429 with ``retry_after``
   (https://github.com/discord/discord-api-docs/pull/4381) and is a ``RateLimitedError`` like every 429.
2. ``TYPE_RULES``: the exception type. :class:`RateLimitAnswer` (a 429 caught before discord.py's retry loop,
   see :mod:`adapters.discord.adapter`) and ``discord.RateLimited`` become
   ``RateLimitedError(retry_after_s, scope)``: scope ``BOT`` for Discord's global limit (``"global": true``,
   https://discord.com/developers/docs/topics/rate-limits#global-rate-limit) or a Cloudflare ban, else
   ``CONVERSATION`` (the route's bucket is per channel). ``LoginFailure`` (401 at login) and ``Forbidden``
   are ``ForbiddenError``; other HTTP errors go by status (``STATUS_RULES``). aiohttp errors
   (:data:`adapters.http_failures.NETWORK_OUTCOMES`): a connection that never opened is
   ``PlatformUnavailableError``; a broken connection or a timeout after the request may have been written is
   ``UncertainDeliveryError`` (it may have landed).
3. ``PHASE_RULES``: a call that ran out of ``send_timeout_s``, by how far it got: still waiting in discord.py's
   rate-limit bucket (nothing sent) → ``RateLimitedError``; connecting (nothing sent) →
   ``PlatformUnavailableError``; sent, no answer → ``UncertainDeliveryError``.

Before all of them, a 2xx answer discord.py cannot read (:class:`MalformedAnswerError`, :mod:`adapters.discord.trace`)
is :class:`core.errors.UnreadableAnswerError` (unknown: a create is settled by its nonce, an edit retried) for every
call (:func:`adapters.http_failures.unreadable_answer`), except the login (``READ_METHODS``): the call it came before
was not sent, ``PlatformUnavailableError``.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp

from streamrelay.adapters.discord._sdk import discord
from streamrelay.adapters.error_factories import ErrorFactory, plain_error, rejected_error
from streamrelay.adapters.http_failures import NETWORK_OUTCOMES, server_error, unreadable_answer
from streamrelay.core.errors import (
    AnswerTimeoutError,
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

PLATFORM = "discord"

CREATE_METHODS = frozenset({"createMessage"})
"""Calls that make a new message: a 5xx answer to them is uncertain (the message may be stored)."""
READ_METHODS = frozenset({"login"})
"""Calls that change nothing: an answer to them that cannot be read means the call they came before was not sent."""


class RateLimitAnswer(discord.RateLimited):
    """A 429 answer, raised from the aiohttp trace hook before discord.py's request loop could sleep and retry.

    Attributes:
        retry_after: seconds to wait (the body's ``retry_after``; ``Retry-After`` when there is no JSON body).
        is_global: Discord's global limit (``"global": true`` or ``X-RateLimit-Global``) or a Cloudflare ban.
        scope: ``X-RateLimit-Scope`` (``user``, ``global``, ``shared``), or None.
        cloudflare: a 429 without a ``Via`` header or a JSON body: Cloudflare banned this IP for a while
            (https://discord.com/developers/docs/topics/rate-limits#invalid-request-limit-aka-cloudflare-bans).
    """

    def __init__(self, retry_after: float, *, is_global: bool, scope: str | None, cloudflare: bool) -> None:
        super().__init__(retry_after)
        self.is_global = is_global
        self.scope = scope
        self.cloudflare = cloudflare
        kind = "a Cloudflare ban" if cloudflare else "global" if is_global else f"scope {scope or 'unknown'}"
        self.args = (f"429 Too Many Requests ({kind}): retry after {retry_after:g} s",)


class MalformedAnswerError(discord.DiscordException):
    """A 2xx answer discord.py cannot read (:mod:`adapters.discord.trace`): a body that is not JSON (empty where an
    object is due, an HTML page), or JSON that is not the object the call returns (``{}``, ``{"id": null}``).

    Attributes:
        status: its HTTP status.
        why: what is wrong with it, for people (``not JSON (Content-Type text/html)``, ...).
        body: its body as received.
    """

    def __init__(self, status: int, why: str, body: bytes) -> None:
        super().__init__(f"unreadable answer (HTTP {status}): {why}")
        self.status = status
        self.why = why
        self.body = body


class Phase(enum.StrEnum):
    """How far one call got, as the aiohttp trace hooks saw it."""

    QUEUED = "queued"
    """Waiting in discord.py's rate-limit bucket or global lock: no request started."""
    CONNECTING = "connecting"
    """The request started; its headers are not written yet (connecting, DNS, TLS)."""
    SENT = "sent"
    """The request headers were written: Discord may be processing it."""
    ANSWERED = "answered"
    """The answer and its body were read."""


_plain = functools.partial(plain_error, PLATFORM)
_rejected = functools.partial(rejected_error, PLATFORM)


def _form_body(message: str, target: str, original: BaseException) -> DeliveryError:
    too_long = "BASE_TYPE_MAX_LENGTH" in set(_field_error_codes(getattr(original, "_errors", None)))
    reason = RejectReason.TOO_LONG if too_long or "or fewer in length" in message else RejectReason.OTHER
    return PayloadRejectedError(message, reason=reason, platform=PLATFORM, target=target)


def _field_error_codes(errors: Any) -> Iterator[str]:
    """Every ``_errors[].code`` in Discord's nested form-error tree (discord.py keeps it as ``_errors``)."""
    if not isinstance(errors, dict):
        return
    for key, value in errors.items():
        if key == "_errors" and isinstance(value, list):
            yield from (str(item.get("code")) for item in value if isinstance(item, dict))
        else:
            yield from _field_error_codes(value)


def _rate_limited(message: str, target: str, original: BaseException) -> DeliveryError:
    retry_after_s = float(original.retry_after) if isinstance(original, discord.RateLimited) else 60.0
    is_global = isinstance(original, RateLimitAnswer) and original.is_global
    scope = RateScope.BOT if is_global or not isinstance(original, discord.RateLimited) else RateScope.CONVERSATION
    return RateLimitedError(message, retry_after_s=retry_after_s, scope=scope, platform=PLATFORM, target=target)


CODE_RULES: tuple[tuple[int, ErrorFactory], ...] = (
    (10003, _plain(TargetNotFoundError)),  # Unknown Channel
    (10008, _plain(TargetNotFoundError)),  # Unknown Message
    (10015, _plain(TargetNotFoundError)),  # Unknown Webhook
    (50001, _plain(ForbiddenError)),  # Missing Access
    (50005, _plain(ForbiddenError)),  # Cannot edit a message authored by another user
    (50007, _plain(ForbiddenError)),  # Cannot send messages to this user
    (50013, _plain(ForbiddenError)),  # Missing Permissions
    (50083, _plain(ForbiddenError)),  # Operation is not allowed in an archived thread
    (50024, _plain(PermanentDeliveryError)),  # Cannot execute action on this channel type (a thread in a thread)
    (160004, _plain(PermanentDeliveryError)),  # A thread has already been created for this message
    (50006, _rejected(RejectReason.EMPTY)),  # Cannot send an empty message
    (50035, _form_body),  # Invalid Form Body: BASE_TYPE_MAX_LENGTH → too long
    (50109, _rejected(RejectReason.OTHER)),  # The request body contains invalid JSON
)

STATUS_RULES: tuple[tuple[int, ErrorFactory], ...] = (
    (400, _rejected(RejectReason.OTHER)),
    (401, _plain(ForbiddenError)),  # the token was revoked
    (403, _plain(ForbiddenError)),
    (404, _plain(PermanentDeliveryError)),  # no Discord code: a wrong route or base URL
    (413, _rejected(RejectReason.TOO_LONG)),
    (429, _rate_limited),  # discord.py's own 429 without Via (a Cloudflare ban), if one ever got past the hook
)

TYPE_RULES: tuple[tuple[type[BaseException], ErrorFactory], ...] = (
    (discord.RateLimited, _rate_limited),
    (discord.LoginFailure, _plain(ForbiddenError)),
    (discord.DiscordServerError, _plain(PlatformUnavailableError)),  # not reached: HTTPException, read by status
    *((kind, _plain(outcome)) for kind, outcome in NETWORK_OUTCOMES),  # TimeoutError: not the call's deadline
)

PHASE_RULES: dict[Phase, type[DeliveryError]] = {
    Phase.CONNECTING: PlatformUnavailableError,  # nothing written yet
    Phase.SENT: AnswerTimeoutError,  # written, no answer in time: it may have landed
    Phase.ANSWERED: UncertainDeliveryError,  # not reached: the deadline is lifted once the answer is read
}
"""Timeouts past the bucket; :func:`timed_out` turns a call still queued in the bucket into a 429-like
``RateLimitedError`` (nothing was sent)."""

BOUNDARY_ERRORS: tuple[type[BaseException], ...] = (discord.DiscordException, aiohttp.ClientError)
"""What :func:`translate` accepts: everything discord.py's HTTP client can raise for one call."""


def _factory(exc: BaseException, method: str) -> ErrorFactory:
    if isinstance(exc, discord.HTTPException):
        if exc.status >= 500:
            return _plain(server_error(creates=method in CREATE_METHODS))
        by_code = next((make for code, make in CODE_RULES if exc.code == code), None)
        if by_code is not None:
            return by_code
        return next((make for status, make in STATUS_RULES if exc.status == status), _plain(PermanentDeliveryError))
    return next((make for kind, make in TYPE_RULES if isinstance(exc, kind)), _plain(PermanentDeliveryError))


def translate(exc: BaseException, *, method: str, target: str, scrub: Callable[[str], str]) -> DeliveryError:
    """Map one failed call to a :class:`core.errors.DeliveryError`.

    Args:
        exc: what discord.py (or aiohttp beneath it) raised; one of :data:`BOUNDARY_ERRORS`.
        method: Discord's name of the call, e.g. ``createMessage`` (for the message; ``CREATE_METHODS`` make a 5xx
            uncertain).
        target: the channel id, for the error's ``target``.
        scrub: removes secrets (the bot token) from text; applied to the whole message.

    Returns:
        The error to raise; its message is ``discord <method>: <what discord.py said>``, token-free. Raise it
        outside the ``except`` block (no ``__context__``): the original holds the request and its headers.
    """
    if isinstance(exc, MalformedAnswerError):
        error = unreadable_answer(
            PLATFORM, method, status=exc.status, why=exc.why, body=exc.body, target=target, scrub=scrub
        )
        return (
            PlatformUnavailableError(str(error), platform=PLATFORM, target=target) if method in READ_METHODS else error
        )
    description = f"{type(exc).__name__}: {exc}".rstrip(": ")
    return _factory(exc, method)(scrub(f"discord {method}: {description}"), target, exc)


def timed_out(phase: Phase, *, method: str, target: str, timeout_s: float, bucket_wait_s: float) -> DeliveryError:
    """The error for a call that ran out of its ``timeout_s`` (float seconds) in ``phase``.

    ``bucket_wait_s`` is how long discord.py's bucket still holds the route, as the last ``X-RateLimit-*``
    headers said (used as ``retry_after_s`` when the call never left the bucket).
    """
    if phase is Phase.QUEUED:
        message = f"discord {method}: still waiting in discord.py's rate-limit bucket after {timeout_s:g} s"
        return RateLimitedError(message, retry_after_s=bucket_wait_s, platform=PLATFORM, target=target)
    message = f"discord {method}: no answer within {timeout_s:g} s ({phase.value})"
    return PHASE_RULES[phase](message, platform=PLATFORM, target=target)
