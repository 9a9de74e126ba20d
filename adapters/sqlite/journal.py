"""The SQLite journal (the embedded default): accepted input lines, group-committed, in the ledger's file.

Implements :class:`core.journal.Journal`. ``append`` returns once its lines are committed with
``synchronous=FULL`` (in WAL mode: the WAL is fsynced at every commit), so an accepted line survives a kill -9
and a power loss. Commits are grouped: every ``append`` waiting while a commit is in progress joins the next
one, so many lines (of one request's batch, or of concurrent requests) cost one fsync.

Why not a library: the group commit is the point (one writer task, a list of waiters); aiosqlite gives the
connection, and SQLite the durability.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from pathlib import Path

import aiosqlite

from core.journal import EndedRun, JournalEntry

_SCHEMA = """
PRAGMA journal_mode=WAL;
PRAGMA synchronous=FULL;
PRAGMA busy_timeout=10000;
CREATE TABLE IF NOT EXISTS journal (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT NOT NULL, line TEXT NOT NULL, at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS journal_run ON journal (run, id);
CREATE TABLE IF NOT EXISTS journal_ended (
    run TEXT PRIMARY KEY, last_seq INTEGER, ended_at REAL NOT NULL
);
"""


class SqliteJournal:
    """A journal in one SQLite file (the ledger's file by default: one file to back up).

    Use :meth:`open` (``await SqliteJournal.open(path)``); ``":memory:"`` works for tests.
    """

    def __init__(self, db: aiosqlite.Connection, path: str) -> None:
        self._db = db
        self.path = path
        self._pending: list[tuple[Sequence[JournalEntry], asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None
        self.commits = 0

    @classmethod
    async def open(cls, path: str | Path) -> SqliteJournal:
        """Open (and create) the journal tables in ``path``; its folder is created if missing."""
        path = str(path)
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(path)
        await db.executescript(_SCHEMA)
        await db.commit()
        return cls(db, path)

    def __repr__(self) -> str:
        return f"SqliteJournal({self.path!r})"

    async def append(self, entries: Sequence[JournalEntry]) -> None:
        if not entries:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((entries, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name="journal-writer")
        await done

    async def _write(self) -> None:
        """Commit everything pending, batch after batch, until nothing is left (one transaction per batch)."""
        while self._pending:
            batch, self._pending = self._pending, []
            now = time.time()
            rows = [(e.run, e.line, now) for entries, _ in batch for e in entries]
            try:
                await self._db.executemany("INSERT INTO journal (run, line, at) VALUES (?, ?, ?)", rows)
                await self._db.commit()
                self.commits += 1
            except Exception as exc:
                with contextlib.suppress(Exception):
                    await self._db.rollback()
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                continue
            for _, done in batch:
                if not done.done():
                    done.set_result(None)

    async def unfinished(self) -> list[str]:
        async with self._db.execute("SELECT run, MIN(id) AS first FROM journal GROUP BY run ORDER BY first") as cur:
            return [row[0] for row in await cur.fetchall()]

    async def lines(self, run: str) -> list[str]:
        async with self._db.execute("SELECT line FROM journal WHERE run = ? ORDER BY id", (run,)) as cur:
            return [row[0] for row in await cur.fetchall()]

    async def finish(self, run: str, last_seq: int | None) -> None:
        await self._db.execute(
            "INSERT INTO journal_ended (run, last_seq, ended_at) VALUES (?, ?, ?)"
            " ON CONFLICT (run) DO UPDATE SET last_seq = excluded.last_seq, ended_at = excluded.ended_at",
            (run, last_seq, time.time()),
        )
        await self._db.execute("DELETE FROM journal WHERE run = ?", (run,))
        await self._db.commit()

    async def ended(self, run: str) -> EndedRun | None:
        async with self._db.execute("SELECT last_seq FROM journal_ended WHERE run = ?", (run,)) as cur:
            row = await cur.fetchone()
        return EndedRun(run, row[0]) if row is not None else None

    async def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                await self._writer
        await self._db.close()
