"""ChannelRuntime and the send chain's budgets: who shares a budget, what a 429 pauses, finals first."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from streamrelay.core.budgets.rate import Budget, BudgetScope
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import FakeClock
from streamrelay.core.errors import RateLimitedError, RateScope
from streamrelay.core.events import Target
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.ports import CallKind
from tests.unit.fakes import ManualClock, MemoryChat, drive, settle

TELEGRAM_LIKE = (
    Budget("per_chat", BudgetScope.CHAT, 1.0, 2),
    Budget("per_group", BudgetScope.GROUP, 20 / 60, 1),
)
SLACK_LIKE = (
    Budget("post", BudgetScope.CHAT, 1.0, 1, frozenset({CallKind.SEND})),
    Budget("update", BudgetScope.BOT, 0.5, 1, frozenset({CallKind.EDIT})),
)


def runtime(*budgets: Budget, max_idle_chains: int = 10_000) -> ChannelRuntime:
    return ChannelRuntime(ChannelPolicy(name="c"), MemoryChat(), budgets, max_idle_chains=max_idle_chains)


def gaps(starts: list[float]) -> list[float]:
    return [round(b - a, 3) for a, b in itertools.pairwise(starts)]


async def test_group_conversations_are_paced_to_the_per_minute_budget() -> None:
    clock = FakeClock()
    rt = runtime(*TELEGRAM_LIKE)
    group = rt.chain_for(Target(chat_id=-100), clock)
    private = rt.chain_for(Target(chat_id=100), clock)
    starts: list[float] = []

    async def call() -> None:
        starts.append(clock.now())

    for _ in range(3):
        await group.call(call)
    assert gaps(starts) == [3.0, 3.0]
    starts.clear()
    for _ in range(3):
        await private.call(call)
    assert gaps(starts) == [0.0, 1.0]  # a burst of 2 in a private chat, then 1 per second


async def test_threads_of_one_group_share_its_rate_budget() -> None:
    clock = FakeClock()
    rt = runtime(Budget("per_group", BudgetScope.GROUP, 20 / 60, 1))
    topic_a = rt.chain_for(Target(chat_id=-100, thread_id=1), clock)
    topic_b = rt.chain_for(Target(chat_id=-100, thread_id=2), clock)
    assert topic_a is not topic_b
    starts: list[float] = []

    async def call() -> None:
        starts.append(clock.now())

    await topic_a.call(call)
    await topic_b.call(call)
    assert starts[1] - starts[0] == pytest.approx(3.0)  # 20 per minute for the group, whatever the topic


async def test_idle_send_chains_are_forgotten_past_the_cap_but_never_one_in_use() -> None:
    clock = FakeClock()
    rt = runtime(max_idle_chains=2)
    held = rt.chain_for(Target(chat_id=1), clock)
    for chat in range(2, 6):
        rt.chain_for(Target(chat_id=chat), clock)
        rt.release(Target(chat_id=chat))
    assert rt.chain_for(Target(chat_id=1), clock) is held  # in use: kept, and the same chain
    assert len(rt._chains) <= 3


async def test_a_conversation_no_run_holds_keeps_its_message_ids_not_its_chain() -> None:
    clock = FakeClock()
    rt = runtime(*TELEGRAM_LIKE)
    first = rt.chain_for(Target(chat_id=7), clock)
    first.note_message("10")
    first.note_message("12")
    first.note_message("11", newest=False)
    rt.release(Target(chat_id=7))
    assert not rt._chains  # at rest: only its memo stays
    again = rt.chain_for(Target(chat_id=7), clock)
    assert again is not first
    assert again.last_message_id == "12"  # a later run settles its creates after the ids the first one acknowledged
    assert again.known_ids() == frozenset({"10", "11", "12"})
    assert rt._chat_buckets["7"]  # the chat's budgets (what it spent) are the same objects still


async def test_a_conversation_paused_by_a_429_keeps_its_chain_when_no_run_holds_it() -> None:
    clock = FakeClock()
    rt = runtime(*TELEGRAM_LIKE)
    chain = rt.chain_for(Target(chat_id=7), clock)

    async def limited() -> None:
        raise RateLimitedError("slow down", retry_after_s=30.0, scope=RateScope.CONVERSATION)

    with pytest.raises(RateLimitedError):
        await chain.call(limited)
    rt.release(Target(chat_id=7))
    assert rt.chain_for(Target(chat_id=7), clock) is chain  # its pause goes on for the next run there


async def test_a_method_budget_is_shared_by_every_channel_of_the_bot_and_spares_other_calls() -> None:
    clock = FakeClock()
    rt = runtime(*SLACK_LIKE)
    a, b = rt.chain_for(Target(chat_id="C1"), clock), rt.chain_for(Target(chat_id="C2"), clock)
    starts: list[tuple[str, float]] = []

    async def call(name: str) -> None:
        starts.append((name, clock.now()))

    await a.call(lambda: call("edit a"), CallKind.EDIT)
    await b.call(lambda: call("edit b"), CallKind.EDIT)  # chat.update: one workspace budget, 0.5/s
    await b.call(lambda: call("send b"), CallKind.SEND)  # chat.postMessage: its own per-channel budget
    assert starts == [("edit a", 0.0), ("edit b", 2.0), ("send b", 2.0)]


async def test_a_429_pauses_its_scope_only() -> None:
    clock = FakeClock()
    rt = runtime()
    a, b = rt.chain_for(Target(chat_id="C1"), clock), rt.chain_for(Target(chat_id="C2"), clock)

    async def limited(scope: RateScope) -> None:
        raise RateLimitedError("429", retry_after_s=5, scope=scope)

    with pytest.raises(RateLimitedError):
        await a.call(lambda: limited(RateScope.METHOD), CallKind.EDIT)
    assert b.ready_in(CallKind.EDIT) == 5.0  # chat.update is paused workspace-wide
    assert b.ready_in(CallKind.SEND) == 0.0  # ... posting is not
    assert a.ready_in(CallKind.SEND) == 0.0
    with pytest.raises(RateLimitedError):
        await a.call(lambda: limited(RateScope.CONVERSATION), CallKind.SEND)
    assert a.ready_in(CallKind.SEND) == 5.0 and b.ready_in(CallKind.SEND) == 0.0
    with pytest.raises(RateLimitedError):
        await b.call(lambda: limited(RateScope.BOT), CallKind.SEND)  # Discord's global limit
    c = rt.chain_for(Target(chat_id="C3"), clock)
    assert c.ready_in(CallKind.DELETE) == 5.0 and c.ready_in(CallKind.SEND) == 5.0


async def test_when_a_shared_budget_is_short_a_final_goes_before_other_runs_previews() -> None:
    clock = ManualClock()
    rt = runtime(Budget("update", BudgetScope.BOT, 1.0, 1, frozenset({CallKind.EDIT})))
    chains = [rt.chain_for(Target(chat_id=f"C{i}"), clock) for i in range(3)]
    order: list[str] = []

    async def call(name: str) -> None:
        order.append(name)

    await chains[0].call(lambda: call("first"), CallKind.EDIT)  # the budget is spent for a second
    preview = asyncio.ensure_future(chains[1].call(lambda: call("preview"), CallKind.EDIT))
    await settle()  # the preview waits for the budget first ...
    final = chains[2].call(lambda: call("final"), CallKind.EDIT, final=True)
    await drive(clock, asyncio.gather(preview, final))
    assert order == ["first", "final", "preview"]  # ... but the final answer goes first


async def test_a_chats_budgets_are_forgotten_with_its_last_conversation_not_before() -> None:
    clock = FakeClock()
    rt = runtime(*TELEGRAM_LIKE, max_idle_chains=2)
    for thread in ("a", "b"):  # two threads (forum topics) of chat 7 share its budgets
        rt.chain_for(Target(chat_id=7, thread_id=thread), clock)
        rt.release(Target(chat_id=7, thread_id=thread))
    budgets = rt._chat_buckets["7"]
    rt.chain_for(Target(chat_id=8), clock)  # one over the cap: the oldest idle thread of chat 7 is forgotten
    assert rt._chat_buckets["7"] is budgets  # thread b still holds them
    rt.chain_for(Target(chat_id=9), clock)  # and thread b too
    assert "7" not in rt._chat_buckets
    assert set(rt._chat_buckets) == {"8", "9"}
