"""The service's Prometheus metrics (prometheus-client), in a registry of its own per service.

Names follow https://prometheus.io/docs/practices/naming/: the ``streamrelay_`` prefix, counters end in ``_total``,
durations are histograms in ``_seconds``. Labels are bounded sets only: a configured channel's name, a platform, a
port method, an outcome, a reason. **Never a run id, a chat id or a message id**: each would make a series per
conversation (those belong in the logs).

=============================================  ==========================================  =====================
metric                                         labels                                      what
=============================================  ==========================================  =====================
``streamrelay_platform_calls_total``           channel, platform, method, outcome          every adapter call
``streamrelay_platform_call_seconds``          channel, platform, method                   its duration
``streamrelay_rate_limited_total``             channel, platform, method, scope            429 answers
``streamrelay_settlements_total``              channel, platform, outcome                  unknown creates asked
``streamrelay_delivery_outcomes_total``        channel, op, outcome                        the core's verdicts
``streamrelay_retries_total``                  channel, op, reason                         calls to be made again
``streamrelay_uncertain_parts_total``          channel                                     parts left uncertain
``streamrelay_runs_started_total``             channel                                     runs opened
``streamrelay_runs_ended_total``               channel, status, end                        runs ended
``streamrelay_run_seconds``                    channel, status                             a run's duration
``streamrelay_event_to_call_seconds``          channel, platform                           accepted → next call
``streamrelay_journal_append_seconds``                                                     one group commit wait
``streamrelay_journal_lines_total``                                                        lines journaled
``streamrelay_journal_append_failures_total``                                              appends that failed
``streamrelay_ingest_lines_total``             result                                      events in/dropped/bad
``streamrelay_ingest_requests_total``          status                                      ingest answers
``streamrelay_connections_closed_total``       listener, reason                            refused or cut
``streamrelay_connections_open``               listener                                    open now (gauge)
``streamrelay_active_runs``                                                                runs held (gauge)
``streamrelay_ready``                                                                      1 when ready (gauge)
``streamrelay_build_info``                     version                                     always 1
``process_*``, ``python_gc_*``                                                             prometheus-client's
=============================================  ==========================================  =====================

``status`` of an ended run is its delivery report's (:class:`core.records.report.ReportStatus`): ``delivered``,
``partial``, ``failed``, ``empty``; ``end`` is how its agent ended it (``ok``, ``error``, ``cancelled``, ``refused``,
``cut``; ``none`` when no end came). A run the agent ended ``ok`` whose sends all got "chat not found" is
``status="failed", end="ok"``.

``process_*`` (CPU seconds, resident and virtual memory, open file descriptors, start time; Linux only) and
``python_gc_*`` (collections, collected and uncollectable objects per generation) are prometheus-client's own
collectors, registered in the service's registry (not ``python_info``: its version numbers as labels would
read like ids).

``outcome`` of a platform call (what the platform answered, :func:`call_outcome`): ``ok``, ``not_modified``,
``rate_limited``, ``unavailable``, ``uncertain``, ``not_found``, ``forbidden``, ``rejected``, ``frozen``,
``native_refused``, ``failed`` (another delivery error), ``error`` (not a delivery error: a bug), ``cancelled``.

``reason`` of a refused or cut connection (:mod:`adapters.ingest_http.connections`): ``max_connections``,
``max_connections_per_peer`` (refused with a 503), ``header_timeout``, ``body_idle_timeout`` (cut), ``idle_evicted``
(an idle connection closed to make room for a request with a client's token).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, choose_encoder, generate_latest

from streamrelay.core.errors import (
    DeliveryError,
    ForbiddenError,
    MessageFrozenError,
    NativeUnavailableError,
    PayloadRejectedError,
    PlatformUnavailableError,
    RateLimitedError,
    TargetNotFoundError,
    UncertainDeliveryError,
)
from streamrelay.core.events import EndStatus
from streamrelay.core.records.report import DeliveryReport
from streamrelay.core.run.audit import AuditReport

CALL_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Platform call durations (a Telegram edit is ~0.1 s; a timed-out call takes ``send_timeout_ms``)."""

COMMIT_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
"""Journal group commits (an fsync: ~1 ms on an SSD, tens of ms on a network disk)."""

RUN_BUCKETS_S = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
"""Run durations: a short answer takes seconds, an agent with tools minutes."""

LAG_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Event to call: includes the preview throttle (1 s by default) and 429 pauses."""

MAX_WAITING_RUNS = 100_000
"""At most this many runs' oldest undelivered line times are kept (the oldest forgotten first)."""

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The exposition format's content type."""

