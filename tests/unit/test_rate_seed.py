"""A restarted sidecar's buckets begin from the ledger's recent calls (core/budgets/history.py): a ledger that is
empty or old gives the full burst, one whose window is used gives what the platform's count leaves, and no window of
60 s that spans the restart holds more than ``burst + per_s x 60`` calls."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamrelay.core.budgets.history import IN_FLIGHT_S, SEED_LOOKBACK_S, CallHistory, RecentCall
from streamrelay.core.budgets.rate import Budget, BudgetScope, TokenBucket
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import FakeClock
from streamrelay.core.events import Target
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.ports import CallKind
from tests.unit.test_rate import call_times

pytestmark = pytest.mark.timeout(30)

EDITS = frozenset({CallKind.EDIT})
TIER3 = Budget("update_per_workspace", BudgetScope.BOT, 42 / 60, 7, EDITS)
"""Slack's chat.update as shipped: 42 a minute, a burst of 7 (Tier 3: 50 per 60 s)."""


def most_in_a_window(times: list[float], window_s: float) -> int:
    """The most calls any window of ``window_s`` seconds (closed) holds."""
    ordered = sorted(times)
    return max((sum(1 for u in ordered if t <= u <= t + window_s) for t in ordered), default=0)


def test_an_empty_ledger_gives_the_full_burst() -> None:
    bucket = TIER3.bucket()
    CallHistory().seed(bucket, 1000.0, channel="slack")
    assert bucket.available(1000.0) == pytest.approx(7)
    assert call_times(bucket, 8, start=1000.0)[:7] == [1000.0] * 7


def test_calls_older_than_the_window_give_the_full_burst() -> None:
    old = [("slack", "C1", CallKind.EDIT, 1000.0 - SEED_LOOKBACK_S - 1 - i) for i in range(40)]
    bucket = TIER3.bucket()
    assert CallHistory(old).seed(bucket, 1000.0, channel="slack") == 0
    assert bucket.available(1000.0) == pytest.approx(7)


def test_a_burst_spent_just_before_the_restart_is_not_spent_again() -> None:
    spent = [("slack", f"C{i}", CallKind.EDIT, 999.0) for i in range(7)]
    bucket = TIER3.bucket()
    assert CallHistory(spent).seed(bucket, 1000.0, channel="slack") == 7
    # One second after the burst: 0.7 of a token back; the next call waits for the rest, then the rate.
    times = call_times(bucket, 3, start=1000.0)
    assert times == pytest.approx([1000.0 + 0.3 / 0.7, 1000.0 + 1.3 / 0.7, 1000.0 + 2.3 / 0.7])


def test_an_outage_gives_back_the_tokens_it_saved_up_to_the_burst() -> None:
    spent = [("slack", "C1", CallKind.EDIT, 990.0) for _ in range(7)]
    bucket = TIER3.bucket()
    CallHistory(spent).seed(bucket, 1000.0, channel="slack")  # down 10 s: 7 tokens back at 0.7 a second
    assert bucket.available(1000.0) == pytest.approx(7)
    bucket = TIER3.bucket()
    CallHistory(spent).seed(bucket, 995.0, channel="slack")  # down 5 s: 3.5
    assert bucket.available(995.0) == pytest.approx(3.5)


def test_calls_beyond_the_burst_are_owed() -> None:
    # A window half used by another process (25 chat.update in 5 s): the platform counts them all, so the
    # restarted bucket owes them and the next call waits until the count has room.
    used = [("slack", "C1", CallKind.EDIT, 995.0 + i * 0.2) for i in range(25)]
    bucket = TIER3.bucket()
    CallHistory(used).seed(bucket, 1000.0, channel="slack")
    assert bucket.available(1000.0) < 0
    times = call_times(bucket, 30, start=1000.0)
    assert most_in_a_window([t for *_, t in used] + times, 60.0) <= 7 + 42


