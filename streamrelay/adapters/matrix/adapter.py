"""MatrixAdapter: one bot's :class:`core.ports.ChannelAdapter` and :class:`core.ports.Threads`, on matrix-nio.

The adapter is composed: it holds its connection (:class:`adapters.matrix.connection.MatrixConnection`: one attempt
per call, errors translated) and its renderings (:func:`adapters.matrix.render.render` in a
:class:`~adapters.rendering.RenderCache`: a text measured then sent is rendered once).

Every message is an ``m.room.message`` event sent with ``PUT /rooms/{roomId}/send/m.room.message/{txnId}``
(https://spec.matrix.org/latest/client-server-api/#put_matrixclientv3roomsroomidsendeventtypetxnid). A create's
transaction id is its delivery id: the homeserver answers a repeated transaction id of the same device (access
token) with the event it stored the first time and stores nothing new
(https://spec.matrix.org/latest/client-server-api/#transaction-identifiers), so an uncertain create is settled by
sending it again as it was (:meth:`MatrixAdapter.settle_send`): exactly one message exists afterwards, whether the
first attempt landed or not. Synapse keeps a device's transactions, keyed by the request path, for at least 30 minutes
(``HttpTransactionCache``, https://github.com/element-hq/synapse/blob/develop/synapse/rest/client/transactions.py);
settle sooner than that.

A preview grows by edits (an ``m.replace`` relation with ``m.new_content``,
https://spec.matrix.org/latest/client-server-api/#event-replacements), a message is deleted by redaction
(https://spec.matrix.org/latest/client-server-api/#redactions), a sub-agent's thread is an ``m.thread`` relation to
its anchor event (https://spec.matrix.org/latest/client-server-api/#threading: no call opens it), typing is
``PUT /rooms/{roomId}/typing/{userId}`` (https://spec.matrix.org/latest/client-server-api/#typing-notifications).
A media item is uploaded to the content repository and sent with its ``mxc://`` URI (:mod:`adapters.matrix.media`);
buttons (an approval's Approve and Deny, Stop) are the bot's own reactions on the message
(:mod:`adapters.matrix.controls`).
"""

from __future__ import annotations

import functools
import io
import re
import uuid
from typing import Any

from nio import AsyncClient, ContentRepositoryConfigResponse, RoomRedactResponse, RoomSendResponse, UploadResponse
from nio.api import RelationshipType

