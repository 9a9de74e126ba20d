"""Rate budgets shared by every replica: GCRA in one Lua script per call, and 429 pauses every replica honours.

A budget scope (``telegram:bot:<bot id>``, ``telegram:chat:<chat id>``; never a token) has one GCRA state key,
``sr:{rate:<scope>}:tat`` (the *theoretical arrival time*: https://brandur.org/rate-limiting), a pause key set
from a 429's ``retry_after`` (``:pause``, PX), and the finals waiting on it (``:finals``, a sorted set of waiter
ids scored by when their registration lapses). One script decides a call atomically on Redis's clock (``TIME``:
replicas' clocks never meet), so N replicas together never exceed ``rate_per_s`` with bursts of ``burst``; it
answers how long to wait when the call may not start, which the caller sleeps (nothing sleeps in Redis).

The shape is :mod:`core.budgets.rate`'s, made atomic: ``TokenBucket.delay(now, final=)`` then ``take(now)`` becomes
:meth:`RedisBudgets.acquire` (grant and spend, or say the wait, in one step: a delay-then-take across replicas
would race), :meth:`RedisBudgets.delay` peeks; a preview (``final=False``) leaves the finals waiting on the scope
their tokens, as ``TokenBucket.finals_waiting`` does in one process, so finals still go before other runs'
previews. :class:`SharedBucket` and :class:`SharedPauses` are ``TokenBucket`` and ``PauseBoard`` with async
methods, built from the same :class:`~core.budgets.rate.Budget` settings.

Why a small script of our own and not a library (checked against their docs and code):

- ``limits`` (``limits.aio``, async Redis storage) offers fixed window, moving window and sliding window counter:
  no GCRA or token bucket; ``hit``/``test`` answer allowed or not, ``get_window_stats`` a reset time, never "wait
  this long for one call", which the reconciler needs to merge pending preview edits; limits are whole counts per
  period (``10/minute``), not ``per_s`` with a fractional ``burst`` as channels.toml has them.
- ``throttled-py`` has an async Redis GCRA in Lua on Redis's ``TIME`` with ``limit(cost)`` and ``peek`` and a
  ``retry_after``: closest. But it checks and spends the same ``cost`` (a preview must check ``1 + finals
  waiting`` and spend 1), has no shared 429 pause, builds its own Redis client from a URL and options (a second
  pool, our URL handed over), and would add a dependency for about 30 lines of Lua.

What remains ours is the contract: one script, one key per scope (its own hash tag: budgets are not per
partition), the finals-first rule, the pause, and tests that count grants on Redis's own clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from streamrelay.adapters.redis.client import Redis, Script
from streamrelay.adapters.redis.keys import KEYS, KeySpace
from streamrelay.core.budgets.rate import MESSAGE_CALLS, Budget
from streamrelay.core.ports import CallKind

_GCRA = """
-- KEYS: tat, finals, pause; ARGV: emission interval (us, 0: unlimited), burst, final, waiter, waiter ttl (ms), spend
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local final, waiter, spend = ARGV[3] == '1', ARGV[4], ARGV[6] == '1'
local wait = 0
local paused = redis.call('PTTL', KEYS[3])
if paused > 0 then wait = paused * 1000 end
if spend then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) end
local needed = 1
if not final then needed = 1 + redis.call('ZCOUNT', KEYS[2], '(' .. string.format('%d', now), '+inf') end
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local allow_in = tat + (needed - burst) * interval - now
if interval > 0 and allow_in > wait then wait = allow_in end
if wait > 0.5 then
  if spend and final and waiter ~= '' then
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]) * 1000, waiter)
  end
  return {0, string.format('%d', math.ceil(wait)), string.format('%d', now)}
end
if spend then
  if interval > 0 then
    local ttl_ms = math.ceil((tat + interval - now) / 1000) + 1
    redis.call('SET', KEYS[1], string.format('%.3f', tat + interval), 'PX', ttl_ms)
  end
  if waiter ~= '' then redis.call('ZREM', KEYS[2], waiter) end
