"""A restarted sidecar's rate budgets begin where the platform's count is, not full: seeded from the ledger.

A platform counts calls in a window (Slack: chat.update is Tier 3, about 50 per 60 s per workspace,
https://docs.slack.dev/apis/web-api/rate-limits; Telegram: 20 messages per minute per group,
https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this); a process that starts its buckets
full after a restart forgets what the process before it spent, so a budget whose ``burst`` plus ``per_s`` times the
window fills the window (burst 8 at 42 a minute: 50 per 60 s) could exceed it across a restart. The ledger records
every message part's call with its times (intent before the call, outcome after: ``calls.intent_at`` and
``outcome_at`` in the SQLite ledger); at start the service reads the last :data:`SEED_LOOKBACK_S` seconds of them
(:class:`RecentCallsSource`), and each bucket is built as if one process had granted those calls
(:meth:`core.budgets.rate.TokenBucket.seed`): a restart after a short outage finds the tokens the outage saved, one
after a burst finds the burst spent, and a ledger that is empty or old gives the full burst.

Calls are placed as late as they may have reached the platform (their outcome's time; a call whose process died
with it in flight, :data:`IN_FLIGHT_S` after its intent), so the seed does not count fewer calls in a window than the
platform did.
Calls the ledger does not journal (typing, Stop control moves, a thread's opening) are not in it.

::

    runtime.history = await CallHistory.read(sqlite_ledger, clock.now())   # ChannelRuntime seeds each bucket it builds
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from streamrelay.core.budgets.rate import TokenBucket
from streamrelay.core.ports import CallKind

SEED_LOOKBACK_S = 60.0
"""Seconds of the ledger's calls a restarted sidecar reads: the longest window a platform counts in (Slack's tiers
and Telegram's group limit are per minute). A bucket starts full this long before its seed and spends one token per
call since, so every window of this length that spans the restart counts at most ``burst + per_s x window``."""


IN_FLIGHT_S = 10.0
"""Seconds after its intent a call without an outcome (its process was killed with it in flight) is counted: it was
written within moments of its intent and reaches the platform within its send timeout (1.5 s to a few seconds) or
never; counting it later than that would spend, after every kill of a restart storm, tokens the platform never
counted."""


@dataclass(frozen=True, slots=True)
class RecentCall:
    """One platform call the ledger recorded.

    Attributes:
        channel: the configured channel's name (the run's ``channel``).
        chat: the target's chat id, as a string (``str(Target.chat_id)``).
        kind: the rate budgets' name for the call.
        intent_s: when its intent was recorded (before the call), wall-clock seconds (:func:`time.time`).
        outcome_s: when its outcome was recorded (after the answer), wall-clock seconds; None: its process died with
            it in flight.
    """

    channel: str
    chat: str
    kind: CallKind
    intent_s: float
    outcome_s: float | None

    def reached_s(self) -> float:
        """The latest it may have reached the platform (wall-clock seconds): its outcome's time, or
        :data:`IN_FLIGHT_S` after its intent when it has none."""
        return self.outcome_s if self.outcome_s is not None else self.intent_s + IN_FLIGHT_S


class RecentCallsSource(Protocol):
    """A ledger that can list its recent calls across runs (``adapters.sqlite.SqliteLedger``)."""

    async def recent_calls(self, since_s: float) -> list[RecentCall]:
        """Every call that may have reached the platform at or after ``since_s`` (wall-clock seconds:
        :meth:`RecentCall.reached_s`), oldest first.

        Raises:
            Whatever the store raises when it cannot be read.
        """
        ...


class CallHistory:
    """The ledger's recent calls on the injected clock, for seeding the buckets a restarted sidecar builds.

    Args:
        calls: ``(channel, chat, kind, clock seconds)`` of each call.
    """

    def __init__(self, calls: Sequence[tuple[str, str, CallKind, float]] = ()) -> None:
        self._count = len(calls)
        self._by_channel: dict[str, list[tuple[CallKind, float]]] = {}
        self._by_chat: dict[tuple[str, str], list[tuple[CallKind, float]]] = {}
        for channel, chat, kind, at in calls:  # a chat's bucket, built when its chat is first used, reads its own
            self._by_channel.setdefault(channel, []).append((kind, at))
            self._by_chat.setdefault((channel, chat), []).append((kind, at))

    @classmethod
    def of(cls, calls: Sequence[RecentCall], wall_now_s: float, clock_now_s: float) -> CallHistory:
        """The history of ``calls`` (wall-clock times) read at ``wall_now_s``, placed on a clock reading
        ``clock_now_s`` at that moment, each at :meth:`RecentCall.reached_s` (never after the snapshot)."""
        return cls([(c.channel, c.chat, c.kind, clock_now_s - max(0.0, wall_now_s - c.reached_s())) for c in calls])

    @classmethod
    async def read(cls, source: RecentCallsSource, clock_now_s: float) -> CallHistory:
        """The last :data:`SEED_LOOKBACK_S` seconds of ``source``'s calls, on a clock reading ``clock_now_s`` now.

        Raises:
            Whatever ``source`` raises when it cannot be read.
        """
        wall_now_s = time.time()
        calls = await source.recent_calls(wall_now_s - SEED_LOOKBACK_S)
        return cls.of(calls, wall_now_s, clock_now_s)

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return f"CallHistory({self._count} calls)"

    def seed(self, bucket: TokenBucket, now: float, *, channel: str, chat: str | None = None) -> int:
        """Seed ``bucket`` (a fresh one of ``channel``'s budget; ``chat``: a chat's budget, else the bot's) with the
        calls it would have granted in the last :data:`SEED_LOOKBACK_S` seconds before ``now`` (clock seconds).

        Returns:
            How many calls were counted.
        """
        if bucket.rate_per_s <= 0:
            return 0
        since = now - SEED_LOOKBACK_S
        calls = self._by_channel.get(channel, []) if chat is None else self._by_chat.get((channel, chat), [])
        times = [at for kind, at in calls if kind in bucket.calls and at >= since]
        bucket.seed(times, now, since=since)
        return len(times)
