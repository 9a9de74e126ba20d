"""Shared rate budgets on a real redis-server: GCRA decided on Redis's clock never lets three replicas together
exceed a budget, previews leave waiting finals their tokens, and a 429 pause holds every replica back.

No assertion reads the test's own clock: grants are counted against the times Redis decided them at, and waits
are the ones Redis computed."""

from __future__ import annotations

import asyncio

import pytest

from streamrelay.adapters.redis import Attempt, RedisBudgets, SharedBucket, SharedPauses
from streamrelay.adapters.redis.client import Redis
from streamrelay.core.budgets.rate import Budget, BudgetScope
from streamrelay.core.ports import CallKind
from tests.contention import wait_scale


async def test_a_burst_then_one_call_per_interval(client: Redis) -> None:
    budgets = RedisBudgets(client)
    assert [await budgets.acquire("t:bot", 2, 3) for _ in range(3)] == [0.0, 0.0, 0.0]
    denied = await budgets.attempt("t:bot", 2, 3)
    assert not denied.granted and 0 < denied.wait_s <= 0.5  # one token every 500 ms
    await asyncio.sleep(denied.wait_s)
    assert await budgets.acquire("t:bot", 2, 3) == 0.0
    assert await budgets.acquire("t:other", 2, 3) == 0.0  # scopes are separate budgets


async def test_delay_peeks_without_spending(client: Redis) -> None:
    budgets = RedisBudgets(client)
    assert [await budgets.delay("s", 1, 2) for _ in range(5)] == [0.0] * 5
    assert [await budgets.acquire("s", 1, 2) for _ in range(2)] == [0.0, 0.0]
    wait = await budgets.delay("s", 1, 2)
    assert 0 < wait <= 1.0 and 0 < await budgets.acquire("s", 1, 2) <= 1.0
    assert await budgets.delay("unlimited", 0, 1) == 0.0 and await budgets.acquire("unlimited", 0, 0) == 0.0


async def replica(
    budgets: RedisBudgets, rate_per_s: float, burst: float, granted: list[Attempt], total: int, asking: list[int]
) -> int:
    """One replica calling as fast as the shared budget lets it until the replicas got ``total`` grants; its own.
    ``asking`` (one count shared by the replicas) holds the attempts in flight: a replica asks only while the grants
    and the attempts in flight are fewer than ``total`` (else two replicas asking for the last grant at once both got
    one: 42 grants of 40 on a stalled worker)."""
    mine = 0
    while len(granted) < total:
        if len(granted) + asking[0] >= total:  # the last grants are being asked for: wait for their answers
            await asyncio.sleep(0.01)
            continue
        asking[0] += 1
        try:
            attempt = await budgets.attempt("tg:bot", rate_per_s, burst)
        finally:
            asking[0] -= 1
        if attempt.granted:
            granted.append(attempt)
            mine += 1
        else:
            assert attempt.wait_s > 0  # a refusal always says how long to wait
            await asyncio.sleep(attempt.wait_s)
    return mine


async def test_three_replicas_together_never_exceed_the_budget(clients: list[Redis]) -> None:
    rate_per_s, burst, total = 40.0, 4.0, 40
    granted: list[Attempt] = []
    asking = [0]
    shares = await asyncio.gather(
        *(replica(RedisBudgets(c), rate_per_s, burst, granted, total, asking) for c in clients)
    )
    times = sorted(a.at_s for a in granted)
    assert len(times) == total and all(shares)  # every replica got some
    # In any window [t_i, t_j] of Redis's clock, at most burst + rate * (t_j - t_i) calls started.
    for i in range(len(times)):
        for j in range(i, len(times)):
            assert j - i + 1 <= burst + rate_per_s * (times[j] - times[i]) + 1e-6


