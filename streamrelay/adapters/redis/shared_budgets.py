"""The send chain's shared budgets on Redis: :class:`core.budgets.rate.SharedBudgets` over :class:`RedisBudgets`.

Which budgets and pauses are shared is the core's rule (:data:`core.budgets.rate.SHARED_SCOPES`,
:data:`core.budgets.rate.SHARED_PAUSES`): a channel's ``bot`` budgets (Telegram: about 30 messages per second per bot,
https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this; Slack: a method's tier per
workspace, https://docs.slack.dev/apis/web-api/rate-limits; Discord: 50 requests per second per bot,
https://discord.com/developers/docs/topics/rate-limits) and its bot-wide and per-method 429 pauses. ``chat`` and
``group`` budgets stay in the send chain's local buckets: one replica owns a conversation at a time.

Scope names (the text inside a key's hash tag, :meth:`adapters.redis.keys.KeySpace.budget`) are built from the
channel's name and the bot's public id, never from its token::

    <channel>:bot:<bot id>                  the bot-wide 429 pause (Discord's global limit)
    <channel>:bot:<bot id>:<call kind>      one kind's 429 pause (Slack: chat.update's tier)
    <channel>:bot:<bot id>:rate:<budget>    one shared budget's GCRA state and the finals waiting on it

e.g. ``telegram:bot:123456:rate:per_bot``. Without a bot id the channel's name alone names the bot
(``telegram:bot``): replicas share one configuration, so it is the same on each.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence

from redis.exceptions import RedisError

from streamrelay.adapters.redis.budget import RedisBudgets, SharedBucket, SharedPauses
from streamrelay.adapters.redis.client import Redis, unavailable
from streamrelay.adapters.redis.keys import KEYS, KeySpace
from streamrelay.core.budgets.rate import SHARED_SCOPES, Budget
from streamrelay.core.errors import RateScope
from streamrelay.core.ports import CallKind

MAX_SLEEP_S = 5.0
"""The longest one wait lasts before a waiting call asks again: a final's registration (``waiter_ttl_ms``, 30 s by
default) is renewed at each ask, so previews on other replicas keep leaving it its token through a long wait."""

_CHANNEL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_BOT_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")
"""A bot's public id: Telegram's digits before the token's ``:``, Discord's snowflake, Slack's team id, a Teams
bot's Microsoft App ID (a GUID: 36 characters with its hyphens). A token never matches: Telegram's holds ``:``,
Discord's ``.``, Slack's starts with ``xox`` and is longer, a Teams client secret holds ``~`` or ``.``."""


class RedisSharedBudgets:
    """A channel's shared budgets and pauses in Redis, for every replica serving its bot.

    :meth:`acquire` waits out the bot's and the kind's shared pauses, then asks every shared budget that lists the
    kind for a token, the slowest first. A budget that refuses says how long to wait; the tokens granted earlier in
    that pass are forfeited (spent, never used: the replicas together stay within every budget, never above), and
    the pass starts again after the wait. With one shared budget per call kind, as every platform's defaults in
    config/platforms.py have, nothing is forfeited. A final registers as a waiter on the budget that refused it (on
    all of its budgets while it waits out a pause), so previews on every replica leave it its token; it withdraws
    if it gives up (cancelled, or Redis failed).

    Args:
        budgets: where the budgets live.
        channel_budgets: the channel's budgets (all of them: those in :data:`core.budgets.rate.SHARED_SCOPES` with a
        rate
            are kept).
        bot_scope: the bot's scope, e.g. ``telegram:bot:123456`` (see the module docstring; never a token).
        sleep: how to wait (seconds; Redis says how long, on its own clock).

    Raises:
        ValueError: a budget's scope would hold ``{`` or ``}``, or a budget has ``per_s > 0`` with ``burst < 1``.
    """

    def __init__(
        self,
        budgets: RedisBudgets,
        channel_budgets: Sequence[Budget],
        bot_scope: str,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        shared = [b for b in channel_budgets if b.scope in SHARED_SCOPES and b.per_s > 0]
        for budget in shared:
            if budget.burst < 1:
                raise ValueError(f"budget {budget.name}: burst must be >= 1 when per_s > 0, got {budget.burst}")
        self._budgets = budgets
        self._buckets = [
            SharedBucket.of(budgets, b, f"{bot_scope}:rate:{b.name}") for b in sorted(shared, key=lambda b: b.per_s)
        ]
        self._pauses = SharedPauses(budgets, bot_scope)
        self._bot_scope = bot_scope
        self._sleep = sleep
        self._waiter_prefix = uuid.uuid4().hex[:12]
        self._waiters = itertools.count()
        for scope in [bot_scope, *(b.scope for b in self._buckets)]:
            KEYS.budget(scope, "pause")  # a bad name fails now, not at the first call

    def __repr__(self) -> str:
        return f"RedisSharedBudgets({self._bot_scope!r}, {[b.scope for b in self._buckets]!r})"

    @property
    def scopes(self) -> list[str]:
        """The shared budgets' scopes, in the order they are asked (the slowest first)."""
        return [b.scope for b in self._buckets]

    async def acquire(self, kind: CallKind, *, final: bool) -> None:
        """Wait until a call of ``kind`` may start on this replica, and spend its shared tokens.

        Args:
            kind: the call about to be made.
            final: part of a run's finalization: previews on every replica leave it its token.

        Raises:
            core.errors.StoreUnavailableError: Redis did not answer (nothing granted; the run stops and resumes
                from the journal once Redis answers).
            redis.exceptions.RedisError: Redis refused (nothing granted; a final's registration is withdrawn as far
                as Redis lets it).
        """
        buckets = [b for b in self._buckets if kind in b.calls]
        waiter = f"{self._waiter_prefix}:{next(self._waiters)}" if final and buckets else None
        granted = False
        try:
            with unavailable("a rate budget"):
                while True:
                    wait = await self._pauses.remaining(kind)
                    if wait > 0 and waiter is not None:  # previews must leave it its token when the pause ends
                        for bucket in buckets:
                            await self._budgets.register(bucket.scope, waiter)
                    elif wait <= 0:
                        wait = await self._pass(buckets, final, waiter)
                    if wait <= 0:
                        granted = True
                        return
                    await self._sleep(min(wait, MAX_SLEEP_S))
        finally:
            if waiter is not None and not granted:
                with contextlib.suppress(RedisError):
                    for bucket in buckets:
                        await self._budgets.withdraw(bucket.scope, waiter)

    @staticmethod
    async def _pass(buckets: Sequence[SharedBucket], final: bool, waiter: str | None) -> float:
        """0.0 when every bucket granted (each spent a token), else the seconds the first refusal asked for."""
        for bucket in buckets:
            wait = await bucket.acquire(final=final, waiter=waiter)
            if wait > 0:
                return wait
        return 0.0

    async def pause(self, kind: CallKind, scope: RateScope, seconds: float) -> None:
        """Pause the bot (``BOT``) or its calls of ``kind`` (``METHOD``) on every replica for ``seconds``; a
        ``CONVERSATION`` pause is the chat owner's alone and is not stored.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        if scope is RateScope.BOT:
            await self._pauses.pause_bot(seconds)
        elif scope is RateScope.METHOD:
            await self._pauses.pause_kind(kind, seconds)


def bot_scope(channel: str, bot_id: str | None = None) -> str:
    """The scope naming a channel's bot: ``<channel>:bot:<bot id>``, or ``<channel>:bot`` without an id.

    Raises:
        ValueError: ``channel`` is not 1 to 64 of ``A-Z a-z 0-9 _ . -``, or ``bot_id`` not 1 to 40 of
            ``A-Z a-z 0-9 _ -`` or starting with ``xox`` (the shape of a token, refused so that no token becomes a
            key name; the message never repeats the value).
    """
    if not _CHANNEL_NAME.fullmatch(channel):
        raise ValueError(f"a channel name for shared budgets must be 1 to 64 of A-Z a-z 0-9 _ . - (got {channel!r})")
    if bot_id is None:
        return f"{channel}:bot"
    if not _BOT_ID.fullmatch(bot_id) or bot_id.lower().startswith("xox"):
        raise ValueError(
            f"channels.{channel}: the bot id for shared budgets must be its public id (1 to 40 of A-Z a-z 0-9 _ -), "
            "never its token"
        )
    return f"{channel}:bot:{bot_id}"


def shared_budgets_for(
    client: Redis,
    channel: str,
    budgets: Sequence[Budget],
    bot_id: str | None = None,
    *,
    keys: KeySpace = KEYS,
    waiter_ttl_ms: int = 30_000,
) -> RedisSharedBudgets:
    """The shared budgets of one configured channel, for :class:`core.channel.ChannelRuntime` (``shared=``).

    Args:
        client: from :func:`adapters.redis.client.connect` (not closed here).
        channel: the channel's name in channels.toml, e.g. ``telegram``.
        budgets: the channel's budgets, as given to the runtime (the ``bot`` ones are shared).
        bot_id: the bot's public id (Telegram: the digits before the token's ``:``; Discord: the bot's user id;
            Slack: the team id), or None: the channel's name alone names the bot.
        keys: the key space (the deployment's prefix).
        waiter_ttl_ms: how long a final waiting on a replica that died keeps holding previews back.

    Raises:
        ValueError: as :func:`bot_scope`, or a budget with ``per_s > 0`` and ``burst < 1``.
    """
    return RedisSharedBudgets(
        RedisBudgets(client, keys, waiter_ttl_ms=waiter_ttl_ms), budgets, bot_scope(channel, bot_id)
    )
