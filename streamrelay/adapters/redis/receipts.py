"""RedisReceipts: status receipts (:mod:`core.records.receipts`) on the replicas' Redis, shared by every replica: the
one that takes a platform's status webhook records it, the one settling the create reads it.

Keys (hash tag per platform, so the script stays in one slot)::

    sr:{receipts:whatsapp}:r:<delivery id>  "<rank>|<JSON of the receipt>", PX the retention
    sr:{receipts:whatsapp}:heard            when the newest receipt was recorded (Unix seconds)

A write is one Lua script (:data:`_RECORD`): each receipt replaces the kept one only when its status ranks higher
(:data:`core.records.receipts.STATUS_RANK`); durable like the ledger's writes (``WAIT`` where the client wants it).
Each write sets the receipt's expiry to the retention again (``[service] receipts_retention_hours``, counted from
its last recording like SQLite's ``recorded_at``), so Redis drops it by itself: one key per receipt, because a hash
field cannot expire before Redis 7.4 (``HEXPIRE``, https://redis.io/docs/latest/commands/hexpire/) and the servers
this runs on may be older (Debian's 7.0). :meth:`RedisReceipts.prune` has nothing left to do.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from streamrelay.adapters.redis.client import Redis, Script, unavailable
from streamrelay.adapters.redis.keys import KEYS, KeySpace
from streamrelay.core.records.receipts import RECEIPTS_RETENTION_S, STATUS_RANK, Receipt, ReceiptStatus

_RECORD = """
local heard = tonumber(redis.call('GET', KEYS[1]) or '0')
local ttl = ARGV[1]
for i = 0, #KEYS - 2 do
  local key, rank, value, at = KEYS[2 + i], tonumber(ARGV[2 + i * 3]), ARGV[3 + i * 3], tonumber(ARGV[4 + i * 3])
  local old = redis.call('GET', key)
  if (not old) or tonumber(string.match(old, '^(%d+)|')) < rank then
    redis.call('SET', key, value, 'PX', ttl)
  else
    redis.call('PEXPIRE', key, ttl)
  end
  if at > heard then heard = at end
end
redis.call('SET', KEYS[1], string.format('%.6f', heard))
return 1
"""
"""``receipts.record`` (durable). KEYS: the platform's ``:heard``, then one key per receipt; ARGV: the retention
(ms), then per receipt its rank, its value and its recorded time."""


class RedisReceipts:
    """:class:`core.records.receipts.Receipts` on Redis (module docstring).

    Args:
        client: from :func:`adapters.redis.client.connect` (not closed here).
        keys: the key space.
        retention_s: how long a receipt is kept after its last recording (seconds;
            :data:`core.records.receipts.RECEIPTS_RETENTION_S` by default).

    Raises:
        ValueError: ``retention_s`` under one millisecond.
    """

    def __init__(self, client: Redis, keys: KeySpace = KEYS, *, retention_s: float = RECEIPTS_RETENTION_S) -> None:
        if retention_s < 0.001:
            raise ValueError(f"retention_s must be at least 0.001 s (one millisecond), got {retention_s}")
        self._client = client
        self._keys = keys
        self._ttl_ms = int(retention_s * 1000)
        self._record = Script(client, _RECORD, "receipts.record", durable=True)

    def __repr__(self) -> str:
        return f"RedisReceipts(prefix={self._keys.prefix!r})"

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
        keys = [self._key(platform) + ":heard"]
        args: list[str | int | float] = [self._ttl_ms]
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
        """When the newest receipt of ``platform`` was recorded (Unix seconds), or None."""
        with unavailable("a receipt read"):
            raw = await self._client.get(self._key(platform) + ":heard")
        return None if raw is None else float(raw)

    async def prune(self, recorded_before_s: float) -> int:
        """Nothing to do: each receipt expires by itself (module docstring); 0."""
        return 0
