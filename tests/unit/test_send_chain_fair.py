"""SendChain on a fair budget: who asks decides the place; a turn taken ahead is kept for the next call; the chat's
budget and 429 pauses still apply; a channel serves its bot's budgets fairly (or first come, when told)."""

from __future__ import annotations

import asyncio

import pytest

from streamrelay.core.budgets.fair import FairQueue, Requester
from streamrelay.core.budgets.rate import Budget, BudgetScope, PauseBoard, TokenBucket
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import FakeClock
from streamrelay.core.delivery.reconciler import Reconciler
from streamrelay.core.delivery.send_chain import HOLD_S, Grant, SendChain, Wait
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.errors import RateLimitedError, RateScope
from streamrelay.core.events import Target
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.ports import CallKind
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import SlotRole
from tests.unit.fakes import FakeAdapter, ManualClock, MemoryChat, settle

pytestmark = pytest.mark.timeout(30)

NOISY = [Requester("noisy", f"r{i}") for i in range(20)]
VICTIM = Requester("victim", "v1")


def bot_queue(clock: FakeClock | ManualClock, rate_per_s: float = 10.0) -> FairQueue:
    queue = FairQueue(TokenBucket(rate_per_s=rate_per_s, burst=1), clock)
    queue.bucket.take(clock.now())  # spent: every call below waits its turn
    return queue


def calling(chain: SendChain, log: list[str], name: str, requester: Requester, *, final: bool) -> asyncio.Task[str]:
    async def fn() -> str:
        log.append(name)
        return name

    return asyncio.ensure_future(chain.call(fn, CallKind.EDIT, final=final, requester=requester))


async def test_a_victims_final_goes_ahead_of_a_noisy_clients_queue_across_chains() -> None:
    clock = FakeClock()
    queue = bot_queue(clock)
    chains = [SendChain(clock, fair=[queue]) for _ in range(len(NOISY) + 1)]
    log: list[str] = []
    tasks = [
        calling(chain, log, f"noisy {i}", who, final=True)
        for i, (chain, who) in enumerate(zip(chains, NOISY, strict=False))
    ]
    await settle(1)
    tasks.append(calling(chains[-1], log, "victim", VICTIM, final=True))
    await asyncio.gather(*tasks)
    assert log.index("victim") <= 1  # not the 21st: the noisy client's share is half
    assert len(log) == 21


async def test_ready_in_is_the_callers_place_in_the_fair_order() -> None:
    clock = ManualClock()
    queue = bot_queue(clock)
    chain = SendChain(clock, fair=[queue])
    log: list[str] = []
    tasks = [calling(SendChain(clock, fair=[queue]), log, f"n{i}", who, final=False) for i, who in enumerate(NOISY)]
    await settle()
    assert chain.ready_in(CallKind.EDIT, requester=VICTIM) == pytest.approx(0.2)  # one noisy grant, then its own
    assert chain.ready_in(CallKind.EDIT, requester=Requester("noisy", "new")) == pytest.approx(2.1)
    assert chain.ready_in(CallKind.EDIT, final=True, requester=VICTIM) == pytest.approx(0.1)  # finals first
    assert chain.ready_in(CallKind.TYPING, requester=VICTIM) == 0.0  # not a kind the bot's budget counts
    assert chain.turn_decides(CallKind.EDIT, 0.2, requester=VICTIM)
    assert not chain.turn_decides(CallKind.EDIT, 0.5, requester=VICTIM)  # something else holds it back longer
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_turn_taken_ahead_is_kept_for_the_next_call() -> None:
    clock = ManualClock()
    queue = bot_queue(clock)
    chain = SendChain(clock, fair=[queue])
    log: list[str] = []
    others = [calling(SendChain(clock, fair=[queue]), log, f"n{i}", who, final=False) for i, who in enumerate(NOISY)]
    turn = asyncio.ensure_future(chain.take_turn(CallKind.EDIT, requester=VICTIM))
    await settle()
    while not turn.done():
        clock.advance(0.1)
        await settle()
    assert queue.granted == 2 and log == ["n0"]  # one noisy grant, then the victim's turn
    assert chain.ready_in(CallKind.EDIT, requester=VICTIM) == 0.0  # its turn is held for it
    assert chain.ready_in(CallKind.EDIT, requester=NOISY[0]) > 0
    await calling(chain, log, "victim", VICTIM, final=False)
    assert log == ["n0", "victim"] and queue.granted == 2  # the call spent the held token, no other
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


