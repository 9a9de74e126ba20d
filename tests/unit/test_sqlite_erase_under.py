"""Erasure on SQLite (docs/retention.md) of a run whose parts sit under ledger ids of their own: a fan-out run's later
places (``A/to:1``, :func:`core.run.fanout.place_ledger_run`) and its sub-agents' threads (``A/<child key>``). They
kept their text when ``A`` was erased (the erase matched ``run = 'A'`` only); now the file holds none of it, and run
``AB`` (whose id starts the same) keeps its own."""

from __future__ import annotations

from pathlib import Path

from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.core.ports import PendingSend, TextFormat
from streamrelay.core.records.ledger import PartRecord, RunRecord
from streamrelay.core.records.report import PartState, SlotRole

MARK_A = "ibis-umber-3318"
MARK_B = "stoat-jade-6204"


async def _part(ledger: SqliteLedger, run: str, text: str) -> None:
    call = await ledger.record_intent(
        run, 0, SlotRole.ANSWER, "send", text, PendingSend(f"d-{run}", text, TextFormat.PLAIN)
    )
    part = PartRecord(run=run, slot=0, role=SlotRole.ANSWER, state=PartState.ACKED, message_id="7", shown=text)
    await ledger.record_outcome(call, part, "ack")


async def test_an_erased_run_takes_its_places_and_sub_agents_threads_with_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    ledger = await SqliteLedger.open(path)
    try:
        for run, mark in (("A", MARK_A), ("AB", MARK_B)):
            await ledger.start_run(RunRecord(run=run, channel="telegram", target={"chat_id": 5}, mode="block"))
            for under in (run, f"{run}/to:1", f"{run}/child-1"):
                await _part(ledger, under, f"{under} says {mark}.")
            await ledger.end_run(run, "ok")
        assert await ledger.erase(["A"]) == 3
        assert [(p.message_id, p.shown) for p in await ledger.parts("A/to:1")] == [("7", None)]
        assert [p.shown for p in await ledger.parts("AB/to:1")] == [f"AB/to:1 says {MARK_B}."]
    finally:
        await ledger.close()
    files = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert MARK_A.encode() not in files and MARK_B.encode() in files
