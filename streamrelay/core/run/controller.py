"""One run wired end to end, and its I/O: the pure stage upstream, the conversations' delivery downstream.

    events ─▶ RunStage (pure) ─▶ slot books (desired) ─▶ DeliveryMachine (sans-I/O) ─▶ Executor ─▶ adapter.perform
                                                         (driven by the Reconciler)      └▶ ledger, DeliveryWatch

The controller builds a run's stages in one place (:func:`core.delivery.conversation.open_conversation` for the
root and for each child thread), opens the run in the ledger and restores what it showed before a restart, hands
events to the stage, and ends the run in one place (:meth:`RunController.end`, :meth:`RunController.interrupt`):
every conversation delivers its final state, the Stop control comes off, the end is recorded. Nothing runs back
upward: the machines write acknowledgements into the slot books and tell the watchers' feed, never the stage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from streamrelay.core.clock import Clock
from streamrelay.core.delivery.conversation import open_conversation
from streamrelay.core.delivery.reconciler import Reconciler
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.delivery.threads import ChildThreads
from streamrelay.core.events import (
    DeliveryMode,
    End,
    EndStatus,
    ErrorEvent,
    RunEvent,
    RunStart,
    Source,
    Stop,
    Target,
)
from streamrelay.core.lanes.pipeline import ArgsValidator, PipelineLane, ToolCallCollector
from streamrelay.core.policy import ChannelPolicy, SubagentPolicy
from streamrelay.core.ports import ChannelAdapter, StopControls, TextFormat
from streamrelay.core.records.ledger import Ledger, RunRecord
from streamrelay.core.records.report import DeliveryReport, with_gaps
from streamrelay.core.run.approvals import ApprovalBook
from streamrelay.core.run.desk import undelivered
from streamrelay.core.run.monitor import DeliveryWatch, RunMonitor
from streamrelay.core.run.stage import RunStage
from streamrelay.core.run.stop import stop_note, stop_unit
from streamrelay.core.run.stop_controls import StopControlKeeper

_log = logging.getLogger("streamrelay.run")

IDLE_CLOSED = "the run was closed with what it had"
IDLE_REASON = "the agent sent nothing for {idle:g} s: " + IDLE_CLOSED
"""The report's error when the idle timeout closed a run (:class:`Quiet`); admission refuses the run's new lines
after it (409)."""
IDLE_REFUSAL = "this line was not taken; send the answer again in a new run"
"""What admission's 409 for a line of an idle-closed run that the run never took ends with (an agent that reads it
knows its answer was cut where the run stood, and starts a new run)."""


def idle_refusal(run: str) -> str:
    """The 409's text for a line of ``run`` (a run key) that the idle timeout closed and that the run never took
    (one process's admission and every replica's front say the same)."""
    return f"run {run!r} was closed after its agent sent nothing for the idle timeout, with what it had: {IDLE_REFUSAL}"


FAIL_TIMEOUT_S = 30.0
"""How long a run a bug stopped may take to show its failure before it is just stopped (seconds)."""


@dataclass(frozen=True, slots=True)
class Quiet:
    """The run sent nothing for ``idle_s`` seconds: it is closed with what it had, as an error."""

    idle_s: float


@dataclass(frozen=True, slots=True)
class Broken:
    """A bug of ours stopped the run: ``reason`` goes to the report, not to the person."""

    reason: str


RunEnding = End | Stop | Quiet | Broken
"""Every way a run ends with its final delivered (:meth:`RunController.end`): its root ``end``, a reader's Stop, the
idle timeout, or a bug. A run stopped without its final (shutdown, another replica took it) is
:meth:`RunController.interrupt`."""


class RunController:
    """Delivers one run to one channel target, and keeps its pipeline lane.

    Args:
        start: the run's ``run.start`` event.
        policy: the channel's delivery policy.
        adapter: the channel adapter.
        chain: the conversation's send chain (shared by every run to the same target).
        ledger: the durable record.
        clock: the injected clock.
        lane: the run's pipeline lane (a new one when not given).
        validator: checks complete tool calls against their JSON Schemas (the action catalog's).
        chain_for: the channel's send chain of another target, and ``release`` to give it back: needed for
            ``subagents = "thread"`` (each child's thread is a conversation of its own).
        monitor: the run's live progress for watchers (a new one when not given).
        retry_window_s: how long calls that are safe to retry are retried through an outage (seconds).
        ledger_run: the ledger's run id of this conversation (None: the run's own); a fan-out run's later places
            have their own (:func:`core.run.fanout.place_ledger_run`), as a sub-agent's thread does.
        rows: where each call's outcome is published for watchers, and the row's name (None: ``monitor``, the
            channel's name); a fan-out run's later places publish on the run's monitor, their stage on their own.
    """

    __slots__ = (
        "_adapter",
        "_chain",
        "_ledger",
        "_platform",
        "_row",
        "_rows",
        "approvals",
        "before_end",
        "lane",
        "ledger_run",
        "monitor",
        "policy",
        "rec",
        "run",
        "stage",
        "stage_deadline",
        "stage_handle",
        "start_event",
        "stop_controls",
        "stream_end",
        "threads",
    )

    def __init__(
        self,
        start: RunStart,
        policy: ChannelPolicy,
        adapter: ChannelAdapter,
        chain: SendChain,
        ledger: Ledger,
        clock: Clock,
        lane: PipelineLane | None = None,
        validator: ArgsValidator | None = None,
        chain_for: Callable[[Target], SendChain] | None = None,
        release: Callable[[Target], None] | None = None,
        monitor: RunMonitor | None = None,
        retry_window_s: float = 600.0,
        ledger_run: str | None = None,
        rows: tuple[RunMonitor, str] | None = None,
    ) -> None:
        self.run = start.run
        self.ledger_run = ledger_run if ledger_run is not None else start.run
        """The run id its ledger records (its parts, its start and end) are kept under."""
        self.before_end: Callable[[], Awaitable[None]] | None = None
        """Awaited just before the run's end is recorded in the ledger (a fan-out run's first place waits there for
        the other places' ends: the first place's record ended is what says the whole run ended)."""
        self.start_event = start
        self.stream_end: EndStatus | None = None
        """How the run's stream said it ended badly (the first root ``error`` with ``ends``): its ``end`` ``ok`` then
        counts as this status (:meth:`end`)."""
        self.policy = policy
        self._ledger = ledger
        self._platform = adapter.platform
        self._adapter, self._chain = adapter, chain
        self.lane = lane if lane is not None else PipelineLane(start.run)
        self.monitor = monitor if monitor is not None else RunMonitor(start.run)
        self._rows, self._row = rows if rows is not None else (self.monitor, policy.name)
        watch = DeliveryWatch(self._rows, self._row, live_text=policy.live_text)
        self.approvals = ApprovalBook()
        """The run's approvals (:mod:`core.run.approvals`): admission takes and decides them, the stage shows them."""
        self.stop_controls: StopControlKeeper | None = None
        if policy.stop_button and isinstance(adapter, StopControls):
            self.stop_controls = StopControlKeeper(run=start.run, controls=adapter, target=start.target, feed=watch)
        conversation = open_conversation(
            run=self.ledger_run,
            policy=policy,
            adapter=adapter,
            chain=chain,
            target=start.target,
            ledger=ledger,
            clock=clock,
            retry_window_s=retry_window_s,
            feed=self.stop_controls if self.stop_controls is not None else watch,
            control=self.stop_controls.control if self.stop_controls is not None else None,
        )
        self.rec: Reconciler = conversation.rec
        if self.stop_controls is not None:
            self.stop_controls.book = conversation.book
        threads: ChildThreads | None = None
        # Progress mode shows no unchecked text before the commit point: children stay status lines there.
        if (
            policy.subagents is SubagentPolicy.THREAD
            and chain_for is not None
            and policy.delivery is not DeliveryMode.PROGRESS
        ):
            threads = ChildThreads(
                run=start.run,
                policy=policy,
                adapter=adapter,
                target=start.target,
                root=conversation.book,
                chain_for=chain_for,
                release=release or (lambda _target: None),
                ledger=ledger,
                clock=clock,
                open_thread=conversation.rec.open_thread,
                feed_for=self._thread_feed,
                retry_window_s=retry_window_s,
            )
            if not threads.available:
                _log.info("subagents = thread: %s; sub-agents show as status lines", threads.refusal)
                threads = None
        self.threads = threads
        measure = adapter.measure
        self.stage = RunStage(
            start=start,
            policy=policy,
            book=conversation.book,
            mode=conversation.mode,
            measure=lambda text: measure(text, TextFormat.PLAIN),
            tools=ToolCallCollector(validator),
            lane=self.lane,
            monitor=self.monitor,
            threads=threads,
        )
        self.stage.approvals = self.approvals
        self.stage.approval_buttons = isinstance(adapter, StopControls)
        self.stage_handle: Callable[[RunEvent], None] = self.stage.handle
        """Apply one text event to the stage (the worker's fast path: no end, Stop nor error event)."""
        self.stage_deadline: Callable[[], float | None] = self.stage.mode.deadline
        """The stage's next timer (its delivery mode's), or None."""

    def share_approvals(self, book: ApprovalBook) -> None:
        """Show ``book``'s approvals (a fan-out run's places share the first place's: one decision, shown in all)."""
        self.approvals = book
        self.stage.approvals = book

    @property
    def places(self) -> list[tuple[str, Target]]:
        """``(channel, target)`` of every conversation this run holds a send chain of (one here)."""
        return [(self.policy.name, self.start_event.target)]

    def catching_up(self, on: bool) -> None:
        """A resumed run takes its journaled backlog: only the resulting state is sent."""
        self.rec.book.catching_up = on

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when delivery stops on a store it cannot write (or ownership lost)."""
        self.rec.on_lost.append(callback)

    def _thread_feed(self, source: Source) -> DeliveryWatch:
        """A child's thread is a row of its own for watchers: ``<channel> ↳ <agent>``."""
        return DeliveryWatch(self._rows, f"{self._row} ↳ {source.agent_id}", live_text=False)

    # --- what the run worker and the relay read ---------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.stage.done

    @property
    def committed(self) -> str | None:
        return self.stage.committed

    @property
    def errors(self) -> list[str]:
        return self.stage.errors

    def report(self) -> DeliveryReport:
        return self.stage.report()

    # --- the run's life ---------------------------------------------------------------------------------

    async def open(self) -> None:
        """Record the run and restore parts delivered before a restart; start delivering."""
        await self._ledger.start_run(
            RunRecord(
                run=self.ledger_run,
                channel=self.policy.name,
                target=self.start_event.target.model_dump(mode="json"),
                mode=str(self.policy.delivery),
            )
        )
        self.rec.restore(await self._ledger.parts(self.ledger_run))
        self.rec.controls_restored(buttons=self.stage.approval_buttons)
        self.stage.opened(self._platform)
        self.rec.start()

    def handle(self, event: RunEvent) -> None:
        """Apply one in-order event to the stage (never the root's ``end``: see :meth:`close`)."""
        if (
            isinstance(event, ErrorEvent)
            and event.ends is not None
            and event.source is None
            and self.stream_end is None
        ):
            self.stream_end = event.ends
        self.stage.handle(event)

    def deadline(self) -> float | None:
        return self.stage.deadline()

    def tick(self) -> None:
        self.stage.tick()

    async def end(self, ending: RunEnding, *, gaps: Sequence[str] = ()) -> DeliveryReport:
        """End the run with its final delivered: the one place a run ends (an ``end`` event, a reader's Stop, the
        idle timeout or a bug: :data:`RunEnding`). ``gaps``: the run's input gaps, for the ``end`` event's
        ``delivery`` (as its report says).

        - ``End`` (an ``ok`` counts as the stream's own bad end when one came: :attr:`stream_end`): the stage's
          final state (:meth:`RunStage.end`) delivered by every conversation, the Stop control
          taken off, no typing left behind, the end recorded in the ledger, ``end`` published to watchers.
        - ``Stop``: a ``stop`` unit on the pipeline lane (the parent loop stops its agent), then the run ends
          ``cancelled`` with what the answer shows and a short notice, :func:`core.run.stop.stop_note` among its
          report's errors.
        - ``Quiet``: the run ends ``error`` with what it had and the idle notice.
        - ``Broken``: the person is shown a failure if finalizing still works (within :data:`FAIL_TIMEOUT_S`), else
          delivery just stops; the reason goes to the report.
        """
        if isinstance(ending, Stop):
            self.lane.emit(stop_unit(ending))
            self.stage.errors.append(stop_note(ending))
            self.monitor.publish("decision", what="stop", reason=stop_note(ending))
            return await self._close(End(run=self.run, status=EndStatus.CANCELLED), gaps=gaps)
        if isinstance(ending, Quiet):
            self.stage.errors.append(IDLE_REASON.format(idle=ending.idle_s))
            return await self._close(End(run=self.run, status=EndStatus.ERROR), idle=True, gaps=gaps)
        if isinstance(ending, Broken):
            return await self._broken(ending.reason)
        if ending.status is EndStatus.OK and self.stream_end is not None:
            # The stream itself failed, refused or was cut (an ``error`` with ``ends``): an ``ok`` end after it is no
            # whole answer. Its final_text is not committed either.
            ending = ending.model_copy(update={"status": self.stream_end, "final_text": None})
        return await self._close(ending, gaps=gaps)

    async def _broken(self, reason: str) -> DeliveryReport:
        if not self.done:
            try:
                report = await asyncio.wait_for(self._close(End(run=self.run, status=EndStatus.ERROR)), FAIL_TIMEOUT_S)
                self.stage.errors.append(reason)
                return report
            except Exception:
                _log.exception("run %s could not show its failure", self.run)
        with contextlib.suppress(Exception):
            await self._stop_delivering()
        self.stage.fail(reason)
        return self.stage.report()

    async def interrupt(self, *, gaps: Sequence[str] = ()) -> None:
        """Stop delivering without finalizing (service shutdown; another replica owns the run now): the journal
        resumes it. The pipeline lane's subscribers are not left waiting (it closes ``cancelled``), nor are the
        watchers (``end`` with status ``cancelled``)."""
        await self._stop_delivering()
        if not self.lane.closed:
            self.lane.close("cancelled", committed=self.committed is not None)
        if not self.monitor.closed:
            delivery = with_gaps(self.report(), list(gaps)).status
            self.monitor.publish("end", status="cancelled", delivery=str(delivery))

    async def _close(self, end: End, *, idle: bool = False, gaps: Sequence[str] = ()) -> DeliveryReport:
        """Finalize: the stage's final state (:meth:`RunStage.end`), delivered by every conversation; the run's
        end recorded. ``gaps``: the run's input gaps, for the ``end`` event's ``delivery`` (as its report says)."""
        self.rec.stop_typing()
        self.stage.end(end, idle=idle)
        if self.threads is not None:
            await self.threads.finish()
        await self.rec.finish()
        # The final text is delivered and the Stop control taken off (the machine's last calls), however it ended.
        self.stage.errors.extend(self.rec.control_errors)
        if self.stop_controls is not None:
            self.stop_controls.finish()
        if (typing_off := self.rec.machine.typing_off()) is not None:  # no "typing…" left (Slack's lasts 2 min)
            await self.rec.executor.perform(typing_off)
        if (status_off := self.rec.machine.status_off()) is not None:  # a stream of status lines alone goes
            await self.rec.executor.perform(status_off)  # one attempt: cosmetic (its outcome changes nothing)
        # What the run did not deliver goes to the desk (core/run/desk.py) before its end is recorded: a crash in
        # between finalizes the run again, and an entry already kept stays as it is.
        undone = undelivered(
            self.rec.book,
            channel=self.policy.name,
            target=self.start_event.target.model_dump(mode="json"),
            ended_at=time.time(),
            errors=self.stage.errors,
        )
        if undone:
            await self._ledger.record_undelivered(undone)
        if self.before_end is not None:  # a fan-out run's first place: delivered, the run's end waits for the rest
            self.stage.done = True
            await self.before_end()
        await self._ledger.end_run(self.ledger_run, str(end.status), self.stage.errors)
        self.stage.done = True
        report = self.stage.report()
        delivery = with_gaps(self.stage.report(), list(gaps)).status if gaps else report.status
        self.monitor.publish("end", status=str(end.status), delivery=str(delivery))
        return report

    async def _stop_delivering(self) -> None:
        """No more calls from this run's conversations (its Stop control's moves are theirs) and its threads."""
        if self.threads is not None:
            await self.threads.cancel()
        await self.rec.cancel()
