"""Fixtures for the contract suite: mock platforms on 127.0.0.1 (port 0) and adapters pointed at them.

A test module that needs a mock built differently (a fake clock, rate limits on) overrides its ``*_mock``
fixture; the ``make_*`` fixtures then build adapters on that one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol, TypeVar

import pytest

from streamrelay.adapters.discord import DiscordAdapter
from streamrelay.adapters.slack import SlackAdapter
from streamrelay.adapters.telegram import TelegramAdapter
from streamrelay.core.ports import ChannelAdapter
from streamrelay.mocks.discord import MockDiscord
from streamrelay.mocks.slack import MockSlack
from streamrelay.mocks.telegram import MockTelegram

TELEGRAM_TOKEN = "123456789:AAE-mock_Secret-Token_0123456789abcdef"
"""Shaped like a real token (digits, colon, 35-character secret), so scrubbing is tested for real."""
SLACK_TOKEN = "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
"""Shaped like a real bot token, so scrubbing is tested for real."""
DISCORD_TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GmOcKz.mock_Secret-Hmac_0123456789abcdefgh"
"""Shaped like a real bot token (base64 of the user id 123456789012345678, timestamp, HMAC)."""


A = TypeVar("A", bound=ChannelAdapter)
M = TypeVar("M", bound="ServedMock")


class ServedMock(Protocol):
    """What :func:`platform_fixtures` needs of a mock: it runs as an async context manager, at ``base_url``."""

    @property
    def base_url(self) -> str: ...


def platform_fixtures(
    start: Callable[[], AbstractAsyncContextManager[M]], build: Callable[[str], A], *, adapter: str
) -> tuple[object, object]:
    """A platform module's two fixtures: ``mock``, a running ``start()`` (stopped after the test), and one named
    ``adapter``, ``build(mock.base_url)`` (closed after the test). Assign them to the same names in the module::

        mock, matrix = platform_fixtures(MockMatrix, lambda url: MatrixAdapter(TOKEN, base_url=url), adapter="matrix")
    """

    @pytest.fixture(name="mock")
    async def running() -> AsyncIterator[M]:
        async with start() as server:
            yield server

    @pytest.fixture(name=adapter)
    async def built(mock: M) -> AsyncIterator[A]:
        made = build(mock.base_url)
        yield made
        await made.close()

    return running, built


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


class MakeSlack(Protocol):
    def __call__(
        self, *, send_timeout_s: float = 2.0, base_url: str | None = None, token: str = SLACK_TOKEN
    ) -> SlackAdapter: ...


@pytest.fixture
async def slack_mock() -> AsyncIterator[MockSlack]:
    """A running :class:`MockSlack`, rate limits off, stopped after the test."""
    async with MockSlack() as mock:
        yield mock


@pytest.fixture
def make_slack(slack_mock: MockSlack, closing: Closing) -> MakeSlack:
    """Build a :class:`SlackAdapter` on the mock (or on ``base_url``); each is closed after the test."""

    def make(*, send_timeout_s: float = 2.0, base_url: str | None = None, token: str = SLACK_TOKEN) -> SlackAdapter:
        adapter = SlackAdapter(token, base_url=base_url or slack_mock.base_url, send_timeout_s=send_timeout_s)
        adapter.verify_backoff_s = 0.01
        return closing.keep(adapter)

    return make


@pytest.fixture
def slack(make_slack: MakeSlack) -> SlackAdapter:
    """The adapter with a 2 s timeout, on the mock."""
    return make_slack()


class MakeDiscord(Protocol):
    def __call__(self, *, send_timeout_s: float = 2.0, base_url: str | None = None) -> DiscordAdapter: ...


@pytest.fixture
async def discord_mock() -> AsyncIterator[MockDiscord]:
    """A running :class:`MockDiscord`, rate limits off, stopped after the test."""
    async with MockDiscord() as mock:
        yield mock


@pytest.fixture
def make_discord(discord_mock: MockDiscord, closing: Closing) -> MakeDiscord:
    """Build a :class:`DiscordAdapter` on the mock (or on ``base_url``); each is closed after the test."""

    def make(*, send_timeout_s: float = 2.0, base_url: str | None = None) -> DiscordAdapter:
        url = base_url or discord_mock.base_url
        return closing.keep(DiscordAdapter(DISCORD_TOKEN, base_url=url, send_timeout_s=send_timeout_s))

    return make


@pytest.fixture
def discord_adapter(make_discord: MakeDiscord) -> DiscordAdapter:
    """The adapter with a 2 s timeout, on the mock."""
    return make_discord()
