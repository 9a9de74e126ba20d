"""slack-sdk / aiohttp failures → streamrelay's :mod:`core.errors`, by table.

Slack refuses with HTTP 200 ``{"ok": false, "error": "<code>"}`` and slack-sdk raises ``SlackApiError`` for it
(https://docs.slack.dev/apis/web-api/#responses); a rate limit is HTTP 429 with ``Retry-After`` seconds
(https://docs.slack.dev/apis/web-api/rate-limits). Read in this order, first match wins:

1. HTTP status: 429 (or the code ``ratelimited`` / ``rate_limited``) → ``RateLimitedError(retry_after_s,
   scope)``, the scope from :data:`RATE_SCOPES` (chat.postMessage is limited per channel; chat.update and the
   other methods per method and workspace: https://docs.slack.dev/reference/methods/chat.update); >= 500 → for a
   create (``CREATE_METHODS``: chat.postMessage, chat.startStream) ``UncertainDeliveryError`` (Slack may have
   stored the message: a chat.postMessage is settled by its metadata, :mod:`adapters.slack.settle`), for any other
   call ``PlatformUnavailableError`` (:func:`adapters.http_failures.server_error`); so are the codes
   ``internal_error`` and ``fatal_error`` (:data:`SERVER_ERROR_CODES`).
2. ``ERROR_RULES``: the error code, exactly; then ``PREFIX_RULES`` (``restricted_action…``, ``invalid_blocks…``).
   chat.update's ``cant_update_message`` and ``edit_window_closed`` are ``MessageFrozenError``: the message stays
   as it is and the core goes on in a new one (https://docs.slack.dev/reference/methods/chat.update#errors).
3. ``NETWORK_RULES`` (:data:`adapters.http_failures.NETWORK_OUTCOMES`): the exception type. A connection that
   never opened is ``PlatformUnavailableError``; a timeout or broken connection after the request may have been
   written is ``UncertainDeliveryError``.
4. Anything else is ``PermanentDeliveryError``.

Before them all: an answer with a success status that cannot be read (:class:`adapters.slack.answers.UnreadableAnswer`:
empty, HTML, no JSON object, no ``ok``, a create without its ``ts``) is ``UnreadableAnswerError``, *unknown* for every
method (:func:`adapters.http_failures.unreadable_answer`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from streamrelay.adapters.error_factories import ErrorFactory, plain_error, rejected_error
from streamrelay.adapters.http_failures import NETWORK_OUTCOMES, server_error, unreadable_answer
from streamrelay.adapters.slack.answers import UnreadableAnswer
from streamrelay.core.errors import (
    DeliveryError,
    ForbiddenError,
    MessageFrozenError,
    PermanentDeliveryError,
    PlatformUnavailableError,
    RateLimitedError,
    RateScope,
    RejectReason,
    TargetNotFoundError,
)

PLATFORM = "slack"

CREATE_METHODS = frozenset({"chat.postMessage", "chat.startStream"})
"""Methods that make a new message: a 5xx answer to them is uncertain (the message may be stored)."""

RATE_SCOPES: dict[str, RateScope] = {"chat.postMessage": RateScope.CONVERSATION}
"""What a 429 pauses, per method; every other method: ``RateScope.METHOD`` (Slack's tiers are per method and
workspace, https://docs.slack.dev/apis/web-api/rate-limits)."""


_plain = functools.partial(plain_error, PLATFORM)
_rejected = functools.partial(rejected_error, PLATFORM)


_NOT_FOUND = _plain(TargetNotFoundError)
_FORBIDDEN = _plain(ForbiddenError)

ERROR_RULES: dict[str, ErrorFactory] = {
    # the conversation or the message is not there (any more), or cannot be deleted
    "channel_not_found": _NOT_FOUND,
    "message_not_found": _NOT_FOUND,
    "thread_not_found": _NOT_FOUND,
    "cant_delete_message": _NOT_FOUND,
    # the message is there but takes no more edits: like Telegram's "message can't be edited"
    # (https://docs.slack.dev/reference/methods/chat.update#errors)
    "cant_update_message": _plain(MessageFrozenError),
    "edit_window_closed": _plain(MessageFrozenError),
    # the bot may not write there, or its token is not good (https://docs.slack.dev/reference/methods/chat.postMessage#errors)
    "not_in_channel": _FORBIDDEN,
    "is_archived": _FORBIDDEN,
    "is_inactive": _FORBIDDEN,
    "invalid_auth": _FORBIDDEN,
    "not_authed": _FORBIDDEN,
    "token_revoked": _FORBIDDEN,
    "token_expired": _FORBIDDEN,
    "account_inactive": _FORBIDDEN,
    "missing_scope": _FORBIDDEN,
    "no_permission": _FORBIDDEN,
    "access_denied": _FORBIDDEN,
    "ekm_access_denied": _FORBIDDEN,
    "not_allowed_token_type": _FORBIDDEN,
    "team_access_not_granted": _FORBIDDEN,
    # the content
    "msg_too_long": _rejected(RejectReason.TOO_LONG),
    "msg_blocks_too_long": _rejected(RejectReason.TOO_LONG),
    "no_text": _rejected(RejectReason.EMPTY),
    "markdown_text_conflict": _rejected(RejectReason.BAD_FORMAT),
    "invalid_arguments": _rejected(RejectReason.OTHER),
    # Slack's own trouble: "service_unavailable" was not processed ("internal_error" and "fatal_error" are
    # SERVER_ERROR_CODES: read like a 5xx)
    "service_unavailable": _plain(PlatformUnavailableError),
    "request_timeout": _plain(PlatformUnavailableError),
}

SERVER_ERROR_CODES = frozenset({"internal_error", "fatal_error"})
"""Refusals that say "it's possible some aspect of the operation succeeded"
(https://docs.slack.dev/reference/methods/chat.update#errors): a 5xx in a 200, read like one (uncertain for a
create, unavailable for anything else)."""

PREFIX_RULES: tuple[tuple[str, ErrorFactory], ...] = (
    ("restricted_action", _FORBIDDEN),  # restricted_action_read_only_channel, …_thread_locked, …
    ("invalid_blocks", _rejected(RejectReason.BAD_FORMAT)),  # invalid_blocks, invalid_blocks_format
    ("invalid_markdown", _rejected(RejectReason.BAD_FORMAT)),
)

NETWORK_RULES: tuple[tuple[type[BaseException], ErrorFactory], ...] = tuple(
    (kind, _plain(outcome)) for kind, outcome in NETWORK_OUTCOMES
)

BOUNDARY_ERRORS: tuple[type[BaseException], ...] = (SlackClientError, aiohttp.ClientError, asyncio.TimeoutError)
"""What :func:`translate` accepts: everything one slack-sdk call can raise."""


def error_code(exc: BaseException) -> str | None:
    """Slack's ``error`` string of a refusal (``"msg_too_long"``), or None when there is none."""
    if not isinstance(exc, SlackApiError):
        return None
    data = exc.response.data
    code = data.get("error") if isinstance(data, dict) else None
    return code if isinstance(code, str) else None


def _retry_after_s(exc: SlackApiError) -> float:
    try:
        return max(0.0, float(exc.response.headers.get("Retry-After", 1)))
    except (TypeError, ValueError):
        return 1.0


def _api_error(exc: SlackApiError, method: str, message: str, target: str) -> DeliveryError:
    status, code = exc.response.status_code, error_code(exc) or ""
    if status == 429 or code in ("ratelimited", "rate_limited"):
        scope = RATE_SCOPES.get(method, RateScope.METHOD)
        return RateLimitedError(
            message, retry_after_s=_retry_after_s(exc), scope=scope, platform=PLATFORM, target=target
        )
    if status >= 500 or code in SERVER_ERROR_CODES:
        return server_error(creates=method in CREATE_METHODS)(message, platform=PLATFORM, target=target)
    make = ERROR_RULES.get(code) or next((f for prefix, f in PREFIX_RULES if code.startswith(prefix)), None)
    return (make or _plain(PermanentDeliveryError))(message, target, exc)


def translate(exc: BaseException, *, method: str, target: str, scrub: Callable[[str], str]) -> DeliveryError:
    """Map one failed call to a :class:`core.errors.DeliveryError`.

    Args:
        exc: what slack-sdk (or aiohttp beneath it) raised; one of :data:`BOUNDARY_ERRORS`.
        method: the Web API method, e.g. ``chat.update`` (for the message, the rate scope and whether a 5xx is
            uncertain).
        target: the channel id, for the error's ``target``.
        scrub: removes secrets (the token) from text; applied to the whole message.

    Returns:
        The error to raise, its message ``slack <method>: <error code or exception>`` (HTTP status added when
        not 200; ``slack <method>: unreadable answer (HTTP <status>): <why>; body '<excerpt>'`` for an
        :class:`~adapters.slack.answers.UnreadableAnswer`), token-free. Raise it ``from None``: the original holds
        the request, token included.
    """
    if isinstance(exc, UnreadableAnswer):  # the body scrubbed whole: its excerpt could cut a token in two
        why, body = exc.why, scrub(exc.body.decode("utf-8", "replace"))
        return unreadable_answer(PLATFORM, method, status=exc.status, why=why, body=body, target=target, scrub=scrub)
    if isinstance(exc, SlackApiError):
        status, code = exc.response.status_code, error_code(exc) or "no error code"
        detail = code if status == 200 else f"HTTP {status} {code}"
        return _api_error(exc, method, scrub(f"slack {method}: {detail}"), target)
    message = scrub(f"slack {method}: {type(exc).__name__}: {exc}".rstrip(": "))
    make = next((f for kind, f in NETWORK_RULES if isinstance(exc, kind)), _plain(PermanentDeliveryError))
    return make(message, target, exc)
