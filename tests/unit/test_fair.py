"""FairQueue: a bot's shared budget granted finals first, then round-robin across clients, then across a client's
runs, FIFO within a run; work-conserving; a cancelled waiter leaves without losing a token."""

from __future__ import annotations

import asyncio

import pytest

from streamrelay.core.budgets.fair import FairQueue, Requester
from streamrelay.core.budgets.rate import TokenBucket
from streamrelay.core.clock import FakeClock
from tests.unit.fakes import ManualClock, settle

pytestmark = pytest.mark.timeout(30)

Grant = tuple[str, str, bool, str]
"""(client, run, final, label) of one granted waiter, in grant order."""


def ask(
    queue: FairQueue, log: list[Grant], client: str, run: str, *, final: bool, label: str = ""
) -> asyncio.Task[None]:
    """One caller waiting for a token as its own task; logs itself when granted."""

    async def wait() -> None:
        await queue.acquire(Requester(client, run), final=final)
        log.append((client, run, final, label))

    return asyncio.ensure_future(wait())


async def step(clock: ManualClock, queue: FairQueue) -> None:
    """Let time run until the queue grants one more token (one token per ``1 / rate`` seconds)."""
    before = queue.granted
    while queue.granted == before:
        clock.advance(1 / queue.bucket.rate_per_s)
        await settle(5)
    await settle(5)


def test_a_requester_is_the_client_and_run_of_a_run_key() -> None:
    assert Requester.of("acme/run-1") == Requester("acme", "run-1")
    assert Requester.of("run-1") == Requester("default", "run-1")


async def test_a_client_with_thousands_of_runs_cannot_hold_back_another_clients_final() -> None:
    clock = ManualClock()
    queue = FairQueue(TokenBucket(rate_per_s=10.0, burst=1), clock)
    log: list[Grant] = []
    tasks = [ask(queue, log, "noisy", f"r{i}", final=False) for i in range(2000)]
    tasks += [ask(queue, log, "noisy", f"r{i}", final=True) for i in range(2000)]
    await settle()
    for _ in range(50):
        await step(clock, queue)
    assert len(log) == 51 and {client for client, *_ in log} == {"noisy"}  # the first took the token at once

    assert queue.estimate(Requester("victim", "v1"), final=True) == pytest.approx(0.2)  # its place: 2nd, at 10/s
    tasks.append(ask(queue, log, "victim", "v1", final=True))
    await settle()
    asked_at = len(log)
    while ("victim", "v1", True, "") not in log:
        await step(clock, queue)
    granted_at = log.index(("victim", "v1", True, ""))
    assert granted_at - asked_at < 2  # its share is half: at most one noisy grant goes first, not 3,950
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert queue.waiting == 0


async def test_finals_go_before_previews_whoever_asked_first() -> None:
    clock = FakeClock()
    queue = FairQueue(TokenBucket(rate_per_s=2.0, burst=1), clock)
    queue.bucket.take(clock.now())  # empty: every caller below waits
    log: list[Grant] = []
    tasks = [ask(queue, log, "a", f"r{i}", final=False) for i in range(3)]
    tasks += [ask(queue, log, "b", "r0", final=False)]
    tasks += [ask(queue, log, "a", "r9", final=True), ask(queue, log, "b", "r1", final=True)]
    await asyncio.gather(*tasks)
    assert [(client, final) for client, _, final, _ in log] == [
        ("a", True),
        ("b", True),
        ("a", False),
        ("b", False),
        ("a", False),
        ("a", False),
    ]


async def test_a_promoted_run_goes_with_the_finals() -> None:
    clock = FakeClock()
    queue = FairQueue(TokenBucket(rate_per_s=2.0, burst=1), clock)
    queue.bucket.take(clock.now())
    log: list[Grant] = []
    tasks = [ask(queue, log, "a", f"r{i}", final=False) for i in range(3)] + [ask(queue, log, "a", "r0", final=True)]
    tasks.append(ask(queue, log, "b", "late", final=False))
    await settle(1)
    queue.promote(Requester("b", "late"))  # its run is finalizing: its waiting preview call is a final's now
    await asyncio.gather(*tasks)
    assert [run for _, run, _, _ in log][:2] == ["r0", "late"]


async def test_a_clients_runs_take_turns_and_each_runs_calls_keep_their_order() -> None:
    clock = FakeClock()
    queue = FairQueue(TokenBucket(rate_per_s=4.0, burst=1), clock)
    queue.bucket.take(clock.now())
    log: list[Grant] = []
    tasks = [ask(queue, log, "a", "r1", final=False, label=f"r1-{i}") for i in range(3)]
    tasks += [ask(queue, log, "a", "r2", final=False, label=f"r2-{i}") for i in range(3)]
    tasks += [ask(queue, log, "a", "r3", final=False, label="r3-0")]
    await asyncio.gather(*tasks)
    assert [label for *_, label in log] == ["r1-0", "r2-0", "r3-0", "r1-1", "r2-1", "r1-2", "r2-2"]


