"""TeamsAdapter: one bot's :class:`core.ports.ChannelAdapter`, :class:`core.ports.Threads` and
:class:`core.ports.StopControls`, on the Teams SDK for Python (``microsoft-teams-api``).

The adapter is composed: it holds its connection (:class:`adapters.teams.connection.TeamsConnection`: the SDK's
``ConversationActivityClient`` at the service URL, one attempt per call, errors translated) and its renderings
(:func:`adapters.teams.render.render` in a :class:`~adapters.rendering.RenderCache`).

Calls (Bot Framework Connector, https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-api-reference):

- a message is ``POST /v3/conversations/{id}/activities`` (Send to Conversation); in a channel's thread it carries
  ``replyToId``, the thread's root (Reply to Activity, the reply chain of a channel post,
  https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/conversations/send-proactive-messages);
- a preview grows by ``PUT /v3/conversations/{id}/activities/{activityId}`` (Update Activity: the bot's own message,
  https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/update-and-delete-bot-messages);
- a message is deleted by ``DELETE /v3/conversations/{id}/activities/{activityId}`` (same page);
- typing is a ``typing`` activity (https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-send-and-receive-messages).

An uncertain send (a timeout, a reset after sending, a 5xx, a kill -9 between the intent and the ack) cannot be settled
through the Connector: it has no idempotency key for a new activity and no call that lists a conversation's activities
to a bot (its operations are send, reply, update, delete, members and history upload, reference above). Microsoft
Graph can read them, with a permission the operator grants (``ChatMessage.Read.Chat`` by resource-specific consent or
``Chat.Read.All`` for chats; ``ChannelMessage.Read.Group`` or ``ChannelMessage.Read.All`` for channels,
https://learn.microsoft.com/en-us/microsoftteams/platform/graph-api/rsc/resource-specific-consent): with
``settle_with_graph`` (:meth:`TeamsAdapter.use_graph`), :meth:`TeamsAdapter.settle_send` reads the conversation back
(:mod:`adapters.teams.graph`: ``found``, ``not_sent`` or ``unknown``; a personal chat's Graph id is found through the
Connector's member list, :meth:`TeamsAdapter.member_ids`). Without it, or where Graph cannot be read (no permission, no
member with the app installed), it answers ``unknown``: the core reports the part uncertain ("a duplicate is
possible"), as for Telegram with a shared bot token.

Stop and approval buttons are ``Action.Submit`` actions of an Adaptive Card on the message (:meth:`set_stop`): a
press reaches the bot as a message activity whose ``value`` holds the action's data
(https://learn.microsoft.com/en-us/microsoftteams/platform/task-modules-and-cards/cards/cards-actions#adaptive-cards-actions).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from microsoft_teams.api.activities.message.message import MessageActivityInput
from microsoft_teams.api.activities.typing import TypingActivityInput
from microsoft_teams.api.clients.conversation.activity import ConversationActivityClient

from streamrelay.adapters.adapter_parts import ConnectionTimeout, close_connection, measure_rendered, shows
from streamrelay.adapters.invisible import strip_invisible
from streamrelay.adapters.rendering import RenderCache
from streamrelay.adapters.teams.connection import TeamsConnection
from streamrelay.adapters.teams.errors import (
    PLATFORM,
    STREAM_CANCELLED,
    STREAM_COMPLETED,
    STREAM_TIMED_OUT,
    StreamRefused,
)
from streamrelay.adapters.teams.graph import GraphReader, GraphSettings, Refused, sent_form, shown_form
from streamrelay.adapters.teams.render import CARD_TYPE, CARD_VERSION, Rendered, render
from streamrelay.core.delivery.calls import CallObserver, perform_call
from streamrelay.core.errors import (
    ForbiddenError,
    MessageFrozenError,
    NativeUnavailableError,
    PermanentDeliveryError,
    TargetNotFoundError,
    UnreadableAnswerError,
)
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

SEND = "sendToConversation"
REPLY = "replyToActivity"
UPDATE = "updateActivity"
DELETE = "deleteActivity"
MEMBERS = "getConversationMembers"
CONVERSATION_RE = re.compile(r"(?:a|19|8|29):[^\s/?#]+")
"""A Teams conversation id: ``a:…`` (a personal chat), ``19:…@thread.v2`` (a group chat), ``19:…@thread.tacv2`` or
``@thread.skype`` (a channel); matched whole."""
ACTIVITY_RE = re.compile(r"[^\s/?#]{1,200}")
"""An activity id (digits in a channel, ``1:…`` or ``f:…`` in chats): no whitespace, ``/``, ``?`` or ``#``."""
CHANNEL_SUFFIXES = ("@thread.tacv2", "@thread.skype")
"""How a channel's conversation id ends: only channel posts have reply chains (threads)."""
NO_THREADS = "only a channel's posts have threads in Teams (reply chains): this is a chat"
NESTED_THREAD = "already in a thread: Teams reply chains do not nest"
_PLACEHOLDER = "DO_NOT_USE_PLACEHOLDER_ID"
"""What the SDK returns as an id when the answer had none."""
STREAMING_UX = "https://learn.microsoft.com/en-us/microsoftteams/platform/bots/streaming-ux"
STREAM_LIMIT_S = 105.0
"""A stream must be finished within two minutes (STREAMING_UX, error codes): past this many seconds since its start
the adapter finishes it with what it shows and the rest goes on in a new message (15 s of margin for the last
calls, a 429's wait and a clock that is not Teams')."""
INFORMATIVE_CHARS = 1_000
"""An informative update (a stream's status line) is at most 1,000 characters (STREAMING_UX)."""
ADOPT_S = STREAM_LIMIT_S / 2
"""A stream opened by status lines is the answer's only while it is younger than this (seconds): an older one is
taken down and the answer opens its own, so it keeps at least this long before the stream's time limit."""
NOT_PERSONAL = "Teams streams bot messages only in one-on-one chats (a:... conversations)"
_MAX_STREAMS = 256
"""Open streams remembered per adapter (one per personal chat at a time in Teams)."""
_MAX_SENT_AT = 4096
"""Creates whose start time is remembered (by delivery id) for a settle's time bound."""


