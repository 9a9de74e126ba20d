"""Call metrics: every platform call an adapter performs, counted, timed and logged by its outcome.

The adapter's one entrance, :meth:`core.ports.ChannelAdapter.perform`, lets an observer watch each call
(:class:`core.delivery.calls.CallObserver`); :func:`metered` sets a :class:`CallMetrics` there, where the
composition root builds adapters (``app/service.py``), so core stays free of metrics and platforms and the adapter
object is the adapter itself (its optional capabilities, checked with ``isinstance``, are exactly its own). Each call
is timed and classified by its outcome's error (:func:`adapters.ops.metrics.call_outcome`), counted in
``streamrelay_platform_calls_total`` and ``streamrelay_platform_call_seconds``, and logged as one line on the
``streamrelay.calls`` logger:

- ``ok`` and ``not_modified`` at INFO (``typing`` at DEBUG: one every few seconds per quiet run);
- ``rate_limited``, ``unavailable``, ``uncertain``, ``not_found``, ``frozen``, ``native_refused`` at WARNING (the
  core retries, settles or works around them: the reconciler logs what it decided);
- ``forbidden``, ``rejected``, ``failed``, ``error`` at ERROR.

Fields (``extra``): ``channel``, ``platform``, ``method``, ``outcome``, ``ms``, ``chat`` (and ``thread_id``),
``message_id``, ``error`` (the adapter's message: tokens are scrubbed there and again by the log redactor),
``retry_after_s`` on a 429, ``settled`` for a settle, and ``run`` from the calling task.

A call of a traced run (docs/tracing.md) gives its duration an OpenMetrics exemplar: ``trace_id`` (and ``span_id`` of
the call's span when the SDK records it), shown on ``/metrics`` scraped with ``Accept: application/openmetrics-text``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import Any

from opentelemetry import trace

from streamrelay.adapters.ops.logs import task_run
from streamrelay.adapters.ops.metrics import ServiceMetrics, call_outcome
from streamrelay.core.delivery.calls import Call, CallResult, Delete, Done, Edit, SendMedia, SendText, SetControl
from streamrelay.core.errors import RateLimitedError
from streamrelay.core.ports import ChannelAdapter, Settlement
from streamrelay.core.trace import RUN_TRACE

_log = logging.getLogger("streamrelay.calls")

_WARNING_OUTCOMES = frozenset({"rate_limited", "unavailable", "uncertain", "not_found", "frozen", "native_refused"})
_CONTENT_METHODS = frozenset({"send", "send_media", "edit", "stream_start", "stream_update", "stream_finish"})
"""Calls that show a run's text: they end its event-to-call wait."""


def _level(method: str, outcome: str) -> int:
    if outcome in ("ok", "not_modified"):
        return logging.DEBUG if method in ("typing", "typing_clear") else logging.INFO
    return logging.WARNING if outcome in _WARNING_OUTCOMES else logging.ERROR


def _fields(call: Call) -> dict[str, Any]:
    """The log fields a call carries before its outcome is known."""
    if isinstance(call, SendText):
        return {"chars": len(call.text)}
    if isinstance(call, SendMedia):
        return {"media_kind": str(call.media.kind)}
    if isinstance(call, Edit):
        return {"message_id": call.message_id, "chars": len(call.text)}
    if isinstance(call, Delete | SetControl):
        return {"message_id": call.message_id}
    return {}


