"""Fixtures for the contract suite: mock platforms on 127.0.0.1 (port 0) and adapters pointed at them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, TypeVar

import pytest

from adapters.telegram import TelegramAdapter
from core.ports import ChannelAdapter
from mocks.telegram import MockTelegram

TELEGRAM_TOKEN = "123456789:AAE-mock_Secret-Token_0123456789abcdef"
"""Shaped like a real token (digits, colon, 35-character secret), so scrubbing is tested for real."""


A = TypeVar("A", bound=ChannelAdapter)


class Closing:
    """Adapters a test built; the ``closing`` fixture closes them all after the test."""

    def __init__(self) -> None:
        self.adapters: list[ChannelAdapter] = []

    def keep(self, adapter: A) -> A:
        self.adapters.append(adapter)
        return adapter


@pytest.fixture
async def closing() -> AsyncIterator[Closing]:
    keeper = Closing()
    yield keeper
    for adapter in keeper.adapters:
        await adapter.close()


class MakeTelegram(Protocol):
    def __call__(self, *, send_timeout_s: float = 2.0, base_url: str | None = None) -> TelegramAdapter: ...


@pytest.fixture
async def telegram_mock() -> AsyncIterator[MockTelegram]:
    """A running :class:`MockTelegram`, rate limits off, stopped after the test."""
    async with MockTelegram() as mock:
        yield mock


@pytest.fixture
def make_telegram(telegram_mock: MockTelegram, closing: Closing) -> MakeTelegram:
    """Build a :class:`TelegramAdapter` on the mock (or on ``base_url``); each is closed after the test."""

    def make(*, send_timeout_s: float = 2.0, base_url: str | None = None) -> TelegramAdapter:
        url = base_url or telegram_mock.base_url
        return closing.keep(TelegramAdapter(TELEGRAM_TOKEN, base_url=url, send_timeout_s=send_timeout_s))

    return make


@pytest.fixture
def telegram(make_telegram: MakeTelegram) -> TelegramAdapter:
    """The adapter with a 2 s timeout, on the mock."""
    return make_telegram()
