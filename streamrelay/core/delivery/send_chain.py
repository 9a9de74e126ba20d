"""The send chain: per conversation, one platform call at a time, in order, within the rate budgets.

A 429 (``RateLimitedError``) pauses its scope until its ``retry_after`` has passed: this conversation
(calls for the same chat from other runs wait too), one kind of call bot-wide, or the whole bot (the
:class:`~core.budgets.rate.PauseBoard` the bot's chains share). The chain never retries by itself: callers (the
reconciler) decide, so pending preview edits can merge into one. A ``retry_after`` longer than the chain obeys
(``max_retry_after_s``, the channel's setting) is the platform refusing the call for now: nothing pauses (the rest
of the conversation goes on, each call asked once more) and the call's outcome becomes a
:class:`~core.errors.RetryAfterTooLongError` (its part is reported failed, never waited for).

Budgets shared by many conversations (the bot's) are served fairly (:class:`~core.budgets.fair.FairQueue`): each call
says
who asks (:class:`~core.budgets.fair.Requester`: its client and run); finals go first, then the clients take turns,
then a
client's runs. A caller that must wait for its turn may take it ahead of the call (:meth:`SendChain.take_turn`) and
then decide what to send: the reconciler does, so the edit it makes after a long wait shows the latest text.

With replicas, the budgets and pauses wider than one conversation are also shared with the other processes
serving the bot (:class:`~core.budgets.rate.SharedBudgets`): after its local wait the chain awaits the shared grant,
and a
429 on a shared scope pauses every replica. What other replicas spend shows up as a longer wait in
:meth:`SendChain.call`; local fairness orders this process's calls.

The budgets are asked once per call. The delivery machine's calls ask when they are due (:meth:`SendChain.grant`,
synchronous): either the call may start now, and its tokens (local buckets, its turn on the fair budgets) are taken
and handed over as a :class:`Grant` that :meth:`SendChain.call` spends (checking only that no 429 pause began
meanwhile), or nothing is taken and the :class:`Wait` says how long and whether its turn on the fair budgets is what
holds it back. Other callers (the typing clear at a run's end) hand no grant: the chain asks the budgets itself,
once, and waits.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast

from streamrelay.core.budgets.fair import ANYONE, FairQueue, Requester
from streamrelay.core.budgets.rate import SHARED_PAUSES, PauseBoard, SharedBudgets, TokenBucket
from streamrelay.core.clock import Clock
from streamrelay.core.delivery.call_slots import CallSlots
from streamrelay.core.delivery.calls import NotDone, Unknown
from streamrelay.core.errors import OwnershipLostError, RateLimitedError, RateScope, RetryAfterTooLongError
from streamrelay.core.ports import CallKind

T = TypeVar("T")

_log = logging.getLogger("streamrelay.send_chain")

KNOWN_IDS = 1000
"""How many of a conversation's latest message ids a send chain remembers."""

HOLD_S = 1.0
"""How long a turn taken ahead of its call (:meth:`SendChain.take_turn`) is kept for it, in seconds: a token not
used by then goes back to its queue (the next waiter, or the bucket)."""

MAX_RETRY_AFTER_S = 120.0
"""The longest 429 ``retry_after`` a send chain obeys by default, in seconds (``channels.NAME.max_retry_after_s``).
Above the per-minute windows platforms count in (Telegram about 20 messages a minute in a group,
https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this; Slack's tiers per minute,
https://docs.slack.dev/apis/web-api/rate-limits), so an ordinary 429 is waited out; short enough that a conversation
is never held for days by one answer (a Matrix ``retry_after_ms`` of 10^9 is 11.5 days): past it the call is the
platform refusing for now, reported, not waited for."""

TURN_SLACK_S = 0.001
"""Seconds by which a wait may exceed a caller's turn estimate and still be that turn's (clock readings differ)."""


@dataclass(frozen=True, slots=True)
class Grant:
    """The budgets' yes to one call (:meth:`SendChain.grant`): its tokens are taken; :meth:`SendChain.call` spends
    it. Attributes: ``kind`` the call's kind, ``final`` part of a finalization, ``requester`` who asked."""

    kind: CallKind
    final: bool
    requester: Requester
    pauses: int
    """How many 429 pauses had begun when it was granted (none holds it then): another one since, and the call
    waits for it."""


