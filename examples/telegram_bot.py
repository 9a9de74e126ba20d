"""A Telegram bot (aiogram) that answers with Claude: the model's raw stream goes to the streamrelay sidecar, which
shows it in the chat as it grows. Run it beside the sidecar: ``streamrelay run -- python examples/telegram_bot.py``
(docs/getting-started.md: against the mocks and a fake model, or against Telegram with real tokens)."""

import asyncio
import os

from aiogram import Bot, Dispatcher
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.types import Message
from anthropic import AsyncAnthropic

from streamrelay import RelayClient

model = AsyncAnthropic()  # ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a fake model)
relay = RelayClient(os.environ["STREAMRELAY_URL"], os.environ["STREAMRELAY_TOKEN"])  # set by `streamrelay run`
dp = Dispatcher()


@dp.message()
async def answer(message: Message) -> None:
    run = f"tg-{message.chat.id}-{message.message_id}"
    await relay.start(run, channel="telegram", chat_id=message.chat.id, format="anthropic")
    stream = await model.messages.create(
        model="claude-sonnet-4-5",
        max_tokens=4096,
        messages=[{"role": "user", "content": message.text or ""}],
        stream=True,
    )
    async for event in stream:  # forwarded raw: the sidecar cuts, paces and edits
        await relay.send(run, [event.to_dict()])
    await relay.send(run, [{"kind": "end"}])


async def main() -> None:
    api = os.environ.get("STREAMRELAY_CHANNELS__TELEGRAM__API_BASE")  # the sidecar's own: a mock Bot API in a dry run
    session = AiohttpSession(api=TelegramAPIServer.from_base(api)) if api else None
    await dp.start_polling(Bot(os.environ["TELEGRAM_BOT_TOKEN"], session=session))


if __name__ == "__main__":
    asyncio.run(main())
