"""SlackAdapter: one Slack app's :class:`core.ports.ChannelAdapter`, :class:`core.ports.NativeStreaming` and
:class:`core.ports.Threads`, on slack-sdk's ``AsyncWebClient``.

Every method is one Web API call, one attempt (:class:`adapters.slack.connection.SlackConnection`: no retries
inside slack-sdk), so retries belong to the core's scheduler alone and nothing can be sent twice behind its
back. The only second calls are the documented stream recoveries below, which can never double a message.
Failures are translated at this boundary by :mod:`adapters.slack.errors`.

The adapter is composed, not mixed: it holds its connection (:class:`~adapters.slack.connection.SlackConnection`),
its renderings (:func:`adapters.slack.render.render` in a :class:`~adapters.rendering.RenderCache`: a text measured
then sent is rendered once) and its Stop marks (:class:`~adapters.slack.stop_control.StopMarks`); an uncertain send
is settled by its metadata (:func:`adapters.slack.settle.settle_send`) and media are posted by
:func:`adapters.slack.media.post_media`, both on the connection.
Threads make no call: a thread is the ``thread_ts`` of its parent message.

Web API references:
    chat.postMessage https://docs.slack.dev/reference/methods/chat.postMessage (``text`` 40,000 characters,
    about 4,000 recommended; ``markdown_text`` 12,000),
    chat.update https://docs.slack.dev/reference/methods/chat.update (Tier 3, per workspace),
    chat.delete https://docs.slack.dev/reference/methods/chat.delete,
    chat.startStream / appendStream / stopStream https://docs.slack.dev/reference/methods/chat.startStream,
    assistant.threads.setStatus https://docs.slack.dev/reference/methods/assistant.threads.setStatus,
    auth.test https://docs.slack.dev/reference/methods/auth.test,
    threads https://docs.slack.dev/messaging/#threading,
    rate limits https://docs.slack.dev/apis/web-api/rate-limits,
    slack-sdk https://docs.slack.dev/tools/python-slack-sdk/web.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections import OrderedDict
from collections.abc import Awaitable, Collection

from slack_sdk.web.async_slack_response import AsyncSlackResponse

from streamrelay.adapters.adapter_parts import ConnectionTimeout, close_connection, measure_rendered, shows
from streamrelay.adapters.rendering import RenderCache
from streamrelay.adapters.slack import settle
from streamrelay.adapters.slack.connection import Refused, SlackConnection
from streamrelay.adapters.slack.errors import PLATFORM
from streamrelay.adapters.slack.media import post_media
from streamrelay.adapters.slack.render import INERT, Rendered, render, stream_markdown
from streamrelay.adapters.slack.settle import delivery_metadata, thread_ts
from streamrelay.adapters.slack.stop_control import BlocksBody, StopMarks, stop_blocks
from streamrelay.core.delivery.calls import CallObserver, perform_call
from streamrelay.core.errors import (
    NativeUnavailableError,
    PayloadRejectedError,
    PermanentDeliveryError,
    PlatformUnavailableError,
    RejectReason,
    TargetNotFoundError,
    UncertainDeliveryError,
)
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem
from streamrelay.core.ports import MarkupPermissions, PendingSend, Settlement, Shown, StopControl, TextFormat
from streamrelay.core.units import LengthUnit, text_units

NOT_STREAMING = "message_not_in_streaming_state"
"""appendStream / stopStream on a stream that was stopped or expired (about 5 idle minutes, observed)."""
STREAM_OPEN = "streaming_state_conflict"
"""chat.update on a message that is still streaming (https://docs.slack.dev/reference/methods/chat.update#errors)."""
CANT_DELETE = "cant_delete_message"
"""chat.delete of a message the bot may not delete, or of an open stream (observed)."""
STOP_TOO_LONG = ("msg_too_long", "msg_blocks_too_long")
"""chat.stopStream refusals of the text it carried (https://docs.slack.dev/reference/methods/chat.stopStream): the
stream is still open, unchanged."""
_NOT_A_STREAM = ("cant_update_message", "message_not_found")
TYPING_STATUS = "is typing…"
NESTED_THREAD = "already in a thread: Slack threads do not nest"
"""Why no thread opens under a message of a thread (https://docs.slack.dev/messaging/#threading)."""

_CHANNEL_RE = re.compile(r"[CGD][A-Z0-9]{8,}")
_TS_RE = re.compile(r"[0-9]+\.[0-9]+")
r"""Matched whole (``fullmatch``): ``$`` would take a trailing newline, ``\d`` the digits of every script."""
_MAX_OPEN_STREAMS = 1024


class SlackAdapter:
    """Sends, edits, deletes and streams one Slack app's messages through the Web API (or a mock of it), opens
    threads under them and puts a Stop button on them.

    Args:
        token, base_url, send_timeout_s: as :class:`adapters.slack.connection.SlackConnection`.
        max_units: text limit of one message in UTF-16 code units (Slack recommends about 4,000 characters;
            ``text`` is cut at 40,000).
        markup: the mentions and links the channel lets agent text keep (default: none, all inert).

    Attributes:
        verify_backoff_s: the first wait between :meth:`verify` attempts, doubled each time.

    Raises:
        ConfigError: the token is not shaped like a Slack token.
    """

    platform: str = PLATFORM
    unit: LengthUnit = LengthUnit.UTF16
    stream_refresh_s: float | None = None
    """A stream lives about 5 idle minutes; there is nothing to append to keep it alive: an expired stream is
    finished with chat.update instead (https://docs.slack.dev/reference/methods/chat.startStream)."""
    finish_creates = False
    """stream_finish stops the stream whose ts is the message (chat.stopStream)."""
    finish_repeats = False
    """Never sent again by the core: an unknown chat.stopStream becomes an edit of the whole text here
    (:meth:`stream_finish`; :attr:`core.ports.NativeStreaming.finish_repeats`)."""
    settles_start = True
    """An unknown chat.startStream is settled by reading the thread back (:func:`adapters.slack.settle.settle_start`).
    """

    observer: CallObserver | None = None
    """Watches every call :meth:`perform` makes (metrics; :class:`core.ports.ChannelAdapter`)."""

    perform = perform_call
    """The core's one entrance (:meth:`core.ports.ChannelAdapter.perform`): ``call`` in one attempt, its outcome as a
    value (done, not done, unknown); never raises a delivery error."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str | None = None,
        send_timeout_s: float = 10.0,
        max_units: int = 4000,
        markup: MarkupPermissions = INERT,
    ) -> None:
        self.markup = markup
        self._conn = connection = SlackConnection(token, base_url=base_url, send_timeout_s=send_timeout_s)
        self._client = connection.client
        self._try = connection.try_call
        self._call = connection.call
        self.max_units = max_units
        self.render = RenderCache(functools.partial(render, allowed=markup))
        """``render(text, fmt) -> Rendered``: the body and its UTF-16 length (:func:`adapters.slack.render.render`,
        mentions and links inert unless ``markup`` allows them),
        kept for the texts in flight."""
        self._stops = StopMarks()
        self._open: OrderedDict[tuple[str, str], None] = OrderedDict()
        """Streams this adapter started and has not seen end, oldest first (bounded)."""

    __repr__ = __str__ = shows(base_url="_conn.base_url")
    send_timeout_s = ConnectionTimeout()
    close = close_connection
    measure = measure_rendered

    @property
    def verify_backoff_s(self) -> float:
        """The first wait between :meth:`verify` attempts, doubled each time."""
        return self._conn.verify_backoff_s

    @verify_backoff_s.setter
    def verify_backoff_s(self, value: float) -> None:
        self._conn.verify_backoff_s = value

    async def verify(self) -> str:
        """Check the token at start-up (:meth:`SlackConnection.verify`: auth.test); return ``"<bot name> (<user id>)"``.

        Raises:
            core.errors.ForbiddenError: the token is wrong or revoked.
            core.errors.PlatformUnavailableError: Slack could not be reached in 3 attempts.
        """
        return await self._conn.verify()

    # ------------------------------------------------------------ ChannelAdapter: local checks

    def check_target(self, target: Target) -> str | None:
        """Slack ids: ``chat_id`` a conversation id ``C…`` / ``G…`` / ``D…`` (upper-case letters and digits);
        ``thread_id`` / ``reply_to`` a message ts ``digits.digits`` (https://docs.slack.dev/reference/methods/chat.postMessage)."""
        chat = target.chat_id
        if not isinstance(chat, str) or not _CHANNEL_RE.fullmatch(chat):
            return f"chat_id {chat!r} must be a Slack conversation id (C…, G… or D…)"
        for name in ("thread_id", "reply_to"):
            value = getattr(target, name)
            if value is not None and not (isinstance(value, str) and _TS_RE.fullmatch(value)):
                return f"{name} {value!r} must be a message ts such as '1700000000.000100'"
        return None

    def is_group(self, target: Target) -> bool:
        """Channels (``C…`` public, ``G…`` private or group DM) are groups; ``D…`` direct messages are not."""
        return str(target.chat_id).startswith(("C", "G"))

    # ------------------------------------------------------------ rendering

    def _body(self, method: str, target: Target, text: str, fmt: TextFormat) -> Rendered:
        body = self.render(text, fmt)
        if not body.body.strip():  # Slack answers no_text (and slack-sdk would warn first)
            raise PayloadRejectedError(
                f"slack {method}: no_text (empty text, not sent)",
                reason=RejectReason.EMPTY,
                platform=PLATFORM,
                target=str(target.chat_id),
            )
        return body

    # ------------------------------------------------------------ ChannelAdapter: calls

    async def send_text(self, target: Target, text: str, fmt: TextFormat, *, delivery_id: str | None = None) -> str:
        """Send a new message (chat.postMessage); return its ``ts``.

        ``target.thread_id`` (else ``target.reply_to``) becomes ``thread_ts``: the message is a reply in that
        thread. ``delivery_id`` goes in the message ``metadata`` (:func:`adapters.slack.settle.delivery_metadata`),
        where :meth:`settle_send` finds it.

        Raises:
            core.errors.UncertainDeliveryError: a timeout, a connection lost after sending, or a 5xx: the message
                may be stored (:meth:`settle_send`).
            core.errors.DeliveryError: another subclass, per :mod:`adapters.slack.errors` (a 429 has
                ``scope=conversation``: chat.postMessage is limited per channel).
        """
        body = self._body("chat.postMessage", target, text, fmt)
        channel, thread = str(target.chat_id), thread_ts(target)
        metadata = None if delivery_id is None else delivery_metadata(delivery_id)
        answer = await self._call(
            "chat.postMessage",
            target,
            lambda: self._client.chat_postMessage(channel=channel, thread_ts=thread, metadata=metadata, **body.args()),
        )
        return str(answer["ts"])

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> bool:
        """Replace a message's text (chat.update). Slack answers ok for an unchanged text, so this is True.

        A message that is still streaming is stopped first (chat.stopStream), then updated.

        Raises:
            core.errors.MessageFrozenError: Slack takes no more edits of it (``cant_update_message``,
                ``edit_window_closed``): it keeps what it shows.
            core.errors.TargetNotFoundError: the message is gone (``message_not_found``).
            core.errors.DeliveryError: another subclass (a 429 has ``scope=method``: Tier 3 per workspace).
        """
        body = self._body("chat.update", target, text, fmt)
        await self._update(
            target, message_id, self._stops.body(target, message_id, text, fmt, body, self.markup) or body
        )
        return True  # a message that carried a Stop control gets its blocks (stop_control.py)

    async def send_media(
        self, target: Target, media: MediaItem, fmt: TextFormat, *, delivery_id: str | None = None
    ) -> str:
        """Post ``media`` as its own message (:func:`adapters.slack.media.post_media`); return its ``ts``.

        Raises:
            core.errors.UncertainDeliveryError: a timeout, a connection lost after sending, or a 5xx: the message
                may be stored (settled by its delivery id).
            core.errors.DeliveryError: another subclass, per :mod:`adapters.slack.errors`.
        """
        return await post_media(self._conn, target, media, fmt, delivery_id)

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        """Find the message of an uncertain send by its delivery id (:func:`adapters.slack.settle.settle_send`:
        ``found``, ``not_sent`` or ``unknown``); for an unknown stream start (``pending.stream_start``), the stream
        by its text in the thread, below the part's message (:func:`adapters.slack.settle.settle_start`).

        Raises:
            core.errors.UnreadableAnswerError: an answer that cannot be read: unknown, asked again.
            core.errors.DeliveryError: a subclass, as every call (429 with ``scope=method``, 5xx, timeout).
        """
        if pending.stream_start:
            streamed = stream_markdown(pending.text, pending.fmt, self.markup)
            return await settle.settle_start(self._conn, target, pending, streamed)
        return await settle.settle_send(self._conn, target, pending)

    def unreadable(self) -> str | None:
        """None: every configured channel can read its messages back (:class:`core.ports.ReadBack`)."""
        return None

    async def read_back(self, target: Target, message_id: str, shown: str, fmt: TextFormat) -> Shown:
        """Whether message ``message_id`` (its ts) still shows ``shown`` as this adapter renders it
        (:func:`adapters.slack.settle.read_back`: conversations.history / .replies bounded to the ts;
        :class:`core.ports.ReadBack`).

        Raises:
            core.errors.DeliveryError: a subclass, per :mod:`adapters.slack.errors`.
        """
        return await settle.read_back(self._conn, target, message_id, self.render(shown, fmt).body)

    async def set_stop(
        self, target: Target, message_id: str, text: str, fmt: TextFormat, control: StopControl | None
    ) -> None:
        """Put ``control`` on message ``message_id`` (its ts) or take it off, by chat.update with the message's text
        and blocks (:mod:`adapters.slack.stop_control`); from now on its edits send its blocks.

        Raises:
            core.errors.DeliveryError: a subclass, per :mod:`adapters.slack.errors`.
        """
        self._stops.mark(target, message_id, control)  # before the call: later edits send the blocks
        await self._update(target, message_id, stop_blocks(text, fmt, control, self.render(text, fmt), self.markup))

    async def delete_message(self, target: Target, message_id: str) -> None:
        """Delete a message this bot sent (chat.delete). An open stream cannot be deleted
        (``cant_delete_message``): a stream this adapter started is stopped first; on that refusal for any
        other message, a stream still open is stopped and the delete sent once more.

        Raises:
            core.errors.TargetNotFoundError: it is already gone, or not the bot's.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.slack.errors`.
        """
        channel = str(target.chat_id)

        def send() -> Awaitable[AsyncSlackResponse]:
            return self._client.chat_delete(channel=channel, ts=message_id)

        if (channel, message_id) in self._open:
            await self._stop(target, message_id)
        answer = await self._try("chat.delete", target, send, allow=(CANT_DELETE,))
        if isinstance(answer, Refused):
            if not await self._stop(target, message_id, allow=(NOT_STREAMING, *_NOT_A_STREAM)):
                raise answer.error
            await self._call("chat.delete", target, send)

    async def send_typing(self, target: Target) -> None:
        """In a thread, set the assistant thread status "is typing…" (assistant.threads.setStatus; it clears
        when the app replies). Elsewhere nothing: Slack has no typing indicator for bots outside assistant
        threads (https://docs.slack.dev/reference/methods/assistant.threads.setStatus)."""
        await self._set_status(target, TYPING_STATUS)

    async def clear_typing(self, target: Target) -> None:
        """In a thread, clear the assistant thread status (an empty ``status``): a run that ends without a reply
        after its last status would otherwise leave "is typing…" for two minutes
        (https://docs.slack.dev/reference/methods/assistant.threads.setStatus). Elsewhere nothing."""
        await self._set_status(target, "")

    async def _set_status(self, target: Target, status: str) -> None:
        thread = thread_ts(target)
        if thread is None:
            return
        channel = str(target.chat_id)
        await self._call(
            "assistant.threads.setStatus",
            target,
            lambda: self._client.assistant_threads_setStatus(channel_id=channel, thread_ts=thread, status=status),
        )

    # ------------------------------------------------------------ Threads

    def thread_refusal(self, target: Target) -> str | None:
        """:data:`NESTED_THREAD` when ``target`` already posts into a thread (``thread_id``, or ``reply_to``,
        which :meth:`send_text` also sends as ``thread_ts``): its messages are replies, and a reply cannot
        have replies of its own (https://docs.slack.dev/messaging/#threading). None otherwise."""
        return NESTED_THREAD if thread_ts(target) is not None else None

    async def open_thread(self, target: Target, anchor_message_id: str, title: str) -> Target:
        """The thread under the top-level message ``anchor_message_id`` (its ``ts``): no call is made, the
        thread exists as soon as a reply is posted with ``thread_ts`` = that ts. ``title`` is not shown
        (Slack threads have no names).

        Returns:
            ``Target(chat_id=target.chat_id, thread_id=anchor_message_id)``.

        Raises:
            core.errors.PermanentDeliveryError: :meth:`thread_refusal` refuses ``target``.
            core.errors.TargetNotFoundError: ``anchor_message_id`` is not a message ts. An anchor that does not
                exist (any more) is found out by the first post: ``thread_not_found``.
        """
        channel = str(target.chat_id)
        reason = self.thread_refusal(target)
        if reason is not None:
            raise PermanentDeliveryError(f"slack: {reason}", platform=PLATFORM, target=channel)
        if not _TS_RE.fullmatch(anchor_message_id):
            raise TargetNotFoundError(
                f"slack: {anchor_message_id!r} is not a message ts", platform=PLATFORM, target=channel
            )
        return Target(chat_id=target.chat_id, thread_id=anchor_message_id)

    # ------------------------------------------------------------ NativeStreaming

    def native_refusal(self, target: Target) -> str | None:
        """Slack streams only as a reply in a thread (``thread_ts`` is required) and, in channels, only with
        ``recipient_user_id`` and ``recipient_team_id``, which a target does not carry: so in a direct
        message's thread (https://docs.slack.dev/reference/methods/chat.startStream)."""
        if thread_ts(target) is None:
            return "slack streams only into a thread (chat.startStream requires thread_ts): no thread_id or reply_to"
        if self.is_group(target):
            return "slack streams in channels need recipient_user_id and recipient_team_id: only direct messages"
        return None

    async def stream_start(self, target: Target, text: str, fmt: TextFormat) -> str:
        """Open a stream in the target's thread showing ``text`` (chat.startStream); return its ``ts``. No delivery
        id can go with it: chat.startStream takes no ``metadata`` (https://docs.slack.dev/reference/methods/chat.startStream).

        Raises:
            core.errors.NativeUnavailableError: :meth:`native_refusal` refuses the target, or Slack refused the
                stream (feature not enabled, missing recipient, …): fall back to ``preview``.
            core.errors.RateLimitedError: 429 (Tier 2, ``scope=method``).
            core.errors.PlatformUnavailableError: nothing was sent (no connection).
            core.errors.UncertainDeliveryError: a timeout, a connection lost after sending, or a 5xx: it may be open.
        """
        channel = str(target.chat_id)
        reason = self.native_refusal(target)
        if reason is not None:
            raise NativeUnavailableError(f"slack chat.startStream: {reason}", platform=PLATFORM, target=channel)
        thread, body = thread_ts(target) or "", stream_markdown(text, fmt, self.markup)
        try:
            answer = await self._call(
                "chat.startStream",
                target,
                lambda: self._client.chat_startStream(channel=channel, thread_ts=thread, markdown_text=body or None),
            )
        except PermanentDeliveryError as exc:
            raise NativeUnavailableError(str(exc), platform=PLATFORM, target=channel) from None
        ts = str(answer["ts"])
        self._open[(channel, ts)] = None
        while len(self._open) > _MAX_OPEN_STREAMS:
            self._open.popitem(last=False)
        return ts

    async def stream_update(self, target: Target, handle: str, shown: str, text: str, fmt: TextFormat) -> None:
        """Make the stream ``handle`` show ``text``.

        When ``text`` extends ``shown`` (as rendered) the new suffix is appended (chat.appendStream). A stream
        cannot rewrite, and one that expired cannot grow: then ``NativeUnavailableError``, and the core edits the
        message (chat.update, under its own Tier 3 budget): nothing is lost.

        Raises:
            core.errors.DeliveryError: a subclass, per :mod:`adapters.slack.errors`.
        """
        suffix = self._suffix(target, handle, shown, text, fmt)
        if suffix == "":
            return
        if suffix is not None:
            channel = str(target.chat_id)
            answer = await self._try(
                "chat.appendStream",
                target,
                lambda: self._client.chat_appendStream(channel=channel, ts=handle, markdown_text=suffix),
                allow=(NOT_STREAMING,),
            )
            if not isinstance(answer, Refused):
                return
            self._open.pop((channel, handle), None)
        raise await self._no_longer_streamable(target, handle)

    async def stream_finish(self, target: Target, handle: str, shown: str, text: str, fmt: TextFormat) -> str:
        """End the stream ``handle`` with ``text`` persisted; return its ``ts`` (the permanent message id).

        When ``text`` extends ``shown`` the stream is stopped with the remaining suffix (chat.stopStream);
        otherwise, or when the stream is no longer open, ``NativeUnavailableError``: the core edits the message
        with the whole text (chat.update). A stream this process did not start (a restart since) is stopped as it
        is first: where it shows the text already there is no edit to stop it.

        A stop refused for its text (:data:`STOP_TOO_LONG`: ``msg_too_long``, ``msg_blocks_too_long``) has changed
        nothing: the stream is still open and shows ``shown`` alone. It is stopped without text, as it is, and
        ``NativeUnavailableError`` has the core write the whole text with chat.update on the same ``ts``: the
        message shows the part once and whole (``markdown_text`` takes 12,000 characters, and the core cuts parts
        to the channel's ``max_units``: https://docs.slack.dev/reference/methods/chat.stopStream,
        https://docs.slack.dev/reference/methods/chat.update). Were the text dropped instead, the chat would show
        the streamed start only and the part would be reported failed. Should that stop without text go unanswered
        or fail on Slack's side, the edit still follows: chat.update on a stream still open answers
        ``streaming_state_conflict``, and the stream is then stopped and the edit sent again (:meth:`_update`); a
        429 is raised (the core retries the finish after the pause).

        Raises:
            core.errors.NativeUnavailableError: the text cannot be streamed (see above), or chat.stopStream went
                unanswered or was answered unreadably (a timeout, a reset, an HTML page: it may have stopped, or
                not): edit the message with the whole text instead.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.slack.errors`.
        """
        suffix = self._suffix(target, handle, shown, text, fmt)
        channel = str(target.chat_id)
        why = "can no longer be appended to"
        if suffix is not None:
            try:
                answer = await self._try(
                    "chat.stopStream",
                    target,
                    lambda: self._client.chat_stopStream(channel=channel, ts=handle, markdown_text=suffix or None),
                    allow=(NOT_STREAMING, *STOP_TOO_LONG),
                )
            except UncertainDeliveryError as exc:
                # No answer, or one that cannot be read: the stop may have landed (the message shows the whole
                # text) or not (the stream is still open, showing ``shown``). Never stopped again with the suffix
                # (it could show twice): chat.update writes the whole text on the same ts, which is right either
                # way, and on a stream still open answers streaming_state_conflict, so _update stops it first.
                # Left uncertain instead, the chat kept the streamed start only (the rest of the answer lost).
                self._open.pop((channel, handle), None)
                raise NativeUnavailableError(
                    f"slack: stream {handle}: its stop may not have landed ({exc}); continuing as a message",
                    platform=PLATFORM,
                    target=channel,
                ) from None
            if not isinstance(answer, Refused):
                self._open.pop((channel, handle), None)
                return handle
            if answer.code != NOT_STREAMING:
                why = f"refused its last {text_units(suffix, LengthUnit.UTF16)} units ({answer.code})"
                with contextlib.suppress(UncertainDeliveryError, PlatformUnavailableError):
                    await self._stop(target, handle)  # as it is; if that fails, the edit stops it first (_update)
            self._open.pop((channel, handle), None)
        elif (channel, handle) not in self._open:
            # Not open as far as this process knows (a restart since it started): it may be open still. Stopped as
            # it is (one already stopped or expired answers message_not_in_streaming_state): where it shows the
            # text already the core has nothing to edit, and it would stay open, still streaming on Slack
            # (chaos-5-00022). A stop that fails raises: the core tries the finish again (chaos-6-00039: a 502 to
            # this stop, swallowed, left the stream open) or reports it uncertain.
            await self._stop(target, handle)
        raise await self._no_longer_streamable(target, handle, why)

    async def _no_longer_streamable(
        self, target: Target, handle: str, why: str = "can no longer be appended to"
    ) -> NativeUnavailableError:
        """The stream cannot show the text (it expired, the text no longer extends what it shows, or its stop was
        refused for its text): it is stopped as it is if still open, and the core goes on with the message as a
        preview, edited with chat.update under chat.update's own budget (Tier 3) and 429 scope, never under the
        stream's."""
        if (str(target.chat_id), handle) in self._open:
            await self._stop(target, handle)
        return NativeUnavailableError(
            f"slack: stream {handle} {why}; continuing as a message",
            platform=PLATFORM,
            target=str(target.chat_id),
        )

    async def stream_cancel(self, target: Target, handle: str) -> None:
        """Abandon the stream ``handle``: its message is deleted (stopped first: an open stream cannot be).

        Raises:
            core.errors.TargetNotFoundError: the message is already gone.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.slack.errors`.
        """
        await self.delete_message(target, handle)

    def _suffix(self, target: Target, handle: str, shown: str, text: str, fmt: TextFormat) -> str | None:
        """What to append to the open stream ``handle`` (``""``: nothing new), or None when it must be
        rewritten: not open as far as this adapter knows, not an extension, or ``stripped`` (markup failed)."""
        if (str(target.chat_id), handle) not in self._open or fmt is TextFormat.STRIPPED:
            return None
        old, new = stream_markdown(shown, fmt, self.markup), stream_markdown(text, fmt, self.markup)
        return new[len(old) :] if new.startswith(old) else None

    async def _stop(self, target: Target, ts: str, allow: Collection[str] = (NOT_STREAMING,)) -> bool:
        """Stop a stream with what it shows (chat.stopStream); return whether it was open (one already ended,
        or a refusal in ``allow``, is False)."""
        channel = str(target.chat_id)
        answer = await self._try(
            "chat.stopStream", target, lambda: self._client.chat_stopStream(channel=channel, ts=ts), allow=allow
        )
        self._open.pop((channel, ts), None)
        return not isinstance(answer, Refused)

    async def _update(self, target: Target, ts: str, body: Rendered | BlocksBody) -> None:
        """chat.update; a stream still open (one this process did not start) is stopped first, then updated."""
        channel = str(target.chat_id)

        def send() -> Awaitable[AsyncSlackResponse]:
            return self._client.chat_update(channel=channel, ts=ts, **body.args())

        answer = await self._try("chat.update", target, send, allow=(STREAM_OPEN,))
        if isinstance(answer, Refused):
            await self._stop(target, ts)
            await self._call("chat.update", target, send)
