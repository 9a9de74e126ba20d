"""The Redis journal: one partition's accepted input lines, per run, in arrival order (DESIGN §8).

Implements :class:`core.records.journal.Journal` with the semantics of ``MemoryJournal`` and ``SqliteJournal``, for the
runs of one partition (an owner holds one journal per partition it owns; every key carries the partition's hash
tag, so each write is one Lua script in one slot). Keys (partition 7)::

    sr:{p7}:j:lines:<run>   a list: the run's lines, each element one append's lines of the run joined by "\n"
    sr:{p7}:j:runs          a sorted set: unfinished runs, scored by their first line's order
    sr:{p7}:j:seq           the order counter
    sr:{p7}:j:at            a hash: run -> when its newest line was accepted (Redis's clock, float seconds)
    sr:{p7}:j:ended         a hash: finished run -> its last seq ("" for none)
    sr:{p7}:j:ended:order   a sorted set: finished runs, oldest first (the oldest are forgotten past keep_ended)

A journal bound to the owner's fencing token (``token=``, or :meth:`RedisJournal.fenced`) checks it in every
write, like the ledger: a paused old owner cannot append lines or finish runs after a takeover. An append can
also acknowledge the input-stream entries it journals (``acks=``) in the same script: a line is then in the
journal exactly once, whether the owner dies before or after (a new owner claims the entry only if the script
did not run).

Durability is Redis's: with ``appendonly yes`` and ``appendfsync everysec`` a crash of Redis itself loses at most
about a second of accepted lines; ``appendfsync always`` loses none (https://redis.io/docs/latest/operate/oss_and_stack/management/persistence/).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from redis.exceptions import ResponseError

from streamrelay.adapters.redis.client import FENCE_CHECK, Redis, Script, unavailable
from streamrelay.adapters.redis.errors import NotDirectError
from streamrelay.adapters.redis.keys import KEYS, KeySpace
from streamrelay.core.records.journal import EndedRun, IdleClose, JournalEntry

GROUP = "owners"
"""The consumer group of every partition's input stream (one group: the partition's owner of the moment)."""

_NOW = """
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
"""

_PUSH_RUN = (
    _NOW
    + """
local function push_run(key, run, lines)
  redis.call('RPUSH', key, lines)
  if not redis.call('ZSCORE', KEYS[3], run) then
    redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[2]), run)
  end
  redis.call('HSET', KEYS[4], run, now)
end
"""
)
"""One run's lines journaled (both appends' step, after their checks): pushed to its list ``key``, the run given
its order when new (KEYS[2] the counter, KEYS[3] the runs), its newest-line time set (KEYS[4]) on Redis's clock."""

_APPEND = (
    FENCE_CHECK
    + _PUSH_RUN
    + """
-- KEYS: fence, seq, runs, at, inbox, then one lines key per run; ARGV: token, group, n_acks, acks..., then per run:
-- run, its lines joined by a newline (one list element: NDJSON lines hold none)
local i = 4
local acks = {}
for k = 1, tonumber(ARGV[3]) do acks[k] = ARGV[i]; i = i + 1 end
if #acks > 0 then
  redis.call('XACK', KEYS[5], ARGV[2], unpack(acks))
  redis.call('XDEL', KEYS[5], unpack(acks))
end
for k = 6, #KEYS do
  push_run(KEYS[k], ARGV[i], ARGV[i + 1])
  i = i + 2
end
return #KEYS - 5
"""
)
"""``journal.append`` (durable: a line counts accepted only once journaled). KEYS: fence, the partition's run order
counter, its runs (sorted set, first line's order), its newest-line times, its input stream, then one lines list per
entry; ARGV: token, consumer group, the count of input-stream ids to acknowledge, those ids, then run and line per
entry. Returns how many lines it appended. Atomic: the fence check, the lines, the run order and the input-stream
acknowledgement (XACK + XDEL) are one step, so an input line is either journaled and gone from the stream, or
still there (pending, or not read through the group yet) for the next owner: never both, never neither."""