@dataclass(frozen=True, slots=True)
class Wait:
    """The budgets' not yet (:meth:`SendChain.grant`): nothing was taken.

    Attributes:
        seconds: until the call could start (an estimate when others wait on the fair budgets), > 0.
        turn: its turn on the fair budgets is what holds it back (:meth:`SendChain.turn_decides`): wait in their
            queues (:meth:`SendChain.take_turn`) rather than sleep, since a turn comes only to those who queue.
    """

    seconds: float
    turn: bool


@dataclass(frozen=True, slots=True)
class ChainMemo:
    """What an idle conversation's send chain leaves behind (:meth:`SendChain.memo`), so a later run there settles
    its creates as this one would: ``last_message_id`` and the ``known`` ids (oldest first). A few hundred bytes
    instead of the chain (its lock, per-kind budget tables, dicts: about 1.5 KB)."""

    last_message_id: str | None
    known: tuple[str, ...]


class SendChain:
    """Serializes calls for one conversation (a chat, a channel, a thread).

    Args:
        clock: the injected clock.
        buckets: rate budgets this conversation draws from, e.g. ``[per_chat]``, polled first come first served
            (a bucket object may appear in several chains); each applies to the call kinds it lists.
        fair: budgets shared with other conversations and served in fair order, e.g. the bot's (each queue's
            bucket applies to the call kinds it lists); awaited after ``buckets`` and the pauses.
        pauses: the bot's shared 429 pauses (a private board when not given).
        shared: budgets and pauses shared with the bot's other replicas (None: this process is alone).
        guard: asked right before every call (after every wait): False when this process may no longer act for
            the conversation (replicas: its partition's lease may have lapsed, e.g. the process was paused): the
            call is not made and :class:`~core.errors.OwnershipLostError` is raised. None: always allowed.
        max_retry_after_s: the longest 429 ``retry_after`` obeyed (seconds, > 0); a longer one pauses nothing and the
            call's outcome is a :class:`~core.errors.RetryAfterTooLongError` (module docstring).
        call_slots: the channel's call slots (:mod:`core.delivery.call_slots`), shared by its chains; None: none.
    """

    __slots__ = (
        "_buckets",
        "_buckets_of",
        "_clock",
        "_fair",
        "_fair_of",
        "_guard",
        "_held",
        "_known",
        "_lock",
        "_noted",
        "_pauses",
        "_pauses_begun",
        "_shared",
        "call_slots",
        "last_message_id",
        "max_retry_after_s",
        "paused_until",
    )

    def __init__(
        self,
        clock: Clock,
        buckets: Sequence[TokenBucket] = (),
        pauses: PauseBoard | None = None,
        *,
        fair: Sequence[FairQueue] = (),
        shared: SharedBudgets | None = None,
        guard: Callable[[], bool] | None = None,
        max_retry_after_s: float = MAX_RETRY_AFTER_S,
        call_slots: CallSlots | None = None,
    ) -> None:
        self._clock = clock
        self.call_slots = call_slots
        """The channel's call slots (one set per bot, shared by its conversations' chains:
        :mod:`core.delivery.call_slots`), one taken by the conversation's delivery loop before a call is planned; None:
        none."""
        self.max_retry_after_s = max_retry_after_s
        self._guard = guard
        self._buckets = list(buckets)
        self._fair = list(fair)
        self._buckets_of: dict[CallKind, list[TokenBucket]] = {}
        self._fair_of: dict[CallKind, list[FairQueue]] = {}
        """The buckets and fair budgets that apply to each call kind (found once)."""
        self._held: dict[tuple[Requester, FairQueue], float] = {}
        self._pauses = pauses if pauses is not None else PauseBoard()
        self._shared = shared
        self._lock = asyncio.Lock()
        self.paused_until = 0.0
        self._pauses_begun = 0
        self.last_message_id: str | None = None
        """The newest message id acknowledged in this conversation (by any run): a create whose outcome is
        unknown stored its message, if at all, after it (Telegram ids only grow)."""
        self._known: OrderedDict[str, None] = OrderedDict()
        self._noted: list[str] = []
        """Ids that became known since :meth:`take_noted` last emptied it (the executor's, around one outcome)."""

    def note_message(self, message_id: str, *, newest: bool = True) -> None:
        """Remember a message of this sidecar in this conversation (``newest``: it was just acknowledged)."""
        if message_id not in self._known and len(self._noted) < KNOWN_IDS:
            self._noted.append(message_id)
        self._known[message_id] = None
        self._known.move_to_end(message_id)
        while len(self._known) > KNOWN_IDS:
            self._known.popitem(last=False)
        if newest or self.last_message_id is None:
            self.last_message_id = message_id

    def take_noted(self) -> list[str]:
        """The ids that became known since the last call (oldest first), and start afresh: O(ids noted)."""
        noted, self._noted = self._noted, []
        return noted

    def forget(self, message_ids: Iterable[str]) -> None:
        """Forget ``message_ids`` as known (they may be probed again): the ledger failed to record the outcome
        that named them, so a resumed run settles their create again and must be able to find them. The newest
        id stays ``last_message_id`` (Telegram ids only grow: a later create is newer either way)."""
        for message_id in message_ids:
            self._known.pop(message_id, None)

    def at_rest(self) -> bool:
        """True when nothing but its message ids needs the chain: no call in it, no turn held on a fair budget, no
        429 pause of its own still running (ids :meth:`take_noted` would give belong to a call's outcome: with no
        call in it, nobody takes them)."""
        return not self._lock.locked() and not self._held and self.pause_remaining() == 0

    def memo(self) -> ChainMemo:
        """What the chain knows that outlives it while it is at rest (:meth:`at_rest`): its message ids."""
        return ChainMemo(self.last_message_id, tuple(self._known))

    def restore(self, memo: ChainMemo) -> None:
        """Take back what :meth:`memo` kept (a new chain of the same conversation, before its first call)."""
        self.last_message_id = memo.last_message_id
        self._known = OrderedDict.fromkeys(memo.known)

    def known_ids(self) -> frozenset[str]:
        """Message ids of this sidecar in this conversation (the latest :data:`KNOWN_IDS`): never probed."""
        return frozenset(self._known)

    def pause_remaining(self) -> float:
        """Seconds left of this conversation's 429 pause (0.0 when not paused)."""
        return max(0.0, self.paused_until - self._clock.now())

    def _applicable(self, kind: CallKind) -> list[TokenBucket]:
        buckets = self._buckets_of.get(kind)
        if buckets is None:
            buckets = self._buckets_of[kind] = [b for b in self._buckets if kind in b.calls]
        return buckets

    def _fair_for(self, kind: CallKind) -> list[FairQueue]:
        queues = self._fair_of.get(kind)
        if queues is None:
            queues = self._fair_of[kind] = [q for q in self._fair if kind in q.bucket.calls]
        return queues

    def ready_in(self, kind: CallKind = CallKind.SEND, *, final: bool = False, requester: Requester = ANYONE) -> float:
        """Seconds until a call of ``kind`` by ``requester`` could start: 429 pauses, rate budgets and its turn on
        the shared budgets (:meth:`turn_in`), 0.0 when ready. A preview (``final=False``) leaves finals their
        tokens first."""
        return max(self._local_wait(kind, final), self.turn_in(kind, final=final, requester=requester))

    def _local_wait(self, kind: CallKind, final: bool) -> float:
        now = self._clock.now()
        wait = max(self.pause_remaining(), self._pauses.remaining(kind, now))
        for bucket in self._applicable(kind):
            wait = max(wait, bucket.delay(now, final=final))
        return wait

    def turn_in(self, kind: CallKind = CallKind.SEND, *, final: bool = False, requester: Requester = ANYONE) -> float:
        """Seconds until ``requester``'s turn on the fair budgets for a call of ``kind``: its place in their fair
        order divided by their rate (:meth:`FairQueue.estimate <core.budgets.fair.FairQueue.estimate>`), 0.0 when a
        token is
        free for it now or its turn is taken (:meth:`take_turn`)."""
        self._expire()
        wait = 0.0
        for queue in self._fair_for(kind):
            if (requester, queue) not in self._held:
                wait = max(wait, queue.estimate(requester, final=final))
        return wait

    def grant(self, kind: CallKind, *, final: bool = False, requester: Requester = ANYONE) -> Grant | Wait:
        """The one ask of the budgets for a call of ``kind`` that is due now: each budget is consulted once.

        When no 429 pause holds it, every local bucket has a token and its turn on each fair budget has come (the
        turn it took, :meth:`take_turn`, or a token free with nobody waiting), the tokens are taken and a
        :class:`Grant` returned, to be spent by :meth:`call` right away; else a :class:`Wait`, nothing taken. A
        preview (``final=False``) leaves queued finals their tokens first."""
        if self._held:
            self._expire()
        now = self._clock.now()
        buckets = self._applicable(kind)
        wait = max(0.0, self.paused_until - now, self._pauses.remaining(kind, now))
        for bucket in buckets:
            wait = max(wait, bucket.delay(now, final=final))
        queues = self._fair_for(kind)
        if wait > 0:
            turn = 0.0
            for queue in queues:
                if (requester, queue) in self._held:
                    # A turn it waited for stays its own through this wait (a 429 pause, its chat's bucket): let go
                    # after HOLD_S, it would queue again at the back, and again after the next pause (starved).
                    self._held[(requester, queue)] = now + wait
                else:
                    turn = max(turn, queue.estimate(requester, final=final))
            return Wait(max(wait, turn), turn > 0 and turn >= wait - TURN_SLACK_S)
        taken: list[FairQueue] = []
        for queue in queues:
            if self._held.pop((requester, queue), None) is not None:
                taken.append(queue)
                continue
            turn = queue.try_take(requester, final=final)
            if turn > 0:
                for other in taken:  # all or nothing: the tokens taken go on
                    other.refund()
                return Wait(turn, True)
            taken.append(queue)
        for bucket in buckets:
            bucket.take(now)
        return Grant(kind, final, requester, self._pauses_begun + self._pauses.begun)

    def turn_decides(
        self, kind: CallKind, wait_s: float, *, final: bool = False, requester: Requester = ANYONE
    ) -> bool:
        """True when ``requester``'s turn on the fair budgets is what holds back its call of ``kind`` due in
        ``wait_s`` seconds (its :meth:`turn_in` is about that long): the caller should :meth:`take_turn` (join the
        queue) rather than sleep, since a turn comes only to those who wait in the queue."""
        turn_s = self.turn_in(kind, final=final, requester=requester)
        return turn_s > 0 and turn_s >= wait_s - TURN_SLACK_S

    async def take_turn(
        self, kind: CallKind = CallKind.SEND, *, final: bool = False, requester: Requester = ANYONE
    ) -> None:
        """Wait in the fair budgets' queues until ``requester``'s turn and keep the tokens for its next call of
        ``kind`` on this chain (made within :data:`HOLD_S`), so the caller decides what to send once it may send.

        Raises:
            asyncio.CancelledError: the caller was cancelled; it left the queues (a token it holds already goes back
                when the chain is next used past :data:`HOLD_S`).
        """
        self._expire()
        for queue in self._fair_for(kind):
            if (requester, queue) not in self._held:
                await queue.acquire(requester, final=final)
                self._held[(requester, queue)] = self._clock.now()

    def promote(self, requester: Requester) -> None:
        """``requester``'s run is finalizing: its calls and turns waiting on the fair budgets go as finals."""
        for queue in self._fair:
            queue.promote(requester)

    def _expire(self) -> None:
        now = self._clock.now()
        for key, at in list(self._held.items()):
            if now - at > HOLD_S:
                del self._held[key]
                key[1].refund()

    async def _take_fair(self, kind: CallKind, final: bool, requester: Requester) -> None:
        """Spend the turn ``requester`` holds on each fair budget for ``kind``, or wait for one."""
        self._expire()
        granted: list[FairQueue] = []
        try:
            for queue in self._fair_for(kind):
                if self._held.pop((requester, queue), None) is None:
                    await queue.acquire(requester, final=final)
                granted.append(queue)
        except BaseException:
            for queue in granted:  # cancelled half way: the tokens go on
                queue.refund()
            raise

    async def call(
        self,
        fn: Callable[[], Awaitable[T]],
        kind: CallKind = CallKind.SEND,
        *,
        final: bool = False,
        requester: Requester = ANYONE,
        grant: Grant | None = None,
    ) -> T:
        """Run one platform call of ``kind`` when the chain is free, not paused and within budget; its outcome comes
        back as a value (:mod:`core.delivery.calls`). Callers go through the conversation's executor
        (:class:`core.delivery.executor.Executor`), the one place that makes calls.

        The local budgets and pauses first, then the fair budgets (the turn ``requester`` took, or a wait for
        one), then (with replicas) the shared ones: the call starts once
        :meth:`SharedBudgets.acquire <core.budgets.rate.SharedBudgets.acquire>` granted it. A 429 (a
        ``RateLimitedError``, as an outcome value or raised) pauses its scope for ``retry_after_s`` (on every replica
        when the scope is wider than this conversation); one longer than ``max_retry_after_s`` pauses nothing and
        comes back as a :class:`~core.errors.RetryAfterTooLongError` (not done: refused for now).

        Args:
            fn: the single-attempt platform call (the executor's: ``adapter.perform``, whose outcome is a value).
            kind: what it is, for the budgets and pauses that apply.
            final: part of a run's finalization: goes before previews when a shared budget is short.
            requester: who asks (its client and run): its place in the fair budgets' order.
            grant: the budgets' yes, asked when the call was due (:meth:`grant`): its tokens are spent, the budgets
                are not asked again; only a 429 pause that began meanwhile is waited for. None: asked here.

        Raises:
            OwnershipLostError: this replica may no longer act for the conversation (the call is not made).
            What the shared store raises when it cannot be reached (``fn`` is not called then). What ``fn`` raises.
        """
        async with self._lock:
            if grant is not None:
                if grant.pauses != self._pauses_begun + self._pauses.begun:
                    await self._wait_paused(kind)  # a 429 pause began since the grant
            else:
                await self._wait_local(kind, final)
                if self._fair:
                    await self._take_fair(kind, final, requester)
                    await self._wait_local(kind, final)  # a 429 pause may have begun meanwhile
                now = self._clock.now()
                for bucket in self._applicable(kind):
                    bucket.take(now)
            if self._shared is not None:
                await self._shared.acquire(kind, final=final)
            if self._guard is not None and not self._guard():
                raise OwnershipLostError("this replica may no longer act for the conversation: call not made")
            try:
                result = await fn()
            except RateLimitedError as exc:
                if exc.retry_after_s > self.max_retry_after_s:
                    raise RetryAfterTooLongError(exc, self.max_retry_after_s) from exc
                await self._pause(exc, kind)
                raise
            if isinstance(result, NotDone | Unknown) and isinstance(result.error, RateLimitedError):
                limited = result.error
                if limited.retry_after_s > self.max_retry_after_s:
                    return cast(T, NotDone(RetryAfterTooLongError(limited, self.max_retry_after_s)))
                await self._pause(limited, kind)
            return result

    @staticmethod
    def _pause_fair(queues: Sequence[FairQueue], until: float) -> None:
        """A 429 on the bot's scope or a method's: the bot's budgets it covers grant nothing until ``until``.

        Their queues would else go on granting turns at the budget's rate through the pause, each conversation
        would keep its turn for the pause's end (:meth:`grant`), and they would all call at that moment: Slack
        counts chat.update per workspace over a minute (https://docs.slack.dev/apis/web-api/rate-limits), so a
        pause of P seconds sent P x rate edits at once on top of a full minute's pace, and earned a longer 429."""
        for queue in queues:
            queue.bucket.pause(until)

    async def _wait_paused(self, kind: CallKind) -> None:
        while (wait := max(self.pause_remaining(), self._pauses.remaining(kind, self._clock.now()))) > 0:
            await self._clock.sleep(wait)

    async def _wait_local(self, kind: CallKind, final: bool) -> None:
        buckets = self._applicable(kind)
        if final:
            for bucket in buckets:
                bucket.finals_waiting += 1
        try:
            while (wait := self._local_wait(kind, final)) > 0:
                await self._clock.sleep(wait)
        finally:
            if final:
                for bucket in buckets:
                    bucket.finals_waiting -= 1

    async def _pause(self, exc: RateLimitedError, kind: CallKind) -> None:
        pause_s = exc.retry_after_s
        until = self._clock.now() + pause_s
        if exc.scope is RateScope.BOT:
            self._pauses.pause_bot(until)
            self._pause_fair(self._fair, until)
        elif exc.scope is RateScope.METHOD:
            self._pauses.pause_kind(kind, until)
            self._pause_fair(self._fair_for(kind), until)
        else:
            self.paused_until = max(self.paused_until, until)
            self._pauses_begun += 1
        if self._shared is None or exc.scope not in SHARED_PAUSES:
            return
        try:
            await self._shared.pause(kind, exc.scope, pause_s)
        except Exception:  # the 429 is what the caller must see; this replica keeps its own pause
            _log.warning("a %s 429 pause of %.3f s could not be shared", exc.scope, pause_s, exc_info=True)
