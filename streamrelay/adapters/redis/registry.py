"""Where things are, for replicas: which partition holds a run, and at which URL each replica serves.

Any replica takes a run's lines (they go to the run's partition's input stream), but only the partition's owner
holds the run: its live page, its pipeline lane, its gate. So a replica must know a run's partition (the run
index: written once, at the run's ``run.start``, from its conversation) and where the partition's owner serves
(the replicas' URLs: each replica announces the URL the others reach it at, for as long as its heartbeat lives).

Keys: ``sr:run:<run>`` holds the run's partition (a key of its own per run, so a Redis Cluster spreads them; it
expires ``run_ttl_s`` after it was written: a run that lasts longer must not, see :class:`RunIndex`), and
``sr:{replicas}:urls`` a hash owner id → URL. ``sr:ctl:<control key>`` holds the run key a Stop control's id
names (:func:`core.run.stop_controls.short_id` is a hash of the run key: not readable back), written with the run's
index entry, so any replica finds the run of a forwarded click.
"""

from __future__ import annotations

from collections import OrderedDict

from redis.asyncio import Redis

from streamrelay.adapters.redis.client import Script
from streamrelay.adapters.redis.keys import KEYS, KeySpace

_LIVE = """
-- KEYS: the replicas' heartbeats (owner -> deadline ms), their URLs; replies owner, url, owner, url...
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for _, owner in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')) do
  local url = redis.call('HGET', KEYS[2], owner)
  if url then
    out[#out + 1] = owner
    out[#out + 1] = url
  end
end
return out
"""

RUN_TTL_S = 7 * 24 * 3600
"""How long the run index remembers a run (seconds): far longer than any run; an ended run's lines past it are
answered as a run that never started (409), rather than dropped."""
CACHE = 100_000
"""Runs whose partition a replica remembers locally (a run's partition never changes)."""


class RunIndex:
    """Run id → partition, written at ``run.start`` and read by any replica (cached: it never changes).

    Args:
        client: from :func:`adapters.redis.client.connect`.
        keys: the key space.
        run_ttl_s: how long an entry lives (seconds).
    """

    def __init__(self, client: Redis, keys: KeySpace = KEYS, *, run_ttl_s: int = RUN_TTL_S) -> None:
        self._client = client
        self._keys = keys
        self._ttl_s = run_ttl_s
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._controls: OrderedDict[str, str] = OrderedDict()

    def __repr__(self) -> str:
        return f"RunIndex(prefix={self._keys.prefix!r}, cached={len(self._cache)})"

    def _key(self, run: str) -> str:
        return f"{self._keys.prefix}:run:{run}"

    def _remember(self, run: str, partition: int) -> int:
        self._cache[run] = partition
        self._cache.move_to_end(run)
        while len(self._cache) > CACHE:
            self._cache.popitem(last=False)
        return partition

    def _control_key(self, control: str) -> str:
        return f"{self._keys.prefix}:ctl:{control}"

    async def claim(self, run: str, partition: int, control: str | None = None) -> int:
        """Record that ``run`` lives in ``partition`` unless it was recorded before; the partition it lives in
        (another one: the run id was started before for another conversation). ``control``: the key a Stop
        control's id makes of the run (``client/<16 hex>``), recorded as naming ``run`` in the same round trip.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        known = self._cache.get(run)
        if known is not None:
            return known
        key = self._key(run)
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.set(key, partition, nx=True, ex=self._ttl_s)
            if control is not None:  # a hash of the run key: every write of it is the same
                pipe.set(self._control_key(control), run, ex=self._ttl_s)
            written = (await pipe.execute())[0]
        if written:
            return self._remember(run, partition)
        value = await self._client.get(key)
        return self._remember(run, partition if value is None else int(value))

    def known(self, run: str) -> int | None:
        """The partition of ``run`` when this replica knows it already (no round trip), else None."""
        return self._cache.get(run)

    async def partition(self, run: str) -> int | None:
        """The partition of ``run`` (None: no ``run.start`` of it was taken).

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        known = self._cache.get(run)
        if known is not None:
            return known
        value = await self._client.get(self._key(run))
        return None if value is None else self._remember(run, int(value))

    async def run_of_control(self, control: str) -> str | None:
        """The run key a Stop control's key names (:meth:`claim`'s ``control``), None when no run is known by it.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        known = self._controls.get(control)
        if known is not None:
            return known
        value = await self._client.get(self._control_key(control))
        if value is None:
            return None
        self._controls[control] = str(value)
        while len(self._controls) > CACHE:
            self._controls.popitem(last=False)
        return str(value)

    async def mark_stopped(self, run: str, partition: int) -> bool:
        """Mark ``run`` (of ``partition``) stopped by its reader, for as long as the index remembers it: every
        front refuses its later lines (:meth:`adapters.redis.InputStream.append_open`). True when this call made
        the mark (False: it was there).

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        return bool(await self._client.set(self._keys.stopped(partition, run), 1, nx=True, ex=self._ttl_s))

    async def unmark_stopped(self, run: str, partition: int) -> None:
        """Take back a :meth:`mark_stopped` whose stop was not taken (the run goes on)."""
        await self._client.delete(self._keys.stopped(partition, run))


class ReplicaUrls:
    """Each replica's URL (where the others forward what only a partition's owner can answer).

    Args:
        client: from :func:`adapters.redis.client.connect`.
        keys: the key space.
    """

    def __init__(self, client: Redis, keys: KeySpace = KEYS) -> None:
        self._client = client
        self._beats = keys.replicas
        self._key = f"{keys.replicas}:urls"
        self._live = Script(client, _LIVE, "registry.live")

    def __repr__(self) -> str:
        return f"ReplicaUrls(key={self._key!r})"

    async def announce(self, owner: str, url: str) -> None:
        """``owner`` serves at ``url`` (an ``http://host:port`` the other replicas can reach)."""
        await self._client.hset(self._key, owner, url)

    async def url(self, owner: str) -> str | None:
        """Where ``owner`` serves (None: it never said, or it left)."""
        value = await self._client.hget(self._key, owner)
        return None if value is None else str(value)

    async def leave(self, owner: str) -> None:
        await self._client.hdel(self._key, owner)

    async def live(self) -> dict[str, str]:
        """The live replicas (their heartbeat deadline is after Redis's now: :mod:`adapters.redis.lease`) that said
        where they serve: ``{owner: url}``, in one round trip.

        Raises:
            redis.exceptions.RedisError: Redis failed.
        """
        flat = [str(v) for v in await self._live([self._beats, self._key], [])]
        return dict(zip(flat[::2], flat[1::2], strict=True))
