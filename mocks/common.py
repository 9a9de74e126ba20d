"""What every mock platform server shares: recorded calls, scripted faults and latencies, the case hook.

Each mock (``mocks.telegram``, ``mocks.slack``, ``mocks.discord``) is a real HTTP server on loopback that a
real SDK talks to unchanged. They share one shape, :class:`MockPlatform`, so the case runner, the demo and
the contract suite drive any of them the same way, and one script format (shared/cases/README.md)::

    "faults": [{"method": "editMessageText", "nth": 2, "reply": {"status": 429, "retry_after_s": 1}}],
    "latency_ms": {"sendMessage": [0, 1500]}

Per call, in order, every mock: records the call, counts it (per method, 1-based), waits its scripted
latency, applies its scripted fault, validates, checks rate limits (when on), stores, answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self

from aiohttp import web

ChatId = int | str


class Hang(enum.StrEnum):
    """Scripted timeouts: the answer never comes within any client timeout."""

    AFTER_COMMIT = "timeout_after_commit"
    """The call is processed (a message is stored), then the answer hangs."""
    BEFORE_COMMIT = "timeout_before_commit"
    """The call hangs and is never processed."""


@dataclass
class RecordedCall:
    """One call a mock received (failed ones too), in arrival order.

    ``method`` is the platform's method name (Telegram ``sendMessage``, Slack ``chat.postMessage``,
    Discord ``createMessage``). ``status`` is the HTTP status answered; ``None`` while unanswered and for a
    scripted hang (the client gave up first). ``retry_after_s`` is set on a 429. ``message_id`` is the new
    id for a stored send, the requested id for edits and deletes. ``text`` is the text as requested.
    ``t`` is ``time.monotonic()`` seconds when it arrived.
    """

    method: str
    chat_id: ChatId | None
    message_id: int | str | None
    text: str | None
    t: float
    status: int | None = None
    ok: bool = False
    retry_after_s: float | None = None
    description: str | None = None


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@dataclass(frozen=True)
class Fault:
    """A scripted error answer: HTTP ``status``, an optional platform ``description`` and, for a 429, the
    ``retry_after_s`` to announce. Each mock renders it in its platform's error shape."""

    status: int
    description: str | None = None
    retry_after_s: float | None = None

    @classmethod
    def parse(cls, reply: Mapping[str, Any]) -> Fault:
        """From a case's ``{"status", "description"?, "retry_after_s"?}``.

        Raises:
            ValueError: the status is not an error status (>= 400) or a field has the wrong type.
        """
        status = int(reply["status"])
        if status < 400:
            raise ValueError(f"a fault reply needs an error status (>= 400), got {status}")
        description = reply.get("description")
        if description is not None and not isinstance(description, str):
            raise ValueError(f"a fault's description must be a string, got {description!r}")
        retry = reply.get("retry_after_s")
        return cls(status, description, float(retry) if retry is not None else (1.0 if status == 429 else None))


class FaultScript:
    """Scripted faults and latencies per method, and the per-method call counter.

    Args:
        methods: the method names the mock knows (faults for others are refused).
        hang_s: how long a scripted hang holds its answer (longer than any client timeout).
    """

    def __init__(self, methods: Sequence[str], hang_s: float = 30.0) -> None:
        self._methods = {m.lower(): m for m in methods}
        self.hang_s = hang_s
        self.reset()

    def reset(self) -> None:
        """Forget faults, latencies and counts; release every hanging call."""
        release = getattr(self, "_release", None)
        if release is not None:
            release.set()
        self._release = asyncio.Event()
        self._counts: defaultdict[str, int] = defaultdict(int)
        self._faults: dict[tuple[str, int], Fault | Hang] = {}
        self._latency_ms: dict[str, list[float]] = {}

    def method(self, name: str) -> str | None:
        """The canonical spelling of a known method (case-insensitive), or None."""
        return self._methods.get(name.lower())

    def add_fault(self, method: str, nth: int, reply: Mapping[str, Any] | str) -> None:
        """Script the answer to the ``nth`` (1-based) call of ``method``: a :class:`Fault` mapping or a
        :class:`Hang` name.

        Raises:
            ValueError: unknown method, ``nth`` < 1, a bad reply, or that call is already scripted.
        """
        name = self.method(method)
        if name is None or nth < 1:
            known = ", ".join(sorted(self._methods.values()))
            raise ValueError(f"bad fault: method {method!r}, nth {nth} (known methods: {known})")
        if (name, nth) in self._faults:
            raise ValueError(f"call {nth} of {name} already has a fault")
        self._faults[(name, nth)] = Hang(reply) if isinstance(reply, str) else Fault.parse(reply)

    def set_latency(self, method: str, delays_ms: Sequence[float]) -> None:
        """The k-th call of ``method`` waits ``delays_ms[k-1]`` ms first (none past the list).

        Raises:
            ValueError: unknown method.
        """
        name = self.method(method)
        if name is None:
            raise ValueError(f"unknown method {method!r}")
        self._latency_ms[name] = [float(ms) for ms in delays_ms]

    def configure_from_case(self, case: Mapping[str, Any]) -> None:
        """Apply a case's ``faults`` and ``latency_ms``."""
        for fault in case.get("faults", []):
            self.add_fault(fault["method"], int(fault["nth"]), fault["reply"])
        for method, delays in case.get("latency_ms", {}).items():
            self.set_latency(method, delays)

    async def begin(self, method: str) -> Fault | Hang | None:
        """Count one call of ``method``, wait its scripted latency; return its scripted fault, if any."""
        self._counts[method] += 1
        nth = self._counts[method]
        delays = self._latency_ms.get(method, [])
        if nth <= len(delays):
            await self.wait(delays[nth - 1] / 1000)
        return self._faults.get((method, nth))

    async def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, cut short by :meth:`reset` (so a stopping mock never hangs)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._release.wait(), seconds)

    async def hang(self, call: RecordedCall, kind: Hang) -> None:
        """Hold a call's answer for ``hang_s`` (the client gives up first)."""
        call.description = kind.value
        await self.wait(self.hang_s)


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

    def add_fault(self, method: str, nth: int, reply: Mapping[str, Any] | str) -> None:
        """Script the answer to the ``nth`` call of ``method`` (a :class:`Fault` mapping or a :class:`Hang`)."""
        ...

    def set_latency(self, method: str, delays_ms: Sequence[float]) -> None:
        """The k-th call of ``method`` waits ``delays_ms[k-1]`` ms first."""
        ...

    def chats(self) -> Sequence[ChatId]:
        """Conversations that ever received a message, in first-message order."""
        ...

    def visible(self, chat_id: ChatId) -> Sequence[tuple[int | str, str]]:
        """What a person sees in ``chat_id``: ``(message id, current text)`` in order, deleted ones left out."""
        ...


