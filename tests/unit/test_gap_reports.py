"""A run that lost input (a ``seq`` gap) is ``partial`` wherever its end is shown: the report, and the live and
ops pages' ``end`` event."""

from __future__ import annotations

from streamrelay.core.run.live import EndLive
from tests.unit.fakes import MemoryChat
from tests.unit.test_relay import START, _relay


async def test_the_live_end_event_says_what_the_report_says_of_a_run_with_a_gap() -> None:
    """The live page and the ops page show the ``end`` event's ``delivery``: ``partial`` as the report, not the
    channel's own ``delivered`` that knows nothing of the lost line."""
    chat = MemoryChat()
    relay = _relay(chat, gap_timeout_s=0.1)
    await relay.submit_line({**START, "seq": 0}, "r")
    await relay.submit_line({"kind": "text", "seq": 1, "text": "A"}, "r")
    await relay.submit_line({"kind": "end", "seq": 3}, "r")
    report = await relay.wait_done("r", 5)
    monitor = relay.monitor("r")
    await relay.close()
    assert report is not None and report.status == "partial" and monitor is not None
    ends = [event for event in await monitor.wait(0) if isinstance(event, EndLive)]
    assert [event.delivery for event in ends] == ["partial"]
