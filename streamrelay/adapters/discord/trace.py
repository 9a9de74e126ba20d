"""discord.py's HTTP calls as aiohttp trace hooks see them: each call's deadline and phase, and every answer
read before discord.py's own retry loop.

discord.py 2.7 (``discord/http.py`` ``HTTPClient.request``) sleeps and retries a 429 itself (unless
``retry_after`` exceeds ``max_ratelimit_timeout``, clamped to at least 30 s) and retries 500/502/504/524. The
``on_request_end`` hook raises a 429 as :class:`~adapters.discord.errors.RateLimitAnswer` and a 5xx as
``DiscordServerError`` first; discord.py's loop only catches ``OSError``, so it neither sleeps nor retries.
The other hooks move the call's deadline: restarted when the request really starts (time queued in a
discord.py bucket is not the platform's), lifted once the answer is read. Hooks run in the calling task and
find its :class:`CallState` in :data:`CALL` (https://discord.com/developers/docs/topics/rate-limits).

Answers discord.py cannot read. Discord answers a successful call with a JSON object (``Content-Type:
application/json``) or 204 with no body (https://discord.com/developers/docs/reference#http-api); discord.py decodes
a body only when the header is exactly that (``discord/http.py`` ``json_or_text``), then builds its objects from it
(``Message(data=...)``: ``int(data['id'])``, ``data['attachments']``...). A 200 with an empty body was a
``JSONDecodeError``, an HTML page a ``TypeError``, ``{}`` a ``KeyError``, ``{"id": null}`` a ``TypeError``, each
escaping the adapter. Two places read them, for every call:

- ``on_request_end`` raises :class:`~adapters.discord.errors.MalformedAnswerError` for a 2xx body that is not JSON
  by its header (an HTML page), and keeps each answer's status and body on the call's :class:`CallState`;
- :func:`malformed_answer` turns what discord.py raised while reading a 2xx answer it got (:data:`READING_ERRORS`)
  into the same error; :class:`~adapters.discord.connection.DiscordConnection` asks it for every call and the login.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import aiohttp

from streamrelay.adapters.discord._sdk import discord
from streamrelay.adapters.discord.errors import MalformedAnswerError, Phase, RateLimitAnswer

CLOUDFLARE_BAN_S = 60.0
"""``retry_after_s`` for a 429 without ``Via`` or JSON (a Cloudflare ban) that names no ``Retry-After``."""
JSON = "application/json"
"""The one ``Content-Type`` whose body discord.py decodes (exactly)."""
MAX_REMEMBERED_BUCKETS = 1024
"""Emptied buckets remembered for timeout errors before reset ones are forgotten."""


class CallState:
    """One call's deadline and progress. The trace hooks run in the calling task and find it in ``CALL``."""

    def __init__(self, timeout_s: float, resets: dict[str, float], bucket_key: str) -> None:
        self.timeout_s = timeout_s
        self.phase = Phase.QUEUED
        self.deadline: asyncio.Timeout | None = None
        self.status: int | None = None
        """The HTTP status of the answer read (None: none yet)."""
        self.body = b""
        """That answer's body, kept for the call's life (an unreadable one is quoted)."""
        self._resets = resets
        self._bucket_key = bucket_key

    def advance(self, phase: Phase) -> None:
        order = list(Phase)
        if order.index(phase) > order.index(self.phase):
            self.phase = phase

    def reschedule(self, seconds: float | None) -> None:
        """Deadline ``seconds`` from now (None: no deadline), unless it already fired."""
        if self.deadline is not None and not self.deadline.expired():
            when = None if seconds is None else asyncio.get_running_loop().time() + seconds
            self.deadline.reschedule(when)

    def answered(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        """The answer is read: keep it, lift the deadline; remember until when an emptied bucket holds the route."""
        self.status, self.body = status, body
        self.advance(Phase.ANSWERED)
        self.reschedule(None)
        now = asyncio.get_running_loop().time()
        reset_after = _seconds(headers.get("X-RateLimit-Reset-After"))
        if headers.get("X-RateLimit-Remaining") == "0" and reset_after is not None:
            self._resets[self._bucket_key] = now + reset_after
        else:
            self._resets.pop(self._bucket_key, None)
        if len(self._resets) > MAX_REMEMBERED_BUCKETS:  # forget buckets that have reset
            for key in [key for key, until in self._resets.items() if until <= now]:
                del self._resets[key]

    def bucket_wait_s(self) -> float:
        """How long discord.py's bucket still holds this route (1 s when no header said)."""
        wait = self._resets.get(self._bucket_key, 0.0) - asyncio.get_running_loop().time()
        return round(wait, 3) if wait > 0 else 1.0


CALL: contextvars.ContextVar[CallState | None] = contextvars.ContextVar("discord_call", default=None)


async def _on_request_start(
    _session: aiohttp.ClientSession, _ctx: SimpleNamespace, _params: aiohttp.TraceRequestStartParams
) -> None:
    state = CALL.get()
    if state is not None:
        state.advance(Phase.CONNECTING)
        state.reschedule(state.timeout_s)


async def _on_request_headers_sent(
    _session: aiohttp.ClientSession, _ctx: SimpleNamespace, _params: aiohttp.TraceRequestHeadersSentParams
) -> None:
    state = CALL.get()
    if state is not None:
        state.advance(Phase.SENT)


async def _on_request_end(
    _session: aiohttp.ClientSession, _ctx: SimpleNamespace, params: aiohttp.TraceRequestEndParams
) -> None:
    """Read the answer under the call's deadline; stop a 429 or 5xx before discord.py's retry loop sees it."""
    response = params.response
    body = await response.read()  # cached: discord.py's json_or_text reads it again for free
    state = CALL.get()
    if state is not None:
        state.answered(response.status, response.headers, body)
    if response.status == 429:
        raise _rate_limit_answer(response, await discord.http.json_or_text(response))
    if response.status >= 500:
        raise discord.DiscordServerError(response, await discord.http.json_or_text(response))
    content_type = response.headers.get("Content-Type")
    if 200 <= response.status < 300 and content_type != JSON and body.strip():
        raise MalformedAnswerError(response.status, f"not JSON (Content-Type {content_type or 'none'})", body)


READING_ERRORS: tuple[type[Exception], ...] = (ValueError, KeyError, IndexError, TypeError, AttributeError)
"""What discord.py raises reading a 2xx answer that is not what it expects (``JSONDecodeError`` and
``UnicodeDecodeError`` are ``ValueError``s)."""


def malformed_answer(exc: BaseException, state: CallState) -> MalformedAnswerError | None:
    """``exc`` as the unreadable answer it came from, when it is one of :data:`READING_ERRORS` raised after the call
    read a 2xx answer (discord.py decoding it or building its object); None otherwise (not an answer's fault)."""
    if not isinstance(exc, READING_ERRORS) or state.status is None or not 200 <= state.status < 300:
        return None
    if isinstance(exc, json.JSONDecodeError):
        why = "an empty body" if not state.body.strip() else "not JSON"
    elif isinstance(exc, UnicodeDecodeError):
        why = "not UTF-8 text"
    else:
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())
        why = f"not the object discord.py reads ({detail[:80]})"
    return MalformedAnswerError(state.status, why, state.body)


