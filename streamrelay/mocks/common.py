"""What every mock platform server shares: the server base, the case hook, the control API.

Each mock (``mocks.telegram``, ``mocks.slack``, ``mocks.discord``) is a real HTTP server on loopback that a
real SDK talks to unchanged. They share one shape, :class:`MockPlatform`, so the case runner, the demo and
the contract suite drive any of them the same way, and one script format (tests/cases/README.md;
:mod:`mocks.script`)::

    "faults": [{"method": "editMessageText", "nth": 2, "reply": {"status": 429, "retry_after_s": 1}},
               {"method": "sendMessage", "nth": 1, "reply": {"status": 502}, "after_commit": true}],
    "latency_ms": {"sendMessage": [0, 1500]}

Per call, in order, every mock: records the call, counts it (per method, 1-based), waits its scripted
latency, applies its scripted fault (or the outage's), validates, checks rate limits (when on), stores,
answers; an ``after_commit`` fault is answered after the store (:meth:`MockServer._scripted`).

Beside the platform API every mock serves the control API under ``/_mock`` (:mod:`mocks.control`).
Modules: :mod:`mocks.calls` (call records), :mod:`mocks.script` (faults), :mod:`mocks.control`; this module
re-exports their names.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NoReturn, Protocol, Self, TypeVar

from aiohttp import web

from streamrelay.mocks import control
from streamrelay.mocks.calls import ChatId, RecordedCall, call_record, chat_record
from streamrelay.mocks.script import Fault, FaultScript, Hang, Outage, RawAnswer, RawAnswerError, parse_answer

__all__ = [
    "ChatId",
    "Fault",
    "FaultScript",
    "Hang",
    "MockPlatform",
    "MockServer",
    "Outage",
    "RawAnswer",
    "RecordedCall",
    "call_record",
    "chat_record",
    "parse_answer",
    "serve_mock",
    "utf16_len",
]

T = TypeVar("T")


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class MockPlatform(Protocol):
    """What the case runner, the demo and the contract suite need of a mock platform server."""

    platform: str
    rate_limits: bool
    """When True, the mock answers 429 past the platform's documented limits."""
    calls: list[RecordedCall]

    @property
    def base_url(self) -> str:
        """The URL its SDK is pointed at (Telegram ``http://127.0.0.1:PORT``, Slack ``.../api/``, ...)."""
        ...

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str: ...

    async def stop(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: Any) -> None: ...

    def reset(self) -> None: ...

    def configure_from_case(self, case: Mapping[str, Any]) -> None:
        """Apply a case's ``faults``, ``latency_ms`` and ``mock.rate_limits``."""
        ...

    def add_fault(self, method: str, nth: int, reply: Mapping[str, Any] | str, *, after_commit: bool = False) -> None:
        """Script the answer to the ``nth`` call of ``method`` (a :class:`Fault` mapping or a :class:`Hang`);
        ``after_commit``: store the call first."""
        ...

    def set_latency(self, method: str, delays_ms: Sequence[float]) -> None:
        """The k-th call of ``method`` waits ``delays_ms[k-1]`` ms first."""
        ...

    def chats(self) -> Sequence[ChatId]:
        """Conversations that ever received a message, in first-message order."""
        ...

    def visible(self, chat_id: ChatId) -> Sequence[tuple[int | str, str]]:
        """What a person sees of the bot in ``chat_id``: ``(message id, current text)`` in order, deleted ones
        and the person's own messages left out; a media message shows its caption (``""`` without one)."""
        ...

    def user_message(self, chat_id: ChatId, text: str) -> int | str:
        """Store a message a person wrote in ``chat_id`` (it takes the next id); return its id."""
        ...


