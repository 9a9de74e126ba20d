"""DiscordAdapter: one bot's :class:`core.ports.ChannelAdapter`, built on discord.py used REST-only.

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

Timeouts: each call runs under ``asyncio.timeout(send_timeout_s)``; the trace hooks restart it when the
request actually starts (time queued in a bucket is not the platform's fault) and lift it once the answer is
read (the bucket sleep after a success never turns a delivered message into an uncertain one). What a timeout
means depends on how far the call got (:data:`adapters.discord.errors.PHASE_RULES`).

``discord.http.Route.BASE`` (the API base URL) is a class attribute, so it is process-wide: every live
adapter in a process must use the same ``base_url``; a second one asking for another raises ``ConfigError``.

Discord references: create message https://discord.com/developers/docs/resources/message#create-message
(``content`` <= 2000 characters), edit https://discord.com/developers/docs/resources/message#edit-message,
delete https://discord.com/developers/docs/resources/message#delete-message, typing
https://discord.com/developers/docs/resources/channel#trigger-typing-indicator (shows about 10 s),
allowed mentions https://discord.com/developers/docs/resources/message#allowed-mentions-object, error codes
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
import discord
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from adapters.discord.errors import (
    BOUNDARY_ERRORS,
    PLATFORM,
    timed_out,
    translate,
)
from adapters.discord.trace import CALL, CallState, trace_config
from adapters.markdown_strip import strip_markdown
from core.errors import ConfigError, DeliveryError, PlatformUnavailableError, TargetNotFoundError
from core.events import Target
from core.ports import TextFormat
from core.units import LengthUnit, text_units

T = TypeVar("T")

DEFAULT_BASE_URL = "https://discord.com/api/v10"
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
"""A bot token: three dot-separated base64url parts (user id, timestamp, HMAC)."""
LOGIN_ATTEMPTS = 3
LOGIN_BACKOFF_S = 0.25
"""First wait between login attempts after a connection error; doubles (0.25 s, 0.5 s), at most 2 s."""
NO_MENTIONS = discord.AllowedMentions.none()
"""Sent with every message and edit: model output never pings @everyone, a role or a user."""

_LIVE: weakref.WeakSet[DiscordAdapter] = weakref.WeakSet()
"""Open adapters; they all share discord.py's process-wide ``Route.BASE``."""


# ------------------------------------------------------------------ text


def render(text: str, fmt: TextFormat) -> str:
    """The ``content`` Discord receives for ``text``.

    ``plain`` and ``markdown`` are sent as is: Discord renders its own Markdown subset
    (https://support.discord.com/hc/en-us/articles/210298617) and a message's content is what the person sees.
    ``stripped`` is the text with its markup removed (:func:`adapters.markdown_strip.strip_markdown`: a link
    keeps its target after its text, ``text (url)``, since plain text hides nothing).
    """
    return strip_markdown(text) if fmt is TextFormat.STRIPPED else text


# ------------------------------------------------------------------ the adapter


