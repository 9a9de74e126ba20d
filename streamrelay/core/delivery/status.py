"""The status board: true progress as short lines for people (phases, tools, sub-agents).

Never holds raw child text or tool arguments: only facts (started, using a tool, done, failed) and
summaries the runtime chose to show. Sub-agent lines come from :class:`core.run.subagents.Children`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from streamrelay.core.json_types import JsonObject
from streamrelay.core.text.safe_text import safe_text

SECRET_KEY = re.compile(
    r"pass|pwd|secret|token|key|auth|cred|cookie|session|signature|private|bearer|header|card|cvv|cvc|"
    r"otp|pin|ssn|iban|account|routing",
    re.IGNORECASE,
)
"""Argument names whose values are never shown, whatever they hold."""
SECRET_VALUE = re.compile(
    r"bearer\s|basic\s|^sk-|^rk-|^pk_|^sk_|^xox[abpr]-|^gh[pousr]_|^github_pat_|^AKIA|^AIza|^eyJ|-----BEGIN|"
    r"\b\d{12,19}\b",
    re.IGNORECASE,
)
"""Values that look like credentials or card numbers (API keys, bearer headers, JWTs, PEM keys): never shown."""
PREVIEW_KEYS = 3
PREVIEW_VALUE_CHARS = 40


def redacted_args(args: JsonObject) -> str:
    """A short, redacted preview of tool arguments for people: at most 3 top-level keys, each value cut to 40
    characters, values of secret-looking keys (password, token, api_key, …) replaced by ``•••``, nested
    objects and lists summarized, control and bidi override characters removed (:mod:`core.text.safe_text`; the
    arguments themselves go to the parent loop as they came). ``{"q": "refund policy"}`` → ``q: "refund policy"``."""
    out = []
    for name, value in list(args.items())[:PREVIEW_KEYS]:
        if SECRET_KEY.search(name) or (isinstance(value, str) and SECRET_VALUE.search(value)):
            shown = "•••"
        elif isinstance(value, dict):
            shown = "{…}"
        elif isinstance(value, list):
            shown = f"[{len(value)} items]"
        else:
            shown = json.dumps(value, ensure_ascii=False)
            if len(shown) > PREVIEW_VALUE_CHARS:
                shown = shown[: PREVIEW_VALUE_CHARS - 1] + "…"
        out.append(f"{name}: {shown}")
    if len(args) > PREVIEW_KEYS:
        out.append("…")
    return safe_text(", ".join(out))


@dataclass(slots=True)
class StatusBoard:
    """Lines of progress. ``render(child_lines)`` is the status message text (empty when there is nothing)."""

    title: str = ""
    show_progress: bool = True
    lines: list[str] = field(default_factory=list)
    _tool_lines: dict[str, int] = field(default_factory=dict)
    footer: str = ""
    max_lines: int = 20
    """Progress lines shown at most (the latest); older ones are counted, so the message stays short."""

    def phase(self, name: str) -> None:
        if self.show_progress:
            self.lines.append(f"• {name}")

    def note(self, text: str) -> None:
        if self.show_progress and text.strip():
            self.lines.append(f"• {text.strip()}")

    def tool_started(self, call_id: str, name: str) -> None:
        if self.show_progress:
            self._tool_lines[call_id] = len(self.lines)
            self.lines.append(f"• using {name}")

    def tool_called(self, call_id: str, name: str, args: JsonObject) -> None:
        """The call's arguments are complete: its line shows a redacted preview of them."""
        if self.show_progress:
            line = f"• using {name}" + (f" ({redacted_args(args)})" if args else "")
            index = self._tool_lines.pop(call_id, None)
            if index is None:
                self.lines.append(line)
            else:
                self.lines[index] = line

    def tool_finished(self, name: str, summary: str) -> None:
        if self.show_progress:
            self.lines.append(f"• {name}: {summary.strip()}" if summary.strip() else f"• {name}: done")

    def render(self, child_lines: list[str] | None = None, max_chars: int | None = None) -> str:
        """The status message: the title, the latest progress lines (older ones counted), the children's lines, the
        footer; each line at most :data:`LINE_CHARS` characters, and the whole within ``max_chars`` (the oldest
        progress lines go first, then the text is cut), so a long status, phase or tool name never makes a message
        the platform refuses."""
        children = [_short(line) for line in child_lines or []]
        keep = min(len(self.lines), self.max_lines)
        while True:
            text = self._text(keep, children)
            if max_chars is None or len(text) <= max_chars or keep == 0:
                break
            keep -= 1
        return text if max_chars is None or len(text) <= max_chars else text[: max(0, max_chars - 1)] + "…"

    def _text(self, keep: int, children: list[str]) -> str:
        out: list[str] = []
        if self.title:
            out.append(self.title)
        hidden = len(self.lines) - keep
        if hidden > 0:
            out.append(f"… {hidden} earlier step{'s' if hidden > 1 else ''}")
        out.extend(_short(line) for line in self.lines[hidden:])
        out.extend(children)
        if self.footer:
            out.append(_short(self.footer))
        return "\n".join(out)


LINE_CHARS = 200
"""A status line's characters at most (a longer one ends with an ellipsis)."""


def _short(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"
