"""RedisReceipts: status receipts (:mod:`core.records.receipts`) on the replicas' Redis, shared by every replica: the
one that takes a platform's status webhook records it, the one settling the create reads it.

Keys (hash tag per platform, so the script stays in one slot)::

    sr:{receipts:whatsapp}          a hash: delivery id -> "<rank>|<JSON of the receipt>"
    sr:{receipts:whatsapp}:heard    when the newest receipt was recorded (Unix seconds)

A write is one Lua script (:data:`_RECORD`): each receipt replaces the kept one only when its status ranks higher
(:data:`core.records.receipts.STATUS_RANK`); durable like the ledger's writes (``WAIT`` where the client wants it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from streamrelay.adapters.redis.client import Redis, Script, unavailable
from streamrelay.adapters.redis.keys import KEYS, KeySpace
from streamrelay.core.records.receipts import STATUS_RANK, Receipt, ReceiptStatus

_RECORD = """
local heard = tonumber(redis.call('GET', KEYS[2]) or '0')
for i = 0, tonumber(ARGV[1]) - 1 do
  local id, rank, value, at = ARGV[2 + i * 4], tonumber(ARGV[3 + i * 4]), ARGV[4 + i * 4], tonumber(ARGV[5 + i * 4])
  local old = redis.call('HGET', KEYS[1], id)
  if (not old) or tonumber(string.match(old, '^(%d+)|')) < rank then
    redis.call('HSET', KEYS[1], id, value)
  end
  if at > heard then heard = at end
end
redis.call('SET', KEYS[2], string.format('%.6f', heard))
return 1
"""


class RedisReceipts:
    """:class:`core.records.receipts.Receipts` on Redis (module docstring).

    Args:
        client: from :func:`adapters.redis.client.connect` (not closed here).
        keys: the key space.
    """

    def __init__(self, client: Redis, keys: KeySpace = KEYS) -> None:
        self._client = client
        self._keys = keys
        self._record = Script(client, _RECORD, "receipts.record", durable=True)

    def __repr__(self) -> str:
        return f"RedisReceipts(prefix={self._keys.prefix!r})"

    def _key(self, platform: str) -> str:
        return f"{self._keys.prefix}:{{receipts:{platform}}}"

    async def record(self, platform: str, receipts: Sequence[Receipt]) -> None:
        """Keep ``receipts`` in one script (each merged with the one kept for its delivery id).

        Raises:
            redis.exceptions.RedisError | core.errors.StoreUnavailableError: Redis failed (the webhook answers 500).
        """
        if not receipts:
            return
        args: list[str | int | float] = [len(receipts)]
        for r in receipts:
            value = json.dumps(
                {"status": str(r.status), "message_id": r.message_id, "code": r.error_code, "at": r.recorded_at_s}
            )
            args += [r.delivery_id, STATUS_RANK[r.status], f"{STATUS_RANK[r.status]}|{value}", r.recorded_at_s]
        key = self._key(platform)
        with unavailable("a receipt write"):
            await self._record([key, key + ":heard"], args)

    async def find(self, platform: str, delivery_id: str) -> Receipt | None:
        """The receipt of ``delivery_id``, or None."""
        with unavailable("a receipt read"):
            raw = await self._client.hget(self._key(platform), delivery_id)
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
