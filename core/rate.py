"""Rate budgets: token buckets per scope (bot, chat) driven by an injected clock.

The numbers come from the channel's TOML, each with its platform documentation link; e.g. Telegram:
about 1 message per second per chat, 20 per minute per group, about 30 per second per bot
(https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TokenBucket:
    """A token bucket: ``rate_per_s`` tokens per second, at most ``burst`` stored.

    ``delay(now)`` says how long to wait before a call may be made; ``take(now)`` spends one token.
    ``rate_per_s <= 0`` means unlimited.
    """

    rate_per_s: float
    burst: float
    _tokens: float = -1.0
    _at: float = 0.0

    def _refill(self, now: float) -> None:
        if self._tokens < 0:
            self._tokens, self._at = self.burst, now
            return
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate_per_s)
        self._at = now

    def delay(self, now: float) -> float:
        """Seconds to wait until one token is available (0.0 when available now)."""
        if self.rate_per_s <= 0:
            return 0.0
        self._refill(now)
        if self._tokens >= 1.0:
            return 0.0
        return (1.0 - self._tokens) / self.rate_per_s

    def take(self, now: float) -> None:
        """Spend one token (call after :meth:`delay` returned 0)."""
        if self.rate_per_s <= 0:
            return
        self._refill(now)
        self._tokens -= 1.0
