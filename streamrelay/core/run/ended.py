"""How a run ended, told once: one log line and whoever observes ended runs (the service's metrics).

The word is the delivery report's status (:class:`core.records.report.ReportStatus`: ``delivered``, ``partial``,
``failed``, ``empty``), never the agent's ``end`` alone: a run the agent ended ``ok`` whose every send got "chat not
found" ended ``failed``. The agent's own end (``ok``, ``error``, ``cancelled``, ``refused``, ``cut``) is told beside it.
"""

from __future__ import annotations

import logging
from typing import Protocol

from streamrelay.core.records.report import DeliveryReport, ReportStatus

_log = logging.getLogger("streamrelay.runs")

_WORRYING = frozenset({ReportStatus.PARTIAL, ReportStatus.FAILED})
"""Statuses logged at warning: the person does not see the whole answer."""


class RunEndObserver(Protocol):
    """Told once per run that ended (finalized here), with its report (:class:`adapters.ops.ServiceMetrics`)."""

    def run_ended(self, report: DeliveryReport, duration_s: float) -> None:
        """``report``: the run's final report (gaps included); ``duration_s``: seconds from its opening in this
        process (a run resumed after a restart: from its resumption) to its end."""


def counted_parts(report: DeliveryReport) -> int:
    """The parts a report counts (confirmed, uncertain, failed and unsent; skipped ones are not)."""
    return report.confirmed + report.uncertain + report.failed + report.unsent


def log_run_end(report: DeliveryReport, duration_s: float) -> None:
    """One structured line for an ended run: ``run``, ``channel``, ``status`` (the report's), ``end_status`` (the
    agent's), ``parts`` with ``confirmed`` / ``uncertain`` / ``failed`` / ``unsent``, ``duration_s``, and the first
    errors. Info when delivered or empty; warning when partial or failed."""
    parts = counted_parts(report)
    level = logging.WARNING if report.status in _WORRYING else logging.INFO
    why = f": {report.errors[0]}" if report.errors and report.status in _WORRYING else ""
    _log.log(
        level,
        "run %s ended %s on %s: %d parts, %d confirmed, %.1f s (agent's end: %s)%s",
        report.run,
        report.status,
        report.channel,
        parts,
        report.confirmed,
        duration_s,
        report.end_status or "none",
        why,
        extra={
            "run": report.run,
            "channel": report.channel,
            "status": str(report.status),
            "end_status": report.end_status,
            "parts": parts,
            "confirmed": report.confirmed,
            "uncertain": report.uncertain,
            "failed": report.failed,
            "unsent": report.unsent,
            "duration_s": round(duration_s, 3),
            "errors": report.errors[:3],
        },
    )
