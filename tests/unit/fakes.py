"""Fakes for the core stages' unit tests: a chat in memory behind :class:`core.ports.ChannelAdapter`.

:class:`FakeAdapter` keeps what a person would see (message id -> text, like a Telegram chat) and every
call with the clock time it started, and can be scripted to fail the nth call of a method::

    adapter = FakeAdapter(clock, max_units=40)
    adapter.fail("send_text", 2, RateLimitedError("429", retry_after_s=3.0))
    adapter.fail("edit_text", 1, UncertainDeliveryError("timed out"), landed=True)

:class:`ManualClock` is a clock whose ``sleep`` waits until the test advances time (for the few tests
that must see what happens *during* a wait; :class:`core.clock.FakeClock` jumps over waits).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from streamrelay.core.budgets.fair import Requester
from streamrelay.core.clock import Clock
from streamrelay.core.delivery.calls import Call as PlatformCall
from streamrelay.core.delivery.calls import CallObserver, CallResult, perform_call
from streamrelay.core.delivery.machine import DeliveryMachine
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.errors import (
    DeliveryError,
    NativeUnavailableError,
    PayloadRejectedError,
    RejectReason,
    TargetNotFoundError,
)
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem
from streamrelay.core.ports import PendingSend, Settlement, SettleOutcome, StopControl, TextFormat
from streamrelay.core.units import LengthUnit, text_units

T = TypeVar("T")

METHODS = ("send_text", "send_media", "edit_text", "delete_message", "send_typing", "settle_send")
STREAM_METHODS = ("stream_start", "stream_update", "stream_finish", "stream_cancel")


@dataclass
class Call:
    """One adapter call as the platform saw it.

    Attributes:
        method: ``send_text``, ``edit_text``, ``delete_message`` or ``send_typing``.
        at: clock seconds when the call started.
        text: the text sent (``None`` for delete and typing).
        message_id: the message edited or deleted, or the id a send created (``None`` if it failed).
        fmt: the requested format.
        outcome: ``ok``, ``not_modified``, or the name of the error raised.
        done_at: clock seconds when the call returned or raised.
    """

    method: str
    at: float
    text: str | None = None
    message_id: str | None = None
    fmt: TextFormat | None = None
    outcome: str = "pending"
    done_at: float | None = None


@dataclass(frozen=True)
class _Fault:
    error: DeliveryError
    landed: bool


class FakeAdapter:
    """A :class:`core.ports.ChannelAdapter` in memory.

    Like Telegram, it strips leading and trailing whitespace, rejects empty and too long texts
    (``PayloadRejectedError`` EMPTY / TOO_LONG), answers an edit that changes nothing normally ("message
    is not modified" is success), and raises ``TargetNotFoundError`` for a message that does not exist.

    Args:
        clock: the injected clock (call times, latency).
        max_units: text limit per message, in ``unit``.
        unit: the length unit.
        latency_s: seconds every call takes (awaited on ``clock`` before the call takes effect).
        group: whether every target is a group conversation (:meth:`is_group`).
    """

    platform = "fake"

    observer: CallObserver | None = None
    """Watches every call :meth:`perform` makes (metrics; :class:`core.ports.ChannelAdapter`)."""

    async def perform(self, call: PlatformCall) -> CallResult:
        """The core's one entrance (:meth:`core.ports.ChannelAdapter.perform`): ``call`` in one attempt, its outcome
        as a value (done, not done, unknown); never raises a delivery error."""
        return await perform_call(self, call)

    def __init__(
        self,
        clock: Clock,
        *,
        max_units: int = 4096,
        unit: LengthUnit = LengthUnit.UTF16,
        latency_s: float = 0.0,
        group: bool = False,
    ) -> None:
        self.clock = clock
        self.cleared: list[Target] = []
        self.group = group
        self.max_units = max_units
        self.unit = unit
        self.latency_s = latency_s
        self.messages: dict[str, str] = {}
        self.formats: dict[str, TextFormat] = {}
        self.calls: list[Call] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._ids = itertools.count(1)
        self._counts: Counter[str] = Counter()
        self._faults: dict[tuple[str, int], _Fault] = {}
        self.delivered: dict[str, str] = {}
        """Message id by the delivery id its create carried."""
        self.settles = "lookup"
        """How :meth:`settle_send` answers: ``lookup`` (by delivery id), ``unknown`` or ``bounded``."""

    # --- scripting and reading ----------------------------------------------------------------------------

    def fail(self, method: str, nth: int | range, error: DeliveryError, *, landed: bool = False) -> None:
        """Raise ``error`` on the ``nth`` call (1-based; or every call in a range) of ``method``.

        Args:
            landed: the call takes effect before ``error`` is raised (an ``UncertainDeliveryError`` for a
                message that was stored after all).
        """
        assert method in METHODS + STREAM_METHODS, method
        for n in [nth] if isinstance(nth, int) else nth:
            self._faults[(method, n)] = _Fault(error, landed)

    def delete_by_user(self, message_id: str) -> None:
        """Someone deleted the message in the chat."""
        del self.messages[message_id]

    def chat(self) -> list[str]:
        """What a person sees: the texts of the messages, oldest first."""
        return [self.messages[mid] for mid in sorted(self.messages, key=int)]

    def calls_of(self, *methods: str) -> list[Call]:
        """The calls of the given methods (all but typing when none are given), in order."""
        wanted = methods or ("send_text", "edit_text", "delete_message", "settle_send")
        return [c for c in self.calls if c.method in wanted]

    def summary(self) -> list[tuple[str, str | None, str]]:
        """``(method, text, outcome)`` of every call but typing, in order."""
        return [(c.method, c.text, c.outcome) for c in self.calls_of()]

    # --- ChannelAdapter -----------------------------------------------------------------------------------

    def measure(self, text: str, fmt: TextFormat) -> int:
        return text_units(text, self.unit)

    def check_target(self, target: Target) -> str | None:
        return None

    def is_group(self, target: Target) -> bool:
        return self.group

    async def send_text(self, target: Target, text: str, fmt: TextFormat, *, delivery_id: str | None = None) -> str:
        return await self._create("send_text", text, fmt, delivery_id)

    async def send_media(
        self, target: Target, media: MediaItem, fmt: TextFormat, *, delivery_id: str | None = None
    ) -> str:
        """A media message: the chat keeps its :meth:`MediaItem.text` (``"<kind>: <url>"`` and the caption)."""
        return await self._create("send_media", media.text(), fmt, delivery_id)

    async def _create(self, method: str, text: str, fmt: TextFormat, delivery_id: str | None) -> str:
        call = await self._begin(method, text=text, fmt=fmt)
        try:
            fault = self._fault(method)
            if fault is None or fault.landed:
                self._check(text)
                call.message_id = str(next(self._ids))
                self.messages[call.message_id] = text.strip()
                self.formats[call.message_id] = fmt
                if delivery_id is not None:
                    self.delivered[delivery_id] = call.message_id
            if fault is not None:
                raise fault.error
            call.outcome = "ok"
            return call.message_id or ""
        except DeliveryError as exc:
            call.outcome = type(exc).__name__
            raise
        finally:
            self._end(call)

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        """Like Slack's lookup by delivery id (``settles = "lookup"``), Telegram without an exclusive bot
        (``settles = "unknown"``), or Telegram's private chats with one (``settles = "bounded"``: a later message
        is needed first, then the lookup)."""
        call = await self._begin("settle_send", text=pending.text)
        try:
            fault = self._fault("settle_send")
            if fault is not None:
                raise fault.error
            call.outcome = "ok"
            if self.settles == "unknown":
                return Settlement(SettleOutcome.UNKNOWN)
            if self.settles == "bounded" and pending.before_id is None:
                return Settlement(SettleOutcome.NEEDS_BOUND)
            found = self.delivered.get(pending.delivery_id)
            if found is not None and found in self.messages:
                return Settlement(SettleOutcome.FOUND, found)
            return Settlement(SettleOutcome.NOT_SENT)
        except DeliveryError as exc:
            call.outcome = type(exc).__name__
            raise
        finally:
            self._end(call)

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> bool:
        call = await self._begin("edit_text", text=text, fmt=fmt, message_id=message_id)
        try:
            fault = self._fault("edit_text")
            outcome = "ok"
            if fault is None or fault.landed:
                if message_id not in self.messages:
                    raise TargetNotFoundError("message to edit not found", platform=self.platform)
                self._check(text)
                if self.messages[message_id] == text.strip():
                    outcome = "not_modified"
                self.messages[message_id] = text.strip()
                self.formats[message_id] = fmt
            if fault is not None:
                error = fault.error
                if isinstance(error, PayloadRejectedError) and error.reason is RejectReason.NOT_MODIFIED:
                    call.outcome = "not_modified"  # what an adapter makes of the platform's answer
                    return False
                raise error
            call.outcome = outcome
            return outcome != "not_modified"
        except DeliveryError as exc:
            call.outcome = type(exc).__name__
            raise
        finally:
            self._end(call)

    async def delete_message(self, target: Target, message_id: str) -> None:
        call = await self._begin("delete_message", message_id=message_id)
        try:
            fault = self._fault("delete_message")
            if fault is None or fault.landed:
                if message_id not in self.messages:
                    raise TargetNotFoundError("message to delete not found", platform=self.platform)
                del self.messages[message_id]
            if fault is not None:
                raise fault.error
            call.outcome = "ok"
        except DeliveryError as exc:
            call.outcome = type(exc).__name__
            raise
        finally:
            self._end(call)

    async def send_typing(self, target: Target) -> None:
        call = await self._begin("send_typing")
        try:
            fault = self._fault("send_typing")
            if fault is not None:
                raise fault.error
            call.outcome = "ok"
        except DeliveryError as exc:
            call.outcome = type(exc).__name__
            raise
        finally:
            self._end(call)

    async def clear_typing(self, target: Target) -> None:
        """Recorded in :attr:`cleared` (not among the calls: it never changes what the chat shows)."""
        self.cleared.append(target)

    async def close(self) -> None:
        return None

    # --- inside -------------------------------------------------------------------------------------------

    async def _begin(
        self,
        method: str,
        *,
        text: str | None = None,
        fmt: TextFormat | None = None,
        message_id: str | None = None,
    ) -> Call:
        call = Call(method, self.clock.now(), text, message_id, fmt)
        self.calls.append(call)
        self._counts[method] += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.latency_s > 0:
                await self.clock.sleep(self.latency_s)
        except BaseException:
            self._end(call)
            raise
        return call

    def _end(self, call: Call) -> None:
        self.in_flight -= 1
        call.done_at = self.clock.now()

    def _fault(self, method: str) -> _Fault | None:
        return self._faults.get((method, self._counts[method]))

    def _check(self, text: str) -> None:
        if not text.strip():
            raise PayloadRejectedError("message text is empty", reason=RejectReason.EMPTY)
        if text_units(text.strip(), self.unit) > self.max_units:
            raise PayloadRejectedError("message is too long", reason=RejectReason.TOO_LONG)


class ManualClock:
    """A clock whose ``sleep`` returns only once the test has advanced time past its deadline."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), future))
        await future

    def sleeping(self) -> int:
        """How many sleeps are waiting (cancelled ones excluded)."""
        return sum(not f.done() for _, _, f in self._sleepers)

    def advance(self, seconds: float) -> None:
        """Move time forward and wake the sleeps that are due (they run at the loop's next turns)."""
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)


