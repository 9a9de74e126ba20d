"""The mock Bot API HTTP server: :class:`MockTelegram` (a :class:`mocks.common.MockPlatform`) and
:func:`serve_forever`. The rules it enforces are listed in :mod:`mocks.telegram`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

from aiohttp import web

from mocks.common import ChatId, Fault, FaultScript, Hang, RecordedCall
from mocks.telegram.chats import ChatStore, Draft, StoredMessage
from mocks.telegram.flood import TelegramLimits
from mocks.telegram.wire import GAVE_UP, METHODS, TOKEN_RE, ApiError, chat_key, read_params, safe_int

DRAFT_METHOD = "sendMessageDraft"
_DOCUMENTED = TelegramLimits()


class MockTelegram:
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

    platform: str = "telegram"

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
        self.rate_limits = rate_limits
        self.limits = limits
        self.drafts_enabled = drafts_enabled
        self.draft_ttl_s = draft_ttl_s
        self._clock = clock
        self._script = FaultScript(METHODS, hang_s)
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None
        self.calls: list[RecordedCall] = []
        self._store = ChatStore(self, limits, clock)

    @property
    def hang_s(self) -> float:
        """How long a scripted timeout hangs, in seconds."""
        return self._script.hang_s

    @hang_s.setter
    def hang_s(self, value: float) -> None:
        self._script.hang_s = value

    # ------------------------------------------------------------ lifecycle

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on ``host:port`` (0: any free port); return the base URL, e.g. ``http://127.0.0.1:PORT``."""
        if self._runner is not None:
            raise RuntimeError("MockTelegram is already running")
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)  # the access log shows tokens
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0]
        self._runner, self._base_url = runner, f"http://{host}:{bound[1]}"
        return self._base_url

    async def stop(self) -> None:
        """Release hanging calls and close the server (idempotent).

        Releasing goes through :meth:`mocks.common.FaultScript.reset`, so scripted faults, latencies and call
        counts are forgotten too; messages, drafts and recorded calls stay readable.
        """
        self._script.reset()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` of the running server."""
        if self._base_url is None:
            raise RuntimeError("MockTelegram is not started")
        return self._base_url

    # ------------------------------------------------------------ scripting and state

    def reset(self) -> None:
        """Forget messages, drafts, calls, faults, latencies, counters and flood state; release hanging calls."""
        self._script.reset()
        self.calls = []
        self._store = ChatStore(self, self.limits, self._clock)

    def add_fault(self, method: str, nth: int, reply: Mapping[str, Any] | str) -> None:
        """Script the answer to the ``nth`` (1-based, every call of ``method`` counts) call of ``method``.

        Args:
            method: a Bot API method name, e.g. ``sendMessage`` or ``sendMessageDraft``.
            nth: which call, 1-based.
            reply: ``{"status", "description"?, "retry_after_s"?}`` (429 carries ``parameters.retry_after``
                and ``Retry-After``, rounded up to whole seconds >= 1; other statuses default to the HTTP
                phrase, e.g. ``Bad Gateway``), or ``"timeout_after_commit"`` / ``"timeout_before_commit"``
                (see :class:`mocks.common.Hang`).

        Raises:
            ValueError: unknown method, ``nth`` < 1, a bad reply, or that call is already scripted.
        """
        self._script.add_fault(method, nth, reply)

    def set_latency(self, method: str, delays_ms: Sequence[float]) -> None:
        """The k-th call of ``method`` waits ``delays_ms[k-1]`` ms first (none past the list).

        Raises:
            ValueError: unknown method.
        """
        self._script.set_latency(method, delays_ms)

    def configure_from_case(self, case: Mapping[str, Any]) -> None:
        """Apply a case's ``faults``, ``latency_ms`` and ``mock.rate_limits`` (shared/cases/README.md)."""
        self._script.configure_from_case(case)
        self.rate_limits = case.get("mock", {}).get("rate_limits", "off") == "documented"

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
    mock = MockTelegram(rate_limits=rate_limits)
    base_url = await mock.start(host, port)
    try:
        limits = "on" if rate_limits else "off"
        print(f"mock Telegram Bot API on {base_url} (rate limits {limits})", flush=True)
        await asyncio.Event().wait()
    finally:
        await mock.stop()
