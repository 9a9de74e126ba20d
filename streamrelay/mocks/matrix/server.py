"""The HTTP side of the mock homeserver: routes, auth, faults, rate limits, recording (rules: :mod:`mocks.matrix`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from aiohttp import web

from streamrelay.mocks.common import ChatId, Fault, Hang, MockServer, RecordedCall, serve_mock
from streamrelay.mocks.matrix.media import MEDIA_MSGTYPES, ContentRepository
from streamrelay.mocks.matrix.rooms import ANNOTATION, MESSAGE, REACTION, Rooms, StoredEvent
from streamrelay.mocks.matrix.wire import (
    CLIENT_PREFIX,
    CLIENT_V1_PREFIX,
    GET_EVENT,
    MAX_UPLOAD_BYTES,
    MEDIA_CONFIG,
    MEDIA_PREFIX,
    METHODS,
    MODERATOR,
    PERSON,
    REDACT,
    RELATIONS,
    SEND,
    TYPING,
    UPLOAD,
    WHOAMI,
    MatrixError,
    fault_error,
    limit_exceeded,
    user_of,
)

_GAVE_UP = {"errcode": "M_UNKNOWN", "error": "504: the client gave up"}


@dataclass(frozen=True)
class MatrixLimits:
    """Synapse's default ``rc_message`` rate limit, per user: ``per_second`` 0.2 with a ``burst_count`` of 10
    (https://element-hq.github.io/synapse/latest/usage/configuration/config_documentation.html#rc_message). A
    homeserver's operator sets it (bots are often exempted with the admin API's ``override_ratelimit``)."""

    per_second: float = 0.2
    burst_count: float = 10.0


class _Bucket:
    """A leaky bucket as Synapse's ``Ratelimiter``: each action adds one, ``per_second`` leak out; an action that
    would pass ``burst_count`` is refused with the time until it fits."""

    def __init__(self) -> None:
        self.level, self.at = 0.0, 0.0

    def take(self, now: float, limits: MatrixLimits) -> float | None:
        level = max(0.0, self.level - (now - self.at) * limits.per_second)
        if level + 1 > limits.burst_count:
            return (level + 1 - limits.burst_count) / limits.per_second
        self.level, self.at = level + 1, now
        return None


class MockMatrix(MockServer):
    """The mock Matrix homeserver (Client-Server API v3). See :mod:`mocks.matrix` for the rules it enforces.

    Args:
        rate_limits: enforce :class:`MatrixLimits` on ``send`` and ``redact`` (429 ``M_LIMIT_EXCEEDED`` past them).
        limits: the numbers used when ``rate_limits`` is on.
        hang_s: how long a scripted timeout holds its answer (released early by ``stop`` / ``reset``).
        clock: monotonic seconds for ``RecordedCall.t``, rate limits and typing.
        max_upload_bytes: the content repository's ``m.upload.size`` (Synapse's default 50 MiB).
    """

    platform = "matrix"
    title = "Matrix homeserver (Client-Server API)"

    def __init__(
        self,
        *,
        rate_limits: bool = False,
        limits: MatrixLimits | None = None,
        hang_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        max_upload_bytes: int = MAX_UPLOAD_BYTES,
    ) -> None:
        super().__init__(METHODS, rate_limits=rate_limits, hang_s=hang_s, clock=clock)
        self.limits = limits or MatrixLimits()
        self.rooms = Rooms(clock, lambda: int(time.time() * 1000))
        self.media = ContentRepository(max_upload_bytes)
        self._buckets: dict[str, _Bucket] = {}

    def _routes(self, app: web.Application) -> None:
        rooms = f"{CLIENT_PREFIX}/rooms/{{room}}"
        app.router.add_put(f"{rooms}/send/{{etype}}/{{txn}}", self._send)
        app.router.add_put(f"{rooms}/redact/{{event}}/{{txn}}", self._redact)
        app.router.add_put(f"{rooms}/typing/{{user}}", self._typing)
        app.router.add_get(f"{rooms}/event/{{event}}", self._get_event)
        app.router.add_get(f"{CLIENT_PREFIX}/account/whoami", self._whoami)
        app.router.add_post(f"{MEDIA_PREFIX}/upload", self._upload)
        app.router.add_get(f"{CLIENT_V1_PREFIX}/media/config", self._media_config)
        app.router.add_get(f"{MEDIA_PREFIX}/config", self._media_config)  # deprecated since v1.11, still served
        relations = f"{CLIENT_V1_PREFIX}/rooms/{{room}}/relations/{{event}}"
        app.router.add_get(f"{relations}/{{rel}}/{{etype}}", self._relations)
        app.router.add_get(f"{relations}/{{rel}}", self._relations)
        app.router.add_get("/_mock/files/{name}", self._hosted)
        app.router.add_route("*", "/{tail:.*}", self._unknown)

    # ------------------------------------------------------------ scripting and state

    def reset(self) -> None:
        """Forget rooms, events, transaction ids, calls, faults, latencies, counters and rate state."""
        super().reset()
        self.rooms.reset()
        self.media.reset()
        self._buckets = {}

    def host_file(self, name: str, data: bytes, content_type: str) -> str:
        """Serve ``data`` at ``/_mock/files/{name}`` (no token, never recorded): a file on the web a media URL names,
        which a sidecar fetches before uploading it. Returns its URL."""
        self.media.hosted[name] = (content_type, data)
        return f"{self.control_url}/files/{quote(name)}"

    def press(
        self, chat_id: ChatId, message_id: int | str, data: str | None, user: int | str | None = None
    ) -> dict[str, Any]:
        """A person reacts to the bot's message ``message_id`` with the key of the bot's own reaction on it whose
        ``io.streamrelay.control`` is ``data`` (None: the first): the ``m.reaction`` event is stored and returned
        as a client's ``/sync`` shows it (the event the bot forwards). ``user``: the person's user id
        (``@name:mock.local``; None: :data:`mocks.matrix.wire.PERSON`).

        Raises:
            ValueError: no such message, or no such reaction of the bot on it.
        """
        room_id, event_id = str(chat_id), str(message_id)
        seeds = [
            e
            for e in self.rooms.relations(room_id, event_id, ANNOTATION)
            if e.sender != PERSON and e.type == REACTION and (data is None or e.content.get(CONTROL_KEY) == data)
        ]
        if not seeds:
            raise ValueError(f"message {event_id} of {room_id} has no bot reaction {data!r} to press")
        key = str(seeds[0].relation.get("key"))
        sender = PERSON if user is None else str(user)
        try:
            room = self.rooms.room(room_id, sender)
            content = {"m.relates_to": {"rel_type": ANNOTATION, "event_id": event_id, "key": key}}
            self.rooms.check_message(room, sender, REACTION, content)
        except MatrixError as exc:
            raise ValueError(exc.error) from None
        event = self.rooms.store(room, sender, REACTION, content, f"{sender}/device", None)
        return _client_event(event)

    def chats(self) -> list[ChatId]:
        """Rooms that ever received an event, in first-event order."""
        return [room_id for room_id, room in self.rooms.rooms.items() if room.events]

    def visible(self, chat_id: ChatId) -> list[tuple[int | str, str]]:
        """What a person sees of the bot in room ``chat_id``: ``(event id, body)`` of its messages (thread replies
        too) in order, as their latest edit made them; redacted ones and the person's own left out. The ``body`` is
        the text a person reads (the sidecar sends its Markdown there, the HTML in ``formatted_body``); a media
        item's link message (content key ``io.streamrelay.media``) shows its caption, as every mock shows media."""
        return [(e.event_id, _shown_text(c)) for e, c in self.rooms.shown(str(chat_id)) if e.sender != PERSON]

    def messages(self, chat_id: ChatId) -> list[tuple[StoredEvent, dict[str, Any]]]:
        """Every shown message of room ``chat_id`` (the person's too) with its current content."""
        return self.rooms.shown(str(chat_id))

    def events(self, chat_id: ChatId) -> list[StoredEvent]:
        """Every stored event of room ``chat_id`` in order (edits and redactions too)."""
        room = self.rooms.rooms.get(str(chat_id))
        return [] if room is None else list(room.events)

    def user_message(self, chat_id: ChatId, text: str) -> str:
        """Store an ``m.text`` message the person wrote in room ``chat_id``; return its event id.

        Raises:
            ValueError: ``chat_id`` is not a room id.
        """
        try:
            room = self.rooms.room(str(chat_id), PERSON)
        except MatrixError as exc:
            raise ValueError(exc.error) from None
        return self.rooms.store(room, PERSON, MESSAGE, {"msgtype": "m.text", "body": text}, "person", None).event_id

    def remove(self, chat_id: ChatId, message_id: int | str) -> None:
        """A room moderator redacts event ``message_id`` of room ``chat_id`` (the control API's ``/_mock/remove``):
        GET event answers it redacted from now on, and it is no longer shown.

        Raises:
            ValueError: no such event, or it is redacted already.
        """
        room = self.rooms.rooms.get(str(chat_id))
        target = None if room is None else self.rooms.event(room, str(message_id))
        if room is None or target is None or target.redacted_by is not None:
            raise ValueError(f"event {message_id} of {chat_id} does not exist (or was redacted)")
        self.rooms.redact(room, MODERATOR, target, f"{MODERATOR}/device", f"remove/{message_id}")

    def typing_users(self, chat_id: ChatId) -> list[str]:
        """Who is shown typing in room ``chat_id`` now."""
        return self.rooms.typing_users(str(chat_id))

    # ------------------------------------------------------------ request handling

    @staticmethod
    async def _begin(request: web.Request) -> tuple[str, Any]:
        """The caller's user id (from its access token) and the JSON body (None for a GET)."""
        user = _check_token(request)
        if request.method == "GET":
            return user, None
        raw = await request.read()
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            raise MatrixError(400, "M_NOT_JSON", "Content not JSON.") from None
        if not isinstance(body, dict):
            raise MatrixError(400, "M_NOT_JSON", "Content not JSON.")
        return user, body

    async def _answer(
        self, request: web.Request, method: str, chat_id: str | None, work: Callable[[RecordedCall, str, Any], Any]
    ) -> web.StreamResponse:
        call = RecordedCall(method=method, chat_id=chat_id, message_id=None, text=None, t=self._clock())
        self.calls.append(call)

        def refuse(fault: Fault) -> MatrixError:
            return fault_error(fault.status, fault.description, fault.retry_after_s)

        try:
            user, body = await self._begin(request)
            if method == SEND:
                _note(call, body)
            result = await self._scripted(call, lambda: work(call, user, body), refuse)
        except MatrixError as error:
            call.status, call.ok, call.description = error.status, False, f"{error.errcode}: {error.error}"
            if error.retry_after_ms is not None:
                call.retry_after_s = error.retry_after_ms / 1000
            return error.response()
        if result in (Hang.RESET, Hang.RESET_AFTER_COMMIT):
            self._hang_up(request)
        if isinstance(result, Hang):
            return web.json_response(_GAVE_UP, status=504)  # the client has gone: nobody reads this
        call.status, call.ok = 200, True
        return web.json_response(result)

    def _admit(self, user: str) -> None:
        """``rc_message`` (when on): 429 past it; a refused call costs nothing."""
        if not self.rate_limits:
            return
        wait_s = self._buckets.setdefault(user, _Bucket()).take(self._clock(), self.limits)
        if wait_s is not None:
            raise limit_exceeded(wait_s)

    async def _send(self, request: web.Request) -> web.StreamResponse:
        room_id, event_type, txn_id = (request.match_info[k] for k in ("room", "etype", "txn"))

        def work(call: RecordedCall, user: str, content: Any) -> dict[str, Any]:
            room = self.rooms.room(room_id, user)
            device, key = f"{user}/device", f"send/{room_id}/{event_type}/{txn_id}"  # Synapse keys by path
            known = self.rooms.txn(device, key)
            if known is not None:  # the same transaction again: the stored event's id, nothing new
                call.message_id = call.message_id or known
                call.description = "deduplicated by transaction id"
                return {"event_id": known}
            self.rooms.check_message(room, user, event_type, content)
            if event_type == MESSAGE and content.get("msgtype") in MEDIA_MSGTYPES:
                self.media.check_url(content["msgtype"], content.get("url"))
            self._admit(user)
            event = self.rooms.store(room, user, event_type, content, device, key)
            call.message_id = call.message_id or event.event_id
            return {"event_id": event.event_id}

        return await self._answer(request, SEND, room_id, work)

    async def _redact(self, request: web.Request) -> web.StreamResponse:
        room_id, target_id, txn_id = (request.match_info[k] for k in ("room", "event", "txn"))

        def work(call: RecordedCall, user: str, body: Any) -> dict[str, Any]:
            room = self.rooms.room(room_id, user)
            device, key = f"{user}/device", f"redact/{room_id}/{target_id}/{txn_id}"
            call.message_id = target_id
            known = self.rooms.txn(device, key)
            if known is not None:
                return {"event_id": known}
            target = self.rooms.check_redaction(room, user, target_id)
            self._admit(user)
            return {"event_id": self.rooms.redact(room, user, target, device, key).event_id}

        return await self._answer(request, REDACT, room_id, work)

    async def _get_event(self, request: web.Request) -> web.StreamResponse:
        room_id, event_id = request.match_info["room"], request.match_info["event"]

        def work(call: RecordedCall, user: str, body: Any) -> dict[str, Any]:
            call.message_id = event_id
            return self.rooms.event_json(self.rooms.room(room_id, user), event_id)

        return await self._answer(request, GET_EVENT, room_id, work)

    async def _typing(self, request: web.Request) -> web.StreamResponse:
        room_id, user_id = request.match_info["room"], request.match_info["user"]

        def work(call: RecordedCall, user: str, body: Any) -> dict[str, Any]:
            if user_id != user:
                raise MatrixError(403, "M_FORBIDDEN", "Cannot set another user's typing state")
            room = self.rooms.room(room_id, user)
            typing = body.get("typing")
            if not isinstance(typing, bool):
                raise MatrixError(400, "M_BAD_JSON", "'typing' must be a boolean")
            timeout = body.get("timeout")
            self.rooms.set_typing(room, user, typing, timeout if isinstance(timeout, int) else None)
            return {}

        return await self._answer(request, TYPING, room_id, work)

    async def _whoami(self, request: web.Request) -> web.StreamResponse:
        def work(call: RecordedCall, user: str, body: Any) -> dict[str, Any]:
            return {"user_id": user, "device_id": "MOCKDEVICE", "is_guest": False}

        return await self._answer(request, WHOAMI, None, work)

    async def _upload(self, request: web.Request) -> web.StreamResponse:
        """``POST /_matrix/media/v3/upload?filename=``: the raw body is the file (``Content-Type`` its type)."""
        call = RecordedCall(method=UPLOAD, chat_id=None, message_id=None, text=None, t=self._clock())
        self.calls.append(call)
        try:
            _check_token(request)
            data = await request.read()

            def work() -> dict[str, Any]:
                stored = self.media.upload(
                    request.headers.get("Content-Type", "application/octet-stream"), request.query.get("filename"), data
                )
                call.message_id, call.text = stored.uri, stored.filename
                return {"content_uri": stored.uri}

            result = await self._scripted(call, work, lambda f: fault_error(f.status, f.description, f.retry_after_s))
        except MatrixError as error:
            call.status, call.ok, call.description = error.status, False, f"{error.errcode}: {error.error}"
            return error.response()
        if result in (Hang.RESET, Hang.RESET_AFTER_COMMIT):
            self._hang_up(request)
        if isinstance(result, Hang):
            return web.json_response(_GAVE_UP, status=504)
        call.status, call.ok = 200, True
        return web.json_response(result)

    async def _media_config(self, request: web.Request) -> web.StreamResponse:
        def work(call: RecordedCall, user: str, body: Any) -> dict[str, Any]:
            return {"m.upload.size": self.media.max_upload_bytes}

        return await self._answer(request, MEDIA_CONFIG, None, work)

    async def _relations(self, request: web.Request) -> web.StreamResponse:
        room_id, event_id = request.match_info["room"], request.match_info["event"]
        rel, etype = request.match_info["rel"], request.match_info.get("etype")

        def work(call: RecordedCall, user: str, body: Any) -> dict[str, Any]:
            room = self.rooms.room(room_id, user)
            if self.rooms.event(room, event_id) is None:
                raise MatrixError(404, "M_NOT_FOUND", f"Event {event_id} not found")
            found = [e for e in self.rooms.relations(room_id, event_id, rel) if etype is None or e.type == etype]
            return {"chunk": [_client_event(e) for e in found]}

        return await self._answer(request, RELATIONS, room_id, work)

    async def _hosted(self, request: web.Request) -> web.StreamResponse:
        hosted = self.media.hosted.get(request.match_info["name"])
        if hosted is None:
            return web.Response(status=404, text="no such file")
        return web.Response(body=hosted[1], content_type=hosted[0])

    async def _unknown(self, request: web.Request) -> web.Response:
        return web.json_response({"errcode": "M_UNRECOGNIZED", "error": "Unrecognized request"}, status=404)


