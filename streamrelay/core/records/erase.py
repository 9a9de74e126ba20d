"""Erasure: a store that can remove one run's text on request (docs/retention.md).

A run's text (what the agent sent, what each message showed, a correction's new text, a desk entry's text) is a
person's data. :class:`Erasable` is the optional capability of a journal or ledger to remove it for one run, keeping
what is not text: the run's record, its parts' states and message ids, the calls' content hashes and lengths, the
report's counts. :meth:`core.run.relay.Relay.erase` calls it on every store it has, after forgetting what it keeps in
memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Erasable(Protocol):
    """A store that can remove one run's text (module docstring)."""

    async def erase(self, runs: Sequence[str]) -> int:
        """Remove every text ``runs`` left in this store, so that it is found nowhere in it (its files byte for byte
        too, where it has files); keep their ids and states. Several runs at once cost one rewrite of a file.

        Returns:
            How many records held text of the runs (0: none here).

        Raises:
            Exception: the store could not be written (nothing is promised then: ask again).
        """
        ...


@runtime_checkable
class Conversations(Protocol):
    """A ledger that can list the runs that went to one conversation (to erase a whole chat)."""

    async def runs_in(self, channel: str, chat_id: str) -> list[str]:
        """The run keys of every run on ``channel`` whose target's ``chat_id`` is ``chat_id`` (compared as text),
        oldest first."""
        ...


@runtime_checkable
class Expiring(Protocol):
    """A ledger that can drop the text of runs that ended long enough ago (a channel's ``text_retention_hours``)."""

    async def expire(self, channel: str, ended_before_s: float, limit: int) -> list[str]:
        """Remove the text of at most ``limit`` runs of ``channel`` that ended before ``ended_before_s`` (Unix
        seconds) and still hold text, as :meth:`Erasable.erase` does for one; the runs whose text went.

        Raises:
            Exception: the store could not be written (nothing is promised: asked again at the next sweep).
        """
        ...


@runtime_checkable
class TextCache(Protocol):
    """A bounded cache of recent texts an adapter keeps (its renderings: :class:`adapters.rendering.RenderCache`),
    emptied by an erasure so an erased text does not stay there until it is evicted."""

    def clear(self) -> None: ...
