"""Fair service of a rate budget shared by many conversations: who gets the next token.

A bot's budget (Telegram: about 30 messages per second per bot,
https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this; Slack: a method's tier per
workspace, https://docs.slack.dev/apis/web-api/rate-limits; Discord: 50 requests per second per bot,
https://discord.com/developers/docs/topics/rate-limits) is drawn by every conversation of the bot. When the callers
poll the bucket and sleep, whoever wakes first takes the token: a client with N runs waiting gets N/(N+1) of the
budget, and another client's final answer waits behind its whole queue. A :class:`FairQueue` grants the bucket's
tokens in a fair order instead:

1. finals before previews (a run's finalization goes first when the budget is short, DESIGN §4);
2. then round-robin across clients (:mod:`core.ingest.clients`: a run key ``client/run``);
3. then round-robin across a client's runs;
4. first come, first served within a run.

It is work-conserving: whenever a token is available and someone waits, it is granted (a client alone gets the
whole budget). Times are clock seconds of the injected :class:`~core.clock.Clock`.

::

    queue = FairQueue(TokenBucket(rate_per_s=30, burst=30), clock)
    await queue.acquire(Requester.of("acme/run-7"), final=True)   # returns when granted: make the call now
    queue.estimate(Requester.of("acme/run-8"), final=False)       # seconds a newcomer would wait (synchronous)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict, deque
from dataclasses import dataclass

from streamrelay.core.budgets.rate import TokenBucket
from streamrelay.core.clock import Clock
from streamrelay.core.ingest.clients import DEFAULT_CLIENT, split_key


@dataclass(frozen=True, slots=True)
class Requester:
    """Who asks for a token: a client and one of its runs (a sub-agent's thread asks as its run).

    Attributes:
        client: the client's name (:data:`core.ingest.clients.DEFAULT_CLIENT` for the single service token).
        run: the run id within the client ("" when the caller names no run).
    """

    client: str = DEFAULT_CLIENT
    run: str = ""

    @classmethod
    def of(cls, key: str) -> Requester:
        """The requester of a core run key (:func:`core.ingest.clients.run_key`: ``client/run``, or a default client's
        id)."""
        client, run = split_key(key)
        return cls(client, run)


ANYONE = Requester()
"""The requester of a call that names none: one run of the default client."""

_SOON_S = 0.001
"""The least wait :meth:`FairQueue.try_take` reports when it cannot grant at once (others wait, or no token)."""


class _Waiter:
    __slots__ = ("final", "future", "requester")

    def __init__(self, requester: Requester, final: bool, future: asyncio.Future[None]) -> None:
        self.requester = requester
        self.final = final
        self.future = future


class _Tier:
    """The waiters of one priority (finals, or previews): a ring of clients, each a ring of runs, each a FIFO."""

    def __init__(self) -> None:
        self._clients: OrderedDict[str, OrderedDict[str, deque[_Waiter]]] = OrderedDict()
        self.size = 0

    def push(self, waiter: _Waiter) -> None:
        """Queue ``waiter`` last in its run (a new run joins its client's ring last; a new client, the ring's)."""
        runs = self._clients.setdefault(waiter.requester.client, OrderedDict())
        runs.setdefault(waiter.requester.run, deque()).append(waiter)
        self.size += 1

    def pop(self) -> _Waiter:
        """The next waiter in fair order; its run and its client move to the end of their rings."""
        client, runs = next(iter(self._clients.items()))
        run, waiters = next(iter(runs.items()))
        waiter = waiters.popleft()
        self._after_take(client, runs, run, waiters, rotate=True)
        return waiter

    def remove(self, waiter: _Waiter) -> bool:
        """Take ``waiter`` out wherever it is (cancelled, or promoted); False when it is not here."""
        runs = self._clients.get(waiter.requester.client)
        waiters = runs.get(waiter.requester.run) if runs is not None else None
        if runs is None or waiters is None or waiter not in waiters:
            return False
        waiters.remove(waiter)
        self._after_take(waiter.requester.client, runs, waiter.requester.run, waiters, rotate=False)
        return True

    def _after_take(
        self, client: str, runs: OrderedDict[str, deque[_Waiter]], run: str, waiters: deque[_Waiter], *, rotate: bool
    ) -> None:
        self.size -= 1
        if not waiters:
            del runs[run]
        elif rotate:
            runs.move_to_end(run)
        if not runs:
            del self._clients[client]
        elif rotate:
            self._clients.move_to_end(client)

    def of(self, requester: Requester) -> list[_Waiter]:
        """The waiters of ``requester``'s run, in order."""
        runs = self._clients.get(requester.client)
        return list(runs.get(requester.run, ())) if runs is not None else []

    def place(self, requester: Requester) -> int:
        """About how many grants this tier makes before a new waiter of ``requester`` (an estimate: each round of
        the client ring grants one waiter of every client, each of its client's turns one waiter of every run)."""
        runs = self._clients.get(requester.client)
        if runs is None:
            return len(self._clients)  # last in the ring: every other client is served once first
        own = runs.get(requester.run)
        turns = len(runs) if own is None else len(own) * len(runs)  # the client's turns before this one
        return min(self.size, turns * len(self._clients))


class FairQueue:
    """Grants one :class:`~core.budgets.rate.TokenBucket`'s tokens to waiting callers in fair order (see the module).

    Args:
        bucket: the shared budget (its ``finals_waiting`` is not used: the order here puts finals first).
        clock: the injected clock; the queue sleeps on it until the bucket's next token while someone waits.
    """

    def __init__(self, bucket: TokenBucket, clock: Clock) -> None:
        self.bucket = bucket
        self._clock = clock
        self._finals = _Tier()
        self._previews = _Tier()
        self._server: asyncio.Task[None] | None = None
        self.granted = 0
        """Tokens granted so far (for tests and metrics)."""

    @property
    def waiting(self) -> int:
        """Callers waiting for a token."""
        return self._finals.size + self._previews.size

    def estimate(self, requester: Requester, *, final: bool) -> float:
        """Seconds a call of ``requester`` asked now would wait for its token (0.0: granted at once).

        The wait is the caller's place in the fair order divided by the rate, after the bucket's pause if any (an
        estimate: waiters that come or leave meanwhile move it), never less than the bucket's own wait for its next
        token.
        """
        now = self._clock.now()
        delay = self.bucket.delay(now)
        if self.waiting == 0 or self.bucket.rate_per_s <= 0:
            return delay
        place = self._finals.place(requester) if final else self._finals.size + self._previews.place(requester)
        return max(delay, self.bucket.delay_for(place + 1, now))

    def try_take(self, requester: Requester, *, final: bool) -> float:
        """Spend a token at once when nobody waits and one is there (:meth:`acquire`'s fast path): 0.0; else the
        seconds ``requester`` would wait for its turn (:meth:`estimate`, never 0.0: a token is due to a waiter or to
        come), nothing taken. Synchronous: the one ask of a call that may start now
        (:meth:`core.delivery.send_chain.SendChain.grant`)."""
        now = self._clock.now()
        if self.waiting == 0 and self.bucket.delay(now) == 0:
            self.bucket.take(now)
            self.granted += 1
            return 0.0
        return max(self.estimate(requester, final=final), _SOON_S)

    async def acquire(self, requester: Requester, *, final: bool) -> None:
        """Wait for a token in fair order and spend it (returns at once when nobody waits and one is there).

        Args:
            requester: who asks (its client and run decide its place).
            final: part of a run's finalization: served before every preview.

        Raises:
            asyncio.CancelledError: the caller was cancelled; it left the queue, and a token granted to it at that
                moment went to the next waiter (or back to the bucket): none is lost.
        """
        now = self._clock.now()
        if self.waiting == 0 and self.bucket.delay(now) == 0:
            self.bucket.take(now)
            self.granted += 1
            return
        waiter = _Waiter(requester, final, asyncio.get_running_loop().create_future())
        (self._finals if final else self._previews).push(waiter)
        self._serve()
        try:
            await waiter.future
        except asyncio.CancelledError:
            if waiter.future.done() and not waiter.future.cancelled():
                self.refund()  # granted as it was cancelled: the token goes on
            else:
                self._leave(waiter)
            raise

    def promote(self, requester: Requester) -> None:
        """``requester``'s run is finalizing: its waiting previews are served as finals from now on."""
        for waiter in self._previews.of(requester):
            self._previews.remove(waiter)
            waiter.final = True
            self._finals.push(waiter)

    def refund(self) -> None:
        """Give back one token that was granted but not used: to the next waiter, else to the bucket."""
        waiter = self._next()
        if waiter is None:
            self.bucket.give_back(self._clock.now())
            return
        self.granted += 1
        waiter.future.set_result(None)

    def _next(self) -> _Waiter | None:
        """The next waiter still waiting (a cancelled one may not have left yet: it is passed over)."""
        while self.waiting:
            waiter = (self._finals if self._finals.size else self._previews).pop()
            if not waiter.future.done():
                return waiter
        return None

    def _leave(self, waiter: _Waiter) -> None:
        if not (self._finals.remove(waiter) or self._previews.remove(waiter)):
            return
        if self.waiting == 0 and self._server is not None:
            self._server.cancel()  # nobody left to serve: no task sleeps on
            self._server = None

    def _serve(self) -> None:
        if self._server is None or self._server.done():
            self._server = asyncio.get_running_loop().create_task(self._grant_loop(), name="fair-queue")

    async def _grant_loop(self) -> None:
        """While someone waits: sleep until the bucket's next token, then grant it to the next in fair order."""
        with contextlib.suppress(asyncio.CancelledError):
            while self.waiting:
                now = self._clock.now()
                wait = self.bucket.delay(now)
                if wait > 0:
                    await self._clock.sleep(wait)
                    continue
                waiter = self._next()
                if waiter is None:
                    return
                self.bucket.take(now)
                self.granted += 1
                waiter.future.set_result(None)
