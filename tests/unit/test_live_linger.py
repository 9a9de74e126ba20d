"""The live page's stream asked with ``&corrections=1`` stays open up to CORRECTIONS_WATCH_S past the *run's* end
(docs/corrections.md), not past the moment the stream caught up with it: a stream opened an hour after the end
stayed 10 more minutes, and a page (or a script with the link) reconnecting every 10 minutes kept a connection open
for as long as the run was kept (the breaker, on a real serve: 512 such streams from one address held, ~55 KB each)."""

from __future__ import annotations

import asyncio
import time

import pytest

from streamrelay.adapters.web.routes import CORRECTIONS_WATCH_S, AfterEnd, _messages
from streamrelay.core.run.live import Live
from streamrelay.core.run.monitor import Watched


class _Ended:
    """A finished run's monitor with no event left to send, which ended ``ago_s`` seconds ago."""

    closed = True
    last_id = 0

    def __init__(self, ago_s: float) -> None:
        self._at = time.time() - ago_s

    def ended_at(self) -> float | None:
        return self._at

    async def wait(self, last_id: int) -> list[Live]:
        return []

    def sse_id(self, event: Live) -> str:
        return f"e.{event.id}"


@pytest.mark.parametrize(("ago_s", "left_s"), [(60.0, CORRECTIONS_WATCH_S - 60.0), (3_600.0, 0.0)])
async def test_a_stream_follows_corrections_until_ten_minutes_past_the_runs_end(ago_s: float, left_s: float) -> None:
    asked: list[float] = []
    loop = asyncio.get_running_loop()

    async def wait(last_id: int, deadline_s: float) -> Watched | None:
        asked.append(deadline_s - loop.time())
        return None

    monitor: Watched = _Ended(ago_s)  # type: ignore[assignment]
    sent = [m async for m in _messages(monitor, 0, AfterEnd(wait, CORRECTIONS_WATCH_S))]
    assert sent == [] and len(asked) == 1
    assert left_s - 5 <= asked[0] <= left_s + 0.5  # seconds left of the watch (a few lost to a slow machine)
