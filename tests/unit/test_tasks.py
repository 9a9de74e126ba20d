"""core.tasks.stop: a task is stopped even when it swallows a cancellation, as Python 3.11's ``asyncio.wait_for``
does inside redis-py when the inner write completes in the same loop turn (python/cpython#86296): the replica
hand-over that waited forever for such a run (tests/redis/test_replicas_any.py hung one time in ten)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from streamrelay.core.tasks import stop, stop_all


async def swallows(times: int) -> None:
    """Waits, dropping the first ``times`` cancellations it gets (what wait_for's race does), then waits on."""
    for _ in range(times):
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(10)
    await asyncio.sleep(10)


async def swallows_until(release: asyncio.Event) -> str:
    """Drops every cancellation until ``release`` is set (then the next wake-up ends it)."""
    while not release.is_set():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(10)
    return "released"


async def test_one_cancel_is_not_enough_for_a_task_that_swallows_it() -> None:
    task = asyncio.create_task(swallows(1))
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done()  # the bug: it runs on as if nothing happened
    assert await stop(task, again_s=0.01) and task.cancelled()


async def test_a_task_that_swallows_cancellations_is_stopped_anyway() -> None:
    tasks = [asyncio.create_task(swallows(n)) for n in (0, 1, 3)]
    await asyncio.sleep(0)
    assert await stop_all(tasks, again_s=0.01) == []
    assert all(t.cancelled() for t in tasks)


async def test_a_task_that_will_not_stop_is_left_after_the_limit() -> None:
    release = asyncio.Event()
    task = asyncio.create_task(swallows_until(release))
    await asyncio.sleep(0)
    assert not await stop(task, again_s=0.01, limit_s=0.05)
    assert await stop_all([task], again_s=0.01, limit_s=0.05) == [task]
    release.set()  # let it end: a test leaves no task behind
    task.cancel()
    await asyncio.wait({task})


async def test_the_callers_cancellation_propagates_and_the_stop_goes_on() -> None:
    inner = asyncio.create_task(swallows(3))
    await asyncio.sleep(0)
    caller = asyncio.create_task(stop(inner, again_s=0.01))
    await asyncio.sleep(0.005)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await asyncio.wait({inner}, timeout=1)
    assert inner.cancelled()  # stopped in the background all the same


async def test_a_finished_task_is_read_not_cancelled() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    task = asyncio.create_task(fails())
    await asyncio.wait({task})
    assert await stop(task)  # its exception is retrieved: no "exception was never retrieved"


async def test_a_task_is_cancelled_in_the_callers_turn_before_it_runs_a_step() -> None:
    ran: list[str] = []

    async def work(name: str) -> None:
        ran.append(name)

    tasks = [asyncio.create_task(work(n)) for n in "ab"]
    assert await stop_all(tasks) == [] and await stop(asyncio.create_task(work("c")))
    assert ran == []  # a worker stopped before it ran shows nothing (a killed run resumes from its journal)