_APPEND_DIRECT = (
    FENCE_CHECK
    + """
-- KEYS: fence, seq, runs, at, inbox, epoch marker, then per run: its lines key, its stop mark, its idle-close mark;
-- ARGV: token, epoch ('' unchecked), then per run: run, its lines joined by a newline. Refuses (NOTDIRECT, nothing
-- written) when the epoch marker is not ARGV[2], the input stream holds an entry, or a run has a mark
if ARGV[2] ~= '' and redis.call('GET', KEYS[6]) ~= ARGV[2] then
  return redis.error_reply('NOTDIRECT lost')
end
if redis.call('XLEN', KEYS[5]) > 0 then
  return redis.error_reply('NOTDIRECT behind')
end
for k = 7, #KEYS, 3 do
  if redis.call('EXISTS', KEYS[k + 1], KEYS[k + 2]) > 0 then
    return redis.error_reply('NOTDIRECT marked')
  end
end
"""
    + _PUSH_RUN
    + """
local i = 3
for k = 7, #KEYS, 3 do
  push_run(KEYS[k], ARGV[i], ARGV[i + 1])
  i = i + 2
end
return (#KEYS - 6) / 3
"""
)
"""``journal.append`` with ``direct=`` (durable): lines a replica's front took for a partition its replica owns,
journaled without passing through the input stream. KEYS: as :data:`_APPEND`'s first five, the partition's epoch
marker, then per run its lines list, its stop mark and its idle-close mark; ARGV: token, the epoch the replica found
('' unchecked), then run and lines per run. After the fence check, the script refuses (``NOTDIRECT <reason>``,
nothing written) when the epoch marker is not ARGV[2] (``lost``: Redis lost its data), when the partition's input
stream holds any entry (``behind``: an entry leaves the stream only once journaled, so an empty stream says every
line any front answered 200 for this partition is journaled already: these lines come after all of them), or when a
run has its stop or idle-close mark (``marked``: the stream's append answers those lines, 409 or dropped). Atomic:
the checks and the lines are one step, as the stream's append (``stream.append_open``) is."""

_FINISH = (
    FENCE_CHECK
    + """
-- KEYS: fence, runs, at, ended, ended order, seq, lines; ARGV: token, run, last_seq or '', keep
redis.call('DEL', KEYS[7])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[2])
redis.call('HSET', KEYS[4], ARGV[2], ARGV[3])
if not redis.call('ZSCORE', KEYS[5], ARGV[2]) then
  redis.call('ZADD', KEYS[5], redis.call('INCR', KEYS[6]), ARGV[2])
end
local over = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[4])
if over > 0 then
  local old = redis.call('ZRANGE', KEYS[5], 0, over - 1)
  redis.call('ZREMRANGEBYRANK', KEYS[5], 0, over - 1)
  redis.call('HDEL', KEYS[4], unpack(old))
end
return 1
"""
)
"""``journal.finish`` (durable). KEYS: fence, runs, newest-line times, ended runs (hash: run -> last seq), their
order (sorted set), the order counter, the run's lines; ARGV: token, run, its last seq ('' none), how many ended runs
to keep. Returns 1. Atomic: the run leaves the unfinished ones and joins the ended ones (its lines dropped, the
oldest ended forgotten past the limit) in one step after the fence check: a new owner sees it either unfinished,
with its lines to replay, or ended, never lost between."""


