"""The input streams: accepted input lines on their way from any replica to their partition's owner.

Ingest on any replica appends a request's lines to their partition's stream ``sr:{p7}:in``, one entry per run
holding the run's lines of the batch as their NDJSON text (one script per partition and batch:
:meth:`InputStream.append_open`). The partition's owner reads them with XREADGROUP in the one consumer group
:data:`~adapters.redis.journal.GROUP`, consumer = its owner id; a read entry stays *pending* (in the group's
PEL) until acknowledged, which the owner does only once the entry's effect is durable (journaled, or in the
ledger) and then deletes it (XACK + XDEL: the stream holds only what is not done yet). Once an owner has read the
stream up to an id, it waits for what comes after with a plain blocking XREAD and takes the entries that returns as
they are (one round trip per wake-up): such an entry is nobody's pending entry and leaves the stream only through the
owner's fenced journal append or acknowledgement; one the owner never journaled is read again by the next
XREADGROUP (:meth:`InputStream.read`). A new owner takes every
pending entry, its own from before a restart and a dead replica's, with XAUTOCLAIM; each claim counts a delivery.
An entry delivered more than N times (XPENDING's delivery count) is moved to the dead-letter stream
``sr:{p7}:dead`` (:meth:`InputStream.bury`) so one bad line cannot stop its partition; an operator lists, retries
or drops dead letters. An owner reads, claims, acknowledges and sweeps dead letters with its fencing token
(``token=``): once another replica is granted the partition, a stale owner takes, moves and deletes nothing
(:class:`adapters.redis.FencedError`). https://redis.io/docs/latest/develop/data-types/streams/
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from redis.exceptions import ResponseError

from streamrelay.adapters.redis.client import FENCE_CHECK, Redis, Script, unavailable
from streamrelay.adapters.redis.errors import DataLostError
from streamrelay.adapters.redis.journal import GROUP
from streamrelay.adapters.redis.keys import KEYS, KeySpace
from streamrelay.core.records.journal import JournalEntry

T = TypeVar("T")

IDLE_WAITS = 5
"""An owner's blocking waits for new entries (:meth:`InputStream.read` with a token) that may follow one another
with no fenced read between them: after that many found nothing, the next read is a fenced one again (it learns the
stream's last id afresh, and finds a stale grant: :class:`adapters.redis.FencedError`)."""

_BURY = (
    FENCE_CHECK
    + """
-- KEYS: fence, inbox, dead; ARGV: token, group, max deliveries, candidate ids...
local moved = {}
for k = 4, #ARGV do
  local id = ARGV[k]
  local p = redis.call('XPENDING', KEYS[2], ARGV[2], id, id, 1)
  if #p == 1 and tonumber(p[1][4]) > tonumber(ARGV[3]) then
    local found = redis.call('XRANGE', KEYS[2], id, id)
    if #found == 1 then
      local fields = found[1][2]
      redis.call('XADD', KEYS[3], '*', 'source', id, 'deliveries', p[1][4], 'consumer', p[1][2], unpack(fields))
    end
    redis.call('XACK', KEYS[2], ARGV[2], id)
    redis.call('XDEL', KEYS[2], id)
    moved[#moved + 1] = id
  end
end
return moved
"""
)
"""The dead-letter sweep (``stream.bury``): with an owner's token (ARGV[1]; '' unfenced, an operator's tool), only
while its grant is the partition's. A stale owner's sweep would move entries the new owner has just claimed (each
claim counts a delivery) to the dead letters while the new owner works on them: lines answered 200, never shown."""

_RETRY = """
-- KEYS: dead, inbox; ARGV: dead letter id
local found = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if #found == 0 then return false end
local f = found[1][2]
local fields = {}
for k = 1, #f, 2 do fields[f[k]] = f[k + 1] end
local id = redis.call('XADD', KEYS[2], '*', 'run', fields['run'] or '', 'line', fields['line'] or '')
redis.call('XDEL', KEYS[1], ARGV[1])
return id
"""

_READ = (
    FENCE_CHECK
    + """
-- KEYS: fence, inbox; ARGV: token, group, consumer, count. Replies {the stream's last generated id, new entries}
local got = redis.call('XREADGROUP', 'GROUP', ARGV[2], ARGV[3], 'COUNT', ARGV[4], 'STREAMS', KEYS[2], '>')
if got then return {'', got[1][2]} end
local info = redis.call('XINFO', 'STREAM', KEYS[2])
for k = 1, #info, 2 do
  if info[k] == 'last-generated-id' then return {info[k + 1], {}} end
end
return {'0-0', {}}
"""
)
"""An owner's read (``stream.read`` with its token): the new entries for its consumer, only while its grant is the
partition's (an owner whose lease went to another replica takes no entry: the new owner gets them all, in order).
When there is none, the stream's last id, from which the owner waits for the next ones (a blocking XREAD, which
takes nothing: :meth:`InputStream._read_owned`)."""

_CLAIM = (
    FENCE_CHECK
    + """
-- KEYS: fence, inbox; ARGV: token, group, consumer, min idle ms, start id, count
return redis.call('XAUTOCLAIM', KEYS[2], ARGV[2], ARGV[3], ARGV[4], ARGV[5], 'COUNT', ARGV[6])
"""
)
"""An owner's claim (``stream.claim`` with its token): only while its grant is the partition's."""

_ACK = (
    FENCE_CHECK
    + """
-- KEYS: fence, inbox; ARGV: token, group, ids...
local n = redis.call('XACK', KEYS[2], ARGV[2], unpack(ARGV, 3))
redis.call('XDEL', KEYS[2], unpack(ARGV, 3))
return n
"""
)
"""An owner's acknowledgement (``stream.ack`` with its token): only while its grant is the partition's (a stale
owner never deletes an entry the new owner has not taken)."""


_APPEND_OPEN = """
-- KEYS: inbox, epoch marker, then per run its stop mark and its idle-close mark; ARGV: epoch ('' unchecked), then per
-- entry: the index of its run's stop mark in KEYS, run, line, '1' when every line is a text event the front validated
-- ('' else). Replies per entry its stream id; 0 when its run's stop mark exists, 'closed:<last seq>' when its idle-
-- close mark does (nothing of that run is appended); an error LOST when the partition's epoch marker is not ARGV[1]
-- (Redis lost its data: nothing is appended)
if ARGV[1] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return redis.error_reply('LOST')
end
local marks = {}
for k = 3, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[k]) == 1 then
    marks[k] = 0
  else
    local closed = redis.call('GET', KEYS[k + 1])
    if closed then marks[k] = 'closed:' .. closed end
  end
end
local out = {}
for i = 2, #ARGV, 4 do
  local mark = marks[tonumber(ARGV[i])]
  if mark then
    out[#out + 1] = mark
  elseif ARGV[i + 3] == '1' then
    out[#out + 1] = redis.call('XADD', KEYS[1], '*', 'run', ARGV[i + 1], 'line', ARGV[i + 2], 'text', '1')
  else
    out[#out + 1] = redis.call('XADD', KEYS[1], '*', 'run', ARGV[i + 1], 'line', ARGV[i + 2])
  end
end
return out
"""
"""``stream.append_open`` (durable: a line is answered 200 only once a replica has it). KEYS: the partition's input
stream, its epoch marker, then per run its stop mark and its idle-close mark; ARGV: the epoch this replica found ('',
unchecked), then per entry its stop mark's index, run, line and whether every line is a validated ``text`` event
(field ``text``). Returns per entry its stream id, 0 for a line of a stopped run, ``closed:<last seq>`` for a line of
a run the idle timeout closed (neither appended); the error ``LOST`` (nothing appended) when the epoch marker is not
ARGV[1]. Atomic: the epoch check, each run's mark checks and the appends are one step, so a line is in the stream
before its run's stop (or idle close) mark or refused after it, and nothing is taken on a Redis that lost its data."""

_CLOSE_IDLE = (
    FENCE_CHECK
    + """
-- KEYS: fence, inbox, the run's idle-close mark; ARGV: token, last seq ('' none; 'ended': it took its end), ttl s
redis.call('SET', KEYS[3], ARGV[2], 'EX', ARGV[3])
local newest = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #newest == 0 then return '' end
return newest[1][1]
"""
)
"""``stream.close_idle`` (durable; fenced: a stale owner never closes a run another replica delivers): the run's
idle-close mark (the last seq the run took, or ``ended``), and the newest entry id of the partition's input stream (''
when empty) in the same step: every line of the run appended before the mark is at most that id, every later one is
refused by the append."""


@dataclass(frozen=True)
class ClosedRun:
    """:meth:`InputStream.append_open`'s answer for an entry of a run the idle timeout closed: nothing of it was
    appended. ``last_seq``: the last ``seq`` the run took (None: none, or it used none): a line at or below it is a
    repeat of one it took (acknowledged and dropped), a later one was never taken (409). ``ended``: the close took
    the run's own ``end`` (appended before the mark): every line of it is an ended run's (acknowledged and dropped)."""

    last_seq: int | None
    ended: bool = False


@dataclass(frozen=True)
class InputEntry:
    """One entry of a partition's stream: its stream ``id`` (what :meth:`InputStream.ack` takes), its run and the
    run's lines as a replica's front took them from one request: their NDJSON text, joined by ``"\\n"``
    (:meth:`lines`); ``text``: see below."""

    id: str
    run: str
    line: str
    text: bool = False
    """Every line is a ``text`` event the front decoded and validated as the owner would
    (:func:`adapters.ingest_http.lines.decode_text` gave it): the owner validates them in one call."""

    def entry(self) -> JournalEntry:
        """As the journal takes it."""
        return JournalEntry(self.run, self.line)

    def lines(self) -> list[str]:
        """The entry's NDJSON lines, in order."""
        return self.line.split("\n")


@dataclass(frozen=True)
class DeadLetter:
    """An input line that failed too often: ``id`` in the dead-letter stream, ``source`` its id in the input
    stream, ``deliveries`` how often it was delivered, ``consumer`` the last owner that had it."""

    id: str
    run: str
    line: str
    source: str
    deliveries: int
    consumer: str


def _entries(raw: Any) -> list[InputEntry]:
    """``[(id, {field: value})]`` as redis-py parses stream entries (or ``[id, [field, value, ...]]`` as a script
    replies them); entries deleted meanwhile come as None."""
    found: list[InputEntry] = []
    for entry_id, fields in raw or []:
        if isinstance(fields, list):
            fields = dict(zip(fields[::2], fields[1::2], strict=True))
        if fields:
            run, line = str(fields.get("run", "")), str(fields.get("line", ""))
            found.append(InputEntry(str(entry_id), run, line, fields.get("text") == "1"))
    return found


class InputStream:
    """The input streams of every partition on one Redis.

    Args:
        client: from :func:`adapters.redis.client.connect` (not closed here).
        keys: the key space.
    """

    def __init__(self, client: Redis, keys: KeySpace = KEYS) -> None:
        self._client = client
        self._keys = keys
        self._has_group: set[int] = set()
        self._after: dict[int, tuple[int, str, int]] = {}  # partition -> (grant, the id read up to, empty waits)
        self._bury = Script(client, _BURY, "stream.bury")
        self._retry = Script(client, _RETRY, "stream.retry")
        self._append_open = Script(client, _APPEND_OPEN, "stream.append_open", durable=True)
        self._close_idle = Script(client, _CLOSE_IDLE, "stream.close_idle", durable=True)
        self._read = Script(client, _READ, "stream.read")
        self._claim = Script(client, _CLAIM, "stream.claim")
        self._ack = Script(client, _ACK, "stream.ack")

    def __repr__(self) -> str:
        return f"InputStream(prefix={self._keys.prefix!r})"

    async def append(self, partition: int, entries: Sequence[JournalEntry]) -> list[str]:
        """Append ``entries`` (lines of conversations in ``partition``) in order, all or none (one MULTI); their ids.

        Raises:
            redis.exceptions.RedisError: Redis failed; none of ``entries`` may be counted accepted.
        """
        if not entries:
            return []
        key = self._keys.inbox(partition)
        async with self._client.pipeline(transaction=True) as pipe:
            for entry in entries:
                pipe.xadd(key, {"run": entry.run, "line": entry.line})
            ids = await pipe.execute()
        return [str(i) for i in ids]

    async def append_open(
        self, partition: int, entries: Sequence[JournalEntry], *, epoch: str = "", text: Sequence[bool] = ()
    ) -> list[str | ClosedRun | None]:
        """Append ``entries`` of ``partition`` in order, in one script, except the lines of runs their reader stopped
        (a :meth:`adapters.redis.KeySpace.stopped` mark exists: :meth:`adapters.redis.RunIndex.mark_stopped`) or the
        idle timeout closed (:meth:`close_idle`): per entry its stream id, None for an entry not appended because
        its run was stopped (the caller refuses its lines with 409), a :class:`ClosedRun` for one not appended
        because its run was closed (the caller refuses its lines the run never took with 409). An entry's ``line``
        may be several NDJSON lines of its run joined by ``"\\n"`` (one stream entry, :meth:`InputEntry.lines`);
        each run's marks are two keys of the script however many entries it has. The checks and the append are
        atomic: a line is either in the stream before a mark, or refused after it.
        With ``epoch`` (:meth:`adapters.redis.Epochs.of`), the partition's epoch marker is checked first in the same
        script: a Redis that lost its data takes nothing. ``text``: per entry, whether every line of it is a ``text``
        event the front validated (:attr:`InputEntry.text`; none when empty).

        Raises:
            DataLostError: the partition's epoch marker is not ``epoch``: nothing was appended.
            redis.exceptions.RedisError: Redis failed; none of ``entries`` may be counted accepted.
        """
        if not entries:
            return []
        marks: dict[str, int] = {}  # each run's two marks once (its stop mark's index in KEYS, from 1 as Lua counts)
        args: list[str | int] = [epoch]
        for k, e in enumerate(entries):
            args += [marks.setdefault(e.run, 2 * len(marks) + 3), e.run, e.line, "1" if text and text[k] else ""]
        keys = [self._keys.inbox(partition), self._keys.epoch(partition)]
        for run in marks:
            keys += [self._keys.stopped(partition, run), self._keys.idle_closed(partition, run)]
        try:
            reply = await self._append_open(keys, args)
        except ResponseError as exc:
            if str(exc).startswith("LOST"):
                raise DataLostError([partition]) from None
            raise
        return [_appended(item) for item in reply]

    async def close_idle(
        self, partition: int, run: str, last_seq: int | None, *, token: int, ttl_s: int, ended: bool = False
    ) -> str:
        """Mark ``run`` (of ``partition``) closed by the idle timeout, with the last ``seq`` it took, for ``ttl_s``
        seconds: from now on every front refuses its lines (:meth:`append_open` answers :class:`ClosedRun`). Returns
        the newest entry id of the partition's input stream when the mark was made ('' when empty): the run's owner
        takes every entry up to it before it closes the run (the lines appended before the mark, answered 200).
        ``ended``: the mark says the run took its own ``end`` in those lines (:attr:`ClosedRun.ended`).

        Raises:
            adapters.redis.FencedError: ``token`` is no longer the partition's: nothing was marked.
            redis.exceptions.RedisError: Redis failed; the mark may or may not be there.
        """
        keys = [self._keys.fence(partition), self._keys.inbox(partition), self._keys.idle_closed(partition, run)]
        seq = "ended" if ended else "" if last_seq is None else str(last_seq)
        return str(await self._close_idle.fenced(partition, token, keys, [seq, ttl_s]))

    async def _ensure_group(self, partition: int) -> None:
        if partition in self._has_group:
            return
        try:  # from id 0: lines appended before the first owner came are delivered too
            await self._client.xgroup_create(self._keys.inbox(partition), GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._has_group.add(partition)

    async def _grouped(self, partition: int, command: Callable[[], Awaitable[T]]) -> T:
        """Run a group command; the group is created first when missing (also after the stream was deleted)."""
        await self._ensure_group(partition)
        try:
            return await command()
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            self._has_group.discard(partition)
            await self._ensure_group(partition)
            return await command()

    async def read(
        self,
        partition: int,
        consumer: str,
        *,
        count: int = 100,
        block_ms: int | None = None,
        token: int | None = None,
    ) -> list[InputEntry]:
        """New entries of ``partition`` for ``consumer`` (unfenced: they become its pending entries until
        acknowledged; with ``token``, the owner's reads, as :meth:`_read_owned` says).

        Args:
            partition: the partition (its owner reads it).
            consumer: the owner's id.
            count: at most this many entries.
            block_ms: wait up to this long for an entry when there is none (None: do not wait; never 0, which waits
                forever). Keep it under the client's socket timeout.
            token: the owner's fencing token: entries are taken (XREADGROUP) only while it is the partition's
                (checked in the same script); the wait, and what it returns, is a plain XREAD that takes nothing
                (the entries leave the stream only through fenced scripts). None: unfenced.

        Raises:
            adapters.redis.FencedError: ``token`` is no longer the partition's: nothing was taken.
            core.errors.StoreUnavailableError: fenced, and the connection failed or timed out.
        """
        if token is not None:
            return await self._read_owned(partition, consumer, count, block_ms, token)
        key = self._keys.inbox(partition)
        reply: Any = await self._grouped(
            partition, lambda: self._client.xreadgroup(GROUP, consumer, {key: ">"}, count=count, block=block_ms)
        )
        return [entry for _, entries in reply or [] for entry in _entries(entries)]

    async def _read_owned(
        self, partition: int, consumer: str, count: int, block_ms: int | None, token: int
    ) -> list[InputEntry]:
        """:meth:`read` with the owner's ``token``. The first read of a grant (and every read after a claim, or after
        :data:`IDLE_WAITS` empty waits) is the fenced script :data:`_READ` (XREADGROUP: the entries become the owner's
        pending ones). It says up to which id the owner has seen the stream; from there on the owner waits for new
        entries with a plain blocking XREAD from that id, and takes what it returns as it is: an entry read that way
        is nobody's pending entry, it leaves the stream only through the owner's fenced journal append or
        acknowledgement (:meth:`RedisJournal.append` with ``acks=``, :meth:`ack`: the fence check, then XDEL; the
        XACK finds nothing pending). So a stale owner reads what it likes but removes nothing: the new owner reads
        every entry it did not journal, in stream order. An entry read that way and never journaled (the owner
        failed or stopped) is read again by the next XREADGROUP (the group's last delivered id is behind it), then
        counts deliveries as a pending entry does. One round trip per wake-up: the wait returns the entries."""
        key = self._keys.inbox(partition)
        known = self._after.get(partition)
        if known is None or known[0] != token or block_ms is None:
            found = await self._read_fenced(partition, consumer, count, token)
            if found or block_ms is None:
                return found
            known = self._after.get(partition)
            if known is None:  # cannot happen (an empty read says the stream's last id); read again next time
                return []
        _, after, idle = known
        with unavailable("stream.read"):
            reply: Any = await self._client.xread({key: after}, count=count, block=block_ms)
        raw = [entry for _, entries in reply or [] for entry in entries]
        if not raw:
            if idle + 1 < IDLE_WAITS:
                self._after[partition] = (token, after, idle + 1)
            else:  # the next read asks the stream itself again (fenced), however sure the id is
                self._after.pop(partition, None)
            return []
        self._after[partition] = (token, str(raw[-1][0]), 0)
        return _entries(raw)

    async def _read_fenced(self, partition: int, consumer: str, count: int, token: int) -> list[InputEntry]:
        """One fenced XREADGROUP (:data:`_READ`): the new entries. Remembers the id up to which the owner has seen the
        stream (the last entry read, or the stream's last id when none was new)."""
        keys = [self._keys.fence(partition), self._keys.inbox(partition)]
        reply: Any = await self._grouped(
            partition, lambda: self._read.fenced(partition, token, keys, [GROUP, consumer, count])
        )
        raw = reply[1] or []
        self._after[partition] = (token, str(raw[-1][0]) if raw else str(reply[0]), 0)
        return _entries(raw)

    async def claim(
        self, partition: int, consumer: str, *, min_idle_ms: int = 0, count: int = 1000, token: int | None = None
    ) -> list[InputEntry]:
        """Take the pending entries of ``partition`` idle for ``min_idle_ms`` or more, whoever had them (a dead or
        paused owner, or this one before a restart), for ``consumer``; at most ``count``. Each one counts a delivery.

        A new owner calls it with ``min_idle_ms=0`` right after its lease is granted: the partition was nobody
        else's since. With ``token`` (the owner's fencing token) entries are claimed only while it is the partition's.

        Raises:
            adapters.redis.FencedError: ``token`` is no longer the partition's (what was claimed before stays pending
                for the new owner, which claims it too).
        """
        self._after.pop(partition, None)  # (a new grant, or after a failure: the next read asks the stream again)
        found: list[InputEntry] = []
        cursor = "0-0"
        while len(found) < count:
            reply = await self._autoclaim(partition, consumer, min_idle_ms, cursor, count - len(found), token)
            cursor = str(reply[0])
            found += _entries(reply[1])
            if cursor == "0-0":
                break
        return found

    async def _autoclaim(
        self, partition: int, consumer: str, min_idle_ms: int, start: str, count: int, token: int | None = None
    ) -> Any:
        key = self._keys.inbox(partition)
        if token is not None:
            keys = [self._keys.fence(partition), key]
            args: list[str | int | float] = [GROUP, consumer, min_idle_ms, start, count]
            return await self._grouped(partition, lambda: self._claim.fenced(partition, token, keys, args))
        return await self._grouped(
            partition, lambda: self._client.xautoclaim(key, GROUP, consumer, min_idle_ms, start_id=start, count=count)
        )

    async def ack(self, partition: int, ids: Sequence[str], *, token: int | None = None) -> int:
        """Acknowledge and delete the entries ``ids`` of ``partition``: call only once their effect is durable (in
        the journal, or in the ledger); :meth:`RedisJournal.append` can do it in its own script (``acks=``).
        With ``token`` (the owner's fencing token) only while it is the partition's. How many were pending.

        Raises:
            adapters.redis.FencedError: ``token`` is no longer the partition's: nothing was acknowledged.
        """
        if not ids:
            return 0
        key = self._keys.inbox(partition)
        if token is not None:
            keys = [self._keys.fence(partition), key]
            return int(await self._ack.fenced(partition, token, keys, [GROUP, *ids]))
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.xack(key, GROUP, *ids)
            pipe.xdel(key, *ids)
            acked, _ = await pipe.execute()
        return int(acked)

    async def pending(self, partition: int, *, count: int = 1000) -> list[tuple[str, str, int]]:
        """The pending entries of ``partition`` as ``(id, consumer, deliveries)``, oldest first, at most ``count``."""
        key = self._keys.inbox(partition)
        rows = await self._grouped(partition, lambda: self._client.xpending_range(key, GROUP, "-", "+", count))
        return [(str(r["message_id"]), str(r["consumer"]), int(r["times_delivered"])) for r in rows]

    async def bury(
        self, partition: int, *, max_deliveries: int, count: int = 1000, token: int | None = None
    ) -> list[str]:
        """Move the pending entries of ``partition`` delivered more than ``max_deliveries`` times to its dead-letter
        stream (each move is atomic: never lost, never in both); the ids moved. With ``token`` (the owner's fencing
        token) only while it is the partition's (:data:`_BURY`).

        Raises:
            adapters.redis.FencedError: ``token`` is no longer the partition's: nothing was moved.
            core.errors.StoreUnavailableError: fenced, and the connection failed or timed out.
        """
        candidates = [
            i for i, _, deliveries in await self.pending(partition, count=count) if deliveries > max_deliveries
        ]
        if not candidates:
            return []
        keys = [self._keys.fence(partition), self._keys.inbox(partition), self._keys.dead(partition)]
        moved = await self._bury.fenced(partition, token, keys, [GROUP, max_deliveries, *candidates])
        return [str(i) for i in moved]

    async def dead(self, partition: int, *, count: int = 100) -> list[DeadLetter]:
        """The dead letters of ``partition``, oldest first, at most ``count``."""
        letters: list[DeadLetter] = []
        found: Any = await self._client.xrange(self._keys.dead(partition), count=count)
        for letter_id, f in found or []:
            letters.append(
                DeadLetter(
                    id=str(letter_id),
                    run=str(f.get("run", "")),
                    line=str(f.get("line", "")),
                    source=str(f.get("source", "")),
                    deliveries=int(f.get("deliveries", 0)),
                    consumer=str(f.get("consumer", "")),
                )
            )
        return letters

    async def retry(self, partition: int, letter_id: str) -> str | None:
        """Put a dead letter back at the end of its input stream (atomically); its new id, or None when unknown."""
        new_id = await self._retry([self._keys.dead(partition), self._keys.inbox(partition)], [letter_id])
        return None if new_id is None else str(new_id)

    async def drop(self, partition: int, letter_id: str) -> bool:
        """Delete a dead letter for good; False when unknown."""
        return bool(await self._client.xdel(self._keys.dead(partition), letter_id))

    async def length(self, partition: int) -> int:
        """How many entries of ``partition`` are not done yet (new and pending): the owner's backlog."""
        return int(await self._client.xlen(self._keys.inbox(partition)))


def _appended(item: Any) -> str | ClosedRun | None:
    """One item of :data:`_APPEND_OPEN`'s reply as :meth:`InputStream.append_open` answers it."""
    if item == 0:
        return None
    text = item.decode() if isinstance(item, bytes) else str(item)
    if text.startswith("closed:"):
        last = text[len("closed:") :]
        return ClosedRun(None, ended=True) if last == "ended" else ClosedRun(int(last) if last else None)
    return text
