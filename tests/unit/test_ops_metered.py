"""The metered decorators: every adapter call counted, timed and logged by outcome; the ledger's verdicts counted as
outcomes, retries and uncertain parts; journal appends timed; capabilities kept; never an id as a label."""

from __future__ import annotations

import asyncio
import logging

import pytest

from streamrelay.adapters.ops.metered import CallMetrics, metered
from streamrelay.adapters.ops.metrics import ServiceMetrics, call_outcome
from streamrelay.adapters.ops.stores import MeteredJournal, MeteredLedger
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.delivery.calls import Done, Edit, NotDone, SendText
from streamrelay.core.errors import (
    DeliveryError,
    ForbiddenError,
    PlatformUnavailableError,
    RateLimitedError,
    RateScope,
    TargetNotFoundError,
    UncertainDeliveryError,
)
from streamrelay.core.events import Target
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.ports import NativeStreaming, TextFormat, Threads
from streamrelay.core.records.journal import JournalEntry, MemoryJournal
from streamrelay.core.records.ledger import MemoryLedger, PartRecord, RunRecord
from streamrelay.core.records.report import DeliveryReport, PartState, ReportStatus, SlotRole
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import FakeAdapter, FakeNativeAdapter

CHAT = Target(chat_id=4242)


def value(metrics: ServiceMetrics, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def label_values(metrics: ServiceMetrics) -> set[str]:
    """The service's own metrics' label values (prometheus-client's ``python_gc_*`` label generations 0, 1, 2)."""
    families = [family for family in metrics.registry.collect() if family.name.startswith("streamrelay_")]
    return {v for family in families for s in family.samples for v in s.labels.values()}


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (None, "ok"),
        (RateLimitedError("429", retry_after_s=1), "rate_limited"),
        (PlatformUnavailableError("502"), "unavailable"),
        (UncertainDeliveryError("timeout"), "uncertain"),
        (ForbiddenError("blocked"), "forbidden"),
        (DeliveryError("odd"), "failed"),
        (KeyError("bug"), "error"),
    ],
)
def test_each_error_has_its_outcome_label(error: BaseException | None, outcome: str) -> None:
    assert call_outcome(error) == outcome


def test_metered_is_the_adapter_itself_with_exactly_its_capabilities() -> None:
    """Metrics watch ``perform``; the adapter is not wrapped, so a runtime-checkable Protocol (which looks members up
    statically on Python 3.12+) sees exactly its capabilities: a Stop control never vanishes with metrics on."""
    metrics, clock = ServiceMetrics(), MonotonicClock()
    fake, fake_native = FakeAdapter(clock, max_units=99), FakeNativeAdapter(clock)
    plain, native = metered(fake, metrics, "c"), metered(fake_native, metrics, "n")
    assert plain is fake and native is fake_native
    assert isinstance(plain.observer, CallMetrics) and not isinstance(plain, NativeStreaming | Threads)
    assert isinstance(native, NativeStreaming) and not isinstance(native, Threads)


async def test_calls_are_counted_timed_and_logged_by_outcome(caplog: pytest.LogCaptureFixture) -> None:
    metrics = ServiceMetrics()
    fake = FakeAdapter(MonotonicClock())
    fake.fail("edit_text", 2, RateLimitedError("429", retry_after_s=3.0, scope=RateScope.BOT))
    adapter = metered(fake, metrics, "tg")
    with caplog.at_level(logging.INFO, logger="streamrelay.calls"):
        created = await adapter.perform(SendText(CHAT, "Hello", TextFormat.PLAIN))
        assert isinstance(created, Done) and isinstance(created.value, str)
        mid = created.value
        assert await adapter.perform(Edit(CHAT, mid, "Hello", TextFormat.PLAIN)) == Done(False)
        limited_call = await adapter.perform(Edit(CHAT, mid, "Hello there", TextFormat.PLAIN))
        assert isinstance(limited_call, NotDone) and isinstance(limited_call.error, RateLimitedError)
    calls = "streamrelay_platform_calls_total"
    assert value(metrics, calls, channel="tg", platform="fake", method="send", outcome="ok") == 1
    assert value(metrics, calls, channel="tg", platform="fake", method="edit", outcome="not_modified") == 1
    assert value(metrics, calls, channel="tg", platform="fake", method="edit", outcome="rate_limited") == 1
    labels = {"channel": "tg", "platform": "fake", "method": "edit", "scope": "bot"}
    assert value(metrics, "streamrelay_rate_limited_total", **labels) == 1
    seconds = "streamrelay_platform_call_seconds_count"
    assert value(metrics, seconds, channel="tg", platform="fake", method="edit") == 2
    sent, unchanged, limited = caplog.records
    assert (sent.levelno, sent.outcome, sent.message_id, sent.chat) == (logging.INFO, "ok", mid, "4242")  # type: ignore[attr-defined]
    assert unchanged.outcome == "not_modified"  # type: ignore[attr-defined]
    assert limited.levelno == logging.WARNING and limited.retry_after_s == 3.0  # type: ignore[attr-defined]
    assert "4242" not in label_values(metrics) and mid not in label_values(metrics)


