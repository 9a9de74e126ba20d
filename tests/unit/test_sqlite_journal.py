"""The SQLite journal's end of a run: marked ended at once, its lines deleted in the store's background lane (never
ahead of a ledger intent), and lines a kill left behind swept at the next open."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from streamrelay.adapters.sqlite import SqliteJournal, SqliteStore
from streamrelay.adapters.sqlite.journal import SWEEP_ROWS
from streamrelay.core.records.journal import IdleClose, JournalEntry


async def _rows(store: SqliteStore, run: str) -> int:
    return int((await store.fetch("SELECT COUNT(*) FROM journal WHERE run = ?", (run,)))[0][0])


async def _idle(store: SqliteStore) -> None:
    """Wait until every unit handed to ``store`` (the background lane too) is committed."""
    await store.transaction(lambda db: None, background=True)


async def test_a_finished_run_is_not_unfinished_at_once_and_its_lines_go_in_the_background(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "j.sqlite3")
    journal = await SqliteJournal.on(store)
    await journal.append([JournalEntry(run, f'{{"n": {i}}}') for run in ("a", "b") for i in range(100)])
    assert await journal.unfinished() == ["a", "b"]
    await journal.finish("a", 99)
    assert await journal.unfinished() == ["b"]
    assert (await journal.ended("a")) is not None
    await _idle(store)
    assert await _rows(store, "a") == 0
    assert await _rows(store, "b") == 100
    await journal.close()
    await store.close()


async def test_background_units_never_go_ahead_of_waiting_ones(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "order.sqlite3")
    order: list[str] = []

    def unit(name: str) -> Callable[[sqlite3.Connection], None]:
        def work(db: sqlite3.Connection) -> None:
            order.append(name)

        return work

    # handed over in one loop turn: the background ones first, then the foreground ones
    handed: list[Coroutine[Any, Any, None]] = [store.transaction(unit(f"bg{i}"), background=True) for i in range(5)]
    handed += [store.transaction(unit(f"fg{i}")) for i in range(3)]
    await asyncio.gather(*handed)
    assert order[:3] == ["fg0", "fg1", "fg2"]
    assert sorted(order[3:]) == [f"bg{i}" for i in range(5)]
    await store.close()


async def test_lines_left_by_a_kill_before_their_delete_are_swept_at_open(tmp_path: Path) -> None:
    path = tmp_path / "left.sqlite3"
    store = await SqliteStore.open(path)
    journal = await SqliteJournal.on(store)
    await _idle(store)
    await journal.append([JournalEntry("gone", f'{{"n": {i}}}') for i in range(SWEEP_ROWS + 500)])
    await journal.append([JournalEntry("open", '{"n": 0}')])
    # the run's end was committed, its lines' delete never ran (a kill -9 between the two)
    await store.transaction(
        lambda db: db.execute("INSERT INTO journal_ended (run, last_seq, ended_at) VALUES ('gone', 1, 0)")
    )
    await journal.close()
    await store.close()

    store = await SqliteStore.open(path)
    journal = await SqliteJournal.on(store)
    assert await journal.unfinished() == ["open"]  # before the sweep too
    assert journal._leftovers is not None
    await journal._leftovers
    assert await _rows(store, "gone") == 0
    assert await journal.lines("open") == ['{"n": 0}']
    await journal.close()
    await store.close()


async def test_an_idle_close_is_durable_until_the_run_finishes(tmp_path: Path) -> None:
    """The idle close's commit point (``close_idle``) is a row a reopened file still has (a kill -9 after it resumes
    the run closed); ``finish`` and ``erase`` forget it; a file written before the table existed gains it at open."""
    path = tmp_path / "idle.sqlite3"
    with sqlite3.connect(path) as db:  # a journal file of an older version: no journal_idle_closed table
        db.execute("CREATE TABLE journal (id INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT, line TEXT, at REAL)")
        db.execute("CREATE TABLE journal_ended (run TEXT PRIMARY KEY, last_seq INTEGER, ended_at REAL NOT NULL)")
        db.execute("INSERT INTO journal (run, line, at) VALUES ('old', '{}', 0)")
    journal = await SqliteJournal.open(path)
    assert await journal.unfinished() == ["old"] and await journal.idle_closed("old") is None
    await journal.append([JournalEntry(run, '{"kind": "text"}') for run in ("a", "b", "c")])
    await journal.close_idle("a", 4)
    await journal.close_idle("b", None)
    await journal.close_idle("b", 2, ended=True)  # again: the lines it took held its end
    await journal.close_idle("c", 7)
    await journal.close()
    journal = await SqliteJournal.open(path)  # as after a kill: only what was committed
    assert await journal.idle_closed("a") == IdleClose("a", 4)
    assert await journal.idle_closed("b") == IdleClose("b", 2, ended=True)
    await journal.finish("a", 4)
    assert await journal.erase(["c"]) == 1
    assert await journal.idle_closed("a") is None and await journal.idle_closed("c") is None
    assert await journal.idle_closed("b") == IdleClose("b", 2, ended=True)
    await journal.close()
