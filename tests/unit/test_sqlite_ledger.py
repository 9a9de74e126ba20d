"""The SQLite ledger: intents before calls, outcomes after, parts survive a reopen."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from streamrelay.adapters.sqlite import SqliteJournal, SqliteLedger, SqliteStore
from streamrelay.core.records.journal import JournalEntry
from streamrelay.core.records.ledger import PartRecord, RunRecord
from streamrelay.core.records.report import PartState, SlotRole


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


async def test_a_ledger_from_before_native_streaming_opens_and_records_open_streams(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as db:  # the parts table as it was before the streaming column
        db.execute(
            "CREATE TABLE parts (run TEXT NOT NULL, slot INTEGER NOT NULL, role TEXT NOT NULL, state TEXT NOT NULL,"
            " message_id TEXT, shown TEXT, content_key TEXT, degraded INTEGER NOT NULL DEFAULT 0, error TEXT,"
            " updated_at REAL NOT NULL, PRIMARY KEY (run, slot))"
        )
    ledger = await SqliteLedger.open(path)
    await ledger.start_run(RunRecord(run="r", channel="telegram", target={"chat_id": 1}, mode="native"))
    call = await ledger.record_intent("r", 0, SlotRole.ANSWER, "stream_start", "Hel")
    draft = PartRecord(run="r", slot=0, role=SlotRole.ANSWER, message_id="99", shown="Hel", streaming=True)
    await ledger.record_outcome(call, draft, "ack")
    assert [p.streaming for p in await ledger.parts("r")] == [True]
    await ledger.close()


async def test_many_writers_share_commits_and_a_failing_unit_fails_alone(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "store.sqlite3")
    ledger, journal = await SqliteLedger.on(store), await SqliteJournal.on(store)
    await ledger.start_run(RunRecord(run="r", channel="c", target={"chat_id": 1}, mode="preview"))

    def boom(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO runs (run) VALUES (NULL)")  # NOT NULL constraints: fails

    writes: list[Coroutine[Any, Any, object]] = [
        journal.append([JournalEntry("r", f'{{"n": {i}}}')]) for i in range(50)
    ]
    writes += [ledger.record_intent("r", i, SlotRole.ANSWER, "send", f"t{i}") for i in range(50)]
    before = store.commits
    await asyncio.gather(*writes)
    assert store.commits - before < 10  # grouped: far fewer commits than writes
    more = [journal.append([JournalEntry("r", f'{{"m": {i}}}')]) for i in range(10)]
    results = await asyncio.gather(*more, store.transaction(boom), return_exceptions=True)
    assert isinstance(results[-1], sqlite3.IntegrityError)  # the failing unit fails alone
    assert not any(isinstance(r, BaseException) for r in results[:-1])
    assert len(await journal.lines("r")) == 60
    await store.close()