end
return {1, '0', string.format('%d', now)}
"""

_REGISTER = """
-- KEYS: finals; ARGV: waiter, waiter ttl (ms): as the GCRA script registers a final it refused
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]) * 1000, ARGV[1])
return 1
"""

_PAUSE = """
-- KEYS: pause; ARGV: ms (a pause is only ever lengthened)
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], '1', 'PX', ARGV[1]) end
return 1
"""


@dataclass(frozen=True)
class Attempt:
    """One decision: ``granted`` (the call may start now: its token is spent), else ``wait_s`` seconds before
    asking again (nothing spent); ``at_s``: Redis's clock when decided (seconds since the epoch)."""

    granted: bool
    wait_s: float
    at_s: float


class RedisBudgets:
    """Rate budgets and 429 pauses in Redis, shared by every replica.

    Args:
        client: from :func:`adapters.redis.client.connect` (not closed here).
        keys: the key space.
        waiter_ttl_ms: how long a waiting final counts for previews after its last attempt (a replica that died
            while a final waited stops holding previews back after this).
    """

    def __init__(self, client: Redis, keys: KeySpace = KEYS, *, waiter_ttl_ms: int = 30_000) -> None:
        self._client = client
        self._keys = keys
        self._waiter_ttl_ms = waiter_ttl_ms
        self._gcra = Script(client, _GCRA, "budget.gcra")
        self._pause = Script(client, _PAUSE, "budget.pause")
        self._register = Script(client, _REGISTER, "budget.register")

    def __repr__(self) -> str:
        return f"RedisBudgets(prefix={self._keys.prefix!r})"

    async def _decide(
        self, scope: str, rate_per_s: float, burst: float, final: bool, waiter: str | None, spend: bool
    ) -> Attempt:
        if rate_per_s > 0 and burst < 1:
            raise ValueError(f"burst must be >= 1 when rate_per_s > 0, got {burst}")
        interval_us = 1_000_000 / rate_per_s if rate_per_s > 0 else 0
        keys = [self._keys.budget(scope, k) for k in ("tat", "finals", "pause")]
        args = [interval_us, burst, int(final), waiter or "", self._waiter_ttl_ms, int(spend)]
        granted, wait_us, now_us = await self._gcra(keys, args)
        return Attempt(bool(granted), int(wait_us) / 1e6, int(now_us) / 1e6)

    async def attempt(
        self, scope: str, rate_per_s: float, burst: float, *, final: bool = True, waiter: str | None = None
    ) -> Attempt:
        """Ask for one call within ``scope``'s budget and pause: granted (spent) or how long to wait.

        Args:
            scope: the budget scope, e.g. ``telegram:bot:123456`` (no braces; never a token).
            rate_per_s: sustained calls per second for every replica together (<= 0: unlimited, pause only).
            burst: calls that may start at once (>= 1 when limited).
            final: part of a run's finalization. A preview (False) is granted only when the budget holds a token
                for each final waiting on the scope too, and spends one.
            waiter: a final's id while it waits (unique, e.g. ``<owner>:<run>:<slot>``): registered when it must
                wait, so previews on every replica leave it the tokens; dropped when granted.

        Raises:
            ValueError: ``rate_per_s > 0`` with ``burst < 1`` (no call could ever start), or a bad ``scope``.
            redis.exceptions.RedisError: Redis failed (the caller decides: wait and retry, or fail open).
        """
        return await self._decide(scope, rate_per_s, burst, final, waiter, spend=True)

    async def acquire(
        self, scope: str, rate_per_s: float, burst: float, *, final: bool = True, waiter: str | None = None
    ) -> float:
        """:meth:`attempt` as a number: 0.0 when the call may start now (spent), else seconds to wait first."""
        return (await self.attempt(scope, rate_per_s, burst, final=final, waiter=waiter)).wait_s

    async def delay(self, scope: str, rate_per_s: float, burst: float, *, final: bool = True) -> float:
        """Seconds until a call could start (0.0: now), spending nothing: ``TokenBucket.delay``'s shared twin."""
        return (await self._decide(scope, rate_per_s, burst, final, None, spend=False)).wait_s

    async def register(self, scope: str, waiter: str) -> None:
        """Count a final as waiting on ``scope`` without asking for its token (it waits out a pause first), so
        previews on every replica leave it the token when the pause ends; it lapses after ``waiter_ttl_ms``."""
        await self._register([self._keys.budget(scope, "finals")], [waiter, self._waiter_ttl_ms])

    async def withdraw(self, scope: str, waiter: str) -> None:
        """A waiting final gave up (its run ended otherwise): previews need not leave it a token any more."""
        await self._client.zrem(self._keys.budget(scope, "finals"), waiter)

    async def pause(self, scope: str, seconds: float) -> None:
        """Pause ``scope`` on every replica for ``seconds`` (a 429's ``retry_after``); a longer pause stays."""
        ms = math.ceil(seconds * 1000)
        if ms > 0:
            await self._pause([self._keys.budget(scope, "pause")], [ms])

    async def paused_for(self, scope: str) -> float:
        """Seconds left of ``scope``'s pause (0.0 when not paused)."""
        ms = int(await self._client.pttl(self._keys.budget(scope, "pause")))
        return max(0, ms) / 1000

    async def paused_longest(self, scopes: Sequence[str]) -> float:
        """Seconds left of the longest pause among ``scopes`` (0.0 when none is paused), in one round trip (a
        pipeline without MULTI: the keys live in different slots)."""
        async with self._client.pipeline(transaction=False) as pipe:
            for scope in scopes:
                pipe.pttl(self._keys.budget(scope, "pause"))
            answers = await pipe.execute()
        return max((max(0, int(ms)) for ms in answers), default=0) / 1000


