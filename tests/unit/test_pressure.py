"""The loop-lag probe and ingest's push-back levels (issue 13), with lags fed in: no real sleeps."""

from __future__ import annotations

import asyncio
import json
import random

from streamrelay.adapters.ingest_http.push_back import cut_at
from streamrelay.core.ingest.pressure import LoopLag, Pressure, PushBack, stalled_s


def test_one_pause_moves_the_lag_a_little_a_saturated_loop_raises_it() -> None:
    lag = LoopLag()
    lag.observe(0.3, 0.025)  # one garbage-collection pause
    assert 0.05 < lag.lag_s < 0.1 and lag.stalled_s == 0.3
    for _ in range(40):  # one second of wake-ups on time
        lag.observe(0.0, 0.025)
    assert 0.0 < lag.lag_s < 0.04
    assert lag.stalled_s == 0.3
    assert lag.reset_worst() == 0.3 and lag.worst_s == 0.0
    for _ in range(20):  # every wake-up 150 ms late, for about three seconds
        lag.observe(0.15, 0.025)
    assert 0.1 < lag.lag_s <= 0.15


def test_push_back_levels_follow_the_lag() -> None:
    lag = LoopLag()
    pressure = Pressure(lag, max_lag_s=0.1)
    assert pressure.push_back() is PushBack.NONE
    lag.lag_s = 0.15
    assert pressure.push_back() is PushBack.STARTS
    lag.lag_s = 0.25
    assert pressure.push_back() is PushBack.LINES
    assert Pressure(lag, max_lag_s=0).push_back() is PushBack.NONE  # 0: off


def test_retry_after_is_spread_so_agents_pushed_back_together_come_back_apart() -> None:
    pressure = Pressure(LoopLag(), retry_after_s=1.0, rng=random.Random(7))
    lines = [pressure.retry_after(PushBack.LINES) for _ in range(200)]
    starts = [pressure.retry_after(PushBack.STARTS) for _ in range(200)]
    assert min(lines) >= 1.0 and max(lines) <= 4.0 and max(lines) - min(lines) > 2.5
    assert min(starts) >= 1.0 and max(starts) <= 2.5


def line(obj: dict[str, object]) -> bytes:
    return json.dumps(obj).encode()


def test_a_batch_is_cut_at_its_first_pushed_back_line() -> None:
    start = line({"kind": "run.start", "run": "r", "channel": "c", "target": {"chat_id": 1}})
    text = line({"kind": "text", "text": '"run.start" and "end" as text'})
    end = line({"kind": "end", "status": "ok"})
    assert cut_at([text, start, text], PushBack.NONE) is None
    assert cut_at([text, start, text], PushBack.STARTS) == 1
    assert cut_at([text, end], PushBack.STARTS) is None
    assert cut_at([end, b"", end, text, end], PushBack.LINES) == 3
    assert cut_at([text, end], PushBack.LINES) == 0


async def test_stalled_seconds_come_from_the_running_loops_probe() -> None:
    assert stalled_s() == 0.0  # no probe on this loop
    lag = LoopLag(interval_s=0.001)
    lag.start()
    try:
        await asyncio.sleep(0.01)
        lag.observe(0.5, 0.001)
        assert stalled_s() >= 0.5
    finally:
        await lag.stop()
    assert stalled_s() == 0.0


def test_a_backlog_of_events_waiting_for_the_workers_pushes_back_too() -> None:
    waiting = [0]
    pressure = Pressure(LoopLag(), max_lag_s=0.1, backlog=lambda: waiting[0], max_backlog=100)
    assert pressure.push_back() is PushBack.NONE
    waiting[0] = 60
    pressure._backlog_seen = (float("-inf"), 0)  # read again now (it is read at most every 25 ms)
    assert pressure.push_back() is PushBack.STARTS
    waiting[0] = 101
    pressure._backlog_seen = (float("-inf"), 0)
    assert pressure.push_back() is PushBack.LINES
    assert Pressure(LoopLag(), backlog=lambda: 10**6, max_backlog=0).push_back() is PushBack.NONE  # 0: not watched
