"""Send chains of three replicas sharing a bot's budgets and pauses on a real redis-server.

Each replica is a :class:`~core.channel.ChannelRuntime` with its own Redis connection and its own local buckets,
built as the service wires them (``shared=shared_budgets_for(...)``). The rates are Telegram's shape scaled down for
speed: about 1 message per second per chat (local) and a per-bot budget shared by every replica, 8/s where the mock
enforces 10 in any second as Telegram's 30 (29/s in channels.toml,
https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this).

No assertion reads the test's clock as an upper bound: grants are counted at the times Redis decided them, waits
are lower bounds measured on Redis's ``TIME``, and the mock counts what reached it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from streamrelay.adapters.redis.budget import Attempt, RedisBudgets
from streamrelay.adapters.redis.client import Redis
from streamrelay.adapters.redis.keys import KEYS
from streamrelay.adapters.redis.shared_budgets import RedisSharedBudgets, shared_budgets_for
from streamrelay.adapters.telegram.adapter import TelegramAdapter
from streamrelay.core.budgets.rate import Budget, BudgetScope
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import RateLimitedError, RateScope
from streamrelay.core.events import Target
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.ports import CallKind, ChannelAdapter, TextFormat
from streamrelay.mocks.telegram import MockTelegram, TelegramLimits
from tests.unit.fakes import MemoryChat

pytestmark = pytest.mark.timeout(60)

TOKEN = "123456789:AAE-mock_Secret-Token_0123456789abcdef"
BOT_ID = TOKEN.partition(":")[0]  # the public part
PER_CHAT = Budget("per_chat", BudgetScope.CHAT, per_s=1.0, burst=2)
PER_BOT = Budget("per_bot", BudgetScope.BOT, per_s=8.0, burst=1)
BUDGETS = (PER_CHAT, PER_BOT)
BOT_SCOPE = f"telegram:bot:{BOT_ID}:rate:per_bot"
MOCK_LIMITS = TelegramLimits(chat_burst=3, chat_per_s=1.0, global_per_s=10)


class CountingBudgets(RedisBudgets):
    """RedisBudgets that keeps every grant, by scope, with Redis's time of the decision."""

    def __init__(self, client: Redis, granted: defaultdict[str, list[Attempt]]) -> None:
        super().__init__(client)
        self._granted = granted

    async def attempt(
        self, scope: str, rate_per_s: float, burst: float, *, final: bool = True, waiter: str | None = None
    ) -> Attempt:
        answer = await super().attempt(scope, rate_per_s, burst, final=final, waiter=waiter)
        if answer.granted:
            self._granted[scope].append(answer)
        return answer


def replica(adapter: ChannelAdapter, client: Redis, budgets: RedisBudgets | None = None) -> ChannelRuntime:
    """One replica's channel: local buckets for every budget, the bot's shared in Redis."""
    shared = (
        shared_budgets_for(client, "telegram", BUDGETS, BOT_ID)
        if budgets is None
        else RedisSharedBudgets(budgets, BUDGETS, f"telegram:bot:{BOT_ID}")
    )
    return ChannelRuntime(ChannelPolicy(name="telegram"), adapter, BUDGETS, shared=shared)


def within_budget(times: list[float], rate_per_s: float, burst: float) -> bool:
    """In every window [t_i, t_j] at most ``burst + rate_per_s * (t_j - t_i)`` calls started (GCRA's promise)."""
    times = sorted(times)
    return all(
        j - i + 1 <= burst + rate_per_s * (times[j] - times[i]) + 1e-6
        for i in range(len(times))
        for j in range(i, len(times))
    )


async def redis_now(client: Redis) -> float:
    seconds, micros = await client.time()
    return float(seconds) + micros / 1e6


CLOCK = MonotonicClock()


