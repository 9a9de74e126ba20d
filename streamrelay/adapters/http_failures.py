"""What a failed HTTP call says about a call: was the request never sent, or may it have landed?

Shared by every adapter whose SDK talks HTTP through aiohttp (aiogram, slack-sdk, discord.py), so the rule
that decides between "retry freely" and "never send again" is written once.

Network failures, :data:`NETWORK_OUTCOMES` (first match wins; aiohttp 3.14's ``client.py`` /
``client_reqrep.py`` say where each is raised):

- a connection that never opened (refused, DNS, TLS, connect timeout, a certificate fingerprint mismatch) or
  a request that could not be written at all (``ClientConnectionResetError``: "Cannot write to closing
  transport", raised before any byte of the request went out; a body that fails half-way is wrapped in
  ``ClientOSError`` instead): nothing was sent → ``PlatformUnavailableError``;
- a timeout after connecting, or a connection broken while the request was written or its answer read (reset,
  server disconnected, a truncated answer): the platform may have processed it → ``UncertainDeliveryError``;
- any other client error (an invalid URL, a closed connector, and the like): nothing was sent →
  ``PlatformUnavailableError``.

HTTP 5xx answers, :func:`server_error`: a 5xx means the platform failed somewhere between receiving the call and
answering it, maybe after storing it (a gateway timing out on a backend that went on). For a *create* (a call
that makes a new message: repeating it could show the message twice) that is ``UncertainDeliveryError``, settled
with :meth:`core.ports.ChannelAdapter.settle_send`; for every other call (edits, deletes, reads, typing: repeating
them does no harm) it is ``PlatformUnavailableError``, retried by the core.

Answers the adapter cannot read, :func:`unreadable_answer`: the platform (or a proxy in front of it) answered, but
not in the platform's documented shape (a 200 without the result, an empty body, an HTML page, a message without
its id). Whatever the call, that is *unknown*: ``UnreadableAnswerError``, an ``UncertainDeliveryError`` (a create
is settled, the rest retried), never the SDK's ``JSONDecodeError`` / ``KeyError`` / ``ValidationError``. Each
adapter reads it where its SDK decodes answers (:mod:`adapters.telegram.session`, :mod:`adapters.discord.trace`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp

from streamrelay.core.errors import (
    AnswerTimeoutError,
    DeliveryError,
    PlatformUnavailableError,
    UncertainDeliveryError,
    UnreadableAnswerError,
)

EXCERPT_CHARS = 80
"""How much of an unreadable answer's body an error quotes (whitespace runs count as one space)."""

NETWORK_OUTCOMES: tuple[tuple[type[BaseException], type[DeliveryError]], ...] = (
    (aiohttp.ConnectionTimeoutError, PlatformUnavailableError),  # connect timed out: nothing sent
    (asyncio.TimeoutError, AnswerTimeoutError),  # sent, no answer in time (aiohttp.ServerTimeoutError too)
    (aiohttp.ClientConnectorError, PlatformUnavailableError),  # refused, DNS, TLS: nothing sent
    (aiohttp.ServerFingerprintMismatch, PlatformUnavailableError),  # TLS pin checked before sending
    (aiohttp.ClientConnectionResetError, PlatformUnavailableError),  # the transport was closing: nothing written
    (aiohttp.ServerDisconnectedError, UncertainDeliveryError),  # closed while the answer was awaited
    (aiohttp.ClientOSError, UncertainDeliveryError),  # reset mid-request ("Can not write request body", ECONNRESET)
    (aiohttp.ClientPayloadError, UncertainDeliveryError),  # the answer was cut off
    (aiohttp.ClientError, PlatformUnavailableError),  # InvalidURL, "Connector is closed" and the like: nothing sent
)
"""``(exception type, what it means)``, most specific first."""


def server_error(*, creates: bool) -> type[DeliveryError]:
    """What an HTTP 5xx answer means for a call that ``creates`` a message (module docstring).

    Returns:
        ``UncertainDeliveryError`` for a create (the platform may have stored it: never sent blindly again),
        else ``PlatformUnavailableError`` (safe to repeat).
    """
    return UncertainDeliveryError if creates else PlatformUnavailableError


def excerpt(body: str | bytes, *, limit: int = EXCERPT_CHARS) -> str:
    """The start of an answer's ``body`` for an error message: undecodable bytes replaced, whitespace runs (newlines
    too) one space, at most ``limit`` characters (then ``…``). Not scrubbed: the caller scrubs the whole message."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def unreadable_answer(
    platform: str,
    method: str,
    *,
    status: int | None,
    why: str,
    body: str | bytes,
    target: str,
    scrub: Callable[[str], str],
) -> UnreadableAnswerError:
    """The error for an answer to ``method`` that cannot be read (module docstring).

    Args:
        platform: e.g. ``telegram``.
        method: the platform's name of the call, e.g. ``sendMessage``.
        status: the answer's HTTP status (None: not known).
        why: what is wrong with it, e.g. ``ok without a result``.
        body: the answer's body as received; only its :func:`excerpt` is quoted.
        target: the conversation id, for the error's ``target``.
        scrub: removes secrets (the bot token) from text; applied to the message and the excerpt.

    Returns:
        ``UnreadableAnswerError`` whose message is ``<platform> <method>: unreadable answer (HTTP <status>): <why>;
        body '<excerpt>'`` (``body empty`` for none).
    """
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    quoted = excerpt(scrub(text))  # scrubbed whole before the cut: a token cut in half is no longer recognised
    shown = f"body {quoted!r}" if quoted else "body empty"
    code = "HTTP ?" if status is None else f"HTTP {status}"
    message = scrub(f"{platform} {method}: unreadable answer ({code}): {why}; {shown}")
    return UnreadableAnswerError(message, status=status, excerpt=quoted, platform=platform, target=target)
