"""Coalescing: joins small chunks into blocks, each ready to become one channel message.

Rules (shared/DESIGN.md §4, shared/cases/coalesce-*.json), in the order :meth:`Coalescer.push` applies
them:

1. A buffer left idle for ``idle_ms`` is flushed first (as :meth:`Coalescer.poll` would have done).
2. A chunk for another reply target, visibility class (answer / reasoning / status) or assistant
   message index flushes the buffer first, whatever its size. (Before media the caller calls
   :meth:`Coalescer.flush`, :meth:`core.delivery.modes.BlockMode.close_segment`: media never enters the buffer.)
3. A chunk that would push the block past ``max_chars`` (the joiner counted) flushes the buffer first.
4. The chunk joins the buffer (``joiner`` between chunks).
5. The buffer is emitted as soon as it holds at least ``min_chars``, or at once when ``idle_ms`` is 0
   (no coalescing in time).

Otherwise the buffer waits: :meth:`Coalescer.poll` emits it once ``idle_ms`` passed since the last push
(an idle gap means input paused, not that the run ended: the coalescer carries on), and
:meth:`Coalescer.flush` emits it when the caller must (block end, media, end of run). A single chunk
longer than ``max_chars`` is emitted alone and never split: cutting is the chunker's job.

Lengths are in ``params.unit`` (code points, or UTF-16 code units for Telegram).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamrelay.core.clock import Clock
from streamrelay.core.events import Visibility
from streamrelay.core.units import LengthUnit, text_units

_EPSILON_S = 1e-9


@dataclass(frozen=True)
class CoalesceParams:
    """How chunks are joined.

    Attributes:
        min_chars: emit a block once it holds at least this many units (>= 0).
        max_chars: never join past this many units, the joiner included (>= max(1, min_chars)).
        idle_ms: emit a waiting block after this many milliseconds without a push; 0 = never wait.
        joiner: put between two chunks of one block.
        unit: the channel's length unit.

    Raises:
        ValueError: a bound is negative or ``min_chars`` > ``max_chars``.
    """

    min_chars: int
    max_chars: int
    idle_ms: int
    joiner: str = "\n\n"
    unit: LengthUnit = LengthUnit.CHARS

    def __post_init__(self) -> None:
        if self.min_chars < 0 or self.idle_ms < 0:
            raise ValueError(f"min_chars and idle_ms must be >= 0, got {self.min_chars}, {self.idle_ms}")
        if self.max_chars < max(1, self.min_chars):
            raise ValueError(f"max_chars must be >= max(1, min_chars), got {self.max_chars} < {self.min_chars}")


@dataclass(frozen=True)
class Chunk:
    """A piece of text from the chunker, with where it belongs."""

    text: str
    visibility: Visibility = Visibility.ANSWER
    message: int = 0
    reply_to: str | None = None


@dataclass(frozen=True)
class Block:
    """What delivery gets: one or more chunks of one (visibility, message, reply target), joined."""

    text: str
    visibility: Visibility
    message: int
    reply_to: str | None


class Coalescer:
    """Joins chunks into blocks by ``min_chars``, ``max_chars`` and ``idle_ms``.

    Args:
        params: the joining parameters.
        clock: gives ``now()`` (float seconds) when a call passes no ``now``.
    """

    def __init__(self, params: CoalesceParams, clock: Clock) -> None:
        self._params = params
        self._clock = clock
        self._joiner_units = text_units(params.joiner, params.unit)
        self._parts: list[str] = []
        self._units = 0
        self._key: tuple[Visibility, int, str | None] = (Visibility.ANSWER, 0, None)
        self._last_push_s = 0.0

    def push(self, chunk: Chunk, now: float | None = None) -> list[Block]:
        """Add one chunk.

        Args:
            chunk: the chunk (an empty text is ignored).
            now: the current time in float seconds; ``clock.now()`` if ``None``.

        Returns:
            The blocks that became ready, in order (zero, one or two).
        """
        now_s = self._clock.now() if now is None else now
        blocks = self.poll(now_s)
        if not chunk.text:
            return blocks
        key = (chunk.visibility, chunk.message, chunk.reply_to)
        size = text_units(chunk.text, self._params.unit)
        if self._parts and (key != self._key or self._units + self._joiner_units + size > self._params.max_chars):
            blocks += self.flush()
        if self._parts:
            self._units += self._joiner_units
        self._parts.append(chunk.text)
        self._units += size
        self._key = key
        self._last_push_s = now_s
        if self._params.idle_ms == 0 or self._units >= self._params.min_chars:
            blocks += self.flush()
        return blocks

    def poll(self, now: float | None = None) -> list[Block]:
        """Emit the waiting block if ``idle_ms`` has passed since the last push.

        Args:
            now: the current time in float seconds; ``clock.now()`` if ``None``.
        """
        deadline = self.deadline()
        if deadline is None:
            return []
        now_s = self._clock.now() if now is None else now
        return self.flush() if now_s + _EPSILON_S >= deadline else []

    def deadline(self) -> float | None:
        """When :meth:`poll` would emit the waiting block (float seconds), or ``None`` if nothing waits."""
        if not self._parts:
            return None
        return self._last_push_s + self._params.idle_ms / 1000

    def flush(self) -> list[Block]:
        """Emit the waiting block now, whatever its size (block end, media, end of run)."""
        if not self._parts:
            return []
        visibility, message, reply_to = self._key
        block = Block(self._params.joiner.join(self._parts), visibility, message, reply_to)
        self._parts = []
        self._units = 0
        return [block]

    @property
    def pending_units(self) -> int:
        """Length of the waiting block in ``params.unit`` (0 when nothing waits)."""
        return self._units