def test_only_the_channels_calls_of_the_buckets_kinds_and_chat_count() -> None:
    calls = [
        ("slack", "C1", CallKind.EDIT, 999.0),
        ("slack", "C2", CallKind.EDIT, 999.0),
        ("slack", "C1", CallKind.SEND, 999.0),
        ("other", "C1", CallKind.EDIT, 999.0),
    ]
    history = CallHistory(calls)
    assert history.seed(TIER3.bucket(), 1000.0, channel="slack") == 2
    per_channel = Budget("post_per_channel", BudgetScope.CHAT, 1.0, 1, frozenset({CallKind.SEND}))
    assert history.seed(per_channel.bucket(), 1000.0, channel="slack", chat="C1") == 1
    assert history.seed(per_channel.bucket(), 1000.0, channel="slack", chat="C2") == 0
    unlimited = TokenBucket(0.0, 1.0, calls=EDITS)
    assert history.seed(unlimited, 1000.0, channel="slack") == 0
    assert unlimited.delay(1000.0) == 0.0


def test_wall_times_are_placed_on_the_clock_and_in_flight_calls_late() -> None:
    calls = [
        RecentCall("slack", "C1", CallKind.EDIT, intent_s=5_000.0, outcome_s=5_000.5),  # 9.5 s before the read
        RecentCall("slack", "C1", CallKind.EDIT, intent_s=5_008.0, outcome_s=None),  # killed in flight
    ]
    history = CallHistory.of(calls, wall_now_s=5_010.0, clock_now_s=100.0)
    bucket = TokenBucket(0.01, 10.0, calls=EDITS)
    assert history.seed(bucket, 100.0, channel="slack") == 2
    # Full 60 s back; one call at 90.5 (its outcome), one at the read (8 + IN_FLIGHT_S is past it), 9.5 s apart.
    assert IN_FLIGHT_S >= 2.0
    assert bucket.available(100.0) == pytest.approx(10 - 1 + 9.5 * 0.01 - 1)


def test_the_channel_seeds_the_bot_and_chat_buckets_it_builds() -> None:
    clock = FakeClock(1000.0)
    history = CallHistory([("slack", "C1", CallKind.EDIT, 999.0)] * 7 + [("slack", "C1", CallKind.SEND, 999.5)])
    per_channel = Budget("post_per_channel", BudgetScope.CHAT, 1.0, 1, frozenset({CallKind.SEND}))
    runtime = ChannelRuntime(_policy(), _Adapter(), [per_channel, TIER3], history=history)  # type: ignore[arg-type]
    runtime.chain_for(Target(chat_id="C1"), clock)
    runtime.chain_for(Target(chat_id="C2"), clock)
    assert runtime._bot_buckets is not None
    assert runtime._bot_buckets[0].available(1000.0) == pytest.approx(0.7)
    assert runtime._chat_buckets["C1"][0].available(1000.0) == pytest.approx(0.5)
    assert runtime._chat_buckets["C2"][0].available(1000.0) == pytest.approx(1.0)


@settings(max_examples=200, deadline=None)
@given(
    before=st.lists(st.floats(0.0, 120.0), max_size=80),
    restart_s=st.floats(0.0, 30.0),
    calls=st.integers(0, 80),
)
def test_no_window_spanning_a_restart_holds_more_than_the_budget(
    before: list[float], restart_s: float, calls: int
) -> None:
    # The process before the restart granted its calls from one bucket (times it asked at, paced by that bucket);
    # the restarted one is seeded from them. Together they never exceed burst + per_s x 60 in any 60 s.
    first = TIER3.bucket()
    granted: list[float] = []
    for t in sorted(before):
        now = t if not granted else max(t, granted[-1])
        while (wait := first.delay(now)) > 0:
            now += wait
        first.take(now)
        granted.append(now)
    start = (granted[-1] if granted else 0.0) + restart_s
    second = TIER3.bucket()
    CallHistory([("slack", "C1", CallKind.EDIT, t) for t in granted]).seed(second, start, channel="slack")
    after = call_times(second, calls, start=start)
    assert most_in_a_window(granted + after, 60.0) <= 7 + 42 + 1e-9


class _Adapter:
    def is_group(self, target: Target) -> bool:
        return True


def _policy() -> ChannelPolicy:
    return ChannelPolicy(name="slack")
