"""Input streams on a real redis-server: read by the owner's group, acknowledged when done, a dead owner's
pending entries claimed by the next, and entries that keep failing moved to the dead letters."""

from __future__ import annotations

import json

from streamrelay.adapters.redis import InputStream
from streamrelay.adapters.redis.client import Redis
from streamrelay.app.replicas.owner import PartitionOwner
from streamrelay.core.events import TextEvent
from streamrelay.core.records.journal import JournalEntry


def lines(*texts: str, run: str = "r") -> list[JournalEntry]:
    return [JournalEntry(run, text) for text in texts]


async def test_the_owner_reads_new_entries_in_order_once(client: Redis) -> None:
    stream = InputStream(client)
    assert await stream.read(1, "a") == []  # no stream yet: the group is made, nothing to read
    ids = await stream.append(1, lines("1", "2", "3"))
    assert len(ids) == 3 and await stream.append(1, []) == []
    read = await stream.read(1, "a", count=2)
    assert [(e.id, e.run, e.line) for e in read] == [(ids[0], "r", "1"), (ids[1], "r", "2")]
    assert [e.line for e in await stream.read(1, "a")] == ["3"]
    assert await stream.read(1, "a", block_ms=50) == []  # nothing new: waits 50 ms, then nothing
    assert [(i, c, n) for i, c, n in await stream.pending(1)] == [(i, "a", 1) for i in ids]
    assert await stream.ack(1, ids[:2]) == 2
    assert await stream.ack(1, ids[:2]) == 0  # twice is harmless
    assert [i for i, _, _ in await stream.pending(1)] == [ids[2]]
    assert await stream.length(1) == 1  # acknowledged entries are deleted


async def test_a_new_owner_claims_a_dead_owners_pending_entries(clients: list[Redis]) -> None:
    dead, heir = InputStream(clients[0]), InputStream(clients[1])
    ids = await dead.append(2, lines("1", "2", "3"))
    assert len(await dead.read(2, "dead-owner")) == 3  # read, never acknowledged: the owner was killed
    assert await heir.claim(2, "heir", min_idle_ms=60_000) == []  # not idle that long yet
    claimed = await heir.claim(2, "heir")
    assert [e.id for e in claimed] == ids
    assert await heir.pending(2) == [(i, "heir", 2) for i in ids]  # claimed: a second delivery
    await heir.ack(2, ids)
    assert await heir.pending(2) == []


async def test_claim_takes_everything_in_pages(client: Redis) -> None:
    stream = InputStream(client)
    ids = await stream.append(0, lines(*(str(i) for i in range(25))))
    await stream.read(0, "a", count=100)
    claimed = await stream.claim(0, "b", count=10)
    assert [e.id for e in claimed] == ids[:10]
    assert [e.id for e in await stream.claim(0, "b")] == ids  # the rest, and b's own again


async def test_an_entry_delivered_too_often_goes_to_the_dead_letters_and_back(client: Redis) -> None:
    stream = InputStream(client)
    bad, good = await stream.append(4, [JournalEntry("r1", '{"bad":true}'), JournalEntry("r2", "ok")])
    await stream.read(4, "a")
    await stream.ack(4, [good])
    for owner in ("b", "c"):  # two more owners take it and die on it
        assert [e.id for e in await stream.claim(4, owner)] == [bad]
    assert await stream.bury(4, max_deliveries=3) == []  # 3 deliveries: not more than 3
    assert await stream.bury(4, max_deliveries=2) == [bad]
    assert await stream.pending(4) == [] and await stream.length(4) == 0
    [letter] = await stream.dead(4)
    assert (letter.run, letter.line, letter.source, letter.deliveries, letter.consumer) == (
        "r1",
        '{"bad":true}',
        bad,
        3,
        "c",
    )

    again = await stream.retry(4, letter.id)  # an operator fixed the cause
    assert again is not None and await stream.dead(4) == []
    assert [(e.id, e.run, e.line) for e in await stream.read(4, "c")] == [(again, "r1", '{"bad":true}')]
    assert await stream.retry(4, letter.id) is None

    await stream.claim(4, "d")
    assert await stream.bury(4, max_deliveries=1) == [again]
    [letter] = await stream.dead(4)
    assert await stream.drop(4, letter.id) is True
    assert await stream.drop(4, letter.id) is False
    assert await stream.dead(4) == []


async def test_a_deleted_stream_gets_its_group_back(client: Redis) -> None:
    stream = InputStream(client)
    await stream.read(5, "a")
    await client.flushdb()  # e.g. Redis lost its data: the group is made again on the next read
    await stream.append(5, lines("1"))
    assert [e.line for e in await stream.read(5, "a")] == ["1"]


async def test_an_entry_of_text_events_the_front_validated_decodes_as_each_line_would(client: Redis) -> None:
    """An entry the front marks as validated ``text`` events (``text``) is validated by its owner in one call: the
    same events, with the same fields set, as each line decoded alone (the path of an unmarked entry)."""
    texts = [
        json.dumps({"kind": "text", "mode": "delta", "text": "Hello, wörld: ✓ ", "seq": 1}),
        json.dumps({"kind": "text", "mode": "snapshot", "text": 'a "quoted"\nline', "seq": 2, "message": 1}),
        json.dumps({"kind": "text", "mode": "delta", "text": "x", "visibility": "reasoning", "seq": 3}),
        json.dumps(
            {
                "kind": "text",
                "mode": "delta",
                "text": "sub: agent",
                "seq": 4,
                "source": {"agent_id": "a:1", "session_id": "s1", "depth": 1, "path": "s0/a"},
            }
        ),
    ]
    stream = InputStream(client)
    entries = [JournalEntry("default/r1", "\n".join(texts))] * 2
    await stream.append_open(6, entries, text=[True, False])
    marked, plain = await stream.read(6, "owner")
    assert marked.text and not plain.text
    owner = PartitionOwner.__new__(PartitionOwner)
    owner.partition = 6
    (fast, raw_fast), (slow, raw_slow) = owner._decode(marked), owner._decode(plain)
    assert not raw_fast and not raw_slow
    assert [(e.model_dump(), e.model_fields_set, text) for e, text in fast] == [
        (e.model_dump(), e.model_fields_set, text) for e, text in slow
    ]
    assert [type(e) for e, _ in fast] == [TextEvent] * 4 and [text for _, text in fast] == texts
