"""The SQLite journal (the embedded default): accepted input lines, group-committed, in the ledger's file.

Implements :class:`core.records.journal.Journal`. ``append`` returns once its lines are committed with
``synchronous=FULL`` (in WAL mode: the WAL is fsynced at every commit), so an accepted line survives a kill -9
and a power loss. Commits are grouped: every ``append`` waiting while a commit is in progress joins the next
one, so many lines (of one request's batch, of concurrent requests, and the ledger's writes meanwhile) cost one
fsync: the store groups them (:mod:`.store`).

Why not a library: see :mod:`.store`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from streamrelay.adapters.sqlite.store import SqliteStore
from streamrelay.core.clock import boot_seconds
from streamrelay.core.records.journal import EndedRun, IdleClose, JournalEntry

_log = logging.getLogger("streamrelay.journal")

SWEEP_ROWS = 2000
"""Lines of ended runs one background sweep unit deletes at most (a few milliseconds of the store's thread)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS journal (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT NOT NULL, line TEXT NOT NULL, at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS journal_run ON journal (run, id);
CREATE TABLE IF NOT EXISTS journal_ended (
    run TEXT PRIMARY KEY, last_seq INTEGER, ended_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS journal_idle_closed (
    run TEXT PRIMARY KEY, last_seq INTEGER, ended INTEGER NOT NULL, closed_at REAL NOT NULL
);
DROP TABLE IF EXISTS journal_clock;
"""
# journal.at: when a line was accepted, on the boot clock (core.clock.boot_seconds) of the boot that wrote it.
# journal_clock (the boot that wrote journal.at, for a quiet time no reader uses now) is dropped from older files.
# journal_idle_closed: the idle closes of runs not finished yet (SqliteJournal.close_idle), a row per run, deleted with
# the run's finish. A file written before it gains the table at its next open (nothing to migrate: no run of it was
# closed so); an older version opening a newer file ignores the table (its runs resume open, as they did there).


class SqliteJournal:
    """A journal in one SQLite file (the ledger's file by default: one file to back up).

    Use :meth:`open` (``await SqliteJournal.open(path)``); ``":memory:"`` works for tests.
    """

    def __init__(self, store: SqliteStore, *, owned: bool = False) -> None:
        self._store = store
        self._owned = owned
        self._sweeps: set[asyncio.Future[object]] = set()
        self._leftovers: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, path: str | Path) -> SqliteJournal:
        """Open (and create) the journal in its own store (the service shares one with the ledger: :meth:`on`)."""
        return await cls.on(await SqliteStore.open(path), owned=True)

    @classmethod
    async def on(cls, store: SqliteStore, *, owned: bool = False) -> SqliteJournal:
        """The journal in ``store`` (tables created); ``owned``: closed with it. Lines of ended runs left by a kill
        before their background delete are swept in the background, :data:`SWEEP_ROWS` at a time."""
        await store.executescript(_SCHEMA)
        journal = cls(store, owned=owned)
        journal._leftovers = asyncio.create_task(journal._sweep_leftovers(), name="journal-sweep")
        return journal

    async def _sweep_leftovers(self) -> None:
        def chunk(db: sqlite3.Connection) -> int:
            return db.execute(
                "DELETE FROM journal WHERE id IN (SELECT id FROM journal"
                " WHERE run IN (SELECT run FROM journal_ended) LIMIT ?)",
                (SWEEP_ROWS,),
            ).rowcount

        try:
            while await self._store.transaction(chunk, background=True) >= SWEEP_ROWS:
                pass
        except Exception as exc:  # the lines stay until the next start; no run reads them
            _log.warning("journal: lines of ended runs not swept: %s", exc)

    @property
    def path(self) -> str:
        return self._store.path

    def __repr__(self) -> str:
        return f"SqliteJournal({self.path!r})"

    async def append(self, entries: Sequence[JournalEntry]) -> None:
        if not entries:
            return
        now = boot_seconds()
        # The rows are made on the connection's thread as SQLite reads them (a generator made afresh each time the
        # unit runs: a failed group commit runs it again), not as a list built before the wait for the group commit:
        # while a batch waits, only its entries are held (a row tuple a line less per batch in flight, per open run).
        await self._store.transaction(
            lambda db: db.executemany(
                "INSERT INTO journal (run, line, at) VALUES (?, ?, ?)", ((run, line, now) for run, line in entries)
            )
        )

    async def unfinished(self) -> list[str]:
        # A finished run's lines are deleted in the background (finish): until then, or after a kill before it, they
        # are still here, and the run is not unfinished.
        query = (
            "SELECT run, MIN(id) AS first FROM journal WHERE run NOT IN (SELECT run FROM journal_ended)"
            " GROUP BY run ORDER BY first"
        )
        return [row[0] for row in await self._store.fetch(query)]

    async def lines(self, run: str) -> list[str]:
        return [row[0] for row in await self._store.fetch("SELECT line FROM journal WHERE run = ? ORDER BY id", (run,))]

    async def last_at(self, run: str) -> float | None:
        """When ``run``'s newest line was accepted: :func:`core.clock.boot_seconds` of the boot that wrote it."""
        rows = await self._store.fetch("SELECT MAX(at) FROM journal WHERE run = ?", (run,))
        row = rows[0] if rows else None
        return float(row[0]) if row is not None and row[0] is not None else None

    async def finish(self, run: str, last_seq: int | None) -> None:
        """Mark ``run`` ended (durable when this returns: it is no longer :meth:`unfinished`), then delete its lines
        in the background (:mod:`.store`): nobody waits for the delete, and one left by a kill is swept at the
        next :meth:`on`."""

        def finished(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO journal_ended (run, last_seq, ended_at) VALUES (?, ?, ?)"
                " ON CONFLICT (run) DO UPDATE SET last_seq = excluded.last_seq, ended_at = excluded.ended_at",
                (run, last_seq, time.time()),
            )
            db.execute("DELETE FROM journal_idle_closed WHERE run = ?", (run,))

        await self._store.transaction(finished)
        self._sweep(lambda db: db.execute("DELETE FROM journal WHERE run = ?", (run,)))

    def _sweep(self, work: Callable[[sqlite3.Connection], object]) -> None:
        """Hand ``work`` (deleting lines of ended runs) to the store's background lane; a failure is logged, never
        raised: the lines stay until the next sweep and no run reads them."""
        future = asyncio.ensure_future(self._store.transaction(work, background=True))
        self._sweeps.add(future)
        future.add_done_callback(self._swept)

    def _swept(self, future: asyncio.Future[object]) -> None:
        self._sweeps.discard(future)
        if not future.cancelled() and future.exception() is not None:
            _log.warning("journal: lines of an ended run not deleted yet: %s", future.exception())

    async def erase(self, runs: Sequence[str]) -> int:
        """Remove ``runs``' lines from this file (:class:`core.records.erase.Erasable`), byte for byte
        (:meth:`SqliteStore.erase`: an ended run's lines were deleted at its end, perhaps without zeroing: the file
        is rebuilt). Kept: that it ended, and its last ``seq``.

        Returns:
            How many lines were still journaled.
        """

        def erased(db: sqlite3.Connection) -> int:
            db.executemany("DELETE FROM journal_idle_closed WHERE run = ?", [(run,) for run in runs])
            return sum(db.execute("DELETE FROM journal WHERE run = ?", (run,)).rowcount for run in runs)

        return await self._store.erase(erased)

    async def ended(self, run: str) -> EndedRun | None:
        query = "SELECT last_seq FROM journal_ended WHERE run = ?"
        rows = await self._store.fetch(query, (run,))
        return EndedRun(run, rows[0][0]) if rows else None

    async def close_idle(self, run: str, last_seq: int | None, *, ended: bool = False) -> None:
        """The idle close's commit point (:meth:`core.records.journal.Journal.close_idle`): ``run`` closed by the idle
        timeout at ``last_seq`` (``ended``: it took its own ``end``), durable when this returns (one commit, grouped
        with the store's others). Admission refuses the run's later lines itself (the run is closing); this row is
        what a restart finds (:meth:`idle_closed`): before it, a kill after the close's notice resumed the run open,
        it took its agent's later lines and ended ``delivered`` under the "stopped here" notice (chaos-10-00017).

        Raises:
            sqlite3.Error | OSError: the mark was not written (the run is not closed: nothing of it is shown).
        """

        def mark(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO journal_idle_closed (run, last_seq, ended, closed_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (run) DO UPDATE SET last_seq = excluded.last_seq, ended = excluded.ended,"
                " closed_at = excluded.closed_at",
                (run, last_seq, int(ended), time.time()),
            )

        await self._store.transaction(mark)

    async def idle_closed(self, run: str) -> IdleClose | None:
        rows = await self._store.fetch("SELECT last_seq, ended FROM journal_idle_closed WHERE run = ?", (run,))
        return IdleClose(run, rows[0][0], bool(rows[0][1])) if rows else None

    async def close(self) -> None:
        if self._leftovers is not None:
            self._leftovers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._leftovers
        if self._owned:
            await self._store.close()
