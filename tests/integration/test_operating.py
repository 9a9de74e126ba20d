"""Operating the real service: /metrics after real runs against the mock Telegram Bot API, who may read it,
/healthz and /readyz through resuming, draining and a store that cannot be read, the ops listener, and no secret in
any log line of a run driven with aiohttp's and aiogram's DEBUG logging on."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr
from starlette.applications import Starlette

from streamrelay.adapters.ops import (
    Health,
    MeteredJournal,
    MeteredLedger,
    ServiceMetrics,
    ServiceState,
    configure_logging,
    probe_routes,
)
from streamrelay.adapters.sqlite import SqliteJournal, SqliteLedger, SqliteStore
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.app.serving import STORE_TABLES
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import BOT_TOKEN, INGEST_TOKEN

AUTH = {"Authorization": f"Bearer {INGEST_TOKEN}"}


@dataclass
class Service:
    mock: MockTelegram
    relay: Relay
    sidecar: Sidecar
    metrics: ServiceMetrics
    health: Health
    store: SqliteStore
    client: httpx.AsyncClient

    async def run(self, run: str, *texts: str, chat_id: int | str = 42, pause_s: float = 0.0) -> dict[str, Any]:
        start = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": chat_id}}
        await self.post(run, start)
        for text in texts:
            await self.post(run, {"kind": "text", "mode": "delta", "text": text})
            await asyncio.sleep(pause_s)
        await self.post(run, {"kind": "end", "status": "ok"})
        report = await self.client.get(f"/v1/runs/{run}", params={"wait_s": 30}, headers=AUTH)
        body: dict[str, Any] = report.json()
        return body

    async def post(self, run: str, *lines: dict[str, Any]) -> httpx.Response:
        body = "".join(json.dumps(line) + "\n" for line in lines)
        return await self.client.post(f"/v1/runs/{run}/events", content=body, headers=AUTH)

    async def samples(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        page = await self.client.get("/metrics")
        assert page.status_code == 200, page.text
        assert page.headers["content-type"].startswith("text/plain")
        return {
            (s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(page.text)
            for s in family.samples
        }


def sample(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[Service]:
    mock = MockTelegram(rate_limits=True)
    api = await mock.start()
    settings = ChannelSettings.model_validate({"platform": "telegram", "api_base": api, "throttle_ms": 0})
    metrics = ServiceMetrics("test-version")
    store = await SqliteStore.open(tmp_path / "ledger.sqlite3")
    ledger = MeteredLedger(await SqliteLedger.on(store), metrics)
    journal = MeteredJournal(await SqliteJournal.on(store), metrics)
    runtime = make_runtime("telegram", settings, SecretStr(BOT_TOKEN), metrics=metrics)
    relay = Relay({"telegram": runtime}, ledger, MonotonicClock(), journal=journal, observer=metrics)
    health = Health(lambda: store.ping(STORE_TABLES))
    sidecar = Sidecar(relay, token=INGEST_TOKEN, metrics=metrics, health=health, ops_port=0)
    await sidecar.start()
    async with httpx.AsyncClient(base_url=sidecar.url, timeout=30) as client:
        yield Service(mock, relay, sidecar, metrics, health, store, client)
    await sidecar.stop()
    await relay.close()
    await store.close()
    await mock.stop()


async def test_metrics_count_a_real_run_its_429_and_the_retry_without_an_id_as_a_label(service: Service) -> None:
    service.mock.add_fault("editMessageText", 1, {"status": 429, "retry_after_s": 1})
    report = await service.run("run-metrics-1", "Hello", " world,", " and more.", pause_s=0.3)
    assert report["status"] == "delivered"
    assert [text for _, text in service.mock.visible(42)] == ["Hello world, and more."]
    got = await service.samples()
    tg = {"channel": "telegram", "platform": "telegram"}
    assert sample(got, "streamrelay_platform_calls_total", **tg, method="send", outcome="ok") == 1
    assert sample(got, "streamrelay_platform_calls_total", **tg, method="edit", outcome="rate_limited") == 1
    assert sample(got, "streamrelay_platform_calls_total", **tg, method="edit", outcome="ok") >= 1
    assert sample(got, "streamrelay_rate_limited_total", **tg, method="edit", scope="conversation") == 1
    assert sample(got, "streamrelay_retries_total", channel="telegram", op="edit", reason="rate_limited") == 1
    assert sample(got, "streamrelay_platform_call_seconds_count", **tg, method="send") == 1
    assert sample(got, "streamrelay_event_to_call_seconds_count", **tg) >= 1
    assert sample(got, "streamrelay_runs_started_total", channel="telegram") == 1
    assert sample(got, "streamrelay_runs_ended_total", channel="telegram", status="delivered", end="ok") == 1
    assert sample(got, "streamrelay_run_seconds_count", channel="telegram", status="delivered") == 1
    assert sample(got, "streamrelay_journal_lines_total") == 5
    assert sample(got, "streamrelay_journal_append_seconds_count") == 5
    assert sample(got, "streamrelay_ingest_lines_total", result="accepted") == 5
    assert sample(got, "streamrelay_ingest_requests_total", status="200") == 5
    assert sample(got, "streamrelay_active_runs") == 0 and sample(got, "streamrelay_ready") == 1
    assert sample(got, "streamrelay_build_info", version="test-version") == 1
    # python_gc_*'s ``generation`` (0, 1, 2: prometheus-client's own) is the one label whose values are numbers
    label_values = {value for _, labels in got for key, value in labels if key != "generation"}
    assert not {"run-metrics-1", "42", "1"} & label_values  # no run, chat or message id


async def test_metrics_are_for_loopback_or_the_metrics_token(service: Service) -> None:
    assert (await service.client.get("/metrics")).status_code == 200  # this client is on 127.0.0.1
    app = Starlette(routes=list(probe_routes(service.health, service.metrics)))
    remote = httpx.ASGITransport(app=app, client=("10.1.2.3", 40000))
    async with httpx.AsyncClient(transport=remote, base_url="http://sidecar") as client:
        refused = await client.get("/metrics")
        assert refused.status_code == 403 and "metrics_token_env" in refused.json()["error"]
        assert (await client.get("/healthz")).status_code == 200  # probes answer anyone
    guarded = Starlette(routes=list(probe_routes(service.health, service.metrics, metrics_token="scrape-me-please")))
    for address in ("10.1.2.3", "127.0.0.1"):
        transport = httpx.ASGITransport(app=guarded, client=(address, 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
            assert (await client.get("/metrics")).status_code == 401
            wrong = await client.get("/metrics", headers={"Authorization": f"Bearer {INGEST_TOKEN}"})
            assert wrong.status_code == 401
            page = await client.get("/metrics", headers={"Authorization": "Bearer scrape-me-please"})
            assert page.status_code == 200 and "streamrelay_active_runs" in page.text


async def test_readiness_follows_the_services_life_and_ingest_waits_for_the_resume(service: Service) -> None:
    client = service.client
    assert (await client.get("/readyz")).json() == {"ready": True, "state": "ready"}
    assert (await client.get("/healthz")).json() == {"ok": True}  # answers anyone: tells nothing but alive
    service.health.set(ServiceState.RESUMING)
    alive, ready = await client.get("/healthz"), await client.get("/readyz")
    assert alive.status_code == 200 and alive.json() == {"ok": True}
    assert ready.json()["state"] == "resuming"
    assert ready.status_code == 503 and "resuming" in ready.json()["reason"]
    held = await service.post("held", {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 42}})
    assert held.status_code == 503 and held.headers["retry-after"] == "1" and held.json()["state"] == "resuming"
    assert (await client.get("/v1/runs/held", headers=AUTH)).status_code == 503
    assert (await client.get("/metrics")).status_code == 200
    assert sample(await service.samples(), "streamrelay_ready") == 0

    service.health.set(ServiceState.READY)
    assert (await service.run("after-resume", "Hello"))["status"] == "delivered"
    assert [text for _, text in service.mock.visible(42)] == ["Hello"]  # the held request never reached it

    service.health.set(ServiceState.DRAINING)
    draining = await client.get("/readyz")
    assert draining.status_code == 503 and draining.json()["state"] == "draining"
    accepted = await service.post("late", {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 43}})
    assert accepted.status_code == 200  # a draining service still takes lines (its active runs need them)

    service.health.set(ServiceState.READY)
    await service.store.close()  # the journal and ledger cannot be read any more
    broken = await client.get("/readyz")
    assert broken.status_code == 503 and "cannot be read" in broken.json()["reason"]
    assert (await client.get("/healthz")).status_code == 200


async def test_the_ops_listener_serves_the_probes_and_metrics_only(service: Service) -> None:
    assert service.sidecar.ops_url is not None and service.sidecar.ops_url != service.sidecar.url
    async with httpx.AsyncClient(base_url=service.sidecar.ops_url, timeout=10) as ops:
        assert (await ops.get("/healthz")).status_code == 200
        assert (await ops.get("/readyz")).json()["ready"] is True
        assert "streamrelay_platform_calls_total" in (await ops.get("/metrics")).text
        assert (await ops.get("/v1/runs/x", headers=AUTH)).status_code == 404


@pytest.fixture
def debug_logs() -> Iterator[io.StringIO]:
    out = io.StringIO()
    setup = configure_logging("json", "debug", secrets=(INGEST_TOKEN, BOT_TOKEN), stream=out)
    yield out
    setup.close()
    structlog.reset_defaults()


async def test_no_token_reaches_the_logs_of_a_run_driven_with_debug_logging(
    service: Service, debug_logs: io.StringIO, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("aiohttp", "aiogram", "asyncio"):
        assert logging.getLogger(name).getEffectiveLevel() == logging.DEBUG
    service.mock.add_fault("sendMessage", 1, {"status": 502})  # an error path: the adapter's error text is logged
    report = await service.run("run-secret", "Hello", " again")
    assert report["done"]
    watch = (await service.client.get("/v1/runs/run-secret/watch", headers=AUTH)).json()
    read_token = watch["token"]
    assert (await service.client.get(watch["url"])).status_code == 200  # the read token travels in a URL
    # what an SDK may print: its request URL (the Bot API puts the token in the path) and its headers
    url = f"{service.mock.base_url}/bot{BOT_TOKEN}/sendMessage"
    logging.getLogger("aiohttp.client").debug("POST %s headers=%s", url, {"Authorization": f"Bearer {INGEST_TOKEN}"})

    output = debug_logs.getvalue() + "".join(capsys.readouterr())
    lines = [json.loads(line) for line in debug_logs.getvalue().splitlines()]
    loggers = {line["logger"] for line in lines}
    assert {"streamrelay.calls", "aiohttp.client"} <= loggers
    assert any(line.get("outcome") == "unavailable" or line.get("outcome") == "uncertain" for line in lines)
    for secret in (BOT_TOKEN, BOT_TOKEN.partition(":")[2], INGEST_TOKEN, read_token):
        assert secret not in output, f"{secret[:4]}… is in the logs"
    assert "/bot<redacted>/sendMessage" in output


async def test_an_ops_port_in_use_fails_the_start_and_leaves_no_listener_behind(service: Service) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        sidecar = Sidecar(service.relay, token=INGEST_TOKEN, ops_port=taken.getsockname()[1], signals=False)
        with pytest.raises(RuntimeError, match="sidecar-ops stopped during start-up"):
            await sidecar.start()
    with pytest.raises(httpx.TransportError):
        await service.client.get(f"{sidecar.url}/healthz")


async def test_a_run_whose_chat_is_not_found_is_counted_and_logged_failed_not_ok(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="streamrelay")
    for nth in range(1, 6):  # every send: the bot was removed from the chat (Telegram's 400)
        service.mock.add_fault("sendMessage", nth, {"status": 400, "description": "Bad Request: chat not found"})
    report = await service.run("run-no-chat", "Hello")  # the agent ends it ok
    assert report["status"] == "failed" and report["end_status"] == "ok"
    got = await service.samples()
    assert sample(got, "streamrelay_runs_ended_total", channel="telegram", status="failed", end="ok") == 1
    assert sample(got, "streamrelay_runs_ended_total", channel="telegram", status="delivered", end="ok") == 0
    (line,) = [r for r in caplog.records if r.name == "streamrelay.runs"]
    assert line.levelno == logging.WARNING and "chat not found" in line.getMessage()
    fields = {k: vars(line)[k] for k in ("run", "channel", "status", "end_status", "parts", "failed")}
    assert fields == {
        "run": "run-no-chat",
        "channel": "telegram",
        "status": "failed",
        "end_status": "ok",
        "parts": 1,
        "failed": 1,
    }
    assert isinstance(vars(line)["duration_s"], float) and vars(line)["duration_s"] >= 0
    given_up = [r for r in caplog.records if r.name == "streamrelay.delivery" and "given up" in r.getMessage()]
    assert given_up and all(r.levelno == logging.WARNING for r in given_up)


async def test_a_delivered_run_logs_one_line_at_info_and_process_metrics_are_exposed(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="streamrelay")
    assert (await service.run("run-fine", "All", " good."))["status"] == "delivered"
    (line,) = [r for r in caplog.records if r.name == "streamrelay.runs"]
    assert line.levelno == logging.INFO and vars(line)["status"] == "delivered" and vars(line)["parts"] == 1
    got = await service.samples()
    names = {name for name, _ in got}
    assert sample(got, "process_resident_memory_bytes") > 0 and sample(got, "process_open_fds") > 0
    assert {"process_cpu_seconds_total", "process_start_time_seconds"} <= names
    assert any(name.startswith("python_gc_collections_total") for name in names)
    assert sample(got, "python_gc_objects_collected_total", generation="0") >= 0
