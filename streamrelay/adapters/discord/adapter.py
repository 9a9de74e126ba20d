"""DiscordAdapter: one bot's :class:`core.ports.ChannelAdapter`, :class:`core.ports.Threads` and
:class:`core.ports.StopControls`, built on discord.py used REST-only.

The adapter is composed, not mixed: it holds its connection (:class:`adapters.discord.connection.DiscordConnection`:
login, one attempt per call, rate limits and timeouts) and its renderings (:func:`adapters.discord.render.render` in a
:class:`~adapters.rendering.RenderCache`: a text measured then sent is rendered once); media embeds come from
:mod:`adapters.discord.media`, the Stop button's edit from :mod:`adapters.discord.stop_control`.

Messages go through partial objects (``get_partial_messageable(id).send`` / ``get_partial_message(id).edit`` /
``.delete`` / ``typing``); a thread is started from a message with discord.py's
``HTTPClient.start_thread_with_message`` (a partial message has no guild, so ``Message.create_thread`` cannot
be used).

Discord references: create message https://discord.com/developers/docs/resources/message#create-message
(``content`` <= 2000 characters), edit https://discord.com/developers/docs/resources/message#edit-message,
delete https://discord.com/developers/docs/resources/message#delete-message, typing
https://discord.com/developers/docs/resources/channel#trigger-typing-indicator (shows about 10 s),
allowed mentions https://discord.com/developers/docs/resources/message#allowed-mentions-object, error codes
https://discord.com/developers/docs/topics/opcodes-and-status-codes#json, start thread from message
https://discord.com/developers/docs/resources/channel#start-thread-from-message.
"""

from __future__ import annotations

import functools
import secrets
from collections import OrderedDict
from typing import Any, Final, overload

from streamrelay.adapters.adapter_parts import ConnectionTimeout, close_connection, measure_rendered, shows
from streamrelay.adapters.discord import stop_control
from streamrelay.adapters.discord._sdk import discord
from streamrelay.adapters.discord.connection import DiscordConnection, snowflake
from streamrelay.adapters.discord.errors import PLATFORM
from streamrelay.adapters.discord.media import media_embed
from streamrelay.adapters.discord.render import Rendered, render
from streamrelay.adapters.rendering import RenderCache
from streamrelay.core.delivery.calls import CallObserver, perform_call
from streamrelay.core.errors import PermanentDeliveryError, TargetNotFoundError
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem
from streamrelay.core.ports import (
    NO_MARKUP,
    MarkupPermissions,
    PendingSend,
    Settlement,
    SettleOutcome,
    Shown,
    StopControl,
    TextFormat,
)
from streamrelay.core.units import LengthUnit

NO_MENTIONS = discord.AllowedMentions.none()
"""``allowed_mentions`` ``{"parse": [], "replied_user": false}``: an ``@everyone``, ``<@id>`` or ``<@&role>`` in agent
text notifies no one (https://discord.com/developers/docs/resources/message#allowed-mentions-object)."""
ALL_MENTIONS = discord.AllowedMentions(everyone=True, users=True, roles=True, replied_user=False)
"""``allowed_mentions`` ``parse: ["everyone", "users", "roles"]``: for a channel with ``allow_mentions = true``."""
"""Sent with every message and edit: model output never pings @everyone, a role or a user."""
MAX_THREAD_NAME_CHARS = 100
"""Thread names are 1-100 characters (https://discord.com/developers/docs/resources/channel#start-thread-from-message)."""
THREAD_ARCHIVE_MIN: Final = 1440
"""A thread leaves the channel list after 24 hours without activity (``auto_archive_duration``, minutes)."""
NESTED_THREAD = "already in a thread: Discord threads do not nest"
_MAX_KNOWN_THREADS = 1024


UNKNOWN_MESSAGE = 10008
"""Discord's "Unknown Message"; to a create with a used nonce: that message was deleted since."""
THREAD_EXISTS = 160004
"""Discord's "A thread has already been created for this message"
(https://discord.com/developers/docs/topics/opcodes-and-status-codes#json-json-error-codes)."""


def thread_name(title: str) -> str:
    """A thread's name from ``title``: whitespace runs (newlines too) become one space, then the first 100
    characters; ``"thread"`` when nothing is left (Discord refuses an empty name)."""
    return " ".join(title.split())[:MAX_THREAD_NAME_CHARS] or "thread"


# ------------------------------------------------------------------ the adapter


