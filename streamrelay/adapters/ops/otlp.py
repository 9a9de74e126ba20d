"""Export of the service's spans over OTLP/HTTP (protobuf) while ``serve`` runs, when it is configured.

Configured by ``[service] otlp_endpoint`` (the collector's base URL, e.g. ``http://collector:4318``: the spans are
POSTed to ``{endpoint}/v1/traces``, https://opentelemetry.io/docs/specs/otlp/#otlphttp-request), else by the standard
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT`` environment variables
(https://opentelemetry.io/docs/specs/otel/protocol/exporter/). Neither: nothing is imported or installed, and the
OpenTelemetry API stays a no-op (docs/tracing.md).

When configured, :func:`start_export` puts a ``BatchSpanProcessor`` with an ``OTLPSpanExporter`` on the global
tracer provider (an SDK ``TracerProvider`` it installs, named ``service.name = streamrelay`` unless
``OTEL_SERVICE_NAME`` says otherwise; or the one already installed, e.g. by ``opentelemetry-instrument``), and
:meth:`SpanExport.shutdown` flushes what is queued and stops it at exit. Only the environment variables set and a
provider already installed: nothing is added (that provider already exports them).

Needs the ``otel`` extra (``opentelemetry-sdk`` and ``opentelemetry-exporter-otlp-proto-http``): the setting without it
is a :class:`core.errors.ConfigError` naming ``pip install 'streamrelay[otel]'``; the environment variables without it
are a warning (a variable set for a whole cluster must not stop the service).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from streamrelay.core.errors import ConfigError

_log = logging.getLogger("streamrelay.otlp")

ENV_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
"""The standard variables that name where OTLP spans go (the first one set wins, as in the SDK)."""
INSTALL_HINT = "pip install 'streamrelay[otel]'"
SERVICE_NAME = "streamrelay"


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a collector's base URL ``endpoint`` (``http://host:4318`` ->
    ``http://host:4318/v1/traces``); a URL that already ends with ``/v1/traces`` is kept."""
    base = endpoint.rstrip("/")
    return base if base.endswith("/v1/traces") else f"{base}/v1/traces"


class SpanExport:
    """The span processor :func:`start_export` added; :meth:`shutdown` at exit.

    A provider cannot drop a processor, so this wrapper is what the provider holds: after :meth:`shutdown` it lets
    spans pass (a provider that outlives the service, as in tests, keeps working).
    """

    def __init__(self, processor: Any, url: str) -> None:
        self._processor = processor
        self._open = True
        self.url = url

    def __repr__(self) -> str:
        return f"SpanExport(url={self.url!r}, open={self._open})"

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        """SpanProcessor: a span started (passed on while open)."""
        if self._open:
            self._processor.on_start(span, parent_context=parent_context)

    def _on_ending(self, span: Any) -> None:
        """SpanProcessor (SDK >= 1.36): a span is ending (passed on while open)."""
        if self._open:
            ending = getattr(self._processor, "_on_ending", None)
            if ending is not None:
                ending(span)

    def on_end(self, span: Any) -> None:
        """SpanProcessor: a span ended: queued for export while open."""
        if self._open:
            self._processor.on_end(span)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """SpanProcessor: export what is queued now (True: done in time)."""
        return bool(self._processor.force_flush(timeout_millis)) if self._open else True

    def shutdown(self) -> None:
        """Export what is queued (the batch processor's own flush, bounded by ``OTEL_BSP_EXPORT_TIMEOUT``) and stop;
        later spans are let go. Idempotent."""
        if self._open:
            self._open = False
            self._processor.shutdown()


def _endpoint(setting: str, environ: Mapping[str, str]) -> tuple[str | None, bool]:
    """(the traces URL, or None for the SDK to read the environment; whether export is wanted at all)."""
    if setting:
        return traces_url(setting), True
    return None, any(environ.get(name) for name in ENV_VARIABLES)


def start_export(setting: str, *, version: str = "", environ: Mapping[str, str] | None = None) -> SpanExport | None:
    """Start exporting spans over OTLP/HTTP when configured (module docstring); None when not.

    Args:
        setting: ``[service] otlp_endpoint`` ("" : the environment variables decide).
        version: ``service.version`` of an installed provider's resource.
        environ: the environment (default ``os.environ``).

    Raises:
        ConfigError: ``setting`` is set and the ``otel`` extra is not installed.
    """
    environ = os.environ if environ is None else environ
    url, wanted = _endpoint(setting, environ)
    if not wanted:
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        if setting:
            raise ConfigError(
                f"[service] otlp_endpoint is set but the OpenTelemetry SDK or its OTLP exporter is not installed "
                f"({exc.name}): run {INSTALL_HINT}, or unset otlp_endpoint"
            ) from None
        _log.warning(
            "%s is set but spans are not exported: the OpenTelemetry SDK or its OTLP exporter is not installed "
            "(%s); run %s",
            next(name for name in ENV_VARIABLES if environ.get(name)),
            exc.name,
            INSTALL_HINT,
        )
        return None
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        attributes = {} if environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
        if version:
            attributes["service.version"] = version
        provider = TracerProvider(resource=Resource.create(attributes))
        trace.set_tracer_provider(provider)
        if not isinstance(trace.get_tracer_provider(), TracerProvider):  # pragma: no cover - set by another thread
            raise ConfigError("a tracer provider of another kind is installed: spans cannot be exported over OTLP")
    elif url is None:
        _log.info("OTLP export: the installed tracer provider exports (the environment names the endpoint)")
        return None
    exporter = OTLPSpanExporter(endpoint=url) if url is not None else OTLPSpanExporter()
    export = SpanExport(BatchSpanProcessor(exporter), url or str(getattr(exporter, "_endpoint", "")))
    provider.add_span_processor(export)  # type: ignore[arg-type]  # a SpanProcessor structurally
    _log.info("spans exported over OTLP/HTTP to %s", export.url, extra={"otlp_url": export.url})
    return export
