"""The status board: true progress as short lines for people (phases, tools, sub-agents).

Never holds raw child text or tool arguments: only facts (started, using a tool, done, failed) and
summaries the runtime chose to show.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.events import Source


@dataclass
class _Child:
    label: str
    state: str = "started"


@dataclass
class StatusBoard:
    """Lines of progress. ``render()`` is the status message text (empty when there is nothing)."""

    title: str = ""
    show_progress: bool = True
    lines: list[str] = field(default_factory=list)
    children: dict[str, _Child] = field(default_factory=dict)
    footer: str = ""

    def phase(self, name: str) -> None:
        if self.show_progress:
            self.lines.append(f"• {name}")

    def note(self, text: str) -> None:
        if self.show_progress and text.strip():
            self.lines.append(f"• {text.strip()}")

    def tool_started(self, name: str) -> None:
        if self.show_progress:
            self.lines.append(f"• using {name}")

    def tool_finished(self, name: str, summary: str) -> None:
        if self.show_progress:
            self.lines.append(f"• {name}: {summary.strip()}" if summary.strip() else f"• {name}: done")

    def child_seen(self, source: Source) -> None:
        self.children.setdefault(source.key, _Child(label=_label(source)))

    def child_tool(self, source: Source, tool: str) -> None:
        self.child_seen(source)
        self.children[source.key].state = f"using {tool}"

    def child_done(self, source: Source, ok: bool) -> None:
        self.child_seen(source)
        self.children[source.key].state = "done" if ok else "failed"

    def all_children_done(self, ok: bool) -> None:
        for child in self.children.values():
            if child.state not in ("done", "failed"):
                child.state = "done" if ok else "stopped"

    max_lines: int = 20
    """Progress lines shown at most (the latest); older ones are counted, so the message stays short."""

    def render(self) -> str:
        out: list[str] = []
        if self.title:
            out.append(self.title)
        hidden = len(self.lines) - self.max_lines
        if hidden > 0:
            out.append(f"… {hidden} earlier step{'s' if hidden > 1 else ''}")
        out.extend(self.lines[max(0, hidden) :])
        out.extend(f"↳ {c.label}: {c.state}" for c in self.children.values())
        if self.footer:
            out.append(self.footer)
        return "\n".join(out)


def _label(source: Source) -> str:
    indent = "  " * (source.depth - 1)
    return f"{indent}{source.agent_id}"
