"""The Redis ledger: one partition's run records, parts and calls, every write fenced (DESIGN §8).

Implements :class:`core.records.ledger.Ledger` with the semantics of ``MemoryLedger`` and ``SqliteLedger`` (a part is
stored as JSON with the SQLite ledger's columns, its pending create apart), for the runs of one partition. Every
write is one Lua script that first compares the partition's fencing token with the writer's
(:data:`~adapters.redis.client.FENCE_CHECK`) and refuses with :class:`~adapters.redis.errors.FencedError`
otherwise, before writing anything: an owner paused past its lease cannot write once another replica holds it.
What such an owner may still have sent to a platform is an intent without an outcome, which the new owner
settles (the durable runs' rule). Reads need no token. Keys (partition 7)::

    sr:{p7}:l:run:<run>     a hash: channel, target (JSON), mode, end_status, ended, errors (JSON), times
    sr:{p7}:l:parts:<run>   a hash: "<slot>" -> the part (JSON), "<slot>:pending" -> its pending create (JSON)
    sr:{p7}:l:calls:<run>   a hash: "<id>" -> a call's intent (JSON), "<id>:outcome" -> its outcome (JSON)
    sr:{p7}:l:callseq       the partition's call ids
    sr:{p7}:l:desk          a hash: desk entry id -> the entry (JSON; :mod:`core.records.desk`)
    sr:{p7}:l:desk:ended    a sorted set: desk entry id by its run's end (s), for pruning by age
    sr:{p7}:l:corr:<run>    a hash: correction id -> the correction (JSON; :mod:`core.records.corrections`)
    sr:{p7}:l:corr:open     a hash: "<run> NUL <id>" -> created_at, the corrections still ``applying`` (a new owner
                            resumes them)

Like the SQLite ledger, a pending create keeps its delivery id, text, format and bounds; ``known_ids`` and
``exclusive`` are the settling sidecar's own, set again when it settles.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection, Sequence
from typing import Any

from streamrelay.adapters.redis.client import FENCE_CHECK, Redis, Script, unavailable
from streamrelay.adapters.redis.errors import FencedError
from streamrelay.adapters.redis.journal import dead_letters_of
from streamrelay.adapters.redis.keys import KEYS, KeySpace
from streamrelay.core.ports import PendingSend, TextFormat
from streamrelay.core.records.corrections import CorrectionRecord, CorrectionState
from streamrelay.core.records.desk import OPEN_STATES, DeskEntry, DeskState, counts_of
from streamrelay.core.records.ledger import PartRecord, RunRecord, content_key
from streamrelay.core.records.report import PartState, SlotRole

_START = (
    FENCE_CHECK
    + """
-- KEYS: fence, run; ARGV: token, channel, target, mode, created_at
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
redis.call('HSET', KEYS[2], 'channel', ARGV[2], 'target', ARGV[3], 'mode', ARGV[4], 'ended', '0', 'created_at', ARGV[5])
return 1
"""
)
"""``ledger.start_run`` (durable). KEYS: the partition's fence, the run's record hash; ARGV: token, channel, target
(JSON), mode, created_at (s). Returns 1 when it created the record, 0 when one exists (a new owner replaying
``run.start`` keeps the first). Atomic: the fence check, the existence check and the write are one step, so a
deposed owner writes nothing and two owners never both create the record."""

_END = (
    FENCE_CHECK
    + """
