"""Run, part and call spans: a traced run's delivery as OpenTelemetry spans in the agent's trace.

The run's W3C trace context (:mod:`core.trace`, from its ``run.start`` or the ingest request's headers) is the
parent of one span per run (:class:`RunSpans`, the relay's :class:`core.trace.RunTracer`), which is the parent of one
span per message part (made at the part's first call), which is the parent of one span per platform call
(:class:`CallSpans`, an observer of the adapter's one entrance :meth:`core.ports.ChannelAdapter.perform`, set beside
the call metrics by :func:`traced`). A call that is no message part's (typing, a thread, a Stop control) is a child
of the run's span; with a relay given no tracer, every call is a child of the agent's context. A call made outside a
traced run (no context named) gets no span at all: nothing is recorded or exported for it.

Run span: ``streamrelay run``, kind INTERNAL, from the run's opening here to its end (a run resumed after a restart
gets a new one in the same trace), attributes ``streamrelay.run``, ``messaging.operation.type`` ``send``,
``messaging.operation.name`` ``deliver``, and at its end ``streamrelay.run.status`` (the report's: ``delivered``,
``partial``, ``failed``, ``empty``; ``interrupted`` when this process stopped it unfinished),
``streamrelay.run.end_status`` (the agent's ``end``), ``streamrelay.channel``, ``messaging.batch.message_count`` (the
parts counted), ``streamrelay.parts.confirmed`` / ``.uncertain`` / ``.failed`` / ``.unsent``; status ERROR with
``error.type`` ``partial`` or ``failed`` when the person does not see the whole answer.

Part span: ``streamrelay part {role}``, kind INTERNAL, from its first call's start to its last call's end,
attributes ``streamrelay.part`` (its index in the ledger), ``streamrelay.part.role``, ``streamrelay.place`` (the
ledger run: a fan-out run's places), ``streamrelay.part.calls`` and ``streamrelay.call.outcome`` (its last call's).

Span: name ``"{platform} {method}"`` (``telegram send``, ``slack edit``), kind CLIENT (one request and its answer),
attributes in the OpenTelemetry messaging conventions where they fit
(https://opentelemetry.io/docs/specs/semconv/messaging/messaging-spans/):

- ``messaging.system`` the platform, ``messaging.operation.name`` the call's method, ``messaging.message.id`` the
  message the call made or touched;
- ``streamrelay.run``, ``streamrelay.channel``, ``streamrelay.call.kind`` (the rate budgets' call kind),
  ``streamrelay.call.outcome`` (``done``, ``not_done`` or ``unknown``: core/delivery/calls.py),
  ``streamrelay.retry_after_s`` on a 429, ``streamrelay.settled`` for a settle, ``error.type`` when not done;
- never the text a call shows (answers are a person's data: docs/tracing.md), and never the chat id.

The spans go to the global tracer provider (``opentelemetry.trace.get_tracer_provider()``): without the SDK it is the
API's no-op provider and each call costs one context lookup (docs/tracing.md says how to export over OTLP).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from streamrelay.adapters.ops.logs import task_run
from streamrelay.core.delivery.calls import Call, CallObserver, CallResult, Done, NotDone
from streamrelay.core.errors import RateLimitedError
from streamrelay.core.ports import ChannelAdapter, Settlement
from streamrelay.core.records.report import DeliveryReport, ReportStatus
from streamrelay.core.run.ended import counted_parts
from streamrelay.core.trace import CALL_PART, RUN_SPAN, RUN_TRACE, TraceContext

_PROPAGATOR = TraceContextTextMapPropagator()
TRACER_NAME = "streamrelay"
"""The instrumentation scope of every span streamrelay makes."""


def parent_context(context: TraceContext) -> Context:
    """The OpenTelemetry context a W3C trace context names (its remote span as the parent)."""
    return _PROPAGATOR.extract(context.carrier())


@dataclass(slots=True)
class _Part:
    """A message part's open span: its context (its calls' parent), when its last call ended, how many calls."""

    span: trace.Span
    context: Context
    last_end_ns: int = 0
    calls: int = 0
    outcome: str = ""


@dataclass(slots=True)
class OpenRun:
    """One traced run's open span (a :class:`core.trace.RunSpan`): the parent of its parts' spans and its calls'."""

    span: trace.Span
    context: Context
    tracer: Tracer
    parts: dict[tuple[str, int], _Part] = field(default_factory=dict)
    """Open part spans by (ledger run, part index): at most the run's parts, ended with the run."""

    def parent(self, part: tuple[str, int, str] | None) -> tuple[Context, _Part | None]:
        """The context a call's span goes under: its part's span (made at its first call), else the run's."""
        if part is None:
            return self.context, None
        place, index, role = part
        open_part = self.parts.get((place, index))
        if open_part is None:
            span = self.tracer.start_span(
                f"streamrelay part {role}",
                context=self.context,
                kind=SpanKind.INTERNAL,
                attributes={"streamrelay.part": index, "streamrelay.part.role": role, "streamrelay.place": place},
            )
            open_part = self.parts[place, index] = _Part(span, trace.set_span_in_context(span, self.context))
        return open_part.context, open_part

    def end(self, report: DeliveryReport | None) -> None:
        """End the parts' spans (each at its last call's end), then the run's with the report's outcome."""
        for open_part in self.parts.values():
            open_part.span.set_attribute("streamrelay.part.calls", open_part.calls)
            if open_part.outcome:
                open_part.span.set_attribute("streamrelay.call.outcome", open_part.outcome)
            open_part.span.end(end_time=open_part.last_end_ns or None)
        self.parts.clear()
        span = self.span
        if report is None:
            span.set_attribute("streamrelay.run.status", "interrupted")
        else:
            span.set_attributes(
                {
                    "streamrelay.run.status": str(report.status),
                    "streamrelay.channel": report.channel,
                    "messaging.batch.message_count": counted_parts(report),
                    "streamrelay.parts.confirmed": report.confirmed,
                    "streamrelay.parts.uncertain": report.uncertain,
                    "streamrelay.parts.failed": report.failed,
                    "streamrelay.parts.unsent": report.unsent,
                }
            )
            if report.end_status is not None:
                span.set_attribute("streamrelay.run.end_status", report.end_status)
            if report.status in (ReportStatus.PARTIAL, ReportStatus.FAILED):
                span.set_attribute("error.type", str(report.status))
                span.set_status(Status(StatusCode.ERROR, f"run {report.status}"))
        span.end()