@dataclass
class _Stream:
    """A native stream this adapter opened: its ``sequence`` so far, when it started (monotonic seconds) and the text
    it streamed last."""

    sequence: int
    started: float
    streamed: str
    status_only: bool = False
    """Opened by a status line (an informative update) and not yet the answer's: :meth:`TeamsAdapter.stream_start`
    goes on in it, :meth:`TeamsAdapter.stream_status_end` takes it down."""
    final: dict[str, Any] | None = None
    """The final message last sent to end it, whose answer did not come (a timeout, a reset): None before."""


def is_channel(conversation: str) -> bool:
    """The conversation is a team's channel (its base id, before any ``;messageid=``)."""
    return conversation.split(";", 1)[0].endswith(CHANNEL_SUFFIXES)


class TeamsAdapter:
    """Sends, updates and deletes one bot's messages in Teams conversations through the Teams SDK (or a mock).

    Args:
        token: ``APP_ID:CLIENT_SECRET[:TENANT_ID]``.
        base_url: the service URL (None: Teams' public one).
        send_timeout_s: seconds one call may take.
        max_units: the most bytes one message's JSON may take in UTF-16 (:data:`adapters.teams.platform.RENDERED_MAX`).
        markup: changes nothing on Teams: a mention notifies only through a ``mention`` entity naming the person's
            id (https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/conversations/channel-and-group-conversations#add-mentions-to-your-messages),
            which agent text never carries, so the adapter never sends one and ``<at>…</at>`` notifies no one.

    Raises:
        ConfigError: malformed credentials.
    """

    platform: str = PLATFORM
    unit: LengthUnit = LengthUnit.UTF16
    """The chunker cuts the source in UTF-16 units; :meth:`measure` gives the bytes of the message's JSON in UTF-16,
    and the core re-cuts a part whose rendering is too big."""
    observer: CallObserver | None = None
    stream_refresh_s: float | None = None
    """A stream needs no refresh; it ends by its final message or after two minutes."""
    finish_creates = False
    """The final message completes the streamed activity in place (same id)."""
    finish_repeats = True
    """A final whose answer was lost is sent again: Teams refuses a second one on a completed stream
    (:data:`adapters.teams.errors.STREAM_COMPLETED`), and :meth:`stream_finish` takes that as done."""
    settles_start = False
    """A stream start whose answer was lost cannot be found out (no history): its first words are reported."""
    status_chars = INFORMATIVE_CHARS
    """A stream's status line (informative update) is at most 1,000 characters (:class:`core.ports.StreamStatus`)."""

    perform = perform_call
    """The core's one entrance (:meth:`core.ports.ChannelAdapter.perform`)."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str | None = None,
        send_timeout_s: float = 10.0,
        max_units: int = 81_920,
        markup: MarkupPermissions = NO_MARKUP,
    ) -> None:
        self.markup = markup
        self.max_units = max_units
        self._conn = TeamsConnection(token, base_url=base_url, send_timeout_s=send_timeout_s)
        self.render: RenderCache[Rendered] = RenderCache(render)
        """``render(text, fmt) -> Rendered``: the activity's fields and their size."""
        self._controls: dict[tuple[str, str], StopControl] = {}
        self._streams: OrderedDict[tuple[str, str], _Stream] = OrderedDict()
        self._finished: set[tuple[str, str]] = set()
        """Streams finished early (their two minutes): their message keeps what it shows (:meth:`edit_text`)."""
        self.clock = time.monotonic
        self._graph: GraphReader | None = None
        self._sent_at: OrderedDict[str, float] = OrderedDict()
        """When each create of this process began (Unix seconds), by delivery id: a settle's time bound."""

    def use_graph(self, tenant: str, team: str | None = None, window_s: float = 30.0) -> None:
        """Settle uncertain sends by reading the conversation through Microsoft Graph (:mod:`adapters.teams.graph`):
        ``tenant`` grants the app-only token, ``team`` (a GUID) names the team of channel conversations, ``window_s``
        is how long after a create a settle that finds nothing keeps reading (the channel's ``settle_window_ms``). On
        a loopback service URL (the mock) Graph and the login endpoint are that URL too.

        Raises:
            ConfigError: a tenant or team id that is none.
        """
        conn = self._conn
        local = conn.login_url == conn.service_url
        self._graph = GraphReader(
            app_id=conn.app_id,
            secret=conn.client_secret,
            settings=GraphSettings(tenant, team, window_s),
            session=conn.session,
            graph_url=conn.service_url + "/v1.0" if local else "https://graph.microsoft.com/v1.0",
            login_url=conn.login_url,
            timeout_s=conn.send_timeout_s,
            members=self.member_ids,
        )

    async def member_ids(self, conversation: str) -> list[str]:
        """The Microsoft Entra object ids (``aadObjectId``) of conversation ``conversation``'s members, as the
        Connector lists them (Get Conversation Members through the SDK's member client,
        https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-api-reference#get-conversation-members);
        members without one (the bot) are left out.

        Raises:
            core.errors.DeliveryError: a subclass, per :mod:`adapters.teams.errors` (403: the bot is not in it).
        """

        async def members(_: ConversationActivityClient) -> Any:
            return await self._conn.members.get(conversation)

        accounts = await self._conn.call(MEMBERS, Target(chat_id=conversation), members, creates=False)
        found = (getattr(account, "aad_object_id", None) for account in accounts or [])
        return [str(aad) for aad in found if aad]

    @property
    def settles_with_graph(self) -> bool:
        """Uncertain sends are settled through Microsoft Graph (:meth:`use_graph`)."""
        return self._graph is not None

    __repr__ = __str__ = shows(service_url="_conn.service_url")
    send_timeout_s = ConnectionTimeout()
    close = close_connection
    measure = measure_rendered
    """``measure(text, fmt)``: bytes of the JSON of the message showing ``text``, in UTF-16 (what Teams' size limit
    counts)."""

    def check_target(self, target: Target) -> str | None:
        """``chat_id`` is a conversation id (``a:…``, ``19:…``); ``thread_id`` and ``reply_to`` are activity ids."""
        if not CONVERSATION_RE.fullmatch(str(target.chat_id)):
            return f"chat_id {target.chat_id!r} must be a Teams conversation id (a:... or 19:...@thread...)"
        for name in ("thread_id", "reply_to"):
            value = getattr(target, name)
            if value is not None and not ACTIVITY_RE.fullmatch(str(value)):
                return f"{name} {value!r} must be a Teams activity id"
        return None

    def is_group(self, target: Target) -> bool:
        """A group chat or a channel (``19:…``); a personal chat (``a:…``) is not."""
        return not str(target.chat_id).startswith("a:")

    # -------------------------------------------------------------- messages

    async def _create(self, method: str, target: Target, fields: dict[str, Any], delivery_id: str | None = None) -> str:
        conversation = str(target.chat_id)
        if delivery_id is not None:
            self._sent_at[delivery_id] = time.time()
            while len(self._sent_at) > _MAX_SENT_AT:
                self._sent_at.popitem(last=False)
        activity = MessageActivityInput.model_validate(fields)

        async def send(client: ConversationActivityClient) -> Any:
            if target.thread_id is not None:
                return await client.reply(conversation, str(target.thread_id), activity)
            return await client.create(conversation, activity)

        sent = await self._conn.call(method, target, send, creates=True)
        activity_id = getattr(sent, "id", None)
        if not activity_id or activity_id == _PLACEHOLDER:
            raise UnreadableAnswerError(
                f"teams {method}: no activity id in the answer", platform=PLATFORM, target=conversation
            )
        return str(activity_id)

    def _method(self, target: Target) -> str:
        return REPLY if target.thread_id is not None else SEND

    async def send_text(self, target: Target, text: str, fmt: TextFormat, *, delivery_id: str | None = None) -> str:
        """Send a message activity showing ``text`` (:mod:`adapters.teams.render`); return its activity id.
        ``delivery_id`` cannot be carried (no idempotency key: module docstring); the time the create began is kept by
        it for a Graph settle.

        Raises:
            core.errors.UncertainDeliveryError: a timeout, a connection lost after sending, or a 5xx.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.teams.errors` (413: ``too_long``).
        """
        return await self._create(self._method(target), target, self.render(text, fmt).activity(), delivery_id)

    async def send_media(
        self, target: Target, media: MediaItem, fmt: TextFormat, *, delivery_id: str | None = None
    ) -> str:
        """Send ``media`` as a message with one hero card: its caption as the title, an image shown from its URL (an
        image item), and an "Open" button opening the URL (every kind: files by URL need the person's OneDrive
        consent otherwise, https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/bots-filesv4). Hero
        cards: https://learn.microsoft.com/en-us/microsoftteams/platform/task-modules-and-cards/cards/cards-reference#hero-card.

        Raises:
            core.errors.DeliveryError: a subclass, like :meth:`send_text`.
        """
        return await self._create(self._method(target), target, media_fields(media), delivery_id)

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        """With Graph (:meth:`use_graph`): read the conversation back for the message the create sent
        (:meth:`adapters.teams.graph.GraphReader.settle`: ``found``, ``not_sent``, or ``unknown`` where Graph refuses
        or cannot name the conversation). Without it: ``unknown`` without a call (the Connector neither dedupes a new
        activity nor lets a bot read a conversation, module docstring); the core reports the part uncertain.

        Raises:
            core.errors.DeliveryError: Graph failing (429 with its ``Retry-After``, 5xx, a timeout): asked again.
        """
        if self._graph is None:
            return Settlement(SettleOutcome.UNKNOWN)
        if pending.media is not None:
            fields = media_fields(pending.media)
        else:
            fields = self.render(pending.text, pending.fmt).activity()
        thread = str(target.thread_id) if target.thread_id is not None else None
        sent_at = self._sent_at.get(pending.delivery_id)
        return await self._graph.settle(str(target.chat_id), thread, pending, fields, sent_at)

    def unreadable(self) -> str | None:
        """Why messages cannot be read back (:class:`core.ports.ReadBack`): without Graph (``settle_with_graph``) the
        Bot Framework Connector has no call that reads an activity; None with Graph."""
        if self._graph is None:
            return (
                "the Bot Framework Connector has no call that reads a message back "
                "(https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-api-reference)"
                "; configure settle_with_graph and graph_tenant to read it through Microsoft Graph"
            )
        return None

    async def read_back(self, target: Target, message_id: str, shown: str, fmt: TextFormat) -> Shown:
        """Whether activity ``message_id`` still shows ``shown`` as this adapter renders it, read through Microsoft
        Graph (Get chatMessage, https://learn.microsoft.com/en-us/graph/api/chatmessage-get; needs
        ``ChatMessage.Read.Chat`` / ``ChannelMessage.Read.Group`` by resource-specific consent, or ``Chat.Read.All`` /
        ``ChannelMessage.Read.All``; :meth:`adapters.teams.graph.GraphReader.read_message`). 404, or
        ``deletedDateTime`` set: ``gone``; another normalized text (:func:`adapters.teams.graph.shown_form` against
        :func:`~adapters.teams.graph.sent_form`): ``changed``. A personal chat ``a:…`` cannot be named in Graph.

        Raises:
            core.errors.ForbiddenError: no Graph configured, Graph refuses (no permission) or cannot name the chat.
            core.errors.DeliveryError: another subclass: 429, 5xx, a timeout.
        """
        conversation = str(target.chat_id)
        if self._graph is None:
            raise ForbiddenError(self.unreadable() or "", platform=PLATFORM, target=conversation)
        thread = str(target.thread_id) if target.thread_id is not None else None
        try:
            message = await self._graph.read_message(conversation, thread, message_id)
        except Refused as refusal:
            raise ForbiddenError(str(refusal), platform=PLATFORM, target=conversation) from None
        if message is None or message.get("deletedDateTime"):
            return Shown.GONE
        same = shown_form(message) == sent_form(self.render(shown, fmt).activity())
        return Shown.AS_DELIVERED if same else Shown.CHANGED

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> bool:
        """Make activity ``message_id`` show ``text`` (Update Activity; a Stop or approval card on it is kept).

        Returns:
            True: Teams has no "not modified".

        Raises:
            core.errors.DeliveryError: a subclass, per :mod:`adapters.teams.errors` (404: the activity is gone).
        """
        key = (str(target.chat_id), message_id)
        if key in self._finished:
            raise MessageFrozenError(
                f"teams: stream {message_id} was finished at its time limit ({STREAMING_UX}): its message keeps "
                "what it shows, the rest goes on in a new one",
                platform=PLATFORM,
                target=str(target.chat_id),
            )
        if key in self._streams:
            # A stream whose append's answer was lost goes on as a message, rewritten whole (the core's rule), but
            # Teams refuses Update Activity on a stream still open: its final completes it with the text, settled
            # as any final (chaos-52-00024: the edit was refused, the part given up, the answer lost).
            try:
                await self.stream_finish(target, message_id, "", text, fmt)
            except NativeUnavailableError as exc:  # it ended at its time: it keeps what it shows
                raise MessageFrozenError(str(exc), platform=PLATFORM, target=key[0]) from None
            return True
        control = self._controls.get(key)
        await self._update(target, message_id, self._fields(self.render(text, fmt), control))
        return True

    async def _update(self, target: Target, message_id: str, fields: dict[str, Any]) -> None:
        conversation = str(target.chat_id)
        activity = MessageActivityInput.model_validate(fields)

        async def update(client: ConversationActivityClient) -> Any:
            return await client.update(conversation, message_id, activity)

        await self._conn.call(UPDATE, target, update, creates=False)

    async def delete_message(self, target: Target, message_id: str) -> None:
        """Delete activity ``message_id`` (Delete Activity).

        Raises:
            core.errors.TargetNotFoundError: 404.
            core.errors.DeliveryError: another subclass (403: not the bot's activity).
        """
        conversation = str(target.chat_id)

        async def delete(client: ConversationActivityClient) -> Any:
            return await client.delete(conversation, message_id)

        await self._conn.call(DELETE, target, delete, creates=False)
        self._controls.pop((conversation, message_id), None)

    async def send_typing(self, target: Target) -> None:
        """Send a ``typing`` activity (Teams shows the indicator a few seconds, until the next message)."""
        conversation = str(target.chat_id)
        activity = TypingActivityInput.model_validate({"type": "typing"})

        async def typing(client: ConversationActivityClient) -> Any:
            return await client.create(conversation, activity)

        await self._conn.call(SEND, target, typing, creates=False)

    async def clear_typing(self, target: Target) -> None:
        """Nothing: the indicator ends by itself, or with the bot's next message."""

    # -------------------------------------------------------------- NativeStreaming

    def native_refusal(self, target: Target) -> str | None:
        """Teams streams only in one-on-one chats, outside reply chains (STREAMING_UX)."""
        if not str(target.chat_id).startswith("a:") or target.thread_id is not None:
            return NOT_PERSONAL
        return None

    async def _stream_call(self, target: Target, fields: dict[str, Any], *, creates: bool) -> Any:
        conversation = str(target.chat_id)
        model = MessageActivityInput if fields["type"] == "message" else TypingActivityInput
        activity = model.model_validate(fields)

        async def send(client: ConversationActivityClient) -> Any:
            return await client.create(conversation, activity)

        return await self._conn.call(SEND, target, send, creates=creates)

    @staticmethod
    def _stream_text(text: str) -> str:
        """What a streaming chunk carries: the agent's Markdown as written (Teams renders it; headings and tables
        come right with the final message). Kept as written so each chunk contains the one before."""
        return strip_invisible(text)

    async def stream_start(self, target: Target, text: str, fmt: TextFormat) -> str:
        """Open a stream showing ``text``: a ``typing`` activity with a ``streaminfo`` entity (``streamType``
        ``streaming``, ``streamSequence`` 1) and the same in ``channelData``; Teams answers the stream's id, which is
        the handle and the message's id (STREAMING_UX).

        Raises:
            core.errors.NativeUnavailableError: not a personal chat, or Teams refused the stream (403
                ``ContentStreamNotAllowed``: streaming not allowed, another stream open): goes on as ``preview``.
            core.errors.DeliveryError: another subclass, like :meth:`send_text` (a lost answer: uncertain).
        """
        conversation = str(target.chat_id)
        reason = self.native_refusal(target)
        if reason is not None:
            raise NativeUnavailableError(f"teams: {reason}", platform=PLATFORM, target=conversation)
        body = self._stream_text(text)
        opened = await self._status_stream(target)
        if opened is not None:  # status lines opened the stream: the answer goes on in it (STREAMING_UX)
            return await self._adopt(target, opened, body)
        return await self._open_stream_activity(target, "streaming", body)

    def _latest_stream(self, conversation: str) -> tuple[str, _Stream] | None:
        """The newest stream open here in ``conversation`` (Teams has one at a time in a chat), or None."""
        for (chat, handle), stream in reversed(self._streams.items()):
            if chat == conversation:
                return handle, stream
        return None

    async def _status_stream(self, target: Target) -> tuple[str, _Stream] | None:
        """The stream of status lines alone open in ``target``'s chat, young enough to be the answer's; an older one
        is taken down first (:data:`ADOPT_S`)."""
        latest = self._latest_stream(str(target.chat_id))
        if latest is None or not latest[1].status_only:
            return None
        if self.clock() - latest[1].started < ADOPT_S:
            return latest
        await self._take_down(target, latest[0])
        return None

    async def _take_down(self, target: Target, handle: str) -> None:
        """Delete the stream of status lines ``handle`` (Delete Activity); one already gone is left so."""
        self._streams.pop((str(target.chat_id), handle), None)
        with contextlib.suppress(TargetNotFoundError):
            await self.delete_message(target, handle)

    async def _adopt(self, target: Target, opened: tuple[str, _Stream], body: str) -> str:
        """The answer's first chunk ``body`` in the stream status lines opened (the next ``streamSequence``): the
        stream is the answer's from now on; its id is the handle. A refusal is native streaming refused (the stream
        ended: its time, the person's Stop), like a fresh start's."""
        handle, stream = opened
        conversation = str(target.chat_id)
        stream.sequence += 1  # taken before the call: an answer lost on the way never makes a sequence repeat
        info = {"streamId": handle, "streamType": "streaming", "streamSequence": stream.sequence}
        fields = {"type": "typing", "text": body, "entities": [{"type": "streaminfo", **info}], "channelData": info}
        try:
            await self._stream_call(target, fields, creates=True)
        except StreamRefused as exc:
            self._streams.pop((conversation, handle), None)
            raise NativeUnavailableError(str(exc), platform=PLATFORM, target=conversation) from None
        stream.streamed, stream.status_only = body, False
        return handle

    # -------------------------------------------------------------- StreamStatus

    async def stream_status(self, target: Target, text: str) -> None:
        """Show ``text`` (at most :data:`INFORMATIVE_CHARS`, the core cuts it) as the stream's status line: an
        informative update, a ``typing`` activity with a ``streaminfo`` entity of ``streamType`` ``informative`` and
        the next ``streamSequence``, in the chat's open stream; with none open, it opens one (``streamSequence`` 1,
        no ``streamId``), which the answer's :meth:`stream_start` goes on in (STREAMING_UX). Paced by the channel's
        ``stream`` budget like the stream's chunks. Cosmetic: the core drops it unless done.

        Raises:
            core.errors.NativeUnavailableError: not a personal chat, the answer's stream is past its time, or Teams
                refused it (the stream ended): the core drops the line (the answer's own calls find out the rest).
            core.errors.DeliveryError: another subclass (429: the stream's pace).
        """
        conversation = str(target.chat_id)
        reason = self.native_refusal(target)
        if reason is not None:
            raise NativeUnavailableError(f"teams: {reason}", platform=PLATFORM, target=conversation)
        body = strip_invisible(text)[:INFORMATIVE_CHARS]
        latest = self._latest_stream(conversation)
        if latest is not None and self.clock() - latest[1].started >= STREAM_LIMIT_S:
            if not latest[1].status_only:
                raise NativeUnavailableError(
                    f"teams: stream {latest[0]} is near its two minutes ({STREAMING_UX}): no status line on it",
                    platform=PLATFORM,
                    target=conversation,
                )
            await self._take_down(target, latest[0])
            latest = None
        if latest is None:
            await self._open_status_stream(target, body)
            return
        handle, stream = latest
        stream.sequence += 1  # taken before the call: an answer lost on the way never makes a sequence repeat
        info = {"streamId": handle, "streamType": "informative", "streamSequence": stream.sequence}
        fields = {"type": "typing", "text": body, "entities": [{"type": "streaminfo", **info}], "channelData": info}
        try:
            await self._stream_call(target, fields, creates=False)
        except StreamRefused as exc:
            raise self._stream_ended(target, handle, exc) from None

    async def _open_status_stream(self, target: Target, body: str) -> None:
        """Open the chat's stream with the informative update ``body`` (``streamSequence`` 1)."""
        await self._open_stream_activity(target, "informative", body)

    async def _open_stream_activity(self, target: Target, stream_type: str, body: str) -> str:
        """The first activity of a chat's stream (``streamSequence`` 1): ``streaming`` with the answer's first text,
        or ``informative`` with a status line (then the stream has shown no answer text yet); its stream id,
        remembered (the newest :data:`_MAX_STREAMS`).

        Raises:
            core.errors.NativeUnavailableError: Teams refused the stream here.
            core.errors.UnreadableAnswerError: the answer holds no stream id.
        """
        conversation = str(target.chat_id)
        info = {"streamType": stream_type, "streamSequence": 1}
        fields = {"type": "typing", "text": body, "entities": [{"type": "streaminfo", **info}], "channelData": info}
        try:
            sent = await self._stream_call(target, fields, creates=True)
        except StreamRefused as exc:
            raise NativeUnavailableError(str(exc), platform=PLATFORM, target=conversation) from None
        stream_id = getattr(sent, "id", None)
        if not stream_id or stream_id == _PLACEHOLDER:
            raise UnreadableAnswerError(
                f"teams stream start ({stream_type}): no stream id", platform=PLATFORM, target=conversation
            )
        status_only = stream_type == "informative"
        self._streams[(conversation, str(stream_id))] = _Stream(
            1, self.clock(), "" if status_only else body, status_only=status_only
        )
        while len(self._streams) > _MAX_STREAMS:
            self._streams.popitem(last=False)
        return str(stream_id)

    async def stream_status_end(self, target: Target) -> None:
        """At the run's end: a stream that showed status lines alone (the answer went as a message, or there was
        none) is deleted, so its progress line does not stay and the chat's next stream may open (Teams has one
        open stream in a chat at a time, STREAMING_UX). Nothing when the answer streamed in it.

        Raises:
            core.errors.DeliveryError: the delete failed (the stream then ends by its two minutes).
        """
        latest = self._latest_stream(str(target.chat_id))
        if latest is not None and latest[1].status_only:
            await self._take_down(target, latest[0])

    async def stream_update(self, target: Target, handle: str, shown: str, text: str, fmt: TextFormat) -> None:
        """Make the stream show ``text``: a ``typing`` activity naming the stream with the next ``streamSequence``,
        carrying the whole text so far (each chunk must contain the one before, STREAMING_UX). A text that does
        not extend what was streamed is left to the final message (no call). Paced by the channel's ``stream``
        budget (one request a second per stream).

        Raises:
            core.errors.NativeUnavailableError: the stream cannot go on: its two minutes are (nearly) up (it is
                finished first, showing ``shown``; the rest goes on in a new message: :meth:`edit_text` refuses its
                message as frozen), Teams ended it for its time, or it is not this adapter's.
            core.errors.DeliveryError: another subclass (429: the stream's pace).
        """
        stream = await self._open_stream(target, handle, shown)
        body = self._stream_text(text)
        if body == stream.streamed or not body.startswith(stream.streamed):
            return
        info = {"streamId": handle, "streamType": "streaming", "streamSequence": stream.sequence + 1}
        fields = {"type": "typing", "text": body, "entities": [{"type": "streaminfo", **info}], "channelData": info}
        try:
            await self._stream_call(target, fields, creates=False)
        except StreamRefused as exc:
            raise self._stream_ended(target, handle, exc) from None
        stream.sequence, stream.streamed = stream.sequence + 1, body

    async def stream_finish(self, target: Target, handle: str, shown: str, text: str, fmt: TextFormat) -> str:
        """End the stream with ``text``: the final ``message`` activity naming the stream (``streamType`` ``final``),
        rendered as any message (:mod:`adapters.teams.render`: an Adaptive Card when a table needs one); the
        streamed activity then shows it, and its id is returned.

        A final whose answer was lost (``UncertainDeliveryError``: a timeout, a reset) is sent again by the core
        (:attr:`finish_repeats`): when the first one had landed, Teams refuses this one as a completed stream's
        (:data:`adapters.teams.errors.STREAM_COMPLETED`), and the stream shows that final: done, its message
        updated in place only if the text changed since (Update Activity on a completed stream, as Teams' own SDK
        finishes one past its time: https://learn.microsoft.com/en-us/dotnet/api/microsoft.teams.apps.teamsstreamingwriter.finalizeresponseasync).
        When it had not, this one completes the stream (chaos-29-00231: such a final was reported uncertain and the
        chat kept the streamed start only). Near the stream's two minutes Teams may refuse the repeat for its time
        (:data:`adapters.teams.errors.STREAM_TIMED_OUT`) without saying whether the first final landed: Update
        Activity settles it (a completed stream takes it and shows this final; a stream that only timed out is
        refused, so it shows what was streamed and the rest goes on in a new message), never a guess that could
        show the answer twice.

        Raises:
            core.errors.NativeUnavailableError: the stream can no longer be finished (its two minutes passed): its
                message keeps what it streamed, the rest goes on in a new message.
            core.errors.DeliveryError: another subclass, like :meth:`send_text`.
        """
        stream = await self._open_stream(target, handle, shown)
        fields, sent_before = self.render(text, fmt).activity(), stream.final
        stream.final = fields
        try:
            await self._final(target, handle, fields)
        except StreamRefused as exc:
            timed_out = exc.reason == STREAM_TIMED_OUT
            if sent_before is None or not (timed_out or STREAM_COMPLETED in (exc.reason or "")):
                raise self._stream_ended(target, handle, exc) from None
            if timed_out:  # whether the final sent before landed, Teams did not say: kept open to settle it again
                try:
                    await self._update(target, handle, fields)
                except StreamRefused:  # still a stream (the first final never landed): it ended at its time
                    raise self._stream_ended(target, handle, exc) from None
                self._streams.pop((str(target.chat_id), handle), None)
                return handle
            self._streams.pop((str(target.chat_id), handle), None)  # the final sent before had landed
            if sent_before != fields:
                await self._update(target, handle, fields)
            return handle
        self._streams.pop((str(target.chat_id), handle), None)
        return handle

    async def _final(self, target: Target, handle: str, fields: dict[str, Any]) -> None:
        """Send stream ``handle``'s final message with ``fields``.

        Raises:
            StreamRefused: Teams refused it (its reason says why: :mod:`adapters.teams.errors`).
            core.errors.DeliveryError: another subclass.
        """
        info = {"streamId": handle, "streamType": "final"}
        final = {**fields, "entities": [{"type": "streaminfo", **info}], "channelData": info}
        await self._stream_call(target, final, creates=False)

    async def _open_stream(self, target: Target, handle: str, shown: str) -> _Stream:
        """The open stream ``handle``; past :data:`STREAM_LIMIT_S` it is finished now, showing ``shown``, and
        ``NativeUnavailableError`` says the rest goes on in a new message."""
        key = (str(target.chat_id), handle)
        stream = self._streams.get(key)
        if stream is None:  # a restart forgot its sequence: finished as it is, the rest in a new message
            await self._finish_early(target, handle, shown, "")
            raise NativeUnavailableError(
                f"teams: stream {handle} is not open here (a restart, or it ended): finished as it is; the rest goes"
                " on in a new message",
                platform=PLATFORM,
                target=key[0],
            )
        if self.clock() - stream.started >= STREAM_LIMIT_S:
            await self._finish_early(target, handle, shown, stream.streamed, stream.final)
            raise NativeUnavailableError(
                f"teams: stream {handle} finished at {STREAM_LIMIT_S:g} s of Teams' two minutes ({STREAMING_UX});"
                " the rest goes on in a new message",
                platform=PLATFORM,
                target=key[0],
            )
        return stream

    async def _finish_early(
        self, target: Target, handle: str, shown: str, streamed: str, final: dict[str, Any] | None = None
    ) -> None:
        """End stream ``handle`` with the final message showing ``shown`` (what the core knows it shows); its
        message then takes no more updates here (:meth:`edit_text`). A stream Teams already ended is left so, except
        one Teams refuses as already completed (:data:`adapters.teams.errors.STREAM_COMPLETED`): a final of ours
        landed before a restart (its answer lost), so the message shows that final, perhaps more than ``shown``,
        and stays open to Update Activity, which brings it to the part's text in place (frozen, the core would post
        the rest again in a new message: shown twice). Teams may refuse it for the stream's time instead
        (:data:`adapters.teams.errors.STREAM_TIMED_OUT`) without saying whether a final of ours landed: Update
        Activity with ``final`` (the fields of the final sent before, its answer lost) settles that: a completed
        stream takes it and stays open to Update Activity; a stream that only timed out refuses it and stays
        frozen."""
        key = (str(target.chat_id), handle)
        self._streams.pop(key, None)
        self._finished.add(key)
        body = self._stream_text(shown) or streamed
        if not body.strip():
            return
        try:
            await self._final(target, handle, {"type": "message", "text": body, "textFormat": "markdown"})
        except StreamRefused as exc:  # Teams had ended it: it shows what was streamed, or a final that landed
            if STREAM_COMPLETED in (exc.reason or ""):
                self._finished.discard(key)
            elif exc.reason == STREAM_TIMED_OUT and final is not None:  # did the final sent before land? not said
                try:
                    await self._update(target, handle, final)
                except StreamRefused:  # still a stream: it ended at its time, showing what was streamed
                    return
                self._finished.discard(key)  # a completed stream: the final sent before had landed

    def _stream_ended(self, target: Target, handle: str, exc: StreamRefused) -> NativeUnavailableError:
        """Teams refused a stream's activity: it ended (its time, the person's Stop, already completed); its message
        keeps what was streamed and the rest goes on in a new one."""
        key = (str(target.chat_id), handle)
        self._streams.pop(key, None)
        self._finished.add(key)
        why = (
            "the person stopped it"
            if exc.reason == STREAM_CANCELLED
            else ("its two minutes passed" if exc.reason == STREAM_TIMED_OUT else exc.reason or "refused")
        )
        return NativeUnavailableError(f"teams: stream {handle} ended ({why}): {exc}", platform=PLATFORM, target=key[0])

    async def stream_cancel(self, target: Target, handle: str) -> None:
        """Abandon the stream ``handle``: its activity is deleted (Delete Activity).

        Raises:
            core.errors.TargetNotFoundError: it is already gone.
            core.errors.DeliveryError: another subclass.
        """
        self._streams.pop((str(target.chat_id), handle), None)
        await self.delete_message(target, handle)

    # -------------------------------------------------------------- StopControls

    def _fields(self, rendered: Rendered, control: StopControl | None) -> dict[str, Any]:
        """The activity of ``rendered``, with ``control``'s buttons as ``Action.Submit`` actions of a card."""
        if control is None:
            return rendered.activity()
        card = dict(rendered.card) if rendered.card is not None else None
        if card is None:
            card = {
                "type": "AdaptiveCard",
                "version": CARD_VERSION,
                "body": [{"type": "TextBlock", "text": rendered.text, "wrap": True}] if rendered.text else [],
                "msteams": {"width": "Full"},
            }
        card["actions"] = [
            {"type": "Action.Submit", "title": label, "data": {"streamrelay": control_id}}
            for control_id, label in control.buttons()
        ]
        return {
            "type": "message",
            "text": "",
            "textFormat": "markdown",
            "attachments": [{"contentType": CARD_TYPE, "content": card}],
        }

    async def set_stop(
        self, target: Target, message_id: str, text: str, fmt: TextFormat, control: StopControl | None
    ) -> None:
        """Put ``control``'s buttons on message ``message_id`` as the ``Action.Submit`` actions of an Adaptive Card
        showing ``text`` (a press reaches the bot as a message activity with ``value.streamrelay`` the control id,
        module docstring), or take them off (None: the message is ``text`` again). One Update Activity.

        Raises:
            core.errors.DeliveryError: a subclass, like :meth:`edit_text`.
        """
        key = (str(target.chat_id), message_id)
        await self._update(target, message_id, self._fields(self.render(text, fmt), control))
        if control is None:
            self._controls.pop(key, None)
        else:
            self._controls[key] = control

    # -------------------------------------------------------------- Threads

    def thread_refusal(self, target: Target) -> str | None:
        """Why no thread can be opened: a chat (only channel posts have reply chains) or a target in a thread."""
        if not is_channel(str(target.chat_id)):
            return NO_THREADS
        return NESTED_THREAD if target.thread_id is not None else None

    async def open_thread(self, target: Target, anchor_message_id: str, title: str) -> Target:
        """The reply chain of channel post ``anchor_message_id``: no call is made (a reply names its root with
        ``replyToId``); ``title`` is not shown (reply chains have no name).

        Raises:
            core.errors.PermanentDeliveryError: a chat, or a target in a thread already.
        """
        reason = self.thread_refusal(target)
        if reason is not None:
            raise PermanentDeliveryError(f"teams: {reason}", platform=PLATFORM, target=str(target.chat_id))
        return Target(chat_id=target.chat_id, thread_id=anchor_message_id)


HERO_TYPE = "application/vnd.microsoft.card.hero"


def media_fields(media: MediaItem) -> dict[str, Any]:
    """The message activity of a media item: an empty text and a hero card (:meth:`TeamsAdapter.send_media`)."""
    card: dict[str, Any] = {
        "title": media.caption or "",
        "buttons": [{"type": "openUrl", "title": "Open", "value": media.url}],
    }
    if str(media.kind) == "image":
        card["images"] = [{"url": media.url, "alt": media.caption or "image"}]
    return {
        "type": "message",
        "text": "",
        "textFormat": "plain",
        "attachments": [{"contentType": HERO_TYPE, "content": card}],
    }
