"""Text assembly: resolves ``delta`` / ``snapshot`` / ``replace`` text events per (source, message).

Rules (shared/DESIGN.md §4, shared/cases/text-*.json):

- ``delta`` appends.
- ``snapshot`` is the full text so far: one that extends the text adds only the missing suffix; one
  equal to the text or a prefix of it adds nothing; one that diverges is a replacement, never appended
  (the bug this prevents: ``"Hello wordHello world"``).
- ``replace`` swaps the whole text (a replace with the same text changes nothing).
- Replay guard (on unless turned off: ``TextAssembler(delta_replay_guard=False)``; the channel or run setting
  ``delta_replay_guard``): a ``delta`` is a *replayed snapshot* when all three hold:

  1. the message's text so far is at least :data:`REPLAY_MIN_CHARS` (16) code points long (below that the guard
     cannot tell a replay from honest repetitive text: ``"-"``, then ``"--\n\nHello"``);
  2. the delta, as the agent sent it (never deltas joined for a batch: :class:`core.events.JoinedDeltas`), is at
     least :data:`REPLAY_MIN_CHARS` code points long;
  3. the delta begins with the entire text so far (so it is at least as long).

  It is then applied as a ``snapshot``: nothing is added when it equals the text, only the missing suffix when
  it is longer. Source: openclaw issue #136262 (https://github.com/openclaw/openclaw/issues/136262): an
  OpenAI-compatible stream occasionally sends one bare ``text_delta`` that repeats the whole text accumulated so
  far (no new ``text_start``), so the text doubled (n → 2n) and cumulative chat UIs kept the doubled text. The
  price: a genuine delta of 16 or more characters that happens to begin with the whole text so far, itself 16 or
  more (text ``"Ha ha ha ha ha! "``, delta ``"Ha ha ha ha ha! Ha ha, that is a good one"``) loses its repeated
  head; token-sized deltas (shorter than 16) never trigger it, nor does any delta while the text is shorter than
  16. Streams whose deltas may legitimately repeat their text turn the guard off.

Cost: a delta costs O(len(delta)) (texts are :class:`core.text.buffer.TextBuffer` values: blocks of a few
thousand characters, each at its own narrowest width, never joined whole), the replay check runs only for a delta at
least as long as the text so far and walks the blocks without copying them, so it costs O(len(text so far)) <=
O(len(delta)); a snapshot or replace costs O(len(snapshot)); reading a whole text joins its blocks into a new string
(not kept).

One copy: a source's messages are kept once, and :meth:`TextAssembler.view` lets a reader (the run monitor) refer to
their linear text (the messages joined by a separator) by ranges instead of keeping its own copy; the view's
``generation`` changes whenever text already there changes, so a range read earlier is known to be stale.

Example::

    asm = TextAssembler()
    asm.apply(None, 0, TextMode.DELTA, "Hello")           # TextChange(kind="append", appended="Hello")
    asm.apply(None, 0, TextMode.SNAPSHOT, "Hello world, hi!")  # appended=" world, hi!"
    asm.apply(None, 0, TextMode.SNAPSHOT, "Hello")        # kind="none"
    asm.apply(None, 0, TextMode.DELTA, "Hello world, hi! again")  # a replay (16+ so far): appended=" again"
    asm.answer()                                          # "Hello world, hi! again"
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from streamrelay.core.events import TextMode
from streamrelay.core.text.buffer import LinearText, TextBuffer

ChangeKind = Literal["append", "replace", "none"]

REPLAY_MIN_CHARS = 16
"""A ``delta`` shorter than this, or one while the text so far is shorter than this, is never taken for a replayed
snapshot (DESIGN §4)."""


def _replayed_by(current: TextBuffer, delta: str) -> bool:
    """Whether ``delta`` is a replayed snapshot of ``current`` (the rule is in the module docstring).

    O(1) unless ``len(delta) >= length >= 16``; then O(length), walking the blocks without copying them.
    """
    return REPLAY_MIN_CHARS <= current.length <= len(delta) and current.common_with(delta)


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
    _holder: TextBuffer = field(repr=False)

    @cached_property
    def text(self) -> str:
        return self._holder.slice(0, self.length)

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
            begin with all of it, itself at least 16; module docstring) as a snapshot. False: every delta is new text.
    """

    __slots__ = ("_generations", "_texts", "delta_replay_guard")

    def __init__(self, delta_replay_guard: bool = True) -> None:
        self.delta_replay_guard = delta_replay_guard
        self._texts: dict[str | None, dict[int, TextBuffer]] = {}
        self._generations: dict[str | None, int] = {}
        """Per source: how many times text already in its linear text changed (:meth:`view`)."""

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
            current = messages[message] = TextBuffer()
        if mode == TextMode.DELTA:
            if self.delta_replay_guard and _replayed_by(current, text):
                return self._extend(source_key, message, current, text)
            self._appending(source_key, message, text)
            current.append(text)
            return TextChange("append" if text else "none", text, current.length, current)
        if mode == TextMode.SNAPSHOT and current.common_with(text):
            return self._extend(source_key, message, current, text)
        if mode == TextMode.REPLACE and len(text) == current.length and current.common_with(text):
            return TextChange("none", "", current.length, current)
        replaced = messages[message] = TextBuffer(text)
        self._generations[source_key] = self._generations.get(source_key, 0) + 1
        return TextChange("replace", "", replaced.length, replaced)

    def append(self, source_key: str | None, message: int, text: str) -> None:
        """Add ``text`` at the end of one message as a ``delta`` that is not a replay (the caller knows: the guard
        is off, or ``text`` is shorter than :data:`REPLAY_MIN_CHARS`), without a :class:`TextChange`. O(len(text))."""
        messages = self._texts.get(source_key)
        if messages is None:
            messages = self._texts[source_key] = {}
        current = messages.get(message)
        if current is None:
            current = messages[message] = TextBuffer()
        self._appending(source_key, message, text)
        current.append(text)

    def _appending(self, source_key: str | None, message: int, text: str) -> None:
        """``text`` is about to be appended to ``message``: when a later message has text, that changes the middle of
        the source's linear text (a new generation). O(1) unless the source has several messages."""
        messages = self._texts[source_key]
        if text and len(messages) > 1 and any(m > message and t.length for m, t in messages.items()):
            self._generations[source_key] = self._generations.get(source_key, 0) + 1

    def _extend(self, source_key: str | None, message: int, current: TextBuffer, snapshot: str) -> TextChange:
        """Apply ``snapshot``, which agrees with ``current`` over the shorter one's length: add its missing suffix."""
        if len(snapshot) <= current.length:
            return TextChange("none", "", current.length, current)
        appended = snapshot[current.length :]
        self._appending(source_key, message, appended)
        current.append(appended)
        return TextChange("append", appended, current.length, current)

    def text(self, source_key: str | None, message: int) -> str:
        """The full text of one message (``""`` if none arrived). O(length): a new string each time."""
        current = self._texts.get(source_key, {}).get(message)
        return current.value() if current is not None else ""

    def messages(self, source_key: str | None) -> list[tuple[int, str]]:
        """Every message of a source as ``(index, text)``, in index order (empty texts included)."""
        messages = self._texts.get(source_key, {})
        return [(index, messages[index].value()) for index in sorted(messages)]

    def answer(self, source_key: str | None = None, sep: str = "\n\n") -> str:
        """A source's messages joined by ``sep``, in index order, empty messages skipped."""
        return sep.join(text for _, text in self.messages(source_key) if text)

    def last_message(self, source_key: str | None) -> int | None:
        """The highest message index of a source (None if none arrived). O(messages)."""
        messages = self._texts.get(source_key)
        return max(messages) if messages else None

    def buffer(self, source_key: str | None, message: int) -> TextBuffer | None:
        """The text of one message as it is kept (None if none arrived): read it, never change it."""
        return self._texts.get(source_key, {}).get(message)

    def adopt(self, source_key: str | None, message: int, text: TextBuffer) -> None:
        """Keep ``text`` as one message's text from now on: another assembler's buffer shared instead of a copy
        (:mod:`core.text.visible`), which has the same characters as the text it replaces, or begins it. O(1)."""
        self._texts.setdefault(source_key, {})[message] = text

    def grew(self, source_key: str | None, message: int, text: str) -> TextChange:
        """``text`` was appended to one message's buffer by the assembler it is shared with (:meth:`adopt`): the
        change a ``delta`` of it would have made, without appending it twice. O(1) unless the source has several
        messages."""
        messages = self._texts[source_key]
        current = messages[message]
        if len(messages) > 1:
            self._appending(source_key, message, text)
        return TextChange("append", text, current.length, current)

    def grown(self, source_key: str | None, message: int, text: str) -> None:
        """:meth:`grew` without the :class:`TextChange` (the caller knows what was appended). O(1) unless the source
        has several messages."""
        messages = self._texts[source_key]
        if len(messages) > 1:
            self._appending(source_key, message, text)

    def view(self, source_key: str | None = None, sep: str = "\n\n") -> LinearText:
        """A source's linear text (:meth:`answer`) read by ranges: a :class:`core.text.buffer.TextSource` that
        copies nothing."""
        return LinearText(self._texts.setdefault(source_key, {}), self._generations, source_key, sep)
