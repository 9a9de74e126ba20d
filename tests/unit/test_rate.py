"""TokenBucket: a burst at once, then the sustained rate; unlimited when the rate is 0."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamrelay.core.budgets.rate import TokenBucket

pytestmark = pytest.mark.timeout(10)


def call_times(bucket: TokenBucket, calls: int, start: float = 0.0) -> list[float]:
    """When ``calls`` back-to-back callers get through: each waits ``delay`` then takes a token."""
    now, times = start, []
    for _ in range(calls):
        while (wait := bucket.delay(now)) > 0:
            now += wait
        bucket.take(now)
        times.append(now)
    return times


def test_burst_goes_at_once_then_the_rate() -> None:
    bucket = TokenBucket(rate_per_s=2.0, burst=3)
    assert call_times(bucket, 6) == pytest.approx([0.0, 0.0, 0.0, 0.5, 1.0, 1.5])


def test_delay_says_how_long_until_the_next_token() -> None:
    bucket = TokenBucket(rate_per_s=4.0, burst=1)
    assert bucket.delay(10.0) == 0.0
    bucket.take(10.0)
    assert bucket.delay(10.0) == pytest.approx(0.25)
    assert bucket.delay(10.1) == pytest.approx(0.15)
    assert bucket.delay(10.25) == 0.0


def test_idle_time_refills_at_most_the_burst() -> None:
    bucket = TokenBucket(rate_per_s=1.0, burst=2)
    call_times(bucket, 2)
    # a long pause refills only up to the burst: two at once, then one per second again
    assert call_times(bucket, 4, start=100.0) == pytest.approx([100.0, 100.0, 101.0, 102.0])


def test_partial_refill_counts() -> None:
    bucket = TokenBucket(rate_per_s=1.0, burst=1)
    bucket.take(0.0)
    assert bucket.delay(0.6) == pytest.approx(0.4)
    assert call_times(bucket, 1, start=0.6) == pytest.approx([1.0])


@pytest.mark.parametrize("rate", [0.0, -1.0])
def test_rate_zero_or_less_is_unlimited(rate: float) -> None:
    bucket = TokenBucket(rate_per_s=rate, burst=1)
    assert call_times(bucket, 1000) == [0.0] * 1000
    assert bucket.delay(0.0) == 0.0


def test_unlimited_bucket_may_have_any_burst() -> None:
    assert TokenBucket(rate_per_s=0.0, burst=0).delay(0.0) == 0.0


@pytest.mark.parametrize("burst", [0, 0.5])
def test_a_limited_bucket_needs_room_for_one_token(burst: float) -> None:
    # with burst < 1 a token never accumulates: every call would wait forever
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(rate_per_s=1.0, burst=burst)


@settings(max_examples=50, deadline=None)
@given(
    rate=st.integers(1, 20),
    burst=st.integers(1, 10),
    calls=st.integers(1, 40),
)
def test_never_more_than_burst_plus_rate_times_elapsed(rate: int, burst: int, calls: int) -> None:
    times = call_times(TokenBucket(rate_per_s=rate, burst=burst), calls)
    for i, at in enumerate(times):
        # the i-th call (0-based) goes at the first moment the budget allows it, never earlier
        assert at == pytest.approx(max(0.0, (i + 1 - burst) / rate), abs=1e-9)
        assert i + 1 <= burst + at * rate + 1e-6


def test_float_rounding_of_the_refill_does_not_stall() -> None:
    # 3/s: after 1/3 s the refill gives 0.9999999999999998 tokens; the wait it asks for must move time
    bucket = TokenBucket(rate_per_s=3.0, burst=1)
    assert call_times(bucket, 6) == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0, 4 / 3, 5 / 3])


def test_a_pause_grants_nothing_until_it_ends_then_the_rate() -> None:
    # a 429 on a scope the budget counts: calls queued meanwhile go at the rate after it, not all at its end
    bucket = TokenBucket(rate_per_s=2.0, burst=1)
    bucket.take(0.0)
    bucket.pause(10.0)
    assert bucket.delay(3.0) == pytest.approx(7.0)  # refilled by then (at most the burst), held until the end
    assert bucket.delay_for(3.0, 3.0) == pytest.approx(8.0)  # one token at its end (the burst), two more at 2/s
    assert call_times(bucket, 3, start=3.0) == pytest.approx([10.0, 10.5, 11.0])


def test_a_pause_shorter_than_the_one_set_changes_nothing() -> None:
    bucket = TokenBucket(rate_per_s=1.0, burst=1)
    bucket.pause(5.0)
    bucket.pause(3.0)
    assert bucket.delay(1.0) == pytest.approx(4.0)
    assert call_times(bucket, 2, start=1.0) == pytest.approx([5.0, 6.0])


def test_a_pause_shorter_than_the_refill_waits_for_the_refill() -> None:
    bucket = TokenBucket(rate_per_s=0.5, burst=1)
    bucket.take(0.0)
    bucket.pause(1.0)
    assert bucket.delay(0.0) == pytest.approx(2.0)


def test_an_unlimited_bucket_is_never_paused() -> None:
    bucket = TokenBucket(rate_per_s=0.0, burst=1)
    bucket.pause(10.0)
    assert bucket.delay(1.0) == 0.0
