"""The SQLite ledger (the embedded default): the journal's file, one transaction at a time (:mod:`.store`).

Implements :class:`core.records.ledger.Ledger`. Every call's intent is committed before the call is made and its
outcome after, so a restart knows which messages exist (edit them) and which creates are unknown (settle them,
never send them again blindly).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection, Sequence
from pathlib import Path

from streamrelay.adapters.sqlite.store import SqliteStore
from streamrelay.core.budgets.history import IN_FLIGHT_S, RecentCall
from streamrelay.core.delivery.slots import OpKind
from streamrelay.core.ports import PendingSend, TextFormat
from streamrelay.core.records.corrections import CorrectionRecord, CorrectionState
from streamrelay.core.records.desk import OPEN_STATES, DeskEntry, DeskState
from streamrelay.core.records.ledger import PartRecord, RunRecord, content_key
from streamrelay.core.records.report import PartState, SlotRole

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run TEXT PRIMARY KEY, channel TEXT NOT NULL, target TEXT NOT NULL, mode TEXT NOT NULL,
    end_status TEXT, ended INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, ended_at REAL, errors TEXT
);
CREATE TABLE IF NOT EXISTS parts (
    run TEXT NOT NULL, slot INTEGER NOT NULL, role TEXT NOT NULL, state TEXT NOT NULL,
    message_id TEXT, shown TEXT, content_key TEXT, degraded INTEGER NOT NULL DEFAULT 0, error TEXT,
    updated_at REAL NOT NULL, streaming INTEGER NOT NULL DEFAULT 0, pending TEXT, frozen INTEGER NOT NULL DEFAULT 0,
    continues INTEGER, unbounded TEXT, stray TEXT, precedes INTEGER, PRIMARY KEY (run, slot)
);
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT NOT NULL, slot INTEGER NOT NULL, role TEXT NOT NULL,
    op TEXT NOT NULL, text_key TEXT NOT NULL, chars INTEGER NOT NULL, outcome TEXT, detail TEXT,
    intent_at REAL NOT NULL, outcome_at REAL
);
CREATE INDEX IF NOT EXISTS calls_run ON calls (run);
CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY, run TEXT NOT NULL, client TEXT NOT NULL, slot INTEGER NOT NULL, role TEXT NOT NULL,
    state TEXT NOT NULL, was TEXT NOT NULL, channel TEXT NOT NULL, target TEXT NOT NULL, text TEXT NOT NULL,
    fmt TEXT NOT NULL, error TEXT, pending TEXT, message_id TEXT, ended_at REAL NOT NULL, updated_at REAL NOT NULL,
    resends INTEGER NOT NULL DEFAULT 0, note TEXT, outcome TEXT
);
CREATE INDEX IF NOT EXISTS deliveries_state ON deliveries (state, ended_at);
CREATE INDEX IF NOT EXISTS deliveries_ended ON deliveries (ended_at);
CREATE TABLE IF NOT EXISTS corrections (
    run TEXT NOT NULL, id TEXT NOT NULL, state TEXT NOT NULL, created_at REAL NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (run, id)
);
"""


_ADDED_COLUMNS = (
    ("streaming", "INTEGER NOT NULL DEFAULT 0"),
    ("pending", "TEXT"),
    ("frozen", "INTEGER NOT NULL DEFAULT 0"),
    ("continues", "INTEGER"),
    ("unbounded", "TEXT"),
    ("stray", "TEXT"),
    ("precedes", "INTEGER"),
)


_RECENT_PAGE = 1000
"""Calls read per query by :meth:`SqliteLedger.recent_calls`."""
_RECENT_SLACK_S = 120.0
"""How long before the window :meth:`SqliteLedger.recent_calls` still reads: a call's outcome comes after its intent
(a held or timed-out call; ids follow intents), so it stops at intents this much older than ``since_s``."""


def _pending_json(pending: PendingSend | None) -> str | None:
    if pending is None:
        return None
    fields = {"delivery_id": pending.delivery_id, "text": pending.text, "fmt": str(pending.fmt)}
    return json.dumps({**fields, "after_id": pending.after_id, "before_id": pending.before_id})


def _pending_from(raw: str | None) -> PendingSend | None:
    if raw is None:
        return None
    data = json.loads(raw)
    return PendingSend(
        data["delivery_id"],
        data["text"],
        TextFormat(data["fmt"]),
        after_id=data.get("after_id"),
        before_id=data.get("before_id"),
    )


