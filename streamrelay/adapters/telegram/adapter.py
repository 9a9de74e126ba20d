"""TelegramAdapter: one bot's :class:`core.ports.ChannelAdapter`, :class:`core.ports.NativeStreaming` and
:class:`core.ports.Threads`, built on aiogram 3.

Every method is one Bot API call, one attempt: aiogram never retries by itself (its session has no retry
middleware unless one is registered, and none is) and aiohttp does not retry POSTs. Retries belong to the
core's scheduler. Answers are read strictly (:mod:`adapters.telegram.session`: one in no Bot API shape is an error,
whatever the method) and failures are translated at this boundary by :mod:`adapters.telegram.errors`.

The adapter is composed, not mixed: it holds its bot (aiogram's ``Bot`` on a
:class:`~adapters.telegram.session.TelegramSession`), its renderings (:func:`adapters.telegram.render.render` in a
:class:`~adapters.rendering.RenderCache`: a text measured then sent is rendered once) and its Stop marks
(:class:`~adapters.telegram.stop_control.StopMarks`); media calls are built by :mod:`adapters.telegram.media`, the
settling probe by :mod:`adapters.telegram.settle`.

Bot API references:
    sendMessage https://core.telegram.org/bots/api#sendmessage (1-4096 characters after entity parsing),
    editMessageText https://core.telegram.org/bots/api#editmessagetext,
    deleteMessage https://core.telegram.org/bots/api#deletemessage,
    sendChatAction https://core.telegram.org/bots/api#sendchataction (typing lasts <= 5 s),
    sendMessageDraft https://core.telegram.org/bots/api#sendmessagedraft (a private chat's streamed preview,
    about 30 s, persisted with sendMessage; open to all bots since Bot API 9.5),
    formatting https://core.telegram.org/bots/api#formatting-options,
    limits https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this,
    reply parameters https://core.telegram.org/bots/api#replyparameters (threads are reply chains),
    custom API server https://docs.aiogram.dev/en/latest/api/session/custom_server.html.
"""

from __future__ import annotations

import functools
import random
import re
from typing import Any, TypeVar

from aiogram import Bot
from aiogram.client.telegram import TelegramAPIServer
from aiogram.methods import (
    DeleteMessage,
    EditMessageText,
    SendChatAction,
    SendMessage,
    SendMessageDraft,
    TelegramMethod,
)
from aiogram.types import ReplyParameters
from aiogram.utils.token import TokenValidationError, extract_bot_id, validate_token

from streamrelay.adapters.adapter_parts import measure_rendered, shows
from streamrelay.adapters.deadline import SendDeadline
from streamrelay.adapters.error_factories import Scrubber
from streamrelay.adapters.rendering import RenderCache
from streamrelay.adapters.telegram.errors import BOUNDARY_ERRORS, PLATFORM, translate
from streamrelay.adapters.telegram.media import check_caption, media_method
from streamrelay.adapters.telegram.render import INERT, Rendered, render
from streamrelay.adapters.telegram.responses import RESPONSE_MODELS  # noqa: F401  (kept built: see the module)
from streamrelay.adapters.telegram.session import TelegramSession
from streamrelay.adapters.telegram.settle import probe_ids
from streamrelay.adapters.telegram.stop_control import StopMarks, stop_method
from streamrelay.core.delivery.calls import CallObserver, perform_call
from streamrelay.core.errors import (
    ConfigError,
    NativeUnavailableError,
    PayloadRejectedError,
    PlatformUnavailableError,
    RejectReason,
    TargetNotFoundError,
)
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem
from streamrelay.core.ports import MarkupPermissions, PendingSend, Settlement, StopControl, TextFormat
from streamrelay.core.units import LengthUnit

T = TypeVar("T")

