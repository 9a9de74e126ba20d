"""The reconciler: drives one conversation's delivery machine, one call at a time, until the platform shows what
the slot book wants.

The run's stages decide *what* should be visible, as an ordered list of slots in a
:class:`~core.delivery.slotbook.SlotBook` (one slot = one platform message: answer parts, a status message, a
failure notice). The sans-I/O :class:`~core.delivery.machine.DeliveryMachine` decides the next call and what each
outcome means for the part; the reconciler waits until the call may start (throttle, rate budget, its turn, a
wake-up), hands it to the conversation's :class:`~core.delivery.executor.Executor` (intent in the ledger, the call
through the send chain and ``adapter.perform``, the outcome back to the machine and into the ledger) and tells the
watchers' feed. Nothing flows back up to the run.

Rules (shared/DESIGN.md §4, §5, §8):

- Preview edits are throttled: at most one call per ``throttle_s`` until finalization starts. With
  ``throttle_s == 0`` every intermediate state is sent in order while the rate budget allows it; when it does not
  (or with a throttle, or while a resumed run catches up on its journal) intermediate states merge into the latest.
- A 429 pauses the conversation (the send chain) for ``retry_after``; everything pending then merges into one.
- Every create carries a delivery id and is recorded with it *before* the call. A create whose outcome is unknown
  (a timeout, a 5xx, a reset, a kill with the call in flight) is never blindly sent again: it is settled with the
  platform (:meth:`~core.ports.ChannelAdapter.settle_send`): found (it landed), not sent (made again), or
  unknown: then the part stays uncertain when its text is what that create sent, else its text goes on in a new
  message (the uncertain one is reported: a duplicate is possible). The final is never dropped for it.
- Edits and deletes are idempotent: retried with backoff through an outage, for up to ``retry_window_s``.
- "message is not modified" is success. An edit that would render the same text is not sent.
- A message the platform no longer lets us edit is frozen: it keeps what it shows and a new part continues from
  where it ended, never repeating it.
- A message rejected for its formatting is sent again with the markup removed (``degraded``).
- An edit of a message that is gone (deleted in the chat) sends the part anew; a delete of one is done.
- Native streaming: see :class:`~core.ports.NativeStreaming`; a platform that refuses it turns it off for the run.
- When a budget is short, finalization's calls go before other runs' previews (``final=True``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from streamrelay.core.budgets.fair import Requester
from streamrelay.core.clock import Clock
from streamrelay.core.delivery.calls import CallResult, Done
from streamrelay.core.delivery.executor import Executor
from streamrelay.core.delivery.machine import DeliveryMachine
from streamrelay.core.delivery.send_chain import Grant, SendChain, Wait
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import Op, OpKind, Outcome, Slot, delivery_fact, same_render
from streamrelay.core.errors import OwnershipLostError
from streamrelay.core.events import Target
from streamrelay.core.ports import CallKind, ChannelAdapter, NativeStreaming, StopControl, StreamStatus
from streamrelay.core.records.ledger import Ledger, PartRecord
from streamrelay.core.records.report import PartState
from streamrelay.core.tasks import stop
from streamrelay.core.text.buffer import Pinned
from streamrelay.core.wake import Wake

_log = logging.getLogger("streamrelay.delivery")

_QUIET = frozenset({Outcome.ACK, Outcome.RATE_LIMITED})
"""Outcomes not worth a log line (429s show in the report and the live page; acks are the normal case)."""
_GIVEN_UP = frozenset({Outcome.FAILED, Outcome.UNKNOWN})
"""Outcomes that give a part up (it is not sent again; the report shows it failed, or possibly twice): a warning."""
_SHOWS_TEXT = frozenset(
    {OpKind.SEND, OpKind.EDIT, OpKind.STREAM_START, OpKind.STREAM_UPDATE, OpKind.STREAM_REFRESH, OpKind.STREAM_FINISH}
)
"""The calls whose done makes the part show the call's own text."""

__all__ = ["DeliveryFeed", "Reconciler", "Slot", "same_render"]

DeliveryFeed = Callable[[dict[str, object]], None]
"""Where each call's outcome goes as a fact for watchers (:func:`core.delivery.slots.delivery_fact`): downstream,
to the run monitor; never back into the run."""


