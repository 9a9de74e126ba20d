"""Rate budgets: token buckets per scope (bot, chat, group) and call kind, driven by an injected clock.

The numbers come from the channel's TOML, each with its platform documentation link; e.g. Telegram:
about 1 message per second per chat, 20 per minute per group, about 30 per second per bot
(https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this); Slack: chat.update is
Tier 3, about 50 per minute per workspace, shared by every channel
(https://docs.slack.dev/reference/methods/chat.update).

Why not aiolimiter: the core's stages take an injected clock (tests run on a fake one), and the reconciler
must know *how long* until a call could start (to merge pending preview edits into one and to let finals
go first), which aiolimiter's acquire-or-wait API does not say.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from core.ports import CallKind

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


@dataclass
class TokenBucket:
    """A token bucket: ``rate_per_s`` tokens per second, at most ``burst`` stored.

    ``delay(now)`` says how long to wait before a call may be made; ``take(now)`` spends one token.
    ``rate_per_s <= 0`` means unlimited. The bucket starts full at the first ``delay`` or ``take``.
    ``finals_waiting`` counts finals queued on this bucket: a preview (``final=False``) leaves them the
    tokens, so when the budget is short the final answer goes before other runs' preview edits.

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
        if self.rate_per_s <= 0:
            return 0.0
        self._refill(now)
        needed = 1.0 if final else 1.0 + self.finals_waiting
        if self._tokens >= needed - _EPSILON_TOKENS:
            return 0.0
        return (needed - self._tokens) / self.rate_per_s

    def take(self, now: float) -> None:
        """Spend one token (call after :meth:`delay` returned 0)."""
        if self.rate_per_s <= 0:
            return
        self._refill(now)
        self._tokens = max(0.0, self._tokens - 1.0)


class PauseBoard:
    """429 pauses wider than one conversation, shared by every send chain of one bot.

    ``method`` pauses one call kind bot-wide (Slack: a 429 on chat.update pauses every channel's edits,
    https://docs.slack.dev/apis/web-api/rate-limits); ``bot`` pauses every call of the bot (Discord: a 429
    with ``"global": true``, https://discord.com/developers/docs/topics/rate-limits).
    """

    def __init__(self) -> None:
        self._bot_until = 0.0
        self._kind_until: dict[CallKind, float] = {}

    def pause_bot(self, until: float) -> None:
        """Pause every call of the bot until ``until`` (clock seconds)."""
        self._bot_until = max(self._bot_until, until)

    def pause_kind(self, kind: CallKind, until: float) -> None:
        """Pause calls of ``kind`` bot-wide until ``until`` (clock seconds)."""
        self._kind_until[kind] = max(self._kind_until.get(kind, 0.0), until)

    def remaining(self, kind: CallKind, now: float) -> float:
        """Seconds left before a call of ``kind`` may start (0.0 when not paused)."""
        return max(0.0, self._bot_until - now, self._kind_until.get(kind, 0.0) - now)
