"""MeteredAdapter: any :class:`core.ports.ChannelAdapter` with a metric and a log line per call.

A decorator around the port, applied where the composition root builds adapters (``app/service.py``), so core
stays free of metrics and platforms. Each call of the wrapped adapter is timed and classified by what it raised
(:func:`adapters.ops.metrics.call_outcome`), counted in ``streamrelay_platform_calls_total`` and
``streamrelay_platform_call_seconds``, and logged as one line on the ``streamrelay.calls`` logger:

- ``ok`` and ``not_modified`` at INFO (``typing`` at DEBUG: one every few seconds per quiet run);
- ``rate_limited``, ``unavailable``, ``uncertain``, ``not_found``, ``frozen``, ``native_refused`` at WARNING (the
  core retries, settles or works around them: the reconciler logs what it decided);
- ``forbidden``, ``rejected``, ``failed``, ``error`` at ERROR.

Fields (``extra``): ``channel``, ``platform``, ``method``, ``outcome``, ``ms``, ``chat`` (and ``thread_id``),
``message_id``, ``error`` (the adapter's message: tokens are scrubbed there and again by the log redactor),
``retry_after_s`` on a 429, ``settled`` for a settle, and ``run`` from the calling task.

The wrapper keeps the adapter's optional capabilities exactly: :func:`metered` returns a class that implements
:class:`core.ports.NativeStreaming` and :class:`core.ports.Threads` only when the wrapped adapter does (the core
checks them with ``isinstance``). Other attributes are read through to the wrapped adapter.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from adapters.ops.logs import task_run
from adapters.ops.metrics import ServiceMetrics, call_outcome
from core.errors import RateLimitedError
from core.events import Target
from core.media import MediaItem
from core.ports import ChannelAdapter, NativeStreaming, PendingSend, Settlement, TextFormat, Threads
from core.units import LengthUnit

T = TypeVar("T")

_log = logging.getLogger("streamrelay.calls")

_WARNING_OUTCOMES = frozenset({"rate_limited", "unavailable", "uncertain", "not_found", "frozen", "native_refused"})
_CONTENT_METHODS = frozenset({"send", "send_media", "edit", "stream_start", "stream_update", "stream_finish"})
"""Calls that show a run's text: they end its event-to-call wait."""


def _level(method: str, outcome: str) -> int:
    if outcome in ("ok", "not_modified"):
        return logging.DEBUG if method == "typing" else logging.INFO
    return logging.WARNING if outcome in _WARNING_OUTCOMES else logging.ERROR


class MeteredAdapter:
    """Wraps ``inner``: the same calls, each counted, timed and logged (see the module docstring).

    Args:
        inner: the platform adapter.
        metrics: where calls are counted.
        channel: the configured channel's name (a label and a log field).
    """

    def __init__(self, inner: ChannelAdapter, metrics: ServiceMetrics, channel: str) -> None:
        self.inner = inner
        self._metrics = metrics
        self.channel = channel
        self.platform: str = inner.platform
        self.max_units: int = inner.max_units
        self.unit: LengthUnit = inner.unit

    def __repr__(self) -> str:
        return f"MeteredAdapter({self.inner!r})"

    def __getattr__(self, name: str) -> Any:
        """Other attributes of the wrapped adapter (e.g. ``send_timeout_s``), read through."""
        return getattr(self.inner, name)

    async def _call(
        self, method: str, target: Target, fn: Callable[[], Awaitable[T]], fields: dict[str, Any] | None = None
    ) -> T:
        """Run one call of the inner adapter, then count and log it (with ``fields``, which ``fn`` may add to);
        its result or error passes through unchanged."""
        fields = fields if fields is not None else {}
        run = task_run()
        if run is not None and method in _CONTENT_METHODS:
            self._metrics.call_made(run, self.channel, self.platform)
        started = time.monotonic()
        try:
            result = await fn()
        except BaseException as exc:
            self._done(method, target, time.monotonic() - started, exc, None, fields)
            raise
        self._done(method, target, time.monotonic() - started, None, result, fields)
        return result

    def _done(
        self,
        method: str,
        target: Target,
        seconds: float,
        error: BaseException | None,
        result: object,
        fields: dict[str, Any],
    ) -> None:
        """Count and log one finished call (``error``: what it raised, else ``result``: what it returned)."""
        outcome = "cancelled" if error is not None and not isinstance(error, Exception) else call_outcome(error)
        if method == "edit" and result is False:
            outcome = "not_modified"
        self._count(method, outcome, seconds, error)
        if isinstance(result, Settlement):
            fields["settled"] = str(result.outcome)
            self._metrics.settlements.labels(self.channel, self.platform, str(result.outcome)).inc()
        self._log(method, outcome, seconds, target, error, fields)

    def _count(self, method: str, outcome: str, seconds: float, error: BaseException | None) -> None:
        labels = (self.channel, self.platform, method)
        self._metrics.calls.labels(*labels, outcome).inc()
        self._metrics.call_seconds.labels(*labels).observe(seconds)
        if isinstance(error, RateLimitedError):
            self._metrics.rate_limited.labels(*labels, str(error.scope)).inc()

    def _log(
        self,
        method: str,
        outcome: str,
        seconds: float,
        target: Target,
        error: BaseException | None,
        fields: dict[str, Any],
    ) -> None:
        level = _level(method, outcome)
        if not _log.isEnabledFor(level):
            return
        extra: dict[str, Any] = {
            "channel": self.channel,
            "platform": self.platform,
            "method": method,
            "outcome": outcome,
            "ms": round(seconds * 1000, 1),
            "chat": str(target.chat_id),
            **({"thread_id": str(target.thread_id)} if target.thread_id is not None else {}),
            **fields,
        }
        if error is not None:
            extra["error"] = f"{type(error).__name__}: {error}"
        if isinstance(error, RateLimitedError):
            extra["retry_after_s"] = error.retry_after_s
        _log.log(level, "%s %s %s", self.channel, method, outcome, extra=extra)

    # --- the port ---------------------------------------------------------------------------------------

    def measure(self, text: str, fmt: TextFormat) -> int:
        return self.inner.measure(text, fmt)

    def check_target(self, target: Target) -> str | None:
        return self.inner.check_target(target)

    def is_group(self, target: Target) -> bool:
        return self.inner.is_group(target)

    async def send_text(self, target: Target, text: str, fmt: TextFormat, *, delivery_id: str | None = None) -> str:
        fields: dict[str, Any] = {"chars": len(text)}

        async def call() -> str:
            message_id = await self.inner.send_text(target, text, fmt, delivery_id=delivery_id)
            fields["message_id"] = message_id
            return message_id

        return await self._call("send", target, call, fields)

    async def send_media(
        self, target: Target, media: MediaItem, fmt: TextFormat, *, delivery_id: str | None = None
    ) -> str:
        fields: dict[str, Any] = {"media_kind": str(media.kind)}

        async def call() -> str:
            message_id = await self.inner.send_media(target, media, fmt, delivery_id=delivery_id)
            fields["message_id"] = message_id
            return message_id

        return await self._call("send_media", target, call, fields)

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        return await self._call("settle", target, lambda: self.inner.settle_send(target, pending))

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> bool:
        return await self._call(
            "edit",
            target,
            lambda: self.inner.edit_text(target, message_id, text, fmt),
            {"message_id": message_id, "chars": len(text)},
        )

    async def delete_message(self, target: Target, message_id: str) -> None:
        await self._call(
            "delete", target, lambda: self.inner.delete_message(target, message_id), {"message_id": message_id}
        )

    async def send_typing(self, target: Target) -> None:
        await self._call("typing", target, lambda: self.inner.send_typing(target))

    async def close(self) -> None:
        await self.inner.close()


