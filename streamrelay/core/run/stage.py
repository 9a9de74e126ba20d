"""The run stage: one run's events in, the chat state it should show out. Pure: no call, no wait, no ledger.

text ─▶ visible text (answer | reasoning, per source) ─▶ answer stream ─▶ delivery mode ─▶ slot book (desired)
                                                   └▶ reasoning message (``reasoning = "shown"``)
tool_call, a child's end, commit ─▶ pipeline lane (complete, checked units only: the parent loop's input)
phase / tool / sub-agent activity ─▶ status board (progress mode, or ``subagents = "status"``) ─▶ slot book
everything ─▶ run monitor (what watchers see)

The stage is deterministic: the same events give the same desired state, which is how a restarted sidecar
rebuilds a run from its journal. Downstream of the slot book, the :class:`~core.delivery.reconciler.Reconciler`
plans and performs the calls (:mod:`core.run.controller` wires the two and does the run's I/O).

Events on the ``pipeline`` lane (``"lane": "pipeline"``) never reach a channel. A sub-agent's events (``source``
set) never reach the root's answer: they give its status line and, at its ``end``, one ``message`` unit.

:func:`commit_point` is the one place where the answer becomes visible after all checks.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import cast

from streamrelay.core.contracts.units import PipelineUnit
from streamrelay.core.delivery.agents import SubAgents
from streamrelay.core.delivery.answer import MESSAGE_SEPARATOR, AnswerStream
from streamrelay.core.delivery.modes import ModeHandler
from streamrelay.core.delivery.reasoning import ReasoningView
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import Slot
from streamrelay.core.delivery.sources import SourceList, with_sources
from streamrelay.core.delivery.status import StatusBoard, redacted_args
from streamrelay.core.delivery.threads import ChildThreads
from streamrelay.core.events import (
    ApprovalDecision,
    ApprovalRequest,
    BlockEnd,
    Citation,
    Commit,
    DeliveryMode,
    End,
    EndStatus,
    ErrorEvent,
    Event,
    JoinedDeltas,
    Lane,
    Media,
    MessageEnd,
    Phase,
    RunEvent,
    RunStart,
    Status,
    TextDelta,
    TextEvent,
    TextMode,
    ToolCall,
    ToolCallState,
    ToolResult,
    Visibility,
)
from streamrelay.core.lanes.pipeline import ApprovalDecided, FinishedCall, PipelineLane, ToolCallCollector
from streamrelay.core.policy import ChannelPolicy, ReasoningPolicy, SubagentPolicy
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.report import DeliveryReport, ReportStatus, SlotRole, summarize
from streamrelay.core.run.approvals import Approval, ApprovalBook, approval_control
from streamrelay.core.run.monitor import RunMonitor
from streamrelay.core.text.safe_text import UNSAFE, safe_event, safe_text
from streamrelay.core.text.think import opened_by_template
from streamrelay.core.text.visible import Split, VisibleText, visible_final

_NOT_PLAIN = re.compile(UNSAFE.pattern[:-1] + "\ud800-\udfff]")
"""A character that :func:`safe_text` changes, or a surrogate (:func:`core.events.fix_surrogates`): a text without
one is passed on unchanged by both."""
_DELTA, _ANSWER, _UI = TextMode.DELTA, Visibility.ANSWER, Lane.UI
"""The common event's enum members, looked up once (an enum member's lookup on its class costs a call)."""
_SHOWN_KINDS = (TextEvent, ToolResult, Phase, Status, Media, Citation)
"""Event kinds that are for people: on the ``pipeline`` lane they are the parent loop's alone, never shown."""
_AT_THE_END = (DeliveryMode.FINAL, DeliveryMode.PROGRESS)
"""Modes that show the answer, and so its media, only once committed."""
FAILURE_NOTICE = "⚠️ Sorry, something went wrong and the answer could not be finished."
PROGRESS_TITLE = "Working on it…"
PROGRESS_DONE = "Done."
PROGRESS_FAILED = "Failed before the answer was ready."
PROGRESS_FAILED_AFTER = "Failed after the answer was ready."
PROGRESS_STOPPED = "Stopped."
STOPPED_NOTICE = "⏹ Stopped."
IDLE_NOTICE = "⚠️ The answer stopped here: the agent did not finish it."