class MockServer:
    """What every mock server does the same way: an aiohttp server on loopback, the fault script, the recorded
    calls, the case hook. A platform's mock subclasses it and adds its routes in :meth:`_routes`.

    Args:
        methods: the platform's method names (faults and latencies are scripted by them).
        rate_limits: answer 429 past the platform's documented limits.
        hang_s: how long a scripted timeout holds its answer (released early by ``stop`` / ``reset``).
        clock: the time source of recorded calls and rate limits (seconds).
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
        self._script = FaultScript(methods, hang_s)
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None
        self.calls: list[RecordedCall] = []

    def _routes(self, app: web.Application) -> None:
        """Add the platform's routes to ``app``."""
        raise NotImplementedError

    @property
    def hang_s(self) -> float:
        """How long a scripted timeout hangs, in seconds."""
        return self._script.hang_s

    @hang_s.setter
    def hang_s(self, value: float) -> None:
        self._script.hang_s = value

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on ``host:port`` (0: any free port); return the base URL its SDK is pointed at.

        Raises:
            RuntimeError: it is already running.
        """
        if self._runner is not None:
            raise RuntimeError(f"{type(self).__name__} is already running")
        app = web.Application()
        self._routes(app)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)  # request paths can hold tokens
        await runner.setup()
        await web.TCPSite(runner, host, port).start()
        self._runner, self._base_url = runner, f"http://{host}:{runner.addresses[0][1]}{self.api_prefix}"
        return self._base_url

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
        if self._base_url is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return self._base_url

    def add_fault(self, method: str, nth: int, reply: Mapping[str, Any] | str) -> None:
        """Script the answer to the ``nth`` (1-based, every call of ``method`` counts) call of ``method``: a
        :class:`Fault` mapping (rendered in the platform's error shape) or a :class:`Hang` name.

        Raises:
            ValueError: unknown method, ``nth`` < 1, a bad reply, or that call is already scripted.
        """
        self._script.add_fault(method, nth, reply)

    def set_latency(self, method: str, delays_ms: Sequence[float]) -> None:
        """The k-th call of ``method`` waits ``delays_ms[k-1]`` ms before it is processed.

        Raises:
            ValueError: unknown method.
        """
        self._script.set_latency(method, delays_ms)

    def configure_from_case(self, case: Mapping[str, Any]) -> None:
        """Apply a case's ``faults``, ``latency_ms`` and ``mock.rate_limits`` (shared/cases/README.md)."""
        self._script.configure_from_case(case)
        self.rate_limits = case.get("mock", {}).get("rate_limits", "off") == "documented"


async def serve_mock(mock: MockServer, host: str, port: int) -> None:
    """Run ``mock`` until cancelled (``streamrelay mock PLATFORM --port N``); print its base URL."""
    base_url = await mock.start(host, port)
    try:
        limits = "on" if mock.rate_limits else "off"
        print(f"mock {mock.title} on {base_url} (rate limits {limits})", flush=True)
        await asyncio.Event().wait()
    finally:
        await mock.stop()