-- KEYS: fence, run, ended:<channel>; ARGV: token, end_status, errors, ended_at, run id
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('HSET', KEYS[2], 'end_status', ARGV[2], 'ended', '1', 'errors', ARGV[3], 'ended_at', ARGV[4])
redis.call('ZADD', KEYS[3], 'NX', ARGV[4], ARGV[5])
return 1
"""
)
"""``ledger.end_run`` (durable). KEYS: fence, the run's record hash, its channel's ended runs (a sorted set by end
time: what :meth:`RedisLedger.expire` reads); ARGV: token, end status, errors (JSON list), ended_at (s), the run id.
Returns 1 when it marked the run ended, 0 for an unknown run (nothing written). Atomic: fence check, existence check
and writes in one step (no record created by an end alone; a second end keeps the first end's time)."""

_INTENT = (
    FENCE_CHECK
    + """
-- KEYS: fence, call ids, calls, parts; ARGV: token, intent, slot, new part, pending ('' for none)
local id = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[3], id, ARGV[2])
if ARGV[5] ~= '' then
  redis.call('HSETNX', KEYS[4], ARGV[3], ARGV[4])
  redis.call('HSET', KEYS[4], ARGV[3] .. ':pending', ARGV[5])
end
return id
"""
)
"""``ledger.record_intent`` (durable: written before the call is made). KEYS: fence, the partition's call id counter,
the run's calls hash, the run's parts hash; ARGV: token, intent (JSON), slot, the new part (JSON, stored only when
the slot has none), pending create (JSON, '' for none). Returns the new call id (unique in the partition). Atomic:
the fence check, the id and the intent (with the pending create, when the call creates a message) land together,
so a crash or a deposed owner never leaves an id without its intent or a pending create without its call."""

_PART = (
    FENCE_CHECK
    + """
-- KEYS: fence, calls, parts; ARGV: token, call id ('' for none), outcome, slot, part, pending ('' for none)
if ARGV[2] ~= '' then redis.call('HSET', KEYS[2], ARGV[2] .. ':outcome', ARGV[3]) end
redis.call('HSET', KEYS[3], ARGV[4], ARGV[5])
if ARGV[6] == '' then
  redis.call('HDEL', KEYS[3], ARGV[4] .. ':pending')
else
  redis.call('HSET', KEYS[3], ARGV[4] .. ':pending', ARGV[6])
end
return 1
"""
)
"""``ledger.record_outcome`` / ``save_part`` (durable). KEYS: fence, the run's calls hash, its parts hash; ARGV:
token, call id ('' for none: a part saved alone), outcome (JSON), slot, part (JSON), pending create (JSON, '' clears
it). Returns 1. Atomic: the call's outcome and the part it changed are written together after the fence check, so
a reader never sees an acknowledged call with the part from before it."""


_UNDELIVERED = (
    FENCE_CHECK
    + """
-- KEYS: fence, desk, desk:ended; ARGV: token, then (id, entry, ended_at) for each entry
for i = 2, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) == 1 then
    redis.call('ZADD', KEYS[3], ARGV[i + 2], ARGV[i])
  end
end
return 1
"""
)
"""``ledger.record_undelivered`` (durable, fenced: written by the run's owner at its end). KEYS: fence, the desk hash,
its by-end sorted set; ARGV: token, then each entry's id, JSON and run end (s). An entry already kept stays as it is
(a run finalized again after a restart does not reopen what an operator closed)."""

_DESK_SAVE = """
-- KEYS: desk, desk:ended; ARGV: id, entry, ended_at
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 1
"""
"""``ledger.save_delivery`` (durable, not fenced: an operator's write about an ended run, whoever owns its partition
now). KEYS: the desk hash, its by-end sorted set; ARGV: id, entry (JSON), run end (s)."""

_DESK_PRUNE = """
-- KEYS: desk, desk:ended; ARGV: ended before (s)
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
for _, id in ipairs(ids) do redis.call('HDEL', KEYS[1], id) end
if #ids > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1]) end
return #ids
"""
"""``ledger.prune_deliveries`` (durable). KEYS: the desk hash, its by-end sorted set; ARGV: the bound (s). Returns how
many entries went."""


_CORRECTION = (
    FENCE_CHECK
    + """
-- KEYS: fence, corr:<run>, corr:open; ARGV: token, id, record, open ('1' or '0'), open field, created_at
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[3], ARGV[5], ARGV[6])
else
  redis.call('HDEL', KEYS[3], ARGV[5])
end
return 1
"""
)
"""``ledger.save_correction`` (durable, fenced: a correction is applied by its run's partition owner only). KEYS:
fence, the run's corrections hash, the partition's open corrections; ARGV: token, the correction's id, its JSON,
whether it is still ``applying``, its field in the open hash (the run, a NUL, the id), created_at (s). The record and
its place among the open ones change together, so a new owner resumes exactly the corrections left ``applying``."""


def desk_json(entry: DeskEntry) -> str:
    """A desk entry as JSON (the SQLite ledger's columns)."""
    return json.dumps(
        {
            "run": entry.run,
            "slot": entry.slot,
            "role": str(entry.role),
            "state": str(entry.state),
            "was": str(entry.was),
            "channel": entry.channel,
            "target": entry.target,
            "text": entry.text,
            "fmt": str(entry.fmt),
            "error": entry.error,
            "pending": pending_json(entry.pending) or None,
            "message_id": entry.message_id,
            "ended_at": entry.ended_at,
            "updated_at": entry.updated_at,
            "resends": entry.resends,
            "note": entry.note,
            "outcome": entry.outcome,
        }
    )


def desk_from(raw: str) -> DeskEntry:
    """The desk entry stored as ``raw`` (:func:`desk_json`)."""
    data: dict[str, Any] = json.loads(raw)
    return DeskEntry(
        run=data["run"],
        slot=int(data["slot"]),
        role=SlotRole(data["role"]),
        state=DeskState(data["state"]),
        was=DeskState(data["was"]),
        channel=data["channel"],
        target=data["target"],
        text=data["text"],
        fmt=TextFormat(data["fmt"]),
        error=data.get("error"),
        ended_at=float(data["ended_at"]),
        updated_at=float(data["updated_at"]),
        pending=pending_from(data.get("pending")),
        message_id=data.get("message_id"),
        resends=int(data.get("resends", 0)),
        note=data.get("note"),
        outcome=data.get("outcome"),
    )


def pending_json(pending: PendingSend | None) -> str:
    """A pending create as the SQLite ledger stores it (``""`` for none)."""
    if pending is None:
        return ""
    fields = {"delivery_id": pending.delivery_id, "text": pending.text, "fmt": str(pending.fmt)}
    return json.dumps({**fields, "after_id": pending.after_id, "before_id": pending.before_id})


def pending_from(raw: str | None) -> PendingSend | None:
    """The pending create of :func:`pending_json`'s text (None for none)."""
    if not raw:
        return None
    data = json.loads(raw)
    return PendingSend(
        data["delivery_id"],
        data["text"],
        TextFormat(data["fmt"]),
        after_id=data.get("after_id"),
        before_id=data.get("before_id"),
    )


def part_json(part: PartRecord) -> str:
    """A part (its pending create apart) with the SQLite ledger's columns."""
    return json.dumps(
        {
            "role": str(part.role),
            "state": str(part.state),
            "message_id": part.message_id,
            "shown": part.shown,
            "content_key": content_key(part.role, part.shown) if part.shown is not None else None,
            "degraded": part.degraded,
            "error": part.error,
            "streaming": part.streaming,
            "frozen": part.frozen,
            "continues": part.continues,
            "precedes": part.precedes,
            "unbounded": pending_json(part.unbounded) or None,
            "stray": part.stray,
            "updated_at": time.time(),
        }
    )


def part_from(run: str, slot: int, raw: str, pending: str | None) -> PartRecord:
    """The part stored as ``raw`` (:func:`part_json`) with its pending create."""
    data: dict[str, Any] = json.loads(raw)
    return PartRecord(
        run=run,
        slot=slot,
        role=SlotRole(data["role"]),
        state=PartState(data["state"]),
        message_id=data.get("message_id"),
        shown=data.get("shown"),
        degraded=bool(data.get("degraded")),
        error=data.get("error"),
        streaming=bool(data.get("streaming")),
        pending=pending_from(pending),
        frozen=bool(data.get("frozen")),
        continues=data.get("continues"),
        precedes=data.get("precedes"),
        unbounded=pending_from(data.get("unbounded")),
        stray=data.get("stray"),
    )


class RedisLedger:
    """The ledger of one partition's runs in Redis.

    Args:
        client: from :func:`adapters.redis.client.connect` (not closed here).
        partition: the partition whose runs this ledger holds.
        token: the writer's fencing token (the partition owner's lease grant); None: read only, every write
            raises :class:`FencedError`. :meth:`fenced` gives the writer.
        keys: the key space.
    """

    def __init__(self, client: Redis, partition: int, *, token: int | None = None, keys: KeySpace = KEYS) -> None:
        self._client = client
        self.partition = partition
        self.token = token
        self._keys = keys
        self._start = Script(client, _START, "ledger.start_run", durable=True)
        self._end = Script(client, _END, "ledger.end_run", durable=True)
        self._intent = Script(client, _INTENT, "ledger.record_intent", durable=True)
        self._part = Script(client, _PART, "ledger.record_outcome", durable=True)
        self._undelivered = Script(client, _UNDELIVERED, "ledger.record_undelivered", durable=True)
        self._desk_save = Script(client, _DESK_SAVE, "ledger.save_delivery", durable=True)
        self._desk_prune = Script(client, _DESK_PRUNE, "ledger.prune_deliveries", durable=True)
        self._correction = Script(client, _CORRECTION, "ledger.save_correction", durable=True)

    def __repr__(self) -> str:
        return f"RedisLedger(partition={self.partition}, token={self.token})"

    def fenced(self, token: int) -> RedisLedger:
        """This partition's ledger for the owner holding the grant ``token``: every write checks it."""
        return RedisLedger(self._client, self.partition, token=token, keys=self._keys)

    def _key(self, name: str) -> str:
        return self._keys.ledger(self.partition, name)

    async def _hash(self, name: str) -> dict[str, str]:
        with unavailable("ledger read"):
            raw = await self._client.hgetall(self._key(name))
        return {str(k): str(v) for k, v in raw.items()}

    async def _write(self, script: Script, keys: list[str], args: list[str | int | float]) -> Any:
        if self.token is None:
            with unavailable("ledger fence"):
                current = await self._client.get(self._keys.fence(self.partition))
            raise FencedError(self.partition, None, None if current is None else int(current))
        return await script.fenced(self.partition, self.token, [self._keys.fence(self.partition), *keys], args)

    async def start_run(self, record: RunRecord) -> None:
        """Create the run record, or keep the existing one (a new owner replays ``run.start``).

        Raises:
            FencedError: the token is no longer the partition's (also on every other write): nothing written.
        """
        args: list[str | int | float] = [record.channel, json.dumps(record.target), record.mode, time.time()]
        await self._write(self._start, [self._key(f"run:{record.run}")], args)

    async def end_run(self, run: str, end_status: str, errors: Sequence[str] = ()) -> None:
        """Mark the run ended with ``end_status`` and the ``errors`` its report shows (unknown runs: nothing)."""
        with unavailable("ledger read"):
            raw = await self._client.hget(self._key(f"run:{run}"), "channel")
        channel = raw.decode() if isinstance(raw, bytes) else raw
        if channel is None and self.token is not None:
            return  # an unknown run: nothing written (as the script would; a reader still gets its FencedError)
        args: list[str | int | float] = [end_status, json.dumps(list(errors)), time.time(), run]
        await self._write(self._end, [self._key(f"run:{run}"), self._key(f"ended:{channel or ''}")], args)

    async def expire(self, channel: str, ended_before_s: float, limit: int) -> list[str]:
        """Remove the text of at most ``limit`` runs of ``channel`` that ended before ``ended_before_s`` (Unix
        seconds) and were not expired yet (:class:`core.records.erase.Expiring`: a channel's ``text_retention_hours``),
        as :meth:`erase` does (their places and sub-agents' threads with them), and their dead letters (their input
        lines an owner failed on, kept with their text in the partition's dead-letter stream, as the journal's
        erasure deletes them: :meth:`adapters.redis.journal.RedisJournal.erase`); each leaves the channel's sorted
        set of ended runs (``ended:<channel>``, written by :meth:`end_run`), so it is read once. The runs, oldest end
        first. Not fenced, like :meth:`erase` (an ended run no owner delivers). A run that ended before this set
        existed (an older version) is not in it: erase it by its id.

        Raises:
            core.errors.StoreUnavailableError: Redis did not answer (asked again at the next sweep).
        """
        key = self._key(f"ended:{channel}")
        with unavailable("ledger.expire"):
            found = await self._client.zrangebyscore(key, "-inf", f"({ended_before_s!r}", start=0, num=limit)
        runs = [run.decode() if isinstance(run, bytes) else str(run) for run in found]
        if not runs:
            return []
        await self.erase(runs)
        with unavailable("ledger.expire"):
            if buried := await dead_letters_of(self._client, self._keys.dead(self.partition), set(runs)):
                await self._client.xdel(self._keys.dead(self.partition), *buried)
            await self._client.zrem(key, *runs)
        return runs

    async def get_run(self, run: str) -> RunRecord | None:
        """The run record, or None when this partition has none."""
        data = await self._hash(f"run:{run}")
        if not data:
            return None
        return RunRecord(
            run=run,
            channel=data["channel"],
            target=json.loads(data["target"]),
            mode=data["mode"],
            end_status=data.get("end_status"),
            ended=data.get("ended") == "1",
            errors=json.loads(data["errors"]) if data.get("errors") else [],
        )

    async def record_intent(
        self, run: str, slot: int, role: SlotRole, op: str, text: str, pending: PendingSend | None = None
    ) -> int:
        """Write the intent of one call before it is made; its call id (unique in the partition). ``pending``: the
        call creates a message, stored with the part (created if new) until an outcome clears it."""
        intent = {"slot": slot, "role": str(role), "op": op, "text_key": content_key(role, text), "chars": len(text)}
        new_part = part_json(PartRecord(run=run, slot=slot, role=role))
        keys = [self._key("callseq"), self._key(f"calls:{run}"), self._key(f"parts:{run}")]
        args: list[str | int | float] = [json.dumps({**intent, "intent_at": time.time()}), slot, new_part]
        return int(await self._write(self._intent, keys, [*args, pending_json(pending)]))

    async def erase(self, runs: Sequence[str]) -> int:
        """Remove ``runs``' text, one run after another (:meth:`_erase_one`), each with the ledger ids under it (its
        sub-agents' threads ``<run>/<child key>`` and a fan-out run's later places ``<run>/to:<i>``, found by their
        ``parts:`` keys); how many fields held some."""
        changed = 0
        for run in runs:
            for ledger_run in [run, *await self._under(run)]:
                changed += await self._erase_one(ledger_run)
        return changed

    async def runs_in(self, channel: str, chat_id: str) -> list[str]:
        """The runs of this partition on ``channel`` whose target's ``chat_id`` is ``chat_id`` (compared as text),
        oldest first (:class:`core.records.erase.Conversations`, as :meth:`adapters.sqlite.SqliteLedger.runs_in`): a
        SCAN of the partition's run records (a conversation's erasure is rare and operator-driven). A conversation's
        runs are in its own partition (``run.start`` placed them there), but a fan-out run whose first place is
        another chat is in that chat's partition and is not found here."""
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", self._key("run:")) + "*"
        names: list[str] = []
        with unavailable("ledger.runs_in"):
            async for key in self._client.scan_iter(match=pattern, count=500):
                names.append(key.decode() if isinstance(key, bytes) else str(key))
            async with self._client.pipeline(transaction=False) as pipe:
                for name in names:
                    pipe.hmget(name, "channel", "target", "created_at")
                records = await pipe.execute()
        found: list[tuple[float, str]] = []
        for name, (on, target, created) in zip(names, records, strict=True):
            if on != channel or target is None:
                continue
            chat = json.loads(target).get("chat_id") if target.startswith("{") else None
            if chat is not None and str(chat) == chat_id:
                found.append((float(created or 0), name[len(self._key("run:")) :]))
        return [run for _, run in sorted(found)]

    async def _under(self, run: str) -> list[str]:
        """The ledger ids under ``run`` (``<run>/...``) that have parts in this partition (a SCAN of its keys: an
        erase is rare and operator-driven)."""
        prefix = self._key(f"parts:{run}/")
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", prefix) + "*"
        found: list[str] = []
        with unavailable("ledger.erase"):
            async for key in self._client.scan_iter(match=pattern, count=500):
                name = key.decode() if isinstance(key, bytes) else str(key)
                found.append(name[len(self._key("parts:")) :])
        return found

    async def _erase_one(self, run: str) -> int:
        """Remove ``run``'s text from this partition's ledger keys (:class:`core.records.erase.Erasable`, as
        :meth:`adapters.sqlite.SqliteLedger.erase`): each part's ``shown`` and ``unbounded`` emptied and its pending
        create (``<slot>:pending``) deleted, its desk entries' text emptied and their pending create dropped, its
        corrections deleted. Kept: the run's record, states, message ids, content hashes; the calls hold hashes and
        lengths only. Not fenced (an
        operator's write about an ended run, like :meth:`save_delivery`); for a run no owner is delivering.

        Returns:
            How many fields held text of the run.
        """
        parts_key = self._key(f"parts:{run}")
        with unavailable("ledger.erase"):
            stored = await self._hash(f"parts:{run}")
            desk = await self._hash("desk")
            corrections = await self._hash(f"corr:{run}")  # their bodies hold the new text, as SQLite's do
            async with self._client.pipeline(transaction=True) as pipe:
                changed = 0
                for field, raw in stored.items():
                    if field.endswith(":pending"):
                        pipe.hdel(parts_key, field)
                        changed += 1
                        continue
                    data = json.loads(raw)
                    if data.get("shown") is not None or data.get("unbounded") is not None:
                        pipe.hset(parts_key, field, json.dumps({**data, "shown": None, "unbounded": None}))
                        changed += 1
                for entry_id, raw in desk.items():
                    entry = json.loads(raw)
                    if entry.get("run") == run and (entry.get("text") or entry.get("pending")):
                        pipe.hset(self._key("desk"), entry_id, json.dumps({**entry, "text": "", "pending": None}))
                        changed += 1
                if corrections:
                    pipe.delete(self._key(f"corr:{run}"))
                    changed += len(corrections)
                    open_key = self._key("corr:open")
                    pipe.hdel(open_key, *[f"{run}\x00{correction_id}" for correction_id in corrections])
                await pipe.execute()
        return changed

    async def save_part(self, part: PartRecord) -> None:
        """Write one part as it is (its pending create too: None clears it)."""
        await self._upsert(part, "", "")

    async def record_outcome(self, call_id: int, part: PartRecord, outcome: str, detail: str = "") -> None:
        """Write a call's outcome (``ack``, ``uncertain``, ``failed``, ...) and the part, in one script."""
        record = json.dumps({"outcome": outcome, "detail": detail[:2000], "outcome_at": time.time()})
        await self._upsert(part, str(call_id), record)

    async def _upsert(self, part: PartRecord, call_id: str, outcome: str) -> None:
        keys = [self._key(f"calls:{part.run}"), self._key(f"parts:{part.run}")]
        args: list[str | int | float] = [call_id, outcome, part.slot, part_json(part), pending_json(part.pending)]
        await self._write(self._part, keys, args)

    async def parts(self, run: str) -> list[PartRecord]:
        """The run's parts in slot order."""
        stored = await self._hash(f"parts:{run}")
        return sorted(
            (part_from(run, int(f), raw, stored.get(f"{f}:pending")) for f, raw in stored.items() if ":" not in f),
            key=lambda p: p.slot,
        )

    async def calls(self, run: str) -> list[dict[str, Any]]:
        """The run's calls in id order: ``{"id", "slot", "role", "op", "text_key", "chars", "intent_at",
        "outcome", "detail", "outcome_at"}`` (``outcome`` None while unknown)."""
        stored = await self._hash(f"calls:{run}")
        found: list[dict[str, Any]] = []
        for field in sorted((f for f in stored if ":" not in f), key=int):
            outcome = json.loads(stored.get(f"{field}:outcome", '{"outcome": null}'))
            found.append({"id": int(field), **json.loads(stored[field]), **outcome})
        return found

    # --- the desk (:class:`core.records.desk.DeliveryDesk`), this partition's entries ---------------------------

    async def record_undelivered(self, entries: Sequence[DeskEntry]) -> None:
        """Keep an ended run's undelivered parts (fenced, like every write of the run's owner)."""
        if not entries:
            return
        args: list[str | int | float] = []
        for entry in entries:
            args += [entry.id, desk_json(entry), entry.ended_at]
        await self._write(self._undelivered, [self._key("desk"), self._key("desk:ended")], args)

    async def deliveries(
        self, states: Collection[DeskState] = OPEN_STATES, *, client: str | None = None, limit: int = 1000
    ) -> list[DeskEntry]:
        """This partition's entries in ``states`` (of ``client`` only, when given), oldest run end first."""
        stored = await self._hash("desk")
        found = [desk_from(raw) for raw in stored.values()]
        found = [e for e in found if e.state in states and (client is None or e.client == client)]
        return sorted(found, key=lambda e: (e.ended_at, e.run, e.slot))[:limit]

    async def delivery(self, entry_id: str) -> DeskEntry | None:
        """One entry of this partition by its id, or None."""
        with unavailable("ledger read"):
            raw = await self._client.hget(self._key("desk"), entry_id)
        return desk_from(str(raw)) if raw is not None else None

    async def save_delivery(self, entry: DeskEntry) -> None:
        """Write ``entry`` as it now stands (not fenced: an operator's write)."""
        with unavailable(self._desk_save.name):
            await self._desk_save(
                [self._key("desk"), self._key("desk:ended")], [entry.id, desk_json(entry), entry.ended_at]
            )

    async def prune_deliveries(self, ended_before_s: float, *, client: str | None = None) -> int:
        """Delete this partition's entries of runs that ended before ``ended_before_s`` (of ``client`` only, when
        given); how many went."""
        keys = [self._key("desk"), self._key("desk:ended")]
        if client is None:
            with unavailable(self._desk_prune.name):
                return int(await self._desk_prune(keys, [ended_before_s]))
        gone = [
            e.id
            for e in await self.deliveries(set(DeskState), client=client, limit=2**31)
            if e.ended_at < ended_before_s
        ]
        if gone:
            with unavailable(self._desk_prune.name):
                async with self._client.pipeline(transaction=True) as pipe:
                    pipe.hdel(keys[0], *gone)
                    pipe.zrem(keys[1], *gone)
                    await pipe.execute()
        return len(gone)

    async def delivery_counts(self, *, client: str | None = None) -> dict[DeskState, int]:
        """This partition's entries per state (of ``client`` only, when given)."""
        stored = await self._hash("desk")
        entries = [desk_from(raw) for raw in stored.values()]
        return counts_of([e for e in entries if client is None or e.client == client])

    # --- corrections (:class:`core.records.corrections.CorrectionStore`), this partition's runs ------------------

    async def save_correction(self, record: CorrectionRecord) -> None:
        """Write ``record`` as it now stands (fenced: only the run's partition owner applies a correction).

        Raises:
            FencedError: another replica holds the partition now: nothing written (it resumes the correction).
        """
        applying = "1" if record.state is CorrectionState.APPLYING else "0"
        keys = [self._key(f"corr:{record.run}"), self._key("corr:open")]
        args: list[str | int | float] = [record.id, record.to_json(), applying, f"{record.run}\x00{record.id}"]
        await self._write(self._correction, keys, [*args, record.created_at])

    async def correction(self, run: str, correction_id: str) -> CorrectionRecord | None:
        """One correction of ``run``, or None."""
        with unavailable("ledger read"):
            raw = await self._client.hget(self._key(f"corr:{run}"), correction_id)
        return CorrectionRecord.from_json(str(raw)) if raw is not None else None

    async def corrections(self, run: str) -> list[CorrectionRecord]:
        """The corrections of ``run``, oldest first."""
        stored = await self._hash(f"corr:{run}")
        return sorted((CorrectionRecord.from_json(raw) for raw in stored.values()), key=lambda r: (r.created_at, r.id))

    async def open_corrections(self) -> list[CorrectionRecord]:
        """This partition's corrections still ``applying`` (cut by a kill or a lost lease), oldest first."""
        found: list[CorrectionRecord] = []
        for field in await self._hash("corr:open"):
            run, _, correction_id = field.partition("\x00")
            record = await self.correction(run, correction_id)
            if record is not None and record.state is CorrectionState.APPLYING:
                found.append(record)
        return sorted(found, key=lambda r: (r.created_at, r.id))

    async def close(self) -> None:
        """Nothing to close: the client belongs to the caller."""
        return None
