"""The root answer as one linear text: assistant messages joined by a blank line.

Turns per-message :class:`core.text.assembler.TextChange` values into appends to the linear answer, or a
reset when earlier text changed (a replace, or an edit to an earlier message). Work per append is
proportional to the appended text.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.text.assembler import TextAssembler, TextChange

MESSAGE_SEPARATOR = "\n\n"


@dataclass(slots=True)
class AnswerChange:
    """``reset`` False: ``text`` is appended. ``reset`` True: ``text`` is the whole new answer."""

    text: str
    reset: bool = False


class AnswerStream:
    """Tracks which assistant message the linear answer currently ends in."""

    def __init__(self, assembler: TextAssembler, source_key: str | None = None) -> None:
        self._assembler = assembler
        self._source_key = source_key
        self._last_message: int | None = None
        self._has_text = False

    def apply(self, message: int, change: TextChange) -> AnswerChange | None:
        """The change to the linear answer caused by ``change`` to assistant message ``message``."""
        if change.kind == "none":
            return None
        if change.kind == "append" and (self._last_message is None or message >= self._last_message):
            prefix = ""
            if message != self._last_message and self._has_text and change.appended:
                prefix = MESSAGE_SEPARATOR
            if change.appended:
                self._last_message = message
                self._has_text = True
            return AnswerChange(prefix + change.appended) if change.appended else None
        full = self.text()
        self._last_message = max((m for m, t in self._assembler.messages(self._source_key) if t), default=None)
        self._has_text = bool(full)
        return AnswerChange(full, reset=True)

    def text(self) -> str:
        """The whole linear answer now."""
        return self._assembler.answer(self._source_key, sep=MESSAGE_SEPARATOR)
