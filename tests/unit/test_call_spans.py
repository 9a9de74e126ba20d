"""Call spans (adapters/ops/traced.py, docs/tracing.md): each outcome of a platform call as span attributes, read
back from the OpenTelemetry SDK's in-memory exporter: done with its message id, not done with its ``retry_after_s``,
unknown; a call of an untraced run makes no span; the metrics observer still sees every call."""

from __future__ import annotations

from opentelemetry.trace import SpanKind, StatusCode

from streamrelay.adapters.ops.metered import metered
from streamrelay.adapters.ops.metrics import ServiceMetrics
from streamrelay.adapters.ops.traced import CallSpans, traced
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.delivery.calls import Done, Edit, NotDone, SendText, Unknown
from streamrelay.core.errors import RateLimitedError, RateScope, UncertainDeliveryError
from streamrelay.core.events import Target
from streamrelay.core.ports import TextFormat
from streamrelay.core.trace import RUN_TRACE, TraceContext
from tests.otel_spans import span_exporter
from tests.unit.fakes import FakeAdapter

CHAT = Target(chat_id=4242)
PARENT = TraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "vendor=7")


async def test_each_outcome_is_a_span_child_of_the_runs_context_with_no_text() -> None:
    exporter = span_exporter()
    fake = FakeAdapter(MonotonicClock())
    fake.fail("edit_text", 1, RateLimitedError("429", retry_after_s=3.0, scope=RateScope.BOT))
    fake.fail("edit_text", 2, UncertainDeliveryError("timed out"))
    adapter = traced(metered(fake, ServiceMetrics(), "tg"), "tg")
    assert isinstance(adapter.observer, CallSpans)
    token = RUN_TRACE.set(PARENT)
    try:
        sent = await adapter.perform(SendText(CHAT, "Secret answer text", TextFormat.PLAIN))
        assert isinstance(sent, Done) and isinstance(sent.value, str)
        limited = await adapter.perform(Edit(CHAT, sent.value, "Secret answer text, longer", TextFormat.PLAIN))
        unknown = await adapter.perform(Edit(CHAT, sent.value, "Secret answer text, longer", TextFormat.PLAIN))
        assert isinstance(limited, NotDone) and isinstance(unknown, Unknown)
    finally:
        RUN_TRACE.reset(token)
    await adapter.perform(SendText(CHAT, "Untraced", TextFormat.PLAIN))  # no run context: no span
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["fake send", "fake edit", "fake edit"]
    done, not_done, unsure = (dict(s.attributes or {}) for s in spans)
    assert done["streamrelay.call.outcome"] == "done" and done["messaging.message.id"] == sent.value
    assert not_done["streamrelay.call.outcome"] == "not_done" and not_done["streamrelay.retry_after_s"] == 3.0
    assert not_done["error.type"] == "RateLimitedError" and not_done["messaging.message.id"] == sent.value
    assert unsure["streamrelay.call.outcome"] == "unknown" and unsure["error.type"] == "UncertainDeliveryError"
    for span in spans:
        assert span.kind is SpanKind.CLIENT
        assert span.context is not None and f"{span.context.trace_id:032x}" == PARENT.traceparent.split("-")[1]
        assert span.parent is not None and f"{span.parent.span_id:016x}" == PARENT.traceparent.split("-")[2]
        assert span.context.trace_state.get("vendor") == "7"
        assert all("Secret" not in str(v) for v in (span.attributes or {}).values())
    assert [s.status.status_code for s in spans] == [StatusCode.UNSET, StatusCode.ERROR, StatusCode.ERROR]
    assert len(fake.calls) == 4  # every call made, the untraced one too
