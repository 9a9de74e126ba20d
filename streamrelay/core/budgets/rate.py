"""Rate budgets: token buckets per scope (bot, chat, group) and call kind, driven by an injected clock.

The numbers come from the channel's TOML, each with its platform documentation link; e.g. Telegram:
about 1 message per second per chat, 20 per minute per group, about 30 per second per bot
(https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this); Slack: chat.update is
Tier 3, about 50 per minute per workspace, shared by every channel
(https://docs.slack.dev/reference/methods/chat.update).

Why not aiolimiter: the core's stages take an injected clock (tests run on a fake one), and the reconciler
must know *how long* until a call could start (to merge pending preview edits into one and to let finals
go first), which aiolimiter's acquire-or-wait API does not say.

Who gets a token of a budget many conversations share (the bot's) is decided by :class:`core.budgets.fair.FairQueue`:
finals
first, then round-robin across clients, then across a client's runs; a client alone gets the whole budget.

Replicas (DESIGN §8): when several sidecars serve one bot, what the platform counts per bot is counted once for
all of them through :class:`SharedBudgets` (Redis: ``adapters.redis.RedisSharedBudgets``). Which scopes are shared
is decided here, from who shares them on the platform and who owns a conversation: every run to one chat lands
in one partition, owned by one replica at a time, so ``chat`` and ``group`` budgets and a conversation's 429
pause stay in that replica's process (:data:`SHARED_SCOPES`, :data:`SHARED_PAUSES`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from streamrelay.core.errors import RateScope
from streamrelay.core.ports import CallKind

_EPSILON_TOKENS = 1e-6
"""A token short by less than this counts as whole: float rounding of the refill (e.g. 3/s after 1/3 s
gives 0.9999999999999998 tokens) must not ask for a wait too short to move the clock."""

MESSAGE_CALLS = frozenset(CallKind) - {CallKind.TYPING}
"""Calls that count toward a platform's message limits by default (typing indicators do not)."""


class BudgetScope(enum.StrEnum):
    """Who shares a budget: every conversation of the bot, one chat (its threads included), or one chat
    that is a group (Telegram's 20 per minute per group)."""

    BOT = "bot"
    CHAT = "chat"
    GROUP = "group"


SHARED_SCOPES = frozenset({BudgetScope.BOT})
"""Budget scopes every replica of a bot draws from together: the bot's (Telegram: about 30 messages per second per
bot, https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this; Slack: a method's tier per
workspace, https://docs.slack.dev/apis/web-api/rate-limits; Discord: 50 requests per second per bot,
https://discord.com/developers/docs/topics/rate-limits). ``chat`` and ``group`` budgets (Telegram's 1 per second per
chat and 20 per minute per group) belong to one conversation, which one replica owns at a time: they stay local."""

SHARED_PAUSES = frozenset({RateScope.BOT, RateScope.METHOD})
"""429 pauses every replica of a bot honours: Discord's global limit (``"global": true``) and a Slack method's tier
per workspace. A conversation's pause (Telegram's flood control per chat) stays with the chat's owner."""


@dataclass(frozen=True)
class Budget:
    """One rate budget of a channel.

    Attributes:
        name: the TOML table name, e.g. ``per_chat`` (for errors and reports).
        scope: who shares it.
        per_s: sustained calls per second (0: unlimited).
        burst: calls that may be made at once (>= 1 when limited).
        calls: the call kinds that draw from it.
    """

    name: str
    scope: BudgetScope
    per_s: float
    burst: float = 1.0
    calls: frozenset[CallKind] = MESSAGE_CALLS

    def bucket(self) -> TokenBucket:
        """A fresh bucket for one holder of this budget."""
        return TokenBucket(self.per_s, self.burst, calls=self.calls)


