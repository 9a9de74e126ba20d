"""Sub-agents of one run, as the run controller hands them on: each child's events become its status line,
its text (kept apart from the root's answer), its thread (``subagents = "thread"``), what watchers see of it
(the run monitor's ``agent`` events) and, at its ``end``, one complete unit on the pipeline lane.
"""

from __future__ import annotations

from streamrelay.core.delivery.answer import AnswerChange, AnswerStream
from streamrelay.core.delivery.sources import SourceList, with_sources
from streamrelay.core.delivery.threads import ChildThreads
from streamrelay.core.events import (
    Citation,
    End,
    EndStatus,
    ErrorEvent,
    Event,
    Media,
    Source,
    TextEvent,
    ToolResult,
    Visibility,
)
from streamrelay.core.lanes.pipeline import PipelineLane, ToolCallCollector
from streamrelay.core.ports import TextFormat
from streamrelay.core.run.monitor import RunMonitor
from streamrelay.core.run.subagents import Children, message_unit
from streamrelay.core.text.visible import VisibleText, visible_final


class SubAgents:
    """The run's children.

    Args:
        text: the run's visible texts (children's under their source keys).
        tools: the run's tool-call collector (a child's open calls are cut off at its end).
        lane: the run's pipeline lane.
        monitor: the run's live progress.
        threads: the children's threads, when the channel shows them so (else None: status lines or nothing).
        fmt: the channel's text format (a child's sources are listed after its text in its thread in it).

    A child's ``citation`` events are its own, like its text: never in the root's answer; listed after its final
    text in its thread (``subagents = "thread"``), and given to the parent loop with its ``message`` unit.
    """

    __slots__ = ("_fmt", "_lane", "_monitor", "_sources", "_streams", "_text", "_tools", "children", "threads")

    def __init__(
        self,
        *,
        text: VisibleText,
        tools: ToolCallCollector,
        lane: PipelineLane,
        monitor: RunMonitor,
        threads: ChildThreads | None,
        fmt: TextFormat = TextFormat.MARKDOWN,
    ) -> None:
        self.children = Children()
        self._sources: dict[str, SourceList] = {}
        self._fmt = fmt
        self._streams: dict[str, AnswerStream] = {}
        self.threads = threads
        self._text = text
        self._tools = tools
        self._lane = lane
        self._monitor = monitor

    def handle(self, event: Event) -> bool:
        """A child's event (any kind but a tool call: see :meth:`tool_started`). True when the children's status
        lines changed (the run re-renders its status)."""
        source = event.source
        assert source is not None
        if isinstance(event, TextEvent) and event.visibility is not Visibility.STATUS:
            split = self._text.apply(event)
            first = source.key not in self.children  # its first sign of life is news (and, as a thread, its anchor)
            if first:
                self.children.seen(source)
            if split.answer is not None:
                if first and self.threads is not None:
                    self.status_lines()  # the anchor (its status message) is claimed before the thread opens
                self._changed(source, split.message, self._linear(source).apply(split.message, split.answer))
            return first
        if isinstance(event, Media):
            return self._media(source, event)
        if isinstance(event, Citation):
            first = source.key not in self.children
            self.children.seen(source)
            self._sources.setdefault(source.key, SourceList()).add(event.url, event.title)
            return first
        if isinstance(event, End):
            self._end(source, event)
        elif isinstance(event, ToolResult):
            self.children.tool_finished(source, event.name or "tool", event.summary)
        elif isinstance(event, ErrorEvent):
            self.children.failed(source)
        else:
            self.children.seen(source)
        self._publish(source)
        return True

    def _media(self, source: Source, event: Media) -> bool:
        """A child's media item: in its thread, in order with its text (``subagents = "thread"``); with status lines
        the run stage sends it as its own message (:meth:`core.run.stage.RunStage._child_media_shown_here`) and the
        child's line says so; with ``hidden`` it is not shown, like the child's text."""
        first = source.key not in self.children
        self.children.media(source, event.media_kind)
        if self.threads is not None:
            if first:
                self.status_lines()  # the anchor (its status message) is claimed before the thread opens
            self.threads.media(source, event.item())
        self._publish(source)
        return first

    def tool_started(self, source: Source, tool: str) -> None:
        self.children.tool_started(source, tool)
        self._publish(source)

    def status_lines(self) -> list[str]:
        """The lines for the run's status message: none when each child has its own message (threads)."""
        if self.threads is None:
            return self.children.lines()
        for source, line in self.children.entries():
            self.threads.line(source, line.lstrip())
        return []

    def _linear(self, source: Source) -> AnswerStream:
        """The child's text as one stream (its messages apart by a blank line, like the root's answer)."""
        stream = self._streams.get(source.key)
        if stream is None:
            stream = self._streams[source.key] = AnswerStream(self._text.answers, source.key)
        return stream

    def _changed(self, source: Source, message: int, change: AnswerChange | None) -> None:
        """The child's text changed: watchers see it, and its thread shows it."""
        self._publish(source, change)
        if change is not None and self.threads is not None:
            self.threads.changed(source, message, change)

    def _publish(self, source: Source, change: AnswerChange | None = None) -> None:
        """The child's state (and its text change) for watchers."""
        key, dumped, state = source.key, source.model_dump(), self.children.seen(source).state
        if change is not None and change.reset:
            self._monitor.publish("agent", key=key, source=dumped, state=state, text=change.text, reset=True)
        elif change is not None:
            self._monitor.publish("agent", key=key, source=dumped, state=state, delta=change.text)
        else:
            self._monitor.publish("agent", key=key, source=dumped, state=state)

    def _end(self, source: Source, end: End) -> None:
        if self.children.seen(source).ended is not None:
            return  # a repeated end
        self.children.end(source, end.status)
        for unit in self._tools.close_source(source):
            self._lane.emit(unit)
        for split in self._text.flush(source.key):
            if split.answer is not None:
                self._changed(source, split.message, self._linear(source).apply(split.message, split.answer))
        opened = self._text.opened
        final = self._text.answers.answer(source.key)
        if end.final_text is not None:
            final = visible_final(end.final_text, opened)
        sources = self._sources.pop(source.key, SourceList())
        cited = tuple((ref.url, ref.title) for ref in sources.items)
        self._lane.emit(message_unit(source, end.status, final, cited))
        if self.threads is not None:
            self.threads.ended(source, with_sources(final, sources, self._fmt) if end.status is EndStatus.OK else final)
