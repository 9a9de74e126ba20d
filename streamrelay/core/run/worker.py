"""One active run's worker: takes its accepted events in order, feeds the run, finalizes it.

The relay accepts lines (validated, journaled) and hands each run's events to its :class:`ActiveRun`; the worker
orders them by ``seq`` (:class:`~core.ingest.sequencer.SeqGate`), joins deltas that arrived together, and applies them
to the :class:`~core.run.controller.RunController` (its pure :class:`~core.run.stage.RunStage`). A run resumed from the
journal first takes its whole ``backlog`` as one batch with the reconciler catching up, so only the resulting
state is sent, never the intermediate ones.

A run whose agent sends nothing for ``idle_s`` seconds is closed with what it has and a short notice, unless it waits
for a person: while one of its approvals is undecided and unexpired, its agent (blocked on the decision, as
``RelayClient.wait_approval`` is) is not idle. The close has a commit point
(:meth:`core.records.journal.Journal.close_idle`), passed before anything of the close is shown: every line accepted
before it is taken, every later one refused with 409, on one process and on replicas alike; on one process a restart
after it resumes the run closed (its final and notice finished once, the ledger deciding), never open to new lines.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from streamrelay.core.clock import Clock
from streamrelay.core.errors import OwnershipLostError
from streamrelay.core.events import End, Event, RunEvent, Stop, TextDelta, TextEvent
from streamrelay.core.ingest.clients import ClientLimits
from streamrelay.core.ingest.quota import RunUsage
from streamrelay.core.ingest.sequencer import SeqFloor, SeqGate, join_deltas
from streamrelay.core.lanes.pipeline import ToolCallCollector
from streamrelay.core.normalize import Normalizer
from streamrelay.core.run.approvals import ApprovalBook
from streamrelay.core.run.controller import IDLE_REASON, Broken, Quiet
from streamrelay.core.run.fanout import Controller
from streamrelay.core.run.inbox import Inbox
from streamrelay.core.run.timeline import Timeline

_log = logging.getLogger("streamrelay.relay")

BATCH = 256
"""At most this many queued events are taken at once by a run's worker."""


