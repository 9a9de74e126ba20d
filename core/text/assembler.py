"""Text assembly: resolves ``delta`` / ``snapshot`` / ``replace`` text events per (source, message).

Rules (shared/DESIGN.md §4, shared/cases/text-*.json):

- ``delta`` appends.
- ``snapshot`` is the full text so far: one that extends the text adds only the missing suffix; one
  equal to the text or a prefix of it adds nothing; one that diverges is a replacement, never appended
  (the bug this prevents: ``"Hello wordHello world"``).
- ``replace`` swaps the whole text (a replace with the same text changes nothing).
- Replay guard (on unless turned off: ``TextAssembler(delta_replay_guard=False)``; the channel or run setting
  ``delta_replay_guard``): a ``delta`` is a *replayed snapshot* when all three hold:

  1. the message's text so far is not empty;
  2. the delta is at least :data:`REPLAY_MIN_CHARS` (16) code points long;
  3. the delta begins with the entire text so far (so it is at least as long).

  It is then applied as a ``snapshot``: nothing is added when it equals the text, only the missing suffix when
  it is longer. Source: openclaw issue #136262 (https://github.com/openclaw/openclaw/issues/136262): an
  OpenAI-compatible stream occasionally sends one bare ``text_delta`` that repeats the whole text accumulated so
  far (no new ``text_start``), so the text doubled (n → 2n) and cumulative chat UIs kept the doubled text. The
  price: a genuine delta of 16 or more characters that happens to begin with the whole text so far (text
  ``"Ha"``, delta ``"Ha ha, that is a good one"``) loses its repeated head; token-sized deltas (shorter than 16)
  never trigger it, nor does the first delta of a message. Streams whose deltas may legitimately repeat their
  text turn the guard off.

Cost: a delta costs O(len(delta)) (texts are kept as lists of parts, joined only when read); the replay check
runs only for a delta at least as long as the text so far and walks the stored parts without copying them, so it
costs O(len(text so far)) <= O(len(delta)); a snapshot or replace costs O(len(snapshot)); reading a text joins
its parts once and keeps the result. Many small parts are joined now and then (when there are more than
``max(64, length / 256)``), an amortized O(1) per delta that keeps the parts list small.

Example::

    asm = TextAssembler()
    asm.apply(None, 0, TextMode.DELTA, "Hello")           # TextChange(kind="append", appended="Hello")
    asm.apply(None, 0, TextMode.SNAPSHOT, "Hello world")  # appended=" world"
    asm.apply(None, 0, TextMode.SNAPSHOT, "Hello")        # kind="none"
    asm.apply(None, 0, TextMode.DELTA, "Hello world, again")  # a replay: appended=", again"
    asm.answer()                                          # "Hello world, again"
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from core.events import TextMode

ChangeKind = Literal["append", "replace", "none"]

REPLAY_MIN_CHARS = 16
"""A ``delta`` shorter than this is never taken for a replayed snapshot (DESIGN §4)."""

_COMPACT_MIN_PARTS = 64
_COMPACT_CHARS_PER_PART = 256


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
        """Add ``text`` at the end. Amortized O(len(text) + 1): the parts are joined once there are more than
        ``max(64, length / 256)`` of them, so a join of n characters follows at least n / 256 appends."""
        if text:
            self._parts.append(text)
            self.length += len(text)
            if len(self._parts) > _COMPACT_MIN_PARTS and len(self._parts) * _COMPACT_CHARS_PER_PART > self.length:
                self._parts = ["".join(self._parts)]

    def replayed_by(self, delta: str) -> bool:
        """Whether ``delta`` is a replayed snapshot of this text (the rule is in the module docstring).

        O(1) unless ``len(delta) >= max(16, length)``; then O(length), walking the parts without copying them.
        """
        return 0 < self.length <= len(delta) and len(delta) >= REPLAY_MIN_CHARS and self.common_with(delta)

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


@dataclass(eq=False)
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

    Args:
        delta_replay_guard: take a ``delta`` that replays the whole text so far (at least 16 characters that
            begin with all of it; module docstring) as a snapshot. False: every delta is new text.
    """

    def __init__(self, delta_replay_guard: bool = True) -> None:
        self.delta_replay_guard = delta_replay_guard
        self._texts: dict[str | None, dict[int, _MessageText]] = {}

    def apply(self, source_key: str | None, message: int, mode: TextMode, text: str) -> TextChange:
        """Apply one text event.

        Args:
            source_key: whose text (:attr:`core.events.Source.key`; ``None`` for the root agent).
            message: assistant message index (0-based).
            mode: how ``text`` relates to the text so far.
            text: the delta, or the full text for ``snapshot`` / ``replace``.

        Returns:
            The change. O(len(text)) work, plus O(len(text)) for a snapshot's (or a candidate replay's)
            comparison.
        """
        messages = self._texts.setdefault(source_key, {})
        current = messages.get(message)
        if current is None:
            current = messages[message] = _MessageText()
        if mode == TextMode.DELTA:
            if self.delta_replay_guard and current.replayed_by(text):
                return _extend(current, text)
            current.append(text)
            return TextChange("append" if text else "none", text, current.length, current)
        if mode == TextMode.SNAPSHOT and current.common_with(text):
            return _extend(current, text)
        if mode == TextMode.REPLACE and len(text) == current.length and current.common_with(text):
            return TextChange("none", "", current.length, current)
        replaced = messages[message] = _MessageText(text)
        return TextChange("replace", "", replaced.length, replaced)

    def append(self, source_key: str | None, message: int, text: str) -> None:
        """Add ``text`` at the end of one message as a ``delta`` that is not a replay (the caller knows: the guard
        is off, or ``text`` is shorter than :data:`REPLAY_MIN_CHARS`), without a :class:`TextChange`. O(len(text))."""
        messages = self._texts.get(source_key)
        if messages is None:
            messages = self._texts[source_key] = {}
        current = messages.get(message)
        if current is None:
            current = messages[message] = _MessageText()
        current.append(text)

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


def _extend(current: _MessageText, snapshot: str) -> TextChange:
    """Apply ``snapshot``, which agrees with ``current`` over the shorter one's length: add its missing suffix."""
    if len(snapshot) <= current.length:
        return TextChange("none", "", current.length, current)
    appended = snapshot[current.length :]
    current.reset_to(snapshot)
    current.length = len(snapshot)
    return TextChange("append", appended, current.length, current)
