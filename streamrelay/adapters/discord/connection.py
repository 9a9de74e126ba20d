"""DiscordConnection: one bot's discord.py client used REST-only, where every call is one attempt with its own
deadline and every failure is translated at the boundary (:mod:`adapters.discord.errors`).
:class:`~adapters.discord.adapter.DiscordAdapter` holds one and builds its messages and threads on it.

No gateway connection: ``discord.Client(intents=Intents.none())`` logs in with ``GET /users/@me`` (and
``GET /oauth2/applications/@me``) on the first call, then sends through partial objects
(``get_partial_messageable(id).send`` / ``get_partial_message(id).edit`` / ``.delete`` / ``typing``).

What happens around a rate limit (discord.py 2.7, ``discord/http.py`` ``HTTPClient.request``):

- discord.py keeps a bucket per route and major parameter (channel) from the ``X-RateLimit-*`` headers and
  waits *before* sending when a bucket is empty; the call that empties a bucket also sleeps until its reset
  before returning (``Ratelimit.__aexit__``). That pacing is kept: it is Discord's own description of its
  limits (https://discord.com/developers/docs/topics/rate-limits). A call still waiting there when
  ``send_timeout_s`` runs out sent nothing and raises ``RateLimitedError`` (``retry_after_s`` = the bucket's
  announced reset).
- On a 429 answer, discord.py itself would raise ``HTTPException`` when the answer has no ``Via`` header
  (a Cloudflare ban), raise ``RateLimited`` only when ``retry_after`` exceeds ``max_ratelimit_timeout``
  (clamped to at least 30 s), and otherwise log a warning, sleep ``retry_after`` (holding a process-wide lock
  for a global limit) and retry, up to 5 tries; it also retries 500/502/504/524 after 1, 3, 5, 7 s.
  ``max_ratelimit_timeout`` cannot bring that under 30 s, and it would also make buckets raise pre-emptively.
  So this adapter reads every answer in an aiohttp trace hook (``on_request_end``, discord.py's documented
  ``http_trace``) before discord.py's loop sees it: a 429 raises :class:`~adapters.discord.errors.RateLimitAnswer`
  and a 5xx ``DiscordServerError`` there. discord.py's loop only catches ``OSError``, so it neither sleeps nor
  retries: the platform saw exactly one request and the core gets ``RateLimitedError(retry_after_s,
  scope=BOT if global else CONVERSATION)`` or ``PlatformUnavailableError``. One retry layer, ours.

Answers discord.py cannot read (a 200 with an empty body, an HTML page, ``{}``, ``{"id": null}``) are
:class:`core.errors.UnreadableAnswerError` for every call, :class:`core.errors.PlatformUnavailableError` for the
login (:mod:`adapters.discord.trace`): never discord.py's ``JSONDecodeError`` / ``KeyError`` / ``TypeError``.

Timeouts: each call runs under ``asyncio.timeout(send_timeout_s)``; the trace hooks restart it when the
request actually starts (time queued in a bucket is not the platform's fault) and lift it once the answer is
read (the bucket sleep after a success never turns a delivered message into an uncertain one). What a timeout
means depends on how far the call got (:data:`adapters.discord.errors.PHASE_RULES`).

``discord.http.Route.BASE`` (the API base URL) is a class attribute, so it is process-wide: every live
adapter in a process must use the same ``base_url``; a second one asking for another raises ``ConfigError``.

Discord references: rate limits https://discord.com/developers/docs/topics/rate-limits, error codes
https://discord.com/developers/docs/topics/opcodes-and-status-codes#json.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from streamrelay.adapters.adapter_parts import shows
from streamrelay.adapters.discord._sdk import discord
from streamrelay.adapters.discord.errors import BOUNDARY_ERRORS, PLATFORM, timed_out, translate
from streamrelay.adapters.discord.trace import CALL, READING_ERRORS, CallState, malformed_answer, trace_config
from streamrelay.adapters.error_factories import Scrubber
from streamrelay.core.errors import ConfigError, DeliveryError, PlatformUnavailableError, TargetNotFoundError
from streamrelay.core.events import Target

T = TypeVar("T")

DEFAULT_BASE_URL = "https://discord.com/api/v10"
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
"""A bot token: three dot-separated base64url parts (user id, timestamp, HMAC)."""
LOGIN_ATTEMPTS = 3
LOGIN_BACKOFF_S = 0.25
"""First wait between login attempts after a connection error; doubles (0.25 s, 0.5 s), at most 2 s."""
_LIVE: weakref.WeakSet[DiscordConnection] = weakref.WeakSet()
"""Open adapters; they all share discord.py's process-wide ``Route.BASE``."""