class MockServer:
    """What every mock server does the same way: an aiohttp server on loopback, the fault script, the recorded
    calls, the case hook, the control API. A platform's mock subclasses it and adds its routes in
    :meth:`_routes`.

    Args:
        methods: the platform's method names (faults and latencies are scripted by them).
        rate_limits: answer 429 past the platform's documented limits.
        hang_s: how long a scripted timeout holds its answer (released early by ``stop`` / ``reset``).
        clock: the time source of recorded calls, rate limits and outages (seconds).
    """

    platform = ""
    title = ""
    """What ``serve_forever`` prints, e.g. ``Telegram Bot API``."""
    api_prefix = ""
    """The path the SDK's base URL ends with, e.g. ``/api/v10`` (Discord)."""

    def __init__(
        self,
        methods: Sequence[str],
        *,
        rate_limits: bool = False,
        hang_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate_limits = rate_limits
        self._clock = clock
        self._script = FaultScript(methods, hang_s, clock)
        self._runner: web.AppRunner | None = None
        self._root_url: str | None = None
        self._epoch_s = clock()
        self.calls: list[RecordedCall] = []

    def _routes(self, app: web.Application) -> None:
        """Add the platform's routes to ``app``."""
        raise NotImplementedError

    def reset(self) -> None:
        """Forget calls, faults, latencies, the outage and counts; release hanging calls; ``t_ms`` of the
        control API's state counts from now. Each platform's mock also forgets its messages and rate state."""
        self._script.reset()
        self.calls = []
        self._epoch_s = self._clock()

    def chats(self) -> Sequence[ChatId]:
        """Conversations that ever received a message, in first-message order (each platform's mock)."""
        raise NotImplementedError

    def visible(self, chat_id: ChatId) -> Sequence[tuple[int | str, str]]:
        """What a person sees of the bot in ``chat_id``: ``(message id, current text)`` (each platform's mock)."""
        raise NotImplementedError

    def user_message(self, chat_id: ChatId, text: str) -> int | str:
        """Store a message a person wrote in ``chat_id``; return its id (each platform's mock implements it).

        Raises:
            ValueError: a conversation or text the platform would refuse.
        """
        raise NotImplementedError

    def press(
        self, chat_id: ChatId, message_id: int | str, data: str | None, user: int | str | None = None
    ) -> dict[str, Any]:
        """A person (``user``: their platform user id; None: the mock's one person) presses a button of a bot
        message: what the platform delivers to the bot (:mod:`mocks.control`).

        Raises:
            ValueError: no such message or button (a mock without buttons has none).
        """
        raise ValueError(f"the {self.platform} mock has no buttons to press")

    @property
    def script(self) -> FaultScript:
        """The scripted faults, latencies, outage and call counts."""
        return self._script

    @property
    def epoch_s(self) -> float:
        """The mock's clock (seconds) at its start or last reset: the control API's ``t_ms`` count from it."""
        return self._epoch_s

    @property
    def hang_s(self) -> float:
        """How long a scripted timeout hangs, in seconds."""
        return self._script.hang_s

    @hang_s.setter
    def hang_s(self, value: float) -> None:
        self._script.hang_s = value

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on ``host:port`` (0: any free port); return the base URL its SDK is pointed at. The control
        API is served on the same host and port (:attr:`control_url`).

        Raises:
            RuntimeError: it is already running.
        """
        if self._runner is not None:
            raise RuntimeError(f"{type(self).__name__} is already running")
        app = web.Application(middlewares=[_raw_answers])
        control.add_routes(app, self)  # first: a platform's catch-all route must not take /_mock
        self._routes(app)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)  # request paths can hold tokens
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        self._runner, self._root_url = runner, f"http://{host}:{runner.addresses[0][1]}"
        self._epoch_s = self._clock()
        return self.base_url

    async def stop(self) -> None:
        """Release hanging calls and close the server (idempotent).

        Releasing goes through :meth:`FaultScript.reset`, so scripted faults, latencies and call counts are
        forgotten too; stored messages and recorded calls stay readable.
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
        """The base URL of the running server.

        Raises:
            RuntimeError: it is not started.
        """
        if self._root_url is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._root_url + self.api_prefix

    @property
    def control_url(self) -> str:
        """The control API's root, ``http://HOST:PORT/_mock`` (:mod:`mocks.control`).

        Raises:
            RuntimeError: it is not started.
        """
        if self._root_url is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._root_url + control.PREFIX

    def add_fault(self, method: str, nth: int, reply: Mapping[str, Any] | str, *, after_commit: bool = False) -> None:
        """Script the answer to the ``nth`` (1-based, every call of ``method`` since the last reset counts) call
        of ``method``: a :class:`Fault` mapping (rendered in the platform's error shape) or a :class:`Hang` name.
        ``after_commit``: the call is stored first, exactly as on success, then answered with ``reply``.

        Raises:
            ValueError: unknown method, ``nth`` < 1, a bad reply, or that call is already scripted.
        """
        self._script.add_fault(method, nth, reply, after_commit=after_commit)

    def set_latency(self, method: str, delays_ms: Sequence[float]) -> None:
        """The k-th call of ``method`` waits ``delays_ms[k-1]`` ms before it is processed.

        Raises:
            ValueError: unknown method.
        """
        self._script.set_latency(method, delays_ms)

    def configure_from_case(self, case: Mapping[str, Any]) -> None:
        """Apply a case's ``faults``, ``latency_ms`` and ``mock.rate_limits`` (tests/cases/README.md)."""
        self._script.configure_from_case(case)
        self.rate_limits = case.get("mock", {}).get("rate_limits", "off") == "documented"

    async def _scripted(
        self, call: RecordedCall, commit: Callable[[], T], refuse: Callable[[Fault], Exception]
    ) -> T | Hang:
        """Run one call of ``call.method`` (a canonical name) through its script: count it, wait its latency,
        then per its scripted answer: a :class:`Fault` is raised as ``refuse(fault)`` before ``commit`` (or
        after it, with ``after_commit``); a :class:`Hang` before commit hangs or resets without committing; one
        after commit commits, then hangs or resets. ``commit`` validates, checks rate limits and stores (its
        own refusals propagate: nothing stored, nothing to answer after).

        A :class:`RawAnswer` is raised as :class:`~mocks.script.RawAnswerError` before ``commit`` (or after it, with
        ``after_commit``), recorded with its status (``ok`` False: no answer in the platform's shape), and sent
        as it is by the server's middleware: no platform handler needs to know it.

        Returns:
            ``commit()``'s result, or the :class:`Hang` that took the answer (the caller answers nothing real:
            :meth:`_hang_up` for a reset).
        """
        answer = await self._script.begin(call.method)
        if isinstance(answer, Fault) and not answer.after_commit:
            raise refuse(answer)
        if isinstance(answer, RawAnswer) and not answer.after_commit:
            raise _raw(call, answer)
        if isinstance(answer, Hang) and not answer.commits:
            return await self._hold(call, answer)
        result = commit()
        if isinstance(answer, Fault):
            raise refuse(answer)
        if isinstance(answer, RawAnswer):
            raise _raw(call, answer)
        if isinstance(answer, Hang):
            return await self._hold(call, answer)
        return result

    async def _hold(self, call: RecordedCall, hang: Hang) -> Hang:
        if hang in (Hang.RESET, Hang.RESET_AFTER_COMMIT):
            call.description = hang.value
        else:
            await self._script.hang(call, hang)
        return hang

    @staticmethod
    def _hang_up(request: web.Request) -> NoReturn:
        """Close the connection at once without an answer (TCP RST): the client sees "connection reset".

        Raises:
            asyncio.CancelledError: always (how aiohttp is told the handler has no answer).
        """
        transport = request.transport
        if transport is not None:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()
        raise asyncio.CancelledError


def _raw(call: RecordedCall, answer: RawAnswer) -> RawAnswerError:
    call.status, call.ok, call.description = answer.status, False, f"raw answer: {answer.body[:80]}"
    return RawAnswerError(answer)


@web.middleware
async def _raw_answers(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Send a scripted :class:`RawAnswer` exactly: its status, its body, its ``Content-Type``."""
    try:
        return await handler(request)
    except RawAnswerError as sent:
        answer = sent.answer
        return web.Response(
            status=answer.status, body=answer.body.encode(), headers={"Content-Type": answer.content_type}
        )


async def serve_mock(mock: MockServer, host: str, port: int) -> None:
    """Run ``mock`` until cancelled (``streamrelay mock PLATFORM --port N``); print its base URL and its
    control API."""
    base_url = await mock.start(host, port)
    try:
        limits = "on" if mock.rate_limits else "off"
        print(f"mock {mock.title} on {base_url} (rate limits {limits})", flush=True)
        routes = control.describe(mock.control_url.removesuffix(control.PREFIX))
        print(
            f"control API: {routes['state']} · {routes['script']} · {routes['user_message']} · "
            f"{routes['reset']} (README: the mock control API)",
            flush=True,
        )
        await asyncio.Event().wait()
    finally:
        await mock.stop()
