"""The mock Bot API HTTP server: :class:`MockTelegram` (a :class:`mocks.common.MockPlatform`) and
:func:`serve_forever`. The rules it enforces are listed in :mod:`mocks.telegram`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from mocks.common import ChatId, Fault, Hang, MockServer, RecordedCall, serve_mock
from mocks.telegram.chats import ChatStore, Draft, StoredMessage
from mocks.telegram.flood import TelegramLimits
from mocks.telegram.wire import GAVE_UP, METHODS, TOKEN_RE, ApiError, chat_key, read_params, safe_int

DRAFT_METHOD = "sendMessageDraft"
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
    ) -> None:
        super().__init__(METHODS, rate_limits=rate_limits, hang_s=hang_s, clock=clock)
        self.limits = limits
        self.drafts_enabled = drafts_enabled
        self.draft_ttl_s = draft_ttl_s
        self._store = ChatStore(self, limits, clock)

    def _routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/bot{token}/{method}", self._handle)

    # ------------------------------------------------------------ scripting and state

    def reset(self) -> None:
        """Forget messages, drafts, calls, faults, latencies, counters and flood state; release hanging calls."""
        self._script.reset()
        self.calls = []
        self._store = ChatStore(self, self.limits, self._clock)

    def chats(self) -> list[ChatId]:
        """Chats that ever received a message, in first-message order (drafts do not count)."""
        return self._store.chats()

    def visible(self, chat_id: ChatId) -> list[tuple[int, str]]:
        """What a person sees persisted: ``(message_id, current text)`` by message id, deleted ones and
        drafts left out (see :meth:`drafts`)."""
        return [(m.message_id, m.text) for m in self.messages(chat_id)]

    def messages(self, chat_id: ChatId) -> list[StoredMessage]:
        """The visible stored messages of ``chat_id`` (with entities), by message id."""
        return self._store.messages(chat_id)

    def drafts(self, chat_id: ChatId) -> list[Draft]:
        """The live drafts of ``chat_id`` (updated within ``draft_ttl_s``), oldest first."""
        return self._store.drafts(chat_id)

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
            call.text = params.get("text") if isinstance(params.get("text"), str) else None
            result = await self._process(token, call, params)
        except ApiError as error:
            call.status, call.ok, call.description = error.status, False, error.description
            call.retry_after_s = float(error.retry_after) if error.retry_after is not None else None
            return error.response()
        if isinstance(result, Hang):
            return web.json_response(GAVE_UP, status=504)  # the client has gone: nobody reads this
        call.status, call.ok = 200, True
        return web.json_response({"ok": True, "result": result})

    async def _process(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        """Per call: authorize, count + latency + fault (the script), validate, flood control, store."""
        if not TOKEN_RE.match(token):
            raise ApiError(401, "Unauthorized")
        if call.method not in METHODS or (call.method == DRAFT_METHOD and not self.drafts_enabled):
            raise ApiError(404, "Not Found")
        fault = await self._script.begin(call.method)
        if isinstance(fault, Fault):
            raise ApiError.from_fault(fault)
        if fault is Hang.BEFORE_COMMIT:
            await self._script.hang(call, fault)
            return fault
        result = self._store.dispatch(token, call, params)
        if fault is Hang.AFTER_COMMIT:
            await self._script.hang(call, fault)
            return fault
        return result


async def serve_forever(host: str = "127.0.0.1", port: int = 8081, rate_limits: bool = False) -> None:
    """Run a mock until cancelled (``streamrelay mock telegram --port N``); prints its base URL."""
    await serve_mock(MockTelegram(rate_limits=rate_limits), host, port)