class DiscordConnection:
    """A discord.py client used REST-only by one bot: logs in on the first call, then runs each call once.

    Args:
        token: the bot token (three dot-separated base64url parts). Never shown in ``repr``, ``str``, logs or
            errors.
        base_url: API base, e.g. ``http://127.0.0.1:8083/api/v10`` for :class:`mocks.discord.MockDiscord`;
            ``None`` is https://discord.com/api/v10. Process-wide (discord.py's ``Route.BASE``).
        send_timeout_s: seconds one call may take once its request starts (and, before that, waiting in
            discord.py's rate-limit bucket). See the module docstring for what a timeout raises.

    Raises:
        ConfigError: the token is malformed, or another open connection in this process uses another base URL.
    """

    base_url: str
    """The API base, without a trailing slash."""
    bot_id: str
    """The bot's user id (public: the token's first part decoded), ``?`` when it cannot be read."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str | None = None,
        send_timeout_s: float = 10.0,
    ) -> None:
        if not TOKEN_RE.match(token):
            raise ConfigError("discord: the bot token is malformed (expected three dot-separated base64url parts)")
        base = (base_url or DEFAULT_BASE_URL).rstrip("/")
        others = {connection.base_url for connection in _LIVE} - {base}
        if others:
            raise ConfigError(
                f"discord: base_url {base!r} differs from {sorted(others)[0]!r}, used by another open "
                "Discord adapter in this process (discord.py's Route.BASE is process-wide)"
            )
        discord.http.Route.BASE = base
        _LIVE.add(self)
        self.base_url = base
        self._token = token
        self._scrub = Scrubber(token, token.split(".", 1)[1])
        self.bot_id = _bot_id(token)
        self.send_timeout_s = send_timeout_s
        self._client: discord.Client | None = None
        self._login_lock = asyncio.Lock()
        self._closed = False
        self._resets: dict[str, float] = {}

    __repr__ = __str__ = shows(bot_id="bot_id", base_url="base_url")

    # -------------------------------------------------------------- login and one call

    async def _ready(self, target: Target) -> discord.Client:
        """The logged-in client; logs in on the first call (once, behind a lock)."""
        if self._closed:
            raise PlatformUnavailableError(
                "discord: the adapter is closed", platform=PLATFORM, target=str(target.chat_id)
            )
        if self._client is None:
            async with self._login_lock:
                if self._client is None:
                    client = await self._login(target)
                    if self._closed:  # closed while logging in
                        await client.close()
                        raise PlatformUnavailableError(
                            "discord: the adapter is closed", platform=PLATFORM, target=str(target.chat_id)
                        )
                    self._client = client
        return self._client

    async def _login(self, target: Target) -> discord.Client:
        """Log in, retrying only connection errors (nothing reached Discord): 3 attempts, exponential backoff.

        Raises:
            ForbiddenError: Discord refused the token (401).
            PlatformUnavailableError: no connection, a 5xx, or no answer within ``send_timeout_s``.
        """
        retrying = AsyncRetrying(
            stop=stop_after_attempt(LOGIN_ATTEMPTS),
            wait=wait_exponential(multiplier=LOGIN_BACKOFF_S, max=2.0),
            retry=retry_if_exception_type(aiohttp.ClientConnectorError),
            reraise=True,
        )
        try:
            return await retrying(self._login_once)
        except TimeoutError:
            error: DeliveryError = PlatformUnavailableError(
                f"discord login: no answer within {self.send_timeout_s:g} s",
                platform=PLATFORM,
                target=str(target.chat_id),
            )
        except BOUNDARY_ERRORS as exc:
            error = translate(exc, method="login", target=str(target.chat_id), scrub=self._scrub)
        raise error  # outside the except block: no __context__ holding the request headers (the token)

    async def _login_once(self) -> discord.Client:
        client = discord.Client(intents=discord.Intents.none(), http_trace=trace_config())
        state = CallState(self.send_timeout_s, {}, "login")  # keeps the answers (an unreadable one is quoted)
        reset_token = CALL.set(state)
        try:
            async with asyncio.timeout(self.send_timeout_s):
                await client.login(self._token)
        except BaseException as exc:
            await client.close()
            malformed = malformed_answer(exc, state)
            if malformed is not None:
                raise malformed from None
            raise
        finally:
            CALL.reset(reset_token)
        return client

    async def call(
        self, method: str, target: Target, channel_id: int, action: Callable[[discord.Client], Awaitable[T]]
    ) -> T:
        """One attempt at one REST call: ``action`` with the logged-in client, under ``method`` (the name errors
        and timeouts use) and ``channel_id`` (its rate-limit bucket); every failure leaves as a ``DeliveryError``
        (token-free)."""
        client = await self._ready(target)
        state = CallState(self.send_timeout_s, self._resets, f"{method}:{channel_id}")
        reset_token = CALL.set(state)
        try:
            async with asyncio.timeout(self.send_timeout_s) as deadline:
                state.deadline = deadline
                return await action(client)
        except TimeoutError as exc:
            if not deadline.expired():  # an aiohttp timeout, not ours
                error = translate(exc, method=method, target=str(target.chat_id), scrub=self._scrub)
            else:
                error = timed_out(
                    state.phase,
                    method=method,
                    target=str(target.chat_id),
                    timeout_s=self.send_timeout_s,
                    bucket_wait_s=state.bucket_wait_s(),
                )
        except BOUNDARY_ERRORS as exc:
            error = translate(exc, method=method, target=str(target.chat_id), scrub=self._scrub)
        except READING_ERRORS as exc:  # raised reading a 2xx answer (trace.py), or not an answer's fault: re-raised
            malformed = malformed_answer(exc, state)
            if malformed is None:
                raise
            error = translate(malformed, method=method, target=str(target.chat_id), scrub=self._scrub)
        finally:
            CALL.reset(reset_token)
        raise error  # outside the except block: no __context__ holding the request headers (the token)

    async def close(self) -> None:
        """Close the client's HTTP session and free this adapter's claim on ``Route.BASE`` (idempotent)."""
        self._closed = True
        _LIVE.discard(self)
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    # -------------------------------------------------------------- ids

    def channel_id(self, target: Target) -> int:
        """The channel a target writes to: its thread (a thread is a channel), else its chat."""
        return self.snowflake_id(target.thread_id if target.thread_id is not None else target.chat_id, target)

    @staticmethod
    def snowflake_id(value: int | str, target: Target) -> int:
        """``value`` as a snowflake id; :class:`core.errors.TargetNotFoundError` when it is none."""
        number = snowflake(value)
        if number is None:
            raise TargetNotFoundError(
                f"discord: {value!r} is not a snowflake id", platform=PLATFORM, target=str(target.chat_id)
            )
        return number


def snowflake(value: int | str) -> int | None:
    """``value`` as a snowflake id (a positive 64-bit integer written in digits), or None
    (https://discord.com/developers/docs/reference#snowflakes)."""
    text = str(value)
    if not (text.isascii() and text.isdigit()):
        return None
    number = int(text)
    return number if 0 < number < 2**64 else None


def _bot_id(token: str) -> str:
    """The bot's user id: the token's first part is it in base64 (public, unlike the rest)."""
    first = token.split(".", 1)[0]
    try:
        decoded = base64.urlsafe_b64decode(first + "=" * (-len(first) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return "?"
    return decoded if decoded.isdigit() else "?"
