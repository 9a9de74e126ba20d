"""Contract: what each adapter's boundary table makes of a network failure (:mod:`adapters.http_failures`).

A failure before the request was written means nothing was sent (``PlatformUnavailableError``: retry freely); one
after it may have been written means the platform may have processed it (``UncertainDeliveryError``: settle, never
send blindly again). The SDKs raise these from deep inside aiohttp, so the tables are checked with the exceptions
themselves, as each SDK hands them over (aiogram wraps them in ``TelegramNetworkError``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp
import pytest
from aiogram.exceptions import TelegramNetworkError
from aiogram.methods import SendMessage

from streamrelay.adapters.discord.errors import translate as discord_translate
from streamrelay.adapters.slack.errors import translate as slack_translate
from streamrelay.adapters.telegram.errors import translate as telegram_translate
from streamrelay.core.errors import AnswerTimeoutError, DeliveryError, PlatformUnavailableError, UncertainDeliveryError

Translate = Callable[[BaseException], DeliveryError]


def _telegram(exc: BaseException) -> DeliveryError:
    wrapped = TelegramNetworkError(method=SendMessage(chat_id=1, text="x"), message=f"{type(exc).__name__}: {exc}")
    wrapped.__cause__ = exc
    return telegram_translate(wrapped, method="sendMessage", target="1", scrub=str)


def _slack(exc: BaseException) -> DeliveryError:
    return slack_translate(exc, method="chat.postMessage", target="C1", scrub=str)


def _discord(exc: BaseException) -> DeliveryError:
    return discord_translate(exc, method="createMessage", target="1", scrub=str)


TRANSLATE: dict[str, Translate] = {"telegram": _telegram, "slack": _slack, "discord": _discord}

NOTHING_SENT: list[BaseException] = [
    aiohttp.ConnectionTimeoutError("connect timed out"),
    aiohttp.ClientConnectionResetError("Cannot write to closing transport"),
    aiohttp.InvalidURL("http://127.0.0.1:99999"),
]
MAYBE_PROCESSED: list[BaseException] = [
    aiohttp.ServerDisconnectedError(),
    aiohttp.ClientOSError(104, "Can not write request body"),
    aiohttp.ClientPayloadError("Response payload is not completed"),
    aiohttp.SocketTimeoutError("Timeout on reading data from socket"),
]


@pytest.mark.parametrize("platform", sorted(TRANSLATE))
@pytest.mark.parametrize("exc", NOTHING_SENT, ids=lambda e: type(e).__name__)
def test_a_request_never_written_is_platform_unavailable(platform: str, exc: BaseException) -> None:
    assert type(TRANSLATE[platform](exc)) is PlatformUnavailableError


@pytest.mark.parametrize("platform", sorted(TRANSLATE))
@pytest.mark.parametrize("exc", MAYBE_PROCESSED, ids=lambda e: type(e).__name__)
def test_a_request_that_may_have_been_written_is_uncertain(platform: str, exc: BaseException) -> None:
    # no answer in time: the platform was reached (most often it stored the call): a kind of uncertain of its own
    expected = AnswerTimeoutError if isinstance(exc, asyncio.TimeoutError) else UncertainDeliveryError
    assert type(TRANSLATE[platform](exc)) is expected


def test_a_refused_connection_is_platform_unavailable() -> None:
    key = aiohttp.client_reqrep.ConnectionKey("127.0.0.1", 1, False, True, None, None, None)
    refused = aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "Connection refused"))
    assert {type(translate(refused)) for translate in TRANSLATE.values()} == {PlatformUnavailableError}