class CallMetrics:
    """Watches one channel's calls (see the module docstring): a :class:`core.delivery.calls.CallObserver`.

    Args:
        metrics: where calls are counted.
        channel: the configured channel's name (a label and a log field).
        platform: the adapter's platform name (a label).
    """

    def __init__(self, metrics: ServiceMetrics, channel: str, platform: str) -> None:
        self._metrics = metrics
        self.channel = channel
        self.platform = platform
        self._counted: dict[tuple[str, str], Any] = {}
        self._timed: dict[str, Any] = {}
        """The metrics' children per (method, outcome) and per method, found once (``labels`` takes a lock and
        builds its key on every call)."""

    def __repr__(self) -> str:
        return f"CallMetrics(channel={self.channel!r}, platform={self.platform!r})"

    async def __call__(self, call: Call, attempt: Awaitable[CallResult]) -> CallResult:
        """Await ``attempt`` (``call``'s one attempt), count and log it; its result passes through unchanged."""
        method = call.method
        run = task_run()
        if run is not None and method in _CONTENT_METHODS:
            self._metrics.call_made(run, self.channel, self.platform)
        started = time.monotonic()
        try:
            result = await attempt
        except BaseException as exc:  # cancelled: counted as such, then on its way
            self._done(call, time.monotonic() - started, exc, None)
            raise
        seconds = time.monotonic() - started
        if isinstance(result, Done):
            self._done(call, seconds, None, result.value)
        else:
            self._done(call, seconds, result.error, None)
        return result

    def _done(self, call: Call, seconds: float, error: BaseException | None, value: object) -> None:
        """Count and log one finished call (``error``: what it failed with, else ``value``: what it answered)."""
        method, fields = call.method, _fields(call)
        outcome = "cancelled" if error is not None and not isinstance(error, Exception) else call_outcome(error)
        if method == "edit" and value is False:
            outcome = "not_modified"
        if isinstance(call, SendText | SendMedia) and isinstance(value, str):
            fields["message_id"] = value
        counted = self._counted.get((method, outcome))
        if counted is None:
            counted = self._counted[(method, outcome)] = self._metrics.calls.labels(
                self.channel, self.platform, method, outcome
            )
        counted.inc()
        timed = self._timed.get(method)
        if timed is None:
            timed = self._timed[method] = self._metrics.call_seconds.labels(self.channel, self.platform, method)
        if (exemplar := _exemplar()) is not None:
            timed.observe(seconds, exemplar)
        else:
            timed.observe(seconds)
        if isinstance(error, RateLimitedError):
            self._metrics.rate_limited.labels(self.channel, self.platform, method, str(error.scope)).inc()
        if isinstance(value, Settlement):
            fields["settled"] = str(value.outcome)
            self._metrics.settlements.labels(self.channel, self.platform, str(value.outcome)).inc()
        self._log(call, outcome, seconds, error, fields)

    def _log(
        self, call: Call, outcome: str, seconds: float, error: BaseException | None, fields: dict[str, Any]
    ) -> None:
        level = _level(call.method, outcome)
        if not _log.isEnabledFor(level):
            return
        target = call.target
        extra: dict[str, Any] = {
            "channel": self.channel,
            "platform": self.platform,
            "method": call.method,
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
        _log.log(level, "%s %s %s", self.channel, call.method, outcome, extra=extra)


def _exemplar() -> dict[str, str] | None:
    """The exemplar of a call of a traced run (None: untraced): its ``trace_id``, and the ``span_id`` of its span when
    one is recorded (the call's span is current while the call is timed: :class:`adapters.ops.traced.CallSpans` awaits
    the timing inside it). OpenMetrics exemplars, https://prometheus.io/docs/specs/om/open_metrics_spec/#exemplars:
    at most 128 characters of labels (these are 63)."""
    context = RUN_TRACE.get()
    if context is None:
        return None
    current = trace.get_current_span()  # without the SDK: the parent's context, not recorded (no span id of a call)
    span = current.get_span_context()
    if current.is_recording() and format(span.trace_id, "032x") == context.trace_id:
        return {"trace_id": context.trace_id, "span_id": format(span.span_id, "016x")}
    return {"trace_id": context.trace_id}


def metered(adapter: ChannelAdapter, metrics: ServiceMetrics, channel: str) -> ChannelAdapter:
    """``adapter`` with its calls counted: a :class:`CallMetrics` watches its :meth:`~ChannelAdapter.perform`.
    Returns the same adapter object (its capabilities are its own).

    Args:
        adapter: the platform adapter.
        metrics: where calls are counted.
        channel: the configured channel's name.
    """
    adapter.observer = CallMetrics(metrics, channel, adapter.platform)
    return adapter