class DiscordAdapter:
    """Sends, edits and deletes one bot's messages through Discord's REST API (or a mock of it).

    Args:
        token: the bot token (three dot-separated base64url parts). Never shown in ``repr``, ``str``, logs or
            errors.
        base_url: API base, e.g. ``http://127.0.0.1:8083/api/v10`` for :class:`mocks.discord.MockDiscord`;
            ``None`` is https://discord.com/api/v10. Process-wide (discord.py's ``Route.BASE``).
        send_timeout_s: seconds one call may take once its request starts (and, before that, waiting in
            discord.py's rate-limit bucket). See the module docstring for what a timeout raises.
        max_units: text limit of one message in UTF-16 code units. Discord allows 2000 characters; counting
            UTF-16 units is the safe side (an emoji beyond the BMP counts 2).

    Raises:
        ConfigError: the token is malformed, or another open adapter in this process uses another base URL.
    """

    platform: str = PLATFORM
    unit: LengthUnit = LengthUnit.UTF16
    _base: str

    def __init__(
        self,
        token: str,
        *,
        base_url: str | None = None,
        send_timeout_s: float = 10.0,
        max_units: int = 2000,
    ) -> None:
        if not TOKEN_RE.match(token):
            raise ConfigError("discord: the bot token is malformed (expected three dot-separated base64url parts)")
        base = (base_url or DEFAULT_BASE_URL).rstrip("/")
        others = {adapter._base for adapter in _LIVE} - {base}
        if others:
            raise ConfigError(
                f"discord: base_url {base!r} differs from {sorted(others)[0]!r}, used by another open "
                "DiscordAdapter in this process (discord.py's Route.BASE is process-wide)"
            )
        discord.http.Route.BASE = base
        _LIVE.add(self)
        self._base = base
        self._token = token
        self._secrets = (token, token.split(".", 1)[1])
        self._bot_id = _bot_id(token)
        self.send_timeout_s = send_timeout_s
        self.max_units = max_units
        self._client: discord.Client | None = None
        self._login_lock = asyncio.Lock()
        self._closed = False
        self._resets: dict[str, float] = {}

    def __repr__(self) -> str:
        return f"DiscordAdapter(bot_id={self._bot_id!r}, base_url={self._base!r})"

    __str__ = __repr__

    def measure(self, text: str, fmt: TextFormat) -> int:
        """UTF-16 units of the content sent (:func:`render`)."""
        return text_units(render(text, fmt), LengthUnit.UTF16)

    def check_target(self, target: Target) -> str | None:
        """Discord ids are snowflakes (https://discord.com/developers/docs/reference#snowflakes): ``chat_id``
        (a channel), ``thread_id`` (a thread is a channel) and ``reply_to`` (a message) are positive 64-bit
        integers, as ints or digit strings."""
        for name in ("chat_id", "thread_id", "reply_to"):
            value = getattr(target, name)
            if value is not None and _snowflake(value) is None:
                return f"{name} {value!r} must be a Discord snowflake id (digits)"
        return None

    def is_group(self, target: Target) -> bool:
        """Always True: a channel id does not say whether it is a guild channel or a DM, and Discord's
        per-channel limits are the same; treating every channel as a group is the safe side."""
        return True

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "<token>")
        return text

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
        try:
            async with asyncio.timeout(self.send_timeout_s):
                await client.login(self._token)
        except BaseException:
            await client.close()
            raise
        return client

    async def _call(
        self, method: str, target: Target, channel_id: int, action: Callable[[discord.Client], Awaitable[T]]
    ) -> T:
        """One attempt at one REST call; every failure leaves as a ``DeliveryError`` (token-free)."""
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
        finally:
            CALL.reset(reset_token)
        raise error  # outside the except block: no __context__ holding the request headers (the token)

    # -------------------------------------------------------------- ChannelAdapter

    async def send_text(self, target: Target, text: str, fmt: TextFormat) -> str:
        """Create a message (``POST /channels/{id}/messages``); return its snowflake id as a string.

        ``target.thread_id`` is the channel written to (a thread is a channel); ``target.reply_to`` becomes a
        ``message_reference`` with ``fail_if_not_exists=False`` (a deleted reply target does not lose the
        answer). ``allowed_mentions`` is always "none".

        Raises:
            core.errors.DeliveryError: a subclass, per :mod:`adapters.discord.errors`.
        """
        content = render(text, fmt)
        channel_id = self._channel_id(target)
        reference = None
        if target.reply_to is not None:
            reply_to = self._id(target.reply_to, target)
            reference = discord.MessageReference(message_id=reply_to, channel_id=channel_id, fail_if_not_exists=False)

        async def create(client: discord.Client) -> discord.Message:
            channel = client.get_partial_messageable(channel_id)
            if reference is None:
                return await channel.send(content=content, allowed_mentions=NO_MENTIONS)
            return await channel.send(content=content, allowed_mentions=NO_MENTIONS, reference=reference)

        message = await self._call("createMessage", target, channel_id, create)
        return str(message.id)

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> bool:
        """Replace a message's content (``PATCH /channels/{id}/messages/{mid}``).

        Returns:
            True: Discord answers 200 for an unchanged edit too (it has no "not modified").

        Raises:
            core.errors.TargetNotFoundError: the message (or channel) does not exist any more.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.discord.errors`.
        """
        content = render(text, fmt)
        channel_id, mid = self._channel_id(target), self._id(message_id, target)

        async def edit(client: discord.Client) -> discord.Message:
            message = client.get_partial_messageable(channel_id).get_partial_message(mid)
            return await message.edit(content=content, allowed_mentions=NO_MENTIONS)

        await self._call("editMessage", target, channel_id, edit)
        return True

    async def delete_message(self, target: Target, message_id: str) -> None:
        """Delete a message this bot sent (``DELETE /channels/{id}/messages/{mid}``).

        Raises:
            core.errors.TargetNotFoundError: it is already gone.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.discord.errors`.
        """
        channel_id, mid = self._channel_id(target), self._id(message_id, target)

        async def delete(client: discord.Client) -> None:
            await client.get_partial_messageable(channel_id).get_partial_message(mid).delete()

        await self._call("deleteMessage", target, channel_id, delete)

    async def send_typing(self, target: Target) -> None:
        """Show "typing…" (``POST /channels/{id}/typing``); it lasts about 10 s or until the bot sends."""
        channel_id = self._channel_id(target)

        async def typing(client: discord.Client) -> None:
            await client.get_partial_messageable(channel_id).typing()

        await self._call("triggerTypingIndicator", target, channel_id, typing)

    async def close(self) -> None:
        """Close the client's HTTP session and free this adapter's claim on ``Route.BASE`` (idempotent)."""
        self._closed = True
        _LIVE.discard(self)
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    # -------------------------------------------------------------- ids

    def _channel_id(self, target: Target) -> int:
        return self._id(target.thread_id if target.thread_id is not None else target.chat_id, target)

    @staticmethod
    def _id(value: int | str, target: Target) -> int:
        snowflake = _snowflake(value)
        if snowflake is None:
            raise TargetNotFoundError(
                f"discord: {value!r} is not a snowflake id", platform=PLATFORM, target=str(target.chat_id)
            )
        return snowflake


def _snowflake(value: int | str) -> int | None:
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
