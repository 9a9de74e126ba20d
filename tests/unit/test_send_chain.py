"""SendChain: one call at a time per conversation, in order; a 429 pauses it; token buckets pace it."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from streamrelay.core.budgets.rate import TokenBucket
from streamrelay.core.clock import FakeClock
from streamrelay.core.delivery.calls import NotDone
from streamrelay.core.delivery.send_chain import MAX_RETRY_AFTER_S, SendChain
from streamrelay.core.errors import (
    PlatformUnavailableError,
    RateLimitedError,
    RateScope,
    RetryAfterTooLongError,
    UncertainDeliveryError,
)
from streamrelay.core.events import Target
from streamrelay.core.ports import TextFormat
from tests.unit.fakes import FakeAdapter

pytestmark = pytest.mark.timeout(10)

CHAT = Target(chat_id=1)
PLAIN = TextFormat.PLAIN


def send(chain: SendChain, adapter: FakeAdapter, text: str) -> asyncio.Task[str]:
    """Start one send through the chain as its own task (a concurrent caller)."""
    return asyncio.create_task(chain.call(lambda: adapter.send_text(CHAT, text, PLAIN)))


async def test_concurrent_callers_go_one_at_a_time_in_order() -> None:
    clock = FakeClock()
    adapter = FakeAdapter(clock, latency_s=0.5)
    chain = SendChain(clock)
    tasks = [send(chain, adapter, f"message {i}") for i in range(5)]
    ids = await asyncio.gather(*tasks)

    assert adapter.chat() == [f"message {i}" for i in range(5)]
    assert ids == ["1", "2", "3", "4", "5"]
    assert adapter.max_in_flight == 1
    # each call starts when the one before it has returned
    assert [c.at for c in adapter.calls] == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0])
    for before, after in itertools.pairwise(adapter.calls):
        assert before.done_at is not None and after.at >= before.done_at


async def test_calls_from_two_runs_interleave_in_arrival_order() -> None:
    clock = FakeClock()
    adapter = FakeAdapter(clock, latency_s=0.1)
    chain = SendChain(clock)
    tasks = [send(chain, adapter, f"{run}{i}") for i in range(3) for run in ("a", "b")]
    await asyncio.gather(*tasks)
    assert adapter.chat() == ["a0", "b0", "a1", "b1", "a2", "b2"]
    assert adapter.max_in_flight == 1


async def test_a_429_pauses_the_chain_for_retry_after() -> None:
    clock = FakeClock()
    adapter = FakeAdapter(clock)
    adapter.fail("send_text", 1, RateLimitedError("Too Many Requests", retry_after_s=3.0))
    chain = SendChain(clock)

    with pytest.raises(RateLimitedError):
        await chain.call(lambda: adapter.send_text(CHAT, "first", PLAIN))
    assert chain.pause_remaining() == pytest.approx(3.0)
    assert chain.ready_in() == pytest.approx(3.0)

    # the chain does not retry by itself: the caller sends again, and others queue behind the pause
    await asyncio.gather(send(chain, adapter, "first"), send(chain, adapter, "second"))
    assert adapter.chat() == ["first", "second"]
    assert [(c.text, c.at, c.outcome) for c in adapter.calls] == [
        ("first", 0.0, "RateLimitedError"),
        ("first", 3.0, "ok"),
        ("second", 3.0, "ok"),
    ]
    assert chain.pause_remaining() == 0.0


async def test_the_pause_counts_from_when_the_429_arrived() -> None:
    clock = FakeClock()
    adapter = FakeAdapter(clock, latency_s=1.0)
    adapter.fail("send_text", 1, RateLimitedError("Too Many Requests", retry_after_s=2.0))
    chain = SendChain(clock)
    first = send(chain, adapter, "one")
    second = send(chain, adapter, "two")
    with pytest.raises(RateLimitedError):
        await first
    await second
    # the 429 came back at t=1 (latency), so nothing starts before t=3
    assert [c.at for c in adapter.calls] == pytest.approx([0.0, 3.0])
    assert adapter.chat() == ["two"]


@pytest.mark.parametrize("scope", list(RateScope))
async def test_a_retry_after_past_the_cap_is_refused_for_now_and_pauses_nothing(scope: RateScope) -> None:
    clock = FakeClock()
    adapter = FakeAdapter(clock)
    days = 1e9 / 1000  # a Matrix retry_after_ms of 10^9: 11.5 days
    adapter.fail("send_text", 1, RateLimitedError("M_LIMIT_EXCEEDED", retry_after_s=days, scope=scope))
    chain = SendChain(clock)

    with pytest.raises(RetryAfterTooLongError) as info:
        await chain.call(lambda: adapter.send_text(CHAT, "first", PLAIN))
    assert (info.value.retry_after_s, info.value.max_s, info.value.scope) == (days, MAX_RETRY_AFTER_S, scope)
    assert "max_retry_after_s = 120 s" in str(info.value) and "1e+06 s" in str(info.value)
    assert chain.ready_in() == 0.0  # not 11.5 days: the call is refused, nothing waits for it

    await send(chain, adapter, "second")  # the rest goes on
    assert adapter.chat() == ["second"]
    assert [c.at for c in adapter.calls] == pytest.approx([0.0, 0.0])


async def test_a_429_outcome_value_past_the_chain_s_cap_becomes_not_done_refused() -> None:
    clock = FakeClock()
    chain = SendChain(clock, max_retry_after_s=5.0)

    async def limited(retry_after_s: float) -> NotDone:
        return NotDone(RateLimitedError("429", retry_after_s=retry_after_s))

    within = await chain.call(lambda: limited(5.0))
    assert isinstance(within.error, RateLimitedError) and chain.pause_remaining() == pytest.approx(5.0)
    clock.advance(5.0)
    past = await chain.call(lambda: limited(5.5))
    assert isinstance(past.error, RetryAfterTooLongError) and past.error.max_s == 5.0
    assert chain.pause_remaining() == 0.0


async def test_other_errors_do_not_pause_and_are_not_retried() -> None:
    clock = FakeClock()
    adapter = FakeAdapter(clock)
    adapter.fail("send_text", 1, PlatformUnavailableError("502 Bad Gateway"))
    adapter.fail("send_text", 2, UncertainDeliveryError("timed out"), landed=True)
    chain = SendChain(clock)
    with pytest.raises(PlatformUnavailableError):
        await chain.call(lambda: adapter.send_text(CHAT, "a", PLAIN))
    with pytest.raises(UncertainDeliveryError):
        await chain.call(lambda: adapter.send_text(CHAT, "b", PLAIN))
    assert chain.ready_in() == 0.0
    assert await chain.call(lambda: adapter.send_text(CHAT, "c", PLAIN)) == "2"
    # one call per attempt: nothing retried inside the chain; the uncertain one landed
    assert adapter.summary() == [
        ("send_text", "a", "PlatformUnavailableError"),
        ("send_text", "b", "UncertainDeliveryError"),
        ("send_text", "c", "ok"),
    ]
    assert adapter.chat() == ["b", "c"]
    assert clock.now() == 0.0


async def test_token_bucket_paces_calls_to_its_rate() -> None:
    clock = FakeClock()
    adapter = FakeAdapter(clock)
    chain = SendChain(clock, [TokenBucket(rate_per_s=2.0, burst=2)])
    await asyncio.gather(*(send(chain, adapter, str(i)) for i in range(5)))
    assert adapter.chat() == ["0", "1", "2", "3", "4"]
    assert [c.at for c in adapter.calls] == pytest.approx([0.0, 0.0, 0.5, 1.0, 1.5])


async def test_the_slowest_bucket_decides() -> None:
    clock = FakeClock()
    adapter = FakeAdapter(clock)
    chain = SendChain(clock, [TokenBucket(rate_per_s=10.0, burst=5), TokenBucket(rate_per_s=1.0, burst=1)])
    await asyncio.gather(*(send(chain, adapter, str(i)) for i in range(3)))
    assert [c.at for c in adapter.calls] == pytest.approx([0.0, 1.0, 2.0])


async def test_a_shared_bot_bucket_paces_two_conversations_together() -> None:
    clock = FakeClock()
    adapter = FakeAdapter(clock)
    bot = TokenBucket(rate_per_s=1.0, burst=1)
    chat_a = SendChain(clock, [TokenBucket(rate_per_s=0.0, burst=1), bot])
    chat_b = SendChain(clock, [TokenBucket(rate_per_s=0.0, burst=1), bot])
    await asyncio.gather(send(chat_a, adapter, "a1"), send(chat_b, adapter, "b1"), send(chat_a, adapter, "a2"))
    times = sorted(c.at for c in adapter.calls)
    assert times == pytest.approx([0.0, 1.0, 2.0])
    assert sorted(adapter.chat()) == ["a1", "a2", "b1"]


async def test_ready_in_reports_the_pause_and_the_budget() -> None:
    clock = FakeClock()
    adapter = FakeAdapter(clock)
    adapter.fail("send_text", 2, RateLimitedError("429", retry_after_s=5.0))
    chain = SendChain(clock, [TokenBucket(rate_per_s=0.5, burst=1)])
    assert chain.ready_in() == 0.0

    await chain.call(lambda: adapter.send_text(CHAT, "a", PLAIN))
    assert chain.ready_in() == pytest.approx(2.0)  # the bucket: one call per 2 s
    clock.advance(0.5)
    assert chain.ready_in() == pytest.approx(1.5)

    with pytest.raises(RateLimitedError):
        await chain.call(lambda: adapter.send_text(CHAT, "b", PLAIN))
    assert clock.now() == pytest.approx(2.0)  # it waited for the budget first
    assert chain.ready_in() == pytest.approx(5.0)  # now the 429 pause is the longer wait
    clock.advance(5.0)
    assert chain.ready_in() == 0.0


async def test_ready_in_is_zero_without_budgets_or_pause() -> None:
    clock = FakeClock()
    chain = SendChain(clock)
    adapter = FakeAdapter(clock)
    for _ in range(10):
        await chain.call(lambda: adapter.send_text(CHAT, "again", PLAIN))
    assert chain.ready_in() == 0.0
    assert clock.now() == 0.0
