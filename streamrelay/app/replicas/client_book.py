"""A replica's client book: a client's active runs counted by this replica's partitions and, across every replica,
in Redis (:mod:`adapters.redis.client_limits`).

The front counts a run when its ``run.start`` is taken (:meth:`app.replicas.front.ReplicaFront._gate`); the run's
owner says it is still active every third of the count's life (:meth:`SharedClientBook.keep`: one round trip for all
its runs) and takes it out when it ends (:meth:`SharedClientBook.left`). A run whose replica died stays counted
until its new owner resumes it (and keeps it counted) or its count lapses (``ttl_s``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from redis.exceptions import RedisError

from streamrelay.adapters.redis.client_limits import SharedClientLimits
from streamrelay.core.ingest.clients import ClientBook, ClientLimits

_log = logging.getLogger("streamrelay.replicas")


class SharedClientBook(ClientBook):
    """:class:`core.ingest.clients.ClientBook` whose runs that end leave the shared count too.

    Args:
        limits: each client's limits by name.
        shared: the counts in Redis.
    """

    def __init__(self, limits: Mapping[str, ClientLimits] | None, shared: SharedClientLimits) -> None:
        super().__init__(limits)
        self.shared = shared
        self._leaving: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return f"SharedClientBook(active={dict(self.active)!r}, {self.shared!r})"

    def left(self, key: str, *, ended: bool = True) -> None:
        """The run keyed ``key`` left this replica: out of its count at once; out of Redis's in the background when it
        ``ended`` (when Redis does not answer, its count lapses after ``ttl_s``). A run that only stopped here (its
        partition was handed over: it goes on at the next owner) stays counted in Redis."""
        super().left(key, ended=ended)
        if not ended:
            return
        try:
            task = asyncio.get_running_loop().create_task(self._leave(key), name="clients:left")
        except RuntimeError:  # no loop (a test's synchronous book)
            return
        self._leaving.add(task)
        task.add_done_callback(self._leaving.discard)

    async def _leave(self, key: str) -> None:
        try:
            await self.shared.left(key)
        except (RedisError, OSError) as exc:  # the error's name only: its text may name the Redis URL
            _log.debug("run %s: not taken out of its client's active runs (%s): it lapses", key, type(exc).__name__)

    async def keep(self, active: Callable[[], list[str]]) -> None:
        """Forever: every third of ``ttl_s``, the runs ``active()`` names (this replica's) count again."""
        while True:
            await asyncio.sleep(self.shared.ttl_s / 3)
            try:
                await self.shared.refresh(active())
            except (RedisError, OSError) as exc:
                _log.warning("clients' active runs not refreshed in Redis (%s)", type(exc).__name__)
