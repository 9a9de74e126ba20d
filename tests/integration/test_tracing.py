"""Trace context end to end (docs/tracing.md): an agent's span -> the ingest request -> the run's span -> each message
part's span -> each platform call of the run, read back from the OpenTelemetry SDK's in-memory exporter; the context
is journaled with ``run.start``, so the calls a resumed run makes after a restart are in the same trace (under the
resumed run's span); the run's span carries its outcome; no answer text is in any span."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from pydantic import SecretStr

from streamrelay.adapters.ops import ServiceMetrics
from streamrelay.adapters.ops.traced import RunSpans
from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.adapters.sqlite.journal import SqliteJournal
from streamrelay.app.client import RelayClient
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import BOT_TOKEN, INGEST_TOKEN
from tests.otel_spans import span_exporter

MARKER = "zebra-quartz-7731"
"""A word of the answer that must be in no span."""


async def _serve(
    api: str, tmp_path: Path, metrics: ServiceMetrics | None = None
) -> tuple[Relay, Sidecar, SqliteLedger, SqliteJournal]:
    settings = ChannelSettings.model_validate(
        {
            "platform": "telegram",
            "api_base": api,
            "throttle_ms": 0,
            "delivery": "block",
            "typing": False,
            "coalesce": {"min_chars": 1, "max_chars": 4000, "idle_ms": 0},
        }
    )
    runtime = make_runtime("telegram", settings, SecretStr(BOT_TOKEN), metrics=metrics)
    ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
    journal = await SqliteJournal.open(tmp_path / "journal.sqlite3")
    relay = Relay({"telegram": runtime}, ledger, MonotonicClock(), journal=journal, tracer=RunSpans())
    sidecar = Sidecar(relay, token=INGEST_TOKEN, metrics=metrics)
    await sidecar.start()
    return relay, sidecar, ledger, journal


async def _stop(relay: Relay, sidecar: Sidecar, ledger: SqliteLedger, journal: SqliteJournal) -> None:
    await sidecar.stop()
    await relay.close()
    await ledger.close()
    await journal.close()


async def _shown(mock: MockTelegram, chat: int, count: int) -> None:
    for _ in range(500):
        if len(mock.visible(chat)) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"chat {chat} shows {mock.visible(chat)}, not {count} messages")


def _calls(spans: tuple[ReadableSpan, ...]) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith("telegram ")]


async def test_an_agent_span_reaches_every_platform_call_across_a_restart(tmp_path: Path) -> None:
    exporter = span_exporter()
    tracer = trace.get_tracer("test-agent")
    async with MockTelegram() as mock:
        served = await _serve(mock.base_url, tmp_path)
        async with RelayClient(served[1].url, INGEST_TOKEN) as agent:
            with tracer.start_as_current_span("agent answers") as agent_span:
                await agent.start("t1", channel="telegram", chat_id=9)
                await agent.send("t1", [{"kind": "text", "text": f"First {MARKER}."}, {"kind": "block_end"}])
            await _shown(mock, 9, 1)
        await _stop(*served)  # the process dies mid-run

        served = await _serve(mock.base_url, tmp_path)
        assert await served[0].resume() == ["t1"]
        async with RelayClient(served[1].url, INGEST_TOKEN) as agent:  # no span current: no header
            await agent.send("t1", [{"kind": "text", "text": f"Second {MARKER}."}, {"kind": "end", "status": "ok"}])
            async with httpx.AsyncClient(
                base_url=served[1].url, headers={"Authorization": f"Bearer {INGEST_TOKEN}"}
            ) as c:
                report = (await c.get("/v1/runs/t1", params={"wait_s": 10})).json()
        await _stop(*served)
        assert report["status"] == "delivered"
        assert [t for _, t in mock.visible(9)] == [f"First {MARKER}.", f"Second {MARKER}."]
        sent_ids = [str(m) for m, _ in mock.visible(9)]

    spans = exporter.get_finished_spans()
    agent_context = agent_span.get_span_context()
    ingests = [s for s in spans if s.name == "streamrelay ingest"]
    # both requests made inside the agent's span are its children (the start and the first text)
    assert len(ingests) == 2
    assert all(s.parent is not None and s.parent.span_id == agent_context.span_id for s in ingests)
    assert all(s.context is not None and s.context.trace_id == agent_context.trace_id for s in ingests)
    start_ingest = min(ingests, key=lambda s: s.start_time or 0)
    assert start_ingest.context is not None

    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    runs = [s for s in spans if s.name == "streamrelay run"]
    # one run span before the restart (interrupted), one after (delivered): both children of the run's ingest
    assert [dict(s.attributes or {})["streamrelay.run.status"] for s in runs] == ["interrupted", "delivered"]
    for run_span in runs:
        assert run_span.parent is not None and run_span.parent.span_id == start_ingest.context.span_id
        assert dict(run_span.attributes or {})["streamrelay.run"] == "t1"
    delivered = dict(runs[1].attributes or {})
    assert delivered["streamrelay.parts.confirmed"] == 2 and delivered["messaging.batch.message_count"] == 2
    assert delivered["streamrelay.run.end_status"] == "ok" and runs[1].status.status_code is trace.StatusCode.UNSET
    parts = [s for s in spans if s.name.startswith("streamrelay part ")]
    assert parts and all(s.parent is not None and by_id[s.parent.span_id] in runs for s in parts)

    calls = _calls(spans)
    sends = [s for s in calls if s.attributes is not None and s.attributes["messaging.operation.name"] == "send"]
    assert len(sends) == 2  # one before the restart, one after: both in the agent's trace, under the run's ingest
    for span in calls:
        assert span.context is not None and span.context.trace_id == agent_context.trace_id
        assert span.parent is not None and by_id[span.parent.span_id] in parts  # every call here is a part's
        part = by_id[span.parent.span_id]
        assert part.start_time is not None and span.start_time is not None and part.start_time <= span.start_time
        assert span.kind is trace.SpanKind.CLIENT
        attributes = dict(span.attributes or {})
        assert attributes["messaging.system"] == "telegram"
        assert attributes["streamrelay.call.outcome"] == "done"
        assert attributes["streamrelay.call.kind"] in ("send", "edit", "delete", "typing")
        assert attributes["streamrelay.run"] == "t1"
    assert sorted(str(s.attributes["messaging.message.id"]) for s in sends if s.attributes) == sorted(sent_ids)
    for span in spans:  # the answer is a person's data: in no span's name or attributes
        assert MARKER not in span.name
        assert all(MARKER not in str(value) for value in (span.attributes or {}).values())


async def test_a_traceparent_field_on_run_start_parents_the_calls_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    exporter = span_exporter()
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    async with MockTelegram() as mock:
        served = await _serve(mock.base_url, tmp_path)
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        async with httpx.AsyncClient(base_url=served[1].url, headers=headers, timeout=30) as client:
            bad = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 9}, "traceparent": "00-abc"}
            answer = await client.post("/v1/runs/b1/events", json=bad)
            assert answer.status_code == 400 and "traceparent must be a W3C trace context" in answer.text
            start = {**bad, "traceparent": traceparent, "tracestate": "vendor=1"}
            end = {"kind": "end", "status": "ok", "final_text": "Done."}
            body = "\n".join(httpx.Response(200, json=e).text for e in (start, end)) + "\n"
            # a traceparent header too: the run's own field wins, the request is still a span of the header's trace
            other = "00-11111111111111111111111111111111-2222222222222222-01"
            answer = await client.post("/v1/runs/f1/events", content=body, headers={"traceparent": other})
            assert answer.status_code == 200, answer.text
            assert (await client.get("/v1/runs/f1", params={"wait_s": 10})).json()["status"] == "delivered"
        await _stop(*served)
    spans = exporter.get_finished_spans()
    calls = _calls(spans)
    assert calls
    (run_span,) = [s for s in spans if s.name == "streamrelay run"]  # the refused run made none
    assert run_span.parent is not None and f"{run_span.parent.span_id:016x}" == traceparent.split("-")[2]
    for span in (*calls, run_span):
        assert span.context is not None and f"{span.context.trace_id:032x}" == traceparent.split("-")[1]
        assert str(span.context.trace_state) != "" and span.context.trace_state.get("vendor") == "1"


async def test_a_traced_calls_latency_carries_its_trace_id_as_an_exemplar_in_openmetrics(tmp_path: Path) -> None:
    exporter = span_exporter()
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    async with MockTelegram() as mock:
        served = await _serve(mock.base_url, tmp_path, ServiceMetrics("test"))
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        async with httpx.AsyncClient(base_url=served[1].url, headers=headers, timeout=30) as client:
            for run, chat, traced in (("u1", 8, {}), ("e1", 9, {"traceparent": traceparent})):  # untraced first
                start = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": chat}, **traced}
                end = {"kind": "end", "status": "ok", "final_text": "Done."}
                body = "\n".join(httpx.Response(200, json=e).text for e in (start, end)) + "\n"
                assert (await client.post(f"/v1/runs/{run}/events", content=body)).status_code == 200
                assert (await client.get(f"/v1/runs/{run}", params={"wait_s": 10})).json()["status"] == "delivered"
            openmetrics = await client.get("/metrics", headers={"Accept": "application/openmetrics-text"})
            plain = await client.get("/metrics")
        await _stop(*served)
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert plain.headers["content-type"].startswith("text/plain") and " # {" not in plain.text  # no exemplars there
    call_spans = {f"{s.context.span_id:016x}" for s in _calls(exporter.get_finished_spans()) if s.context}
    exemplars = [
        sample.exemplar
        for family in text_string_to_metric_families(openmetrics.text)  # type: ignore[no-untyped-call]
        if family.name == "streamrelay_platform_call_seconds"
        for sample in family.samples
        if sample.exemplar is not None
    ]
    assert exemplars  # the traced run's sends (the untraced run's calls give none: every exemplar is of its trace)
    for exemplar in exemplars:
        assert exemplar.labels["trace_id"] == traceparent.split("-")[1]
        assert exemplar.labels["span_id"] in call_spans  # the very call's span
        assert exemplar.value > 0


async def test_a_failed_runs_span_is_an_error_and_an_untraced_run_makes_no_span(tmp_path: Path) -> None:
    exporter = span_exporter()
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    async with MockTelegram() as mock:
        mock.add_fault("sendMessage", 1, {"status": 400, "description": "Bad Request: chat not found"})
        served = await _serve(mock.base_url, tmp_path)
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        async with httpx.AsyncClient(base_url=served[1].url, headers=headers, timeout=30) as client:
            for run, traced in (("x1", {"traceparent": traceparent}), ("u1", {})):
                start = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 9}, **traced}
                end = {"kind": "end", "status": "ok", "final_text": "Done."}
                body = "\n".join(httpx.Response(200, json=e).text for e in (start, end)) + "\n"
                assert (await client.post(f"/v1/runs/{run}/events", content=body)).status_code == 200
                report = (await client.get(f"/v1/runs/{run}", params={"wait_s": 10})).json()
                assert report["status"] == ("failed" if run == "x1" else "delivered"), report
        await _stop(*served)
    spans = exporter.get_finished_spans()
    (run_span,) = [s for s in spans if s.name == "streamrelay run"]  # the untraced run u1: no span at all
    attributes = dict(run_span.attributes or {})
    assert attributes["streamrelay.run"] == "x1" and attributes["streamrelay.run.status"] == "failed"
    assert attributes["error.type"] == "failed" and run_span.status.status_code is trace.StatusCode.ERROR
    assert attributes["streamrelay.parts.failed"] == 1
    (part,) = [s for s in spans if s.name.startswith("streamrelay part ")]
    assert dict(part.attributes or {})["streamrelay.call.outcome"] == "not_done"
    assert all(dict(s.attributes or {}).get("streamrelay.run") != "u1" for s in spans)
