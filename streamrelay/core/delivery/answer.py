"""The root answer as one linear text: assistant messages joined by a blank line.

Turns per-message :class:`core.text.assembler.TextChange` values into appends to the linear answer, or a
reset when earlier text changed (a replace, or an edit to an earlier message). Work per append is
proportional to the appended text.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamrelay.core.text.assembler import TextAssembler, TextChange

MESSAGE_SEPARATOR = "\n\n"


@dataclass(slots=True)
class AnswerChange:
    """``reset`` False: ``text`` is appended. ``reset`` True: ``text`` is the whole new answer."""

    text: str
    reset: bool = False


class AnswerStream:
    """Tracks which assistant message the linear answer currently ends in."""

    __slots__ = ("_assembler", "_has_text", "_last_message", "_source_key")

    def __init__(self, assembler: TextAssembler, source_key: str | None = None) -> None:
        self._assembler = assembler
        self._source_key = source_key
        self._last_message: int | None = None
        self._has_text = False

    def apply(self, message: int, change: TextChange) -> AnswerChange | None:
        """The change to the linear answer caused by ``change`` to assistant message ``message``."""
        if change.kind == "none":
            return None
        if change.kind == "append":
            return self.appended(message, change.appended) if change.appended else self._after(message)
        return self._reset()

    def appended(self, message: int, text: str) -> AnswerChange:
        """The change to the linear answer caused by ``text`` (non-empty) appended to assistant message ``message``:
        an append (after a blank line when the answer goes on in a later message), or a reset when an earlier
        message grew. O(1), or O(the answer) for a reset."""
        last = self._last_message
        if last == message:
            return AnswerChange(text)  # the common line: the answer goes on in its last message
        if last is None or message > last:
            self._last_message = message
            prefix = MESSAGE_SEPARATOR if self._has_text else ""
            self._has_text = True
            return AnswerChange(prefix + text)
        return self._reset()

    def _after(self, message: int) -> AnswerChange | None:
        """An append of nothing: no change unless it went to an earlier message than the last (then a reset)."""
        return None if self._last_message is None or message >= self._last_message else self._reset()

    def _reset(self) -> AnswerChange:
        full = self.text()
        self._last_message = max((m for m, t in self._assembler.messages(self._source_key) if t), default=None)
        self._has_text = bool(full)
        return AnswerChange(full, reset=True)

    def text(self) -> str:
        """The whole linear answer now."""
        return self._assembler.answer(self._source_key, sep=MESSAGE_SEPARATOR)
