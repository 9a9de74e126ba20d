"""What a bot receives: the updates of the mock's chats, served by ``getUpdates`` (long polling) as the Bot API serves
them (https://core.telegram.org/bots/api#getupdates), so a real aiogram bot's ``start_polling`` runs against the mock.

A person's message (:meth:`mocks.telegram.MockTelegram.user_message`, ``POST /_mock/user_message``) and a button
press (``POST /_mock/press``) each become one update. ``offset`` confirms every update with a smaller ``update_id``
(they are forgotten); ``limit`` (1-100, default 100) caps the answer; ``timeout`` (seconds, default 0) holds the
request until an update arrives or the time is up, then answers ``[]``. Updates are the mock's, not a bot's: any
token polling receives them (one bot per mock, as the tests run it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from streamrelay.mocks.telegram.wire import bad, safe_int

MAX_TIMEOUT_S = 50.0
"""The longest long poll the mock holds (aiogram polls with 30 s)."""


class UpdateQueue:
    """The pending updates, in ``update_id`` order, and the long polls waiting for one."""

    def __init__(self) -> None:
        self._pending: list[dict[str, Any]] = []
        self._arrived = asyncio.Event()
        self._closed = False

    def __repr__(self) -> str:
        return f"UpdateQueue(pending={len(self._pending)})"

    def put(self, update: dict[str, Any]) -> None:
        """Add an update (``{"update_id": N, <kind>: ...}``) and wake the long polls."""
        self._pending.append(update)
        self._wake()

    def close(self) -> None:
        """Answer every waiting long poll now (the mock stops or is reset)."""
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        arrived, self._arrived = self._arrived, asyncio.Event()  # later polls wait for the next one
        arrived.set()

    async def get_updates(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """``getUpdates``: confirm below ``offset``, then the pending updates (waiting up to ``timeout`` s).

        Raises:
            ApiError: 400 when ``offset``, ``limit`` or ``timeout`` is not an integer.
        """
        offset, limit, timeout_s = (params.get(name) for name in ("offset", "limit", "timeout"))
        for name, value in (("offset", offset), ("limit", limit), ("timeout", timeout_s)):
            if value is not None and safe_int(value) is None:
                raise bad(f"invalid {name} specified")
        if offset is not None:
            first = safe_int(offset) or 0
            self._pending = [u for u in self._pending if u["update_id"] >= first]
        count = max(1, min(100, safe_int(limit) or 100))
        wait_s = min(MAX_TIMEOUT_S, max(0.0, float(safe_int(timeout_s) or 0)))
        if not self._pending and wait_s > 0 and not self._closed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), wait_s)
        return self._pending[:count]
