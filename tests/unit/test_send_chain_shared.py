"""SendChain with shared budgets (replicas): the shared grant is awaited after the local wait and before the call, a
429 on a scope wider than the conversation pauses every replica, and a failing store never hides the 429."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from streamrelay.core.budgets.rate import TokenBucket
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import FakeClock
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.errors import RateLimitedError, RateScope
from streamrelay.core.events import Target
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.ports import CallKind
from tests.unit.fakes import MemoryChat, settle

pytestmark = pytest.mark.timeout(10)


class FakeSharedBudgets:
    """Shared budgets in memory: records every ask and pause with the clock time; ``gate`` (when set) holds every
    acquire until the test sets it; ``acquire_fails`` and ``pause_fails`` make those raise."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.log: list[tuple[str, float]] = []
        self.pauses: list[tuple[CallKind, RateScope, float]] = []
        self.gate: asyncio.Event | None = None
        self.acquire_fails: Exception | None = None
        self.pause_fails: Exception | None = None

    async def acquire(self, kind: CallKind, *, final: bool) -> None:
        self.log.append((f"acquire {kind} final={final}", self.clock.now()))
        if self.acquire_fails is not None:
            raise self.acquire_fails
        if self.gate is not None:
            await self.gate.wait()

    async def pause(self, kind: CallKind, scope: RateScope, seconds: float) -> None:
        if self.pause_fails is not None:
            raise self.pause_fails
        self.pauses.append((kind, scope, seconds))


def recorder(shared: FakeSharedBudgets, name: str) -> Callable[[], Awaitable[str]]:
    """A platform call that logs when it runs, in the same log as the shared asks."""

    async def call() -> str:
        shared.log.append((name, shared.clock.now()))
        return name

    return call


def limited(scope: RateScope, retry_after_s: float = 3.0) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        raise RateLimitedError("429", retry_after_s=retry_after_s, scope=scope)

    return call


async def test_every_call_is_granted_by_the_shared_budgets_after_the_local_wait() -> None:
    clock = FakeClock()
    shared = FakeSharedBudgets(clock)
    chain = SendChain(clock, [TokenBucket(rate_per_s=1.0, burst=1)], shared=shared)
    await chain.call(recorder(shared, "first"))
    await chain.call(recorder(shared, "edit"), CallKind.EDIT, final=True)
    assert shared.log == [
        ("acquire send final=False", 0.0),
        ("first", 0.0),
        ("acquire edit final=True", 1.0),  # the local bucket's wait came first
        ("edit", 1.0),
    ]


async def test_nothing_runs_until_the_shared_budgets_grant_and_the_chain_stays_in_order() -> None:
    clock = FakeClock()
    shared = FakeSharedBudgets(clock)
    shared.gate = asyncio.Event()
    chain = SendChain(clock, shared=shared)
    first = asyncio.ensure_future(chain.call(recorder(shared, "one")))
    second = asyncio.ensure_future(chain.call(recorder(shared, "two")))
    await settle()
    assert [entry for entry, _ in shared.log] == ["acquire send final=False"]  # the one call holds the chain
    shared.gate.set()
    assert list(await asyncio.gather(first, second)) == ["one", "two"]
    assert [entry for entry, _ in shared.log] == ["acquire send final=False", "one", "acquire send final=False", "two"]


@pytest.mark.parametrize(
    ("scope", "shared_pause"),
    [
        (RateScope.BOT, [(CallKind.EDIT, RateScope.BOT, 3.0)]),  # Discord's global 429
        (RateScope.METHOD, [(CallKind.EDIT, RateScope.METHOD, 3.0)]),  # Slack: chat.update's tier
        (RateScope.CONVERSATION, []),  # Telegram's flood control per chat: the chat's owner alone
    ],
)
async def test_a_429_wider_than_the_conversation_pauses_every_replica(
    scope: RateScope, shared_pause: list[tuple[CallKind, RateScope, float]]
) -> None:
    clock = FakeClock()
    shared = FakeSharedBudgets(clock)
    chain = SendChain(clock, shared=shared)
    with pytest.raises(RateLimitedError):
        await chain.call(limited(scope), CallKind.EDIT)
    assert shared.pauses == shared_pause
    assert chain.ready_in(CallKind.EDIT) == 3.0  # this replica's own pause, as without replicas


async def test_a_store_that_fails_to_pause_never_hides_the_429(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    shared = FakeSharedBudgets(clock)
    chain = SendChain(clock, shared=shared)
    shared.pause_fails = ConnectionError("store down")
    with pytest.raises(RateLimitedError):
        await chain.call(limited(RateScope.BOT, 2.0))
    assert chain.ready_in(CallKind.SEND) == 2.0  # the local pause holds this replica back
    assert "a bot 429 pause of 2.000 s could not be shared" in caplog.text


async def test_a_store_that_fails_to_grant_leaves_the_call_unmade() -> None:
    clock = FakeClock()
    shared = FakeSharedBudgets(clock)
    shared.acquire_fails = ConnectionError("store down")
    chain = SendChain(clock, shared=shared)
    with pytest.raises(ConnectionError):
        await chain.call(recorder(shared, "never"))
    assert [entry for entry, _ in shared.log] == ["acquire send final=False"]
    shared.acquire_fails = None
    assert await chain.call(recorder(shared, "later")) == "later"  # the chain is free again


async def test_a_channel_runtime_gives_every_chain_its_shared_budgets() -> None:
    clock = FakeClock()
    shared = FakeSharedBudgets(clock)
    rt = ChannelRuntime(ChannelPolicy(name="c"), MemoryChat(), shared=shared)
    for chat in ("A", "B"):
        await rt.chain_for(Target(chat_id=chat), clock).call(recorder(shared, chat))
    assert [entry for entry, _ in shared.log] == ["acquire send final=False", "A", "acquire send final=False", "B"]
    assert ChannelRuntime(ChannelPolicy(name="c"), MemoryChat()).chain_for(Target(chat_id=1), clock)._shared is None
