"""A platform call's timeout that measures the platform, not our own event loop (issue 13).

``send_timeout_ms`` used to run from the moment a call was handed to the HTTP client: time spent waiting for a
connection slot, and time our own loop was too busy to read an answer that had already arrived, both counted, so
an overloaded sidecar reported sends as uncertain (maybe landed) that had never left, or that had landed at once.
:class:`SendDeadline` counts instead:

- until the request's headers are written (an aiohttp trace hook, :func:`trace_config`, marks it): ``queue_s``; a call
  that runs out of it was never sent (the caller reports it *not done*, safe to send again);
- from then on: ``timeout_s`` plus every second the loop stalled meanwhile (:func:`core.ingest.pressure.stalled_s`, the
  loop-lag probe's sum of late wake-ups): a call that runs out of it waited that long for the platform itself
  (*unknown*: it may have landed).

The deadline checks itself when it falls due and moves on by the stall it finds; it raises ``TimeoutError`` from the
``async with`` block like :func:`asyncio.timeout`. The hooks run in the calling task and find its deadline in
:data:`CALL`. Without a running probe no stall is known: the timeout then counts from the write alone.
"""

from __future__ import annotations

import asyncio
import contextvars
from types import SimpleNamespace, TracebackType
from typing import Any

import aiohttp

from streamrelay.core.ingest.pressure import stalled_s

CALL: contextvars.ContextVar[SendDeadline | None] = contextvars.ContextVar("platform_call_deadline", default=None)
"""The deadline of the platform call the current task is making (None: none)."""


class SendDeadline:
    """One platform call's deadline (module docstring).

    Args:
        timeout_s: seconds the platform may take once the request is written (loop stalls not counted).
        queue_s: seconds the call may wait for a connection and to write its request (default ``timeout_s``).

    Raises:
        TimeoutError: from the ``async with`` block, once a limit ran out; :attr:`written` then says which.
    """

    def __init__(self, timeout_s: float, *, queue_s: float | None = None) -> None:
        self.timeout_s = timeout_s
        self.queue_s = timeout_s if queue_s is None else queue_s
        self.written = False
        """The request's headers went out: a timeout now may have landed."""
        self.stalled_s = 0.0
        """Seconds of loop stall the deadline was moved by (since the request was written)."""
        self._timeout = asyncio.timeout(None)
        self._handle: asyncio.TimerHandle | None = None
        self._from = 0.0
        self._limit = 0.0
        self._stalled_at = 0.0
        self._token: contextvars.Token[SendDeadline | None] | None = None

    async def __aenter__(self) -> SendDeadline:
        await self._timeout.__aenter__()
        self._token = CALL.set(self)
        self._arm(self.queue_s)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # The timer handle and the token each hold a context in which CALL is this deadline: dropped here, so the
        # deadline is freed when its call ends instead of waiting in a reference cycle for a full collection.
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._token is not None:
            CALL.reset(self._token)
            self._token = None
        await self._timeout.__aexit__(exc_type, exc, tb)

    def mark_written(self) -> None:
        """The request's headers were written: the platform's ``timeout_s`` starts now."""
        if not self.written:
            self.written = True
            self._arm(self.timeout_s)

    def _arm(self, limit_s: float) -> None:
        loop = asyncio.get_running_loop()
        if self._handle is not None:
            self._handle.cancel()
        self._from, self._limit, self._stalled_at = loop.time(), limit_s, stalled_s()
        self._handle = loop.call_at(self._from + limit_s, self._check)

    def _check(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        stalled = stalled_s() - self._stalled_at
        due = self._from + self._limit + stalled
        if self.written:
            self.stalled_s = stalled
        if now < due - 0.001:
            self._handle = loop.call_at(due, self._check)
        elif not self._timeout.expired():
            self._timeout.reschedule(now)  # a moment in the past: it expires at once


async def _headers_sent(session: aiohttp.ClientSession, ctx: SimpleNamespace, params: Any) -> None:
    deadline = CALL.get()
    if deadline is not None:
        deadline.mark_written()


def trace_config() -> aiohttp.TraceConfig:
    """An aiohttp trace config that tells the current call's :class:`SendDeadline` when its request is written."""
    config = aiohttp.TraceConfig()
    config.on_request_headers_sent.append(_headers_sent)
    config.freeze()
    return config


TRACE = trace_config()
"""One frozen trace config for every session (it holds no state)."""


def traced(session: aiohttp.ClientSession) -> aiohttp.ClientSession:
    """``session`` with :data:`TRACE` among its trace configs (added once)."""
    if TRACE not in session.trace_configs:
        session.trace_configs.append(TRACE)
    return session
