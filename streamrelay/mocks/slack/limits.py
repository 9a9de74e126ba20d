"""Slack's documented rate limits, as :class:`~mocks.slack.MockSlack` enforces them when ``rate_limits`` is on.

Source: https://docs.slack.dev/apis/web-api/rate-limits (tiers are per method, per app, per workspace; the mock
takes one token for one app in one workspace).
"""

from __future__ import annotations

import math
from collections import defaultdict, deque
from dataclasses import dataclass


@dataclass(frozen=True)
class SlackLimits:
    """The numbers the mock enforces. Every budget is shared by all channels except chat.postMessage's.

    Attributes:
        post_burst: token-bucket capacity per (token, channel) for chat.postMessage. Slack documents "1 message
            per second per channel, with short bursts of more than 1 allowed"
            (https://docs.slack.dev/apis/web-api/rate-limits#special-rate-limits): 2 is the least burst those
            words promise, and a strict mock takes the least.
        post_per_s: refill of that bucket per second (1 per second per channel).
        update_per_min: chat.update, Tier 3 ("50+ per minute"), per token across all channels
            (https://docs.slack.dev/reference/methods/chat.update).
        delete_per_min: chat.delete, Tier 3, its own budget (https://docs.slack.dev/reference/methods/chat.delete).
        stream_start_stop_per_min: chat.startStream and chat.stopStream, Tier 2 ("20+ per minute"), one budget
            each (https://docs.slack.dev/reference/methods/chat.startStream).
        append_per_min: chat.appendStream, Tier 4 ("100+ per minute")
            (https://docs.slack.dev/reference/methods/chat.appendStream).
        history_per_min: conversations.history, Tier 3 ("50+ per minute"), its own budget
            (https://docs.slack.dev/reference/methods/conversations.history). Slack documents 1 per minute (and
            ``limit`` at most 15) for new apps distributed outside the Marketplace since May 2025: the mock
            takes the Tier 3 of Marketplace and internal apps.
        replies_per_min: conversations.replies, Tier 3, its own budget, with the same exception
            (https://docs.slack.dev/reference/methods/conversations.replies).

    chat.postMessage's workspace-wide limit ("several hundred messages per minute") has no number, and neither
    auth.test nor assistant.threads.setStatus is limited by the mock.
    """

    post_burst: int = 2
    post_per_s: float = 1.0
    update_per_min: int = 50
    delete_per_min: int = 50
    stream_start_stop_per_min: int = 20
    append_per_min: int = 100
    history_per_min: int = 50
    replies_per_min: int = 50

    def per_minute(self, method: str) -> int | None:
        """The sliding 60 s budget of ``method`` per token, or None when it has none."""
        return {
            "chat.update": self.update_per_min,
            "chat.delete": self.delete_per_min,
            "chat.startStream": self.stream_start_stop_per_min,
            "chat.stopStream": self.stream_start_stop_per_min,
            "chat.appendStream": self.append_per_min,
            "conversations.history": self.history_per_min,
            "conversations.replies": self.replies_per_min,
        }.get(method)


class RateLimiter:
    """A token bucket per (token, channel) for chat.postMessage; a sliding 60 s window per (token, method)."""

    def __init__(self, limits: SlackLimits) -> None:
        self._limits = limits
        self._buckets: dict[tuple[str, str], tuple[float, float]] = {}
        self._windows: defaultdict[tuple[str, str], deque[float]] = defaultdict(deque)

    def _tokens(self, key: tuple[str, str], now: float) -> float:
        burst = float(self._limits.post_burst)
        tokens, at = self._buckets.get(key, (burst, now))
        return min(burst, tokens + (now - at) * self._limits.post_per_s)

    def wait_s(self, token: str, method: str, channel: str, now: float) -> float:
        """Seconds until this call would be admitted (0.0: admitted now)."""
        if method == "chat.postMessage":
            tokens = self._tokens((token, channel), now)
            return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self._limits.post_per_s
        budget = self._limits.per_minute(method)
        if budget is None:
            return 0.0
        window = self._windows[(token, method)]
        while window and window[0] <= now - 60.0:
            window.popleft()
        return window[0] + 60.0 - now if len(window) >= budget else 0.0

    def consume(self, token: str, method: str, channel: str, now: float) -> None:
        """Count an admitted call."""
        if method == "chat.postMessage":
            self._buckets[(token, channel)] = (self._tokens((token, channel), now) - 1.0, now)
        elif self._limits.per_minute(method) is not None:
            self._windows[(token, method)].append(now)


def retry_after_header(wait_s: float) -> int:
    """``Retry-After`` is whole seconds: rounded up, at least 1."""
    return max(1, math.ceil(wait_s - 1e-9))