async def victims_turn(chain: SendChain, clock: ManualClock) -> None:
    """The victim takes its turn on the bot's queue ahead of its call (the queue's token comes 0.1 s later)."""
    turn = asyncio.ensure_future(chain.take_turn(CallKind.EDIT, requester=VICTIM))
    await settle()
    clock.advance(0.1)
    await settle()
    assert turn.done()


async def test_a_turn_not_used_in_time_goes_to_the_next_waiter() -> None:
    clock = ManualClock()
    queue = bot_queue(clock)
    chain = SendChain(clock, fair=[queue])
    await victims_turn(chain, clock)
    log: list[str] = []
    waiting = calling(SendChain(clock, fair=[queue]), log, "noisy", NOISY[0], final=False)
    await settle()
    clock.advance(HOLD_S + 0.01)  # the victim never called; the queue's next token is due meanwhile too
    await settle()
    assert log == ["noisy"]
    assert chain.ready_in(CallKind.EDIT, requester=VICTIM) == 0.0  # expired: handed back, and a token is there
    assert queue.bucket.delay(clock.now()) == 0.0
    await waiting


async def test_a_turn_waited_for_is_kept_through_a_429_pause_longer_than_the_hold() -> None:
    # Before: a turn taken on the bot's budget was let go when a 429 pause (or the chat's bucket) outlasted HOLD_S,
    # so the run queued again at the back, and again at the next pause (found reading chaos seed 72's Slack stalls;
    # it raised chat.update's throughput under 429 storms, but those stalls have another cause still open).
    clock = ManualClock()
    queue = bot_queue(clock)
    pauses = PauseBoard()
    chain = SendChain(clock, fair=[queue], pauses=pauses)
    await victims_turn(chain, clock)
    log: list[str] = []
    others = [
        calling(SendChain(clock, fair=[queue], pauses=pauses), log, f"n{i}", who, final=False)
        for i, who in enumerate(NOISY[:3])
    ]
    await settle()
    pauses.pause_bot(clock.now() + 3 * HOLD_S)  # a 429 on the bot's scope: every chain waits
    wait = chain.grant(CallKind.EDIT, requester=VICTIM)
    assert isinstance(wait, Wait) and not wait.turn  # the pause holds it back, not its turn
    clock.advance(3 * HOLD_S + 0.01)
    assert isinstance(chain.grant(CallKind.EDIT, requester=VICTIM), Grant)  # its turn was kept through the pause
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


async def test_a_promoted_run_waits_no_longer_as_a_preview() -> None:
    clock = FakeClock()
    queue = bot_queue(clock)
    chains = [SendChain(clock, fair=[queue]) for _ in range(4)]
    log: list[str] = []
    tasks = [calling(chains[i], log, f"final {i}", NOISY[i], final=True) for i in range(3)]
    tasks.append(calling(chains[3], log, "victim", VICTIM, final=False))
    await settle(1)
    chains[3].promote(VICTIM)
    await asyncio.gather(*tasks)
    assert log.index("victim") <= 1


