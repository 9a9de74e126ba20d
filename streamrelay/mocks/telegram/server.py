"""The mock Bot API HTTP server: :class:`MockTelegram` (a :class:`mocks.common.MockPlatform`) and
:func:`serve_forever`. The rules it enforces are listed in :mod:`mocks.telegram`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from streamrelay.mocks.common import ChatId, Hang, MockServer, RecordedCall, serve_mock
from streamrelay.mocks.telegram.chats import ChatStore, Draft, StoredMessage
from streamrelay.mocks.telegram.flood import TelegramLimits
from streamrelay.mocks.telegram.updates import UpdateQueue
from streamrelay.mocks.telegram.wire import GAVE_UP, METHODS, TOKEN_RE, ApiError, chat_key, read_params, safe_int

DRAFT_METHOD = "sendMessageDraft"
UPDATES_METHOD = "getUpdates"
_DOCUMENTED = TelegramLimits()


class MockTelegram(MockServer):
    """The mock Bot API server. See :mod:`mocks.telegram` for the rules it enforces.

    Args:
        rate_limits: enforce :class:`TelegramLimits` (429 past them). Off by default.
        limits: the flood-control numbers used when ``rate_limits`` is on.
        hang_s: how long a scripted timeout hangs before it gives up (released early by ``stop``/``reset``).
        clock: monotonic seconds, for ``RecordedCall.t``, flood control and draft lifetimes (inject a fake
            one in tests).
        drafts_enabled: serve sendMessageDraft; when False it is answered like an unknown method (404
            ``Not Found``), as a Bot API server without it would, so fallbacks can be tested.
        draft_ttl_s: a draft not updated for this many seconds is gone (Telegram: about 30 s,
            https://core.telegram.org/bots/api#sendmessagedraft).
        account_ids: private chats and basic groups share one message id counter, as a bot account's do on
            Telegram (ids in one such chat then have gaps); off by default: ids count per chat
            (:mod:`mocks.telegram.chats`).
    """

    platform = "telegram"
    title = "Telegram Bot API"

    def __init__(
        self,
        *,
        rate_limits: bool = False,
        limits: TelegramLimits = _DOCUMENTED,  # frozen: safe to share
        hang_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        drafts_enabled: bool = True,
        draft_ttl_s: float = 30.0,
        account_ids: bool = False,
    ) -> None:
        super().__init__(METHODS, rate_limits=rate_limits, hang_s=hang_s, clock=clock)
        self.limits = limits
        self.drafts_enabled = drafts_enabled
        self.draft_ttl_s = draft_ttl_s
        self.account_ids = account_ids
        self._store = ChatStore(self, limits, clock)
        self.updates = UpdateQueue()
        """What a bot receives through ``getUpdates`` (:mod:`mocks.telegram.updates`)."""

    def _routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/bot{token}/{method}", self._handle)

    # ------------------------------------------------------------ scripting and state

    def reset(self) -> None:
        """Forget messages, drafts, calls, faults, latencies, counters and flood state; release hanging calls."""
        super().reset()
        self._store = ChatStore(self, self.limits, self._clock)
        self.updates.close()
        self.updates = UpdateQueue()

    async def stop(self) -> None:
        """Answer the bots' long polls, then stop as every mock does (:meth:`MockServer.stop`)."""
        self.updates.close()
        await super().stop()

    def chats(self) -> list[ChatId]:
        """Chats that ever received a message, in first-message order (drafts do not count)."""
        return self._store.chats()

    def visible(self, chat_id: ChatId) -> list[tuple[int | str, str]]:
        """What a person sees of the bot persisted: ``(message_id, current text)`` by message id; deleted ones,
        drafts (see :meth:`drafts`) and the person's own messages (:meth:`user_message`) left out."""
        return [(m.message_id, m.text) for m in self.messages(chat_id) if m.from_bot]

    def messages(self, chat_id: ChatId) -> list[StoredMessage]:
        """The stored, not deleted messages of ``chat_id`` (with entities; the person's too), by message id."""
        return self._store.messages(chat_id)

    def user_message(self, chat_id: ChatId, text: str) -> int:
        """Store a message a person wrote in ``chat_id`` (trimmed like a send): it takes the chat's next message
        id, so the bot's later messages come after it. The bot can reply to it; editing it is 400 ``message
        can't be edited``. It is in :meth:`messages`, not in :meth:`visible`. Returns its message id.

        Raises:
            ValueError: no chat id, or a text Telegram would refuse (empty, too long).
        """
        message = self._store.user_message(chat_id, text)
        self.updates.put(self._store.message_update(message))  # the bot receives it (getUpdates)
        return message.message_id

    def press(
        self, chat_id: ChatId, message_id: int | str, data: str | None, user: int | str | None = None
    ) -> dict[str, Any]:
        """A person presses an inline button (:meth:`mocks.telegram.buttons.ButtonMethods.press`): the
        ``callback_query`` update the bot receives.

        Raises:
            ValueError: no such message or callback button.
        """
        update = self._store.press(chat_id, message_id, data, user)
        self.updates.put(update)
        return update

    def inline_keyboard(self, chat_id: ChatId, message_id: int) -> list[list[dict[str, Any]]] | None:
        """The inline keyboard message ``message_id`` of ``chat_id`` shows (None: none, or no such message)."""
        found = [m for m in self.messages(chat_id) if m.message_id == message_id]
        return found[0].markup if found else None

    def drafts(self, chat_id: ChatId) -> list[Draft]:
        """The live drafts of ``chat_id`` (updated within ``draft_ttl_s``), oldest first."""
        return self._store.drafts(chat_id)

    def native_streams(self) -> dict[ChatId, list[tuple[int | str, str, str]]]:
        """Per private chat with one, ``(draft id, "draft", text)`` of each live draft: a draft is no message (it
        lapses about 30 s after its last update, or goes when the chat gets a message)."""
        out: dict[ChatId, list[tuple[int | str, str, str]]] = {}
        for chat in self._store.draft_chats():
            shown: list[tuple[int | str, str, str]] = [(d.draft_id, "draft", d.text) for d in self.drafts(chat)]
            if shown:
                out[chat] = shown
        return out

    # ------------------------------------------------------------ request handling

    async def _handle(self, request: web.Request) -> web.Response:
        token, method = request.match_info["token"], request.match_info["method"]
        call = RecordedCall(method=method, chat_id=None, message_id=None, text=None, t=self._clock())
        self.calls.append(call)
        try:
            params = await read_params(request)
            call.method = self._script.method(method) or method
            call.chat_id = chat_key(params.get("chat_id"))
            call.message_id = safe_int(params.get("message_id"))
            text = params.get("text", params.get("caption"))  # a media send's text is its caption
            call.text = text if isinstance(text, str) else None
            result = await self._process(token, call, params)
        except ApiError as error:
            call.status, call.ok, call.description = error.status, False, error.description
            call.retry_after_s = float(error.retry_after) if error.retry_after is not None else None
            return error.response()
        if result in (Hang.RESET, Hang.RESET_AFTER_COMMIT):
            self._hang_up(request)
        if isinstance(result, Hang):
            return web.json_response(GAVE_UP, status=504)  # the client has gone: nobody reads this
        call.status, call.ok = 200, True
        return web.json_response({"ok": True, "result": result})

    async def _process(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        """Per call: authorize, then count + latency + fault (the script), validate, flood control, store
        (:meth:`MockServer._scripted`)."""
        if not TOKEN_RE.match(token):
            raise ApiError(401, "Unauthorized")
        if call.method not in METHODS or (call.method == DRAFT_METHOD and not self.drafts_enabled):
            raise ApiError(404, "Not Found")
        if call.method == UPDATES_METHOD:  # a long poll: never counted against flood control
            return await self.updates.get_updates(params)
        return await self._scripted(call, lambda: self._store.dispatch(token, call, params), ApiError.from_fault)


async def serve_forever(host: str = "127.0.0.1", port: int = 8081, rate_limits: bool = False) -> None:
    """Run a mock until cancelled (``streamrelay mock telegram --port N``); prints its base URL."""
    await serve_mock(MockTelegram(rate_limits=rate_limits), host, port)