_ERROR_OUTCOMES: tuple[tuple[type[DeliveryError], str], ...] = (
    (RateLimitedError, "rate_limited"),
    (PlatformUnavailableError, "unavailable"),
    (UncertainDeliveryError, "uncertain"),
    (NativeUnavailableError, "native_refused"),
    (MessageFrozenError, "frozen"),
    (PayloadRejectedError, "rejected"),
    (TargetNotFoundError, "not_found"),
    (ForbiddenError, "forbidden"),
)


_END_LABELS = frozenset(str(status) for status in EndStatus)
"""The ``end`` label's values (anything else is ``other``: a label never takes free text)."""


def call_outcome(error: BaseException | None) -> str:
    """The ``outcome`` label of a platform call that raised ``error`` (None: it succeeded: ``ok``)."""
    if error is None:
        return "ok"
    for cls, label in _ERROR_OUTCOMES:
        if isinstance(error, cls):
            return label
    return "failed" if isinstance(error, DeliveryError) else "error"


class ServiceMetrics:
    """Every metric of one service, in its own :class:`CollectorRegistry` (several services in one process, as the
    tests start them, never collide; nothing is registered in prometheus-client's global registry).

    Args:
        version: the ``version`` label of ``streamrelay_build_info``.
    """

    def __init__(self, version: str = "") -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no ``_created`` series (process-wide, idempotent)
        self.registry = CollectorRegistry()
        r = self.registry
        self.calls = Counter(
            "streamrelay_platform_calls",
            "Platform calls by outcome.",
            ["channel", "platform", "method", "outcome"],
            registry=r,
        )
        self.call_seconds = Histogram(
            "streamrelay_platform_call_seconds",
            "Duration of one platform call (one attempt), seconds.",
            ["channel", "platform", "method"],
            buckets=CALL_BUCKETS_S,
            registry=r,
        )
        self.rate_limited = Counter(
            "streamrelay_rate_limited", "429 answers.", ["channel", "platform", "method", "scope"], registry=r
        )
        self.settlements = Counter(
            "streamrelay_settlements",
            "Creates of unknown outcome asked of the platform, by what it said.",
            ["channel", "platform", "outcome"],
            registry=r,
        )
        self.outcomes = Counter(
            "streamrelay_delivery_outcomes",
            "The core's verdict on each call, as the ledger records it.",
            ["channel", "op", "outcome"],
            registry=r,
        )
        self.retries = Counter(
            "streamrelay_retries", "Calls that will be made again, by why.", ["channel", "op", "reason"], registry=r
        )
        self.uncertain_parts = Counter(
            "streamrelay_uncertain_parts", "Message parts that became uncertain.", ["channel"], registry=r
        )
        self.runs_started = Counter("streamrelay_runs_started", "Runs opened.", ["channel"], registry=r)
        self.runs_ended = Counter(
            "streamrelay_runs_ended",
            "Runs ended, by their delivery report's status and their agent's end.",
            ["channel", "status", "end"],
            registry=r,
        )
        self.run_seconds = Histogram(
            "streamrelay_run_seconds",
            "A run's duration in this process, from its opening to its end, seconds.",
            ["channel", "status"],
            buckets=RUN_BUCKETS_S,
            registry=r,
        )
        self.event_to_call = Histogram(
            "streamrelay_event_to_call_seconds",
            "From the oldest accepted line not yet acted on to the platform call that shows it, seconds.",
            ["channel", "platform"],
            buckets=LAG_BUCKETS_S,
            registry=r,
        )
        self.journal_append = Histogram(
            "streamrelay_journal_append_seconds",
            "Journal append (wait for the group commit, fsync included), seconds.",
            buckets=COMMIT_BUCKETS_S,
            registry=r,
        )
        self.audit_drift = Counter(
            "streamrelay_audit_drift",
            "Delivered messages a background audit found no longer as delivered, by kind (gone, changed).",
            ["platform", "kind"],
            registry=r,
        )
        self.journal_lines = Counter("streamrelay_journal_lines", "Lines journaled.", registry=r)
        self.journal_failures = Counter(
            "streamrelay_journal_append_failures", "Journal appends that failed.", registry=r
        )
        self.ingest_lines = Counter(
            "streamrelay_ingest_lines",
            "Ingest by result: accepted (the events accepted lines made), dropped (repeats), rejected (bad lines).",
            ["result"],
            registry=r,
        )
        self.ingest_requests = Counter(
            "streamrelay_ingest_requests", "Ingest requests by answer status.", ["status"], registry=r
        )
        self.connections_closed = Counter(
            "streamrelay_connections_closed",
            "Connections a listener refused (a cap) or cut (a read timeout), by reason.",
            ["listener", "reason"],
            registry=r,
        )
        self.connections_open = Gauge(
            "streamrelay_connections_open", "Open HTTP connections, by listener.", ["listener"], registry=r
        )
        self.active_runs = Gauge("streamrelay_active_runs", "Runs held by this process.", registry=r)
        self.receipts_pruned = Counter(
            "streamrelay_receipts_pruned",
            "Status receipts (WhatsApp's status webhooks) deleted past [service] receipts_retention_hours (SQLite; "
            "Redis expires them by itself).",
            registry=r,
        )
        self.deliveries = Gauge(
            "streamrelay_deliveries",
            "Desk entries (parts of ended runs not known delivered, and what became of them), by state.",
            ["state"],
            registry=r,
        )
        """Refreshed by the desk's keeper (:func:`app.serving.keep_desk`) with the ledger's counts."""
        self.ready = Gauge("streamrelay_ready", "1 when /readyz answers 200.", registry=r)
        Info("streamrelay_build", "The running version.", registry=r).info({"version": version})
        ProcessCollector(registry=r)
        GCCollector(registry=r)
        self._waiting: OrderedDict[str, float] = OrderedDict()

    def __repr__(self) -> str:
        return "ServiceMetrics()"

    def watch_active_runs(self, count: Callable[[], int]) -> None:
        """``streamrelay_active_runs`` is ``count()`` at every scrape (e.g. ``len(relay.active_runs())``)."""
        self.active_runs.set_function(lambda: float(count()))

    def watch_connections(self, listener: str, count: Callable[[], int]) -> None:
        """``streamrelay_connections_open{listener}`` is ``count()`` at every scrape."""
        self.connections_open.labels(listener).set_function(lambda: float(count()))

    def connection_closed(self, listener: str, reason: str) -> None:
        """A connection refused or cut (:class:`adapters.ingest_http.connections.ConnectionObserver`, structurally)."""
        self.connections_closed.labels(listener, reason).inc()

    def drift_found(self, audit: AuditReport) -> None:
        """Count an audit's drifted messages by platform and verdict (:mod:`core.run.audit_sampler`)."""
        for row in audit.drift:
            self.audit_drift.labels(audit.platform, str(row.verdict)).inc()

    def run_ended(self, report: DeliveryReport, duration_s: float) -> None:
        """A run ended (:class:`core.run.ended.RunEndObserver`): counted by its report's status and its agent's end,
        its duration observed."""
        status = str(report.status)
        end = (
            report.end_status
            if report.end_status in _END_LABELS
            else ("none" if report.end_status is None else "other")
        )
        self.runs_ended.labels(report.channel, status, end).inc()
        self.run_seconds.labels(report.channel, status).observe(max(0.0, duration_s))

    def exposition(self) -> bytes:
        """The registry in Prometheus's text format (:data:`CONTENT_TYPE`)."""
        return generate_latest(self.registry)

    def exposition_for(self, accept: str) -> tuple[bytes, str]:
        """The registry in the format a scraper's ``Accept`` header asks for, and its content type: OpenMetrics text
        for ``application/openmetrics-text`` (https://prometheus.io/docs/specs/om/open_metrics_spec/), with the
        exemplars (``streamrelay_platform_call_seconds``: the trace id and span id of a traced run's call), else
        Prometheus's text format (:data:`CONTENT_TYPE`, which has no exemplars)."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type

    def ingested(self, *, accepted: int, dropped: int, rejected: int, status: int) -> None:
        """One ingest request answered (:class:`adapters.ingest_http.IngestObserver`, structurally)."""
        self.ingest_requests.labels(str(status)).inc()
        for result, count in (("accepted", accepted), ("dropped", dropped), ("rejected", rejected)):
            if count:
                self.ingest_lines.labels(result).inc(count)

    # --- event-to-call latency --------------------------------------------------------------------------

    def lines_accepted(self, runs: set[str], at_s: float | None = None) -> None:
        """Lines of ``runs`` were journaled at ``at_s`` (monotonic seconds, default now): a run's clock starts at
        its oldest line no call has acted on yet."""
        now = time.monotonic() if at_s is None else at_s
        for run in runs:
            if run not in self._waiting:
                self._waiting[run] = now
        while len(self._waiting) > MAX_WAITING_RUNS:
            self._waiting.popitem(last=False)

    def call_made(self, run: str, channel: str, platform: str, at_s: float | None = None) -> None:
        """A call for ``run`` starts: observe how long its oldest waiting line waited (nothing when none waits)."""
        since = self._waiting.pop(run, None)
        if since is not None:
            now = time.monotonic() if at_s is None else at_s
            self.event_to_call.labels(channel, platform).observe(max(0.0, now - since))

    def run_finished(self, run: str) -> None:
        """``run`` left the journal: forget its waiting line."""
        self._waiting.pop(run, None)