class RunStage:
    """One run's stage: applies its in-order events and writes what the chat should show into slot books.

    Args:
        start: the run's ``run.start`` event.
        policy: the channel's delivery policy.
        book: the root conversation's slot book (restored from the ledger before the first event).
        mode: the root conversation's delivery mode, writing ``book``.
        measure: a text's length in the platform's unit (``ChannelAdapter.measure`` of plain text).
        tools: completes tool calls and checks their arguments.
        lane: the run's pipeline lane.
        monitor: the run's live progress for watchers.
        threads: the children's threads (``subagents = "thread"`` where the platform has them), else None.
    """

    __slots__ = (
        "_approval_slots",
        "_at_commit",
        "_decided",
        "_held",
        "_hold_next",
        "_native_status",
        "_root_line",
        "_status_slot",
        "agents",
        "answer",
        "approval_buttons",
        "approvals",
        "board",
        "book",
        "committed",
        "done",
        "ended",
        "errors",
        "lane",
        "mode",
        "monitor",
        "policy",
        "reasoning",
        "run",
        "sources",
        "sources_changes",
        "sources_shown",
        "start_event",
        "text",
        "tools",
    )

    def __init__(
        self,
        *,
        start: RunStart,
        policy: ChannelPolicy,
        book: SlotBook,
        mode: ModeHandler,
        measure: Callable[[str], int],
        tools: ToolCallCollector,
        lane: PipelineLane,
        monitor: RunMonitor,
        threads: ChildThreads | None,
    ) -> None:
        self.run = start.run
        self.start_event = start
        self.policy = policy
        self.book = book
        self.mode = mode
        self._at_commit = mode.show_answer_at_commit()
        """The mode holds the answer back until the commit point (fixed for its kind: progress)."""
        self.lane = lane
        self.monitor = monitor
        self.text = VisibleText(opened=policy.reasoning_opened, delta_replay_guard=policy.delta_replay_guard)
        self.answer = AnswerStream(self.text.answers)
        answer = self.text.answers.view(None, MESSAGE_SEPARATOR)  # one copy of the answer: the others read its ranges
        monitor.share_answer(answer)
        mode.share_answer(answer)
        self.reasoning: ReasoningView | None = None
        if policy.reasoning is ReasoningPolicy.SHOWN and policy.delivery is not DeliveryMode.PROGRESS:
            self.reasoning = ReasoningView(book, self.text.reasoning, measure, policy.rendered_max)
        self.tools = tools
        progress = policy.delivery is DeliveryMode.PROGRESS
        self.board = StatusBoard(title=PROGRESS_TITLE if progress else "", show_progress=progress)
        self._status_slot: Slot | None = None
        self._native_status = policy.delivery is DeliveryMode.NATIVE
        """The run's status line goes to the slot book for a native stream that shows one (:meth:`_stream_status`)."""
        self._root_line = ""
        """The root's latest progress line (what its native stream's status line shows first)."""
        self.agents = SubAgents(
            text=self.text, tools=tools, lane=lane, monitor=monitor, threads=threads, fmt=policy.fmt
        )
        self.sources = SourceList()
        """The root's sources (``citation`` events): listed after the committed answer (:func:`commit_point`)."""
        self.sources_shown = 0
        """:attr:`sources`' changes the last commit showed (a later change commits the same answer again at the end)."""
        self.sources_changes = 0
        self.committed: str | None = None
        self.errors: list[str] = []
        self.ended: End | None = None
        self.done = False
        self.approvals = ApprovalBook()
        """The run's approvals as admission took them (the controller shares its book: :mod:`core.run.approvals`)."""
        self._approval_slots: dict[str, Slot] = {}
        self._decided: set[str] = set()
        self._hold_next: str | None = None
        """The approval asked for the tool call whose ``end`` comes next (admission puts a hold's request right before
        it: :meth:`core.ingest.admission.Admission.hold_calls`)."""
        self._held: dict[str, FinishedCall] = {}
        """Complete calls kept off the pipeline lane until their approval is decided (:mod:`core.lanes.hold`)."""
        self.approval_buttons = False
        """The channel's adapter can show buttons (:class:`core.ports.StopControls`): an approval's message carries
        Approve and Deny (else it shows the question alone, e.g. on the web channel; a bot still forwards a
        decision)."""

    @property
    def pipeline(self) -> list[PipelineUnit]:
        """The run's pipeline units so far."""
        return self.lane.units

    def opened(self, platform: str) -> None:
        """The run's conversation is restored and delivering: tell watchers; progress mode shows its board."""
        self.monitor.publish("run", channel=self.policy.name, platform=platform, mode=str(self.policy.delivery))
        if self.policy.delivery is DeliveryMode.PROGRESS:
            self._refresh_status()

    # --- events -----------------------------------------------------------------------------------------

    def handle(self, event: RunEvent) -> None:
        """Apply one in-order event (never the root's ``end``: see :meth:`close`)."""
        # The common event first: a root answer delta on the ui lane, plain text, the common line of each stage. It
        # comes as a TextDelta (admission's typed value of a plain line), or as a TextEvent whose fields are read from
        # the model's ``__dict__``: pydantic's ``BaseModel.__getattr__`` makes each attribute read take CPython's slow
        # lookup hook (about 130 ns against 40 here), and this is read once per event. Deltas joined for a batch
        # (JoinedDeltas) take it too, their ``replay_candidates`` given (:meth:`VisibleText.plain_delta` checks that
        # the guard can take none of them for a replay), so a batch of deltas is one plain append.
        if type(event) is TextDelta:
            message, text = event.message, event.text
            if not (text and _NOT_PLAIN.search(text) is None and self.text.plain_delta(message, text)):
                self._handle(event.event())  # the rare line: as the event it stands for
                return
        elif not (
            (type(event) is TextEvent or type(event) is JoinedDeltas)
            and (fields := event.__dict__)["source"] is None
            and fields["mode"] is _DELTA
            and fields["visibility"] is _ANSWER
            and fields["lane"] is _UI
            and (text := fields["text"])
            and _NOT_PLAIN.search(text) is None
            and self.text.plain_delta(message := fields["message"], text, fields.get("replay_candidates"))
        ):
            self._handle(cast(Event, event))  # (not a TextDelta: taken above)
            return
        # The common line: the root's answer ``message`` grew at its end by the plain ``text``.
        if self.committed is None and not self._at_commit:
            linear = self.answer.appended(message, text)
            self.mode.on_answer(linear, message)
            if linear.reset:
                self.monitor.publish("answer", text=linear.text, reset=True)
            else:
                self.monitor.answer_grew(linear.text)  # the shared answer grew at its end by exactly it
        else:
            self.answer.appended(message, text)

    def _handle(self, event: Event) -> None:
        """:meth:`handle` for any event."""
        if event.lane is Lane.PIPELINE and isinstance(event, _SHOWN_KINDS):
            return  # meant for the parent loop only (from any agent): never shown
        event = safe_event(event)  # THE point where text enters what people see (chats and watchers alike)
        self.monitor.progress(event)
        if isinstance(event, ToolCall):
            self._on_tool_call(event)
        elif isinstance(event, ApprovalRequest | ApprovalDecision):
            self._on_approval(event)  # any agent's: its own message in the run's conversation
        elif event.source is not None:
            if isinstance(event, Media) and self._child_media_shown_here():
                self._on_media(event)  # a child's media with status lines: its own message, never dropped
            if self.agents.handle(event):
                self._refresh_status()
        elif isinstance(event, TextEvent | Media | Citation):
            self._on_content(event)
        elif isinstance(event, ToolResult | Phase | Status):
            self._on_progress(event)
        elif isinstance(event, Commit):
            text = self._answer_text() if event.text is None else self._final_of(event.text)
            commit_point(self, text)
        elif isinstance(event, ErrorEvent):
            self.errors.append(event.message)
        elif isinstance(event, BlockEnd | MessageEnd):
            self._on_boundary(event)

    def _on_boundary(self, event: BlockEnd | MessageEnd) -> None:
        if isinstance(event, MessageEnd):
            self._show_all(self.text.flush(None, event.message))
        self.mode.on_boundary(message_end=isinstance(event, MessageEnd))

    def _final_of(self, text: str) -> str:
        """The answer of a whole final text (a ``commit`` or ``end``'s): :func:`visible_final`, read as opened when
        the channel says so or the text is one whose reasoning block the chat template opened
        (:func:`core.text.think.opened_by_template`: DeepSeek-R1 without a reasoning parser). O(len(text))."""
        return visible_final(text, self.text.opened or opened_by_template(text))

    def _answer_text(self) -> str:
        """The root's streamed answer as it is committed: :meth:`AnswerStream.text`, except that a message whose
        reasoning block the chat template opened (:func:`core.text.think.opened_by_template`: reasoning, then a
        line-starting ``</think>`` with no opener) gives only what follows the closer. Streamed, such a message showed
        whole (the closer cannot be known as one while it streams); the commit shows the answer. O(32k) per message
        to look, O(length) when one is such a message."""
        if self.text.opened:
            return self.answer.text()
        texts = [text for _, text in self.text.answers.messages(None)]
        if not any(opened_by_template(text) for text in texts):
            return self.answer.text()
        read = (visible_final(text, True) if opened_by_template(text) else text for text in texts)
        return MESSAGE_SEPARATOR.join(text for text in read if text)

    def _on_media(self, event: Media) -> None:
        """A root media item: its own message after the text so far (held-back text flushed first), before the
        text after it (:mod:`core.delivery.segments`). One the run's message limit leaves no room for is an error."""
        self._show_all(self.text.flush(None))
        item = event.item()
        slot = self.mode.on_media(item, self.answer.text())
        self.monitor.publish("media", url=item.url, media_kind=str(item.kind), caption=item.caption or "")
        if slot.over_limit:
            self.errors.append(f"{item.kind} {item.url} not sent: the run's message limit is reached")

    def _on_approval(self, event: ApprovalRequest | ApprovalDecision) -> None:
        if isinstance(event, ApprovalRequest):
            self._on_approval_request(event)
        else:
            self._on_approval_decision(event)

    def _on_approval_request(self, event: ApprovalRequest) -> None:
        """An approval asked (:mod:`core.run.approvals`): its own message after the text so far (held-back text
        flushed first), saying what is asked and who may decide, with Approve and Deny buttons. Admission took the
        request first (:attr:`approvals` has it: who may decide, its expiry)."""
        approval = self.approvals.items.get(event.id)
        if approval is None or event.id in self._approval_slots:
            return  # a request admission refused never gets here; a repeated id changes nothing
        if event.id in self.approvals.holds:
            self._hold_next = event.id  # the gate's hold: the call it holds ends next
        self._show_all(self.text.flush(None))
        slot = self.book.claim_slot(SlotRole.APPROVAL, _approval_text(approval, None), TextFormat.PLAIN)
        if slot.over_limit:
            self.errors.append(f"approval {event.id!r} not shown: the run's message limit is reached")
            return
        if self.approval_buttons:
            slot.buttons = approval_control(self.run, event.id)
        self._approval_slots[event.id] = slot
        self.monitor.publish("decision", what="approval", call_id=event.id, verdict="pending", reason=event.question)
        self._publish_approval(approval, "pending")

    def _on_approval_decision(self, event: ApprovalDecision) -> None:
        """An approval decided (journaled once: :func:`core.run.approvals.decide`): the ``approval`` unit on the
        pipeline lane, its message edited to say the decision and who made it, its buttons taken off. A call it held
        (:mod:`core.lanes.hold`) follows its unit onto the lane when approved, and never when not."""
        held = self._held.pop(event.id, None)
        self.lane.held.pop(event.id, None)
        call = held.id if held is not None else None
        self.lane.emit(ApprovalDecided(event.id, event.decision, event.approved, event.by, event.at, call=call))
        if held is not None and event.approved:
            self.lane.emit(dataclasses.replace(held, approval=event.id))
        self._decided.add(event.id)
        approval = self.approvals.items.get(event.id)
        slot = self._approval_slots.get(event.id)
        if approval is not None and slot is not None:
            slot.buttons = None
            self.book.set_text(slot, _approval_text(approval, event))
        self.monitor.publish("decision", what="approval", call_id=event.id, verdict=event.decision, reason=event.by)
        if approval is not None:
            self._publish_approval(dataclasses.replace(approval, decision=event), "decided")

    def _close_approvals(self) -> None:
        """The run ends: an approval still undecided shows so, without buttons (a press now would decide nothing)."""
        for approval_id, slot in self._approval_slots.items():
            approval = self.approvals.items.get(approval_id)
            if approval is not None and approval_id not in self._decided:
                slot.buttons = None
                self.book.set_text(slot, dataclasses.replace(approval, decision=None).text(ended=True))
                self._publish_approval(dataclasses.replace(approval, decision=None), "ended")

    def _publish_approval(self, approval: Approval, state: str) -> None:
        """The approval as the live page shows it (an ``approval`` event: its card with Approve and Deny while
        ``pending``; decided, or ``ended`` undecided). Its question and action are made safe where published."""
        req, decision = approval.request, approval.decision
        self.monitor.publish(
            "approval",
            approval=req.id,
            state=state,
            question=req.question,
            action=req.action,
            approvers=list(approval.approvers),
            anyone=approval.anyone,
            expires_at=approval.expires_at,
            on_expiry=req.on_expiry,
            decision=decision.decision if decision else None,
            approved=decision.approved if decision else None,
            by=decision.by if decision else None,
            at=decision.at if decision else None,
        )

    def _child_media_shown_here(self) -> bool:
        """A sub-agent's media item is sent like the root's (its own message after the text so far, in the report's
        ``media_parts``) when the channel shows children as status lines (``subagents = "status"``, or ``thread``
        where the platform has no threads): status lines carry facts, not files, so it would otherwise be lost.
        With threads it goes in the child's thread; with ``hidden`` nothing of a child is shown."""
        return self.policy.subagents is not SubagentPolicy.HIDDEN and self.agents.threads is None

    def _on_progress(self, event: ToolResult | Phase | Status) -> None:
        if isinstance(event, ToolResult):
            self.board.tool_finished(event.name or "tool", event.summary)
            self._root_line = f"{event.name or 'tool'}: {event.summary.strip() or 'done'}"
        elif isinstance(event, Phase):
            self.board.phase(event.name)
            self._root_line = event.name
        else:
            self.board.note(event.text)
            self._root_line = event.text
        self._refresh_status()

    def _on_content(self, event: TextEvent | Media | Citation) -> None:
        """The root's answer content: text, a media item between its text, or a source (listed after the answer)."""
        if isinstance(event, Citation):
            if self.sources.add(event.url, event.title):
                self.sources_changes += 1
            return
        if isinstance(event, Media):
            self._on_media(event)
            return
        if event.visibility is Visibility.STATUS:
            self.board.note(event.text)
            self._root_line = event.text
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
        if linear is not None and self.committed is None and not self._at_commit:
            self.mode.on_answer(linear, split.message)
            if linear.reset:
                self.monitor.publish("answer", text=linear.text, reset=True)
            else:
                self.monitor.answer_delta(linear.text)

    def _on_tool_call(self, event: ToolCall) -> None:
        """Any source's tool call: progress for people, a pipeline unit once its arguments are complete. The
        call goes to the pipeline lane as it came; its name is sanitized where people see it."""
        shown = event.lane is Lane.UI
        tool = safe_text(event.name or "tool")
        child = event.source is not None and self.policy.subagents is not SubagentPolicy.HIDDEN and shown
        if event.state is ToolCallState.START and shown:
            if event.source is None:
                self.board.tool_started(event.id, tool)
                self._root_line = f"using {tool}"
            elif child:
                self.agents.tool_started(event.source, tool)
            self._refresh_status()
        call = self.tools.feed(event)
        if call is None:
            return
        hold, self._hold_next = self._hold_next, None
        if hold is not None and not call.malformed:
            self._held[hold] = call  # a person decides first (core/lanes/hold.py)
            self.lane.held[hold] = (call.id, call.source.key if call.source is not None else "root")
        else:
            self.lane.emit(call)
        if not shown:
            return  # a call on the pipeline lane is the parent loop's alone
        self.monitor.publish(
            "tool_call",
            call_id=event.id,
            name=safe_text(call.name) if call.name is not None else None,
            args=redacted_args(call.args) if call.args is not None else "",
            malformed=call.malformed,
            source=call.source.model_dump() if call.source is not None else None,
        )
        if event.source is None and call.args is not None:
            self.board.tool_called(event.id, tool, call.args)
            self._refresh_status()

    def _refresh_status(self) -> None:
        if self._native_status:
            self._stream_status()
        if not self.policy.edits and self.ended is None:
            return  # a platform that cannot edit (WhatsApp) gets the status board once, as it stands at the end
        lines = self.agents.status_lines() if self.policy.subagents is not SubagentPolicy.HIDDEN else []
        text = self.board.render(lines, max_chars=self.policy.max_units // 2)  # UTF-16 units: 2 per character at most
        if self._status_slot is None:
            if not text:
                return
            self._status_slot = self.book.claim_slot(SlotRole.STATUS, text, TextFormat.PLAIN)
        else:
            self.book.set_text(self._status_slot, text)

    def _stream_status(self) -> None:
        """The run's status line for a native stream that shows one (:meth:`SlotBook.set_stream_status`): the root's
        latest progress (a phase, a ``status`` event or text, a tool starting or its result) and each sub-agent's
        line when they show as status lines (not in threads, not hidden); control and bidi characters removed."""
        lines = [self._root_line] if self._root_line.strip() else []
        if self.policy.subagents is not SubagentPolicy.HIDDEN and self.agents.threads is None:
            lines.extend(line.strip() for line in self.agents.children.lines())
        self.book.set_stream_status(safe_text("\n".join(line for line in lines if line)))

    # --- time and the end -------------------------------------------------------------------------------

    def deadline(self) -> float | None:
        return self.mode.deadline()

    def tick(self) -> None:
        self.mode.tick()

    def end(self, end: End, *, idle: bool = False) -> None:
        """The root's ``end``: the final chat state (the committed final exactly once, or a clear failure), the
        pipeline lane closed. The conversations then deliver it (:meth:`core.run.controller.RunController.close`).

        ``idle``: the agent stopped sending (``run_idle_timeout_s``): the person keeps what the answer shows
        (a block run also gets its pending text), never committed, and a short notice that it stopped there."""
        end = safe_event(end)  # its final_text is shown: sanitized like every event's text (:meth:`handle`)
        self.ended = end
        self._close_approvals()
        for unit in self.tools.close():
            self.lane.emit(unit)
        self._show_all(self.text.flush(None))
        ok = end.status is EndStatus.OK
        if ok:
            final = self._final_of(end.final_text) if end.final_text is not None else self.committed
            if final is None:
                final = self._answer_text()
            if final != self.committed or self.sources_changes != self.sources_shown:
                commit_point(self, final)  # again when sources came after the commit: they are part of the final
        if self.reasoning is not None:
            self.reasoning.finish()
        cancelled = end.status is EndStatus.CANCELLED
        self.agents.children.stop_unfinished()
        if self.policy.delivery is DeliveryMode.PROGRESS:
            failed = PROGRESS_FAILED_AFTER if self.committed is not None else PROGRESS_FAILED
            self.board.title = PROGRESS_DONE if ok else (PROGRESS_STOPPED if cancelled else failed)
        self._refresh_status()
        if cancelled or (self.committed is None and self.policy.delivery in _AT_THE_END):
            self.book.drop_unsent(SlotRole.MEDIA)  # stopped, or the answer they belong in is never shown
        if cancelled:
            self.book.drop_unsent(SlotRole.ANSWER)  # the person asked to stop: nothing more of the answer
            self.book.claim_slot(SlotRole.NOTICE, STOPPED_NOTICE, TextFormat.PLAIN)
        elif idle:
            if self.committed is None and not self.mode.show_answer_at_commit():
                self.mode.on_boundary(message_end=True)  # what it has, drained; never committed
            self.book.claim_slot(SlotRole.NOTICE, IDLE_NOTICE, TextFormat.PLAIN)
        elif not ok:
            detail = "\n".join(f"• {e}" for e in self.errors)
            self.book.claim_slot(SlotRole.NOTICE, f"{FAILURE_NOTICE}\n{detail}".strip(), TextFormat.PLAIN)
        self.lane.close(str(end.status), committed=self.committed is not None)

    def fail(self, reason: str) -> None:
        """Mark the run finished and failed without finalizing (an internal error stopped it)."""
        self.errors.append(reason)
        if self.ended is None:
            self.ended = End(run=self.run, status=EndStatus.ERROR)
        self.lane.close(str(EndStatus.ERROR), committed=self.committed is not None)
        self.monitor.publish("end", status=str(EndStatus.ERROR), delivery=str(ReportStatus.FAILED))
        self.done = True

    def report(self) -> DeliveryReport:
        end_status = str(self.ended.status) if self.ended else None
        report = summarize(self.run, self.policy.name, self.book.parts(), done=self.done, end_status=end_status)
        report.errors = self.errors + report.errors
        return report


def commit_point(run: RunStage, text: str) -> None:
    """THE commit point: the answer passed its checks and may be shown (and acted on).

    Called by a ``commit`` event, or by ``end`` with status ``ok`` (no verifier is configured, so the end
    itself is the check; an ``end`` whose ``final_text`` differs from the committed text commits it
    again, since ``final_text`` is authoritative). Before it, progress mode shows no answer text at all;
    after it, later drafts are ignored and finalization shows exactly the committed text, once, followed by the run's
    sources as links (:func:`core.delivery.sources.with_sources`; sources that arrive after a ``commit`` are added at
    the ``end``). The first
    commit puts a ``commit`` unit on the pipeline lane: from then on the action gate lets compensable and
    irreversible tool calls of this run go (:mod:`core.lanes.gate`).
    """
    first = run.committed is None
    run.committed = text
    shown = with_sources(text, run.sources, run.policy.fmt)  # the run's sources as links after the answer, once
    run.sources_shown = run.sources_changes
    run.mode.finalize(shown)
    if first:
        run.lane.commit()
        run.monitor.publish("decision", what="commit")
    run.monitor.publish("answer", text=shown, reset=True, final=True)


def _approval_text(approval: Approval, decision: ApprovalDecision | None) -> str:
    """An approval's message as it stands with ``decision`` (None: pending). The book's approval may already hold a
    decision taken meanwhile: the message follows the events in order, never ahead of them."""
    return dataclasses.replace(approval, decision=decision).text()