_DESK_COLUMNS = (
    "id, run, client, slot, role, state, was, channel, target, text, fmt, error, pending, message_id, ended_at,"
    " updated_at, resends, note, outcome"
)


def _desk_row(entry: DeskEntry) -> tuple[object, ...]:
    return (
        entry.id,
        entry.run,
        entry.client,
        entry.slot,
        str(entry.role),
        str(entry.state),
        str(entry.was),
        entry.channel,
        json.dumps(entry.target),
        entry.text,
        str(entry.fmt),
        entry.error,
        _pending_json(entry.pending),
        entry.message_id,
        entry.ended_at,
        entry.updated_at,
        entry.resends,
        entry.note,
        entry.outcome,
    )


def _desk_entry(row: Sequence[object]) -> DeskEntry:
    (_, run, _, slot, role, state, was, channel, target, text, fmt, error, pending, message_id) = row[:14]
    ended_at, updated_at, resends, note, outcome = row[14:]
    return DeskEntry(
        run=str(run),
        slot=int(str(slot)),
        role=SlotRole(str(role)),
        state=DeskState(str(state)),
        was=DeskState(str(was)),
        channel=str(channel),
        target=json.loads(str(target)),
        text=str(text),
        fmt=TextFormat(str(fmt)),
        error=None if error is None else str(error),
        ended_at=float(str(ended_at)),
        updated_at=float(str(updated_at)),
        pending=_pending_from(None if pending is None else str(pending)),
        message_id=None if message_id is None else str(message_id),
        resends=int(str(resends)),
        note=None if note is None else str(note),
        outcome=None if outcome is None else str(outcome),
    )


_OF_RUN = "(run = ? OR (run > ? AND run < ?))"
"""A run's own ledger id and every id under it: its sub-agents' threads (``<run>/<child key>``) and a fan-out run's
later places (``<run>/to:<i>``, :func:`core.run.fanout.place_ledger_run`): every id starting ``<run>/`` sorts
between ``<run>/`` and ``<run>0`` (``0`` follows ``/``; a run id holds no ``/``), a range the index serves."""


def _of_run(run: str) -> tuple[str, str, str]:
    """The parameters of :data:`_OF_RUN` for ``run``."""
    return run, run + "/", run + "0"


def _erase_text(db: sqlite3.Connection, run: str) -> int:
    """Remove ``run``'s text from the ledger's tables (:meth:`SqliteLedger.erase`), its sub-agents' threads and
    fan-out places included (:data:`_OF_RUN`); how many rows held some."""
    changed = db.execute(
        f"UPDATE parts SET shown = NULL, pending = NULL, unbounded = NULL WHERE {_OF_RUN}"
        " AND (shown IS NOT NULL OR pending IS NOT NULL OR unbounded IS NOT NULL)",
        _of_run(run),
    ).rowcount
    changed += db.execute(
        f"UPDATE deliveries SET text = '', pending = NULL WHERE {_OF_RUN} AND (text != '' OR pending IS NOT NULL)",
        _of_run(run),
    ).rowcount
    changed += db.execute(f"DELETE FROM corrections WHERE {_OF_RUN}", _of_run(run)).rowcount
    return int(changed)