class _NativeCalls(MeteredAdapter):
    """:class:`core.ports.NativeStreaming`, metered (for an inner adapter that streams natively)."""

    @property
    def _native(self) -> NativeStreaming:
        assert isinstance(self.inner, NativeStreaming)
        return self.inner

    @property
    def stream_refresh_s(self) -> float | None:
        return self._native.stream_refresh_s

    def native_refusal(self, target: Target) -> str | None:
        return self._native.native_refusal(target)

    async def stream_start(self, target: Target, text: str, fmt: TextFormat) -> str:
        return await self._call("stream_start", target, lambda: self._native.stream_start(target, text, fmt))

    async def stream_update(self, target: Target, handle: str, shown: str, text: str, fmt: TextFormat) -> None:
        native = self._native
        await self._call("stream_update", target, lambda: native.stream_update(target, handle, shown, text, fmt))

    async def stream_finish(self, target: Target, handle: str, shown: str, text: str, fmt: TextFormat) -> str:
        native = self._native
        return await self._call("stream_finish", target, lambda: native.stream_finish(target, handle, shown, text, fmt))

    async def stream_cancel(self, target: Target, handle: str) -> None:
        await self._call("stream_cancel", target, lambda: self._native.stream_cancel(target, handle))


class _ThreadCalls(MeteredAdapter):
    """:class:`core.ports.Threads`, metered (for an inner adapter whose platform has threads)."""

    @property
    def _threads(self) -> Threads:
        assert isinstance(self.inner, Threads)
        return self.inner

    def thread_refusal(self, target: Target) -> str | None:
        return self._threads.thread_refusal(target)

    async def open_thread(self, target: Target, anchor_message_id: str, title: str) -> Target:
        threads = self._threads
        return await self._call("open_thread", target, lambda: threads.open_thread(target, anchor_message_id, title))


class _MeteredNativeThreads(_NativeCalls, _ThreadCalls):
    """Both optional capabilities (Telegram, Slack)."""


def metered(inner: ChannelAdapter, metrics: ServiceMetrics, channel: str) -> ChannelAdapter:
    """``inner`` wrapped in the :class:`MeteredAdapter` class that has exactly its optional capabilities.

    Args:
        inner: the platform adapter.
        metrics: where calls are counted.
        channel: the configured channel's name.
    """
    native, threads = isinstance(inner, NativeStreaming), isinstance(inner, Threads)
    if native and threads:
        return _MeteredNativeThreads(inner, metrics, channel)
    if native:
        return _NativeCalls(inner, metrics, channel)
    if threads:
        return _ThreadCalls(inner, metrics, channel)
    return MeteredAdapter(inner, metrics, channel)
