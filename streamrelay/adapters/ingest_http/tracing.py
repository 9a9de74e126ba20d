"""The ingest request's trace context: a W3C ``traceparent`` header makes the request a span and the runs it starts
traced.

A request with a valid ``traceparent`` header (and optionally ``tracestate``;
https://www.w3.org/TR/trace-context/#traceparent-header) is one SERVER span, ``streamrelay ingest``, child of the
agent's span. Each ``run.start`` of the request that names no ``traceparent`` of its own gets the ingest span's
context as its ``traceparent`` (and ``tracestate``) before it is journaled, so the run's platform calls are children
of the ingest span (:mod:`adapters.ops.traced`), across a restart too. A header that is not a valid traceparent is
ignored, as the spec asks of a receiver (https://www.w3.org/TR/trace-context/#a-traceparent-is-received): the request
is taken untraced. A request without the header costs one header lookup.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from streamrelay.core.trace import TRACESTATE_MAX_CHARS, traceparent_error

_PROPAGATOR = TraceContextTextMapPropagator()


@dataclass(slots=True)
class IngestTrace:
    """The trace context a traced request's new runs take: ``traceparent`` and maybe ``tracestate`` (``fields``),
    and the request's span (to note its outcome)."""

    fields: dict[str, str]
    span: trace.Span = field(repr=False)

    def start_fields(self, start: Mapping[str, object]) -> dict[str, str]:
        """The fields to add to the ``run.start`` object ``start`` (none when it names its own trace context)."""
        return {} if "traceparent" in start else self.fields


@contextmanager
def ingest_span(headers: Mapping[str, str], run: str | None) -> Iterator[IngestTrace | None]:
    """The request's span, open while the request is taken, when ``headers`` carry a valid ``traceparent``; else
    None. ``run`` is the URL's run id (an attribute), or None."""
    traceparent = headers.get("traceparent")
    if traceparent is None or traceparent_error(traceparent) is not None:
        yield None
        return
    carrier = {"traceparent": traceparent}
    tracestate = headers.get("tracestate")
    if tracestate:
        carrier["tracestate"] = tracestate[:TRACESTATE_MAX_CHARS]
    parent = _PROPAGATOR.extract(carrier)
    attributes = {"streamrelay.run": run} if run is not None else {}
    tracer = trace.get_tracer("streamrelay")
    with tracer.start_as_current_span(
        "streamrelay ingest", context=parent, kind=SpanKind.SERVER, attributes=attributes
    ) as span:
        fields: dict[str, str] = {}
        _PROPAGATOR.inject(fields, context=trace.set_span_in_context(span))
        yield IngestTrace(fields, span)
