"""The send chain: per conversation, one platform call at a time, in order, within the rate budget.

A 429 (``RateLimitedError``) pauses the whole conversation until its ``retry_after`` has passed; calls
for the same chat from other runs wait too. The chain never retries by itself: callers (the reconciler)
decide, so pending preview edits can merge into one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from core.clock import Clock
from core.errors import RateLimitedError
from core.rate import TokenBucket

T = TypeVar("T")


class SendChain:
    """Serializes calls for one conversation (a chat, a channel, a thread).

    Args:
        clock: the injected clock.
        buckets: rate budgets this conversation draws from, e.g. ``[per_chat, per_bot]`` (shared
            bucket objects may appear in several chains).
    """

    def __init__(self, clock: Clock, buckets: Sequence[TokenBucket] = ()) -> None:
        self._clock = clock
        self._buckets = list(buckets)
        self._lock = asyncio.Lock()
        self.paused_until = 0.0

    def pause_remaining(self) -> float:
        """Seconds left of a 429 pause (0.0 when not paused)."""
        return max(0.0, self.paused_until - self._clock.now())

    def ready_in(self) -> float:
        """Seconds until a call could start: the 429 pause and the rate budgets (0.0 when ready)."""
        now = self._clock.now()
        wait = self.pause_remaining()
        for bucket in self._buckets:
            wait = max(wait, bucket.delay(now))
        return wait

    async def call(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run one platform call when the chain is free, not paused and within budget.

        Raises:
            Whatever ``fn`` raises; a ``RateLimitedError`` also pauses the chain for ``retry_after_s``.
        """
        async with self._lock:
            while (wait := self.ready_in()) > 0:
                await self._clock.sleep(wait)
            now = self._clock.now()
            for bucket in self._buckets:
                bucket.take(now)
            try:
                return await fn()
            except RateLimitedError as exc:
                self.paused_until = max(self.paused_until, self._clock.now() + exc.retry_after_s)
                raise