HARD_TIMEOUT_FACTOR = 3.0
HARD_TIMEOUT_EXTRA_S = 60.0
"""aiogram's (aiohttp's) own per-request timeout is ``send_timeout_s`` times :data:`HARD_TIMEOUT_FACTOR` plus this: a
cap for a loop stalled for long; the timeout that counts is :class:`~adapters.deadline.SendDeadline`'s."""
CONNECTIONS = 32
"""HTTP connections the bot's session opens at most (aiogram's default is 100): a call finds one free or waits for one
(a call not written within ``send_timeout_s`` is not sent: :class:`~adapters.deadline.SendDeadline`). Each kept-alive
connection holds its buffers and objects (about 1.8 KB of Python objects beside the kernel's socket buffers,
bench/bench_memory.py); the bot's own budget is 25 calls a second (``per_bot``, :mod:`adapters.telegram.platform`), so
32 at once, each taking up to a second, keep up with it."""
MAX_DRAFT_ID = 2**31 - 1
MAX_ID_BITS = 52
"""Telegram's ids have "at most 52 significant bits" (https://core.telegram.org/bots/api#chat)."""
_INTEGER_RE = re.compile(r"-?[0-9]{1,20}")
_USERNAME_RE = re.compile(r"@[A-Za-z][A-Za-z0-9_]{3,31}")
"""A public username: letters, digits and underscores, 4 to 32 of them (https://telegram.org/faq#q-what-can-i-use-as-my-username:
at least 5 for new ones; 4-letter collectible ones exist)."""
"""Draft ids stay in 1..2**31-1: non-zero (https://core.telegram.org/bots/api#sendmessagedraft) and a
positive 32-bit integer (an assumption: the Bot API only says Integer)."""


