"""The send chain: per conversation, one platform call at a time, in order, within the rate budgets.

A 429 (``RateLimitedError``) pauses its scope until its ``retry_after`` has passed: this conversation
(calls for the same chat from other runs wait too), one kind of call bot-wide, or the whole bot (the
:class:`~core.rate.PauseBoard` the bot's chains share). The chain never retries by itself: callers (the
reconciler) decide, so pending preview edits can merge into one.

With replicas, the budgets and pauses wider than one conversation are also shared with the other processes
serving the bot (:class:`~core.rate.SharedBudgets`): after its local wait the chain awaits the shared grant, and a
429 on a shared scope pauses every replica. The local buckets stay the planner's estimate (``ready_in`` is
synchronous): what other replicas spend shows up as a longer wait in :meth:`SendChain.call`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from core.clock import Clock
from core.errors import OwnershipLostError, RateLimitedError, RateScope
from core.ports import CallKind
from core.rate import SHARED_PAUSES, PauseBoard, SharedBudgets, TokenBucket

T = TypeVar("T")

_log = logging.getLogger("streamrelay.send_chain")

KNOWN_IDS = 1000
"""How many of a conversation's latest message ids a send chain remembers."""


class SendChain:
    """Serializes calls for one conversation (a chat, a channel, a thread).

    Args:
        clock: the injected clock.
        buckets: rate budgets this conversation draws from, e.g. ``[per_chat, per_bot]`` (shared
            bucket objects may appear in several chains); each applies to the call kinds it lists.
        pauses: the bot's shared 429 pauses (a private board when not given).
        shared: budgets and pauses shared with the bot's other replicas (None: this process is alone).
        guard: asked right before every call (after every wait): False when this process may no longer act for
            the conversation (replicas: its partition's lease may have lapsed, e.g. the process was paused): the
            call is not made and :class:`~core.errors.OwnershipLostError` is raised. None: always allowed.
    """

    def __init__(
        self,
        clock: Clock,
        buckets: Sequence[TokenBucket] = (),
        pauses: PauseBoard | None = None,
        *,
        shared: SharedBudgets | None = None,
        guard: Callable[[], bool] | None = None,
    ) -> None:
        self._clock = clock
        self._guard = guard
        self._buckets = list(buckets)
        self._pauses = pauses if pauses is not None else PauseBoard()
        self._shared = shared
        self._lock = asyncio.Lock()
        self.paused_until = 0.0
        self.last_message_id: str | None = None
        """The newest message id acknowledged in this conversation (by any run): a create whose outcome is
        unknown stored its message, if at all, after it (Telegram ids only grow)."""
        self._known: OrderedDict[str, None] = OrderedDict()

    def note_message(self, message_id: str, *, newest: bool = True) -> None:
        """Remember a message of this sidecar in this conversation (``newest``: it was just acknowledged)."""
        self._known[message_id] = None
        self._known.move_to_end(message_id)
        while len(self._known) > KNOWN_IDS:
            self._known.popitem(last=False)
        if newest or self.last_message_id is None:
            self.last_message_id = message_id

    def known_ids(self) -> frozenset[str]:
        """Message ids of this sidecar in this conversation (the latest :data:`KNOWN_IDS`): never probed."""
        return frozenset(self._known)

    def pause_remaining(self) -> float:
        """Seconds left of this conversation's 429 pause (0.0 when not paused)."""
        return max(0.0, self.paused_until - self._clock.now())

    def _applicable(self, kind: CallKind) -> list[TokenBucket]:
        return [b for b in self._buckets if kind in b.calls]

    def ready_in(self, kind: CallKind = CallKind.SEND, *, final: bool = False) -> float:
        """Seconds until a call of ``kind`` could start: 429 pauses and rate budgets (0.0 when ready).
        A preview (``final=False``) leaves queued finals their tokens first."""
        now = self._clock.now()
        wait = max(self.pause_remaining(), self._pauses.remaining(kind, now))
        for bucket in self._applicable(kind):
            wait = max(wait, bucket.delay(now, final=final))
        return wait

    async def call(self, fn: Callable[[], Awaitable[T]], kind: CallKind = CallKind.SEND, *, final: bool = False) -> T:
        """Run one platform call of ``kind`` when the chain is free, not paused and within budget.

        The local budgets and pauses first, then (with replicas) the shared ones: the call starts once
        :meth:`SharedBudgets.acquire <core.rate.SharedBudgets.acquire>` granted it.

        Args:
            fn: the single-attempt platform call.
            kind: what it is, for the budgets and pauses that apply.
            final: part of a run's finalization: goes before previews when a shared budget is short.

        Raises:
            Whatever ``fn`` raises; a ``RateLimitedError`` also pauses its scope for ``retry_after_s`` (on every
            replica when the scope is wider than this conversation). What the shared store raises when it cannot
            be reached (``fn`` is not called then).
        """
        async with self._lock:
            await self._wait_local(kind, final)
            now = self._clock.now()
            for bucket in self._applicable(kind):
                bucket.take(now)
            if self._shared is not None:
                await self._shared.acquire(kind, final=final)
            if self._guard is not None and not self._guard():
                raise OwnershipLostError("this replica may no longer act for the conversation: call not made")
            try:
                return await fn()
            except RateLimitedError as exc:
                await self._pause(exc, kind)
                raise

    async def _wait_local(self, kind: CallKind, final: bool) -> None:
        buckets = self._applicable(kind)
        if final:
            for bucket in buckets:
                bucket.finals_waiting += 1
        try:
            while (wait := self.ready_in(kind, final=final)) > 0:
                await self._clock.sleep(wait)
        finally:
            if final:
                for bucket in buckets:
                    bucket.finals_waiting -= 1

    async def _pause(self, exc: RateLimitedError, kind: CallKind) -> None:
        until = self._clock.now() + exc.retry_after_s
        if exc.scope is RateScope.BOT:
            self._pauses.pause_bot(until)
        elif exc.scope is RateScope.METHOD:
            self._pauses.pause_kind(kind, until)
        else:
            self.paused_until = max(self.paused_until, until)
        if self._shared is None or exc.scope not in SHARED_PAUSES:
            return
        try:
            await self._shared.pause(kind, exc.scope, exc.retry_after_s)
        except Exception:  # the 429 is what the caller must see; this replica keeps its own pause
            _log.warning("a %s 429 pause of %.3f s could not be shared", exc.scope, exc.retry_after_s, exc_info=True)