async def test_a_cancelled_call_is_counted_cancelled_and_still_cancels() -> None:
    metrics = ServiceMetrics()
    fake = FakeAdapter(MonotonicClock(), latency_s=5.0)
    adapter = metered(fake, metrics, "tg")
    task = asyncio.create_task(adapter.perform(SendText(CHAT, "Hello", TextFormat.PLAIN)))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    labels = {"channel": "tg", "platform": "fake", "method": "send", "outcome": "cancelled"}
    assert value(metrics, "streamrelay_platform_calls_total", **labels) == 1


async def test_event_to_call_is_measured_once_per_wait_from_the_runs_own_task() -> None:
    metrics = ServiceMetrics()
    adapter = metered(FakeAdapter(MonotonicClock()), metrics, "tg")
    metrics.lines_accepted({"r1"})

    async def deliver(text: str) -> None:
        await adapter.perform(SendText(CHAT, text, TextFormat.PLAIN))

    await asyncio.create_task(deliver("a"), name="sqlite-writer")  # not a run's task: nothing measured
    count = "streamrelay_event_to_call_seconds_count"
    assert value(metrics, count, channel="tg", platform="fake") == 0
    await asyncio.create_task(deliver("b"), name="reconciler:r1")
    await asyncio.create_task(deliver("c"), name="reconciler:r1")  # nothing was waiting any more
    assert value(metrics, count, channel="tg", platform="fake") == 1
    assert "r1" not in label_values(metrics)


async def test_the_ledger_counts_verdicts_retries_uncertain_parts_and_runs() -> None:
    metrics = ServiceMetrics()
    ledger = MeteredLedger(MemoryLedger(), metrics)
    record = RunRecord(run="r1", channel="tg", target={"chat_id": 1}, mode="preview")
    await ledger.start_run(record)
    await ledger.start_run(record)  # a restart replays the run.start: not a new run
    part = PartRecord(run="r1", slot=0, role=SlotRole.ANSWER)
    for op, outcome in [("send", "ack"), ("edit", "retry"), ("edit", "rate_limited"), ("edit", "uncertain")]:
        call = await ledger.record_intent("r1", 0, SlotRole.ANSWER, op, "text")
        await ledger.record_outcome(call, part, outcome)
    call = await ledger.record_intent("r1", 1, SlotRole.ANSWER, "send", "more")
    uncertain = PartRecord(run="r1", slot=1, role=SlotRole.ANSWER, state=PartState.UNCERTAIN)
    await ledger.record_outcome(call, uncertain, "uncertain")  # a create: settled, not retried
    await ledger.save_part(uncertain)  # the same part again: counted once
    await ledger.end_run("r1", "ok")
    assert value(metrics, "streamrelay_runs_started_total", channel="tg") == 1
    # an ended run is counted by its report's status, by the relay (test_ended_runs_are_counted_by_...), not here
    assert value(metrics, "streamrelay_runs_ended_total", channel="tg", status="delivered", end="ok") == 0
    assert value(metrics, "streamrelay_delivery_outcomes_total", channel="tg", op="edit", outcome="retry") == 1
    retries = "streamrelay_retries_total"
    assert value(metrics, retries, channel="tg", op="edit", reason="unavailable") == 1
    assert value(metrics, retries, channel="tg", op="edit", reason="rate_limited") == 1
    assert value(metrics, retries, channel="tg", op="edit", reason="uncertain") == 1
    assert value(metrics, retries, channel="tg", op="send", reason="uncertain") == 0
    assert value(metrics, "streamrelay_uncertain_parts_total", channel="tg") == 1
    assert await ledger.parts("r1") == await ledger.inner.parts("r1")  # everything passed through