async def deliver(runtimes: list[ChannelRuntime], chats: int, messages: int) -> int:
    """Every replica sends ``messages`` to each of its own ``chats`` private chats, all at once; the 429s it got."""
    limited = 0

    async def send(rt: ChannelRuntime, chat_id: int, text: str) -> None:
        nonlocal limited
        target = Target(chat_id=chat_id)
        chain = rt.chain_for(target, CLOCK)
        try:
            await chain.call(lambda: rt.adapter.send_text(target, text, TextFormat.PLAIN))
        except RateLimitedError:
            limited += 1
        finally:
            rt.release(target)

    await asyncio.gather(
        *(
            send(rt, 1000 * (r + 1) + c, f"r{r} c{c} m{m}")
            for (r, rt), c, m in itertools.product(enumerate(runtimes), range(chats), range(messages))
        )
    )
    return limited


@pytest.fixture
async def telegram() -> AsyncIterator[tuple[MockTelegram, list[TelegramAdapter]]]:
    """The mock Bot API enforcing flood control (:data:`MOCK_LIMITS`) and three replicas' adapters on it."""
    async with MockTelegram(rate_limits=True, limits=MOCK_LIMITS) as mock:
        adapters = [TelegramAdapter(TOKEN, base_url=mock.base_url) for _ in range(3)]
        try:
            yield mock, adapters
        finally:
            for adapter in adapters:
                await adapter.close()


async def test_three_replicas_never_exceed_the_shared_bot_budget_on_redis_clock(clients: list[Redis]) -> None:
    grants: defaultdict[str, list[Attempt]] = defaultdict(list)
    made: list[str] = []
    runtimes = [replica(MemoryChat(), c, CountingBudgets(c, grants)) for c in clients]

    def counted(name: str) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            made.append(name)

        return call

    async def chat(r: int, rt: ChannelRuntime, c: int) -> None:
        chain = rt.chain_for(Target(chat_id=c), CLOCK)
        for m in range(3):
            await chain.call(counted(f"r{r} c{c} m{m}"), final=m == 2)

    await asyncio.gather(*(chat(r, rt, c) for r, rt in enumerate(runtimes) for c in range(2)))
    granted = grants[BOT_SCOPE]
    assert list(grants) == [BOT_SCOPE] and len(made) == 18 and len(granted) == 18  # one grant per call, none lost
    assert within_budget([a.at_s for a in granted], PER_BOT.per_s, PER_BOT.burst)
    assert {name[:2] for name in made} == {"r0", "r1", "r2"}
    assert await clients[0].zcard(KEYS.budget(BOT_SCOPE, "finals")) == 0  # every final's registration is gone


async def test_three_replicas_get_no_429_from_the_mock_where_local_budgets_alone_do(
    telegram: tuple[MockTelegram, list[TelegramAdapter]], clients: list[Redis]
) -> None:
    mock, adapters = telegram
    # Without sharing, each replica keeps the bot's 8/s on its own: 24/s reach a bot limited to 10 in any second.
    alone = [ChannelRuntime(ChannelPolicy(name="telegram"), a, BUDGETS) for a in adapters]
    assert await deliver(alone, chats=3, messages=3) > 0
    mock.reset()

    # The keys are read while the replicas send: the bot budget's key lapses a moment (2 emission intervals, 250 ms)
    # after its last grant, and on a loaded machine a scan after the sending found none left.
    keys: set[str] = set()
    sent = asyncio.Event()

    async def scan() -> None:
        while not sent.is_set():
            keys.update([key async for key in clients[0].scan_iter("*")])
            await asyncio.sleep(0.05)

    scanning = asyncio.ensure_future(scan())
    try:
        limited = await deliver([replica(a, c) for a, c in zip(adapters, clients, strict=True)], chats=3, messages=3)
    finally:
        sent.set()
        await scanning
    answered = [call for call in mock.calls if call.method == "sendMessage"]
    assert limited == 0 and [call.status for call in answered] == [200] * 27
    busiest = max(sum(1 for other in answered if call.t <= other.t < call.t + 1.0) for call in answered)
    assert busiest <= PER_BOT.per_s + PER_BOT.burst  # calls in the busiest second on the mock's clock (limit: 10)
    for r, c in itertools.product(range(3), range(3)):
        assert [text for _, text in mock.visible(1000 * (r + 1) + c)] == [f"r{r} c{c} m{m}" for m in range(3)]
    keys.update([key async for key in clients[0].scan_iter("*")])
    assert any(BOT_ID in key for key in keys), keys  # the bot's budget was shared in Redis, named by its id
    assert not [key for key in keys if TOKEN.partition(":")[2] in key]  # the bot id, never the token


