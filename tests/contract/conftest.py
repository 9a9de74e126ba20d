"""Fixtures for the contract suite: mock platforms on 127.0.0.1 (port 0) and adapters pointed at them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

import pytest

from adapters.telegram import TelegramAdapter
from mocks.telegram import MockTelegram

TELEGRAM_TOKEN = "123456789:AAE-mock_Secret-Token_0123456789abcdef"
"""Shaped like a real token (digits, colon, 35-character secret), so scrubbing is tested for real."""


class MakeTelegram(Protocol):
    def __call__(self, *, send_timeout_s: float = 2.0, base_url: str | None = None) -> TelegramAdapter: ...


@pytest.fixture
async def telegram_mock() -> AsyncIterator[MockTelegram]:
    """A running :class:`MockTelegram`, rate limits off, stopped after the test."""
    async with MockTelegram() as mock:
        yield mock


@pytest.fixture
async def make_telegram(telegram_mock: MockTelegram) -> AsyncIterator[MakeTelegram]:
    """Build a :class:`TelegramAdapter` on the mock (or on ``base_url``); each is closed after the test."""
    adapters: list[TelegramAdapter] = []

    def make(*, send_timeout_s: float = 2.0, base_url: str | None = None) -> TelegramAdapter:
        adapter = TelegramAdapter(
            TELEGRAM_TOKEN, base_url=base_url or telegram_mock.base_url, send_timeout_s=send_timeout_s
        )
        adapters.append(adapter)
        return adapter

    yield make
    for adapter in adapters:
        await adapter.close()


@pytest.fixture
def telegram(make_telegram: MakeTelegram) -> TelegramAdapter:
    """The adapter with a 2 s timeout, on the mock."""
    return make_telegram()
