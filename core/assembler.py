"""Text assembly: resolves ``delta`` / ``snapshot`` / ``replace`` text events per (source, message).

Rules (shared/DESIGN.md §4, shared/cases/text-*.json):

- ``delta`` appends.
- ``snapshot`` is the full text so far: one that extends the text adds only the missing suffix; one
  equal to the text or a prefix of it adds nothing; one that diverges is a replacement, never appended
  (the bug this prevents: ``"Hello wordHello world"``).
- ``replace`` swaps the whole text (a replace with the same text changes nothing).

Cost: a delta costs O(len(delta)) (texts are kept as lists of parts, joined only when read); a snapshot
or replace costs O(len(snapshot)); reading a text joins its parts once and keeps the result.

Example::

    asm = TextAssembler()
    asm.apply(None, 0, TextMode.DELTA, "Hello")           # TextChange(kind="append", appended="Hello")
    asm.apply(None, 0, TextMode.SNAPSHOT, "Hello world")  # appended=" world"
    asm.apply(None, 0, TextMode.SNAPSHOT, "Hello")        # kind="none"
    asm.answer()                                          # "Hello world"
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from core.events import TextMode

ChangeKind = Literal["append", "replace", "none"]


class _MessageText:
    """The text of one assistant message: a list of parts, joined lazily.

    Only ever grows: a replacement is a new :class:`_MessageText`, so a length taken earlier still
    names a prefix of this object's text (which is what :class:`TextChange` relies on).
    """

    __slots__ = ("_parts", "length")

    def __init__(self, text: str = "") -> None:
        self._parts: list[str] = [text] if text else []
        self.length = len(text)

    def append(self, text: str) -> None:
        if text:
            self._parts.append(text)
            self.length += len(text)

    def value(self) -> str:
        """The whole text. O(length) once; the joined text is kept for the next read."""
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def common_with(self, snapshot: str) -> bool:
        """Whether ``snapshot`` and this text agree over the shorter one's length.

        O(min(len(snapshot), length)): walks only the parts the snapshot covers.
        """
        pos = 0
        end = len(snapshot)
        for part in self._parts:
            if pos >= end:
                return True
            rest = end - pos
            if len(part) >= rest:
                return part.startswith(snapshot[pos:])
            if not snapshot.startswith(part, pos):
                return False
            pos += len(part)
        return True

    def reset_to(self, text: str) -> None:
        """Keep ``text`` as the single part (only when ``text`` equals the current text)."""
        self._parts = [text] if text else []


@dataclass(frozen=True, eq=False)
class TextChange:
    """What one :meth:`TextAssembler.apply` did to a message's text.

    Attributes:
        kind: ``append`` (``appended`` was added at the end), ``replace`` (the text was swapped: earlier
            text changed) or ``none`` (nothing changed).
        appended: the code points added at the end (``""`` unless ``kind`` is ``append``).
        length: length of the message's full text after the change, in code points.
        text: the message's full text after the change. Computed when first read (O(length)), so
            a caller that only needs ``appended`` pays per delta, not per text.
    """

    kind: ChangeKind
    appended: str
    length: int
    _holder: _MessageText = field(repr=False)

    @cached_property
    def text(self) -> str:
        return self._holder.value()[: self.length]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TextChange):
            return NotImplemented
        return (self.kind, self.appended, self.text) == (other.kind, other.appended, other.text)

    def __hash__(self) -> int:
        return hash((self.kind, self.appended, self.length))


class TextAssembler:
    """Holds the text of every (source key, assistant message index) and applies text events to it.

    A source's messages never mix with another source's: a child agent's text never enters the
    root's answer (shared/DESIGN.md §6). The root agent's source key is ``None``.
    """

    def __init__(self) -> None:
        self._texts: dict[str | None, dict[int, _MessageText]] = {}

    def apply(self, source_key: str | None, message: int, mode: TextMode, text: str) -> TextChange:
        """Apply one text event.

        Args:
            source_key: whose text (:attr:`core.events.Source.key`; ``None`` for the root agent).
            message: assistant message index (0-based).
            mode: how ``text`` relates to the text so far.
            text: the delta, or the full text for ``snapshot`` / ``replace``.

        Returns:
            The change. O(len(text)) work, plus O(len(text)) for a snapshot's comparison.
        """
        messages = self._texts.setdefault(source_key, {})
        current = messages.get(message)
        if current is None:
            current = messages[message] = _MessageText()
        if mode == TextMode.DELTA:
            current.append(text)
            return TextChange("append" if text else "none", text, current.length, current)
        if mode == TextMode.SNAPSHOT and current.common_with(text):
            if len(text) <= current.length:
                return TextChange("none", "", current.length, current)
            appended = text[current.length :]
            current.reset_to(text)
            current.length = len(text)
            return TextChange("append", appended, current.length, current)
        if mode == TextMode.REPLACE and len(text) == current.length and current.common_with(text):
            return TextChange("none", "", current.length, current)
        replaced = messages[message] = _MessageText(text)
        return TextChange("replace", "", replaced.length, replaced)

    def text(self, source_key: str | None, message: int) -> str:
        """The full text of one message (``""`` if none arrived). O(length) at most once per change."""
        current = self._texts.get(source_key, {}).get(message)
        return current.value() if current is not None else ""

    def messages(self, source_key: str | None) -> list[tuple[int, str]]:
        """Every message of a source as ``(index, text)``, in index order (empty texts included)."""
        messages = self._texts.get(source_key, {})
        return [(index, messages[index].value()) for index in sorted(messages)]

    def answer(self, source_key: str | None = None, sep: str = "\n\n") -> str:
        """A source's messages joined by ``sep``, in index order, empty messages skipped."""
        return sep.join(text for _, text in self.messages(source_key) if text)
