"""discord.py's HTTP calls as aiohttp trace hooks see them: each call's deadline and phase, and every answer
read before discord.py's own retry loop.

discord.py 2.7 (``discord/http.py`` ``HTTPClient.request``) sleeps and retries a 429 itself (unless
``retry_after`` exceeds ``max_ratelimit_timeout``, clamped to at least 30 s) and retries 500/502/504/524. The
``on_request_end`` hook raises a 429 as :class:`~adapters.discord.errors.RateLimitAnswer` and a 5xx as
``DiscordServerError`` first; discord.py's loop only catches ``OSError``, so it neither sleeps nor retries.
The other hooks move the call's deadline: restarted when the request really starts (time queued in a
discord.py bucket is not the platform's), lifted once the answer is read. Hooks run in the calling task and
find its :class:`CallState` in :data:`CALL` (https://discord.com/developers/docs/topics/rate-limits).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import aiohttp

from adapters.discord._sdk import discord
from adapters.discord.errors import Phase, RateLimitAnswer

CLOUDFLARE_BAN_S = 60.0
"""``retry_after_s`` for a 429 without ``Via`` or JSON (a Cloudflare ban) that names no ``Retry-After``."""
MAX_REMEMBERED_BUCKETS = 1024
"""Emptied buckets remembered for timeout errors before reset ones are forgotten."""


class CallState:
    """One call's deadline and progress. The trace hooks run in the calling task and find it in ``CALL``."""

    def __init__(self, timeout_s: float, resets: dict[str, float], bucket_key: str) -> None:
        self.timeout_s = timeout_s
        self.phase = Phase.QUEUED
        self.deadline: asyncio.Timeout | None = None
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

    def answered(self, headers: Mapping[str, str]) -> None:
        """The answer is read: lift the deadline; remember until when an emptied bucket holds the route."""
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
    await response.read()  # cached: discord.py's json_or_text reads it again for free
    state = CALL.get()
    if state is not None:
        state.answered(response.headers)
    if response.status == 429:
        raise _rate_limit_answer(response, await discord.http.json_or_text(response))
    if response.status >= 500:
        raise discord.DiscordServerError(response, await discord.http.json_or_text(response))


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
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
