"""Stopping a task for sure: cancel it, and again while it runs on.

One ``task.cancel()`` is not always enough on Python 3.11: ``asyncio.wait_for`` returns the inner result and drops
the cancellation when both happen in the same loop turn (https://github.com/python/cpython/issues/86296, fixed in
3.12 where ``wait_for`` is built on ``asyncio.timeout``). redis-py writes every command under ``wait_for``
(``send_packed_command``), so a run worker or a conversation's reconciler cancelled while it writes to Redis can
swallow the cancellation and go on as if nothing happened: a partition handed over then waits for it forever, its
reads answer nothing, and the run never resumes at the next owner. :func:`stop` cancels again every ``again_s``
until the task ends (a swallowed cancellation leaves the task running normally, so the next one lands at its next
wait), and gives up after ``limit_s`` instead of hanging its caller.

The standard library has no such helper (``asyncio.timeout``/``TaskGroup`` cancel once), hence this module.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

AGAIN_S = 0.5
"""How long a cancelled task may run on before it is cancelled again (seconds)."""


_STOPPING: set[asyncio.Future[bool]] = set()
"""Stops under way whose caller was cancelled meanwhile: they go on to the end (a reference, so they are not lost)."""


async def stop(task: asyncio.Future[Any], *, again_s: float = AGAIN_S, limit_s: float | None = None) -> bool:
    """Cancel ``task`` and wait until it ended, cancelling it again every ``again_s`` seconds while it runs on.

    Its result or exception is retrieved (never "exception was never retrieved"). The caller's own cancellation
    propagates at once, while the stop goes on in the background until ``task`` ended (a caller cancelled half way,
    e.g. a run worker stopped again while it stops its reconciler, never leaves that task running).

    Args:
        task: the task to stop (a done one returns at once).
        again_s: seconds between cancellations (> 0).
        limit_s: give up after this many seconds (None: wait as long as it takes).

    Returns:
        True when the task ended, False when ``limit_s`` passed first.
    """
    if task.done():
        return await _stop(task, again_s, limit_s)
    task.cancel()  # now, in the caller's turn: the task runs no further step before it sees it
    stopping = asyncio.ensure_future(_stop(task, again_s, limit_s))
    _STOPPING.add(stopping)
    stopping.add_done_callback(_STOPPING.discard)
    return await asyncio.shield(stopping)


async def _stop(task: asyncio.Future[Any], again_s: float, limit_s: float | None) -> bool:
    loop = asyncio.get_running_loop()
    deadline = None if limit_s is None else loop.time() + limit_s
    while not task.done():
        task.cancel()
        wait = again_s if deadline is None else min(again_s, deadline - loop.time())
        if wait <= 0:
            return False
        await asyncio.wait({task}, timeout=wait)
    with contextlib.suppress(asyncio.CancelledError, Exception):
        task.result()
    return True


async def stop_all(
    tasks: Iterable[asyncio.Future[Any]], *, again_s: float = AGAIN_S, limit_s: float | None = None
) -> list[asyncio.Future[Any]]:
    """:func:`stop` every task at once; the ones still running after ``limit_s`` (none without a limit)."""
    pending = list(tasks)
    for task in pending:  # now, in the caller's turn (gather starts the stops at the next one)
        task.cancel()
    ended = await asyncio.gather(*(stop(t, again_s=again_s, limit_s=limit_s) for t in pending))
    return [task for task, done in zip(pending, ended, strict=True) if not done]


__all__ = ["AGAIN_S", "stop", "stop_all"]