class DiscordAdapter:
    """Sends, edits and deletes one bot's messages through Discord's REST API (or a mock of it), starts threads from
    them and puts a Stop button on them.

    Args:
        token, base_url, send_timeout_s: as :class:`adapters.discord.connection.DiscordConnection`.
        max_units: text limit of one message in UTF-16 code units. Discord allows 2000 characters; counting
            UTF-16 units is the safe side (an emoji beyond the BMP counts 2).
        markup: the mentions the channel lets agent text make (default: none; ``allowed_mentions``).

    Raises:
        ConfigError: the token is malformed, or another open adapter in this process uses another base URL.
    """

    platform: str = PLATFORM
    unit: LengthUnit = LengthUnit.UTF16

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
        max_units: int = 2000,
        markup: MarkupPermissions = NO_MARKUP,
    ) -> None:
        self.markup = markup
        self._mentions = ALL_MENTIONS if markup.mentions else NO_MENTIONS
        """``allowed_mentions`` of every create and edit: parse none unless the channel allows mentions."""
        self._conn = DiscordConnection(token, base_url=base_url, send_timeout_s=send_timeout_s)
        self.max_units = max_units
        self.render: RenderCache[Rendered] = RenderCache(functools.partial(render, max_units=max_units))
        """``render(text, fmt) -> Rendered``: the content and its UTF-16 length (:func:`adapters.discord.render.render`
        within ``max_units``), kept for the texts in flight."""
        self._threads: OrderedDict[int, None] = OrderedDict()
        """Threads this adapter started, oldest first (bounded): targets in them are refused new threads."""

    __repr__ = __str__ = shows(bot_id="_conn.bot_id", base_url="_conn.base_url")
    send_timeout_s = ConnectionTimeout()
    close = close_connection
    measure = measure_rendered

    def check_target(self, target: Target) -> str | None:
        """Discord ids are snowflakes (https://discord.com/developers/docs/reference#snowflakes): ``chat_id``
        (a channel), ``thread_id`` (a thread is a channel) and ``reply_to`` (a message) are positive 64-bit
        integers, as ints or digit strings."""
        for name in ("chat_id", "thread_id", "reply_to"):
            value = getattr(target, name)
            if value is not None and snowflake(value) is None:
                return f"{name} {value!r} must be a Discord snowflake id (digits)"
        return None

    def is_group(self, target: Target) -> bool:
        """Always True: a channel id does not say whether it is a guild channel or a DM, and Discord's
        per-channel limits are the same; treating every channel as a group is the safe side."""
        return True

    # -------------------------------------------------------------- ChannelAdapter

    async def send_text(self, target: Target, text: str, fmt: TextFormat, *, delivery_id: str | None = None) -> str:
        """Create a message (``POST /channels/{id}/messages``); return its snowflake id as a string.

        ``target.thread_id`` is the channel written to (a thread is a channel); ``target.reply_to`` becomes a
        ``message_reference`` with ``fail_if_not_exists=False`` (a deleted reply target does not lose the
        answer). ``allowed_mentions`` parses none (unless the channel allows mentions). ``delivery_id`` (at most 25
        characters) is sent as the message ``nonce`` with ``enforce_nonce: true`` (discord.py's
        ``Messageable.send(nonce=...)`` always adds ``enforce_nonce``; without a ``delivery_id`` it sends a random
        nonce), so the same create again within a few minutes returns the stored message instead of a second one
        (https://discord.com/developers/docs/resources/message#create-message): :meth:`settle_send`.

        Raises:
            core.errors.UncertainDeliveryError: a timeout after sending, a connection lost after sending, or a 5xx:
                the message may be stored (:meth:`settle_send`).
            core.errors.DeliveryError: another subclass, per :mod:`adapters.discord.errors`.
        """
        return await self._create("createMessage", target, text, fmt, delivery_id)

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        """Settle an uncertain :meth:`send_text`: the same create again (same target, text and format) with the same
        nonce and ``enforce_nonce`` (``settleMessage`` in errors). Discord returns the message stored under that
        nonce by this bot, or creates it now; either way exactly one exists: ``found`` with its id. A message stored
        under that nonce and deleted since is answered 404 10008 ``Unknown Message`` (discord.py's ``send``
        documents it): ``not_sent``, like any part whose message is gone (the core shows it anew). The nonce is
        remembered for a few minutes only (https://discord.com/developers/docs/resources/message#create-message):
        settle soon after the uncertain send; later, this create may make a second message.

        Raises:
            core.errors.PlatformUnavailableError: a 5xx (repeating it is safe: the nonce dedupes).
            core.errors.UncertainDeliveryError: a timeout after sending (ask again: the nonce dedupes).
            core.errors.DeliveryError: another subclass, as every call (429, a channel that is gone, ...).
        """
        message_id = await self._create(
            "settleMessage",
            target,
            pending.text,
            pending.fmt,
            pending.delivery_id,
            deleted_ok=True,
            media=pending.media,
        )
        if message_id is None:
            return Settlement(SettleOutcome.NOT_SENT)
        return Settlement(SettleOutcome.FOUND, message_id)

    async def send_media(
        self, target: Target, media: MediaItem, fmt: TextFormat, *, delivery_id: str | None = None
    ) -> str:
        """Create a message showing ``media`` in one embed (:mod:`adapters.discord.media`); return its id. Target,
        reply and nonce as :meth:`send_text`; an uncertain one is settled the same way (:meth:`settle_send`).

        Raises:
            core.errors.UncertainDeliveryError: a timeout after sending, a connection lost after sending, or a 5xx.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.discord.errors` (400 50035: an embed
                Discord refuses).
        """
        return await self._create("createMessage", target, "", fmt, delivery_id, media=media)

    @overload
    async def _create(
        self,
        method: str,
        target: Target,
        text: str,
        fmt: TextFormat,
        delivery_id: str | None,
        *,
        media: MediaItem | None = None,
    ) -> str: ...

    @overload
    async def _create(
        self,
        method: str,
        target: Target,
        text: str,
        fmt: TextFormat,
        delivery_id: str | None,
        *,
        deleted_ok: bool,
        media: MediaItem | None = None,
    ) -> str | None: ...

    async def _create(
        self,
        method: str,
        target: Target,
        text: str,
        fmt: TextFormat,
        delivery_id: str | None,
        *,
        deleted_ok: bool = False,
        media: MediaItem | None = None,
    ) -> str | None:
        """One Create Message (of ``text``, or of ``media`` in an embed); its id, or None when ``deleted_ok`` and
        Discord answered 10008 (the message of this nonce was deleted)."""
        content = self.render(text, fmt).content if media is None else None
        extra: dict[str, Any] = {} if media is None else {"embed": media_embed(media, fmt)}
        channel_id = self._conn.channel_id(target)
        nonce: str | int = delivery_id if delivery_id is not None else secrets.randbits(64)  # discord.py's default
        reference = None
        if target.reply_to is not None:
            reply_to = self._conn.snowflake_id(target.reply_to, target)
            reference = discord.MessageReference(message_id=reply_to, channel_id=channel_id, fail_if_not_exists=False)

        async def create(client: discord.Client) -> discord.Message | None:
            channel = client.get_partial_messageable(channel_id)
            try:
                if reference is None:
                    return await channel.send(content=content, allowed_mentions=self._mentions, nonce=nonce, **extra)
                return await channel.send(
                    content=content, allowed_mentions=self._mentions, reference=reference, nonce=nonce, **extra
                )
            except discord.NotFound as exc:
                if deleted_ok and exc.code == UNKNOWN_MESSAGE:
                    return None
                raise

        message = await self._conn.call(method, target, channel_id, create)
        return None if message is None else str(message.id)

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> bool:
        """Replace a message's content (``PATCH /channels/{id}/messages/{mid}``).

        Returns:
            True: Discord answers 200 for an unchanged edit too (it has no "not modified").

        Raises:
            core.errors.TargetNotFoundError: the message (or channel) does not exist any more.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.discord.errors`.
        """
        content = self.render(text, fmt).content
        channel_id, mid = self._conn.channel_id(target), self._conn.snowflake_id(message_id, target)

        async def edit(client: discord.Client) -> discord.Message:
            message = client.get_partial_messageable(channel_id).get_partial_message(mid)
            return await message.edit(content=content, allowed_mentions=self._mentions)

        await self._conn.call("editMessage", target, channel_id, edit)
        return True

    def unreadable(self) -> str | None:
        """None: every configured channel can read its messages back (:class:`core.ports.ReadBack`)."""
        return None

    async def read_back(self, target: Target, message_id: str, shown: str, fmt: TextFormat) -> Shown:
        """Whether message ``message_id`` still shows ``shown`` as this adapter renders it (Get Channel Message,
        ``GET /channels/{id}/messages/{mid}``: https://discord.com/developers/docs/resources/message#get-channel-message;
        needs VIEW_CHANNEL and READ_MESSAGE_HISTORY in a guild channel). 404 Unknown Message: ``gone``; another
        ``content`` (whitespace aside): ``changed`` (:class:`core.ports.ReadBack`).

        Raises:
            core.errors.DeliveryError: a subclass, per :mod:`adapters.discord.errors` (403: no permission to read).
        """
        expected = self.render(shown, fmt).content
        channel_id, mid = self._conn.channel_id(target), self._conn.snowflake_id(message_id, target)

        async def get(client: discord.Client) -> Any:
            return await client.http.get_message(channel_id, mid)

        try:
            message = await self._conn.call("getChannelMessage", target, channel_id, get)
        except TargetNotFoundError:
            return Shown.GONE
        content = message.get("content") if isinstance(message, dict) else None
        same = isinstance(content, str) and content.split() == expected.split()
        return Shown.AS_DELIVERED if same else Shown.CHANGED

    async def delete_message(self, target: Target, message_id: str) -> None:
        """Delete a message this bot sent (``DELETE /channels/{id}/messages/{mid}``).

        Raises:
            core.errors.TargetNotFoundError: it is already gone.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.discord.errors`.
        """
        channel_id, mid = self._conn.channel_id(target), self._conn.snowflake_id(message_id, target)

        async def delete(client: discord.Client) -> None:
            await client.get_partial_messageable(channel_id).get_partial_message(mid).delete()

        await self._conn.call("deleteMessage", target, channel_id, delete)

    async def send_typing(self, target: Target) -> None:
        """Show "typing…" (``POST /channels/{id}/typing``); it lasts about 10 s or until the bot sends."""
        channel_id = self._conn.channel_id(target)

        async def typing(client: discord.Client) -> None:
            await client.get_partial_messageable(channel_id).typing()

        await self._conn.call("triggerTypingIndicator", target, channel_id, typing)

    async def set_stop(
        self, target: Target, message_id: str, text: str, fmt: TextFormat, control: StopControl | None
    ) -> None:
        """Put ``control``'s button on message ``message_id`` or take every component off
        (:func:`adapters.discord.stop_control.set_stop`); ``text`` and ``fmt`` are not needed: the content stays.

        Raises:
            core.errors.TargetNotFoundError: the message (or channel) does not exist any more.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.discord.errors`.
        """
        await stop_control.set_stop(self._conn, target, message_id, control)

    async def clear_typing(self, target: Target) -> None:
        """Nothing: "typing…" ends by itself after about 10 s and Discord has no call to end it
        (https://discord.com/developers/docs/resources/channel#trigger-typing-indicator)."""
        return None

    # -------------------------------------------------------------- Threads

    def thread_refusal(self, target: Target) -> str | None:
        """:data:`NESTED_THREAD` when ``target`` is a thread: its ``thread_id`` is set, or its channel is a thread
        this adapter started (Discord answers 50024 "Cannot execute action on this channel type"). None
        otherwise: whether a channel is a thread or a DM (where Discord refuses threads too) cannot be known
        without a call, so such a refusal comes from :meth:`open_thread`."""
        if target.thread_id is not None or snowflake(target.chat_id) in self._threads:
            return NESTED_THREAD
        return None

    async def open_thread(self, target: Target, anchor_message_id: str, title: str) -> Target:
        """Start a public thread from message ``anchor_message_id`` (Start Thread from Message,
        ``POST /channels/{id}/messages/{mid}/threads`` with ``{"name": thread_name(title),
        "auto_archive_duration": 1440}``, https://discord.com/developers/docs/resources/channel#start-thread-from-message).

        Returns:
            ``Target(chat_id=<the thread's channel id>)``: a thread is a channel (its id is the anchor's id), with
            its own rate-limit buckets.

        Raises:
            core.errors.PermanentDeliveryError: :meth:`thread_refusal` refuses ``target`` (no call is made); or
                Discord refused: the channel takes no threads (50024, a thread or a DM). A message that already
                has a thread (160004: asked again after a timeout) is that thread, so opening is idempotent.
            core.errors.TargetNotFoundError: the message or the channel does not exist (10008, 10003).
            core.errors.DeliveryError: another subclass, per :mod:`adapters.discord.errors` (a timeout after
                sending is uncertain: the thread may exist).
        """
        reason = self.thread_refusal(target)
        if reason is not None:
            raise PermanentDeliveryError(f"discord: {reason}", platform=PLATFORM, target=str(target.chat_id))
        conn = self._conn
        channel_id, mid, name = (
            conn.channel_id(target),
            conn.snowflake_id(anchor_message_id, target),
            thread_name(title),
        )

        async def start(client: discord.Client) -> int | str:
            try:
                thread = await client.http.start_thread_with_message(
                    channel_id, mid, name=name, auto_archive_duration=THREAD_ARCHIVE_MIN
                )
            except discord.HTTPException as exc:
                if exc.code == THREAD_EXISTS:  # asked again (after a timeout): the thread's id is the message's
                    return mid
                raise
            return int(thread["id"])  # None or not digits: a TypeError / ValueError, an unreadable answer

        thread_id = conn.snowflake_id(await conn.call("startThreadFromMessage", target, channel_id, start), target)
        self._threads[thread_id] = None
        while len(self._threads) > _MAX_KNOWN_THREADS:
            self._threads.popitem(last=False)
        return Target(chat_id=thread_id)
