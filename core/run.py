"""One run's delivery: routes its events through the stages to the channel, and finalizes it.

text ─▶ visible text (answer | reasoning, per source) ─▶ answer stream ─▶ delivery mode ─▶ reconciler ─▶ adapter
                                                   └▶ reasoning message (``reasoning = "shown"``)
tool_call, a child's end, commit ─▶ pipeline lane (complete, checked units only: the parent loop's input)
phase / tool / sub-agent activity ─▶ status board (progress mode, or ``subagents = "status"``)

Events on the ``pipeline`` lane (``"lane": "pipeline"``) never reach a channel. A sub-agent's events (``source``
set) never reach the root's answer: they give its status line and, at its ``end``, one ``message`` unit.

:func:`commit_point` is the one place where the answer becomes visible after all checks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from core.clock import Clock
from core.delivery.agents import SubAgents
from core.delivery.answer import AnswerStream
from core.delivery.conversation import open_conversation
from core.delivery.modes import ModeHandler
from core.delivery.reasoning import ReasoningView
from core.delivery.reconciler import Reconciler, Slot
from core.delivery.status import StatusBoard, redacted_args
from core.delivery.threads import ChildThreads
from core.events import (
    Commit,
    DeliveryMode,
    End,
    EndStatus,
    ErrorEvent,
    Event,
    Lane,
    Phase,
    RunStart,
    Source,
    Status,
    Target,
    TextEvent,
    ToolCall,
    ToolCallState,
    ToolResult,
    Visibility,
)
from core.ledger import Ledger, RunRecord
from core.monitor import RunMonitor, progress_event
from core.pipeline import ArgsValidator, PipelineLane, ToolCallCollector
from core.policy import ChannelPolicy, ReasoningPolicy, SubagentPolicy
from core.ports import ChannelAdapter, TextFormat
from core.report import DeliveryReport, ReportStatus, SlotRole, summarize
from core.send_chain import SendChain
from core.visible import Split, VisibleText, visible_final

_log = logging.getLogger("streamrelay.run")

FAILURE_NOTICE = "⚠️ Sorry, something went wrong and the answer could not be finished."
PROGRESS_TITLE = "Working on it…"
PROGRESS_DONE = "Done."
PROGRESS_FAILED = "Failed before the answer was ready."
PROGRESS_FAILED_AFTER = "Failed after the answer was ready."
PROGRESS_STOPPED = "Stopped."
STOPPED_NOTICE = "⏹ Stopped."
IDLE_NOTICE = "⚠️ The answer stopped here: the agent did not finish it."


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
    """

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
    ) -> None:
        self.run = start.run
        self.start_event = start
        self.policy = policy
        self._ledger = ledger
        self._clock = clock
        self.lane = lane if lane is not None else PipelineLane(start.run)
        self.monitor = monitor if monitor is not None else RunMonitor(start.run)
        self._platform = adapter.platform
        self._shown_live: dict[Any, str] | None = {} if policy.live_text else None
        """The text each part shows, when the run's watchers see it (``policy.live_text``)."""
        conversation = open_conversation(
            run=start.run,
            policy=policy,
            adapter=adapter,
            chain=chain,
            target=start.target,
            ledger=ledger,
            clock=clock,
            retry_window_s=retry_window_s,
        )
        self.rec: Reconciler = conversation.rec
        self.mode: ModeHandler = conversation.mode
        self.rec.on_delivery = self._delivered
        self.text = VisibleText(opened=policy.reasoning_opened, delta_replay_guard=policy.delta_replay_guard)
        self.answer = AnswerStream(self.text.answers)
        self.reasoning: ReasoningView | None = None
        if policy.reasoning is ReasoningPolicy.SHOWN and policy.delivery is not DeliveryMode.PROGRESS:
            measure = adapter.measure
            self.reasoning = ReasoningView(
                self.rec, self.text.reasoning, lambda t: measure(t, TextFormat.PLAIN), policy.max_units
            )
        self.tools = ToolCallCollector(validator)
        progress = policy.delivery is DeliveryMode.PROGRESS
        self.board = StatusBoard(title=PROGRESS_TITLE if progress else "", show_progress=progress)
        self._status_slot: Slot | None = None
        threads: ChildThreads | None = None
        # Progress mode shows no unchecked text before the commit point: children stay status lines there.
        if policy.subagents is SubagentPolicy.THREAD and chain_for is not None and not progress:
            threads = ChildThreads(
                run=start.run,
                policy=policy,
                adapter=adapter,
                target=start.target,
                root=self.rec,
                chain_for=chain_for,
                release=release or (lambda _target: None),
                ledger=ledger,
                clock=clock,
                answers=self.text.answers,
                on_delivery=self._thread_delivered,
                retry_window_s=retry_window_s,
            )
            if not threads.available:
                _log.info("subagents = thread: %s; sub-agents show as status lines", threads.refusal)
                threads = None
        self.agents = SubAgents(
            text=self.text,
            tools=self.tools,
            lane=self.lane,
            monitor=self.monitor,
            threads=threads,
            refresh=self._refresh_status,
        )
        self.committed: str | None = None
        self.errors: list[str] = []
        self.ended: End | None = None
        self.done = False

    @property
    def pipeline(self) -> list[dict[str, Any]]:
        """The run's pipeline units so far."""
        return self.lane.units

    async def open(self) -> None:
        """Record the run and restore parts delivered before a restart; start delivering."""
        await self._ledger.start_run(
            RunRecord(
                run=self.run,
                channel=self.policy.name,
                target=self.start_event.target.model_dump(mode="json"),
                mode=str(self.policy.delivery),
            )
        )
        self.rec.restore(await self._ledger.parts(self.run))
        self.monitor.publish("run", channel=self.policy.name, platform=self._platform, mode=str(self.policy.delivery))
        if self.policy.delivery is DeliveryMode.PROGRESS:
            self._refresh_status()
        self.rec.start()

    # --- events -----------------------------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        """Apply one in-order event (never the root's ``end``: see :meth:`close`)."""
        if event.lane is Lane.PIPELINE and isinstance(event, TextEvent | ToolResult | Phase | Status):
            return  # meant for the parent loop only (from any agent): never shown
        if (progress := progress_event(event)) is not None:
            self.monitor.publish(progress[0], **progress[1])
        if isinstance(event, ToolCall):
            self._on_tool_call(event)
        elif event.source is not None:
            self.agents.handle(event)
        elif isinstance(event, TextEvent):
            self._on_text(event)
        elif isinstance(event, ToolResult | Phase | Status):
            self._on_progress(event)
        elif isinstance(event, Commit):
            text = self.answer.text() if event.text is None else visible_final(event.text, self.text.opened)
            commit_point(self, text)
        elif isinstance(event, ErrorEvent):
            self.errors.append(event.message)
        elif event.kind in ("block_end", "message_end"):
            if event.kind == "message_end":
                self._show_all(self.text.flush(None, event.message))
            self.mode.on_boundary(message_end=event.kind == "message_end")

    def _on_progress(self, event: ToolResult | Phase | Status) -> None:
        if isinstance(event, ToolResult):
            self.board.tool_finished(event.name or "tool", event.summary)
        elif isinstance(event, Phase):
            self.board.phase(event.name)
        else:
            self.board.note(event.text)
        self._refresh_status()

    def _on_text(self, event: TextEvent) -> None:
        if event.visibility is Visibility.STATUS:
            self.board.note(event.text)
            self._refresh_status()
            return
        self._show(self.text.apply(event))

    def _show_all(self, splits: list[Split]) -> None:
        for split in splits:
            self._show(split)

    def _show(self, split: Split) -> None:
        """Hand a root text change to the delivery mode (the answer) and the reasoning message."""
        if split.reasoning is not None and self.reasoning is not None:
            self.reasoning.changed()
        if split.answer is None:
            return
        linear = self.answer.apply(split.message, split.answer)
        if linear is not None and self.committed is None and not self.mode.show_answer_at_commit():
            self.mode.on_answer(linear, split.message)
            if linear.reset:
                self.monitor.publish("answer", text=linear.text, reset=True)
            else:
                self.monitor.publish("answer", delta=linear.text)

    def _on_tool_call(self, event: ToolCall) -> None:
        """Any source's tool call: progress for people, a pipeline unit once its arguments are complete."""
        shown = event.lane is Lane.UI
        child = event.source is not None and self.policy.subagents is not SubagentPolicy.HIDDEN and shown
        if event.state is ToolCallState.START and shown:
            if event.source is None:
                self.board.tool_started(event.id, event.name or "tool")
            elif child:
                self.agents.tool_started(event.source, event.name or "tool")
            self._refresh_status()
        unit = self.tools.feed(event)
        if unit is None:
            return
        self.lane.emit(unit)
        if not shown:
            return  # a call on the pipeline lane is the parent loop's alone
        malformed = unit["kind"] != "tool_call"
        self.monitor.publish(
            "tool_call",
            call_id=event.id,
            name=unit.get("name"),
            args="" if malformed else redacted_args(unit["args"]),
            malformed=malformed,
            source=unit.get("source"),
        )
        if event.source is None and unit["kind"] == "tool_call" and shown:
            self.board.tool_called(event.id, event.name or "tool", unit["args"])
            self._refresh_status()

    def _thread_delivered(self, source: Source, fact: dict[str, Any]) -> None:
        """A call in a sub-agent's thread, for watchers (its own row: ``<channel> ↳ <agent>``)."""
        fact.pop("text", None)
        self.monitor.publish("delivery", channel=f"{self.policy.name} ↳ {source.agent_id}", **fact)

    def _delivered(self, fact: dict[str, Any]) -> None:
        """A call's outcome, for watchers. With ``policy.live_text`` (the web channel, whose page is the chat) the
        part's text too: as ``append`` when it extends what was shown (so a growing part costs its length once, not
        once per edit), else whole."""
        text = fact.pop("text", "")
        if self._shown_live is not None:
            part, before = fact["part"], self._shown_live.get(fact["part"], "")
            if before and text.startswith(before):
                if len(text) > len(before):
                    fact["append"] = text[len(before) :]
            else:
                fact["text"] = text
            self._shown_live[part] = text
        self.monitor.publish("delivery", channel=self.policy.name, **fact)

    def _refresh_status(self) -> None:
        lines = self.agents.status_lines() if self.policy.subagents is not SubagentPolicy.HIDDEN else []
        text = self.board.render(lines)
        if self._status_slot is None:
            if not text:
                return
            self._status_slot = self.rec.claim_slot(SlotRole.STATUS, text, TextFormat.PLAIN)
        else:
            self.rec.set_text(self._status_slot, text)

    # --- time and the end -------------------------------------------------------------------------------

    def deadline(self) -> float | None:
        return self.mode.deadline()

    def tick(self) -> None:
        self.mode.tick()

    async def close(self, end: End, *, idle: bool = False) -> DeliveryReport:
        """Finalize: show the committed final exactly once (or a clear failure), then wait for delivery.

        ``idle``: the agent stopped sending (``run_idle_timeout_s``): the person keeps what the answer shows
        (a block run also gets its pending text), never committed, and a short notice that it stopped there."""
        self.ended = end
        self.rec.stop_typing()
        for unit in self.tools.close():
            self.lane.emit(unit)
        self._show_all(self.text.flush(None))
        ok = end.status is EndStatus.OK
        if ok:
            final = visible_final(end.final_text, self.text.opened) if end.final_text is not None else self.committed
            if final is None:
                final = self.answer.text()
            if final != self.committed:
                commit_point(self, final)
        if self.reasoning is not None:
            self.reasoning.finish()
        cancelled = end.status is EndStatus.CANCELLED
        self.agents.children.stop_unfinished()
        if self.policy.delivery is DeliveryMode.PROGRESS:
            failed = PROGRESS_FAILED_AFTER if self.committed is not None else PROGRESS_FAILED
            self.board.title = PROGRESS_DONE if ok else (PROGRESS_STOPPED if cancelled else failed)
        self._refresh_status()
        if cancelled:
            self.rec.drop_unsent(SlotRole.ANSWER)  # the person asked to stop: nothing more of the answer
            self.rec.claim_slot(SlotRole.NOTICE, STOPPED_NOTICE, TextFormat.PLAIN)
        elif idle:
            if self.committed is None and not self.mode.show_answer_at_commit():
                self.mode.on_boundary(message_end=True)  # what it has, drained; never committed
            self.rec.claim_slot(SlotRole.NOTICE, IDLE_NOTICE, TextFormat.PLAIN)
        elif not ok:
            detail = "\n".join(f"• {e}" for e in self.errors)
            self.rec.claim_slot(SlotRole.NOTICE, f"{FAILURE_NOTICE}\n{detail}".strip(), TextFormat.PLAIN)
        self.lane.close(str(end.status), committed=self.committed is not None)
        if self.agents.threads is not None:
            await self.agents.threads.finish()
        await self.rec.finish()
        await self._ledger.end_run(self.run, str(end.status), self.errors)
        self.done = True
        report = self.report()
        self.monitor.publish("end", status=str(end.status), delivery=str(report.status))
        return report

    def fail(self, reason: str) -> None:
        """Mark the run finished and failed without finalizing (an internal error stopped it)."""
        self.errors.append(reason)
        if self.ended is None:
            self.ended = End(run=self.run, status=EndStatus.ERROR)
        self.lane.close(str(EndStatus.ERROR), committed=self.committed is not None)
        self.monitor.publish("end", status=str(EndStatus.ERROR), delivery=str(ReportStatus.FAILED))
        self.done = True

    async def abort(self) -> None:
        """Stop delivering without finalizing (service shutdown)."""
        if self.agents.threads is not None:
            await self.agents.threads.cancel()
        await self.rec.cancel()

    def report(self) -> DeliveryReport:
        end_status = str(self.ended.status) if self.ended else None
        report = summarize(self.run, self.policy.name, self.rec.parts(), done=self.done, end_status=end_status)
        report.errors = self.errors + report.errors
        return report


def commit_point(run: RunController, text: str) -> None:
    """THE commit point: the answer passed its checks and may be shown (and acted on).

    Called by a ``commit`` event, or by ``end`` with status ``ok`` (no verifier is configured, so the end
    itself is the check; an ``end`` whose ``final_text`` differs from the committed text commits it
    again, since ``final_text`` is authoritative). Before it, progress mode shows no answer text at all;
    after it, later drafts are ignored and finalization shows exactly the committed text, once. The first
    commit puts a ``commit`` unit on the pipeline lane: from then on the action gate lets compensable and
    irreversible tool calls of this run go (:mod:`core.gate`).
    """
    first = run.committed is None
    run.committed = text
    run.mode.finalize(text)
    if first:
        run.lane.emit({"kind": "commit"})
        run.monitor.publish("decision", what="commit")
    run.monitor.publish("answer", text=text, reset=True, final=True)
