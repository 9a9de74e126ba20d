"""Every platform call as a value, and its outcome as a value.

The delivery machine decides calls (:class:`SendText`, :class:`Edit`, ...); the executor hands each to the adapter's
one entrance, ``adapter.perform(call)`` (:meth:`core.ports.ChannelAdapter.perform`), which answers with one of three
outcomes (DESIGN §8):

- :class:`Done` (the platform did it; ``value`` is what it answered: a message id, a ``changed`` flag, a
  :class:`~core.ports.Settlement`, a thread's :class:`~core.events.Target`, or None);
- :class:`NotDone` (the platform answered and did not do it: a 429, a refusal, an outage before sending);
- :class:`Unknown` (it may have been done: a timeout, a reset after sending, a 5xx to a create, or an answer the
  adapter could not read).

A call that fails never raises out of ``perform``: :func:`perform_call` turns every error into an outcome, so one
unexpected answer never ends a conversation's delivery (an exception the adapter did not classify is
:class:`~core.errors.UnreadableAnswerError`, unknown, and the machine settles or reports it).

Each call class names the rate budgets' :class:`~core.ports.CallKind` it draws from (``kind``) and the method label
metrics and logs use (``method``); ``creates`` is True for the calls that make a new message (their unknown outcome
is settled, never sent again blindly).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from streamrelay.core.errors import DeliveryError, UncertainDeliveryError, UnreadableAnswerError
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem
from streamrelay.core.ports import CallKind, PendingSend, StopControl, TextFormat

if TYPE_CHECKING:
    from streamrelay.core.ports import ChannelAdapter


@dataclass(frozen=True, slots=True)
class SendText:
    """Create a message showing ``text`` (:meth:`~core.ports.ChannelAdapter.send_text`); done: its message id."""

    target: Target
    text: str
    fmt: TextFormat
    delivery_id: str | None = None
    kind: ClassVar[CallKind] = CallKind.SEND
    method: ClassVar[str] = "send"
    creates: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class SendMedia:
    """Create a media message (:meth:`~core.ports.ChannelAdapter.send_media`); done: its message id."""

    target: Target
    media: MediaItem
    fmt: TextFormat
    delivery_id: str | None = None
    kind: ClassVar[CallKind] = CallKind.SEND
    method: ClassVar[str] = "send_media"
    creates: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class Settle:
    """Ask whether a create whose outcome is unknown stored a message (:meth:`~core.ports.ChannelAdapter.settle_send`);
    done: a :class:`~core.ports.Settlement`."""

    target: Target
    pending: PendingSend
    kind: ClassVar[CallKind] = CallKind.SEND
    method: ClassVar[str] = "settle"
    creates: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace a message's text (:meth:`~core.ports.ChannelAdapter.edit_text`); done: True when it changed, False
    when the platform said "not modified"."""

    target: Target
    message_id: str
    text: str
    fmt: TextFormat
    kind: ClassVar[CallKind] = CallKind.EDIT
    method: ClassVar[str] = "edit"
    creates: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete a message of this bot (:meth:`~core.ports.ChannelAdapter.delete_message`); done: None."""

    target: Target
    message_id: str
    kind: ClassVar[CallKind] = CallKind.DELETE
    method: ClassVar[str] = "delete"
    creates: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class StreamStart:
    """Open a native stream showing ``text`` (:meth:`~core.ports.NativeStreaming.stream_start`); done: its handle."""

    target: Target
    text: str
    fmt: TextFormat
    kind: ClassVar[CallKind] = CallKind.STREAM_START
    method: ClassVar[str] = "stream_start"
    creates: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class StreamAppend:
    """Make an open stream show ``text`` (it shows ``shown``; :meth:`~core.ports.NativeStreaming.stream_update`);
    done: None."""

    target: Target
    handle: str
    shown: str
    text: str
    fmt: TextFormat
    kind: ClassVar[CallKind] = CallKind.STREAM_UPDATE
    method: ClassVar[str] = "stream_update"
    creates: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class StreamStop:
    """End a stream with ``text`` persisted (:meth:`~core.ports.NativeStreaming.stream_finish`); done: the permanent
    message id."""

    target: Target
    handle: str
    shown: str
    text: str
    fmt: TextFormat
    kind: ClassVar[CallKind] = CallKind.STREAM_FINISH
    method: ClassVar[str] = "stream_finish"
    creates: ClassVar[bool] = True


@dataclass(frozen=True, slots=True)
class StreamCancel:
    """Abandon a stream whose part is no longer wanted (:meth:`~core.ports.NativeStreaming.stream_cancel`)."""

    target: Target
    handle: str
    kind: ClassVar[CallKind] = CallKind.STREAM_FINISH
    method: ClassVar[str] = "stream_cancel"
    creates: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class StreamInform:
    """Show ``text`` as the status line of the native stream open (or about to open) for ``target``
    (:meth:`~core.ports.StreamStatus.stream_status`: Teams' informative update); paced with the stream's updates;
    done: None. Cosmetic: never in the ledger, dropped unless done (:func:`core.delivery.machine.status_rule`)."""

    target: Target
    text: str
    kind: ClassVar[CallKind] = CallKind.STREAM_UPDATE
    method: ClassVar[str] = "stream_status"
    creates: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class StreamInformEnd:
    """At the run's end, take down a stream that only showed status lines
    (:meth:`~core.ports.StreamStatus.stream_status_end`); done: None."""

    target: Target
    kind: ClassVar[CallKind] = CallKind.STREAM_FINISH
    method: ClassVar[str] = "stream_status_end"
    creates: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class TypingOn:
    """Show the typing indicator once (:meth:`~core.ports.ChannelAdapter.send_typing`)."""

    target: Target
    kind: ClassVar[CallKind] = CallKind.TYPING
    method: ClassVar[str] = "typing"
    creates: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class TypingOff:
    """Take down a typing indicator that would outlive the run (:meth:`~core.ports.ChannelAdapter.clear_typing`)."""

    target: Target
    kind: ClassVar[CallKind] = CallKind.TYPING
    method: ClassVar[str] = "typing_clear"
    creates: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class SetControl:
    """Put ``control`` on message ``message_id`` (showing ``text``), or take it off (None)
    (:meth:`~core.ports.StopControls.set_stop`); counted as an edit."""

    target: Target
    message_id: str
    text: str
    fmt: TextFormat
    control: StopControl | None
    kind: ClassVar[CallKind] = CallKind.EDIT
    method: ClassVar[str] = "set_stop"
    creates: ClassVar[bool] = False


@dataclass(frozen=True, slots=True)
class OpenThread:
    """Open a side conversation under message ``anchor_message_id`` (:meth:`~core.ports.Threads.open_thread`); done:
    the :class:`~core.events.Target` its messages go to."""

    target: Target
    anchor_message_id: str
    title: str
    kind: ClassVar[CallKind] = CallKind.SEND
    method: ClassVar[str] = "open_thread"
    creates: ClassVar[bool] = True


Call = (
    SendText
    | SendMedia
    | Settle
    | Edit
    | Delete
    | StreamStart
    | StreamAppend
    | StreamStop
    | StreamCancel
    | StreamInform
    | StreamInformEnd
    | TypingOn
    | TypingOff
    | SetControl
    | OpenThread
)
"""One platform call, as a value."""


@dataclass(frozen=True, slots=True)
class Done:
    """The platform did the call; ``value`` is what it answered (see each call class)."""

    value: object = None


@dataclass(frozen=True, slots=True)
class NotDone:
    """The platform answered and did not do the call: ``error`` says why (a 429 with ``retry_after_s``, a refusal,
    an outage before the request was sent)."""

    error: DeliveryError


@dataclass(frozen=True, slots=True)
class Unknown:
    """The call may have been done (a timeout, a reset after sending, a 5xx to a create, an unreadable answer)."""

    error: DeliveryError


CallResult = Done | NotDone | Unknown
"""A call's outcome: done, not done, or unknown."""


class CallObserver(Protocol):
    """Watches every call an adapter performs (metrics and logs, :mod:`adapters.ops.metered`): awaits ``attempt``
    (the call's one attempt, which never raises but for a cancellation) and returns its result unchanged."""

    async def __call__(self, call: Call, attempt: Awaitable[CallResult], /) -> CallResult: ...


def result_of(exc: DeliveryError) -> NotDone | Unknown:
    """The outcome a delivery error means: :class:`Unknown` for an :class:`~core.errors.UncertainDeliveryError`,
    else :class:`NotDone`."""
    return Unknown(exc) if isinstance(exc, UncertainDeliveryError) else NotDone(exc)


async def perform_call(adapter: ChannelAdapter, call: Call) -> CallResult:
    """Perform ``call`` through ``adapter``'s single-attempt methods; every error becomes an outcome.

    The one entrance adapters give the core (:meth:`core.ports.ChannelAdapter.perform` is this, bound). A
    :class:`~core.errors.DeliveryError` is classified by :func:`result_of`; any other exception (an answer the
    adapter could not read: a missing field, a body that is no JSON) is :class:`Unknown` with an
    :class:`~core.errors.UnreadableAnswerError` naming the call and the exception. A cancellation propagates.
    The adapter's ``observer`` (metrics), when set, watches the attempt.
    """
    observer = adapter.observer
    if observer is not None:
        return await observer(call, _attempt(adapter, call))
    return await _attempt(adapter, call)


async def _attempt(adapter: ChannelAdapter, call: Call) -> CallResult:
    try:
        return Done(await _dispatch(adapter, call))
    except DeliveryError as exc:
        return result_of(exc)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # an answer the adapter did not expect: unknown, never the end of delivery
        return Unknown(UnreadableAnswerError(f"{call.method}: unreadable answer: {type(exc).__name__}: {exc}"))


def _dispatch(adapter: Any, call: Any) -> Awaitable[object]:
    """The adapter method ``call`` names, called with its fields (one dictionary lookup per call)."""
    try:
        method = _METHODS[type(call)]
    except KeyError:
        raise TypeError(f"not a platform call: {call!r}") from None
    return method(adapter, call)


_METHODS: dict[type[Any], Callable[[Any, Any], Awaitable[object]]] = {
    SendText: lambda a, c: a.send_text(c.target, c.text, c.fmt, delivery_id=c.delivery_id),
    SendMedia: lambda a, c: a.send_media(c.target, c.media, c.fmt, delivery_id=c.delivery_id),
    Settle: lambda a, c: a.settle_send(c.target, c.pending),
    Edit: lambda a, c: a.edit_text(c.target, c.message_id, c.text, c.fmt),
    Delete: lambda a, c: a.delete_message(c.target, c.message_id),
    TypingOn: lambda a, c: a.send_typing(c.target),
    TypingOff: lambda a, c: a.clear_typing(c.target),
    StreamStart: lambda a, c: a.stream_start(c.target, c.text, c.fmt),
    StreamAppend: lambda a, c: a.stream_update(c.target, c.handle, c.shown, c.text, c.fmt),
    StreamStop: lambda a, c: a.stream_finish(c.target, c.handle, c.shown, c.text, c.fmt),
    StreamCancel: lambda a, c: a.stream_cancel(c.target, c.handle),
    StreamInform: lambda a, c: a.stream_status(c.target, c.text),
    StreamInformEnd: lambda a, c: a.stream_status_end(c.target),
    SetControl: lambda a, c: a.set_stop(c.target, c.message_id, c.text, c.fmt, c.control),
    OpenThread: lambda a, c: a.open_thread(c.target, c.anchor_message_id, c.title),
}
"""Each call class's adapter method (the port's single-attempt methods, :mod:`core.ports`): the adapter's optional
capabilities (native streaming and its status lines, threads, Stop controls) are called only when the machine
decided such a call."""