class Reconciler:
    """Drives one conversation's slot book to its desired texts (module docstring).

    Args:
        book: the conversation's slot book (its ``run`` is the ledger key).
        adapter: the channel adapter (its one entrance, :meth:`~core.ports.ChannelAdapter.perform`).
        chain: the conversation's send chain.
        target: where the messages go.
        ledger: records intents and outcomes.
        clock: injected clock.
        retry_window_s: how long calls that are safe to retry are retried through an outage (seconds).
        native: the adapter's native streaming, when the run streams answers natively (None: preview).
        typing_every_s: while the run is open and nothing new became visible for this many seconds, show a
            typing indicator (at the start too); None: never. Never during finalization or after it.
        exclusive_bot: the bot token is the sidecar's alone (Telegram can then settle by probing ids).
        feed: told every call's outcome (see :data:`DeliveryFeed`); None: nobody watches.
        requester: who asks for the bot's shared budgets (its client and run; a thread asks as its run); None: the
            book's run key (:meth:`Requester.of <core.budgets.fair.Requester.of>`).
        control: the Stop control the newest live message carries (:mod:`core.delivery.controls`), or None.
    """

    __slots__ = (
        "_chain",
        "_clock",
        "_closed",
        "_feed",
        "_ledger",
        "_slotted",
        "_target",
        "_task",
        "_watchers",
        "book",
        "executor",
        "machine",
        "on_lost",
        "planner",
        "requester",
        "run",
    )

    def __init__(
        self,
        *,
        book: SlotBook,
        adapter: ChannelAdapter,
        chain: SendChain,
        target: Target,
        ledger: Ledger,
        clock: Clock,
        retry_window_s: float = 600.0,
        native: NativeStreaming | None = None,
        typing_every_s: float | None = None,
        exclusive_bot: bool = False,
        feed: DeliveryFeed | None = None,
        requester: Requester | None = None,
        control: StopControl | None = None,
    ) -> None:
        self.book = book
        self.requester = requester if requester is not None else Requester.of(book.run)
        self.run = book.run
        self._chain = chain
        self._target = target
        self._ledger = ledger
        self._clock = clock
        self._closed = False
        self._slotted = False
        """The delivery loop holds one of the channel's call slots (:meth:`_take_call_slot`)."""
        self._task: asyncio.Task[None] | None = None
        self.on_lost: list[Callable[[], None]] = []
        """Told when the loop stopped because the store could not be written or ownership was lost
        (:class:`core.errors.OwnershipLostError`): the conversation's runs stop and resume from the journal, rather
        than wait for a loop that is gone."""
        self._feed = feed
        self.executor = Executor(adapter=adapter, chain=chain, ledger=ledger, run=book.run, requester=self.requester)
        """The conversation's one place for platform calls (the run's typing clear and Stop moves use it too)."""
        self.machine = DeliveryMachine(
            book=book,
            chain=chain,
            target=target,
            clock=clock,
            retry_window_s=retry_window_s,
            native=native is not None,
            stream_refresh_s=native.stream_refresh_s if native is not None else None,
            exclusive_bot=exclusive_bot,
            requester=self.requester,
            typing_every_s=typing_every_s,
            control=control,
            finish_creates=native is not None and native.finish_creates,
            finish_repeats=native is not None and native.finish_repeats,
            settles_start=native is not None and native.settles_start,
            status_chars=native.status_chars if isinstance(native, StreamStatus) else None,
        )
        self.planner = self.machine.planner
        self._watchers: list[Wake] = []
        """Tasks waiting on a call's outcome (:meth:`open_thread`): woken after every call."""

    @property
    def retry_window_s(self) -> float:
        """How long calls safe to retry are retried through an outage (seconds): the machine's."""
        return self.machine.retry_window_s

    @retry_window_s.setter
    def retry_window_s(self, seconds: float) -> None:
        self.machine.retry_window_s = seconds

    @property
    def finalizing(self) -> bool:
        return self.book.finalizing

    def restore(self, records: list[PartRecord]) -> None:
        """Load the parts the ledger recorded before a restart into the book (:meth:`SlotBook.restore`), and note
        their messages in the send chain (known ids are never probed)."""
        self.book.restore(records)
        self.machine.restored()
        for record in records:
            if record.slot >= 0 and record.message_id is not None and not record.streaming:
                self._chain.note_message(record.message_id, newest=False)

    def _tell_watchers(self) -> None:
        for wake in self._watchers:
            wake.set()

    # --- running ----------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the delivery loop as a task."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=f"reconciler:{self.run}")

    @property
    def typing_calls(self) -> int:
        """How many typing indicators this conversation showed."""
        return self.machine.typing_calls

    def stop_typing(self) -> None:
        """No typing indicator from now on (the run is ending)."""
        self.machine.typing_every_s = None

    async def finish(self) -> None:
        """Finalization: drop the throttle, deliver everything, and stop the loop."""
        self.book.finalizing = True
        self._chain.promote(self.requester)  # a turn it waits for now goes as a final's
        self._closed = True
        for slot in self.book.slots:
            if slot.retry_at_finish:  # an outage during the stream must not freeze the final answer
                slot.retry_at_finish, slot.attempts, slot.retry_at = False, 0, 0.0
                slot.failing_since = None
                slot.state, slot.error = PartState.PENDING, None
        self.book.changed.set()
        self.book.urgent.set()
        self.start()
        assert self._task is not None
        await self._task
        # Parts settled without a call (skipped, acknowledged by "not modified" shortcuts) are written too, so a
        # report rebuilt from the ledger says what this one says.
        book = self.book
        records = [*book.take_unsaved(), *(book.record(slot) for slot in book.slots)]
        await asyncio.gather(*(self._ledger.save_part(record) for record in records))

    async def cancel(self) -> None:
        """Stop the delivery loop for sure (:func:`core.tasks.stop`: a cancellation Python 3.11 drops is repeated)."""
        if self._task is not None:
            await stop(self._task)

    async def _loop(self) -> None:
        try:
            await self._deliver()
        except OwnershipLostError:
            for tell in self.on_lost:
                tell()
            raise
        finally:
            self.book.changed.close()
            self.book.urgent.close()
            self._tell_watchers()

    async def _deliver(self) -> None:
        machine, chain, clock = self.machine, self._chain, self._clock
        try:
            while True:
                op = machine.next_op()
                if op is None:
                    self._let_go()
                    if self._closed:
                        return
                    await self._idle()
                    continue
                delay = op.not_before - clock.now()
                if delay > 0:  # its retry backoff or the preview throttle
                    self._let_go()
                    await self._sleep_or_wake(delay, throttled=self._throttled(op))
                    continue
                if not self._slotted and not await self._take_call_slot():
                    continue  # waited for a call slot: plan the call again, with the latest text
                if op.slot.stale and op.kind not in (OpKind.SETTLE, OpKind.DELETE_STRAY) and op.kind.journaled:
                    self.book.refresh(op.slot)  # read the live text now that the call is due
                    continue
                if op.kind.journaled and machine.shortcut(op):
                    continue  # no call needed: nothing to ask the budgets for
                kind, final = op.kind.call_kind, self.finalizing
                ask = chain.grant(kind, final=final, requester=self.requester)  # the budgets' one ask for this call
                if isinstance(ask, Wait):
                    self._let_go()  # a slot is for calls that may start: not held through a budget's wait
                    machine.held_back(op)
                    if ask.turn:
                        # only its turn on the bot's budget holds the call back: wait for it in fair order, then plan
                        # again
                        await chain.take_turn(kind, final=final, requester=self.requester)
                    else:
                        await self._sleep_or_wake(ask.seconds)
                    continue
                await self._perform(op, ask)
                self._let_go()  # one call a slot: this conversation's next call queues behind the channel's waiters
        finally:
            self._let_go()

    async def _take_call_slot(self) -> bool:
        """Take one of the channel's call slots (:mod:`core.delivery.call_slots`) for the call that is due: True when
        taken at once (none kept: True), False after a wait (as many of the channel's calls were under way as its
        adapter has connections: this one waited before its text and request were built, as one small waiter, and is
        planned again)."""
        slots = self._chain.call_slots
        if slots is None:
            return True
        if slots.try_take():
            self._slotted = True
            return True
        await slots.take(final=self.finalizing)
        self._slotted = True
        return False

    def _let_go(self) -> None:
        """Give back the call slot this loop holds, if it holds one."""
        if self._slotted:
            self._slotted = False
            slots = self._chain.call_slots
            assert slots is not None
            slots.give()

    async def _idle(self) -> None:
        """No part needs a call: the status line on the native stream when it is due, else the typing indicator
        when it is, else wait for a change."""
        machine, chain, clock = self.machine, self._chain, self._clock
        if machine.status_due():
            await self._status_line()
            return
        typing_at = machine.typing_due()
        if typing_at is None:
            self.book.changed.clear()
            await self.book.changed.wait()
        elif typing_at > clock.now():
            await self._sleep_or_wake(typing_at - clock.now())
        else:
            ask = chain.grant(CallKind.TYPING, requester=self.requester)
            if (typing := machine.typing_call(isinstance(ask, Grant))) is not None:
                # one attempt, never in the ledger: it is not a message
                await self.executor.perform(typing, grant=ask if isinstance(ask, Grant) else None)

    async def _status_line(self) -> None:
        """The run's status line on the native stream (:meth:`DeliveryMachine.status_due`), when no part needs a call:
        paced by the stream's budget like its updates; one attempt, never in the ledger; any outcome but done and
        a 429 drops it (:data:`~core.delivery.machine.STATUS_RULES`)."""
        machine, chain = self.machine, self._chain
        ask = chain.grant(CallKind.STREAM_UPDATE, requester=self.requester)
        if isinstance(ask, Wait):
            if ask.turn:
                await chain.take_turn(CallKind.STREAM_UPDATE, requester=self.requester)
            else:
                await self._sleep_or_wake(ask.seconds)
            return
        line, call = self.book.stream_status, machine.status_call()
        result = await self.executor.perform(call, grant=ask)
        rule = machine.status_applied(line, result)
        if not isinstance(result, Done):
            _log.debug("run %s: status line %s (%s): %s", self.run, rule.verdict, rule.why, result.error)

    async def _sleep_or_wake(self, delay_s: float, *, throttled: bool = False) -> None:
        """Wait ``delay_s`` seconds on the injected clock, or less if a new text or :meth:`finish` wakes the loop.

        ``throttled``: the call waits for the preview throttle, which every call before finalization waits for, so
        a new text cannot make any call due sooner: only :attr:`SlotBook.urgent` changes wake the loop (one wake per
        throttle interval, not one per delta)."""
        wake = self.book.urgent if throttled else self.book.changed
        wake.clear()
        await wake.wait(self._clock.now() + delay_s, self._clock)

    def _throttled(self, op: Op) -> bool:
        """Whether ``op`` waits for the preview throttle alone (see :meth:`_sleep_or_wake`)."""
        last, throttle_s = self.planner.last_call_at, self.book.throttle_s
        return not self.finalizing and last is not None and op.not_before <= last + throttle_s

    # --- performing one call ----------------------------------------------------------------------------

    async def _perform(self, op: Op, grant: Grant) -> None:
        machine = self.machine
        if op.kind is OpKind.OPEN_THREAD:
            await self._perform_thread(op, grant)
            return
        if op.kind.control:
            await self._perform_control(op, grant)
            return
        call = machine.call_for(op)
        self.planner.last_call_at = self._clock.now()
        decision: list[tuple[Outcome, str, float | None]] = []
        slot, book = op.slot, self.book

        def apply(result: CallResult) -> tuple[PartRecord, str, str]:
            before = slot.shown_kept
            outcome, detail, retry_after_s = machine.apply(op, result)
            decision.append((outcome, detail, retry_after_s))
            # Done, a part that keeps a range of the answer shows the call's text: that string (alive until the ledger
            # has the outcome) is what the record shows, not a second copy built from the range (4 bytes a character
            # when the part holds an emoji).
            kept = slot.shown_kept
            sent = op.text if kept is not before and isinstance(kept, Pinned) and op.kind in _SHOWS_TEXT else None
            return book.record(slot, sent), str(outcome), detail

        intent = machine.intent_for(op)
        await self.executor.perform(
            call, final=self.finalizing, intent=intent, apply=apply, grant=grant, first=book.take_unsaved
        )
        outcome, detail, retry_after_s = decision[0]
        for orphan in book.take_unsaved():
            await self._ledger.save_part(orphan)
        if outcome in _GIVEN_UP:
            _log.warning(
                "run %s part %d given up: %s %s%s",
                self.run,
                slot.index,
                op.kind,
                outcome,
                f" ({detail})" if detail else "",
                extra={"part": slot.index, "op": str(op.kind), "outcome": str(outcome)},
            )
        elif outcome not in _QUIET:
            _log.info(
                "run %s part %d: %s %s%s", self.run, slot.index, op.kind, outcome, f" ({detail})" if detail else ""
            )
        if self._feed is not None:
            self._feed(delivery_fact(op, outcome, detail, retry_after_s))
        if self._watchers:
            self._tell_watchers()

    async def _perform_control(self, op: Op, grant: Grant) -> None:
        """A control move: paced and metered by the executor like any call; not a message's text, so neither in
        the ledger nor told to watchers."""
        result = await self.executor.perform(self.machine.call_for(op), final=self.finalizing, grant=grant)
        outcome, detail, _ = self.machine.apply(op, result)
        if outcome not in _QUIET:
            _log.info(
                "run %s: the Stop control on message %s: %s %s (%s)",
                self.run,
                op.slot.message_id,
                op.kind,
                outcome,
                detail,
            )

    async def _perform_thread(self, op: Op, grant: Grant) -> None:
        """A thread's opening under a part's message: paced and metered by the executor like any call; not a
        message's text, so not in the ledger; whoever waits for it (:meth:`open_thread`) is woken."""
        result = await self.executor.perform(self.machine.call_for(op), final=self.finalizing, grant=grant)
        outcome, detail, _ = self.machine.apply(op, result)
        if outcome is not Outcome.ACK:
            _log.info("run %s part %d: no thread opened under it (%s)", self.run, op.slot.index, detail)
        self._tell_watchers()

    async def open_thread(self, slot: Slot, title: str, timeout_s: float) -> Target | None:
        """Have the machine open a thread titled ``title`` under ``slot``'s message once it is shown (the call is the
        machine's, :data:`OpKind.OPEN_THREAD`, made by the executor); return where its messages go.

        None when no thread opened: the part never became a message within ``timeout_s`` seconds on the injected
        clock (uncertain, failed, skipped, past the message limit, or slower), the platform refused or could not
        be reached (one attempt), or the delivery loop ended. Woken by each call's outcome: no polling."""
        slot.thread_title = title
        self.book.changed.set()
        self.book.urgent.set()
        deadline = self._clock.now() + timeout_s
        wake = Wake()
        self._watchers.append(wake)
        try:
            while True:
                if slot.thread is not None:
                    return slot.thread
                if slot.thread_error is not None or (self._task is not None and self._task.done()):
                    return None
                if slot.message_id is None:  # the anchor is not shown yet
                    unshown = slot.over_limit or slot.state in (
                        PartState.UNCERTAIN,
                        PartState.FAILED,
                        PartState.SKIPPED,
                    )
                    if unshown or self._clock.now() >= deadline:
                        slot.thread_title = None
                        return None
                wake.clear()
                await wake.wait(deadline if slot.message_id is None else None, self._clock)
        finally:
            self._watchers.remove(wake)

    @property
    def control_errors(self) -> list[str]:
        """Controls that could not be taken off at the end (for the run's report)."""
        controls = self.machine.controls
        return [*(controls.errors if controls is not None else []), *self.machine.buttons.errors]

    def controls_restored(self, *, buttons: bool = True) -> None:
        """After :meth:`restore`: the messages that may carry the control (:meth:`ControlPlan.restored`), and the
        approval messages whose buttons are not known (:meth:`ButtonPlan.restored`; ``buttons`` False: the
        platform shows none, so none can be left on: a button call there would go to an adapter without it)."""
        if self.machine.controls is not None:
            self.machine.controls.restored()
        if buttons:
            self.machine.buttons.restored()
