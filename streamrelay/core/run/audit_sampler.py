"""The sampled background audit: a share of delivered runs read back from the platform a while after they ended.

``streamrelay audit RUN`` (:mod:`core.run.audit`) answers when an operator asks; this asks by itself. Configured by
``[service] audit_sample`` (the share of ended runs audited, 0 to 1; 0: none) and ``audit_after_s`` (how long after
its end a run is audited: long enough for a person or a moderator to have acted, short enough to be remembered).

:class:`AuditSampler` watches every ended run (a :class:`core.run.ended.RunEndObserver`, in front of the relay's
observer): a run whose report is ``delivered`` or ``partial`` (something was shown) is drawn with probability
``sample`` and queued with its due time; :meth:`AuditSampler.keep` (a task of ``serve``) audits each when due, one at a
time, through the relay's :meth:`~core.run.relay.Relay.audit`. Each result is kept (the last ``keep`` runs': the run's
report shows it as ``audit``), and a run whose messages drifted (``changed``: edited by someone else or moderated;
``gone``: deleted, or no longer found where it was) gets one warning log line and
is passed to ``on_drift`` (the service's metrics count it by platform and kind). A platform that cannot be read back
(Telegram, WhatsApp, Teams without Graph) is not audited: its runs are never queued. At most ``max_queued`` runs wait
(past it the oldest is dropped, logged): the queue costs one tuple per sampled run.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable

from streamrelay.core.clock import Clock
from streamrelay.core.records.report import DeliveryReport, ReportStatus
from streamrelay.core.run.audit import AuditError, AuditReport, Verdict
from streamrelay.core.run.ended import RunEndObserver

_log = logging.getLogger("streamrelay.audit")

AUDITED = frozenset({ReportStatus.DELIVERED, ReportStatus.PARTIAL})
"""The reports whose runs may be sampled: something was shown."""


class AuditSampler:
    """Samples ended runs and audits them later (module docstring).

    Args:
        audit: audits one run by its key (the relay's :meth:`~core.run.relay.Relay.audit`).
        readable: whether channel ``name``'s messages can be read back (None: every channel is tried).
        sample: the share of runs audited, 0 to 1.
        after_s: seconds after a run's end before it is audited.
        clock: the relay's clock (due times and waits).
        then: the observer every ended run is passed on to first (the service's metrics), or None.
        on_drift: told of each audit with drift (the metrics' counter), or None.
        keep: how many runs' last audits stay for their reports.
        max_queued: how many sampled runs may wait for their audit.
        draw: a number in [0, 1) per ended run (tests give a fixed one).
    """

    def __init__(
        self,
        audit: Callable[[str], Awaitable[AuditReport]],
        *,
        sample: float,
        after_s: float,
        clock: Clock,
        readable: Callable[[str], bool] | None = None,
        then: RunEndObserver | None = None,
        on_drift: Callable[[AuditReport], None] | None = None,
        keep: int = 1000,
        max_queued: int = 10_000,
        draw: Callable[[], float] = random.random,
    ) -> None:
        if not 0.0 <= sample <= 1.0:
            raise ValueError(f"audit_sample must be between 0 and 1, not {sample!r}")
        self._audit = audit
        self.sample = sample
        self.after_s = after_s
        self._clock = clock
        self._readable = readable
        self.then = then
        self._on_drift = on_drift
        self._keep = keep
        self._max_queued = max_queued
        self._draw = draw
        self._due: deque[tuple[float, str]] = deque()
        self._results: OrderedDict[str, AuditReport] = OrderedDict()
        self._wake = asyncio.Event()
        self.audited = 0
        """Audits made (tests wait for it to grow)."""
        self._changed = asyncio.Condition()

    def __repr__(self) -> str:
        return f"AuditSampler(sample={self.sample}, after_s={self.after_s}, queued={len(self._due)})"

    def run_ended(self, report: DeliveryReport, duration_s: float) -> None:
        """Pass the end on, then queue the run for an audit when it is drawn (module docstring)."""
        if self.then is not None:
            self.then.run_ended(report, duration_s)
        if report.status not in AUDITED or self.sample <= 0.0 or self._draw() >= self.sample:
            return
        if self._readable is not None and not self._readable(report.channel):
            return
        if len(self._due) >= self._max_queued:
            dropped = self._due.popleft()[1]
            _log.warning("audit: %d runs wait for their audit: run %s is not audited", self._max_queued, dropped)
        self._due.append((self._clock.now() + self.after_s, report.run))
        self._wake.set()

    def result(self, run: str) -> AuditReport | None:
        """The last background audit of ``run`` (None: not audited, or no longer kept)."""
        return self._results.get(run)

    def forget(self, run: str) -> None:
        """Drop what is kept of ``run`` (its erasure)."""
        self._results.pop(run, None)
        self._due = deque(item for item in self._due if item[1] != run)

    async def wait_audited(self, count: int) -> None:
        """Return once at least ``count`` audits were made (for tests and drains)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.audited >= count)

    async def keep(self) -> None:
        """Audit each queued run when it is due, one at a time; runs until cancelled. An audit that fails (the
        ledger, the platform) is logged and not tried again."""
        while True:
            if not self._due:
                self._wake.clear()
                await self._wake.wait()
                continue
            due_at, run = self._due[0]
            wait = due_at - self._clock.now()
            if wait > 0:
                await self._clock.sleep(wait)
                continue
            self._due.popleft()
            await self.audit_one(run)

    async def audit_one(self, run: str) -> AuditReport | None:
        """Audit ``run`` now (module docstring); its report, or None when it could not be audited."""
        try:
            report = await self._audit(run)
        except AuditError as exc:
            _log.info("audit: run %s cannot be audited: %s", run, exc)
            report = None
        except Exception:
            _log.exception("audit: run %s could not be audited", run)
            report = None
        if report is not None:
            self._keep_result(run, report)
            drift = [row for row in report.messages if row.verdict in (Verdict.CHANGED, Verdict.GONE)]
            if drift:
                kinds = sorted({str(row.verdict) for row in drift})
                _log.warning(
                    "audit: run %s on %s no longer shows what was delivered: %d message(s) %s",
                    run,
                    report.channel,
                    len(drift),
                    ", ".join(kinds),
                    extra={"run": run, "channel": report.channel, "platform": report.platform, "drift": len(drift)},
                )
                if self._on_drift is not None:
                    try:
                        self._on_drift(report)
                    except Exception:
                        _log.exception("audit: run %s: its drift could not be counted", run)
        async with self._changed:
            self.audited += 1
            self._changed.notify_all()
        return report

    def _keep_result(self, run: str, report: AuditReport) -> None:
        self._results[run] = report
        self._results.move_to_end(run)
        while len(self._results) > self._keep:
            self._results.popitem(last=False)
