"""Errors of the Redis backend.

::

    OwnershipLostError (core.errors)
      FencedError(partition, token, current)   a write by an owner whose lease was granted to another since
"""

from __future__ import annotations

from streamrelay.core.errors import OwnershipLostError


class FencedError(OwnershipLostError):
    """A write was refused: the partition's fencing token is no longer the writer's.

    Another replica was granted the partition's lease since (the writer was paused, partitioned away, or its lease
    expired): nothing of the write was applied. The writer must stop working on the partition; what it sent to a
    platform meanwhile is an intent without an outcome, settled by the new owner.

    Attributes:
        partition: the partition written to.
        token: the writer's fencing token (None: a read-only handle was asked to write).
        current: the partition's current fencing token (None: never granted).
    """

    def __init__(self, partition: int, token: int | None, current: int | None) -> None:
        held = "no token (read-only)" if token is None else f"token {token}"
        super().__init__(f"partition {partition}: write refused, the writer holds {held}, the current is {current}")
        self.partition = partition
        self.token = token
        self.current = current