@dataclass(frozen=True)
class SharedBucket:
    """One budget of one scope for every replica: :class:`core.budgets.rate.TokenBucket`'s shared, async twin.

    Attributes:
        budgets: where it lives.
        scope: its scope key, e.g. ``telegram:chat:42``.
        rate_per_s, burst, calls: as in :class:`core.budgets.rate.Budget`.
    """

    budgets: RedisBudgets
    scope: str
    rate_per_s: float
    burst: float = 1.0
    calls: frozenset[CallKind] = MESSAGE_CALLS

    @classmethod
    def of(cls, budgets: RedisBudgets, budget: Budget, scope: str) -> SharedBucket:
        """The shared bucket of ``budget`` (from channels.toml) for ``scope``."""
        return cls(budgets, scope, budget.per_s, budget.burst, budget.calls)

    async def delay(self, *, final: bool = True) -> float:
        """Seconds until a call could start (0.0: now); spends nothing."""
        return await self.budgets.delay(self.scope, self.rate_per_s, self.burst, final=final)

    async def acquire(self, *, final: bool = True, waiter: str | None = None) -> float:
        """0.0 when a call may start now (its token spent), else seconds to wait before asking again."""
        return await self.budgets.acquire(self.scope, self.rate_per_s, self.burst, final=final, waiter=waiter)


class SharedPauses:
    """429 pauses wider than one conversation for every replica: :class:`core.budgets.rate.PauseBoard`'s shared twin
    (durations, not clock times: replicas share no clock).

    Args:
        budgets: where they live.
        bot: the bot's scope prefix, e.g. ``telegram:bot:123456`` (never a token).
    """

    def __init__(self, budgets: RedisBudgets, bot: str) -> None:
        self._budgets = budgets
        self._bot = bot

    def __repr__(self) -> str:
        return f"SharedPauses({self._bot!r})"

    async def pause_bot(self, seconds: float) -> None:
        """Pause every call of the bot for ``seconds`` (Discord's global 429)."""
        await self._budgets.pause(self._bot, seconds)

    async def pause_kind(self, kind: CallKind, seconds: float) -> None:
        """Pause calls of ``kind`` bot-wide for ``seconds`` (Slack: a 429 on chat.update)."""
        await self._budgets.pause(f"{self._bot}:{kind}", seconds)

    async def remaining(self, kind: CallKind) -> float:
        """Seconds left before a call of ``kind`` may start (0.0 when not paused): one round trip."""
        return await self._budgets.paused_longest([self._bot, f"{self._bot}:{kind}"])