class RedisJournal:
    """The journal of one partition's runs in Redis.

    Args:
        client: from :func:`adapters.redis.client.connect` (not closed here).
        partition: the partition whose runs this journal holds.
        token: the writer's fencing token (the partition owner's lease grant); None writes unfenced (a replica
            that accepts lines for a partition it does not own should append to the input stream instead).
        keys: the key space.
        keep_ended: how many finished runs are remembered (oldest forgotten first).
    """

    def __init__(
        self,
        client: Redis,
        partition: int,
        *,
        token: int | None = None,
        keys: KeySpace = KEYS,
        keep_ended: int = 100_000,
    ) -> None:
        self._client = client
        self.partition = partition
        self.token = token
        self._keys = keys
        self._keep = keep_ended
        self._append = Script(client, _APPEND, "journal.append", durable=True)
        self._append_direct = Script(client, _APPEND_DIRECT, "journal.append_direct", durable=True)
        self._finish = Script(client, _FINISH, "journal.finish", durable=True)

    def __repr__(self) -> str:
        return f"RedisJournal(partition={self.partition}, token={self.token})"

    def fenced(self, token: int) -> RedisJournal:
        """This partition's journal for the owner holding the grant ``token``."""
        return RedisJournal(self._client, self.partition, token=token, keys=self._keys, keep_ended=self._keep)

    def _key(self, name: str) -> str:
        return self._keys.journal(self.partition, name)

    async def append(
        self, entries: Sequence[JournalEntry], *, acks: Sequence[str] = (), direct: str | None = None
    ) -> None:
        """Make ``entries`` durable, in order, in one script; acknowledge (XACK, XDEL) the input-stream entries
        ``acks`` of this partition in the same script.

        ``direct``: the lines were taken by this replica's front, not read from the input stream (no ``acks``); the
        value is the partition's epoch this replica found ('' unchecked). They are journaled only while the input
        stream is empty and no run of theirs has its stop or idle-close mark, and the epoch marker is that one
        (:data:`_APPEND_DIRECT`), in the same script.

        Raises:
            FencedError: the journal is fenced and its token is no longer the partition's: nothing was written.
            NotDirectError: ``direct``, and the lines must go through the input stream: nothing was written.
            core.errors.StoreUnavailableError: the connection failed or timed out (the lines may or may not be
                journaled), or the write was not replicated in time.
            redis.exceptions.RedisError: Redis failed; nothing of ``entries`` may be counted accepted.
        """
        if not entries and not acks:
            return
        by_run: dict[str, list[str]] = {}  # each run's lines in order: one list element per run (few arguments)
        for entry in entries:
            by_run.setdefault(entry.run, []).append(entry.line)
        if direct is not None:
            await self._journal_direct(by_run, direct)
            return
        keys = [self._keys.fence(self.partition), self._key("seq"), self._key("runs"), self._key("at")]
        keys += [self._keys.inbox(self.partition), *(self._key(f"lines:{run}") for run in by_run)]
        args: list[str | int | float] = [GROUP, len(acks), *acks]
        for run, lines in by_run.items():
            args += [run, lines[0] if len(lines) == 1 else "\n".join(lines)]
        await self._append.fenced(self.partition, self.token, keys, args)

    async def _journal_direct(self, by_run: dict[str, list[str]], epoch: str) -> None:
        """:meth:`append`'s ``direct`` path (:data:`_APPEND_DIRECT`)."""
        p = self.partition
        keys = [self._keys.fence(p), self._key("seq"), self._key("runs"), self._key("at"), self._keys.inbox(p)]
        keys.append(self._keys.epoch(p))
        args: list[str | int | float] = [epoch]
        for run, lines in by_run.items():
            keys += [self._key(f"lines:{run}"), self._keys.stopped(p, run), self._keys.idle_closed(p, run)]
            args += [run, lines[0] if len(lines) == 1 else "\n".join(lines)]
        try:
            await self._append_direct.fenced(p, self.token, keys, args)
        except ResponseError as exc:
            message = str(exc)
            if not message.startswith("NOTDIRECT"):
                raise
            raise NotDirectError(p, message.removeprefix("NOTDIRECT").strip()) from None

    async def unfinished(self) -> list[str]:
        """Runs of this partition that have lines and have not finished, oldest first (their first line's order)."""
        with unavailable("journal.unfinished"):
            return [str(run) for run in await self._client.zrange(self._key("runs"), 0, -1)]

    async def lines(self, run: str) -> list[str]:
        """``run``'s journaled lines, in the order they were accepted."""
        with unavailable("journal.lines"):
            stored = await self._client.lrange(self._key(f"lines:{run}"), 0, -1)
        return [line for element in stored for line in str(element).split("\n")]

    async def last_at(self, run: str) -> float | None:
        """When ``run``'s newest line was accepted (Redis's clock, seconds since the epoch), or None without lines."""
        with unavailable("journal.last_at"):
            at = await self._client.hget(self._key("at"), run)
        return None if at is None else float(at)

    async def finish(self, run: str, last_seq: int | None) -> None:
        """``run`` finished: drop its lines, remember its last ``seq``.

        Raises:
            FencedError: the journal is fenced and its token is no longer the partition's: nothing was written.
        """
        keys = [self._keys.fence(self.partition), self._key("runs"), self._key("at"), self._key("ended")]
        keys += [self._key("ended:order"), self._key("seq"), self._key(f"lines:{run}")]
        args: list[str | int | float] = [run, "" if last_seq is None else last_seq, self._keep]
        await self._finish.fenced(self.partition, self.token, keys, args)

    async def erase(self, runs: Sequence[str]) -> int:
        """Remove ``runs``' text, one run after another (:meth:`_erase_one`); how many fields held some."""
        return sum([await self._erase_one(run) for run in runs])

    async def _erase_one(self, run: str) -> int:
        """Remove ``run``'s text from this partition's keys (:class:`core.records.erase.Erasable`): its journaled lines
        (``j:lines:<run>``, its place in ``j:runs`` and ``j:at``) and its dead letters (entries of ``sr:{pN}:dead``
        whose ``run`` is it: XDEL). Kept: that it ended and its last ``seq``. For a run no owner is delivering: an
        owner still journaling it would write its later lines again. Input-stream entries are deleted by the owner
        once journaled (:mod:`adapters.redis.stream`); Redis's own persistence files (RDB, AOF) may keep old values
        until their next rewrite.

        Returns:
            How many journal elements and dead letters held the run's lines.
        """
        dead = self._keys.dead(self.partition)
        with unavailable("journal.erase"):
            buried = await dead_letters_of(self._client, dead, {run})
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.llen(self._key(f"lines:{run}"))
                pipe.delete(self._key(f"lines:{run}"))
                pipe.zrem(self._key("runs"), run)
                pipe.hdel(self._key("at"), run)
                if buried:
                    pipe.xdel(dead, *buried)
                done = await pipe.execute()
        return int(done[0]) + len(buried)

    async def close_idle(self, run: str, last_seq: int | None, *, ended: bool = False) -> None:
        """Nothing here: a relay journaling straight into this journal takes its lines in its own process, where
        admission refuses them once the run is closing; a partition owner fed from the input stream passes the
        close's commit point through the stream (:meth:`app.replicas.owner.PartitionOwner.close_idle`)."""

    async def idle_closed(self, run: str) -> IdleClose | None:
        """None: the idle-close mark lives in the input stream's keys (:meth:`adapters.redis.InputStream.close_idle`),
        and a partition's new owner resumes such a run open while every front refuses its later lines; it closes
        again after its idle time with the same final, the ledger keeping its notice once
        (:meth:`core.records.journal.Journal.idle_closed`)."""
        return None

    async def ended(self, run: str) -> EndedRun | None:
        """The finished run ``run``, or None when it never finished in this partition (or was forgotten)."""
        with unavailable("journal.ended"):
            last_seq = await self._client.hget(self._key("ended"), run)
        if last_seq is None:
            return None
        return EndedRun(run, int(last_seq) if last_seq != "" else None)

    async def close(self) -> None:
        """Nothing to close: the client belongs to the caller."""
        return None


async def dead_letters_of(client: Redis, dead: str, runs: Collection[str]) -> list[str]:
    """The ids of the entries of the dead-letter stream ``dead`` (``sr:{pN}:dead``: input lines an owner failed on,
    :meth:`adapters.redis.InputStream.bury`) whose ``run`` is one of ``runs``, oldest first (one XRANGE of the whole
    stream: dead letters are few, each an operator's to retry or drop).

    Raises:
        redis.exceptions.RedisError: Redis failed.
    """
    letters = await client.xrange(dead) or []
    return [str(entry_id) for entry_id, fields in letters if entry_id is not None and _field(fields, "run") in runs]


def _field(fields: object, name: str) -> str | None:
    """A stream entry's field ``name`` as text (the client may answer bytes or str keys and values)."""
    if not isinstance(fields, dict):
        return None
    for key, value in fields.items():
        if (key.decode() if isinstance(key, bytes) else key) == name:
            return value.decode() if isinstance(value, bytes) else str(value)
    return None
