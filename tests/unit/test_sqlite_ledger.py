"""The SQLite ledger: intents before calls, outcomes after, parts survive a reopen."""

from __future__ import annotations

from pathlib import Path

from adapters.sqlite import SqliteLedger
from core.ledger import PartRecord, RunRecord
from core.report import PartState, SlotRole


async def test_runs_parts_and_calls_survive_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    ledger = await SqliteLedger.open(path)
    await ledger.start_run(RunRecord(run="r", channel="telegram", target={"chat_id": 1}, mode="preview"))
    call = await ledger.record_intent("r", 0, SlotRole.ANSWER, "send", "Hello")
    part = PartRecord(run="r", slot=0, role=SlotRole.ANSWER, state=PartState.ACKED, message_id="7", shown="Hello")
    await ledger.record_outcome(call, part, "ack")
    uncertain = await ledger.record_intent("r", 1, SlotRole.ANSWER, "send", "World")
    await ledger.record_outcome(
        uncertain, PartRecord(run="r", slot=1, role=SlotRole.ANSWER, state=PartState.UNCERTAIN), "uncertain"
    )
    await ledger.close()

    again = await SqliteLedger.open(path)
    record = await again.get_run("r")
    assert record is not None and not record.ended and record.target == {"chat_id": 1}
    parts = await again.parts("r")
    assert [(p.slot, p.state, p.message_id, p.shown) for p in parts] == [
        (0, PartState.ACKED, "7", "Hello"),
        (1, PartState.UNCERTAIN, None, None),
    ]
    await again.end_run("r", "ok")
    ended = await again.get_run("r")
    assert ended is not None and ended.ended and ended.end_status == "ok"
    assert await again.get_run("nobody") is None
    await again.close()


async def test_start_run_keeps_the_first_record(tmp_path: Path) -> None:
    ledger = await SqliteLedger.open(":memory:")
    await ledger.start_run(RunRecord(run="r", channel="a", target={"chat_id": 1}, mode="preview"))
    await ledger.start_run(RunRecord(run="r", channel="b", target={"chat_id": 2}, mode="block"))
    record = await ledger.get_run("r")
    assert record is not None and record.channel == "a"
    await ledger.close()
