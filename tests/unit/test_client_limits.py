"""Client limits in the relay (issue 12): held under concurrent starts, never applied to journaled runs, an end
always taken, a seq window from 0, and every field that holds text counted."""

from __future__ import annotations

import asyncio
from typing import Any

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import IngestError
from streamrelay.core.events import parse_event
from streamrelay.core.ingest.clients import ClientLimits
from streamrelay.core.ingest.quota import RunUsage
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.journal import MemoryJournal
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import MemoryChat

START = {"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}


class SlowLedger(MemoryLedger):
    """A ledger whose run lookups take a moment (a disk, a network): concurrent starts overlap there."""

    async def get_run(self, run: str) -> Any:
        await asyncio.sleep(0.01)
        return await super().get_run(run)


def _relay(limits: ClientLimits, ledger: MemoryLedger | None = None, **kw: Any) -> Relay:
    policy = ChannelPolicy(name="c", throttle_s=0)
    runtime = ChannelRuntime(policy, MemoryChat())
    return Relay({"c": runtime}, ledger or MemoryLedger(), MonotonicClock(), clients={limits.name: limits}, **kw)


async def test_concurrent_starts_cannot_pass_max_active_runs() -> None:
    relay = _relay(ClientLimits(name="a", max_active_runs=3), SlowLedger())
    results = await asyncio.gather(
        *(relay.submit_lines([({**START, "run": f"a/r{i}"}, None)]) for i in range(30)), return_exceptions=True
    )
    refused = [r[0] for r in results if isinstance(r, list) and isinstance(r[0], IngestError)]
    assert len(relay.active_runs()) == 3 and len(refused) == 27
    assert all(e.status == 429 and "clients.a.max_active_runs" in str(e) for e in refused)
    for run in relay.active_runs():
        await relay.submit_line({"kind": "end", "run": run})
        await relay.wait_done(run, 5)
    assert relay._admission.clients.active["a"] == 0  # every slot given back, the refused ones too
    await relay.close()


async def test_journaled_runs_resume_whatever_the_limits_are_now() -> None:
    journal, ledger = MemoryJournal(), MemoryLedger()
    relay = _relay(ClientLimits(name="a", max_active_runs=5), ledger, journal=journal)
    for i in range(5):
        await relay.submit_line({**START, "run": f"a/r{i}", "seq": 0})
        await relay.submit_line({"kind": "text", "run": f"a/r{i}", "seq": 1, "text": "x" * 50})
    await relay.close()
    restarted = _relay(ClientLimits(name="a", max_active_runs=2, max_chars_per_run=10), ledger, journal=journal)
    assert sorted(await restarted.resume()) == [f"a/r{i}" for i in range(5)]
    assert restarted._admission.clients.active["a"] == 5
    refused = await restarted.submit_lines([({**START, "run": "a/new"}, None)])
    assert isinstance(refused[0], IngestError) and refused[0].status == 429
    for i in range(5):
        taken = await restarted.submit_lines([({"kind": "end", "run": f"a/r{i}", "seq": 2}, None)])
        assert not isinstance(taken[0], IngestError) and taken[0].events == 1
        report = await restarted.wait_done(f"a/r{i}", 5)
        assert report is not None and report.done
    assert restarted._admission.clients.active["a"] == 0
    await restarted.close()


async def test_an_end_is_taken_past_the_event_limit() -> None:
    relay = _relay(ClientLimits(name="a", max_events_per_run=3))
    await relay.submit_line({**START, "run": "a/r"})
    await relay.submit_line({"kind": "text", "run": "a/r", "text": "one "})
    await relay.submit_line({"kind": "text", "run": "a/r", "text": "two "})
    over = await relay.submit_lines([({"kind": "text", "run": "a/r", "text": "three"}, None)])
    assert isinstance(over[0], IngestError) and "clients.a.max_events_per_run" in str(over[0])
    ended = await relay.submit_lines([({"kind": "end", "run": "a/r"}, None)])
    assert not isinstance(ended[0], IngestError)
    report = await relay.wait_done("a/r", 5)
    assert report is not None and report.done and report.status == "delivered"
    await relay.close()


def test_a_seq_window_counts_from_0_when_the_start_has_no_seq() -> None:
    limits = ClientLimits(name="a", seq_window=100)
    usage = RunUsage()
    usage.check_seq(99, limits)
    try:
        usage.check_seq(2**53 - 1, limits)
    except IngestError as exc:
        assert exc.status == 422 and "clients.a.seq_window" in str(exc)
    else:
        raise AssertionError("a seq far past 0 was taken")


def test_tool_fragments_results_phases_and_errors_count_as_characters() -> None:
    limits = ClientLimits(name="a", max_chars_per_run=1000)
    usage = RunUsage()
    events = [
        {"kind": "tool_call", "run": "r", "id": "c1", "state": "args_delta", "args_delta": "x" * 300},
        {"kind": "tool_result", "run": "r", "id": "c1", "summary": "y" * 300},
        {"kind": "phase", "run": "r", "name": "z" * 300},
    ]
    for event in events:
        usage.charge([parse_event(event)], limits)
    try:
        usage.charge([parse_event({"kind": "error", "run": "r", "message": "e" * 300})], limits)
    except IngestError as exc:
        assert "clients.a.max_chars_per_run" in str(exc)
    else:
        raise AssertionError("an error message past the character limit was taken")
    assert 900 < usage.chars <= 1000


async def test_finished_runs_kept_in_memory_stay_within_their_character_budget() -> None:
    policy = ChannelPolicy(name="c", throttle_s=0)
    relay = Relay({"c": ChannelRuntime(policy, MemoryChat())}, MemoryLedger(), MonotonicClock(), finished_chars=5_000)
    for i in range(8):
        await relay.submit_line({**START, "run": f"r{i}"})
        await relay.submit_line({"kind": "text", "run": f"r{i}", "text": "x" * 5000})
        await relay.submit_line({"kind": "end", "run": f"r{i}"})
        report = await relay.wait_done(f"r{i}", 5)
        assert report is not None and report.status == "delivered"
    finished = relay._finished
    # each keeps about 1.5k characters (its state's fields and last events; its answer is in the ledger's parts)
    assert finished.chars <= 5_000 and 1 < len(finished) < 8 and "r7" in finished and "r0" not in finished
    old = await relay.report("r0")  # rebuilt from the ledger
    assert old is not None and old.done and old.status == "delivered"
    await relay.close()


async def test_a_line_refused_for_a_limit_leaves_its_seq_free() -> None:
    # Before: the seq was marked taken before the limit refused the line (422), so the agent's shorter line with
    # the same seq was answered "dropped" (read as taken) and its text never shown.
    relay = _relay(ClientLimits(name="a", max_chars_per_run=10))
    await relay.submit_line({**START, "run": "a/r", "seq": 0})
    for kind in ({"kind": "text"}, {"kind": "status"}):
        line = {**kind, "run": "a/r", "seq": 1, "text": "x" * 50}
        (refused,) = await relay.submit_lines([(line, None)])
        assert isinstance(refused, IngestError) and refused.status == 422, refused
    (taken,) = await relay.submit_lines([({"kind": "text", "run": "a/r", "seq": 1, "text": "short"}, None)])
    assert not isinstance(taken, IngestError) and taken.events == 1 and taken.dropped is None, taken
    await relay.submit_line({"kind": "end", "run": "a/r", "seq": 2})
    report = await relay.wait_done("a/r", 5)
    assert report is not None and str(report.status) == "delivered"
    await relay.close()