@dataclass(slots=True)
class TokenBucket:
    """A token bucket: ``rate_per_s`` tokens per second, at most ``burst`` stored.

    ``delay(now)`` says how long to wait before a call may be made; ``take(now)`` spends one token.
    ``rate_per_s <= 0`` means unlimited. The bucket starts full at the first ``delay`` or ``take``, unless
    :meth:`seed` gave it the calls a process before it made (a restart: what the platform still counts).
    ``finals_waiting`` counts finals queued on this bucket: a preview (``final=False``) leaves them the
    tokens, so when the budget is short the final answer goes before other runs' preview edits.
    ``pause(until)`` (a 429 on a scope the bucket counts): no token is granted before ``until``, so calls queued
    meanwhile go at the rate afterwards, not all at once.

    Raises:
        ValueError: a limited bucket (``rate_per_s > 0``) with ``burst < 1`` could never hold the one
            token a call needs, so every call would wait forever.
    """

    rate_per_s: float
    burst: float
    calls: frozenset[CallKind] = MESSAGE_CALLS
    finals_waiting: int = field(default=0, init=False)
    _tokens: float = field(default=0.0, init=False, repr=False)
    _at: float | None = field(default=None, init=False, repr=False)
    _paused_until: float = field(default=0.0, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.rate_per_s > 0 and self.burst < 1:
            raise ValueError(f"burst must be >= 1 when rate_per_s > 0, got {self.burst}")

    def _refill(self, now: float) -> None:
        if self._at is None:
            self._tokens, self._at = self.burst, now
            return
        self._tokens = min(self.burst, self._tokens + max(0.0, now - self._at) * self.rate_per_s)
        self._at = max(self._at, now)

    def delay(self, now: float, *, final: bool = True) -> float:
        """Seconds to wait until one token is available (0.0 when available now). A preview
        (``final=False``) also waits for the tokens that queued finals need."""
        return self.delay_for(1.0 if final else 1.0 + self.finals_waiting, now)

    def delay_for(self, tokens: float, now: float) -> float:
        """Seconds until ``tokens`` tokens are stored and no :meth:`pause` holds them (0.0 when now)."""
        if self.rate_per_s <= 0:
            return 0.0
        self._refill(now)
        paused_s = max(0.0, self._paused_until - now)
        if paused_s == 0.0:
            if self._tokens >= tokens - _EPSILON_TOKENS:
                return 0.0
            return (tokens - self._tokens) / self.rate_per_s
        stored_then = min(self.burst, self._tokens + paused_s * self.rate_per_s)  # at the pause's end
        return paused_s + max(0.0, tokens - stored_then) / self.rate_per_s

    def pause(self, until: float) -> None:
        """Grant no token before ``until`` (clock seconds); the refill goes on, at most ``burst`` stored. For a 429
        whose scope covers this budget's calls (a Slack method's tier per workspace,
        https://docs.slack.dev/apis/web-api/rate-limits; Discord's global limit): the calls queued meanwhile then go
        at the rate, as the platform's count frees, not all at the pause's end. A longer pause already set stays."""
        self._paused_until = max(self._paused_until, until)

    def take(self, now: float) -> None:
        """Spend one token (call after :meth:`delay` returned 0)."""
        if self.rate_per_s <= 0:
            return
        self._refill(now)
        self._tokens = max(0.0, self._tokens - 1.0)

    def available(self, now: float) -> float:
        """Tokens stored now (``inf`` when unlimited)."""
        if self.rate_per_s <= 0:
            return float("inf")
        self._refill(now)
        return self._tokens

    def seed(self, calls_at: Sequence[float], now: float, *, since: float) -> None:
        """Begin as if this bucket had been full at ``since`` and granted a call at each of ``calls_at`` (clock
        seconds; one later than ``now`` counts at ``now``): a restarted process's bucket, from the calls its ledger
        recorded (:mod:`core.budgets.history`). Calls the platform counted beyond the bucket's tokens are owed (the
        stored tokens go below zero), so the next call waits until the platform's count has room. No calls: full.
        """
        if self.rate_per_s <= 0:
            return
        tokens, at = self.burst, since
        for t in sorted(min(max(t, since), now) for t in calls_at):
            tokens = min(self.burst, tokens + (t - at) * self.rate_per_s) - 1.0
            at = t
        self._tokens, self._at = tokens, at

    def give_back(self, now: float) -> None:
        """Return one token taken but not used (never more than ``burst`` stored)."""
        if self.rate_per_s <= 0:
            return
        self._refill(now)
        self._tokens = min(self.burst, self._tokens + 1.0)


class PauseBoard:
    """429 pauses wider than one conversation, shared by every send chain of one bot.

    ``method`` pauses one call kind bot-wide (Slack: a 429 on chat.update pauses every channel's edits,
    https://docs.slack.dev/apis/web-api/rate-limits); ``bot`` pauses every call of the bot (Discord: a 429
    with ``"global": true``, https://discord.com/developers/docs/topics/rate-limits).
    """

    def __init__(self) -> None:
        self._bot_until = 0.0
        self._kind_until: dict[CallKind, float] = {}
        self.begun = 0
        """Pauses begun so far: a caller that saw no pause can tell whether one began since, without asking."""

    def pause_bot(self, until: float) -> None:
        """Pause every call of the bot until ``until`` (clock seconds)."""
        self._bot_until = max(self._bot_until, until)
        self.begun += 1

    def pause_kind(self, kind: CallKind, until: float) -> None:
        """Pause calls of ``kind`` bot-wide until ``until`` (clock seconds)."""
        self._kind_until[kind] = max(self._kind_until.get(kind, 0.0), until)
        self.begun += 1

    def remaining(self, kind: CallKind, now: float) -> float:
        """Seconds left before a call of ``kind`` may start (0.0 when not paused)."""
        return max(0.0, self._bot_until - now, self._kind_until.get(kind, 0.0) - now)


class SharedBudgets(Protocol):
    """Rate budgets and 429 pauses shared with other processes serving the same bot (replicas on one store).

    The send chain awaits :meth:`acquire` right before each platform call, after its local budgets (asked once per
    call: :meth:`core.delivery.send_chain.SendChain.grant`), and :meth:`pause` on a 429
    whose
    scope is in :data:`SHARED_PAUSES`. Times are durations in seconds: processes share no clock.

    Implementations hold the channel's budgets whose scope is in :data:`SHARED_SCOPES` and keep the local rules
    across processes: a call starts only when every shared budget that lists its kind grants a token and no shared
    pause covers it (the bot's, or its kind's); a preview (``final=False``) leaves the finals waiting on a budget
    their tokens, so a run's final answer goes before other runs' previews on every replica.
    """

    async def acquire(self, kind: CallKind, *, final: bool) -> None:
        """Wait until a call of ``kind`` may start, and spend its tokens (returns when it may start now).

        Args:
            kind: the call about to be made.
            final: part of a run's finalization (goes before previews when a budget is short).

        Raises:
            Whatever the store raises when it cannot be reached: nothing was granted and the call is not made.
        """
        ...

    async def pause(self, kind: CallKind, scope: RateScope, seconds: float) -> None:
        """Pause ``scope`` (``BOT``: every call of the bot; ``METHOD``: calls of ``kind``) for ``seconds`` on every
        process (a 429's ``retry_after``); a longer pause already set stays.

        Raises:
            Whatever the store raises when it cannot be reached.
        """
        ...