@dataclass(slots=True)
class ActiveRun:
    """An accepted run while it is delivered: its controller, its input queue and ``seq`` gate."""

    controller: Controller
    queue: Inbox[RunEvent]
    gate: SeqGate
    normalizer: Normalizer | None
    backlog: list[RunEvent] | None = None
    """Events replayed from the journal, taken first as one batch (None for a live run)."""
    opened: bool = False
    opened_at_s: float = 0.0
    """When its worker started, on the relay's clock (seconds): its duration counts from there."""
    task: asyncio.Task[None] | None = None
    taking: int = 0
    """How many requests took lines (or a stop, a decision) of this run that are not handed over yet (being
    journaled): while any is, the run is not closed by its idle timeout (:meth:`hold`)."""
    closing: str | None = None
    """Why the run takes no more lines (its agent went quiet and it is being closed), or None. Set before its worker
    starts for a run resumed after its idle close's commit point (:meth:`core.run.relay.Relay.resume`): it is
    closed at once."""
    closed_seq: int | None = None
    """With :attr:`closing`: the last ``seq`` the run took (a line at or below it is a repeat, acknowledged and
    dropped; a later one was never taken: 409)."""
    end_seq: int | None = None
    ended: bool = False
    """The root's ``end`` was taken (lines after it have nothing to change)."""
    seqs: SeqFloor = field(default_factory=lambda: SeqFloor())
    """The ``seq`` numbers taken at admission (raw stream lines are taken only in order)."""
    usage: RunUsage = field(default_factory=lambda: RunUsage())
    """What the run has carried so far, against its client's per-run limits."""
    limits: ClientLimits | None = None
    """Its client's limits (looked up once, not per line), or None: ask the client book."""
    stopped: Stop | None = None
    """Its reader stopped it (:mod:`core.run.stop`): the agent's later lines are refused with a 409."""
    holds: ToolCallCollector | None = None
    """Where admission finishes the run's tool calls to find those a person must approve first
    (:meth:`core.ingest.admission.Admission.hold_calls`); None when the run's ``approve_actions`` name none."""
    approvals: ApprovalBook = field(init=False)
    """The approvals it asked (its controller's book, :mod:`core.run.approvals`): a decision is checked and taken
    here, once."""
    run: str = field(init=False)
    """Its run key (its controller's): a plain attribute, read twice per line taken (admission, the journal entry)."""
    timeline: Timeline | None = None
    """Its delivery timeline (:mod:`core.run.timeline`), given by the relay when it opens."""

    def __post_init__(self) -> None:
        self.run = self.controller.run
        self.approvals = self.controller.approvals

    def hold(self) -> None:
        """A request took lines of this run (they passed :meth:`closed_to`) and journals them: the idle timeout
        waits until they are handed over (:meth:`release`). Before, an idle close that fell due while a busy
        machine's journal write was under way closed the run without them, though they were answered 200 and
        journaled (chaos seed 23, run 643: the chat 22 characters short, their replay refused 409 "not taken")."""
        self.taking += 1

    def release(self) -> None:
        """The request that :meth:`hold` its lines handed them over (or the journal refused them): the worker looks
        again at its idle timeout."""
        self.taking -= 1
        if not self.taking:
            self.queue.nudge()

    def end_taken(self, seq: int | None) -> None:
        self.ended, self.end_seq = True, seq

    def closed_to(self, event: Event) -> str | None:
        """Why ``event`` is acknowledged and dropped rather than taken: the run is closing, or its ``end`` was
        taken and the event comes after it (with ``seq``s, a line before the end's ``seq`` still fills a gap)."""
        if self.closing is not None:
            return self.closing
        if self.ended and (self.end_seq is None or event.seq is None or event.seq > self.end_seq):
            return f"run {self.run!r} already took its end: lines after it are dropped"
        return None

    async def put(self, event: Event) -> None:
        """Hand one accepted event to the worker (waits while the queue is full)."""
        await self.put_all((event,))

    def offer(self, events: Sequence[RunEvent]) -> bool:
        """:meth:`put_all` without waiting, for an opened run whose inbox has room for ``events`` (the common
        hand-over: no coroutine made for it); False, nothing done, otherwise (then :meth:`put_all`)."""
        return self.opened and self.queue.offer(events)

    async def put_all(self, events: Sequence[RunEvent]) -> None:
        """Hand accepted events to the worker in order, waking it once (waits while the queue is full)."""
        if self.backlog is not None and not self.opened:
            self.backlog.extend(events)
        elif events:
            await self.queue.put_all(events)


def consecutive(staged: list[tuple[ActiveRun, Sequence[RunEvent]]]) -> list[tuple[ActiveRun, list[RunEvent]]]:
    """``staged`` with the events of consecutive lines of the same run joined: one hand-over (one wake of its
    worker) per run and batch rather than per line. O(events)."""
    out: list[tuple[ActiveRun, list[RunEvent]]] = []
    for run, events in staged:
        if out and out[-1][0] is run:
            out[-1][1].extend(events)
        else:
            out.append((run, list(events)))
    return out


def idle_closing(run: str, idle_s: float) -> str:
    """:attr:`ActiveRun.closing` of ``run`` closed by the idle timeout of ``idle_s`` seconds (admission answers its
    agent's later lines with it)."""
    return f"run {run!r} was closed: {IDLE_REASON.format(idle=idle_s)}"


class CloseIdle(Protocol):
    """The commit point of an idle close: (run key, its last ``seq`` taken) -> returns once every line accepted before
    it is handed to the run and later ones are refused; again with ``ended`` once those lines took the run's own
    ``end`` (:meth:`core.records.journal.Journal.close_idle`)."""

    async def __call__(self, run: str, last_seq: int | None, *, ended: bool = False) -> None: ...


async def _no_commit(run: str, last_seq: int | None, *, ended: bool = False) -> None:
    return None


