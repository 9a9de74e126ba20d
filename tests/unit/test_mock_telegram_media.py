"""MockTelegram's media messages (sendPhoto, sendDocument) through aiogram: stored with their caption as what a
person reads, shown so by ``visible`` and the control API's state."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import TelegramBadRequest
from aiogram.types import BufferedInputFile

from streamrelay.mocks.telegram import MockTelegram

pytestmark = pytest.mark.timeout(10)

CHAT = 42
CHART = "https://example.com/charts/q3-revenue.png"


@pytest.fixture
async def mock() -> AsyncIterator[MockTelegram]:
    async with MockTelegram() as server:
        yield server


@pytest.fixture
async def bot(mock: MockTelegram) -> AsyncIterator[Bot]:
    bot = Bot("123456:ABC-def", session=AiohttpSession(api=TelegramAPIServer.from_base(mock.base_url)))
    try:
        yield bot
    finally:
        await bot.session.close()


async def test_a_photo_between_texts_shows_its_caption(bot: Bot, mock: MockTelegram) -> None:
    await bot.send_message(CHAT, "Here is the revenue chart for Q3.")
    photo = await bot.send_photo(CHAT, CHART, caption=" Q3 revenue by region ")
    await bot.send_message(CHAT, "As you can see, EMEA grew fastest.")

    assert photo.photo is not None and photo.photo[0].file_id
    assert (photo.caption, photo.text) == ("Q3 revenue by region", None)
    assert mock.visible(CHAT) == [
        (1, "Here is the revenue chart for Q3."),
        (2, "Q3 revenue by region"),
        (3, "As you can see, EMEA grew fastest."),
    ]
    assert [(c.method, c.text, c.message_id) for c in mock.calls][1] == ("sendPhoto", " Q3 revenue by region ", 2)


async def test_an_uploaded_document_without_a_caption_shows_empty(bot: Bot, mock: MockTelegram) -> None:
    sent = await bot.send_document(CHAT, BufferedInputFile(b"a,b\n1,2\n", filename="report.csv"))

    assert sent.document is not None
    assert sent.caption is None
    assert mock.visible(CHAT) == [(1, "")]
    async with httpx.AsyncClient() as http:
        state = (await http.get(f"{mock.control_url}/state")).json()
    assert state["chats"] == {str(CHAT): [{"message_id": 1, "text": ""}]}


async def test_caption_entities_and_html_are_parsed(bot: Bot, mock: MockTelegram) -> None:
    await bot.send_photo(CHAT, CHART, caption="<b>Q3</b> revenue", parse_mode="HTML")

    [message] = mock.messages(CHAT)
    assert (message.text, message.entities) == ("Q3 revenue", [{"type": "bold", "offset": 0, "length": 2}])


async def test_media_refusals(bot: Bot, mock: MockTelegram) -> None:
    await bot.send_photo(CHAT, CHART, caption="chart")

    with pytest.raises(TelegramBadRequest, match="there is no text in the message to edit"):
        await bot.edit_message_text("chart", chat_id=CHAT, message_id=1)
    with pytest.raises(TelegramBadRequest, match="message caption is too long"):
        await bot.send_photo(CHAT, CHART, caption="x" * 1025)
    async with httpx.AsyncClient() as http:
        missing = await http.post(f"{mock.base_url}/bot123456:ABC-def/sendPhoto", json={"chat_id": CHAT})

    assert missing.json()["description"] == "Bad Request: there is no photo in the request"
    assert mock.visible(CHAT) == [(1, "chart")]