async def test_clients_take_turns_whatever_their_number_of_runs() -> None:
    clock = FakeClock()
    queue = FairQueue(TokenBucket(rate_per_s=4.0, burst=1), clock)
    queue.bucket.take(clock.now())
    log: list[Grant] = []
    tasks = [ask(queue, log, "big", f"r{i}", final=False) for i in range(6)]
    tasks += [ask(queue, log, "small", "s", final=False, label=str(i)) for i in range(2)]
    tasks += [ask(queue, log, "tiny", "t", final=False)]
    await asyncio.gather(*tasks)
    assert [client for client, *_ in log] == ["big", "small", "tiny", "big", "small", "big", "big", "big", "big"]


async def test_a_lone_client_uses_the_whole_budget() -> None:
    clock = ManualClock()
    queue = FairQueue(TokenBucket(rate_per_s=5.0, burst=2), clock)
    times: list[float] = []

    async def caller(run: str) -> None:
        await queue.acquire(Requester("only", run), final=False)
        times.append(clock.now())

    callers = asyncio.gather(*(caller(f"r{i % 3}") for i in range(12)))
    while not callers.done():
        await settle(5)
        clock.advance(0.01)
    # the burst at once, then one every 1/5 s: no token stays unused while someone waits
    assert times == pytest.approx([0.0, 0.0] + [(i + 1) / 5 for i in range(10)], abs=0.011)
    assert queue.granted == 12


async def test_a_newcomer_waits_for_its_place_only() -> None:
    clock = ManualClock()
    queue = FairQueue(TokenBucket(rate_per_s=10.0, burst=1), clock)
    assert queue.estimate(Requester("a", "r"), final=False) == 0.0  # nobody waits, a token is there
    log: list[Grant] = []
    tasks = [ask(queue, log, "a", f"r{i}", final=False) for i in range(5)]
    await settle()
    assert len(log) == 1  # the first took the token at once; four wait
    assert queue.estimate(Requester("b", "x"), final=False) == pytest.approx(0.2)  # after one of a's
    assert queue.estimate(Requester("a", "r9"), final=False) == pytest.approx(0.5)  # after a's other runs
    assert queue.estimate(Requester("b", "x"), final=True) == pytest.approx(0.1)  # the next token
    await step(clock, queue)
    assert [run for _, run, _, _ in log] == ["r0", "r1"]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_cancelled_waiter_leaves_the_queue_and_the_next_gets_its_token_in_time() -> None:
    clock = ManualClock()
    queue = FairQueue(TokenBucket(rate_per_s=10.0, burst=1), clock)
    queue.bucket.take(clock.now())
    log: list[Grant] = []
    first = ask(queue, log, "a", "r1", final=False)
    second = ask(queue, log, "b", "r2", final=False)
    await settle()
    first.cancel()
    await settle()
    assert queue.waiting == 1
    clock.advance(0.1)
    await settle()
    assert log == [("b", "r2", False, "")]  # at 0.1 s: the token the cancelled one would have had
    assert second.done() and queue.waiting == 0


async def test_a_waiter_cancelled_as_it_is_granted_passes_the_token_on() -> None:
    clock = ManualClock()
    queue = FairQueue(TokenBucket(rate_per_s=10.0, burst=1), clock)
    queue.bucket.take(clock.now())
    log: list[Grant] = []
    first = ask(queue, log, "a", "r1", final=False)
    second = ask(queue, log, "b", "r2", final=False)
    await settle()
    clock.advance(0.1)
    await asyncio.sleep(0)  # the queue's task granted the token; the first caller has not run yet
    assert queue.granted == 1 and not first.done()
    first.cancel()
    await settle()
    assert first.cancelled()
    assert log == [("b", "r2", False, "")] and clock.now() == pytest.approx(0.1)  # the same token, passed on
    assert second.done() and queue.waiting == 0


async def test_a_waiter_cancelled_when_no_one_else_waits_gives_its_token_back() -> None:
    clock = ManualClock()
    queue = FairQueue(TokenBucket(rate_per_s=10.0, burst=1), clock)
    queue.bucket.take(clock.now())
    log: list[Grant] = []
    only = ask(queue, log, "a", "r1", final=False)
    await settle()
    clock.advance(0.1)
    await asyncio.sleep(0)
    assert queue.granted == 1
    only.cancel()
    await settle()
    assert queue.bucket.delay(clock.now()) == 0.0  # the token is in the bucket again