def _rate_limit_answer(response: aiohttp.ClientResponse, data: dict[str, Any] | str) -> RateLimitAnswer:
    """A 429 as Discord describes it (https://discord.com/developers/docs/topics/rate-limits#exceeding-a-rate-limit):
    JSON ``retry_after`` (float seconds) and ``global``, ``X-RateLimit-Scope``; without ``Via`` or JSON it is a
    Cloudflare ban of the whole IP."""
    headers = response.headers
    header_s = _seconds(headers.get("Retry-After"))
    if not headers.get("Via") or not isinstance(data, dict):
        return RateLimitAnswer(header_s or CLOUDFLARE_BAN_S, is_global=True, scope=None, cloudflare=True)
    retry_after_s = _seconds(data.get("retry_after")) or header_s or 1.0
    is_global = data.get("global") is True or headers.get("X-RateLimit-Global", "").lower() == "true"
    return RateLimitAnswer(retry_after_s, is_global=is_global, scope=headers.get("X-RateLimit-Scope"), cloudflare=False)


def trace_config() -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(_on_request_start)
    trace.on_request_headers_sent.append(_on_request_headers_sent)
    trace.on_request_end.append(_on_request_end)
    return trace


def _seconds(value: Any) -> float | None:
    """``value`` as seconds to wait, or None when it is no duration: not a number, NaN or negative (infinity is
    kept: the channel's ``max_retry_after_s`` refuses it)."""
    try:
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
    return seconds if seconds is not None and seconds >= 0 else None
