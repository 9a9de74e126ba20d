"""Finished runs kept in memory are bounded in bytes, not only in runs and characters (issue 13): text outside
Latin-1 takes 2 or 4 bytes a character, which a character budget misjudges. Deterministic: sizes are counted."""

from __future__ import annotations

from core.channel import ChannelRuntime
from core.clock import MonotonicClock
from core.policy import ChannelPolicy
from core.records.ledger import MemoryLedger
from core.run.finished import RUN_OVERHEAD_BYTES
from core.run.relay import Relay
from tests.unit.fakes import MemoryChat

START = {"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}


async def test_finished_runs_stay_within_their_byte_budget() -> None:
    policy = ChannelPolicy(name="c", throttle_s=0)
    relay = Relay({"c": ChannelRuntime(policy, MemoryChat())}, MemoryLedger(), MonotonicClock())
    budget = 200_000
    relay._finished.budget_bytes = budget
    for i in range(8):
        await relay.submit_line({**START, "run": f"r{i}"})
        await relay.submit_line({"kind": "text", "run": f"r{i}", "text": "\U0001f600" * 3000})  # 4 bytes each
        await relay.submit_line({"kind": "end", "run": f"r{i}"})
        report = await relay.wait_done(f"r{i}", 5)
        assert report is not None and report.status == "delivered"
    finished = relay._finished
    assert finished.chars < finished.budget_chars  # the character budget alone would keep them all
    assert finished.bytes <= budget and 1 < len(finished) < 8 and "r7" in finished and "r0" not in finished
    one = finished["r7"].measure()[1]
    # the answer once, 4 bytes a character: in the state, not again in the events that streamed it
    assert RUN_OVERHEAD_BYTES + 12_000 <= one < RUN_OVERHEAD_BYTES + 2 * 12_000
    assert finished.bytes == sum(f.measure()[1] for f in finished.values())
    old = await relay.report("r0")  # rebuilt from the ledger
    assert old is not None and old.done and old.status == "delivered"
    await relay.close()
