"""A configured channel at run time: its policy, its adapter, its rate budgets and its send chains.

Budgets come from the channel's TOML (``[channels.NAME.rate.BUDGET]``, each number with its documentation
link). Per scope they are shared as the platform shares them: ``bot`` budgets and 429 pauses by every
conversation of the channel's bot, ``chat`` and ``group`` budgets by every thread (forum topic) of a chat. The
bot's budgets are served fairly (:class:`~core.budgets.fair.FairQueue`: finals first, then round-robin across clients,
then
across a client's runs); a chat's are polled first come, first served (its few threads rarely compete). With
replicas, ``bot`` budgets and bot-wide 429 pauses are also shared with the other processes serving the bot
(``shared``: :class:`~core.budgets.rate.SharedBudgets`, e.g. ``adapters.redis.shared_budgets_for``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from streamrelay.core.budgets.fair import FairQueue, Requester
from streamrelay.core.budgets.history import CallHistory
from streamrelay.core.budgets.rate import Budget, BudgetScope, PauseBoard, SharedBudgets, TokenBucket
from streamrelay.core.clock import Clock
from streamrelay.core.delivery.call_slots import CallSlots
from streamrelay.core.delivery.executor import Executor
from streamrelay.core.delivery.send_chain import ChainMemo, SendChain
from streamrelay.core.events import Target
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.ports import ChannelAdapter, PooledConnections
from streamrelay.core.records.ledger import Ledger


@dataclass
class ChannelRuntime:
    """A configured channel: its policy, its adapter, its rate budgets and one send chain per target.

    Chains are shared by every run to the same target (one call at a time per conversation) and counted. A chain
    no run holds any more and that is at rest (:meth:`~core.delivery.send_chain.SendChain.at_rest`) leaves only its
    memo (:class:`~core.delivery.send_chain.ChainMemo`: the conversation's message ids, a few hundred bytes instead
    of the chain's 1.5 KB), from which the next run there gets a chain that knows them. Past ``max_idle_chains`` the
    least recently used memos and idle chains are forgotten, so a sidecar that has served millions of chats keeps
    only the ones in use.

    Args:
        policy: the core's view of the channel.
        adapter: the platform connection (one bot).
        budgets: the channel's rate budgets (none: unlimited).
        max_idle_chains: how many conversations no run holds are remembered (memos and idle chains).
        shared: the channel's budgets and pauses shared with other replicas of the service (None: one process);
            every send chain awaits it after its local budgets. Built from the same ``budgets``.
        guard_for: the guard of a target's send chain (see :class:`~core.delivery.send_chain.SendChain`; replicas: is
        the
            lease of the target's partition still ours), None: no guard.
        fair: serve the bot's budgets in fair order (False: first come, first served, as polled buckets: kept
            for comparison, e.g. ``bench/bench_fairness.py``).
        history: the ledger's recent calls (a restarted sidecar: :class:`~core.budgets.history.CallHistory`); each
            bucket built here is seeded with the calls it would have granted, so it begins where the platform's count
            is, not full. None: buckets begin full.
    """

    policy: ChannelPolicy
    adapter: ChannelAdapter
    budgets: Sequence[Budget] = ()
    max_idle_chains: int = 10_000
    shared: SharedBudgets | None = None
    guard_for: Callable[[Target], Callable[[], bool]] | None = None
    fair: bool = True
    history: CallHistory | None = None
    pauses: PauseBoard = field(default_factory=PauseBoard)
    _chains: OrderedDict[str, tuple[SendChain, int]] = field(default_factory=OrderedDict)
    _idle: OrderedDict[str, ChainMemo] = field(default_factory=OrderedDict)
    _chat_buckets: dict[str, list[TokenBucket]] = field(default_factory=dict)
    _keys_of_chat: dict[str, int] = field(default_factory=dict)
    _bot_buckets: list[TokenBucket] | None = None
    _bot_queues: list[FairQueue] = field(default_factory=list)
    _call_slots: CallSlots | None = None

    @property
    def call_slots(self) -> CallSlots | None:
        """The channel's call slots (:mod:`core.delivery.call_slots`), made on first use, sized to the adapter's
        connection pool (:class:`~core.ports.PooledConnections`); None when the adapter has none."""
        if self._call_slots is None and isinstance(self.adapter, PooledConnections):
            self._call_slots = CallSlots(self.adapter.connections)
        return self._call_slots

    @staticmethod
    def _key(target: Target) -> str:
        return f"{target.chat_id}/{target.thread_id or ''}"

    def chain_for(self, target: Target, clock: Clock) -> SendChain:
        """The send chain of ``target`` (one per chat and thread), created on first use; pair every call
        with :meth:`release` when the run is over."""
        key = self._key(target)
        entry = self._chains.pop(key, None)
        if entry is None:
            if self._bot_buckets is None:
                self._bot_buckets = [
                    self._seeded(b.bucket(), clock) for b in self.budgets if b.scope is BudgetScope.BOT
                ]
                if self.fair:
                    self._bot_queues = [FairQueue(bucket, clock) for bucket in self._bot_buckets]
            # Threads (forum topics) of one chat share the chat's and the group's budgets.
            chat_key = str(target.chat_id)
            buckets = self._chat_buckets.get(chat_key)
            if buckets is None:
                group = self.adapter.is_group(target)
                buckets = [
                    self._seeded(b.bucket(), clock, chat_key)
                    for b in self.budgets
                    if b.scope is BudgetScope.CHAT or (b.scope is BudgetScope.GROUP and group)
                ]
                self._chat_buckets[chat_key] = buckets
            guard = self.guard_for(target) if self.guard_for is not None else None
            polled = buckets if self.fair else [*buckets, *self._bot_buckets]
            chain = SendChain(
                clock,
                polled,
                self.pauses,
                fair=self._bot_queues,
                shared=self.shared,
                guard=guard,
                max_retry_after_s=self.policy.max_retry_after_s,
                call_slots=self.call_slots,
            )
            memo = self._idle.pop(key, None)
            if memo is not None:
                chain.restore(memo)
            else:
                self._keys_of_chat[chat_key] = self._keys_of_chat.get(chat_key, 0) + 1
            entry = (chain, 0)
        chain, users = entry
        self._chains[key] = (chain, users + 1)
        self._prune()
        return chain

    def _seeded(self, bucket: TokenBucket, clock: Clock, chat: str | None = None) -> TokenBucket:
        if self.history is not None:
            self.history.seed(bucket, clock.now(), channel=self.policy.name, chat=chat)
        return bucket

    @contextmanager
    def ended_run_executor(
        self, target: Target, clock: Clock, ledger: Ledger, run: str
    ) -> Iterator[tuple[Executor, SendChain]]:
        """The executor (and its send chain) for calls on behalf of ended run ``run`` to ``target``: a desk resend, a
        correction. The chain is the conversation's own, so these calls queue behind a live run's there and share its
        budgets; it is released on leaving."""
        chain = self.chain_for(target, clock)
        try:
            yield (
                Executor(adapter=self.adapter, chain=chain, ledger=ledger, run=run, requester=Requester.of(run)),
                chain,
            )
        finally:
            self.release(target)

    def release(self, target: Target) -> None:
        """A run to ``target`` is over."""
        key = self._key(target)
        entry = self._chains.get(key)
        if entry is not None:
            chain, users = entry[0], max(0, entry[1] - 1)
            if users == 0 and chain.at_rest():
                del self._chains[key]
                self._idle[key] = chain.memo()
            else:
                self._chains[key] = (chain, users)
        self._prune()

    def _prune(self) -> None:
        over = len(self._chains) + len(self._idle) - self.max_idle_chains
        while over > 0 and self._idle:
            self._forget(self._idle.popitem(last=False)[0])
            over -= 1
        if over <= 0:
            return
        for key in [k for k, (chain, users) in self._chains.items() if users == 0 and chain.pause_remaining() == 0]:
            if over <= 0:
                break
            del self._chains[key]
            self._forget(key)
            over -= 1

    def _forget(self, key: str) -> None:
        """The conversation ``key`` is forgotten: its chat's budgets too when it was the chat's last (a count per
        chat, so forgetting costs the same with 10 or 10,000 conversations kept)."""
        chat_key = key.rsplit("/", 1)[0]
        left = self._keys_of_chat.get(chat_key, 1) - 1
        if left > 0:
            self._keys_of_chat[chat_key] = left
        else:
            self._keys_of_chat.pop(chat_key, None)
            self._chat_buckets.pop(chat_key, None)
