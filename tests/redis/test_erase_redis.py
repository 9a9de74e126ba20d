"""Erasure on the Redis backend (docs/retention.md): a run's text removed from every key of its partition, found
in no key name or value of the server afterwards (every key read by its type: strings, hashes, lists, sorted sets,
streams); another run's text untouched. The run is written as an owner writes it: its journal lines, a dead letter,
its ledger parts with a pending create, its calls and a desk entry."""

from __future__ import annotations

import asyncio
import json
import time

from pydantic import SecretStr

from streamrelay.adapters.ops import MeteredLedger, ServiceMetrics
from streamrelay.adapters.redis import InputStream, Leases, RedisLedger
from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.journal import RedisJournal
from streamrelay.adapters.redis.keys import KEYS
from streamrelay.app.service import make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.ports import PendingSend, TextFormat
from streamrelay.core.records.desk import DeskEntry, DeskState
from streamrelay.core.records.erase import Erasable
from streamrelay.core.records.journal import JournalEntry
from streamrelay.core.records.ledger import PartRecord, RunRecord
from streamrelay.core.records.report import PartState, SlotRole
from streamrelay.core.run.relay import Relay

PARTITION = 3
MARK_A = "lynx-saffron-4417"
MARK_B = "gannet-teal-9902"


async def _everything(client: Redis) -> str:
    """Every key of the server and its value, as one text."""
    dump: list[str] = []
    async for key in client.scan_iter(count=1000):
        kind = await client.type(key)
        if kind == "none":  # gone between the SCAN and its read (a live replica's rate budget key expired)
            continue
        if kind == "string":
            value: object = await client.get(key)
        elif kind == "hash":
            value = await client.hgetall(key)
        elif kind == "list":
            value = await client.lrange(key, 0, -1)
        elif kind == "zset":
            value = await client.zrange(key, 0, -1, withscores=True)
        elif kind == "set":
            value = sorted(await client.smembers(key))
        elif kind == "stream":
            value = await client.xrange(key)
        else:
            raise AssertionError(f"a key of a type this test does not read: {key!r} ({kind!r})")
        dump.append(f"{key!r} {kind!r} {value!r}")
    return "\n".join(dump)


async def _write_run(ledger: RedisLedger, journal: RedisJournal, client: Redis, run: str, mark: str) -> None:
    text = f"Your parcel {mark} left the depot."
    await ledger.start_run(RunRecord(run=run, channel="telegram", target={"chat_id": 5}, mode="block"))
    start = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 5}}
    await journal.append([JournalEntry(run, json.dumps(start)), JournalEntry(run, json.dumps({"text": text}))])
    await client.xadd(KEYS.dead(PARTITION), {"run": run, "line": json.dumps({"kind": "text", "text": text})})
    pending = PendingSend(f"d-{run}", text, TextFormat.PLAIN)
    call = await ledger.record_intent(run, 0, SlotRole.ANSWER, "send", text, pending)
    await ledger.record_intent(
        run, 1, SlotRole.ANSWER, "send", f"Second {mark}.", PendingSend("x", f"{mark}!", TextFormat.PLAIN)
    )
    part = PartRecord(run=run, slot=0, role=SlotRole.ANSWER, state=PartState.ACKED, message_id="11", shown=text)
    await ledger.record_outcome(call, part, "ack")
    entry = DeskEntry(
        run=run,
        slot=1,
        role=SlotRole.ANSWER,
        state=DeskState.FAILED,
        was=DeskState.FAILED,
        channel="telegram",
        target={"chat_id": 5},
        text=f"Second {mark}.",
        fmt=TextFormat.PLAIN,
        error="403",
        ended_at=100.0,
        updated_at=100.0,
        pending=PendingSend("y", f"Second {mark}.", TextFormat.PLAIN),
    )
    await ledger.record_undelivered([entry])
    await ledger.end_run(run, "ok")


async def test_an_erased_run_is_in_no_redis_key_or_value(client: Redis) -> None:
    token = await Leases(client).acquire(PARTITION, "owner", 10_000)
    assert token is not None
    ledger = RedisLedger(client, PARTITION).fenced(token)
    journal = RedisJournal(client, PARTITION).fenced(token)
    assert isinstance(ledger, Erasable) and isinstance(journal, Erasable)
    await _write_run(ledger, journal, client, "A", MARK_A)
    await _write_run(ledger, journal, client, "B", MARK_B)
    before = await _everything(client)
    assert before.count(MARK_A) >= 5  # journal line, dead letter, part, pending create, desk entry (and its create)

    assert await journal.erase(["A"]) == 2  # one journal element (one append) and one dead letter
    assert await ledger.erase(["A"]) == 3  # slot 0 shown (its outcome cleared its create), slot 1 pending, desk entry
    after = await _everything(client)
    assert MARK_A not in after
    assert after.count(MARK_B) == before.count(MARK_B)  # B untouched

    parts = await ledger.parts("A")
    assert [(p.slot, p.state, p.message_id, p.shown, p.pending) for p in parts] == [
        (0, PartState.ACKED, "11", None, None),
        (1, PartState.PENDING, None, None, None),
    ]
    record = await ledger.get_run("A")
    assert record is not None and record.ended
    desk = [e for e in await ledger.deliveries({DeskState.FAILED}) if e.run == "A"]
    assert [(e.text, e.pending, e.error) for e in desk] == [("", None, "403")]
    assert await journal.erase(["A"]) == 0 and await ledger.erase(["A"]) == 0  # again: nothing more


