"""Rate budgets: token buckets per scope (bot, chat) driven by an injected clock.

The numbers come from the channel's TOML, each with its platform documentation link; e.g. Telegram:
about 1 message per second per chat, 20 per minute per group, about 30 per second per bot
(https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this).
"""

from __future__ import annotations

from dataclasses import dataclass, field

_EPSILON_TOKENS = 1e-6
"""A token short by less than this counts as whole: float rounding of the refill (e.g. 3/s after 1/3 s
gives 0.9999999999999998 tokens) must not ask for a wait too short to move the clock."""


@dataclass
class TokenBucket:
    """A token bucket: ``rate_per_s`` tokens per second, at most ``burst`` stored.

    ``delay(now)`` says how long to wait before a call may be made; ``take(now)`` spends one token.
    ``rate_per_s <= 0`` means unlimited. The bucket starts full at the first ``delay`` or ``take``.

    Raises:
        ValueError: a limited bucket (``rate_per_s > 0``) with ``burst < 1`` could never hold the one
            token a call needs, so every call would wait forever.
    """

    rate_per_s: float
    burst: float
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

    def delay(self, now: float) -> float:
        """Seconds to wait until one token is available (0.0 when available now)."""
        if self.rate_per_s <= 0:
            return 0.0
        self._refill(now)
        if self._tokens >= 1.0 - _EPSILON_TOKENS:
            return 0.0
        return (1.0 - self._tokens) / self.rate_per_s

    def take(self, now: float) -> None:
        """Spend one token (call after :meth:`delay` returned 0)."""
        if self.rate_per_s <= 0:
            return
        self._refill(now)
        self._tokens = max(0.0, self._tokens - 1.0)
