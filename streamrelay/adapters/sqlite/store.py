"""One SQLite file for the journal and the ledger: one connection, one transaction at a time, group-committed.

Every write is a unit of work handed to :meth:`SqliteStore.transaction`: a plain function of the connection. One
writer task runs all the units that are waiting in one ``BEGIN IMMEDIATE`` … ``COMMIT``, in one call to the
connection's thread (a failing unit rolls the batch back, and the batch is run
again unit by unit so that unit fails alone), and each caller returns once that commit is done: many runs'
ledger intents and outcomes and the journal's lines cost one fsync. Coroutines never share a half-done
transaction and a failed statement never leaves the connection inside one (the cause of "database is locked"
cascades when many resumed runs wrote at once through shared, implicit transactions). ``BEGIN IMMEDIATE`` takes
the write lock up front: waiting for another process (``busy_timeout``) happens there, never as an instant
SQLITE_BUSY when a read transaction is upgraded. WAL with ``synchronous=FULL``: a commit survives a kill -9 and a
power loss. https://www.sqlite.org/lang_transaction.html, https://www.sqlite.org/wal.html

Housekeeping that nobody waits for (a finished run's journal lines deleted: ~740 rows, several milliseconds) is
handed over with ``background=True``: it runs only when no other unit waits, :data:`BACKGROUND_BATCH` units at a
time, so a ledger intent (which holds a platform call back until it is durable) never queues behind it. Measured
with 100 runs ending within a second (bench/bench_load.py): the deletes in every batch held the sends' intents and
the p99 event-to-call was 450 ms; with them in the background, ~80 ms.

Why not a library: this is the durability of the journal and ledger themselves (the project's core); aiosqlite
runs the connection on its thread, SQLite does the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from streamrelay.adapters.sqlite.lock import FileLock
from streamrelay.core.errors import StoreUnavailableError

T = TypeVar("T")
Work = Callable[[sqlite3.Connection], Any]
"""A unit of writes: a plain function run on the connection's thread, inside its batch's transaction."""
Settled = tuple["asyncio.Future[Any]", Any, BaseException | None]

BUSY_TIMEOUT_MS = 10_000
"""How long a write waits for another process's write lock before it fails."""
CACHE_KIB = 512
"""SQLite's page cache for the one connection, in KiB (``PRAGMA cache_size=-512``; SQLite's default is 2000 KiB). The
cache fills up to its cap as the file grows and keeps it, in malloc memory tracemalloc does not see: with the default,
100 open runs of the 8.5k answer held 2.1 MB of it (18.6 KB of RSS per open run in bench/bench_memory.py). The
journal's and ledger's writes touch the b-trees' last pages and their indexes' few hot pages; a page not cached is
read from the OS's file cache. https://www.sqlite.org/pragma.html#pragma_cache_size"""
BACKGROUND_BATCH = 2
"""Background units run in one transaction at most (each a few milliseconds): the longest a unit handed over while
they run waits for them."""


class _UnitFailed(Exception):
    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


_UNWRITABLE = {
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PERM,
}
_UNWRITABLE_TEXT = ("disk is full", "readonly database", "disk i/o error", "unable to open")