async def test_previews_leave_a_waiting_final_its_token(clients: list[Redis]) -> None:
    a, b = RedisBudgets(clients[0]), RedisBudgets(clients[1])
    # 4 tokens a second on an idle machine, fewer on a loaded one: the preview's attempt must come before a second
    # token is back (at load 20-30 on 2 cores the 0.25 s between tokens passed between two commands)
    rate = 4 / wait_scale()
    assert await a.acquire("chat", rate, 2) == 0.0
    assert await a.acquire("chat", rate, 2) == 0.0  # empty now
    wait = await a.acquire("chat", rate, 2, final=True, waiter="a:r1:0")  # a final must wait: it registers
    assert wait > 0
    await asyncio.sleep(wait)
    # one token is back: replica b's preview may not take it while a's final waits...
    preview = await b.attempt("chat", rate, 2, final=False)
    assert not preview.granted and preview.wait_s > 0
    assert await b.delay("chat", rate, 2, final=True) == 0.0  # ...though a final could
    assert await a.acquire("chat", rate, 2, final=True, waiter="a:r1:0") == 0.0  # the final goes first
    await asyncio.sleep(await b.acquire("chat", rate, 2, final=False))
    assert await b.acquire("chat", rate, 2, final=False) == 0.0  # no final waits any more


async def test_a_withdrawn_or_lapsed_final_holds_no_preview_back(clients: list[Redis]) -> None:
    patient, brief = RedisBudgets(clients[0]), RedisBudgets(clients[1], waiter_ttl_ms=50)
    assert await patient.acquire("c", 1, 1) == 0.0
    assert await patient.acquire("c", 1, 1, waiter="gone") > 0
    assert await brief.acquire("c", 1, 1, waiter="lapsed") > 0
    await clients[0].delete("sr:{rate:c}:tat")  # the bucket is full again
    assert await patient.acquire("c", 1, 1, final=False) > 0  # two finals wait: a preview must not go
    await patient.withdraw("c", "gone")  # its run ended otherwise
    await asyncio.sleep(0.06)  # "lapsed" stopped asking (its replica died): its registration lapsed
    assert await patient.acquire("c", 1, 1, final=False) == 0.0


async def test_a_pause_holds_every_replica_and_only_grows(clients: list[Redis]) -> None:
    a, b = RedisBudgets(clients[0]), RedisBudgets(clients[1])
    assert await a.paused_for("tg:chat:1") == 0.0
    scale = wait_scale()  # the pause outlasts the next commands on a loaded machine too (0.3 s did not at load 20-30)
    await a.pause("tg:chat:1", 0.3 * scale)  # a 429 with retry_after 0.3 s on replica a
    await a.pause("tg:chat:1", 0.01 * scale)  # a shorter one does not shorten it
    paused = await b.paused_for("tg:chat:1")
    assert 0 < paused <= 0.3 * scale
    wait = await b.acquire("tg:chat:1", 100, 5)
    assert 0 < wait <= paused  # replica b waits it out: nothing spent
    assert await b.acquire("tg:chat:1", 0, 1) > 0  # an unlimited budget honours the pause too
    await asyncio.sleep(wait)
    assert [await b.acquire("tg:chat:1", 100, 5) for _ in range(5)] == [0.0] * 5  # the whole burst is there


async def test_shared_bucket_and_pauses_keep_core_rates_shape(client: Redis) -> None:
    budgets = RedisBudgets(client)
    per_chat = Budget("per_chat", BudgetScope.CHAT, per_s=1.0, burst=1.0)
    bucket = SharedBucket.of(budgets, per_chat, "telegram:chat:42")
    assert (bucket.rate_per_s, bucket.burst, bucket.calls) == (1.0, 1.0, per_chat.calls)
    assert await bucket.delay() == 0.0 and await bucket.acquire() == 0.0
    assert 0 < await bucket.delay() <= 1.0
    pauses = SharedPauses(budgets, "slack:bot:T1")
    await pauses.pause_kind(CallKind.EDIT, 0.5)
    assert 0 < await pauses.remaining(CallKind.EDIT) <= 0.5 and await pauses.remaining(CallKind.SEND) == 0.0
    await pauses.pause_bot(10.0)
    assert 0.5 < await pauses.remaining(CallKind.SEND) <= 10.0
    with pytest.raises(ValueError, match="burst"):
        await budgets.acquire("x", 1, 0.5)
    with pytest.raises(ValueError, match="braces"):
        await budgets.acquire("x}{", 1, 1)
