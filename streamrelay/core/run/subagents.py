"""Sub-agents of a run: what is true about each child, and the complete message its ``end`` yields.

A child is known by its :class:`core.events.Source` (``session_id``, else ``path``, else ``agent_id``), at any
depth. Its text is kept apart from the root's answer (:mod:`core.text.visible` keys texts by source) and reaches the
parent loop only as a complete ``message`` unit on the pipeline lane when the child's ``end`` arrives
(DESIGN §6). People see, with ``subagents = "status"``, one line per child: started, using a tool, a tool's
summary, done, failed or stopped — facts the runtime reported, never the child's raw text.

Lines are ordered as a tree: each child under its parent (found by ``parent_session_id``, else by ``path``),
siblings in the order they started, indented by depth.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamrelay.core.events import EndStatus, Source
from streamrelay.core.lanes.pipeline import ChildDone


@dataclass
class Child:
    """One sub-agent's state. ``state`` is the fact shown on its status line."""

    source: Source
    state: str = "started"
    ended: EndStatus | None = None
    children: list[str] = field(default_factory=list)


ENDED_LABELS = {
    EndStatus.OK: "done",
    EndStatus.ERROR: "failed",
    EndStatus.CANCELLED: "stopped",
    EndStatus.REFUSED: "refused",
    EndStatus.CUT: "cut off",
}


class Children:
    """The run's sub-agents, in the order they were first seen."""

    __slots__ = ("_children", "_roots")

    def __init__(self) -> None:
        self._children: dict[str, Child] = {}
        self._roots: list[str] = []

    def __len__(self) -> int:
        return len(self._children)

    def __contains__(self, key: object) -> bool:
        return key in self._children

    def seen(self, source: Source) -> Child:
        """The child for ``source``, registered under its parent on first sight."""
        child = self._children.get(source.key)
        if child is None:
            child = self._children[source.key] = Child(source)
            parent = self._parent_of(source)
            (parent.children if parent is not None else self._roots).append(source.key)
        return child

    def _parent_of(self, source: Source) -> Child | None:
        if source.depth <= 1:
            return None
        parent_path = source.path.rsplit("/", 1)[0] if source.path else None
        for child in self._children.values():
            theirs = child.source
            if source.parent_session_id is not None and theirs.session_id == source.parent_session_id:
                return child
            if parent_path is not None and theirs.path == parent_path:
                return child
        return None

    def tool_started(self, source: Source, tool: str) -> None:
        child = self.seen(source)
        if child.ended is None:
            child.state = f"using {tool}"

    def tool_finished(self, source: Source, tool: str, summary: str) -> None:
        child = self.seen(source)
        if child.ended is None:
            child.state = f"{tool}: {summary.strip()}" if summary.strip() else f"{tool} done"

    def media(self, source: Source, kind: str) -> None:
        """The child sent a media item (``image``, ``file``, ...): its line says so until its next fact."""
        child = self.seen(source)
        if child.ended is None:
            child.state = f"sent an {kind}" if kind[0] in "aeiou" else f"sent a {kind}"

    def failed(self, source: Source) -> None:
        """The child reported an error (its run may still go on: the line says so until it ends)."""
        child = self.seen(source)
        if child.ended is None:
            child.state = "error reported"

    def end(self, source: Source, status: EndStatus) -> Child:
        """The child's ``end`` arrived (a repeated end changes nothing)."""
        child = self.seen(source)
        if child.ended is None:
            child.ended = status
            child.state = ENDED_LABELS[status]
        return child

    def stop_unfinished(self) -> None:
        """The root ended: a child that never sent its ``end`` did not finish (it is not shown as done)."""
        for child in self._children.values():
            if child.ended is None:
                child.state = "stopped before it finished"

    def entries(self) -> list[tuple[Source, str]]:
        """Each child with its status line (indented by depth), as a tree."""
        out: list[tuple[Source, str]] = []

        def walk(keys: list[str]) -> None:
            for key in keys:
                child = self._children[key]
                indent = "  " * (child.source.depth - 1)
                out.append((child.source, f"{indent}↳ {child.source.agent_id}: {child.state}"))
                walk(child.children)

        walk(self._roots)
        return out

    def lines(self) -> list[str]:
        """One status line per child, as a tree."""
        return [line for _, line in self.entries()]


def message_unit(
    source: Source, status: EndStatus, text: str, sources: tuple[tuple[str | None, str | None], ...] = ()
) -> ChildDone:
    """What a child's ``end`` puts on the pipeline lane: its complete final message with the ``(url, title)`` of the
    sources it cited, or the fact it failed."""
    return ChildDone(source, status, text, sources)
