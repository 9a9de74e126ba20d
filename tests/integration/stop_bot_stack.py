"""The sidecar with Telegram's Stop button on and the example bot beside it (examples/stop_bot.py): what the Stop tests
on Telegram start, in one place."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import NamedTuple

import httpx
from aiogram import Bot, Dispatcher
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer

from examples.stop_bot import stop_router
from streamrelay.app.service import Sidecar
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import BOT_TOKEN, INGEST_TOKEN, start_stack, stop_stack


class BotStack(NamedTuple):
    """The mock Bot API, the relay and the sidecar serving it, an ingest client, and the example bot: an aiogram
    ``bot`` on the mock and a ``dispatcher`` with the example's Stop router (feed it the mock's updates)."""

    mock: MockTelegram
    relay: Relay
    sidecar: Sidecar
    client: httpx.AsyncClient
    bot: Bot
    dispatcher: Dispatcher


@asynccontextmanager
async def stop_bot_stack(delivery: str = "preview") -> AsyncIterator[BotStack]:
    """:func:`tests.integration.conftest.start_stack` (a memory ledger, the Telegram channel in ``delivery`` mode with
    ``stop_button`` on) with the example bot beside it; everything closed after."""
    mock, relay, sidecar = await start_stack(MemoryLedger(), stop_button=True, delivery=delivery)
    bot = Bot(BOT_TOKEN, session=AiohttpSession(api=TelegramAPIServer.from_base(mock.base_url)))
    dispatcher = Dispatcher()
    dispatcher.include_router(stop_router(sidecar.url, INGEST_TOKEN))
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
            yield BotStack(mock, relay, sidecar, client, bot, dispatcher)
    finally:
        await bot.session.close()
        await stop_stack(mock, relay, sidecar)