class RunSpans:
    """The relay's :class:`core.trace.RunTracer`: a span per traced run (module docstring).

    Args:
        tracer: where spans go (None: the global provider's, looked up at each run so a provider set later is used).
    """

    def __init__(self, tracer: Tracer | None = None) -> None:
        self._tracer = tracer

    def __repr__(self) -> str:
        return "RunSpans()"

    def start_run(self, run: str, context: TraceContext) -> OpenRun:
        """Start run ``run``'s span as a child of the agent's ``context``."""
        tracer = self._tracer if self._tracer is not None else trace.get_tracer(TRACER_NAME)
        span = tracer.start_span(
            "streamrelay run",
            context=parent_context(context),
            kind=SpanKind.INTERNAL,
            attributes={
                "streamrelay.run": run,
                "messaging.operation.type": "send",
                "messaging.operation.name": "deliver",
            },
        )
        return OpenRun(span, trace.set_span_in_context(span), tracer)


def _message_id(call: Call, value: object) -> str | None:
    if isinstance(value, str) and call.creates:
        return value
    touched = getattr(call, "message_id", None)
    return touched if isinstance(touched, str) else None


class CallSpans:
    """Makes a span of each call of a traced run (module docstring); a :class:`core.delivery.calls.CallObserver`.

    Args:
        channel: the configured channel's name.
        platform: the adapter's platform name.
        then: the observer the attempt is handed to inside the span (the call metrics), or None.
        tracer: where spans go (None: the global provider's, looked up at each call so a provider set later is used).
    """

    def __init__(self, channel: str, platform: str, then: CallObserver | None, tracer: Tracer | None = None) -> None:
        self.channel = channel
        self.platform = platform
        self.then = then
        self._tracer = tracer
        self._parents: dict[TraceContext, Context] = {}
        """Parsed contexts, by the run's trace context (a run makes many calls in one context)."""

    def __repr__(self) -> str:
        return f"CallSpans(channel={self.channel!r}, platform={self.platform!r})"

    def _parent(self, context: TraceContext) -> Context:
        parent = self._parents.get(context)
        if parent is None:
            if len(self._parents) >= 4096:  # bounded: one entry per traced run that called through this channel
                self._parents.clear()
            parent = self._parents[context] = parent_context(context)
        return parent

    async def __call__(self, call: Call, attempt: Awaitable[CallResult]) -> CallResult:
        """Await ``attempt`` inside a span when the current run is traced; its result passes through unchanged."""
        context = RUN_TRACE.get()
        if self.then is not None:
            attempt = self.then(call, attempt)
        if context is None:
            return await attempt
        run_span = RUN_SPAN.get()
        open_part: _Part | None = None
        if isinstance(run_span, OpenRun):
            parent, open_part = run_span.parent(CALL_PART.get())
        else:
            parent = self._parent(context)
        tracer = self._tracer if self._tracer is not None else trace.get_tracer(TRACER_NAME)
        attributes: dict[str, Any] = {
            "messaging.system": self.platform,
            "messaging.operation.name": call.method,
            "streamrelay.channel": self.channel,
            "streamrelay.call.kind": str(call.kind),
        }
        if (run := task_run()) is not None:
            attributes["streamrelay.run"] = run
        with tracer.start_as_current_span(
            f"{self.platform} {call.method}",
            context=parent,
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                result = await attempt
            except BaseException as exc:  # cancelled: the span says so, the cancellation goes on
                span.set_attribute("streamrelay.call.outcome", "cancelled")
                span.set_attribute("error.type", type(exc).__name__)
                raise
            if span.is_recording():
                _describe(span, call, result)
            if open_part is not None:
                open_part.calls += 1
                open_part.last_end_ns = time.time_ns()
                open_part.outcome = _outcome(result)
            return result


def _outcome(result: CallResult) -> str:
    return "done" if isinstance(result, Done) else "not_done" if isinstance(result, NotDone) else "unknown"


def _describe(span: trace.Span, call: Call, result: CallResult) -> None:
    """Set the outcome's attributes (never text)."""
    if isinstance(result, Done):
        span.set_attribute("streamrelay.call.outcome", "done")
        value = result.value
        if isinstance(value, Settlement):
            span.set_attribute("streamrelay.settled", str(value.outcome))
            if value.message_id is not None:
                span.set_attribute("messaging.message.id", value.message_id)
        elif (message_id := _message_id(call, value)) is not None:
            span.set_attribute("messaging.message.id", message_id)
        return
    error = result.error
    span.set_attribute("streamrelay.call.outcome", "not_done" if isinstance(result, NotDone) else "unknown")
    span.set_attribute("error.type", type(error).__name__)
    if isinstance(error, RateLimitedError):
        span.set_attribute("streamrelay.retry_after_s", float(error.retry_after_s))
    if (message_id := _message_id(call, None)) is not None:
        span.set_attribute("messaging.message.id", message_id)
    span.set_status(Status(StatusCode.ERROR, type(error).__name__))


def traced(adapter: ChannelAdapter, channel: str) -> ChannelAdapter:
    """``adapter`` with a span made of each call of a traced run: a :class:`CallSpans` watches its
    :meth:`~ChannelAdapter.perform`, in front of the observer it had (the call metrics). Returns the same adapter."""
    adapter.observer = CallSpans(channel, adapter.platform, adapter.observer)
    return adapter
