"""MockTelegram as an id probe meets it: a person's messages, id order, the three edit answers, after_commit
faults. Driven by aiogram itself (the SDK the adapter uses), over real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import TelegramBadRequest, TelegramServerError

from streamrelay.mocks.telegram import NOT_MODIFIED, MockTelegram

pytestmark = pytest.mark.timeout(10)

TOKEN = "123456:ABC-def_456"
OTHER_BOT = "654321:XYZ-other"
CHAT = 42


@pytest.fixture
async def mock() -> AsyncIterator[MockTelegram]:
    async with MockTelegram() as server:
        yield server


async def _bot(mock: MockTelegram, token: str = TOKEN) -> Bot:
    return Bot(token, session=AiohttpSession(api=TelegramAPIServer.from_base(mock.base_url)))


@pytest.fixture
async def bot(mock: MockTelegram) -> AsyncIterator[Bot]:
    bot = await _bot(mock)
    try:
        yield bot
    finally:
        await bot.session.close()


async def test_a_persons_message_takes_the_next_id_in_the_chat(bot: Bot, mock: MockTelegram) -> None:
    first = await bot.send_message(CHAT, "Hello")
    person = mock.user_message(CHAT, "  a question  ")
    second = await bot.send_message(CHAT, "An answer", reply_parameters={"message_id": person})  # type: ignore[arg-type]
    elsewhere = await bot.send_message(CHAT + 1, "Other chat")

    assert (first.message_id, person, second.message_id, elsewhere.message_id) == (1, 2, 3, 1)
    assert [(m.message_id, m.text, m.from_bot) for m in mock.messages(CHAT)] == [
        (1, "Hello", True),
        (2, "a question", False),
        (3, "An answer", True),
    ]
    assert mock.visible(CHAT) == [(1, "Hello"), (3, "An answer")]  # what the bot delivered
    assert second.reply_to_message is not None
    assert second.reply_to_message.from_user is not None
    assert (second.reply_to_message.from_user.is_bot, second.reply_to_message.text) == (False, "a question")
    assert [c.method for c in mock.calls] == ["sendMessage"] * 3  # the person's message is no call


async def test_the_three_edit_answers_an_id_probe_reads(bot: Bot, mock: MockTelegram) -> None:
    await bot.send_message(CHAT, "Your refund was approved.")
    mock.user_message(CHAT, "Your refund was approved.")  # the same words, from the person

    answers = []
    for message_id in (1, 2, 3):
        try:
            await bot.edit_message_text("  Your refund was approved.\n", chat_id=CHAT, message_id=message_id)
        except TelegramBadRequest as error:
            answers.append(error.message)

    assert answers == [
        NOT_MODIFIED,  # the bot's own, same text after trimming
        "Bad Request: message can't be edited",  # the person's, whatever the text
        "Bad Request: message to edit not found",  # no message 3 yet
    ]
    assert [c.status for c in mock.calls] == [200, 400, 400, 400]


async def test_a_persons_message_cannot_be_edited_with_other_text_either(bot: Bot, mock: MockTelegram) -> None:
    person = mock.user_message(CHAT, "hi")

    with pytest.raises(TelegramBadRequest, match="message can't be edited"):
        await bot.edit_message_text("changed", chat_id=CHAT, message_id=person)
    assert [m.text for m in mock.messages(CHAT)] == ["hi"]


async def test_another_bots_message_cannot_be_edited(bot: Bot, mock: MockTelegram) -> None:
    other = await _bot(mock, OTHER_BOT)
    try:
        sent = await other.send_message(CHAT, "mine")
    finally:
        await other.session.close()

    with pytest.raises(TelegramBadRequest, match="message can't be edited"):
        await bot.edit_message_text("mine", chat_id=CHAT, message_id=sent.message_id)


async def test_not_modified_compares_entities_as_a_set(bot: Bot, mock: MockTelegram) -> None:
    bold = {"type": "bold", "offset": 0, "length": 1}
    italic = {"type": "italic", "offset": 1, "length": 1}
    await bot.send_message(CHAT, "ab", entities=[bold, italic])  # type: ignore[list-item]

    with pytest.raises(TelegramBadRequest, match="message is not modified"):
        await bot.edit_message_text("ab", chat_id=CHAT, message_id=1, entities=[italic, bold])  # type: ignore[list-item]


async def test_account_ids_share_one_counter_across_private_chats_and_groups() -> None:
    async with MockTelegram(account_ids=True) as mock:
        bot = await _bot(mock)
        try:
            a = await bot.send_message(1, "to a")
            group = await bot.send_message(-5, "to a group")
            person = mock.user_message(2, "from b")
            b = await bot.send_message(2, "to b")
            supergroup = await bot.send_message(-1_000_000_000_001, "to a supergroup")
            again = await bot.send_message(1, "to a again")
        finally:
            await bot.session.close()

    assert (a.message_id, group.message_id, person, b.message_id) == (1, 2, 3, 4)
    assert supergroup.message_id == 1  # supergroups and channels count per chat
    assert again.message_id == 5  # a gap in chat 1: ids 2-4 are elsewhere


async def test_user_message_refuses_what_telegram_would(mock: MockTelegram) -> None:
    with pytest.raises(ValueError, match="text is empty"):
        mock.user_message(CHAT, "   ")
    with pytest.raises(ValueError, match="chat id"):
        mock.user_message("", "hi")


async def test_after_commit_send_is_stored_then_answered_with_the_fault(bot: Bot, mock: MockTelegram) -> None:
    mock.configure_from_case(
        {"faults": [{"method": "sendMessage", "nth": 1, "reply": {"status": 502}, "after_commit": True}]}
    )

    with pytest.raises(TelegramServerError, match="Bad Gateway"):
        await bot.send_message(CHAT, "Your refund was approved.")
    again = await bot.send_message(CHAT, "Your refund was approved.")

    assert mock.visible(CHAT) == [(1, "Your refund was approved."), (2, "Your refund was approved.")]
    [stored, resent] = mock.calls
    assert (stored.status, stored.ok, stored.message_id) == (502, False, 1)
    assert (resent.status, resent.ok, again.message_id) == (200, True, 2)
    with pytest.raises(TelegramBadRequest, match="message is not modified"):  # the probe finds it
        await bot.edit_message_text("Your refund was approved.", chat_id=CHAT, message_id=1)


async def test_after_commit_edit_is_applied_then_answered_with_the_fault(bot: Bot, mock: MockTelegram) -> None:
    await bot.send_message(CHAT, "draft")
    mock.add_fault("editMessageText", 1, {"status": 500, "description": "Internal Server Error"}, after_commit=True)

    with pytest.raises(TelegramServerError):
        await bot.edit_message_text("final", chat_id=CHAT, message_id=1)

    assert mock.visible(CHAT) == [(1, "final")]
    assert (mock.calls[-1].status, mock.calls[-1].message_id) == (500, 1)


async def test_after_commit_on_a_refused_call_answers_the_refusal(bot: Bot, mock: MockTelegram) -> None:
    mock.add_fault("sendMessage", 1, {"status": 502}, after_commit=True)

    with pytest.raises(TelegramBadRequest, match="message text is empty"):
        await bot.send_message(CHAT, "   ")  # nothing to store, so nothing to answer after

    assert mock.visible(CHAT) == []
    assert mock.calls[0].status == 400
