"""The in-memory span exporter the tracing tests read (OpenTelemetry SDK), installed once per process.

The global tracer provider can be set once per process (the API refuses a second), so every test that reads spans
shares one provider and one :class:`InMemorySpanExporter`, and clears it first.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_EXPORTER = InMemorySpanExporter()
_INSTALLED = False


def span_exporter() -> InMemorySpanExporter:
    """The process's in-memory exporter, emptied; the SDK's provider is installed globally on the first call."""
    global _INSTALLED
    if not _INSTALLED:
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        _INSTALLED = True
    _EXPORTER.clear()
    return _EXPORTER
