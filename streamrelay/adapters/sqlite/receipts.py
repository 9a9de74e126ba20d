"""SqliteReceipts: status receipts (:mod:`core.records.receipts`) in the ledger's SQLite file, table ``receipts``.

One row per ``(platform, delivery_id)``, kept at its strongest status (:data:`core.records.receipts.STATUS_RANK`);
a write is one group commit of the shared :class:`~adapters.sqlite.store.SqliteStore` (durable when it returns).
Rows last recorded before the retention are deleted by :meth:`SqliteReceipts.prune` (one ``DELETE`` on the index
``receipts_recorded``; the service calls it every 30 s: :func:`app.serving.keep_receipts`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from streamrelay.adapters.sqlite.store import SqliteStore
from streamrelay.core.records.receipts import STATUS_RANK, Receipt, ReceiptStatus

_SCHEMA = """
CREATE TABLE IF NOT EXISTS receipts (
    platform TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    status TEXT NOT NULL,
    rank INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    error_code INTEGER,
    recorded_at REAL NOT NULL,
    PRIMARY KEY (platform, delivery_id)
);
CREATE INDEX IF NOT EXISTS receipts_heard ON receipts (platform, recorded_at);
CREATE INDEX IF NOT EXISTS receipts_recorded ON receipts (recorded_at)
"""

PRUNE = "DELETE FROM receipts WHERE recorded_at < ?"
"""Delete the rows last recorded before the bound (Unix seconds): a range on ``receipts_recorded``."""

_UPSERT = """
INSERT INTO receipts (platform, delivery_id, status, rank, message_id, error_code, recorded_at)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (platform, delivery_id) DO UPDATE SET
    status = CASE WHEN excluded.rank > receipts.rank THEN excluded.status ELSE receipts.status END,
    message_id = CASE WHEN excluded.rank > receipts.rank THEN excluded.message_id ELSE receipts.message_id END,
    error_code = CASE WHEN excluded.rank > receipts.rank THEN excluded.error_code ELSE receipts.error_code END,
    rank = MAX(receipts.rank, excluded.rank),
    recorded_at = MAX(receipts.recorded_at, excluded.recorded_at)
"""


class SqliteReceipts:
    """:class:`core.records.receipts.Receipts` in ``store`` (use :meth:`on`)."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    @classmethod
    async def on(cls, store: SqliteStore) -> SqliteReceipts:
        """The receipts of ``store`` (its table created if missing)."""
        await store.executescript(_SCHEMA)
        return cls(store)

    def __repr__(self) -> str:
        return f"SqliteReceipts({self._store.path!r})"

    async def record(self, platform: str, receipts: Sequence[Receipt]) -> None:
        """Keep ``receipts`` in one commit (each merged with the row of its delivery id)."""
        rows = [
            (platform, r.delivery_id, str(r.status), STATUS_RANK[r.status], r.message_id, r.error_code, r.recorded_at_s)
            for r in receipts
        ]
        if not rows:
            return

        def write(db: sqlite3.Connection) -> None:
            db.executemany(_UPSERT, rows)

        await self._store.transaction(write)

    async def find(self, platform: str, delivery_id: str) -> Receipt | None:
        """The receipt of ``delivery_id``, or None."""
        rows = await self._store.fetch(
            "SELECT status, message_id, error_code, recorded_at FROM receipts WHERE platform = ? AND delivery_id = ?",
            (platform, delivery_id),
        )
        if not rows:
            return None
        status, message_id, code, at = rows[0]
        return Receipt(delivery_id, ReceiptStatus(status), message_id, code, at)

    async def last_heard_s(self, platform: str) -> float | None:
        """When the newest receipt of ``platform`` was recorded (Unix seconds), or None."""
        rows = await self._store.fetch("SELECT MAX(recorded_at) FROM receipts WHERE platform = ?", (platform,))
        return None if not rows or rows[0][0] is None else float(rows[0][0])

    async def prune(self, recorded_before_s: float) -> int:
        """Delete the rows last recorded before ``recorded_before_s`` (Unix seconds) in one commit; return how many."""

        def prune(db: sqlite3.Connection) -> int:
            return db.execute(PRUNE, (recorded_before_s,)).rowcount

        return await self._store.transaction(prune, background=True)
