"""One run's delivery: routes its events through the stages to the channel, and finalizes it.

text ─▶ assembler ─▶ answer stream ─▶ delivery mode ─▶ reconciler ─▶ send chain ─▶ adapter
tool_call ─▶ pipeline collector (complete, parsed units only)
phase / tool / sub-agent activity ─▶ status board (progress mode, or ``subagents = "status"``)

:func:`commit_point` is the one place where the answer becomes visible after all checks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from core.assembler import TextAssembler
from core.clock import Clock
from core.delivery.answer import AnswerStream
from core.delivery.modes import ModeHandler, make_mode
from core.delivery.reconciler import Reconciler, Slot
from core.delivery.status import StatusBoard
from core.events import (
    Commit,
    DeliveryMode,
    End,
    EndStatus,
    ErrorEvent,
    Event,
    Phase,
    RunStart,
    Status,
    Target,
    TextEvent,
    TextMode,
    ToolCall,
    ToolCallState,
    ToolResult,
    Visibility,
    fix_surrogates,
)
from core.ledger import Ledger, RunRecord
from core.pipeline import ToolCallCollector
from core.policy import ChannelPolicy, Splitter, SubagentPolicy
from core.ports import ChannelAdapter, NativeStreaming, TextFormat
from core.report import DeliveryReport, ReportStatus, SlotRole, summarize
from core.send_chain import SendChain

_log = logging.getLogger("streamrelay.run")

FAILURE_NOTICE = "⚠️ Sorry, something went wrong and the answer could not be finished."
PROGRESS_TITLE = "Working on it…"
PROGRESS_DONE = "Done."
PROGRESS_FAILED = "Failed before the answer was ready."
PROGRESS_STOPPED = "Stopped."
STOPPED_NOTICE = "⏹ Stopped."

PipelineSink = Callable[[dict[str, Any]], None]


def native_streaming(policy: ChannelPolicy, adapter: ChannelAdapter, target: Target) -> NativeStreaming | None:
    """The adapter's native streaming when the channel asks for it and the platform allows it for ``target``
    (Slack: a thread; Telegram: a private chat); else None, and the run streams as ``preview``."""
    if policy.delivery is not DeliveryMode.NATIVE or not isinstance(adapter, NativeStreaming):
        return None
    refusal = adapter.native_refusal(target)
    if refusal is not None:
        _log.info("native streaming refused for this target (%s): streaming as preview", refusal)
        return None
    return adapter


class RunController:
    """Delivers one run to one channel target.

    Args:
        start: the run's ``run.start`` event.
        policy: the channel's delivery policy.
        adapter: the channel adapter.
        chain: the conversation's send chain (shared by every run to the same target).
        ledger: the durable record.
        clock: the injected clock.
        on_pipeline: called with every pipeline unit (complete tool calls, malformed ones).
    """

    def __init__(
        self,
        start: RunStart,
        policy: ChannelPolicy,
        adapter: ChannelAdapter,
        chain: SendChain,
        ledger: Ledger,
        clock: Clock,
        on_pipeline: PipelineSink | None = None,
    ) -> None:
        self.run = start.run
        self.start_event = start
        self.policy = policy
        self._ledger = ledger
        self._clock = clock
        self._on_pipeline = on_pipeline
        self.rec = Reconciler(
            run=start.run,
            adapter=adapter,
            chain=chain,
            target=start.target,
            ledger=ledger,
            clock=clock,
            throttle_s=policy.throttle_s
            if policy.delivery in (DeliveryMode.PREVIEW, DeliveryMode.NATIVE, DeliveryMode.PROGRESS)
            else 0.0,
            native=native_streaming(policy, adapter, start.target),
        )
        self.mode: ModeHandler = make_mode(policy, self.rec, Splitter(policy, adapter.measure), clock)
        self.assembler = TextAssembler()
        self.answer = AnswerStream(self.assembler)
        self.tools = ToolCallCollector(start.run)
        self.pipeline: list[dict[str, Any]] = []
        progress = policy.delivery is DeliveryMode.PROGRESS
        self.board = StatusBoard(title=PROGRESS_TITLE if progress else "", show_progress=progress)
        self._status_slot: Slot | None = None
        self.committed: str | None = None
        self.errors: list[str] = []
        self.ended: End | None = None
        self.done = False
        self._carry: dict[int, str] = {}

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
        if self.policy.delivery is DeliveryMode.PROGRESS:
            self._refresh_status()
        self.rec.start()

    # --- events -----------------------------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        """Apply one in-order event (never ``end``: see :meth:`close`)."""
        if event.source is not None:
            self._on_child(event)
        elif isinstance(event, TextEvent):
            self._on_text(event)
        elif isinstance(event, ToolCall):
            self._on_tool_call(event)
        elif isinstance(event, ToolResult):
            self.board.tool_finished(event.name or "tool", event.summary)
            self._refresh_status()
        elif isinstance(event, Phase):
            self.board.phase(event.name)
            self._refresh_status()
        elif isinstance(event, Status):
            self.board.note(event.text)
            self._refresh_status()
        elif isinstance(event, Commit):
            commit_point(self, event.text if event.text is not None else self.answer.text())
        elif isinstance(event, ErrorEvent):
            self.errors.append(event.message)
        elif event.kind in ("block_end", "message_end"):
            self.mode.on_boundary(message_end=event.kind == "message_end")

    def _on_text(self, event: TextEvent) -> None:
        if event.visibility is Visibility.REASONING:
            return  # reasoning never reaches a channel (``reasoning = "shown"`` arrives with issue 4)
        if event.visibility is Visibility.STATUS:
            self.board.note(event.text)
            self._refresh_status()
            return
        text = event.text
        if event.mode is TextMode.DELTA:
            # A surrogate pair split across deltas is joined; a lone surrogate becomes U+FFFD.
            text = self._carry.pop(event.message, "") + text
            if text and "\ud800" <= text[-1] <= "\udbff":
                self._carry[event.message], text = text[-1], text[:-1]
        change = self.assembler.apply(None, event.message, event.mode, fix_surrogates(text))
        linear = self.answer.apply(event.message, change)
        if linear is not None and self.committed is None and not self.mode.show_answer_at_commit():
            self.mode.on_answer(linear, event.message)

    def _on_tool_call(self, event: ToolCall) -> None:
        if event.state is ToolCallState.START:
            self.board.tool_started(event.name or "tool")
            self._refresh_status()
        unit = self.tools.feed(event)
        if unit is not None:
            self._emit(unit)

    def _on_child(self, event: Event) -> None:
        """A sub-agent's event: never part of the root answer; at most a status line."""
        assert event.source is not None
        if isinstance(event, ToolCall):
            unit = self.tools.feed(event)
            if unit is not None:
                self._emit(unit)
        if self.policy.subagents is SubagentPolicy.HIDDEN:
            return
        if isinstance(event, ToolCall) and event.state is ToolCallState.START:
            self.board.child_tool(event.source, event.name or "tool")
        elif isinstance(event, End):
            self.board.child_done(event.source, event.status is EndStatus.OK)
        else:
            self.board.child_seen(event.source)
        self._refresh_status()

    def _emit(self, unit: dict[str, Any]) -> None:
        self.pipeline.append(unit)
        if self._on_pipeline is not None:
            self._on_pipeline(unit)

    def _refresh_status(self) -> None:
        text = self.board.render()
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

    async def close(self, end: End) -> DeliveryReport:
        """Finalize: show the committed final exactly once (or a clear failure), then wait for delivery."""
        self.ended = end
        for unit in self.tools.close():
            self._emit(unit)
        ok = end.status is EndStatus.OK
        if ok:
            final = end.final_text if end.final_text is not None else self.committed
            if final is None:
                final = self.answer.text()
            if final != self.committed:
                commit_point(self, final)
        cancelled = end.status is EndStatus.CANCELLED
        self.board.all_children_done(ok)
        if self.policy.delivery is DeliveryMode.PROGRESS:
            self.board.title = PROGRESS_DONE if ok else (PROGRESS_STOPPED if cancelled else PROGRESS_FAILED)
        self._refresh_status()
        if cancelled:
            self.rec.drop_unsent(SlotRole.ANSWER)  # the person asked to stop: nothing more of the answer
            self.rec.claim_slot(SlotRole.NOTICE, STOPPED_NOTICE, TextFormat.PLAIN)
        elif not ok:
            detail = "\n".join(f"• {e}" for e in self.errors)
            self.rec.claim_slot(SlotRole.NOTICE, f"{FAILURE_NOTICE}\n{detail}".strip(), TextFormat.PLAIN)
        await self.rec.finish()
        await self._ledger.end_run(self.run, str(end.status))
        self.done = True
        return self.report()

    def fail(self, reason: str) -> None:
        """Mark the run finished and failed without finalizing (an internal error stopped it)."""
        self.errors.append(reason)
        if self.ended is None:
            self.ended = End(run=self.run, status=EndStatus.ERROR)
        self.done = True

    async def abort(self) -> None:
        """Stop delivering without finalizing (service shutdown)."""
        await self.rec.cancel()

    def report(self) -> DeliveryReport:
        report = summarize(self.run, self.policy.name, self.rec.parts(), done=self.done)
        report.end_status = str(self.ended.status) if self.ended else None
        report.errors = self.errors + report.errors
        if (
            self.done
            and report.status is ReportStatus.DELIVERED
            and self.ended is not None
            and (self.ended.status is not EndStatus.OK)
        ):
            report.status = ReportStatus.PARTIAL if report.confirmed else ReportStatus.FAILED
        return report


def commit_point(run: RunController, text: str) -> None:
    """THE commit point: the answer passed its checks and may be shown (and acted on).

    Called by a ``commit`` event, or by ``end`` with status ``ok`` (no verifier is configured, so the end
    itself is the check; an ``end`` whose ``final_text`` differs from the committed text commits it
    again, since ``final_text`` is authoritative). Before it, progress mode shows no answer text at all;
    after it, later drafts are ignored and finalization shows exactly the committed text, once.
    """
    run.committed = text
    run.mode.finalize(text)