class SqliteLedger:
    """A ledger in one SQLite file.

    Use :meth:`open` (``await SqliteLedger.open(path)``); ``":memory:"`` works for tests.
    """

    def __init__(self, store: SqliteStore, *, owned: bool = False) -> None:
        self._store = store
        self._owned = owned

    @classmethod
    async def open(cls, path: str | Path) -> SqliteLedger:
        """Open (and create) the ledger in its own store (the service shares one with the journal: :meth:`on`)."""
        return await cls.on(await SqliteStore.open(path), owned=True)

    @classmethod
    async def on(cls, store: SqliteStore, *, owned: bool = False) -> SqliteLedger:
        """The ledger in ``store`` (tables created, older ledgers' columns added); ``owned``: closed with it."""
        await store.executescript(_SCHEMA)
        missing: list[str] = []
        for table, added in (("parts", _ADDED_COLUMNS), ("runs", (("errors", "TEXT"),))):
            async with store.read() as db, db.execute(f"PRAGMA table_info({table})") as cur:
                columns = {row[1] for row in await cur.fetchall()}
            missing += [f"ALTER TABLE {table} ADD COLUMN {n} {d}" for n, d in added if n not in columns]
        if missing:  # a ledger written by an older version
            await store.executescript(";".join(missing))
        return cls(store, owned=owned)

    @property
    def path(self) -> str:
        return self._store.path

    def __repr__(self) -> str:
        return f"SqliteLedger({self.path!r})"

    async def start_run(self, record: RunRecord) -> None:
        values = (record.run, record.channel, json.dumps(record.target), record.mode, time.time())
        sql = "INSERT OR IGNORE INTO runs (run, channel, target, mode, created_at) VALUES (?, ?, ?, ?, ?)"
        await self._store.transaction(lambda db: db.execute(sql, values))

    async def end_run(self, run: str, end_status: str, errors: Sequence[str] = ()) -> None:
        sql = "UPDATE runs SET end_status = ?, ended = 1, ended_at = ?, errors = ? WHERE run = ?"
        values = (end_status, time.time(), json.dumps(list(errors)), run)
        await self._store.transaction(lambda db: db.execute(sql, values))

    async def get_run(self, run: str) -> RunRecord | None:
        rows = await self._store.fetch(
            "SELECT run, channel, target, mode, end_status, ended, errors FROM runs WHERE run = ?", (run,)
        )
        if not rows:
            return None
        row = rows[0]
        return RunRecord(
            run=row[0],
            channel=row[1],
            target=json.loads(row[2]),
            mode=row[3],
            end_status=row[4],
            ended=bool(row[5]),
            errors=json.loads(row[6]) if row[6] else [],
        )

    async def runs_in(self, channel: str, chat_id: str) -> list[str]:
        """Every run on ``channel`` to chat ``chat_id`` (its target's ``chat_id`` as text), oldest first
        (:class:`core.records.erase.Conversations`)."""
        found = await self._store.fetch(
            "SELECT run FROM runs WHERE channel = ? AND CAST(json_extract(target, '$.chat_id') AS TEXT) = ?"
            " ORDER BY created_at",
            (channel, chat_id),
        )
        return [str(row[0]) for row in found]

    async def expire(self, channel: str, ended_before_s: float, limit: int) -> list[str]:
        """Remove the text of at most ``limit`` runs of ``channel`` that ended before ``ended_before_s`` (Unix
        seconds) and still hold some (:class:`core.records.erase.Expiring`), as :meth:`erase` does, in one rebuild of
        the file; the runs whose text went (oldest end first)."""
        found = await self._store.fetch(
            "SELECT run FROM runs WHERE channel = ? AND ended = 1 AND ended_at < ? AND ("
            " EXISTS (SELECT 1 FROM parts WHERE parts.run = runs.run AND (shown IS NOT NULL OR pending IS NOT NULL"
            " OR unbounded IS NOT NULL))"
            " OR EXISTS (SELECT 1 FROM deliveries WHERE deliveries.run = runs.run AND text != '')"
            " OR EXISTS (SELECT 1 FROM corrections WHERE corrections.run = runs.run)) ORDER BY ended_at LIMIT ?",
            (channel, ended_before_s, limit),
        )
        runs = [str(row[0]) for row in found]
        if runs:
            await self._store.erase(lambda db: sum(_erase_text(db, run) for run in runs))
        return runs

    async def erase(self, runs: Sequence[str]) -> int:
        """Remove ``runs``' text from this file (:class:`core.records.erase.Erasable`), byte for byte
        (:meth:`SqliteStore.erase`): each part's shown text and pending create (its text) set to NULL, its desk
        entries' text emptied and their pending create dropped, its corrections deleted (their bodies hold the new
        text). Kept: the run's record, each part's state and message id, the calls' content hashes and lengths.

        Returns:
            How many rows held text of the run.
        """

        return await self._store.erase(lambda db: sum(_erase_text(db, run) for run in runs))

    async def record_intent(
        self, run: str, slot: int, role: SlotRole, op: str, text: str, pending: PendingSend | None = None
    ) -> int:

        def intent(db: sqlite3.Connection) -> int:
            cur = db.execute(
                "INSERT INTO calls (run, slot, role, op, text_key, chars, intent_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run, slot, str(role), op, content_key(role, text), len(text), time.time()),
            )
            if pending is not None:  # the create itself, so a restart can settle it
                db.execute(
                    "INSERT INTO parts (run, slot, role, state, updated_at, pending) VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (run, slot) DO UPDATE SET pending = excluded.pending,"
                    " updated_at = excluded.updated_at",
                    (run, slot, str(role), str(PartState.PENDING), time.time(), _pending_json(pending)),
                )
            assert cur.lastrowid is not None
            return cur.lastrowid

        return await self._store.transaction(intent)

    async def record_outcome(self, call_id: int, part: PartRecord, outcome: str, detail: str = "") -> None:
        def outcome_of(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE calls SET outcome = ?, detail = ?, outcome_at = ? WHERE id = ?",
                (outcome, detail[:2000], time.time(), call_id),
            )
            self._upsert(db, part)

        await self._store.transaction(outcome_of)

    async def save_part(self, part: PartRecord) -> None:
        await self._store.transaction(lambda db: self._upsert(db, part))

    @staticmethod
    def _upsert(db: sqlite3.Connection, part: PartRecord) -> None:
        db.execute(
            "INSERT INTO parts (run, slot, role, state, message_id, shown, content_key, degraded, error, updated_at,"
            " streaming, pending, frozen, continues, unbounded, stray, precedes)"
            " VALUES (?, ?, ?, ?, ?, CAST(? AS TEXT), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (run, slot) DO UPDATE SET role = excluded.role, state = excluded.state,"
            " message_id = excluded.message_id, shown = excluded.shown, content_key = excluded.content_key,"
            " degraded = excluded.degraded, error = excluded.error, updated_at = excluded.updated_at,"
            " streaming = excluded.streaming, pending = excluded.pending, frozen = excluded.frozen,"
            " continues = excluded.continues, unbounded = excluded.unbounded, stray = excluded.stray,"
            " precedes = excluded.precedes",
            (
                part.run,
                part.slot,
                str(part.role),
                str(part.state),
                part.message_id,
                _utf8(part.shown),
                content_key(part.role, part.shown) if part.shown is not None else None,
                int(part.degraded),
                part.error,
                time.time(),
                int(part.streaming),
                _pending_json(part.pending),
                int(part.frozen),
                part.continues,
                _pending_json(part.unbounded),
                part.stray,
                part.precedes,
            ),
        )

    async def parts(self, run: str) -> list[PartRecord]:
        query = (
            "SELECT slot, role, state, message_id, shown, degraded, error, streaming, pending, frozen, continues,"
            " unbounded, stray, precedes FROM parts WHERE run = ? ORDER BY slot"
        )
        rows = await self._store.fetch(query, (run,))
        return [
            PartRecord(
                run=run,
                slot=r[0],
                role=SlotRole(r[1]),
                state=PartState(r[2]),
                message_id=r[3],
                shown=r[4],
                degraded=bool(r[5]),
                error=r[6],
                streaming=bool(r[7]),
                pending=_pending_from(r[8]),
                frozen=bool(r[9]),
                continues=r[10],
                unbounded=_pending_from(r[11]),
                stray=r[12],
                precedes=r[13],
            )
            for r in rows
        ]

    # --- the desk (:class:`core.records.desk.DeliveryDesk`) ---------------------------------------------------

    async def record_undelivered(self, entries: Sequence[DeskEntry]) -> None:
        rows = [_desk_row(entry) for entry in entries]
        sql = f"INSERT OR IGNORE INTO deliveries ({_DESK_COLUMNS}) VALUES ({', '.join('?' * 19)})"
        if rows:
            await self._store.transaction(lambda db: db.executemany(sql, rows))

    async def deliveries(
        self, states: Collection[DeskState] = OPEN_STATES, *, client: str | None = None, limit: int = 1000
    ) -> list[DeskEntry]:
        wanted = sorted(str(state) for state in states)
        if not wanted:
            return []
        query = f"SELECT {_DESK_COLUMNS} FROM deliveries WHERE state IN ({', '.join('?' * len(wanted))})"
        params: list[object] = list(wanted)
        if client is not None:
            query += " AND client = ?"
            params.append(client)
        query += " ORDER BY ended_at, run, slot LIMIT ?"
        rows = await self._store.fetch(query, (*params, limit))
        return [_desk_entry(row) for row in rows]

    async def delivery(self, entry_id: str) -> DeskEntry | None:
        rows = await self._store.fetch(f"SELECT {_DESK_COLUMNS} FROM deliveries WHERE id = ?", (entry_id,))
        return _desk_entry(rows[0]) if rows else None

    async def save_delivery(self, entry: DeskEntry) -> None:
        sql = f"INSERT OR REPLACE INTO deliveries ({_DESK_COLUMNS}) VALUES ({', '.join('?' * 19)})"
        row = _desk_row(entry)
        await self._store.transaction(lambda db: db.execute(sql, row))

    async def prune_deliveries(self, ended_before_s: float, *, client: str | None = None) -> int:
        sql, params = "DELETE FROM deliveries WHERE ended_at < ?", [ended_before_s, *([client] if client else [])]
        if client is not None:
            sql += " AND client = ?"

        def prune(db: sqlite3.Connection) -> int:
            return db.execute(sql, params).rowcount

        return await self._store.transaction(prune)

    async def delivery_counts(self, *, client: str | None = None) -> dict[DeskState, int]:
        query, params = "SELECT state, COUNT(*) FROM deliveries", [client] if client is not None else []
        if client is not None:
            query += " WHERE client = ?"
        rows = await self._store.fetch(query + " GROUP BY state", params)
        counts = dict.fromkeys(DeskState, 0)
        for state, count in rows:
            counts[DeskState(state)] = int(count)
        return counts

    # --- corrections (:class:`core.records.corrections.CorrectionStore`) --------------------------------------

    async def save_correction(self, record: CorrectionRecord) -> None:
        sql = "INSERT OR REPLACE INTO corrections (run, id, state, created_at, body) VALUES (?, ?, ?, ?, ?)"
        row = (record.run, record.id, str(record.state), record.created_at, record.to_json())
        await self._store.transaction(lambda db: db.execute(sql, row))

    async def correction(self, run: str, correction_id: str) -> CorrectionRecord | None:
        rows = await self._store.fetch("SELECT body FROM corrections WHERE run = ? AND id = ?", (run, correction_id))
        return CorrectionRecord.from_json(str(rows[0][0])) if rows else None

    async def corrections(self, run: str) -> list[CorrectionRecord]:
        rows = await self._store.fetch("SELECT body FROM corrections WHERE run = ? ORDER BY created_at", (run,))
        return [CorrectionRecord.from_json(str(row[0])) for row in rows]

    async def open_corrections(self) -> list[CorrectionRecord]:
        rows = await self._store.fetch(
            "SELECT body FROM corrections WHERE state = ? ORDER BY created_at", (str(CorrectionState.APPLYING),)
        )
        return [CorrectionRecord.from_json(str(row[0])) for row in rows]

    async def recent_calls(self, since_s: float) -> list[RecentCall]:
        """Every call that may have reached the platform at or after ``since_s`` (wall-clock seconds:
        :meth:`RecentCall.reached_s <core.budgets.history.RecentCall.reached_s>`), oldest first, with its run's channel
        and chat (:class:`core.budgets.history.RecentCallsSource`: a restarted sidecar's rate budgets
        begin from them). Read newest first by call id, a page at a time, so a long ledger costs only its tail.

        Raises:
            sqlite3.Error | ValueError: the store could not be read.
        """
        query = (
            "SELECT c.id, c.op, c.intent_at, c.outcome_at, r.channel, r.target"
            " FROM calls c JOIN runs r ON r.run = c.run WHERE c.id < ? ORDER BY c.id DESC LIMIT ?"
        )
        found: list[RecentCall] = []
        below = 2**63 - 1
        while True:
            rows = await self._store.fetch(query, (below, _RECENT_PAGE))
            for call_id, op, intent_at, outcome_at, channel, target in rows:
                below = call_id
                if (outcome_at if outcome_at is not None else intent_at + IN_FLIGHT_S) < since_s:
                    continue  # reached the platform before the window
                try:
                    kind = OpKind(op).call_kind
                except ValueError:
                    continue
                chat = str(json.loads(target).get("chat_id"))
                found.append(RecentCall(channel, chat, kind, intent_at, outcome_at))
            if len(rows) < _RECENT_PAGE or min(r[2] for r in rows) < since_s - _RECENT_SLACK_S:
                break
        found.reverse()
        return found

    async def close(self) -> None:
        if self._owned:
            await self._store.close()


def _utf8(text: str | None) -> bytes | None:
    """``text`` encoded for a ``CAST(? AS TEXT)`` parameter: bound as a ``str``, sqlite3 would keep the text's UTF-8
    form inside the string object (CPython caches it) for as long as the part's text lives, a second copy of every
    part a run shows (8.4 KB per run of the recorded 8.5k answer, bench/bench_memory.py); these bytes go when the
    statement is done. Raises UnicodeEncodeError on a lone surrogate, as binding the ``str`` does."""
    return text.encode("utf-8") if text is not None else None
