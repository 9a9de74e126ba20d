"""The heap trim after runs end (adapters/ops/heap.py): called only when runs ended since the last trim, at most once
per interval however many ended, each end still counted by the metrics; off with ``heap_trim_s = 0``."""

from __future__ import annotations

import asyncio
import sys

import pytest

from streamrelay.adapters.ops.heap import HeapTrim, glibc_trim
from streamrelay.adapters.ops.metrics import ServiceMetrics
from streamrelay.app.serving import heap_trim
from streamrelay.config.settings import ServiceSettings
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import DeliveryReport, ReportStatus
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import FakeAdapter


class CountedTrim:
    """A trim that counts its calls (the real one gives memory back to the OS, which a test cannot see)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return 1


def ended(metrics: ServiceMetrics, channel: str = "tg") -> float:
    found = metrics.registry.get_sample_value(
        "streamrelay_runs_ended_total", {"channel": channel, "status": "delivered", "end": "ok"}
    )
    return 0.0 if found is None else found


def test_a_trim_follows_ended_runs_once_and_never_an_idle_interval() -> None:
    metrics, trim = ServiceMetrics(), CountedTrim()
    heap = HeapTrim(metrics, interval_s=5, trim=trim)
    assert not heap.step() and trim.calls == 0  # nothing ended: nothing to give back
    report = DeliveryReport(run="r1", channel="tg", done=True, status=ReportStatus.DELIVERED, end_status="ok")
    for _ in range(3):
        heap.run_ended(report, 1.0)
    assert ended(metrics) == 3  # every end still reaches the metrics
    assert heap.step() and trim.calls == 1  # three ends, one trim
    assert not heap.step() and trim.calls == 1  # none since: the next interval does nothing
    heap.run_ended(report, 1.0)
    assert heap.step() and trim.calls == 2 and heap.trims == 2


def test_a_failing_trim_is_logged_and_the_next_one_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> int:
        raise OSError("no")

    heap = HeapTrim(None, interval_s=1, trim=broken)
    report = DeliveryReport(run="r1", channel="tg", done=True, status=ReportStatus.DELIVERED)
    heap.run_ended(report, 0.0)
    assert heap.step()
    assert "heap trim failed" in caplog.text
    heap.run_ended(report, 0.0)
    assert heap.step() and heap.trims == 2


async def test_the_relays_ended_runs_are_trimmed_after_by_the_keeping_task() -> None:
    metrics, trim = ServiceMetrics(), CountedTrim()
    heap = HeapTrim(metrics, interval_s=0.01, trim=trim)
    runtime = ChannelRuntime(ChannelPolicy(name="tg", throttle_s=0), FakeAdapter(MonotonicClock()))
    relay = Relay({"tg": runtime}, MemoryLedger(), MonotonicClock(), observer=heap)
    keeping = asyncio.create_task(heap.keep())
    try:
        for _ in range(50):  # idle intervals pass: no run ended, no trim
            await asyncio.sleep(0.01)
        assert trim.calls == 0
        for run in ("run-1", "run-2"):
            await relay.submit_line({"kind": "run.start", "channel": "tg", "target": {"chat_id": 7}}, run)
            await relay.submit_line({"kind": "text", "text": "Hello"}, run)
            await relay.submit_line({"kind": "end"}, run)
            report = await relay.wait_done(run, 10)
            assert report is not None and report.status == "delivered"
        for _ in range(500):  # the runs' ends were told: the next interval trims
            if trim.calls and not heap.ended:
                break
            await asyncio.sleep(0.01)
        assert trim.calls >= 1 and heap.ended == 0
        assert ended(metrics) == 2
    finally:
        keeping.cancel()
        await relay.close()


def test_serve_builds_no_trim_when_the_setting_is_zero() -> None:
    metrics = ServiceMetrics()
    assert heap_trim(metrics, 0) is None
    assert ServiceSettings().heap_trim_s == 5.0
    assert ServiceSettings.model_validate({"heap_trim_s": 0}).heap_trim_s == 0
    built = heap_trim(metrics, ServiceSettings().heap_trim_s)
    if glibc_trim() is None:  # not glibc: nothing to call
        assert built is None
    else:
        assert built is not None and built.then is metrics and built.interval_s == 5.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_glibc_trim_gives_back_what_a_freed_block_left() -> None:
    trim = glibc_trim()
    if trim is None:
        pytest.skip("the C library is not glibc (musl)")
    assert trim() in (0, 1)


async def test_keep_returns_at_once_without_a_trim() -> None:
    heap = HeapTrim(None, interval_s=1, trim=None)
    heap._trim = None  # as on musl or macOS
    assert not heap.available
    await asyncio.wait_for(heap.keep(), 5)


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        HeapTrim(None, interval_s=0)
