"""Call spans: every platform call a run's delivery makes, as an OpenTelemetry span in the run's trace.

The run's W3C trace context (:mod:`core.trace`, from its ``run.start`` or the ingest request's headers) is the
parent of one span per platform call (:class:`CallSpans`, an observer of the adapter's one entrance
:meth:`core.ports.ChannelAdapter.perform`, set beside the call metrics by :func:`traced`). A call made outside a
traced run (no context named) gets no span at all: nothing is recorded or exported for it.

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

from collections.abc import Awaitable
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from streamrelay.adapters.ops.logs import task_run
from streamrelay.core.delivery.calls import Call, CallObserver, CallResult, Done, NotDone
from streamrelay.core.errors import RateLimitedError
from streamrelay.core.ports import ChannelAdapter, Settlement
from streamrelay.core.trace import RUN_TRACE, TraceContext

_PROPAGATOR = TraceContextTextMapPropagator()
TRACER_NAME = "streamrelay"
"""The instrumentation scope of every span streamrelay makes."""


def parent_context(context: TraceContext) -> Context:
    """The OpenTelemetry context a W3C trace context names (its remote span as the parent)."""
    return _PROPAGATOR.extract(context.carrier())


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
            context=self._parent(context),
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
            return result


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
