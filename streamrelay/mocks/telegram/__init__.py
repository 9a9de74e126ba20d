"""A mock Telegram Bot API server: real HTTP on loopback, strict like Telegram, every call recorded.

aiogram talks to it unchanged::

    async with MockTelegram() as mock:
        session = AiohttpSession(api=TelegramAPIServer.from_base(mock.base_url))
        bot = Bot("123456:ABC-DEF", session=session)

Routes ``POST|GET /bot{token}/{method}`` with form-encoded, multipart, JSON or query parameters. Methods:
``getMe``, ``sendMessage``, ``editMessageText``, ``deleteMessage``, ``sendChatAction``, ``sendMessageDraft``,
``sendPhoto``, ``sendDocument``, ``sendAudio``, ``sendVideo`` (:mod:`~mocks.telegram.media`: a media message shows
its caption), ``getUpdates`` (:mod:`~mocks.telegram.updates`: a person's message and a button press reach a polling
bot, e.g. aiogram's ``start_polling``)
(names are case-insensitive, as on Telegram). A token not shaped ``<digits>:<secret>`` gets 401
``Unauthorized``; an unknown method gets 404 ``Not Found`` (so does sendMessageDraft when the mock's
``drafts_enabled`` is off).

Modules, one concept each:

- :mod:`~mocks.telegram.server`: :class:`MockTelegram` (HTTP, lifecycle, scripted faults through
  :class:`mocks.common.FaultScript`) and :func:`serve_forever`.
- :mod:`~mocks.telegram.chats`: stored messages and live drafts, and the methods that change them.
- :mod:`~mocks.telegram.content`: text + entities validation, ``parse_mode=HTML``, trimming, the 4096 limit.
- :mod:`~mocks.telegram.media`: sendPhoto, sendDocument, sendAudio and sendVideo, captions.
- :mod:`~mocks.telegram.updates`: the updates a bot receives (``getUpdates``, long polling).
- :mod:`~mocks.telegram.flood`: flood control (:class:`TelegramLimits`), off by default.
- :mod:`~mocks.telegram.wire`: method names, parameters, error answers, User/Chat objects.

Drafts (https://core.telegram.org/bots/api#sendmessagedraft, open to all bots since Bot API 9.5): the mock
keeps the current draft per (chat, ``draft_id``) with its text and last update time; a draft not updated for
``draft_ttl_s`` (30 s) is gone; sendMessage to a chat clears that chat's drafts (an assumption: the final
message replaces the preview). :meth:`MockTelegram.drafts` shows live drafts; :meth:`MockTelegram.visible`
shows persisted messages only. Drafts count toward flood control like sends and edits (an assumption, the
conservative one).

Message ids count per chat (``account_ids=True``: one counter for private chats and basic groups, as on
Telegram); a person's message (:meth:`MockTelegram.user_message`) takes the next id like the bot's. Edits
answer what an id probe reads: ``message to edit not found`` (no such id), ``message can't be edited`` (not the
bot's message), ``message is not modified: …`` (the bot's, same text and entities) (:mod:`mocks.telegram.chats`).

Per call, in order: record the call, count it (per method, 1-based), wait its scripted latency, apply its
scripted fault, validate, check flood control, store, answer (as every mock: :mod:`mocks.common`).
"""

from streamrelay.mocks.common import ChatId, Hang, RecordedCall, utf16_len
from streamrelay.mocks.telegram.chats import DRAFT_ID_INVALID, DRAFT_PEER_INVALID, Draft, StoredMessage
from streamrelay.mocks.telegram.content import MAX_TEXT_CHARS, Entity
from streamrelay.mocks.telegram.flood import TelegramLimits
from streamrelay.mocks.telegram.server import MockTelegram, serve_forever
from streamrelay.mocks.telegram.wire import METHODS, NOT_MODIFIED

__all__ = [
    "DRAFT_ID_INVALID",
    "DRAFT_PEER_INVALID",
    "MAX_TEXT_CHARS",
    "METHODS",
    "NOT_MODIFIED",
    "ChatId",
    "Draft",
    "Entity",
    "Hang",
    "MockTelegram",
    "RecordedCall",
    "StoredMessage",
    "TelegramLimits",
    "serve_forever",
    "utf16_len",
]