from streamrelay.adapters.adapter_parts import ConnectionTimeout, close_connection, measure_rendered, shows
from streamrelay.adapters.matrix.connection import MatrixConnection
from streamrelay.adapters.matrix.controls import CONTROL_KEY, REACTION, seed_content, seed_txn
from streamrelay.adapters.matrix.errors import PLATFORM
from streamrelay.adapters.matrix.media import UploadCache, fetch, file_content, link_content
from streamrelay.adapters.matrix.render import Rendered, edit_content, render
from streamrelay.adapters.rendering import RenderCache
from streamrelay.core.delivery.calls import CallObserver, perform_call
from streamrelay.core.errors import (
    DeliveryError,
    PayloadRejectedError,
    PermanentDeliveryError,
    PlatformUnavailableError,
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

MESSAGE = "m.room.message"
ROOM_ID_RE = re.compile(r"![^:\s]+:[A-Za-z0-9.\-\[\]:]+")
"""``!opaque:server`` (https://spec.matrix.org/latest/appendices/#room-ids), the server name a host and an optional
port (https://spec.matrix.org/latest/appendices/#server-name: letters, digits, ``-``, ``.``, an IPv6 literal in
brackets). Matched whole (``fullmatch``: a ``$`` would let a trailing newline through)."""
EVENT_ID_RE = re.compile(r"\$\S+")
"""``$`` then the id (https://spec.matrix.org/latest/appendices/#event-ids), matched whole."""
TYPING_TIMEOUT_MS = 30_000
"""How long one typing notice shows (the spec's example value; the homeserver ends it then)."""
NESTED_THREAD = "already in a thread: Matrix threads do not nest"
MEDIA_TIMEOUT_S = 60.0
"""The least time a media item's fetch and its upload each get (seconds): files take longer than a message."""


class MatrixAdapter:
    """Sends, edits and redacts one bot's messages in Matrix rooms through matrix-nio (or a mock homeserver).

    Args:
        token: the bot's access token.
        base_url: the homeserver URL (None: https://matrix.org).
        send_timeout_s: seconds one call may take.
        max_units: the most bytes of JSON one message's edit content may take (the event limit is 65,536 bytes of
            the whole event, https://spec.matrix.org/latest/client-server-api/#size-limits: the platform's
            registration leaves room for the envelope).
        markup: whether agent text may mention people (:mod:`adapters.matrix.render`).

    Raises:
        ConfigError: an empty access token.
    """

    platform: str = PLATFORM
    unit: LengthUnit = LengthUnit.UTF16
    """The chunker cuts the source in UTF-16 units; :meth:`measure` gives the bytes of the event's JSON, and the
    core re-cuts a part whose rendering is too big (:class:`core.policy.Splitter`)."""
    observer: CallObserver | None = None

    perform = perform_call
    """The core's one entrance (:meth:`core.ports.ChannelAdapter.perform`): ``call`` in one attempt, its outcome as a
    value (done, not done, unknown); never raises a delivery error."""

    def __init__(
        self,
        token: str,
        *,
        base_url: str | None = None,
        send_timeout_s: float = 10.0,
        max_units: int = 63_488,
        markup: MarkupPermissions = NO_MARKUP,
    ) -> None:
        self.markup = markup
        self.max_units = max_units
        self._conn = MatrixConnection(token, base_url=base_url, send_timeout_s=send_timeout_s)
        self.render: RenderCache[Rendered] = RenderCache(functools.partial(_render, mentions=markup.mentions))
        """``render(text, fmt) -> Rendered``: the content and the byte size of its edit."""
        self._uploads = UploadCache()
        self._upload_limit: int | None = None
        self._asked_limit = False
        self.media_fetch_private = False
        """Whether a media URL may name a private address (the channel's ``media_fetch_private``, set by
        :meth:`allow_private_media`); off: only public ones are fetched (:mod:`adapters.matrix.media`, step 2)."""

    __repr__ = __str__ = shows(base_url="_conn.base_url")

    def allow_private_media(self, allowed: bool = True) -> None:
        """Let media URLs name private addresses (the channel's ``media_fetch_private``: a homeserver and files on a
        private network, or the mocks on 127.0.0.1)."""
        self.media_fetch_private = allowed

    send_timeout_s = ConnectionTimeout()
    close = close_connection
    measure = measure_rendered

    def check_target(self, target: Target) -> str | None:
        """``chat_id`` is a room id (``!opaque:server``); ``thread_id`` and ``reply_to`` are event ids (``$…``)."""
        if not ROOM_ID_RE.fullmatch(str(target.chat_id)):
            return f"chat_id {target.chat_id!r} must be a Matrix room id (!opaque:server)"
        for name in ("thread_id", "reply_to"):
            value = getattr(target, name)
            if value is not None and not EVENT_ID_RE.fullmatch(str(value)):
                return f"{name} {value!r} must be a Matrix event id ($...)"
        return None

    def is_group(self, target: Target) -> bool:
        """Always True: a room id does not say how many members it has, and Synapse's ``rc_message`` limit is per
        user anyway."""
        return True

    # -------------------------------------------------------------- messages

    def _content(self, target: Target, content: dict[str, Any]) -> dict[str, Any]:
        """``content`` placed in the target's thread (``m.thread``, with the in-reply-to fallback) or as a reply."""
        if target.thread_id is not None:
            reply = str(target.reply_to if target.reply_to is not None else target.thread_id)
            relation = {
                "rel_type": "m.thread",
                "event_id": str(target.thread_id),
                "is_falling_back": target.reply_to is None,
                "m.in_reply_to": {"event_id": reply},
            }
            return {**content, "m.relates_to": relation}
        if target.reply_to is not None:
            return {**content, "m.relates_to": {"m.in_reply_to": {"event_id": str(target.reply_to)}}}
        return content

    async def _send(self, method: str, target: Target, content: dict[str, Any], txn_id: str, *, creates: bool) -> str:
        room = str(target.chat_id)

        async def send(client: AsyncClient) -> Any:
            return await client.room_send(room, MESSAGE, content, tx_id=txn_id)

        answer = await self._conn.call(method, target, send, creates=creates)
        if not isinstance(answer, RoomSendResponse) or not answer.event_id:
            raise UnreadableAnswerError(f"matrix {method}: no event_id in the answer", platform=PLATFORM, target=room)
        return str(answer.event_id)

    async def send_text(self, target: Target, text: str, fmt: TextFormat, *, delivery_id: str | None = None) -> str:
        """Send an ``m.room.message`` (module docstring); return its event id. Its transaction id is
        ``delivery_id`` (a fresh UUID without one), so :meth:`settle_send` can repeat it.

        Raises:
            core.errors.UncertainDeliveryError: a timeout, a connection lost after sending, or a 5xx: the event may
                be stored (:meth:`settle_send`).
            core.errors.DeliveryError: another subclass, per :mod:`adapters.matrix.errors` (413 ``M_TOO_LARGE``:
                ``too_long``).
        """
        content = self._content(target, self.render(text, fmt).content)
        return await self._send("send", target, content, delivery_id or uuid.uuid4().hex, creates=True)

    async def settle_send(self, target: Target, pending: PendingSend) -> Settlement:
        """Settle an uncertain create: the same event again under the same transaction id. The homeserver answers the
        event it stored under that id, or stores it now: exactly one exists, ``found`` with its id
        (https://spec.matrix.org/latest/client-server-api/#transaction-identifiers).

        Raises:
            core.errors.DeliveryError: a subclass, as every call (429, 5xx, a timeout: ask again, the transaction id
                dedupes).
        """
        if pending.media is not None:
            content = self._content(target, await self._media_content(target, pending.media, pending.delivery_id))
        else:
            content = self._content(target, self.render(pending.text, pending.fmt).content)
        event_id = await self._send("send", target, content, pending.delivery_id, creates=True)
        return Settlement(SettleOutcome.FOUND, event_id)

    async def send_media(
        self, target: Target, media: MediaItem, fmt: TextFormat, *, delivery_id: str | None = None
    ) -> str:
        """Send ``media`` as Matrix clients send files: fetched, uploaded to the content repository and sent as an
        ``m.image`` / ``m.file`` / ``m.audio`` / ``m.video`` with its ``mxc://`` URI (:mod:`adapters.matrix.media`;
        the link instead when the file cannot be carried). Return the message's event id. Transaction id and settling
        as :meth:`send_text`.

        Raises:
            core.errors.PlatformUnavailableError: the upload failed or its answer was lost (no message was sent: the
                retry uploads again, which leaves at most an unreferenced file).
            core.errors.DeliveryError: another subclass, like :meth:`send_text`.
        """
        txn_id = delivery_id or uuid.uuid4().hex
        content = self._content(target, await self._media_content(target, media, txn_id))
        return await self._send("send", target, content, txn_id, creates=True)

    async def _media_content(self, target: Target, media: MediaItem, delivery_id: str) -> dict[str, Any]:
        """The content of ``media``'s message: kept for ``delivery_id``, else fetched and uploaded now
        (:mod:`adapters.matrix.media`)."""
        made = self._uploads.get(delivery_id)
        if made is not None:
            return made
        limit = await self.upload_limit(target)
        timeout_s = max(self.send_timeout_s, MEDIA_TIMEOUT_S)
        public_only = not self.media_fetch_private
        session = self._conn.media_session(public_only)
        fetched = await fetch(session, media.url, limit, timeout_s, public_only=public_only)
        if isinstance(fetched, str):
            content = link_content(media, self.markup.mentions, fallback=fetched)
        else:

            async def upload(client: AsyncClient) -> Any:
                answer, _keys = await client.upload(
                    io.BytesIO(fetched.data), fetched.content_type, fetched.filename, filesize=len(fetched.data)
                )
                return answer

            try:
                answer = await self._conn.call("upload", target, upload, creates=False, timeout_s=timeout_s)
            except PayloadRejectedError as refused:  # 413 M_TOO_LARGE: the homeserver's limit, stricter than told
                content = link_content(media, self.markup.mentions, fallback=f"the homeserver refused it: {refused}")
            else:
                if not isinstance(answer, UploadResponse) or not str(answer.content_uri).startswith("mxc://"):
                    raise UnreadableAnswerError(
                        "matrix upload: no mxc:// content_uri in the answer",
                        platform=PLATFORM,
                        target=str(target.chat_id),
                    )
                content = file_content(media, str(answer.content_uri), fetched, self.markup.mentions)
        self._uploads.put(delivery_id, content)
        return content

    async def upload_limit(self, target: Target) -> int | None:
        """The homeserver's ``m.upload.size`` in bytes (``GET /_matrix/client/v1/media/config``, asked once); None
        when it names none or the question failed (the upload's own ``M_TOO_LARGE`` then decides)."""
        if not self._asked_limit:
            try:
                answer = await self._conn.call(
                    "media_config", target, lambda c: c.content_repository_config(), creates=False
                )
            except PermanentDeliveryError:
                answer = None
            except DeliveryError:
                return None  # transient: asked again with the next item
            self._asked_limit = True
            size = getattr(answer, "upload_size", None) if isinstance(answer, ContentRepositoryConfigResponse) else None
            self._upload_limit = size if isinstance(size, int) and size > 0 else None
        return self._upload_limit

    async def edit_text(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> bool:
        """Make event ``message_id`` show ``text``: an ``m.replace`` edit (module docstring) under a fresh
        transaction id (a repeated edit shows the same text: harmless).

        Returns:
            True: a homeserver has no "not modified".

        Raises:
            core.errors.DeliveryError: a subclass, per :mod:`adapters.matrix.errors`. An edit of a redacted event is
                accepted by the homeserver and shows nothing: Matrix cannot tell.
        """
        content = edit_content(self.render(text, fmt).content, message_id)
        await self._send("send", target, content, uuid.uuid4().hex, creates=False)
        return True

    def unreadable(self) -> str | None:
        """None: every configured channel can read its messages back (:class:`core.ports.ReadBack`)."""
        return None

    async def read_back(self, target: Target, message_id: str, shown: str, fmt: TextFormat) -> Shown:
        """Whether event ``message_id`` still shows ``shown`` as this adapter renders it (``GET /rooms/{roomId}/event/
        {eventId}``: https://spec.matrix.org/v1.11/client-server-api/#get_matrixclientv3roomsroomideventeventid;
        :class:`core.ports.ReadBack`). Redacted (``unsigned.redacted_because``, or no content left) or 404: ``gone``.
        Its text is the latest edit's ``m.new_content`` when the homeserver bundles one
        (https://spec.matrix.org/v1.11/client-server-api/#server-side-aggregation-of-mreplace-relationships), else
        its own ``body``; another text (whitespace aside): ``changed``.

        Raises:
            core.errors.DeliveryError: a subclass, per :mod:`adapters.matrix.errors` (403: the bot may not read it).
        """
        room = str(target.chat_id)
        expected = str(self.render(shown, fmt).content.get("body", ""))

        async def get(client: AsyncClient) -> Any:
            return await client.room_get_event(room, message_id)

        try:
            answer = await self._conn.call("get_event", target, get, creates=False)
        except TargetNotFoundError:
            return Shown.GONE
        source = getattr(getattr(answer, "event", None), "source", None)
        if not isinstance(source, dict):
            raise UnreadableAnswerError("matrix get_event: no event in the answer", platform=PLATFORM, target=room)
        unsigned = source.get("unsigned") or {}
        content = source.get("content") or {}
        if unsigned.get("redacted_because") is not None or not content:
            return Shown.GONE
        edit = (unsigned.get("m.relations") or {}).get("m.replace") or {}
        new = (edit.get("content") or {}).get("m.new_content")
        body = (new if isinstance(new, dict) else content).get("body")
        same = isinstance(body, str) and body.split() == expected.split()
        return Shown.AS_DELIVERED if same else Shown.CHANGED

    async def delete_message(self, target: Target, message_id: str) -> None:
        """Redact event ``message_id`` (``PUT /rooms/{roomId}/redact/{eventId}/{txnId}``).

        Raises:
            core.errors.TargetNotFoundError: 404 ``M_NOT_FOUND``.
            core.errors.DeliveryError: another subclass (403 ``M_FORBIDDEN``: not the bot's event).
        """
        room = str(target.chat_id)

        async def redact(client: AsyncClient) -> Any:
            return await client.room_redact(room, message_id, tx_id=uuid.uuid4().hex)

        answer = await self._conn.call("redact", target, redact, creates=False)
        if not isinstance(answer, RoomRedactResponse):
            raise UnreadableAnswerError("matrix redact: no event_id in the answer", platform=PLATFORM, target=room)

    async def send_typing(self, target: Target) -> None:
        """Show the bot typing for :data:`TYPING_TIMEOUT_MS` (the first call reads the bot's user id: whoami)."""
        await self._typing(target, True)

    async def clear_typing(self, target: Target) -> None:
        """Take the typing notice down (``typing: false``): it would show for up to 30 s after the run."""
        await self._typing(target, False)

    async def _typing(self, target: Target, typing: bool) -> None:
        await self._conn.user_id(target)
        room = str(target.chat_id)

        async def notice(client: AsyncClient) -> Any:
            return await client.room_typing(room, typing_state=typing, timeout=TYPING_TIMEOUT_MS)

        await self._conn.call("typing", target, notice, creates=False)

    # -------------------------------------------------------------- StopControls

    async def set_stop(
        self, target: Target, message_id: str, text: str, fmt: TextFormat, control: StopControl | None
    ) -> None:
        """Put ``control``'s buttons on message ``message_id`` as the bot's own reactions (``✅`` Approve, ``❌``
        Deny, ``⏹`` Stop), or take them off (None: the bot's control reactions redacted):
        :mod:`adapters.matrix.controls`. ``text`` and ``fmt`` are not needed (reactions leave the message as it is).
        Idempotent: each reaction goes by a transaction id of the message and the control, and the same reaction
        again (400 ``M_DUPLICATE_ANNOTATION``) counts as done.

        Raises:
            core.errors.DeliveryError: a subclass, like every call.
        """
        room = str(target.chat_id)
        if control is None:
            await self._take_off(target, message_id)
            return
        for control_id, label in control.buttons():
            content, txn_id = seed_content(message_id, control_id, label), seed_txn(message_id, control_id)

            async def react(client: AsyncClient, content: dict[str, Any] = content, txn_id: str = txn_id) -> Any:
                return await client.room_send(room, REACTION, content, tx_id=txn_id)

            try:
                await self._conn.call("send", target, react, creates=False)
            except PermanentDeliveryError as refused:
                if "M_DUPLICATE_ANNOTATION" not in str(refused):
                    raise

    async def _take_off(self, target: Target, message_id: str) -> None:
        """Redact the bot's control reactions on ``message_id`` (a message gone has none left)."""
        room, me = str(target.chat_id), await self._conn.user_id(target)

        async def mine(client: AsyncClient) -> Any:
            found = []
            try:
                async for event in client.room_get_event_relations(
                    room, message_id, RelationshipType.annotation, REACTION
                ):
                    found.append(event)
            except AttributeError:  # nio reads next_batch of an error answer: the call failed
                return None
            return found

        try:
            events = await self._conn.call("relations", target, mine, creates=False)
        except TargetNotFoundError:
            return
        if events is None:
            raise PlatformUnavailableError(
                "matrix relations: the homeserver answered an error", platform=PLATFORM, target=room
            )
        for event in events:
            source = getattr(event, "source", {}) or {}
            if source.get("sender") != me or CONTROL_KEY not in (source.get("content") or {}):
                continue
            event_id = str(source.get("event_id"))

            async def redact(client: AsyncClient, event_id: str = event_id) -> Any:
                return await client.room_redact(room, event_id, tx_id=f"off-{event_id}")

            await self._conn.call("redact", target, redact, creates=False)

    # -------------------------------------------------------------- Threads

    def thread_refusal(self, target: Target) -> str | None:
        """:data:`NESTED_THREAD` for a target in a thread already (a thread's root cannot have a relation), else
        None."""
        return NESTED_THREAD if target.thread_id is not None else None

    async def open_thread(self, target: Target, anchor_message_id: str, title: str) -> Target:
        """The thread rooted at ``anchor_message_id``: no call is made (a thread is the events that relate to its
        root with ``m.thread``); ``title`` is not shown (Matrix threads have no name).

        Raises:
            core.errors.PermanentDeliveryError: ``target`` is in a thread already.
        """
        reason = self.thread_refusal(target)
        if reason is not None:
            raise PermanentDeliveryError(f"matrix: {reason}", platform=PLATFORM, target=str(target.chat_id))
        return Target(chat_id=target.chat_id, thread_id=anchor_message_id)


def _render(text: str, fmt: TextFormat, *, mentions: bool) -> Rendered:
    return render(text, fmt, mentions=mentions)