async def settle(turns: int = 50) -> None:
    """Let every ready task run until nothing moves (``turns`` loop iterations; FakeClock waits are instant)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def drive(clock: ManualClock, aw: Awaitable[T], *, step_s: float = 0.125, limit_s: float = 60.0) -> T:
    """Await ``aw`` while moving ``clock`` forward ``step_s`` at a time (at most ``limit_s`` in all)."""
    task = asyncio.ensure_future(aw)
    start = clock.now()
    while not task.done():
        await settle()
        if task.done():
            break
        assert clock.now() - start < limit_s, "still not done after limit_s of clock time"
        clock.advance(step_s)
    return task.result()


class FakeNativeAdapter(FakeAdapter):
    """A :class:`FakeAdapter` that also streams natively (:class:`core.ports.NativeStreaming`).

    ``style="append"`` is Slack-like: the stream is a message (its id the handle) that grows and stays.
    ``style="replace"`` is Telegram-like: the stream is a draft outside the chat (``drafts``); finishing
    sends the text as a new message. ``refuse`` makes every ``stream_start`` raise
    ``NativeUnavailableError``; ``refuse_target`` is returned by :meth:`native_refusal`.
    """

    def __init__(
        self, clock: Clock, *, style: str = "append", refuse: bool = False, refuse_target: str | None = None, **kw: Any
    ) -> None:
        super().__init__(clock, **kw)
        self.style = style
        self.refuse = refuse
        self.refuse_target = refuse_target
        self.drafts: dict[str, str] = {}
        self.stream_refresh_s: float | None = 20.0 if style == "replace" else None
        self.finish_creates = style == "replace"
        self.settles_start = False
        self.finish_repeats = False

    def native_refusal(self, target: Target) -> str | None:
        return self.refuse_target

    async def stream_start(self, target: Target, text: str, fmt: TextFormat) -> str:
        call = await self._begin("stream_start", text=text, fmt=fmt)
        try:
            if self.refuse:
                raise NativeUnavailableError("streaming is not enabled for this app", platform=self.platform)
            fault = self._fault("stream_start")
            if fault is None or fault.landed:
                self._check(text)
                call.message_id = str(next(self._ids))
                (self.messages if self.style == "append" else self.drafts)[call.message_id] = text.strip()
            if fault is not None:
                raise fault.error
            call.outcome = "ok"
            return call.message_id or ""
        except DeliveryError as exc:
            call.outcome = type(exc).__name__
            raise
        finally:
            self._end(call)

    async def stream_update(self, target: Target, handle: str, shown: str, text: str, fmt: TextFormat) -> None:
        call = await self._begin("stream_update", text=text, fmt=fmt, message_id=handle)
        try:
            self._check(text)
            store = self.messages if self.style == "append" else self.drafts
            fault = self._fault("stream_update")
            if fault is None or fault.landed:  # append style grows by the suffix, as Slack's appendStream does
                grown = store.get(handle, "") + text[len(shown) :] if self.style == "append" else text
                store[handle] = grown.strip()
            if fault is not None:
                call.outcome = type(fault.error).__name__
                raise fault.error
            call.outcome = "ok"
        finally:
            self._end(call)

    async def stream_finish(self, target: Target, handle: str, shown: str, text: str, fmt: TextFormat) -> str:
        call = await self._begin("stream_finish", text=text, fmt=fmt, message_id=handle)
        try:
            self._check(text)
            if self.style == "append":
                self.messages[handle] = text.strip()
                mid = handle
            else:
                self.drafts.pop(handle, None)
                mid = str(next(self._ids))
                self.messages[mid] = text.strip()
            call.outcome = "ok"
            return mid
        finally:
            self._end(call)

    async def stream_cancel(self, target: Target, handle: str) -> None:
        call = await self._begin("stream_cancel", message_id=handle)
        (self.messages if self.style == "append" else self.drafts).pop(handle, None)
        call.outcome = "ok"
        self._end(call)


class MemoryChat:
    """A minimal in-memory channel adapter (no faults, no latency): negative chat ids are groups."""

    platform = "fake"
    max_units = 4096
    unit = LengthUnit.CHARS

    observer: CallObserver | None = None

    def __init__(self) -> None:
        self.messages: dict[str, str] = {}

    async def perform(self, call: PlatformCall) -> CallResult:
        return await perform_call(self, call)

    def measure(self, text: str, fmt: TextFormat) -> int:
        return text_units(text, self.unit)

    def check_target(self, target: Target) -> str | None:
        return None

    def is_group(self, target: Target) -> bool:
        return isinstance(target.chat_id, int) and target.chat_id < 0

    async def send_text(self, target: Target, text: str, fmt: TextFormat, *, delivery_id: str | None = None) -> str:
        mid = str(len(self.messages) + 1)
        self.messages[mid] = text.strip()
        return mid

    async def send_media(
        self, target: Target, media: MediaItem, fmt: TextFormat, *, delivery_id: str | None = None
    ) -> str:
        return await self.send_text(target, media.text(), fmt, delivery_id=delivery_id)

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> bool:
        self.messages[message_id] = text.strip()
        return True

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        return Settlement(SettleOutcome.NOT_SENT)

    async def delete_message(self, target: Target, message_id: str) -> None:
        self.messages.pop(message_id, None)

    async def send_typing(self, target: Target) -> None:
        return None

    async def clear_typing(self, target: Target) -> None:
        return None

    async def close(self) -> None:
        return None


def delivery_machine(
    book: SlotBook | None = None,
    *,
    control: StopControl | None = None,
    native: bool = False,
    status_chars: int | None = None,
) -> DeliveryMachine:
    """A conversation's delivery machine on nothing but a manual clock at 100 s: run ``r1`` to chat 7 (``book``, or a
    new one), a 60 s retry window, no native stream refresh, no exclusive bot; the Stop ``control`` when given;
    status lines on the native stream of at most ``status_chars`` when given (:class:`core.ports.StreamStatus`)."""
    clock = ManualClock(100.0)
    return DeliveryMachine(
        book=book or SlotBook("r1", 0.0, native),
        chain=SendChain(clock),
        target=Target(chat_id=7),
        clock=clock,
        retry_window_s=60.0,
        native=native,
        stream_refresh_s=None,
        exclusive_bot=False,
        requester=Requester.of("r1"),
        control=control,
        status_chars=status_chars,
    )