class TelegramAdapter:
    """Sends, edits and deletes one bot's messages, sends its media (:mod:`adapters.telegram.media`) through the Bot
    API (or a mock of it), streams drafts into private chats (:class:`core.ports.NativeStreaming`, replace shape),
    opens reply chains as threads (:class:`core.ports.Threads`) and puts a Stop button on a message or a draft
    (:class:`core.ports.StopControls`, :class:`core.ports.DraftStopControls`; :mod:`adapters.telegram.stop_control`).

    Args:
        token: the bot token ``<digits>:<secret>``. Never shown in ``repr``, ``str``, logs or errors.
        base_url: API server base, e.g. ``http://127.0.0.1:8081`` for :class:`mocks.telegram.MockTelegram`;
            ``None`` is https://api.telegram.org.
        send_timeout_s: per-call timeout in seconds, counted from when the request is written and leaving out the
            time our event loop stalled meanwhile (:class:`adapters.deadline.SendDeadline`). A call that times out
            raises :class:`core.errors.UncertainDeliveryError`: it may have landed; one that could not even be
            written within it raises :class:`core.errors.PlatformUnavailableError` (not sent). aiogram's own
            timeout is only a hard cap (:data:`HARD_TIMEOUT_EXTRA_S`).
        max_units: text limit of one message in UTF-16 code units (Telegram: 4096).
        markup: the mentions and links the channel lets agent text keep (default: none).

    Raises:
        ConfigError: the token is malformed.
    """

    platform: str = PLATFORM
    unit: LengthUnit = LengthUnit.UTF16
    stream_refresh_s: float | None = 20.0
    finish_creates = True
    """stream_finish sends the message (sendMessage): a create."""
    finish_repeats = False
    """Not read: the finish is a create, settled like one (:attr:`core.ports.NativeStreaming.finish_repeats`)."""
    settles_start = False
    """A draft that may have shown lapses by itself: nothing to settle."""
    """A draft lives about 30 s (https://core.telegram.org/bots/api#sendmessagedraft): shown again after 20 s."""

    observer: CallObserver | None = None
    """Watches every call :meth:`perform` makes (metrics; :class:`core.ports.ChannelAdapter`)."""
    connections: int = CONNECTIONS
    """The bot session's connection pool (:class:`core.ports.PooledConnections`): the channel lets this many message
    calls be under way at once (:class:`core.delivery.call_slots.CallSlots`)."""

    perform = perform_call
    """The core's one entrance (:meth:`core.ports.ChannelAdapter.perform`): ``call`` in one attempt, its outcome as a
    value (done, not done, unknown); never raises a delivery error."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str | None = None,
        send_timeout_s: float = 10.0,
        max_units: int = 4096,
        markup: MarkupPermissions = INERT,
    ) -> None:
        try:
            validate_token(token)
        except TokenValidationError:
            raise ConfigError("telegram: the bot token is malformed (expected '<digits>:<secret>')") from None
        self.max_units = max_units
        self.send_timeout_s = send_timeout_s
        self._base_url = base_url
        self._bot_id = extract_bot_id(token)
        secret = token.partition(":")[2]
        self._scrub = Scrubber(token, secret)
        session_args: dict[str, Any] = {
            "timeout": send_timeout_s * HARD_TIMEOUT_FACTOR + HARD_TIMEOUT_EXTRA_S,
            "limit": CONNECTIONS,
        }
        if base_url is not None:
            session_args["api"] = TelegramAPIServer.from_base(base_url)
        self._bot = Bot(token, session=TelegramSession(**session_args))
        self._next_draft_id = random.randrange(1, MAX_DRAFT_ID + 1)  # a counter seeded randomly (never 0)
        self.markup = markup
        self.render = RenderCache(functools.partial(render, allowed=markup))
        """``render(text, fmt) -> Rendered``: text + entities and their UTF-16 length
        (:func:`adapters.telegram.render.render`, links and mentions as ``markup`` allows), kept for the texts in
        flight."""
        self._stops = StopMarks()

    __repr__ = __str__ = shows(bot_id="_bot_id", base_url="_base_url")
    measure = measure_rendered
    """UTF-16 units of the text Telegram receives: Markdown is rendered to text + entities first, and the 4096 limit
    counts the text after entity parsing (https://core.telegram.org/bots/api#sendmessage)."""

    def check_target(self, target: Target) -> str | None:
        """Telegram ids: ``chat_id`` an integer (or its ASCII digits) of at most 52 bits, or ``@channelusername``
        (:data:`_USERNAME_RE`); ``thread_id`` and ``reply_to`` integers (https://core.telegram.org/bots/api#sendmessage;
        a chat id "has at most 52 significant bits"). Digits of other scripts (``"²"``, Arabic-Indic ones) are
        refused: Python's ``int`` reads some of them, Telegram none."""
        chat = target.chat_id
        named = isinstance(chat, str) and _USERNAME_RE.fullmatch(chat) is not None
        problem = None if named else _id_problem("chat_id", chat, "must be an integer or '@channelusername'")
        for name in ("thread_id", "reply_to"):
            value = getattr(target, name)
            if problem is None and value is not None:
                problem = _id_problem(name, value, "must be an integer message id")
        return problem

    def is_group(self, target: Target) -> bool:
        """Groups, supergroups and channels have negative ids or ``@username`` ids.

        Groups get at most 20 messages per minute
        (https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this).
        """
        chat = target.chat_id
        if isinstance(chat, int):
            return chat < 0
        return chat.startswith(("-", "@"))

    async def _call(self, method: TelegramMethod[T], target: Target) -> T:
        """One attempt at one Bot API call within :attr:`send_timeout_s` (a :class:`SendDeadline`); every failure
        leaves as a ``DeliveryError`` (token-free)."""
        deadline = SendDeadline(self.send_timeout_s)
        try:
            async with deadline:
                return await self._bot(method)
        except TimeoutError as exc:  # our deadline (aiogram wraps its own timeout in TelegramNetworkError)
            if deadline.written:
                error = translate(exc, method=method.__api_method__, target=str(target.chat_id), scrub=self._scrub)
            else:
                error = PlatformUnavailableError(
                    f"telegram {method.__api_method__}: not sent, the request could not be written within "
                    f"{self.send_timeout_s:g} s",
                    platform=PLATFORM,
                    target=str(target.chat_id),
                )
        except BOUNDARY_ERRORS as exc:
            error = translate(exc, method=method.__api_method__, target=str(target.chat_id), scrub=self._scrub)
        raise error  # outside the except block: no __context__ that could carry the token in its URL

    async def send_text(self, target: Target, text: str, fmt: TextFormat, *, delivery_id: str | None = None) -> str:
        """Send a new message (``sendMessage``); return its message id as a string.

        ``target.thread_id`` becomes ``message_thread_id``; ``target.reply_to`` becomes ``reply_parameters``
        with ``allow_sending_without_reply`` (a deleted reply target does not lose the answer). ``delivery_id`` is
        not sent: a Telegram message cannot carry one (:meth:`settle_send` probes ids instead).

        Raises:
            core.errors.UncertainDeliveryError: a timeout, a connection lost after sending, a 5xx, or an answer it
                cannot read (``UnreadableAnswerError``, :mod:`adapters.telegram.session`): the message may be stored
                (:meth:`settle_send`).
            core.errors.DeliveryError: another subclass, per :mod:`adapters.telegram.errors`.
        """
        shown = self.render.take(text, fmt)  # measured before: rendered once, not kept after its call
        reply_to = _message_id(target.reply_to, target) if target.reply_to is not None else None
        method = SendMessage(
            chat_id=target.chat_id,
            text=shown.text,
            entities=shown.entities,
            message_thread_id=_thread_id(target),
            reply_parameters=(
                ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) if reply_to is not None else None
            ),
        )
        sent = await self._call(method, target)
        return str(sent.message_id)

    async def send_media(
        self, target: Target, media: MediaItem, fmt: TextFormat, *, delivery_id: str | None = None
    ) -> str:
        """Send ``media`` as its own message (:func:`adapters.telegram.media.media_method`: sendPhoto, sendDocument,
        sendAudio or sendVideo by URL, the caption rendered like a text); return its message id. ``delivery_id`` is
        not sent: a Telegram message cannot carry one.

        Raises:
            core.errors.UncertainDeliveryError: a timeout, a connection lost after sending, or a 5xx: it may be
                stored (settled by probing ids with an exclusive bot, else reported, never sent again).
            core.errors.PayloadRejectedError: the caption is past 1024 UTF-16 units after entity parsing
                (``too_long``, no call made) or cannot be parsed.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.telegram.errors` (a URL Telegram
                cannot fetch: the part fails with Telegram's description).
        """
        caption: Rendered | None = self.render(media.caption, fmt) if media.caption else None
        if caption is not None:
            check_caption(caption, target)  # 1024 UTF-16 units after entity parsing, like a message's text
        sent = await self._call(media_method(target, media, caption), target)
        return str(sent.message_id)

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        """Find out whether an uncertain :meth:`send_text` stored its message: only when ``pending.exclusive``,
        by probing the message ids after ``pending.after_id`` with editMessageText of ``pending.text`` (rules,
        outcomes and cautions: :mod:`adapters.telegram.settle`); otherwise ``unknown`` without a call.

        Raises:
            core.errors.DeliveryError: a subclass, as every call (429, 5xx, timeout, a chat that is gone).
        """
        return await probe_ids(lambda method: self._call(method, target), self.render, target, pending)

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> bool:
        """Replace a message's text (``editMessageText``). "message is not modified" is success.

        Returns:
            True when the message changed; False when Telegram answered "message is not modified".

        Raises:
            core.errors.MessageFrozenError: "message can't be edited" (past its edit window): it keeps its text.
            core.errors.TargetNotFoundError: the message (or chat) does not exist any more.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.telegram.errors`.
        """
        shown = self.render.take(text, fmt)  # measured before: rendered once, not kept after its call
        method = EditMessageText(
            chat_id=target.chat_id,
            message_id=_message_id(message_id, target),
            text=shown.text,
            entities=shown.entities,
            reply_markup=self._stops.markup(target, message_id),  # the Stop control stays on (stop_control.py)
        )
        try:
            await self._call(method, target)
        except PayloadRejectedError as exc:
            if exc.reason is not RejectReason.NOT_MODIFIED:
                raise
            return False
        return True

    async def delete_message(self, target: Target, message_id: str) -> None:
        """Delete a message this bot sent (``deleteMessage``).

        Raises:
            core.errors.TargetNotFoundError: it is already gone.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.telegram.errors`.
        """
        await self._call(DeleteMessage(chat_id=target.chat_id, message_id=_message_id(message_id, target)), target)

    async def send_typing(self, target: Target) -> None:
        """Show "typing…" (``sendChatAction``); it lasts <= 5 s, so resend about every 4-5 s."""
        await self._call(
            SendChatAction(chat_id=target.chat_id, action="typing", message_thread_id=_thread_id(target)),
            target,
        )

    async def clear_typing(self, target: Target) -> None:
        """Nothing: "typing…" ends by itself within 5 s and the Bot API has no call to end it
        (https://core.telegram.org/bots/api#sendchataction)."""
        return None

    # ------------------------------------------------------------ Stop controls

    async def set_stop(
        self, target: Target, message_id: str, text: str, fmt: TextFormat, control: StopControl | None
    ) -> None:
        """Put ``control`` on message ``message_id`` (editMessageReplyMarkup), or take it off (an empty keyboard);
        from now on the edits of that message carry it again (:mod:`adapters.telegram.stop_control`). ``text`` and
        ``fmt`` are not needed here: the text stays as it is. "Not modified" is success.

        Raises:
            core.errors.TargetNotFoundError: the message is gone (or ``message_id`` is not an integer).
            core.errors.DeliveryError: another subclass, per :mod:`adapters.telegram.errors`.
        """
        self._stops.mark(target, message_id, control)  # before the call: an edit after an unknown outcome keeps it
        try:
            await self._call(stop_method(target, message_id, control), target)
        except PayloadRejectedError as exc:
            if exc.reason is not RejectReason.NOT_MODIFIED:
                raise

    def stoppable_draft(self, target: Target, handle: str, stoppable: bool) -> None:
        """Draft ``handle``'s next updates carry ``can_stop`` (Bot API 10.3) while ``stoppable``
        (:class:`core.ports.DraftStopControls`); no call is made here."""
        self._stops.stoppable_draft(target, handle, stoppable)

    # ------------------------------------------------------------ native streaming (drafts)

    def native_refusal(self, target: Target) -> str | None:
        """Drafts exist only in private chats (https://core.telegram.org/bots/api#sendmessagedraft): a
        reason for groups, supergroups and channels; None for a private chat."""
        if self.is_group(target):
            return f"telegram: sendMessageDraft works in private chats only, not in chat {target.chat_id}"
        return None

    async def stream_start(self, target: Target, text: str, fmt: TextFormat) -> str:
        """Show ``text`` as a new draft (``sendMessageDraft``) under a fresh non-zero draft id; return the id.

        Draft ids come from a per-adapter counter seeded randomly, so two runs of one adapter never share a
        draft. ``text`` is rendered like :meth:`send_text` (text + entities).

        Raises:
            core.errors.NativeUnavailableError: a group chat, or the server has no sendMessageDraft.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.telegram.errors`.
        """
        draft_id = self._next_draft_id
        self._next_draft_id = draft_id % MAX_DRAFT_ID + 1
        await self._draft(target, draft_id, text, fmt)
        return str(draft_id)

    async def stream_update(self, target: Target, handle: str, shown: str, text: str, fmt: TextFormat) -> None:
        """Replace the draft ``handle`` with the whole ``text`` (``sendMessageDraft``, same draft id: the
        change is animated). Each update also restarts the draft's life of about 30 s; ``shown`` is unused
        (replace semantics).

        Raises:
            core.errors.NativeUnavailableError: a group chat, or the server has no sendMessageDraft.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.telegram.errors`.
        """
        await self._draft(target, _draft_id(handle, target), text, fmt)

    async def stream_finish(self, target: Target, handle: str, shown: str, text: str, fmt: TextFormat) -> str:
        """Persist ``text`` with ``sendMessage`` (a draft is only a preview: it must be followed by a real
        message, https://core.telegram.org/bots/api#sendmessagedraft); return the new message id. An uncertain
        finish is settled like any send (:meth:`settle_send`: the same sendMessage).

        Raises:
            core.errors.DeliveryError: a subclass, as :meth:`send_text`.
        """
        return await self.send_text(target, text, fmt)

    async def stream_cancel(self, target: Target, handle: str) -> None:
        """Nothing to do: an abandoned draft lapses by itself (about 30 s without updates)."""

    async def _draft(self, target: Target, draft_id: int, text: str, fmt: TextFormat) -> None:
        reason = self.native_refusal(target)
        if reason is not None:
            raise NativeUnavailableError(reason, platform=PLATFORM, target=str(target.chat_id))
        shown = self.render.take(text, fmt)  # measured before: rendered once, not kept after its call
        method = SendMessageDraft(
            chat_id=int(target.chat_id),
            draft_id=draft_id,
            text=shown.text,
            entities=shown.entities,
            message_thread_id=_thread_id(target),
            can_stop=self._stops.draft_can_stop(target, draft_id),  # a Stop on the draft (stop_control.py)
        )
        await self._call(method, target)

    # ------------------------------------------------------------ threads (reply chains)

    def thread_refusal(self, target: Target) -> str | None:
        """None: a reply chain works in every chat (private, group, channel, forum topic)."""
        return None

    async def open_thread(self, target: Target, anchor_message_id: str, title: str) -> Target:
        """A reply chain under ``anchor_message_id``: no call is made (forum topics are not created, and
        ``title`` is not shown anywhere).

        Returns:
            ``Target(chat_id=target.chat_id, thread_id=target.thread_id, reply_to=anchor_message_id)``: every
            message sent there replies to the anchor (``reply_parameters`` with
            ``allow_sending_without_reply``, https://core.telegram.org/bots/api#replyparameters), so a person
            sees which message each one answers; a forum topic (``thread_id``) is kept.

        Raises:
            core.errors.TargetNotFoundError: ``anchor_message_id`` is not an integer message id.
        """
        _message_id(anchor_message_id, target)
        return Target(chat_id=target.chat_id, thread_id=target.thread_id, reply_to=anchor_message_id)

    async def close(self) -> None:
        """Close the HTTP session (aiogram waits 250 ms for TLS connections to close)."""
        await self._bot.session.close()


def _id_problem(name: str, value: int | str, expected: str) -> str | None:
    """Why ``value`` is no Telegram id (ASCII digits, an optional minus, at most :data:`MAX_ID_BITS` bits), or None."""
    if not _INTEGER_RE.fullmatch(str(value)):
        return f"{name} {value!r} {expected}"
    if abs(int(value)) >= 2**MAX_ID_BITS:
        return f"{name} {value!r} is out of range: Telegram ids have at most {MAX_ID_BITS} bits"
    return None


def _message_id(value: int | str, target: Target) -> int:
    try:
        return int(value)
    except ValueError:
        raise TargetNotFoundError(
            f"telegram: {value!r} is not a message id", platform=PLATFORM, target=str(target.chat_id)
        ) from None


def _thread_id(target: Target) -> int | None:
    return None if target.thread_id is None else _message_id(target.thread_id, target)


def _draft_id(handle: str, target: Target) -> int:
    try:
        draft_id = int(handle)
    except ValueError:
        draft_id = 0
    if not 0 < draft_id <= MAX_DRAFT_ID:
        raise TargetNotFoundError(
            f"telegram: {handle!r} is not a draft id", platform=PLATFORM, target=str(target.chat_id)
        )
    return draft_id
