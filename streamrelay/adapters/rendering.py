"""The renderings of the texts in flight, kept once per adapter: what the platform adapters share for rendering.

The core measures a part before it sends it (:meth:`core.policy.Splitter.fit` calls ``adapter.measure``), then the
adapter sends that same text: both read one rendering. Each platform adapter has a pure ``render(text, fmt)`` (its
platform's payload and its size in the platform's unit, ``units``) wrapped in a :class:`RenderCache`: a small
bounded cache keyed by ``(text, fmt)``, so a text is rendered once however often it is measured and sent, and
``measure`` is the cached rendering's ``units``. An adapter whose send reads it with :meth:`RenderCache.take`
(Telegram) keeps a rendering from the measure to its call, not after it.

Bounded: the texts in flight are few (each conversation's live and frozen parts); past :data:`RENDERINGS` the oldest
rendering is dropped and rendered again when asked (a miss costs what it cost before the cache, never an error).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from streamrelay.core.ports import TextFormat

RENDERINGS = 32
"""Renderings kept per adapter (the most recently used): a few per conversation with a part in flight. A Telegram
rendering of a 4096-unit part with its entities is some tens of KB: at most about a megabyte per bot."""


class Sized(Protocol):
    @property
    def units(self) -> int:
        """The rendering's length as the platform counts it, in the adapter's ``unit``."""
        ...


R = TypeVar("R", bound=Sized)


class RenderCache(Generic[R]):
    """``render`` memoized for the last :data:`RENDERINGS` ``(text, fmt)`` pairs (least recently used dropped first).

    Args:
        render: the platform's pure render function: the same text and format always give the same rendering.
        size: how many renderings are kept (at least 1).
    """

    __slots__ = ("_kept", "_render", "_size")

    def __init__(self, render: Callable[[str, TextFormat], R], size: int = RENDERINGS) -> None:
        self._render = render
        self._kept: OrderedDict[tuple[str, TextFormat], R] = OrderedDict()
        self._size = max(1, size)

    def clear(self) -> None:
        """Forget every rendering (an erased run's texts must not stay here: :mod:`core.records.erase`)."""
        self._kept.clear()

    def __call__(self, text: str, fmt: TextFormat) -> R:
        """The rendering of ``text`` in ``fmt``: kept, or rendered now and kept."""
        key = (text, fmt)
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            return kept
        rendered = self._render(text, fmt)
        self._kept[key] = rendered
        if len(self._kept) > self._size:
            self._kept.popitem(last=False)
        return rendered

    def take(self, text: str, fmt: TextFormat) -> R:
        """The rendering of ``text`` in ``fmt`` for the call that sends it, no longer kept: a text measured and then
        sent is rendered once, and once sent its rendering does not stay in memory (a Telegram part's is some tens of
        KB: 32 of them, about 0.3-1 MB a bot, were kept after the calls that needed them). Rendered now when not kept
        (a retry of the same text renders it again)."""
        kept = self._kept.pop((text, fmt), None)
        return kept if kept is not None else self._render(text, fmt)

    def __len__(self) -> int:
        return len(self._kept)