async def test_journal_appends_are_timed_counted_and_a_failure_still_raises() -> None:
    metrics = ServiceMetrics()
    journal = MeteredJournal(MemoryJournal(), metrics)
    await journal.append([JournalEntry("r1", "{}"), JournalEntry("r1", "{}")])
    assert await journal.lines("r1") == ["{}", "{}"]
    assert value(metrics, "streamrelay_journal_lines_total") == 2
    assert value(metrics, "streamrelay_journal_append_seconds_count") == 1

    class Broken(MemoryJournal):
        async def append(self, entries: object) -> None:
            raise OSError("disk full")

    broken = MeteredJournal(Broken(), metrics)
    with pytest.raises(OSError, match="disk full"):
        await broken.append([JournalEntry("r2", "{}")])
    assert value(metrics, "streamrelay_journal_append_failures_total") == 1


async def test_a_real_run_through_the_relay_feeds_every_counter() -> None:
    """The core's own retry of an edit in an outage, seen through the three decorators together."""
    metrics = ServiceMetrics()
    fake = FakeAdapter(MonotonicClock())
    fake.fail("edit_text", 1, PlatformUnavailableError("502 Bad Gateway"))
    runtime = ChannelRuntime(ChannelPolicy(name="tg", throttle_s=0), metered(fake, metrics, "tg"))
    ledger, journal = MeteredLedger(MemoryLedger(), metrics), MeteredJournal(MemoryJournal(), metrics)
    relay = Relay({"tg": runtime}, ledger, MonotonicClock(), journal=journal)
    metrics.watch_active_runs(lambda: len(relay.active_runs()))
    await relay.submit_line({"kind": "run.start", "channel": "tg", "target": {"chat_id": 7}}, "run-9")
    await relay.submit_line({"kind": "text", "text": "Hello"}, "run-9")
    assert value(metrics, "streamrelay_active_runs") == 1
    for _ in range(500):  # the first words are shown before the rest arrives: the rest is an edit
        if fake.messages:
            break
        await asyncio.sleep(0.01)
    await relay.submit_line({"kind": "text", "text": " world"}, "run-9")
    await relay.submit_line({"kind": "end"}, "run-9")
    report = await relay.wait_done("run-9", 10)
    await relay.close()
    assert report is not None and report.status == "delivered" and list(fake.messages.values()) == ["Hello world"]
    assert value(metrics, "streamrelay_active_runs") == 0
    calls = "streamrelay_platform_calls_total"
    assert value(metrics, calls, channel="tg", platform="fake", method="edit", outcome="unavailable") == 1
    assert value(metrics, "streamrelay_retries_total", channel="tg", op="edit", reason="unavailable") == 1
    assert value(metrics, "streamrelay_event_to_call_seconds_count", channel="tg", platform="fake") >= 1
    assert value(metrics, "streamrelay_journal_lines_total") == 4
    assert not {"run-9", "7"} & label_values(metrics)


