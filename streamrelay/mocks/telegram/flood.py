"""Telegram's flood control as the mock enforces it when ``rate_limits`` is on.

Past a limit the answer is HTTP 429 ::

    {"ok": false, "error_code": 429, "description": "Too Many Requests: retry after N",
     "parameters": {"retry_after": N}}

with header ``Retry-After: N`` (N = whole seconds, rounded up, at least 1). A refused call costs nothing.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

from streamrelay.mocks.common import ChatId
from streamrelay.mocks.telegram.wire import chat_type


@dataclass(frozen=True)
class TelegramLimits:
    """Flood control the mock enforces when ``rate_limits`` is on: sends, edits and drafts count alike.

    Official FAQ: about 1 message per second per chat with short bursts, 20 messages per minute per group,
    about 30 messages per second per bot (https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this).
    Edits count toward flood control (observed: https://grammy.dev/advanced/flood). How sendMessageDraft
    counts is not documented; the mock counts every draft update like a send (the conservative assumption).

    Attributes:
        chat_burst: token-bucket capacity per (bot, chat).
        chat_per_s: token refill per second per (bot, chat).
        group_per_min: calls per sliding 60 s window per (bot, group/supergroup/channel).
        global_per_s: calls per sliding 1 s window per bot.
    """

    chat_burst: int = 3
    chat_per_s: float = 1.0
    group_per_min: int = 20
    global_per_s: int = 30


class FloodControl:
    """Token bucket per (bot, chat), sliding windows per group and per bot (:class:`TelegramLimits`).

    Times are the mock's clock, in seconds; bots are told apart by their token.
    """

    def __init__(self, limits: TelegramLimits) -> None:
        self._limits = limits
        self._buckets: dict[tuple[str, ChatId], tuple[float, float]] = {}
        self._groups: defaultdict[tuple[str, ChatId], deque[float]] = defaultdict(deque)
        self._bots: defaultdict[str, deque[float]] = defaultdict(deque)

    def _tokens(self, key: tuple[str, ChatId], now: float) -> float:
        tokens, at = self._buckets.get(key, (float(self._limits.chat_burst), now))
        return min(float(self._limits.chat_burst), tokens + (now - at) * self._limits.chat_per_s)

    @staticmethod
    def _window_wait_s(window: deque[float], span_s: float, limit: int, now: float) -> float:
        while window and window[0] <= now - span_s:
            window.popleft()
        return window[0] + span_s - now if len(window) >= limit else 0.0

    def wait_s(self, bot: str, chat: ChatId, now: float) -> float:
        """Seconds until this call would be admitted (0.0: admitted now)."""
        tokens = self._tokens((bot, chat), now)
        waits = [0.0 if tokens >= 1.0 else (1.0 - tokens) / self._limits.chat_per_s]
        if chat_type(chat) != "private":
            group = self._groups[(bot, chat)]
            waits.append(self._window_wait_s(group, 60.0, self._limits.group_per_min, now))
        waits.append(self._window_wait_s(self._bots[bot], 1.0, self._limits.global_per_s, now))
        return max(waits)

    def consume(self, bot: str, chat: ChatId, now: float) -> None:
        """Count one admitted call."""
        self._buckets[(bot, chat)] = (self._tokens((bot, chat), now) - 1.0, now)
        if chat_type(chat) != "private":
            self._groups[(bot, chat)].append(now)
        self._bots[bot].append(now)