def unwritable(error: BaseException) -> bool:
    """Whether ``error`` says the file cannot be written now (full, read-only, an I/O error, gone), not a bug."""
    if not isinstance(error, sqlite3.OperationalError | sqlite3.DatabaseError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _UNWRITABLE
    return any(text in str(error).lower() for text in _UNWRITABLE_TEXT)


PROBE_BYTES = 256 * 1024
"""What the readiness probe writes (then frees) after a write failed: proof the file can grow again."""


def _identity(path: str) -> tuple[int, int] | None:
    """The file at ``path`` as (device, inode); None for ``:memory:`` or a file that is not there."""
    if path == ":memory:":
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


class SqliteStore:
    """The connection to one SQLite file, shared by the journal and the ledger of one process.

    Use :meth:`open`; ``":memory:"`` works for tests.
    """

    def __init__(self, db: aiosqlite.Connection, path: str, lock: FileLock | None = None) -> None:
        self._db = db
        self.path = path
        self._file_lock = lock
        self._lock = asyncio.Lock()
        self._closed = False
        self._queue: list[tuple[Work, asyncio.Future[Any]]] = []
        self._background: list[tuple[Work, asyncio.Future[Any]]] = []
        self._writer: asyncio.Task[None] | None = None
        self.commits = 0
        self.write_failure: str | None = None
        """Why a write transaction failed (``OperationalError: database or disk is full``), None once a probe write
        of :data:`PROBE_BYTES` succeeds again (:meth:`ping`): the readiness probe says so at once."""
        self._identity = _identity(path)

    @classmethod
    async def open(cls, path: str | Path) -> SqliteStore:
        """Open (and create) the file; its folder is created if missing. The file is this process's until
        :meth:`close` (:mod:`.lock`: a second sidecar on it would resume and deliver the same runs).

        Raises:
            LedgerLockedError: another process has the file open (the message names the file and its pid).
            sqlite3.Error: the file cannot be opened or is not a database.
        """
        path = str(path)
        lock = None
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            lock = await FileLock.acquire(path)
        try:
            db = await aiosqlite.connect(path, isolation_level=None)  # transactions are explicit (write())
            await db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA synchronous=FULL")
            await db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            await db.execute(
                "CREATE TABLE IF NOT EXISTS store_probe (id INTEGER PRIMARY KEY, at REAL NOT NULL, pad BLOB)"
            )
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        return cls(db, path, lock)

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    async def transaction(self, work: Callable[[sqlite3.Connection], T], *, background: bool = False) -> T:
        """Run ``work`` in the next group commit; return its result once that commit is durable. ``work`` is a plain
        function of the connection, run on its thread with the rest of the batch (it must do nothing but SQLite).
        ``background``: housekeeping, run only when no other unit waits (module docstring).

        Raises:
            Exception: what ``work`` raised (only its own writes are rolled back), or the commit's failure.
        """
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        (self._background if background else self._queue).append((work, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write(), name="sqlite-writer")
        return await done

    async def _write(self) -> None:
        while self._queue or self._background:
            if self._queue:
                batch, self._queue = self._queue, []
            else:
                batch, self._background = self._background[:BACKGROUND_BATCH], self._background[BACKGROUND_BATCH:]
            try:
                async with self._lock:
                    # One hop to the connection's thread for the whole batch: BEGIN, every unit, COMMIT. Each statement
                    # awaited on its own cost a round trip through the event loop, and under load (a thousand runs'
                    # ingest) a loop iteration each: 2,000 statements took seconds while the loop was far from full.
                    settled: list[Settled] = await self._db._execute(self._commit, batch)  # type: ignore[no-untyped-call]
            except BaseException:
                for _, done in batch:  # cancelled (shutdown): the batch may still commit; its callers stop waiting
                    done.cancel()
                raise
            for done, result, error in settled:
                if done.done():
                    continue
                if error is not None and unwritable(error):
                    # the file cannot be written (full, read-only, I/O error): not ready until a probe write succeeds;
                    # a run meeting it stops where it is and resumes from the journal then (core.errors)
                    self.write_failure = f"{type(error).__name__}: {error}"
                    unavailable = StoreUnavailableError(f"{self.path} cannot be written ({self.write_failure})")
                    unavailable.__cause__ = error
                    done.set_exception(unavailable)
                elif error is not None:
                    done.set_exception(error)
                else:
                    done.set_result(result)
            # The connection's thread keeps its last job (this batch) until the next one: emptied, the batch no longer
            # holds its units' values (a part's record with its whole text) while the store is idle.
            batch.clear()

    def _commit(self, batch: list[tuple[Work, asyncio.Future[Any]]]) -> list[Settled]:
        """One transaction for ``batch`` (on the connection's thread); the outcome of each unit. When a unit fails, the
        transaction is rolled back and each unit runs again in a transaction of its own, so it fails alone (rare: a
        bug or a full disk)."""
        conn = self._db._connection
        assert conn is not None
        try:
            return self._in_one(conn, batch)
        except _UnitFailed:
            settled: list[Settled] = []
            for unit in batch:
                try:
                    settled.extend(self._in_one(conn, [unit]))
                except _UnitFailed as failed:
                    settled.append((unit[1], None, failed.error))
            return settled

    def _in_one(self, conn: sqlite3.Connection, batch: list[tuple[Work, asyncio.Future[Any]]]) -> list[Settled]:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except Exception as exc:
            return [(done, None, exc) for _, done in batch]
        settled: list[Settled] = []
        for work, done in batch:
            try:
                settled.append((done, work(conn), None))
            except Exception as exc:
                with contextlib.suppress(Exception):
                    conn.execute("ROLLBACK")
                raise _UnitFailed(exc) from exc
        try:
            conn.execute("COMMIT")
            self.commits += 1
        except Exception as exc:
            with contextlib.suppress(Exception):
                conn.execute("ROLLBACK")
            return [(done, None, exc) for _, done in batch]
        return settled

    async def ping(self, tables: Sequence[str] = ()) -> None:
        """A cheap read proving the file answers (the readiness probe's): its schema, with ``tables`` in it; the file
        at ``path`` is still the one opened (not deleted nor replaced: writes would go to a file nobody reads again);
        and, after a write failed, a small write that succeeds (the disk healed: ready again).

        Raises:
            LookupError: one of ``tables`` is missing.
            OSError: the file was deleted or replaced under the running process.
            sqlite3.Error | ValueError: the file cannot be read or written, or the store is closed.
        """
        if self._identity is not None and _identity(self.path) != self._identity:
            raise FileNotFoundError(
                f"{self.path} was deleted or replaced while open: what is written goes to a file no restart reads; "
                "restore it and restart the sidecar"
            )
        if self.write_failure is not None:

            def probe(db: sqlite3.Connection) -> None:
                # room for new pages (a full disk) and a writable file; the pages go back to the free list
                db.execute("INSERT OR REPLACE INTO store_probe VALUES (1, ?, zeroblob(?))", (time.time(), PROBE_BYTES))
                db.execute("DELETE FROM store_probe")

            try:
                await self.transaction(probe)
            except (sqlite3.Error, StoreUnavailableError) as exc:
                raise sqlite3.OperationalError(f"{self.path} cannot be written ({self.write_failure})") from exc
            self.write_failure = None
        found = {row[0] for row in await self.fetch("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = [table for table in tables if table not in found]
        if missing:
            raise LookupError(f"{self.path}: no table {', '.join(missing)}")

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one query, in one call to the connection's thread (no lock: that thread runs one job at a time
        and a write batch is one job, so a read never sees half a transaction).

        Raises:
            sqlite3.Error | ValueError: the query failed, or the store is closed.
        """

        def rows() -> list[Any]:
            conn = self._db._connection
            assert conn is not None
            return conn.execute(sql, tuple(params)).fetchall()

        found: list[Any] = await self._db._execute(rows)  # type: ignore[no-untyped-call]
        return found

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[aiosqlite.Connection]:
        """Reads, never inside another coroutine's transaction."""
        async with self._lock:
            yield self._db

    async def executescript(self, script: str) -> None:
        """Run a schema script (``CREATE … IF NOT EXISTS``; no ``;`` inside a statement) in one transaction."""

        def create(db: sqlite3.Connection) -> None:
            for statement in (part.strip() for part in script.split(";")):
                if statement:
                    db.execute(statement)

        await self.transaction(create)

    async def erase(self, work: Work) -> int:
        """Run ``work`` (deletes and updates that remove text) so that the removed bytes are in the file no more: in one
        transaction with ``secure_delete`` on (SQLite overwrites deleted content with zeros), then ``VACUUM`` (the
        file rebuilt: free pages, which may still hold text deleted earlier without it, are dropped) and a
        ``wal_checkpoint(TRUNCATE)`` (the write-ahead log, which holds the pages' old versions, emptied to zero bytes).
        https://www.sqlite.org/pragma.html#pragma_secure_delete, https://www.sqlite.org/lang_vacuum.html,
        https://www.sqlite.org/pragma.html#pragma_wal_checkpoint. Costs a rewrite of the whole file: an erasure is
        rare. Writes handed over meanwhile wait for it.

        Returns:
            What ``work`` returned (how many records it changed).

        Raises:
            sqlite3.Error: the file could not be written (the rows may be changed without the file compacted: ask
                again).
        """

        def run(conn: sqlite3.Connection) -> int:
            conn.execute("PRAGMA secure_delete = ON")
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    changed = int(work(conn))
                    conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(Exception):
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("VACUUM")
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if busy:
                    raise sqlite3.OperationalError(f"{self.path}: the write-ahead log could not be emptied (busy)")
                return changed
            finally:
                conn.execute("PRAGMA secure_delete = OFF")

        async with self._lock:
            changed: int = await self._db._execute(lambda: run(self._connection()))  # type: ignore[no-untyped-call]
        self.commits += 1
        return changed

    def _connection(self) -> sqlite3.Connection:
        conn = self._db._connection
        assert conn is not None
        return conn

    async def close(self) -> None:
        """Finish the writes already handed over, then close the connection."""
        if not self._closed:
            self._closed = True
            if self._writer is not None:
                with contextlib.suppress(Exception):
                    await self._writer
            try:
                async with self._lock:
                    await self._db.close()
            finally:
                if self._file_lock is not None:
                    self._file_lock.release()
