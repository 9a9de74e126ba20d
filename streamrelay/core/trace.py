"""A run's W3C trace context, carried from its ``run.start`` to every platform call its delivery makes.

An agent names the trace it works in with a W3C ``traceparent`` (and optionally ``tracestate``): on the ingest
request as HTTP headers, or as fields of ``run.start`` (docs/tracing.md). The context is part of the journaled
``run.start``, so a run resumed after a restart (or by another replica) carries the same context. Core keeps it as
two strings and never imports OpenTelemetry: the relay sets :data:`RUN_TRACE` in the context its run's tasks are
made in (the worker, the delivery loop, child threads' loops inherit it), and the call observer that makes spans
(:mod:`adapters.ops.traced`) reads it there.

Format (https://www.w3.org/TR/trace-context/#traceparent-header): ``version-trace_id-parent_id-trace_flags``, four
lowercase hex fields of 2, 32, 16 and 2 digits (``00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01``); an
all-zero trace id or parent id is invalid.
"""

from __future__ import annotations

import contextvars
import re
from dataclasses import dataclass

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
