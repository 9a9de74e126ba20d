"""A client's limits counted across every replica: its active runs and its events per second (issue 24).

One process counts a client's active runs in its :class:`core.ingest.clients.ClientBook` and paces its events
with a leaky bucket at the HTTP edge (:mod:`adapters.ingest_http.callers`). Behind a load balancer each replica
would count only what reached it, so N replicas would let a client run N times ``max_active_runs`` and send N times
``events_per_s``. Here both are counted in Redis, in one script per ingest batch (:meth:`SharedClientLimits.gate`),
on the client's own hash tag (one slot per client, on one server or a cluster)::

    sr:{c:<client>}:active   a sorted set: the client's active run keys, scored by when their count lapses
                             (Redis's clock, ms): the owner of a run re-scores it every ``ttl_s / 3``
                             (:meth:`SharedClientLimits.refresh`) and removes it when the run ends
                             (:meth:`SharedClientLimits.left`); a run whose replica died lapses after ``ttl_s``
                             unless its new owner resumed it (and counts it again)
    sr:{c:<client>}:tat      the client's GCRA state for ``events_per_s`` (its theoretical arrival time, ms)

Pacing is acquire-or-wait, as aiolimiter's leaky bucket is for one process (``time_period`` 1 s): a batch of n
lines reserves its n events on Redis's clock and its front waits what the script says before the lines are
appended, so a client is read more slowly, never refused, whichever replicas its requests reach; up to one
second's worth of events goes through at once. A run start past ``max_active_runs`` is refused (429) by the same
script. Everything is per batch: one round trip, whatever its number of lines or runs.

When Redis is slow the gate adds its round trip to the batch's; when it does not answer, the batch is answered 503
with ``Retry-After`` and nothing of it is taken (ingest needs Redis anyway: its lines go to Redis's streams). A
reservation made for a batch whose append then failed stays with the front that made it, which spends it on the same
lines sent again (:meth:`app.replicas.front.ReplicaFront._gate`); sent to another replica they count twice against
the client's rate (they wait up to that much longer).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from streamrelay.adapters.redis.client import Redis, Script
from streamrelay.adapters.redis.keys import KEYS, KeySpace
from streamrelay.core.ingest.clients import ClientLimits, split_key

TTL_S = 60.0
"""How long a run counts as its client's active run without its owner saying so again (seconds)."""

_GATE = """
-- KEYS: active, tat; ARGV: events, emission interval (ms), burst (ms), max active, ttl (ms), new run keys...
-- replies {wait in ms (a string), {refused run keys...}}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[5])
local refused = {}
if #ARGV > 5 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  local count = redis.call('ZCARD', KEYS[1])
  local most = tonumber(ARGV[4])
  for i = 6, #ARGV do
    if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
      redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
    elseif count < most then
      redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
      count = count + 1
    else
      refused[#refused + 1] = ARGV[i]
    end
  end
end
local wait = 0
local n = tonumber(ARGV[1])
if n > 0 then
  local tat = tonumber(redis.call('GET', KEYS[2]) or '0')
  if tat < now then tat = now end
  tat = tat + n * tonumber(ARGV[2])
  wait = tat - now - tonumber(ARGV[3])
  if wait < 0 then wait = 0 end
  redis.call('SET', KEYS[2], tostring(tat), 'PX', math.ceil(tat - now) + 1000)
end
return {tostring(wait), refused}
"""


class SharedClientLimits:
    """Every client's active runs and event rate, counted in Redis for all replicas (module docstring).

    Args:
        client: from :func:`adapters.redis.client.connect` (not closed here).
        keys: the key space.
        ttl_s: how long a run counts without being refreshed (:data:`TTL_S`).
    """

    def __init__(self, client: Redis, keys: KeySpace = KEYS, *, ttl_s: float = TTL_S) -> None:
        self._client = client
        self._keys = keys
        self.ttl_s = ttl_s
        self._gate = Script(client, _GATE, "client_limits.gate")

    def __repr__(self) -> str:
        return f"SharedClientLimits(prefix={self._keys.prefix!r}, ttl_s={self.ttl_s})"

    def _key(self, client: str, name: str) -> str:
        return f"{self._keys.prefix}:{{c:{client}}}:{name}"

    async def gate(self, limits: ClientLimits, events: int, new_runs: Sequence[str] = ()) -> tuple[float, list[str]]:
        """Reserve ``events`` events of ``limits``'s client and count its runs ``new_runs`` (run keys, from
        ``run.start`` lines: a run counted already is only refreshed) as active, in one script.

        Returns:
            ``(wait_s, refused)``: how long to wait before the batch's lines are appended (its pace), and the runs
            of ``new_runs`` refused because the client has ``max_active_runs`` active runs (429).

        Raises:
            redis.exceptions.RedisError: Redis failed: nothing was counted (the batch is answered 503).
        """
        rate = max(1.0, limits.events_per_s)
        interval_ms = 1000.0 / rate
        burst_ms = 1000.0  # one second's worth of events at once, as the leaky bucket (capacity: the rate) lets through
        keys = [self._key(limits.name, "active"), self._key(limits.name, "tat")]
        args: list[str | int | float] = [events, repr(interval_ms), repr(burst_ms), limits.max_active_runs]
        args += [int(self.ttl_s * 1000), *new_runs]
        wait_ms, refused = await self._gate(keys, args)
        return max(0.0, float(wait_ms) / 1000), [str(run) for run in refused]

    async def refresh(self, runs: Iterable[str]) -> None:
        """The runs keyed ``runs`` are active here: they count for another ``ttl_s`` (one round trip).

        Raises:
            redis.exceptions.RedisError: Redis failed (they lapse unless refreshed again in time).
        """
        by_client: dict[str, list[str]] = {}
        for run in runs:
            by_client.setdefault(split_key(run)[0], []).append(run)
        if not by_client:
            return
        time_s, micros = await self._client.time()
        until = int(time_s) * 1000 + int(micros) // 1000 + int(self.ttl_s * 1000)
        async with self._client.pipeline(transaction=False) as pipe:
            for name, keys in by_client.items():
                pipe.zadd(self._key(name, "active"), dict.fromkeys(keys, until))
            await pipe.execute()

    async def left(self, run: str) -> None:
        """The run keyed ``run`` is no longer active: its client may start another.

        Raises:
            redis.exceptions.RedisError: Redis failed (the run lapses after ``ttl_s``).
        """
        await self._client.zrem(self._key(split_key(run)[0], "active"), run)

    async def active(self, client: str) -> int:
        """How many runs of ``client`` count as active now."""
        time_s, micros = await self._client.time()
        now = int(time_s) * 1000 + int(micros) // 1000
        return int(await self._client.zcount(self._key(client, "active"), f"({now}", "+inf"))