async def _write_place(ledger: RedisLedger, run: str, mark: str) -> None:
    """A ledger run under another (a fan-out run's later place ``<run>/to:1``, a sub-agent's thread ``<run>/<child>``):
    one delivered part."""
    text = f"Also here: {mark}."
    call = await ledger.record_intent(
        run, 0, SlotRole.ANSWER, "send", text, PendingSend(f"d-{run}", text, TextFormat.PLAIN)
    )
    part = PartRecord(run=run, slot=0, role=SlotRole.ANSWER, state=PartState.ACKED, message_id="21", shown=text)
    await ledger.record_outcome(call, part, "ack")


async def test_an_erased_run_takes_its_places_and_sub_agents_threads_with_it(client: Redis) -> None:
    """A fan-out run's later places and its sub-agents' threads keep their parts under ledger ids of their own
    (``A/to:1``, ``A/child``): erasing ``A`` erases them too (they kept their text before); run ``AB`` and its
    place are another run's, untouched."""
    token = await Leases(client).acquire(PARTITION, "owner", 10_000)
    assert token is not None
    ledger = RedisLedger(client, PARTITION).fenced(token)
    journal = RedisJournal(client, PARTITION).fenced(token)
    await _write_run(ledger, journal, client, "A", MARK_A)
    for under in ("A/to:1", "A/child*[x]"):  # glob characters in a key stay literal in the scan
        await _write_place(ledger, under, MARK_A)
    await _write_run(ledger, journal, client, "AB", MARK_B)
    await _write_place(ledger, "AB/to:1", MARK_B)
    before = await _everything(client)
    await journal.erase(["A"])
    assert await ledger.erase(["A"]) == 5  # A's three, one shown in each place
    after = await _everything(client)
    assert MARK_A not in after and after.count(MARK_B) == before.count(MARK_B)
    assert [(p.message_id, p.shown) for p in await ledger.parts("A/to:1")] == [("21", None)]


async def test_a_conversations_runs_are_listed_from_its_partitions_run_records(client: Redis) -> None:
    """``RedisLedger.runs_in`` (a conversation's erasure on replicas): the partition's runs on that channel to that
    chat (its id compared as text), oldest first; another chat's or another channel's runs left out."""
    token = await Leases(client).acquire(PARTITION, "owner", 10_000)
    assert token is not None
    ledger = RedisLedger(client, PARTITION).fenced(token)
    runs: list[tuple[str, str, int | str]] = [("A", "telegram", 5), ("B", "slack", 5), ("C", "telegram", 6)]
    for run, channel, chat in [*runs, ("D", "telegram", "5")]:
        await ledger.start_run(RunRecord(run=run, channel=channel, target={"chat_id": chat}, mode="block"))
    assert await ledger.runs_in("telegram", "5") == ["A", "D"]
    assert await ledger.runs_in("slack", "5") == ["B"]
    assert await ledger.runs_in("telegram", "7") == []


async def test_text_retention_drops_the_text_of_runs_ended_before_the_window_on_redis(client: Redis) -> None:
    """``text_retention_hours`` on the Redis backend (docs/retention.md): a relay on a partition's fenced ledger (as a
    replica's owner holds it, metered) drops the text of its channel's runs that ended before the window, each once,
    their dead letters too (bad input lines of theirs kept in the partition's dead-letter stream); a run that ended
    later, and a run of a channel without retention, keep theirs; ids, states and hashes stay."""
    token = await Leases(client).acquire(PARTITION, "owner", 10_000)
    assert token is not None
    ledger = RedisLedger(client, PARTITION).fenced(token)
    journal = RedisJournal(client, PARTITION).fenced(token)
    await _write_run(ledger, journal, client, "A", MARK_A)
    await _write_place(ledger, "A/to:1", MARK_A)  # a later place of A: its text goes with A
    await journal.finish("A", None)  # as its owner does at its end: its lines go
    bound = time.time()
    await asyncio.sleep(0.01)
    await _write_run(ledger, journal, client, "B", MARK_B)
    await journal.finish("B", None)
    other = "wren-umber-5120"
    await ledger.start_run(RunRecord(run="C", channel="kept", target={"chat_id": 5}, mode="block"))
    await _write_place(ledger, "C", other)
    await ledger.end_run("C", "ok")

    hours = 24.0
    common = {"api_base": "http://127.0.0.1:9", "delivery": "block"}
    telegram = ChannelSettings.model_validate({"platform": "telegram", **common, "text_retention_hours": hours})
    kept = ChannelSettings.model_validate({"platform": "telegram", **common})
    channels = {
        "telegram": make_runtime("telegram", telegram, SecretStr("123:abc")),
        "kept": make_runtime("kept", kept, SecretStr("123:abc")),
    }
    relay = Relay(channels, MeteredLedger(ledger, ServiceMetrics("t")), MonotonicClock())
    try:
        window_s = hours * 3600
        assert await relay.expire_texts(bound + window_s) == ["A"]  # A ended before the bound, B after it
        everything = await _everything(client)
        assert MARK_A not in everything and MARK_B in everything and other in everything
        assert [letter.run for letter in await InputStream(client).dead(PARTITION)] == ["B"]
        parts = await ledger.parts("A")
        assert (parts[0].slot, parts[0].state, parts[0].message_id, parts[0].shown) == (0, PartState.ACKED, "11", None)
        assert await relay.expire_texts(bound + window_s) == []  # each run once
        assert await relay.expire_texts(time.time() + window_s + 1) == ["B"]
        everything = await _everything(client)
        assert MARK_B not in everything and other in everything  # a channel without retention keeps its text
        assert await InputStream(client).dead(PARTITION) == []
        record = await ledger.get_run("B")
        assert record is not None and record.ended and record.channel == "telegram"
    finally:
        await relay.close()
