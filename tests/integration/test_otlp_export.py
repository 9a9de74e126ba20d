"""OTLP export (docs/tracing.md, Exporting): a real ``streamrelay serve`` with ``[service] otlp_endpoint`` POSTs its
spans as OTLP/HTTP protobuf to ``/v1/traces`` of a tiny collector on 127.0.0.1, and flushes them when it stops (the
batch delay is set far past the test, so every span that arrives came with the shutdown); the setting without the
``otel`` extra is a start-up error naming the install; nothing configured installs nothing.

One ``serve`` with only the web channel (no platform SDK imported): ~1 CPU-s.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from streamrelay.adapters.ops.otlp import start_export, traces_url
from streamrelay.core.errors import ConfigError
from tests.integration.served import serve_process
from tests.ports import free_port

pytestmark = pytest.mark.timeout(120)

INGEST_TOKEN = "otlp-export-ingest-token"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
AGENT_SPAN = "00f067aa0ba902b7"
MARKER = "walrus-opal-5120"
"""A word of the answer that must be in no exported byte."""


class Collector:
    """An OTLP/HTTP receiver: keeps each POST's path, content type and body; answers 200 with an empty protobuf."""

    def __init__(self) -> None:
        self.posts: list[tuple[str, str, bytes]] = []
        self.arrived = threading.Event()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                collector.posts.append((self.path, self.headers.get("Content-Type", ""), body))
                collector.arrived.set()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:  # the stdlib's name
                """Quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @contextmanager
    def running(self) -> Iterator[Collector]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.server.shutdown()
            self.server.server_close()
            thread.join(10)


def _config(tmp: Path, port: int, otlp: str) -> Path:
    config = tmp / "channels.toml"
    config.write_text(
        "\n".join(
            [
                "[service]",
                f"port = {port}",
                f'ledger = "{tmp / "ledger.sqlite3"}"',
                'actions = ""',
                'log_format = "json"',
                f'otlp_endpoint = "{otlp}"',
                "",
                "[channels.web]",
                'platform = "web"',
                "throttle_ms = 0",
            ]
        )
        + "\n"
    )
    return config


async def test_serve_exports_the_runs_spans_over_otlp_http_and_flushes_them_at_exit(tmp_path: Path) -> None:
    port = free_port()
    with Collector().running() as collector:
        config = _config(tmp_path, port, collector.url)
        env = {
            **os.environ,
            "STREAMRELAY_TOKEN": INGEST_TOKEN,
            "OTEL_BSP_SCHEDULE_DELAY": "600000",  # no batch before the exit: the shutdown must flush them
        }
        env.pop("OTEL_SERVICE_NAME", None)
        async with serve_process(config, port, env, token=INGEST_TOKEN) as served:
            await served.ready()
            answer = await served.post(
                "o1",
                {"kind": "run.start", "channel": "web", "target": {"chat_id": "page"}},
                {"kind": "text", "text": f"An answer with {MARKER}."},
                {"kind": "end", "status": "ok"},
                headers={"traceparent": f"00-{TRACE_ID}-{AGENT_SPAN}-01"},
            )
            assert answer.status_code == 200, answer.text
            headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
            report = (await served.client.get("/v1/runs/o1", params={"wait_s": 10}, headers=headers)).json()
            assert report["status"] == "delivered"
            assert collector.posts == []  # nothing exported before the exit (the batch delay is 600 s)
            served.proc.send_signal(signal.SIGTERM)
            assert await served.exit_code(30) == 0, served.log.read_text()[-3000:]
        assert collector.arrived.is_set(), served.log.read_text()[-3000:]

    assert {(path, kind) for path, kind, _ in collector.posts} == {("/v1/traces", "application/x-protobuf")}
    assert all(MARKER.encode() not in body for _, _, body in collector.posts)
    spans = []
    for _, _, body in collector.posts:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            assert resource["service.name"] == "streamrelay"
            spans += [span for scope in resource_spans.scope_spans for span in scope.spans]
    assert all(span.trace_id.hex() == TRACE_ID for span in spans)
    ingest = [span for span in spans if span.name == "streamrelay ingest"]
    assert len(ingest) == 1 and ingest[0].parent_span_id.hex() == AGENT_SPAN
    (run_span,) = [span for span in spans if span.name == "streamrelay run"]  # serve's relay makes run spans
    assert run_span.parent_span_id == ingest[0].span_id
    assert {a.key: a.value.string_value for a in run_span.attributes}["streamrelay.run.status"] == "delivered"
    parts = {span.span_id for span in spans if span.name.startswith("streamrelay part ")}
    assert parts and all(
        span.parent_span_id == run_span.span_id for span in spans if span.name.startswith("streamrelay part ")
    )
    calls = [span for span in spans if span.name.startswith("web ")]
    assert calls, [span.name for span in spans]
    for span in calls:
        attributes = {a.key: a.value.string_value for a in span.attributes}
        assert attributes["messaging.system"] == "web"
        assert attributes["streamrelay.run"] == "o1"
        assert attributes["streamrelay.call.outcome"] == "done"
        assert span.parent_span_id in parts or span.parent_span_id == run_span.span_id  # a part's, or the run's


def test_the_setting_without_the_otel_extra_is_a_start_up_error_naming_the_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)  # not installed
    with pytest.raises(ConfigError, match=r"pip install 'streamrelay\[otel\]'"):
        start_export("http://127.0.0.1:4318", environ={})


def test_the_standard_variable_without_the_otel_extra_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with caplog.at_level("WARNING", logger="streamrelay.otlp"):
        assert start_export("", environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}) is None
    assert "OTEL_EXPORTER_OTLP_ENDPOINT is set but spans are not exported" in caplog.text
    assert "pip install 'streamrelay[otel]'" in caplog.text


def test_nothing_configured_exports_nothing() -> None:
    assert start_export("", environ={}) is None
    assert traces_url("http://collector:4318/") == "http://collector:4318/v1/traces"
    assert traces_url("http://collector:4318/v1/traces") == "http://collector:4318/v1/traces"