async def test_the_ledger_forgets_a_runs_channel_at_its_end_after_counting_its_outcomes() -> None:
    metrics = ServiceMetrics()
    runtime = ChannelRuntime(ChannelPolicy(name="tg", throttle_s=0), FakeAdapter(MonotonicClock()))
    ledger = MeteredLedger(MemoryLedger(), metrics)
    relay = Relay({"tg": runtime}, ledger, MonotonicClock())
    await relay.submit_line({"kind": "run.start", "channel": "tg", "target": {"chat_id": 7}}, "run-9")
    await relay.submit_line({"kind": "text", "text": "Hello"}, "run-9")
    await relay.submit_line({"kind": "end"}, "run-9")
    report = await relay.wait_done("run-9", 10)
    await relay.close()
    assert report is not None and report.status == "delivered"
    assert value(metrics, "streamrelay_delivery_outcomes_total", channel="tg", op="send", outcome="ack") == 1
    assert value(metrics, "streamrelay_delivery_outcomes_total", channel="unknown", op="send", outcome="ack") == 0
    assert "run-9" not in ledger._channels  # nothing of an ended run stays here (a sidecar serves millions)


def test_ended_runs_are_counted_by_their_reports_status_and_their_agents_end() -> None:
    metrics = ServiceMetrics()
    failed = DeliveryReport(run="r1", channel="tg", done=True, status=ReportStatus.FAILED, end_status="ok")
    refused = DeliveryReport(run="r2", channel="tg", done=True, status=ReportStatus.PARTIAL, end_status="refused")
    quiet = DeliveryReport(run="r3", channel="tg", done=True, status=ReportStatus.EMPTY)
    metrics.run_ended(failed, 2.5)
    metrics.run_ended(refused, 1.0)
    metrics.run_ended(quiet, 0.1)
    assert value(metrics, "streamrelay_runs_ended_total", channel="tg", status="failed", end="ok") == 1
    assert value(metrics, "streamrelay_runs_ended_total", channel="tg", status="partial", end="refused") == 1
    assert value(metrics, "streamrelay_runs_ended_total", channel="tg", status="empty", end="none") == 1
    assert value(metrics, "streamrelay_runs_ended_total", channel="tg", status="delivered", end="ok") == 0
    assert value(metrics, "streamrelay_run_seconds_sum", channel="tg", status="failed") == 2.5
    assert "r1" not in label_values(metrics)


def test_the_registry_holds_prometheus_clients_process_and_gc_metrics() -> None:
    names = {sample.name for family in ServiceMetrics().registry.collect() for sample in family.samples}
    assert {"process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds"} <= names
    assert {"python_gc_collections_total", "python_gc_objects_collected_total"} <= names


async def test_the_relay_tells_a_runs_end_once_by_its_reports_status_in_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A run whose every send finds no chat, ended ``ok`` by its agent: counted and logged ``failed``; the part given
    up is a warning."""
    caplog.set_level(logging.INFO, logger="streamrelay")
    metrics = ServiceMetrics()
    fake = FakeAdapter(MonotonicClock())
    fake.fail("send_text", range(1, 10), TargetNotFoundError("Bad Request: chat not found"))
    runtime = ChannelRuntime(ChannelPolicy(name="tg", throttle_s=0), fake)
    relay = Relay({"tg": runtime}, MemoryLedger(), MonotonicClock(), observer=metrics)
    for event in ({"kind": "run.start", "channel": "tg", "target": {"chat_id": 7}}, {"kind": "text", "text": "Hi"}):
        await relay.submit_line(event, "run-5")
    await relay.submit_line({"kind": "end", "status": "ok"}, "run-5")
    report = await relay.wait_done("run-5", 10)
    await relay.close()
    assert report is not None and report.status == "failed" and fake.messages == {}
    assert value(metrics, "streamrelay_runs_ended_total", channel="tg", status="failed", end="ok") == 1
    assert value(metrics, "streamrelay_run_seconds_count", channel="tg", status="failed") == 1
    (line,) = [r for r in caplog.records if r.name == "streamrelay.runs"]
    assert line.levelno == logging.WARNING and line.getMessage().startswith("run run-5 ended failed on tg")
    fields = vars(line)
    assert [fields[k] for k in ("run", "channel", "status", "end_status", "parts")] == [
        "run-5",
        "tg",
        "failed",
        "ok",
        1,
    ]
    given_up = [r for r in caplog.records if r.name == "streamrelay.delivery" and "given up" in r.getMessage()]
    assert given_up and {r.levelno for r in given_up} == {logging.WARNING}