MEDIA_KEY = "io.streamrelay.media"
CONTROL_KEY = "io.streamrelay.control"
"""The content key of the bot's own reactions naming the control a reaction with their key presses."""


def _check_token(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    token = header.removeprefix("Bearer ") if header.startswith("Bearer ") else request.query.get("access_token")
    if not token:
        raise MatrixError(401, "M_MISSING_TOKEN", "Missing access token")
    user = user_of(token)
    if user is None:
        raise MatrixError(401, "M_UNKNOWN_TOKEN", "Unrecognised access token")
    return user


def _client_event(event: StoredEvent) -> dict[str, Any]:
    """``event`` in the client format (``ClientEvent``: what ``/sync`` and ``/relations`` answer,
    https://spec.matrix.org/latest/client-server-api/#room-event-format)."""
    return {
        "event_id": event.event_id,
        "room_id": event.room_id,
        "sender": event.sender,
        "type": event.type,
        "content": event.content,
        "origin_server_ts": event.ts_ms,
        "unsigned": {},
    }


def _shown_text(content: dict[str, Any]) -> str:
    media = content.get(MEDIA_KEY)
    if isinstance(media, dict):
        return str(media.get("caption", ""))
    return str(content.get("body", ""))


def _note(call: RecordedCall, content: Any) -> None:
    """The call's text (the new ``body`` of an edit) and, for an edit or a reaction, the id of the event it is
    about (a reaction creates no message a person reads: it is recorded on the message it annotates)."""
    if not isinstance(content, dict):
        return
    new = content.get("m.new_content")
    shown = new if isinstance(new, dict) else content
    call.text = shown.get("body") if isinstance(shown.get("body"), str) else None
    relation = content.get("m.relates_to")
    if isinstance(relation, dict) and relation.get("rel_type") in ("m.replace", ANNOTATION):
        call.message_id = str(relation.get("event_id"))  # an edit, or a reaction: the message it is about
        if relation.get("rel_type") == ANNOTATION:
            call.description = f"reaction {relation.get('key')}"


async def serve_forever(host: str = "127.0.0.1", port: int = 8084, rate_limits: bool = False) -> None:
    """Run a mock until cancelled (``streamrelay mock matrix --port N``); prints its base URL."""
    await serve_mock(MockMatrix(rate_limits=rate_limits), host, port)