async def test_a_bot_wide_429_on_one_replica_holds_the_others_back(clients: list[Redis]) -> None:
    a, b, c = (replica(MemoryChat(), client) for client in clients)
    started: list[float] = []

    async def limited() -> None:
        raise RateLimitedError("429", retry_after_s=0.6, scope=RateScope.BOT)  # Discord's global limit

    async def call() -> None:
        started.append(await redis_now(clients[0]))

    with pytest.raises(RateLimitedError):
        await a.chain_for(Target(chat_id=1), CLOCK).call(limited)
    answered_at = await redis_now(clients[0])  # the pause was set before the 429 reached the caller
    await asyncio.gather(*(rt.chain_for(Target(chat_id=2), CLOCK).call(call) for rt in (b, c)))
    assert len(started) == 2 and min(started) - answered_at >= 0.6 - 0.05


async def test_a_method_429_holds_that_kind_on_every_replica_and_spares_the_others(clients: list[Redis]) -> None:
    a, b = (replica(MemoryChat(), client) for client in clients[:2])
    order: list[str] = []

    async def limited() -> None:
        raise RateLimitedError("429", retry_after_s=1.5, scope=RateScope.METHOD)  # Slack: chat.update's tier

    def call(name: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            order.append(name)

        return run

    with pytest.raises(RateLimitedError):
        await a.chain_for(Target(chat_id=1), CLOCK).call(limited, CallKind.EDIT)
    answered_at = await redis_now(clients[0])
    edit = asyncio.ensure_future(b.chain_for(Target(chat_id=2), CLOCK).call(call("edit"), CallKind.EDIT))
    await b.chain_for(Target(chat_id=3), CLOCK).call(call("send"), CallKind.SEND)
    await edit
    assert order == ["send", "edit"] and await redis_now(clients[0]) - answered_at >= 1.5 - 0.05


def slow_replicas(clients: list[Redis]) -> list[ChannelRuntime]:
    """Three replicas of a bot whose one budget is 2 calls per second, burst 1 (a token every 0.5 s)."""
    slow = (Budget("per_bot", BudgetScope.BOT, per_s=2.0, burst=1),)
    return [
        ChannelRuntime(ChannelPolicy(name="tg"), MemoryChat(), slow, shared=shared_budgets_for(cl, "tg", slow))
        for cl in clients
    ]


def logged(order: list[str], name: str) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        order.append(name)

    return run


async def test_a_final_goes_before_another_replicas_preview(clients: list[Redis]) -> None:
    a, b, c = slow_replicas(clients)
    order: list[str] = []
    await a.chain_for(Target(chat_id=1), CLOCK).call(logged(order, "first"))  # the shared token is spent for 0.5 s
    preview = asyncio.ensure_future(b.chain_for(Target(chat_id=2), CLOCK).call(logged(order, "preview")))
    final = asyncio.ensure_future(c.chain_for(Target(chat_id=3), CLOCK).call(logged(order, "final"), final=True))
    await asyncio.gather(preview, final)
    assert order == ["first", "final", "preview"]


async def test_a_final_waiting_out_a_pause_goes_first_after_it_and_withdraws_when_cancelled(
    clients: list[Redis],
) -> None:
    a, b, c = slow_replicas(clients)
    order: list[str] = []
    finals = KEYS.budget("tg:bot:rate:per_bot", "finals")
    await RedisBudgets(clients[0]).pause("tg:bot", 0.5)  # a bot-wide 429 seen by some replica
    preview = asyncio.ensure_future(b.chain_for(Target(chat_id=2), CLOCK).call(logged(order, "preview")))
    final = asyncio.ensure_future(c.chain_for(Target(chat_id=3), CLOCK).call(logged(order, "final"), final=True))
    await asyncio.gather(preview, final)
    assert order == ["final", "preview"]  # registered while paused: the preview left it the one token

    await RedisBudgets(clients[0]).pause("tg:bot", 30)
    waiting = asyncio.ensure_future(a.chain_for(Target(chat_id=4), CLOCK).call(logged(order, "gave up"), final=True))
    while not await clients[0].zcard(finals):  # it registers as a waiter for every replica's previews
        await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await clients[0].zcard(finals) == 0 and "gave up" not in order  # withdrawn: it holds no preview back


async def test_two_shared_budgets_on_one_kind_both_hold_across_replicas(clients: list[Redis]) -> None:
    fast, slow = Budget("fast", BudgetScope.BOT, per_s=20.0, burst=2), Budget("slow", BudgetScope.BOT, per_s=6.0)
    grants: defaultdict[str, list[Attempt]] = defaultdict(list)
    made: list[str] = []

    def runtime(client: Redis) -> ChannelRuntime:
        shared = RedisSharedBudgets(CountingBudgets(client, grants), (fast, slow), "tg:bot")
        assert shared.scopes == ["tg:bot:rate:slow", "tg:bot:rate:fast"]  # the slowest is asked first
        return ChannelRuntime(ChannelPolicy(name="tg"), MemoryChat(), (fast, slow), shared=shared)

    async def chat(r: int, rt: ChannelRuntime) -> None:
        for m in range(3):
            await rt.chain_for(Target(chat_id=r), CLOCK).call(logged(made, f"r{r} m{m}"))

    await asyncio.gather(*(chat(r, runtime(c)) for r, c in enumerate(clients)))
    slow_grants, fast_grants = grants["tg:bot:rate:slow"], grants["tg:bot:rate:fast"]
    assert len(made) == len(fast_grants) == 9 <= len(slow_grants)  # a refused pass forfeits its earlier grant
    assert within_budget([a.at_s for a in slow_grants], slow.per_s, slow.burst)
    assert within_budget([a.at_s for a in fast_grants], fast.per_s, fast.burst)


async def test_only_the_bot_budgets_are_shared_and_a_token_is_never_a_scope(client: Redis) -> None:
    free = Budget("free", BudgetScope.BOT, per_s=0.0)  # unlimited: only the pauses apply
    shared = shared_budgets_for(client, "telegram", (*BUDGETS, free), BOT_ID)
    assert shared.scopes == [BOT_SCOPE]  # per_chat stays local: one replica owns a chat at a time
    assert shared_budgets_for(client, "slack", BUDGETS).scopes == ["slack:bot:rate:per_bot"]
    teams_app = "00000000-0000-4000-8000-0000000000b7"  # a Teams bot's Microsoft App ID: public, 36 characters
    assert shared_budgets_for(client, "teams", BUDGETS, teams_app).scopes == [f"teams:bot:{teams_app}:rate:per_bot"]
    for bad in (TOKEN, "xoxb-1234-5678-abcdefgh", "MTIzNDU2Nzg5.GhIjKl.mnopqrstuvwx"):
        with pytest.raises(ValueError, match="never its token") as caught:
            shared_budgets_for(client, "telegram", BUDGETS, bad)
        assert bad not in str(caught.value)
    with pytest.raises(ValueError, match="channel name"):
        shared_budgets_for(client, "tele{gram}", BUDGETS)