async def work(run: ActiveRun, clock: Clock, idle_s: float, close_idle: CloseIdle = _no_commit) -> None:
    """Drive ``run`` until its root ``end`` (or the idle timeout: module docstring) is finalized.

    Raises:
        asyncio.CancelledError: the service stops; the run is left unfinished (the journal resumes it).
    """
    controller = run.controller
    queue, gate = run.queue, run.gate
    stage_deadline = controller.stage_deadline  # the stage's timers are its delivery mode's
    stage_handle: Callable[[RunEvent], None] = controller.stage_handle
    gate_deadline, take, waiter_of = gate.deadline, queue.take, queue.waiter
    last_event_at = clock.now()  # a resumed run too: its idle time counts afresh from the resume (issue 24, item 6)
    try:
        if await _catch_up(run, last_event_at) or await _closed_at_resume(run, clock, idle_s, close_idle):
            return
        while True:
            # What the worker awaits: its next events, or its first deadline (the stage's timers, a ``seq`` gap's,
            # the idle timeout). Written out here, not in a call: a run fed one event a request
            # comes round this loop once per event.
            # While a request journals lines of the run (``taking``), it has no idle deadline: their hand-over, or
            # the journal's refusal, wakes it (ActiveRun.release).
            deadline: float | None = None if run.taking else last_event_at + idle_s
            if (due := stage_deadline()) is not None and (deadline is None or due < deadline):
                deadline = due
            if (due := gate_deadline()) is not None and (deadline is None or due < deadline):
                deadline = due
            if (waiter := waiter_of(deadline, clock)) is not None:
                await waiter
            batch = take(BATCH)
            if not batch:
                quiet_since = await _timers(run, clock, last_event_at, idle_s, close_idle)
                if quiet_since is None:
                    return
                last_event_at = quiet_since
                continue
            last_event_at = clock.now()
            ending = _took(run, batch, stage_handle, last_event_at)
            batch = []  # its events are not held while the run waits for the next ones
            if ending is not None:
                await controller.end(ending, gaps=gate.gaps)
                return
    except asyncio.CancelledError:
        await controller.interrupt(gaps=run.gate.gaps)
        raise
    except OwnershipLostError as exc:  # another replica owns it now, or the store is out: nothing more is sent here
        _log.warning("run %s stopped unfinished (%s): it goes on from the journal", controller.run, exc)
        await controller.interrupt(gaps=run.gate.gaps)
        raise
    except Exception as exc:  # a bug in one run must not take others down
        _log.exception("run %s failed", controller.run)
        await controller.end(Broken(f"internal error, delivery stopped: {type(exc).__name__}: {exc}"))
    finally:
        run.queue.close()


def _awaits_person(run: ActiveRun) -> bool:
    """True while one of ``run``'s approvals is undecided and unexpired (its expiry is wall-clock Unix seconds, as the
    approval's message shows it)."""
    items = run.approvals.items
    if not items:
        return False
    now = time.time()
    return any(a.decision is None and now < a.expires_at for a in items.values())


async def _timers(
    run: ActiveRun, clock: Clock, last_event_at: float, idle_s: float, close_idle: CloseIdle
) -> float | None:
    """The worker woke with no event: the run is closed when it has been quiet for ``idle_s`` since
    ``last_event_at`` and no request is journaling lines of it, unless it waits for a person
    (:func:`_awaits_person`: its quiet time starts again now), else time passed for its stage (a coalescer's idle
    gap) and its ``seq`` gaps. Returns None when the run was finalized, else when its quiet time counts from.

    Closed "with what it had": every line it took. The close passes its commit point first (``close_idle``); lines
    accepted before it (on replicas: appended to the input stream in the instant before the mark) are taken, and
    the events a ``seq`` gap still holds are released (the gap reported), again until nothing more comes, so the
    run's last ``seq`` covers every line answered 200 and a replay of one is acknowledged, never refused as "not
    taken". Then the run is closed with nothing awaited in between: admission never takes a line into a run that is
    closing. When those lines held the run's own ``end``, the run ends with it, and the commit point is told so
    (its later lines are an ended run's: acknowledged and dropped)."""
    controller = run.controller
    if not run.taking and clock.now() >= last_event_at + idle_s:
        if _awaits_person(run):
            return clock.now()
        await _close(run, clock, idle_s, close_idle)
        return None
    controller.tick()
    if await _handle(controller, run.gate.expire(clock.now()), run.gate.gaps):
        return None
    return last_event_at


