"""The desk: its records in every ledger (in memory, SQLite), and a resend's path through the executor against a fake
platform: an uncertain create is settled first (found: nothing sent; not sent: sent under the same delivery id;
cannot tell: nothing sent; needs a bound: sent, settled below it, the new copy deleted when the first is found), a
failed one is sent under the entry's own delivery id (an unknown outcome is settled by the next resend), an entry
closed is never resent."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator

import pytest

from streamrelay.adapters.ops import ServiceMetrics
from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.app.serving import keep_desk
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.errors import ForbiddenError, UncertainDeliveryError
from streamrelay.core.events import Target
from streamrelay.core.ingest.clients import run_key
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.ports import PendingSend, Settlement, SettleOutcome, TextFormat
from streamrelay.core.records.desk import OPEN_STATES, DeliveryDesk, DeskEntry, DeskState, entry_id
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import SlotRole
from streamrelay.core.run.desk import Desk, DeskError, desk_delivery_id
from tests.unit.fakes import FakeAdapter, ManualClock, drive, settle

pytestmark = pytest.mark.timeout(30)

TEXT = "The answer, shown once."


def _entry(
    run: str = "r1", slot: int = 0, state: DeskState = DeskState.FAILED, *, ended_at: float = 100.0, **changes: object
) -> DeskEntry:
    entry = DeskEntry(
        run=run,
        slot=slot,
        role=SlotRole.ANSWER,
        state=state,
        was=state,
        channel="c",
        target={"chat_id": 7, "thread_id": None, "reply_to": None},
        text=TEXT,
        fmt=TextFormat.PLAIN,
        error="why",
        ended_at=ended_at,
        updated_at=ended_at,
    )
    return dataclasses.replace(entry, **changes)  # type: ignore[arg-type]


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[MemoryLedger | SqliteLedger]:
    if request.param == "memory":
        yield MemoryLedger()
        return
    ledger = await SqliteLedger.open(":memory:")
    yield ledger
    await ledger.close()


async def test_a_kept_entry_is_never_reopened_by_a_second_end(store: DeliveryDesk) -> None:
    await store.record_undelivered([_entry()])
    first = await store.delivery(entry_id("r1", 0))
    assert first is not None
    first.state, first.note = DeskState.RESOLVED, "by hand"
    await store.save_delivery(first)
    await store.record_undelivered([_entry()])  # the run finalized again after a restart
    again = await store.delivery(entry_id("r1", 0))
    assert again is not None and (again.state, again.note) == (DeskState.RESOLVED, "by hand")


async def test_entries_are_listed_by_state_and_client_oldest_end_first(store: DeliveryDesk) -> None:
    pending = PendingSend("sr-abc", TEXT, TextFormat.MARKDOWN, after_id="41")
    await store.record_undelivered(
        [
            _entry("r2", 0, DeskState.UNCERTAIN, ended_at=200.0, pending=pending),
            _entry("r1", 1, DeskState.FAILED, ended_at=100.0),
            _entry(run_key("acme", "r3"), 0, DeskState.UNSENT, ended_at=150.0),
        ]
    )
    every = await store.deliveries()
    assert [(e.run, e.slot) for e in every] == [("r1", 1), ("acme/r3", 0), ("r2", 0)]
    assert every[2].pending == pending and every[2].target == {"chat_id": 7, "thread_id": None, "reply_to": None}
    assert [e.run for e in await store.deliveries({DeskState.UNCERTAIN})] == ["r2"]
    assert [e.run for e in await store.deliveries(client="acme")] == ["acme/r3"]
    assert [e.run for e in await store.deliveries(client="default")] == ["r1", "r2"]
    assert len(await store.deliveries(limit=1)) == 1
    counts = await store.delivery_counts()
    assert (counts[DeskState.UNCERTAIN], counts[DeskState.FAILED], counts[DeskState.UNSENT]) == (1, 1, 1)
    assert counts[DeskState.DELIVERED] == 0
    assert (await store.delivery_counts(client="acme"))[DeskState.UNSENT] == 1
    assert await store.delivery("dlv-000000000000") is None


async def test_prune_deletes_by_the_run_end_open_or_not_and_by_client(store: DeliveryDesk) -> None:
    await store.record_undelivered(
        [_entry("old", ended_at=10.0), _entry(run_key("acme", "old"), ended_at=10.0), _entry("new", ended_at=500.0)]
    )
    assert await store.prune_deliveries(100.0, client="acme") == 1
    assert await store.prune_deliveries(100.0) == 1
    assert [e.run for e in await store.deliveries(set(DeskState))] == ["new"]


# --- resends ----------------------------------------------------------------------------------------------------


class _Desk:
    def __init__(self, adapter: type[FakeAdapter] = FakeAdapter) -> None:
        self.clock = ManualClock()
        self.adapter = adapter(self.clock)
        self.ledger = MemoryLedger()
        runtime = ChannelRuntime(ChannelPolicy(name="c", throttle_s=0, exclusive_bot=True), self.adapter)
        self.desk = Desk(self.ledger, self.ledger, {"c": runtime}, self.clock, wall=lambda: 1000.0)

    async def put(self, entry: DeskEntry) -> str:
        await self.ledger.record_undelivered([entry])
        return entry.id

    async def resend(self, entry_id: str) -> DeskEntry:
        return await drive(self.clock, self.desk.resend(entry_id))

    def sends(self) -> int:
        return len(self.adapter.calls_of("send_text"))


async def _landed(d: _Desk, delivery_id: str) -> PendingSend:
    """A create that landed (message 1) though its answer was lost."""
    d.adapter.fail("send_text", 1, UncertainDeliveryError("timed out"), landed=True)
    with pytest.raises(UncertainDeliveryError):
        await d.adapter.send_text(Target(chat_id=7), TEXT, TextFormat.PLAIN, delivery_id=delivery_id)
    assert d.adapter.chat() == [TEXT]
    d.adapter.calls.clear()  # what the desk does is counted from here
    return PendingSend(delivery_id, TEXT, TextFormat.PLAIN)


class _ProbingAdapter(FakeAdapter):
    """Settles like Telegram in a private chat with an exclusive bot: unbounded, it needs a later message; bounded,
    it looks for the text among the messages older than ``before_id`` (no delivery id is carried)."""

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        if pending.before_id is None:
            return Settlement(SettleOutcome.NEEDS_BOUND)
        for message_id, text in self.messages.items():
            if int(message_id) < int(pending.before_id) and text == pending.text.strip():
                return Settlement(SettleOutcome.FOUND, message_id)
        return Settlement(SettleOutcome.NOT_SENT)


async def test_an_uncertain_create_that_landed_is_settled_and_nothing_is_sent() -> None:
    d = _Desk()
    pending = await _landed(d, "sr-first")
    key = await d.put(_entry(state=DeskState.UNCERTAIN, pending=pending))
    done = await d.resend(key)
    assert (done.state, done.message_id, done.resends) == (DeskState.DELIVERED, "1", 1)
    assert d.sends() == 0 and d.adapter.chat() == [TEXT]
    with pytest.raises(DeskError) as closed:
        await d.resend(key)
    assert closed.value.status == 409 and d.adapter.chat() == [TEXT]


async def test_an_uncertain_create_that_did_not_land_is_sent_under_the_same_delivery_id() -> None:
    d = _Desk()
    key = await d.put(_entry(state=DeskState.UNCERTAIN, pending=PendingSend("sr-first", TEXT, TextFormat.PLAIN)))
    done = await d.resend(key)
    assert done.state is DeskState.DELIVERED and d.adapter.chat() == [TEXT]
    assert d.adapter.delivered == {"sr-first": done.message_id}


async def test_a_platform_that_cannot_tell_gets_nothing_sent() -> None:
    d = _Desk()
    d.adapter.settles = "unknown"
    key = await d.put(_entry(state=DeskState.UNCERTAIN, pending=PendingSend("sr-first", TEXT, TextFormat.PLAIN)))
    with pytest.raises(DeskError) as refused:
        await d.resend(key)
    assert refused.value.status == 409 and "cannot tell" in str(refused.value)
    assert d.sends() == 0
    kept = await d.ledger.delivery(key)
    assert kept is not None and kept.state is DeskState.UNCERTAIN and "nothing sent" in (kept.outcome or "")


async def test_an_uncertain_create_without_its_bounds_is_not_guessed() -> None:
    d = _Desk()
    key = await d.put(_entry(state=DeskState.UNCERTAIN))
    with pytest.raises(DeskError) as refused:
        await d.resend(key)
    assert refused.value.status == 409 and d.sends() == 0


async def test_a_bounded_settle_finds_the_first_copy_and_deletes_the_new_one() -> None:
    d = _Desk(_ProbingAdapter)
    pending = await _landed(d, "sr-first")
    key = await d.put(_entry(state=DeskState.UNCERTAIN, pending=pending))
    done = await d.resend(key)
    assert (done.state, done.message_id) == (DeskState.DELIVERED, "1")
    assert "deleted" in (done.outcome or "") and d.adapter.chat() == [TEXT]


async def test_a_bounded_settle_that_finds_nothing_keeps_the_new_message() -> None:
    d = _Desk(_ProbingAdapter)
    key = await d.put(_entry(state=DeskState.UNCERTAIN, pending=PendingSend("sr-first", TEXT, TextFormat.PLAIN)))
    done = await d.resend(key)
    assert (done.state, done.message_id) == (DeskState.DELIVERED, "1") and d.adapter.chat() == [TEXT]
    assert done.outcome == "sent as message 1"


async def test_a_failed_create_is_sent_and_an_unknown_outcome_is_settled_by_the_next_resend() -> None:
    d = _Desk()
    key = await d.put(_entry())
    d.adapter.fail("send_text", 1, UncertainDeliveryError("timed out"), landed=True)
    with pytest.raises(DeskError) as unknown:
        await d.resend(key)
    assert unknown.value.status == 503
    kept = await d.ledger.delivery(key)
    assert kept is not None and kept.state is DeskState.UNCERTAIN and kept.pending is not None
    assert kept.pending.delivery_id == desk_delivery_id("r1", 0)
    done = await d.resend(key)
    assert done.state is DeskState.DELIVERED and d.sends() == 1 and d.adapter.chat() == [TEXT]


async def test_a_refused_send_leaves_the_entry_open_with_why() -> None:
    d = _Desk()
    key = await d.put(_entry())
    d.adapter.fail("send_text", 1, ForbiddenError("bot was blocked"))
    with pytest.raises(DeskError) as refused:
        await d.resend(key)
    assert refused.value.status == 503
    kept = await d.ledger.delivery(key)
    assert kept is not None and kept.state in OPEN_STATES and "ForbiddenError" in (kept.outcome or "")
    assert d.adapter.chat() == []


async def test_a_part_whose_message_exists_is_edited_not_sent_again() -> None:
    d = _Desk()
    d.adapter.messages["5"] = "The ans"
    key = await d.put(_entry(state=DeskState.UNSENT, message_id="5"))
    done = await d.resend(key)
    assert done.state is DeskState.DELIVERED and d.sends() == 0 and d.adapter.chat() == [TEXT]


async def test_a_possible_second_copy_and_a_closed_entry_are_never_resent() -> None:
    d = _Desk()
    orphan = await d.put(_entry(slot=-1, state=DeskState.UNCERTAIN, text=""))
    with pytest.raises(DeskError) as nothing:
        await d.resend(orphan)
    assert nothing.value.status == 409
    key = await d.put(_entry(slot=2))
    resolved = await d.desk.resolve(key, "sent by hand")
    assert (resolved.state, resolved.note) == (DeskState.RESOLVED, "sent by hand")
    for attempt in (d.desk.resolve(key, "again"), d.desk.resend(key)):
        with pytest.raises(DeskError) as closed:
            await attempt
        assert closed.value.status == 409
    with pytest.raises(DeskError) as unknown:
        await d.desk.get(key, client="acme")  # another client's
    assert unknown.value.status == 404
    assert d.sends() == 0


async def test_a_failed_part_whose_earlier_create_landed_is_not_sent_again() -> None:
    d = _Desk()
    pending = await _landed(d, "sr-first")  # the run's create that could not be settled; the part's resend refused
    key = await d.put(_entry(state=DeskState.FAILED, pending=pending))
    done = await d.resend(key)
    assert (done.state, done.was, done.message_id) == (DeskState.DELIVERED, DeskState.FAILED, "1")
    assert d.sends() == 0 and d.adapter.chat() == [TEXT]


async def test_the_keeper_prunes_past_the_retention_and_sets_the_gauges() -> None:
    d = _Desk()
    day_s = 86_400.0
    await d.put(_entry("old", ended_at=1000.0 - 3 * day_s))  # the desk's wall clock reads 1000
    await d.put(_entry("new", ended_at=1000.0 - 1 * day_s))
    await d.put(_entry("kept", state=DeskState.UNCERTAIN, ended_at=1000.0 - 60))
    metrics = ServiceMetrics()
    keeper = asyncio.create_task(keep_desk(d.desk, metrics, retention_days=2, poll_s=0.01))
    try:
        async with asyncio.timeout(10):
            while metrics.registry.get_sample_value("streamrelay_deliveries", {"state": "failed"}) != 1:
                await asyncio.sleep(0.01)
    finally:
        keeper.cancel()
    assert [e.run for e in await d.ledger.deliveries()] == ["new", "kept"]
    assert metrics.registry.get_sample_value("streamrelay_deliveries", {"state": "uncertain"}) == 1
    assert metrics.registry.get_sample_value("streamrelay_deliveries", {"state": "resolved"}) == 0


async def test_two_resends_at_once_send_one_copy() -> None:
    d = _Desk()
    d.adapter.latency_s = 1.0  # the first send is in flight when the second resend comes
    key = await d.put(_entry())
    first = asyncio.ensure_future(d.desk.resend(key))
    await settle()  # the first resend waits on its send
    with pytest.raises(DeskError) as busy:
        await d.desk.resend(key)
    assert busy.value.status == 409 and "under way" in str(busy.value)
    assert (await drive(d.clock, first)).state is DeskState.DELIVERED
    assert d.sends() == 1 and d.adapter.chat() == [TEXT]
