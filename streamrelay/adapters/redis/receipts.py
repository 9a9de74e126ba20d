"""RedisReceipts: status receipts (:mod:`core.records.receipts`) on the replicas' Redis, shared by every replica: the
one that takes a platform's status webhook records it, the one settling the create reads it.

Keys (hash tag per platform, so the script stays in one slot)::

    sr:{receipts:whatsapp}:r:<delivery id>  "<rank>|<JSON of the receipt>", PX the retention
    sr:{receipts:whatsapp}:heard            when the newest receipt was recorded (Unix seconds)
    sr:{receipts:whatsapp}:heard_by         a hash: replica id -> when that replica's webhook last recorded one

Who heard it matters to settling (:mod:`adapters.whatsapp.settle`): silence proves a create was never stored only
while the status webhooks reach the sidecar, and on replicas Meta posts them to one URL. A replica's webhook that
recorded statuses a minute ago proves nothing once that replica is dead (no load balancer in front, or the URL names
it alone): the statuses of the messages stored meanwhile are being retried at a dead address. So
:meth:`RedisReceipts.last_heard_s` counts only the replicas whose heartbeat lives now (``sr:{replicas}``,
:mod:`adapters.redis.lease`): the create is then settled ``unknown`` (reported uncertain), never sent again on the
word of a dead receiver (chaos-7-00007: replica-1, the only URL the mock posted to, was killed while replica-2 settled
a WhatsApp create that had timed out after it was stored, and sent it again: a double the report did not count).
A receiver's death also makes silence unproven for a while (:data:`DEAD_RECEIVER_S`), even while live ones hear
statuses: those aimed at the dead one (posted as it died, or routed to it before the load balancer passed over it)
come again only at Meta's next try, which may fall after the settle window. So does any replica's lapsed heartbeat
(``sr:{replicas}:gone``, :mod:`adapters.redis.lease`): a replica killed before its webhook recorded anything is in
no ``heard_by``, yet the load balancer may have posted it the status of a create stored as it died.

A write is one Lua script (:data:`_RECORD`): each receipt replaces the kept one only when its status ranks higher
(:data:`core.records.receipts.STATUS_RANK`); durable like the ledger's writes (``WAIT`` where the client wants it).
Each write sets the receipt's expiry to the retention again (``[service] receipts_retention_hours``, counted from
its last recording like SQLite's ``recorded_at``), so Redis drops it by itself: one key per receipt, because a hash
field cannot expire before Redis 7.4 (``HEXPIRE``, https://redis.io/docs/latest/commands/hexpire/) and the servers
this runs on may be older (Debian's 7.0). :meth:`RedisReceipts.prune` has nothing left to do: a write also forgets
the receivers (replica ids, one per process start) that recorded nothing for the retention.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from streamrelay.adapters.redis.client import Redis, Script, unavailable
from streamrelay.adapters.redis.keys import KEYS, KeySpace
from streamrelay.core.records.receipts import RECEIPTS_RETENTION_S, STATUS_RANK, Receipt, ReceiptStatus

_RECORD = """
local heard = tonumber(redis.call('GET', KEYS[1]) or '0')
local mine = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
local ttl = ARGV[1]
for i = 0, #KEYS - 3 do
  local key, rank, value, at = KEYS[3 + i], tonumber(ARGV[3 + i * 3]), ARGV[4 + i * 3], tonumber(ARGV[5 + i * 3])
  local old = redis.call('GET', key)
  if (not old) or tonumber(string.match(old, '^(%d+)|')) < rank then
    redis.call('SET', key, value, 'PX', ttl)
  else
    redis.call('PEXPIRE', key, ttl)
  end
  if at > heard then heard = at end
  if at > mine then mine = at end
end
redis.call('SET', KEYS[1], string.format('%.6f', heard))
redis.call('HSET', KEYS[2], ARGV[2], string.format('%.6f', mine))
local kept = redis.call('HGETALL', KEYS[2])
for i = 1, #kept, 2 do
  if tonumber(kept[i + 1]) < heard - tonumber(ttl) / 1000 then redis.call('HDEL', KEYS[2], kept[i]) end
end
return 1
"""
"""``receipts.record`` (durable). KEYS: the platform's ``:heard``, its ``:heard_by``, then one key per receipt;
ARGV: the retention (ms), the receiver's id, then per receipt its rank, its value and its recorded time."""

_LIVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local died = 0
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES')
for i = 2, #lapsed, 2 do died = math.max(died, tonumber(lapsed[i])) end
local gone = redis.call('ZREVRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #gone == 2 then died = math.max(died, tonumber(gone[2])) end
local reply = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
table.insert(reply, 1, tostring(died))
return reply
"""
"""The newest death, then the replicas whose heartbeat lives now. KEYS: ``sr:{replicas}`` (scores: deadlines in
Redis's ms), ``sr:{replicas}:gone`` (:data:`adapters.redis.lease.GONE_KEPT_MS`); the reply's first item is the
latest deadline a replica missed (ms; "0": none known), the rest the live replicas' ids."""

DEAD_RECEIVER_S = 600.0
"""A receiver (a replica's process) that recorded statuses within this long of the newest one and whose heartbeat
lapsed since makes every silence unproven (:meth:`RedisReceipts.last_heard_s` None: the create is reported
uncertain): the statuses posted to it as it died, or routed to it after (a load balancer passes over a dead replica
only at the next attempt), are retried by Meta later, maybe after the settle window, while the live replicas hear
the others (breaker7, chaos seed 7 on 01c7686: two of three replicas down, a media create's status was not heard in
the 8 s window while replica-3, alive, heard others, and it was sent again: a double the report did not count). The
same span as ``adapters.whatsapp.settle.FLOWING_S``: a receiver silent that long proves nothing either way."""

ANY_RECEIVER = ""
"""The receiver id of a store no replica runs (tools, tests): its :meth:`RedisReceipts.last_heard_s` counts every
receiver, alive or not."""


class RedisReceipts:
    """:class:`core.records.receipts.Receipts` on Redis (module docstring).

    Args:
        client: from :func:`adapters.redis.client.connect` (not closed here).
        keys: the key space.
        retention_s: how long a receipt is kept after its last recording (seconds;
            :data:`core.records.receipts.RECEIPTS_RETENTION_S` by default).
        receiver: this replica's id as its heartbeat names it (:class:`app.replicas.service.ReplicaService`
            ``owner``): the receipts its webhook records are its own, and :meth:`last_heard_s` counts only live
            receivers. :data:`ANY_RECEIVER` (default): no replica runs this store (tools, tests).

    Raises:
        ValueError: ``retention_s`` under one millisecond.
    """

    def __init__(
        self,
        client: Redis,
        keys: KeySpace = KEYS,
        *,
        retention_s: float = RECEIPTS_RETENTION_S,
        receiver: str = ANY_RECEIVER,
    ) -> None:
        if retention_s < 0.001:
            raise ValueError(f"retention_s must be at least 0.001 s (one millisecond), got {retention_s}")
        self._client = client
        self._keys = keys
        self._ttl_ms = int(retention_s * 1000)
        self.receiver = receiver
        self._record = Script(client, _RECORD, "receipts.record", durable=True)
        self._live = Script(client, _LIVE, "receipts.live")

    def __repr__(self) -> str:
        return f"RedisReceipts(prefix={self._keys.prefix!r}, receiver={self.receiver!r})"

    def _key(self, platform: str) -> str:
        return f"{self._keys.prefix}:{{receipts:{platform}}}"

    def _receipt_key(self, platform: str, delivery_id: str) -> str:
        return f"{self._key(platform)}:r:{delivery_id}"

    async def record(self, platform: str, receipts: Sequence[Receipt]) -> None:
        """Keep ``receipts`` in one script (each merged with the one kept for its delivery id).

        Raises:
            redis.exceptions.RedisError | core.errors.StoreUnavailableError: Redis failed (the webhook answers 500).
        """
        if not receipts:
            return
        keys = [self._key(platform) + ":heard", self._key(platform) + ":heard_by"]
        args: list[str | int | float] = [self._ttl_ms, self.receiver]
        for r in receipts:
            value = json.dumps(
                {"status": str(r.status), "message_id": r.message_id, "code": r.error_code, "at": r.recorded_at_s}
            )
            keys.append(self._receipt_key(platform, r.delivery_id))
            args += [STATUS_RANK[r.status], f"{STATUS_RANK[r.status]}|{value}", r.recorded_at_s]
        with unavailable("a receipt write"):
            await self._record(keys, args)

    async def find(self, platform: str, delivery_id: str) -> Receipt | None:
        """The receipt of ``delivery_id``, or None."""
        with unavailable("a receipt read"):
            raw = await self._client.get(self._receipt_key(platform, delivery_id))
        if raw is None:
            return None
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        body = json.loads(text.split("|", 1)[1])
        return Receipt(delivery_id, ReceiptStatus(body["status"]), body["message_id"], body["code"], body["at"])

    async def last_heard_s(self, platform: str) -> float | None:
        """When the newest receipt of ``platform`` was recorded by a replica whose heartbeat lives now (Unix
        seconds), or None when no live replica's webhook recorded one, or when a receiver that recorded one within
        :data:`DEAD_RECEIVER_S` of the newest is dead now, or when any replica's heartbeat lapsed within that span
        before the newest (or after it: a replica killed before its webhook recorded anything may have been the
        receiver of the statuses posted meanwhile), module docstring. Two reads: the live replicas and the newest
        death (``sr:{replicas}``, ``sr:{replicas}:gone``) and the receivers' times (another hash tag: one script
        cannot read both on a Redis Cluster). With :data:`ANY_RECEIVER`: the newest of any receiver."""
        with unavailable("a receipt read"):
            if self.receiver == ANY_RECEIVER:
                raw = await self._client.get(self._key(platform) + ":heard")
                return None if raw is None else float(raw)
            reply = await self._live([self._keys.replicas, self._keys.replicas_gone], [])
            live = {o.decode() if isinstance(o, bytes) else str(o) for o in reply[1:]}
            if not live:
                return None
            kept = await self._client.hgetall(self._key(platform) + ":heard_by")
        times = {(k.decode() if isinstance(k, bytes) else str(k)): float(v) for k, v in kept.items()}
        if not times:
            return None
        newest = max(times.values())
        if any(at >= newest - DEAD_RECEIVER_S for who, at in times.items() if who not in live):
            return None  # a receiver died lately: a status aimed at it is retried later, its silence proves nothing
        if float(reply[0]) / 1000 >= newest - DEAD_RECEIVER_S:
            return None  # a replica died lately, maybe a receiver before it recorded anything: the same
        heard = [at for who, at in times.items() if who in live]
        return max(heard) if heard else None

    async def prune(self, recorded_before_s: float) -> int:
        """Nothing to do: each receipt expires by itself, and a receiver silent for the retention is forgotten by the
        next write (module docstring); 0."""
        return 0