async def _close(run: ActiveRun, clock: Clock, idle_s: float, close_idle: CloseIdle) -> None:
    """Close ``run`` by the idle timeout, with what it had (:func:`_timers`; a run resumed after the close's commit
    point, again: its lines replayed, the commit point passed again, the same final, the ledger deciding what was
    shown already). The commit point comes before anything of the close is shown: a kill before it resumes the run
    open with nothing of the close shown, a kill after it resumes the run closed.

    While the commit point is written, a request may take lines of the run (it was not closing yet): the close waits
    until they are handed over (:meth:`ActiveRun.release`), takes them and passes the commit point again with the
    run's new last ``seq``, until one passes with nothing taken meanwhile: every line journaled for the run is then
    one it took. (One process's journal writes the mark in a commit of its own, awaited: before, it wrote nothing,
    and nothing came in between.)"""
    controller = run.controller
    ending: End | Stop | None = None
    took = True
    while took and ending is None:  # again after lines were taken: the mark names the last seq the run took
        await close_idle(run.run, run.gate.last)
        took = False
        while True:
            while ending is None and (batch := run.queue.take(BATCH)):
                took = True
                ending = _took(run, batch, controller.stage_handle, clock.now())
            if ending is not None or not run.taking:
                break
            if (waiter := run.queue.waiter(None, clock)) is not None:  # woken by their hand-over or release
                await waiter
        if ending is None and (held := run.gate.release_held()):
            took = True
            ending = _feed(controller, join_deltas(held))
    run.closing, run.closed_seq = idle_closing(run.run, idle_s), run.gate.last
    if isinstance(ending, End):  # it came before the commit point: the run ends as any run, and answers so
        await close_idle(run.run, run.gate.last, ended=True)
    await controller.end(ending if ending is not None else Quiet(idle_s), gaps=run.gate.gaps)


async def _closed_at_resume(run: ActiveRun, clock: Clock, idle_s: float, close_idle: CloseIdle) -> bool:
    """A run resumed after its idle close's commit point (:attr:`ActiveRun.closing` set by the relay before its
    worker started) is closed at once with what it had (:func:`_close`); True when so."""
    if run.closing is None:
        return False
    await _close(run, clock, idle_s, close_idle)
    return True


async def _catch_up(run: ActiveRun, now: float) -> bool:
    """A resumed run takes its whole ``backlog`` first, as one batch, the reconciler catching up (only the resulting
    state is sent); True when the run was finalized."""
    backlog, run.backlog = run.backlog, None
    if not backlog:
        return False
    run.controller.catching_up(True)
    try:
        return await _apply(run, backlog, now)
    finally:
        run.controller.catching_up(False)


def _took(
    run: ActiveRun, batch: list[RunEvent], stage_handle: Callable[[RunEvent], None], now: float
) -> End | Stop | None:
    """Apply ``batch``, taken at ``now``, up to the root's ``end`` or a Stop, which is returned (None: none came)."""
    if (timeline := run.timeline) is not None:  # one small tuple per batch (text batches joined): core/run/timeline.py
        first = batch[0]
        timeline.taken("text" if type(first) is TextDelta or type(first) is TextEvent else first.kind, len(batch))
    if len(batch) == 1 and (event := batch[0]).seq is None:
        # The gate and the join give one event without seq as it is. A text event is neither an end, a Stop nor an
        # error event (what RunController.handle looks at): it goes to the stage directly. (``type()``, not
        # ``__class__``: an event's attribute reads take pydantic's slow ``__getattr__`` hook.)
        if type(event) is TextDelta or type(event) is TextEvent:
            stage_handle(event)
            return None
        return _feed(run.controller, batch)
    return _feed(run.controller, _ordered(run, batch, now))


def _ordered(run: ActiveRun, batch: list[RunEvent], now: float) -> list[RunEvent]:
    """``batch`` ordered through the seq gate, the deltas that arrived together joined."""
    return join_deltas(run.gate.push_all(batch, now))


async def _apply(run: ActiveRun, batch: list[RunEvent], now: float) -> bool:
    """Order ``batch`` through the seq gate and apply it; True when the run was finalized."""
    return await _handle(run.controller, _ordered(run, batch, now), run.gate.gaps)


async def _handle(controller: Controller, ready: list[RunEvent], gaps: Sequence[str] = ()) -> bool:
    """Apply ``ready``, finalizing the run at its root ``end`` or a Stop; True when it was finalized."""
    ending = _feed(controller, ready)
    if ending is None:
        return False
    await controller.end(ending, gaps=gaps)
    return True


def _feed(controller: Controller, ready: list[RunEvent]) -> End | Stop | None:
    """Apply ``ready`` to the run up to its root ``end`` or a Stop, which is returned (None: none came)."""
    handle = controller.handle
    for item in ready:
        if (isinstance(item, End) and item.source is None) or isinstance(item, Stop):
            return item
        handle(item)
    return None
