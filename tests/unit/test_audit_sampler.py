"""The sampled background audit's choices (core/run/audit_sampler.py): which ended runs are drawn (a share of those
that showed something, on channels that can be read back), the queue's bound, each due run audited once in order,
what is kept for the report and forgotten with an erasure; the end is passed on to the observer behind it."""

from __future__ import annotations

import asyncio

from streamrelay.core.clock import MonotonicClock
from streamrelay.core.records.report import DeliveryReport, ReportStatus
from streamrelay.core.run.audit import AuditReport, AuditRow, Verdict
from streamrelay.core.run.audit_sampler import AuditSampler


class _Ended:
    def __init__(self) -> None:
        self.runs: list[str] = []

    def run_ended(self, report: DeliveryReport, duration_s: float) -> None:
        self.runs.append(report.run)


def _report(run: str, status: ReportStatus = ReportStatus.DELIVERED, channel: str = "slack") -> DeliveryReport:
    return DeliveryReport(run=run, channel=channel, done=True, status=status)


async def test_a_share_of_shown_runs_on_readable_channels_is_audited_once_each_in_order() -> None:
    audited: list[str] = []
    drifted: list[str] = []

    async def audit(run: str) -> AuditReport:
        audited.append(run)
        verdict = Verdict.GONE if run == "r2" else Verdict.AS_DELIVERED
        return AuditReport(run, "slack", "slack", True, messages=[AuditRow(0, "answer", "1.2", verdict)])

    draws = iter([0.1, 0.9, 0.2, 0.0, 0.0, 0.3])
    behind = _Ended()
    sampler = AuditSampler(
        audit,
        sample=0.5,
        after_s=0.0,
        clock=MonotonicClock(),
        readable=lambda channel: channel != "telegram",
        then=behind,
        on_drift=lambda report: drifted.append(report.run),
        max_queued=3,
        draw=lambda: next(draws),
    )
    sampler.run_ended(_report("r1"), 1.0)  # drawn (0.1 < 0.5)
    sampler.run_ended(_report("skip"), 1.0)  # not drawn (0.9)
    sampler.run_ended(_report("r2", ReportStatus.PARTIAL), 1.0)  # drawn: something showed
    sampler.run_ended(_report("failed", ReportStatus.FAILED), 1.0)  # nothing showed: never audited
    sampler.run_ended(_report("tg", channel="telegram"), 1.0)  # drawn, but Telegram cannot be read back
    sampler.run_ended(_report("r3"), 1.0)  # drawn
    sampler.run_ended(_report("r4"), 1.0)  # drawn: the queue holds 3, r1 is dropped
    assert behind.runs == ["r1", "skip", "r2", "failed", "tg", "r3", "r4"]  # every end passed on

    task = asyncio.create_task(sampler.keep())
    try:
        async with asyncio.timeout(5):
            await sampler.wait_audited(3)
    finally:
        task.cancel()
    assert audited == ["r2", "r3", "r4"] and drifted == ["r2"]
    kept = sampler.result("r2")
    assert kept is not None and [row.verdict for row in kept.drift] == [Verdict.GONE]
    sampler.forget("r2")
    assert sampler.result("r2") is None and sampler.result("r3") is not None


async def test_an_audit_that_fails_is_logged_and_counted_not_kept() -> None:
    async def audit(run: str) -> AuditReport:
        raise RuntimeError("the ledger is gone")

    sampler = AuditSampler(audit, sample=1.0, after_s=0.0, clock=MonotonicClock())
    assert await sampler.audit_one("x") is None
    assert sampler.audited == 1 and sampler.result("x") is None
