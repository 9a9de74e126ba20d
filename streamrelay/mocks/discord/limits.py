"""Discord's rate limits as :class:`~mocks.discord.MockDiscord` announces and (when ``rate_limits`` is on)
enforces them.

Discord describes limits per route *bucket* in response headers and asks clients never to hard-code them
(https://discord.com/developers/docs/topics/rate-limits): ``X-RateLimit-Limit``, ``-Remaining``, ``-Reset``
(epoch seconds), ``-Reset-After`` (seconds, decimals) and ``-Bucket`` (an opaque hash shared by the routes of
one bucket; the limit itself applies per bucket *and* major parameter, here the channel or webhook). Apart
from that there is a global limit of 50 requests per second per bot.

The numbers below are what clients observe (Discord publishes none per route): message create is 5 per 5 s
per channel. The mock keeps edits in their **own** bucket (``PATCH /channels/{id}/messages/{mid}``, also
5 per 5 s per channel), not shared with creates: every route has its own bucket hash on Discord, and the
per-channel sub-limit reported by clients concerns sending. Delete is 5 per 1 s per channel, typing 5 per
5 s per channel, webhook executions 5 per 2 s per webhook (all observed, tunable in :class:`DiscordLimits`).
Starting a thread from a message has its own bucket per channel, 5 per 5 s (an assumption: Discord publishes no
number and none is commonly reported).

Windows are fixed: a bucket's window opens with its first admitted call and ends ``window_s`` later, as
Discord's ``Reset`` timestamps describe. A refused call (any 4xx, a 429 included) costs nothing.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict, deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Bucket:
    """One route bucket: at most ``limit`` calls per ``window_s`` seconds per major parameter."""

    limit: int
    window_s: float


@dataclass(frozen=True)
class DiscordLimits:
    """The numbers the mock announces in ``X-RateLimit-*`` headers and enforces when ``rate_limits`` is on.

    Attributes:
        create_message: ``POST /channels/{id}/messages`` per channel (5 per 5 s, observed).
        edit_message: ``PATCH /channels/{id}/messages/{mid}`` per channel, its own bucket (5 per 5 s).
        delete_message: ``DELETE /channels/{id}/messages/{mid}`` per channel (5 per 1 s, observed).
        typing: ``POST /channels/{id}/typing`` per channel (5 per 5 s, observed).
        identity: ``GET /users/@me`` and ``GET /oauth2/applications/@me`` per bot (5 per 5 s).
        webhook: webhook execute / edit / delete per webhook (5 per 2 s, observed).
        start_thread: ``POST /channels/{id}/messages/{mid}/threads`` per channel (5 per 5 s, an assumption).
        get_message: ``GET /channels/{id}/messages/{mid}`` per channel (5 per 1 s, an assumption).
        global_per_s: requests per sliding second per bot, every bot route counted (50, official:
            https://discord.com/developers/docs/topics/rate-limits#global-rate-limit). Webhooks are not
            bound to a bot and do not count.
    """

    create_message: Bucket = Bucket(5, 5.0)
    edit_message: Bucket = Bucket(5, 5.0)
    delete_message: Bucket = Bucket(5, 1.0)
    typing: Bucket = Bucket(5, 5.0)
    identity: Bucket = Bucket(5, 5.0)
    webhook: Bucket = Bucket(5, 2.0)
    start_thread: Bucket = Bucket(5, 5.0)
    get_message: Bucket = Bucket(5, 1.0)
    global_per_s: int = 50


def bucket_hash(name: str) -> str:
    """The opaque ``X-RateLimit-Bucket`` of a bucket name (stable, 32 hex digits like Discord's)."""
    return hashlib.sha1(name.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class BucketView:
    """What the headers of one answer say about its bucket."""

    name: str
    limit: int
    remaining: int
    reset_after_s: float


@dataclass
class _Window:
    start: float
    count: int = 0


Key = tuple[str, str, str]
"""(bot or webhook, bucket name, major parameter)."""


class RateLimiter:
    """Fixed windows per (bot, bucket, major parameter) and a sliding 1 s window per bot (global)."""

    def __init__(self, limits: DiscordLimits) -> None:
        self._limits = limits
        self._windows: dict[Key, _Window] = {}
        self._recent: defaultdict[str, deque[float]] = defaultdict(deque)

    def bucket(self, name: str) -> Bucket:
        """The :class:`Bucket` of a bucket name (a :class:`DiscordLimits` field)."""
        value = getattr(self._limits, name)
        assert isinstance(value, Bucket)
        return value

    def _window(self, key: Key, now: float) -> _Window | None:
        window = self._windows.get(key)
        if window is not None and now >= window.start + self.bucket(key[1]).window_s:
            del self._windows[key]
            return None
        return window

    def refusal(self, key: Key, now: float, *, counts_globally: bool) -> tuple[float, bool] | None:
        """``(retry_after_s, is_global)`` when a call on ``key`` now is over a limit, else None."""
        if counts_globally:
            recent = self._recent[key[0]]
            while recent and recent[0] <= now - 1.0:
                recent.popleft()
            if len(recent) >= self._limits.global_per_s:
                return recent[0] + 1.0 - now, True
        window = self._window(key, now)
        if window is not None and window.count >= self.bucket(key[1]).limit:
            return window.start + self.bucket(key[1]).window_s - now, False
        return None

    def consume(self, key: Key, now: float, *, counts_globally: bool) -> None:
        """Count an admitted call."""
        if counts_globally:
            self._recent[key[0]].append(now)
        window = self._window(key, now)
        if window is None:
            window = self._windows[key] = _Window(now)
        window.count += 1

    def view(self, key: Key, now: float, *, enforced: bool, consumed: bool) -> BucketView:
        """The bucket as the answer's headers describe it.

        With limits not ``enforced`` nothing is counted and every answer shows a fresh window (this call
        taken, ``limit - 1`` left), so a client pacing itself by the headers is never slowed down.
        """
        bucket = self.bucket(key[1])
        if not enforced:
            return BucketView(key[1], bucket.limit, bucket.limit - int(consumed), bucket.window_s)
        window = self._window(key, now)
        if window is None:
            return BucketView(key[1], bucket.limit, bucket.limit, bucket.window_s)
        reset_after = window.start + bucket.window_s - now
        return BucketView(key[1], bucket.limit, max(0, bucket.limit - window.count), reset_after)


def retry_after_header(wait_s: float) -> int:
    """``Retry-After`` is whole seconds: rounded up, at least 1 (the JSON body has the exact float)."""
    return max(1, math.ceil(wait_s - 1e-9))
