"""A run's W3C trace context, carried from its ``run.start`` to every platform call its delivery makes.

An agent names the trace it works in with a W3C ``traceparent`` (and optionally ``tracestate``): on the ingest
request as HTTP headers, or as fields of ``run.start`` (docs/tracing.md). The context is part of the journaled
``run.start``, so a run resumed after a restart (or by another replica) carries the same context. Core keeps it as
two strings and never imports OpenTelemetry: the relay sets :data:`RUN_TRACE` in the context its run's tasks are
made in (the worker, the delivery loop, child threads' loops inherit it), and the call observer that makes spans
(:mod:`adapters.ops.traced`) reads it there.

Spans nest run > part > call (docs/tracing.md). A relay given a :class:`RunTracer` starts a run's span when it opens a
traced run and sets :data:`RUN_SPAN` beside :data:`RUN_TRACE`; the executor sets :data:`CALL_PART` around each message
part's call (a context variable set and reset, only in a traced run), so the call observer finds the part's span under
the run's. An untraced run costs one context variable read a call.

Format (https://www.w3.org/TR/trace-context/#traceparent-header): ``version-trace_id-parent_id-trace_flags``, four
lowercase hex fields of 2, 32, 16 and 2 digits (``00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01``); an
all-zero trace id or parent id is invalid.
"""

from __future__ import annotations

import contextvars
import re
from dataclasses import dataclass
from typing import Protocol

from streamrelay.core.records.report import DeliveryReport

TRACEPARENT_PATTERN = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"
"""A W3C ``traceparent`` value (https://www.w3.org/TR/trace-context/#traceparent-header)."""

TRACESTATE_MAX_CHARS = 512
"""The longest ``tracestate`` kept: the spec lets a vendor truncate past 512 characters
(https://www.w3.org/TR/trace-context/#tracestate-limits)."""

_TRACEPARENT = re.compile(TRACEPARENT_PATTERN)
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


def traceparent_error(value: str) -> str | None:
    """Why ``value`` is not a usable W3C ``traceparent`` (None: it is).

    Version ``ff`` and all-zero trace or parent ids are invalid (https://www.w3.org/TR/trace-context/#version).
    """
    if not _TRACEPARENT.match(value):
        return (
            "traceparent must be a W3C trace context: version-trace_id-parent_id-flags, lowercase hex of 2, 32, 16 "
            "and 2 digits (e.g. 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01)"
        )
    version, trace_id, parent_id, _ = value.split("-")
    if version == "ff" or trace_id == _ZERO_TRACE or parent_id == _ZERO_SPAN:
        return "traceparent has an invalid version (ff) or an all-zero trace id or parent id"
    return None


@dataclass(frozen=True, slots=True)
class TraceContext:
    """A run's trace context as the agent sent it.

    Attributes:
        traceparent: the W3C ``traceparent`` value (checked by :func:`traceparent_error`).
        tracestate: the W3C ``tracestate`` value, or None.
    """

    traceparent: str
    tracestate: str | None = None

    @property
    def trace_id(self) -> str:
        """The trace id: 32 lowercase hex digits (the ``traceparent``'s second field)."""
        return self.traceparent[3:35]

    def carrier(self) -> dict[str, str]:
        """The context as HTTP-style headers (a propagator's carrier)."""
        headers = {"traceparent": self.traceparent}
        if self.tracestate:
            headers["tracestate"] = self.tracestate
        return headers


RUN_TRACE: contextvars.ContextVar[TraceContext | None] = contextvars.ContextVar("streamrelay_run_trace", default=None)
"""The trace context of the run whose tasks are running (None: the run named none, or no run)."""


class RunSpan(Protocol):
    """One traced run's span as the tracer keeps it (:class:`adapters.ops.traced.RunSpans`)."""

    def end(self, report: DeliveryReport | None) -> None:
        """End the run's span (and its parts' spans) with the run's final ``report``; None: the run stopped here
        unfinished (this process lost it, or its store), to resume elsewhere or after a restart."""


class RunTracer(Protocol):
    """Starts a span per traced run (:class:`adapters.ops.traced.RunSpans`); a :class:`core.run.relay.Relay` option."""

    def start_run(self, run: str, context: TraceContext) -> RunSpan:
        """A span for run ``run`` (the core's run key) as a child of the agent's ``context``."""
        ...


RUN_SPAN: contextvars.ContextVar[RunSpan | None] = contextvars.ContextVar("streamrelay_run_span", default=None)
"""The span of the run whose tasks are running (None: untraced, or a relay without a :class:`RunTracer`)."""

CALL_PART: contextvars.ContextVar[tuple[str, int, str] | None] = contextvars.ContextVar(
    "streamrelay_call_part", default=None
)
"""The message part whose call is being made, in a traced run: ``(ledger run, part index, role)`` (the executor's)."""
