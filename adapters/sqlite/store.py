"""One SQLite file for the journal and the ledger: one connection, one transaction at a time, group-committed.

Every write is a unit of work handed to :meth:`SqliteStore.transaction`. One writer task runs all the units that
are waiting in one ``BEGIN IMMEDIATE`` … ``COMMIT`` (a failing unit rolls the batch back, and the batch is run
again unit by unit so that unit fails alone), and each caller returns once that commit is done: many runs'
ledger intents and outcomes and the journal's lines cost one fsync. Coroutines never share a half-done
transaction and a failed statement never leaves the connection inside one (the cause of "database is locked"
cascades when many resumed runs wrote at once through shared, implicit transactions). ``BEGIN IMMEDIATE`` takes
the write lock up front: waiting for another process (``busy_timeout``) happens there, never as an instant
SQLITE_BUSY when a read transaction is upgraded. WAL with ``synchronous=FULL``: a commit survives a kill -9 and a
power loss. https://www.sqlite.org/lang_transaction.html, https://www.sqlite.org/wal.html

Why not a library: this is the durability of the journal and ledger themselves (the project's core); aiosqlite
runs the connection on its thread, SQLite does the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

T = TypeVar("T")
Work = Callable[[aiosqlite.Connection], Awaitable[Any]]

BUSY_TIMEOUT_MS = 10_000
"""How long a write waits for another process's write lock before it fails."""


class _UnitFailed(Exception):
    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class SqliteStore:
    """The connection to one SQLite file, shared by the journal and the ledger of one process.

    Use :meth:`open`; ``":memory:"`` works for tests.
    """

    def __init__(self, db: aiosqlite.Connection, path: str) -> None:
        self._db = db
        self.path = path
        self._lock = asyncio.Lock()
        self._closed = False
        self._queue: list[tuple[Work, asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None
        self.commits = 0

    @classmethod
    async def open(cls, path: str | Path) -> SqliteStore:
        """Open (and create) the file; its folder is created if missing.

        Raises:
            sqlite3.Error: the file cannot be opened or is not a database.
        """
        path = str(path)
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(path, isolation_level=None)  # transactions are explicit (write())
        await db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=FULL")
        return cls(db, path)

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    async def transaction(self, work: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        """Run ``work`` in the next group commit; return its result once that commit is durable.

        Raises:
            Exception: what ``work`` raised (only its own writes are rolled back), or the commit's failure.
        """
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.append((work, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name="sqlite-writer")
        return await done

    async def _write(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            async with self._lock:
                settled = await self._commit(batch)
            for done, result, error in settled:
                if done.done():
                    continue
                if error is not None:
                    done.set_exception(error)
                else:
                    done.set_result(result)

    async def _commit(
        self, batch: list[tuple[Work, asyncio.Future[Any]]]
    ) -> list[tuple[asyncio.Future[Any], Any, BaseException | None]]:
        """One transaction for ``batch``; the outcome of each unit. When a unit fails, the transaction is rolled back
        and each unit runs again in a transaction of its own, so it fails alone (rare: a bug or a full disk)."""
        try:
            return await self._in_one(batch)
        except _UnitFailed:
            settled: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
            for unit in batch:
                try:
                    settled.extend(await self._in_one([unit]))
                except _UnitFailed as failed:
                    settled.append((unit[1], None, failed.error))
            return settled

    async def _in_one(
        self, batch: list[tuple[Work, asyncio.Future[Any]]]
    ) -> list[tuple[asyncio.Future[Any], Any, BaseException | None]]:
        db = self._db
        try:
            await db.execute("BEGIN IMMEDIATE")
        except Exception as exc:
            return [(done, None, exc) for _, done in batch]
        settled: list[tuple[asyncio.Future[Any], Any, BaseException | None]] = []
        for work, done in batch:
            try:
                settled.append((done, await work(db), None))
            except Exception as exc:
                with contextlib.suppress(Exception):
                    await db.execute("ROLLBACK")
                raise _UnitFailed(exc) from exc
            except BaseException:  # cancelled (shutdown): never leave the connection inside a transaction
                with contextlib.suppress(Exception):
                    await asyncio.shield(db.execute("ROLLBACK"))
                raise
        try:
            await db.execute("COMMIT")
            self.commits += 1
        except Exception as exc:
            with contextlib.suppress(Exception):
                await db.execute("ROLLBACK")
            return [(done, None, exc) for _, done in batch]
        return settled

    async def ping(self, tables: Sequence[str] = ()) -> None:
        """A cheap read proving the file answers (the readiness probe's): its schema, with ``tables`` in it.

        Raises:
            LookupError: one of ``tables`` is missing.
            sqlite3.Error | ValueError: the file cannot be read, or the store is closed.
        """
        async with self.read() as db, db.execute("SELECT name FROM sqlite_master WHERE type = 'table'") as cur:
            found = {row[0] for row in await cur.fetchall()}
        missing = [table for table in tables if table not in found]
        if missing:
            raise LookupError(f"{self.path}: no table {', '.join(missing)}")

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[aiosqlite.Connection]:
        """Reads, never inside another coroutine's transaction."""
        async with self._lock:
            yield self._db

    async def executescript(self, script: str) -> None:
        """Run a schema script (``CREATE … IF NOT EXISTS``; no ``;`` inside a statement) in one transaction."""

        async def create(db: aiosqlite.Connection) -> None:
            for statement in (part.strip() for part in script.split(";")):
                if statement:
                    await db.execute(statement)

        await self.transaction(create)

    async def close(self) -> None:
        """Finish the writes already handed over, then close the connection."""
        if not self._closed:
            self._closed = True
            if self._writer is not None:
                with contextlib.suppress(Exception):
                    await self._writer
            async with self._lock:
                await self._db.close()