async def test_the_chats_budget_and_a_429_pause_still_apply() -> None:
    clock = FakeClock()
    queue = FairQueue(TokenBucket(rate_per_s=100.0, burst=100), clock)
    chain = SendChain(clock, [TokenBucket(rate_per_s=1.0, burst=1)], fair=[queue])
    times: list[float] = []

    async def fn() -> None:
        times.append(clock.now())

    await chain.call(fn, requester=VICTIM)
    await chain.call(fn, requester=VICTIM)

    async def limited() -> None:
        raise RateLimitedError("429", retry_after_s=3.0)

    with pytest.raises(RateLimitedError):
        await chain.call(limited, requester=VICTIM)
    await chain.call(fn, requester=VICTIM)
    assert times == pytest.approx([0.0, 1.0, 5.0])  # the chat's 1/s, then the 429's 3 s from t=2


async def test_a_channel_serves_its_bots_budget_fairly_unless_told_first_come() -> None:
    clock = FakeClock()
    budgets = (Budget("per_chat", BudgetScope.CHAT, 1.0, 1), Budget("per_bot", BudgetScope.BOT, 30.0, 30))
    fair = ChannelRuntime(ChannelPolicy(name="c"), MemoryChat(), budgets)
    one, two = fair.chain_for(Target(chat_id=1), clock), fair.chain_for(Target(chat_id=2), clock)
    assert one._fair and one._fair == two._fair and len(one._buckets) == 1
    first_come = ChannelRuntime(ChannelPolicy(name="c"), MemoryChat(), budgets, fair=False)
    chain = first_come.chain_for(Target(chat_id=1), clock)
    assert not chain._fair and len(chain._buckets) == 2


def most_in_a_window(times: list[float], window_s: float) -> int:
    """The most calls that started within any ``window_s`` seconds (``[t, t + window_s)`` from each call)."""
    return max((sum(t <= u < t + window_s for u in times) for t in times), default=0)


async def test_previews_queued_on_the_bots_budget_through_a_method_429_go_at_its_rate_after_it() -> None:
    # Chaos seed 72 (1,000 runs, kill -9 every 10): Slack's chat.update reached the mock in bursts of 3 to 5 at a gap
    # of 0 s right after 429 storms' pauses. The bot's fair queue went on granting turns at the budget's rate through
    # a 429 pause of the method, each conversation kept its turn for the pause's end, and all called at that moment:
    # on top of a minute's pace, so the mock's 50 per 60 s window (Slack's Tier 3) filled and refused 1 to 2 edits a
    # campaign. (Those campaigns' unfinished previews have another cause: the chat.update budget the kills leave.)
    clock = ManualClock()
    adapter = FakeAdapter(clock)
    budget = Budget("update_per_workspace", BudgetScope.BOT, 48 / 60, 1, frozenset({CallKind.EDIT}))
    queue = FairQueue(budget.bucket(), clock)
    pauses = PauseBoard()
    adapter.fail("edit_text", 6, RateLimitedError("429", retry_after_s=20.0, scope=RateScope.METHOD))
    books = [SlotBook(f"acme/r{i}", 1.0, native=False) for i in range(8)]
    reconcilers = [
        Reconciler(
            book=book,
            adapter=adapter,
            chain=SendChain(clock, pauses=pauses, fair=[queue]),
            target=Target(chat_id=i),
            ledger=MemoryLedger(),
            clock=clock,
        )
        for i, book in enumerate(books)
    ]
    slots = [book.claim_slot(SlotRole.ANSWER, "w0") for book in books]
    for rec in reconcilers:
        rec.start()
    for step in range(1, 800):  # 100 s of previews growing by a word every 0.125 s
        for book, slot in zip(books, slots, strict=True):
            book.set_text(slot, f"{slot.desired} w{step}")
        clock.advance(0.125)
        await settle()
    for rec in reconcilers:
        await rec.cancel()

    edits = [call for call in adapter.calls_of("edit_text")]
    assert [c.outcome for c in edits].count("RateLimitedError") == 1  # the 429 came, and paused the method
    started = [c.at for c in edits]
    assert most_in_a_window(started, 60.0) <= 49  # the budget's 48 per minute and its burst of 1
    assert most_in_a_window(started, 5.0) <= 5  # 1 + 0.8 x 5: never several at once after the pause
