"""The mock Bot Framework Connector for Teams: routes, the token, validation, size and rate limits, native streams,
faults, recording (rules: :mod:`mocks.teams`)."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from streamrelay.mocks.common import ChatId, Fault, Hang, MockServer, RecordedCall, serve_mock
from streamrelay.mocks.teams import graph

SEND = "sendToConversation"
REPLY = "replyToActivity"
UPDATE = "updateActivity"
DELETE = "deleteActivity"
TOKEN = "token"
LIST_CHAT = "listChatMessages"
LIST_CHANNEL = "listChannelMessages"
LIST_REPLIES = "listMessageReplies"
LIST_INSTALLED = "listInstalledApps"
GET_APP_CHAT = "getInstalledAppChat"
MEMBERS = "getConversationMembers"
GET_MESSAGE = "getChatMessage"
GRAPH_METHODS = (LIST_CHAT, LIST_CHANNEL, LIST_REPLIES, LIST_INSTALLED, GET_APP_CHAT, GET_MESSAGE)
"""Microsoft Graph's reads of a conversation's messages, of one message and of a person's chat with the app
(:mod:`mocks.teams.graph`)."""
METHODS = (SEND, REPLY, UPDATE, DELETE, TOKEN, MEMBERS, *GRAPH_METHODS)
"""The recorded method names (tests/cases/README.md names the first four)."""
MESSAGE_BYTES = 102_400
"""About 100 KB: the whole activity's JSON in UTF-16; past it 413 ``MessageSizeTooBig``."""
INFORMATIVE_CHARS = 1_000
"""An informative stream update is at most 1,000 characters."""
STREAM_SECONDS = 120.0
"""A native stream must be finished within two minutes."""
STREAM_PACE_S = 1.0
"""A stream takes one request a second (when rate limits are on, a faster update is 429)."""
CARD_TYPE = "application/vnd.microsoft.card.adaptive"
HERO_TYPE = "application/vnd.microsoft.card.hero"
PERSON = "person"
BOT = "bot"
CONVERSATION_RE = re.compile(r"^(?:a|19|8|29):[^\s/?#]+$")
GUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
TOKEN_PREFIX = "mock-bf-token."
GRAPH_TOKEN_PREFIX = "mock-graph-token."
GRAPH_SCOPE = "https://graph.microsoft.com/.default"
_GAVE_UP = {"error": {"code": "GatewayTimeout", "message": "the client gave up"}}


class ConnectorError(Exception):
    """An error answer in the Connector's shape, ``{"error": {"code", "message"}}``
    (https://learn.microsoft.com/en-us/azure/bot-service/rest-api/bot-framework-rest-connector-api-reference#errorresponse-object);
    a 429 carries ``Retry-After`` in whole seconds."""

    def __init__(self, status: int, code: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.retry_after_s = status, code, message, retry_after_s

    def response(self) -> web.Response:
        headers = {"Retry-After": str(max(1, round(self.retry_after_s + 0.49)))} if self.retry_after_s else None
        body = {"error": {"code": self.code, "message": self.message}}
        return web.json_response(body, status=self.status, headers=headers)


_CODE_RE = re.compile(r"^([A-Za-z]+)(?::\s*(.*))?$", re.S)


def fault_error(status: int, description: str | None, retry_after_s: float | None = None) -> ConnectorError:
    """A scripted fault in the Connector's shape: a description ``Code: text`` chooses the code
    (``ContentStreamNotAllowed: Content stream finished due to exceeded streaming time.``); else a 429 is
    ``Throttled`` with ``Retry-After``, 413 ``MessageSizeTooBig``, another status a code named after it."""
    match = _CODE_RE.match(description or "")
    if match and match.group(2) is not None:
        return ConnectorError(status, match.group(1), match.group(2), retry_after_s)
    if status == 429:
        return ConnectorError(429, "Throttled", description or "Too many requests", retry_after_s or 1.0)
    if status == 413:
        return ConnectorError(413, "MessageSizeTooBig", description or "Message size too large")
    codes = {400: "BadArgument", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 412: "PreconditionFailed"}
    return ConnectorError(status, codes.get(status, "ServiceError"), description or f"HTTP {status}")


@dataclass
class StoredActivity:
    """One activity of a conversation: its ``activity_id``, who sent it, the JSON it holds now (``payload``, the last
    update's), ``deleted``, the ``reply_to`` root (a channel thread) and, for a native stream, its state."""

    activity_id: str
    sender: str
    payload: dict[str, Any]
    reply_to: str | None = None
    deleted: bool = False
    stream_state: str | None = None
    """None (a plain message), ``streaming`` (typing chunks so far) or ``final``."""
    stream_sequence: int = 0
    stream_started: float = 0.0
    stream_last: float = 0.0
    updates: int = 0
    created_ms: int = 0
    """When it was stored (Unix milliseconds): Graph's ``createdDateTime``."""
    modified_ms: int = 0
    """When it was stored or last updated (Unix milliseconds): Graph's ``lastModifiedDateTime``."""
    app_id: str | None = None
    """The bot's Microsoft App ID (the client id its token was granted to): Graph's ``from.application.id``."""


@dataclass(frozen=True)
class TeamsLimits:
    """The documented limits (https://learn.microsoft.com/en-us/microsoftteams/platform/bots/how-to/rate-limit): per
    bot per thread 7 operations in 1 s, 8 in 2 s, 60 in 30 s, 1,800 in 3,600 s; per app per tenant 50 a second."""

    per_thread: tuple[tuple[float, int], ...] = ((1.0, 7), (2.0, 8), (30.0, 60), (3600.0, 1800))
    per_app: tuple[tuple[float, int], ...] = ((1.0, 50),)


@dataclass
class _Windows:
    """Sliding windows of operation times: an operation fits when every window holds fewer than its maximum."""

    times: deque[float] = field(default_factory=deque)

    def wait(self, now: float, windows: tuple[tuple[float, int], ...]) -> float | None:
        longest = max(span for span, _ in windows)
        while self.times and self.times[0] <= now - longest:
            self.times.popleft()
        waits = []
        for span, most in windows:
            inside = [t for t in self.times if t > now - span]
            if len(inside) >= most:
                waits.append(inside[len(inside) - most] + span - now)
        return max(waits) if waits else None


def _card_text(card: dict[str, Any]) -> str:
    """What a card shows, as Markdown: TextBlocks' text, CodeBlocks fenced, Tables as pipe tables (actions left out)."""
    parts: list[str] = []
    for element in card.get("body", []) if isinstance(card.get("body"), list) else []:
        if not isinstance(element, dict):
            continue
        kind = element.get("type")
        if kind == "TextBlock":
            parts.append(str(element.get("text", "")))
        elif kind == "CodeBlock":
            language = str(element.get("language", ""))
            parts.append(f"```{'' if language == 'PlainText' else language}\n{element.get('codeSnippet', '')}\n```")
        elif kind == "Table":
            rows = [
                [" ".join(str(i.get("text", "")) for i in c.get("items", [])) for c in r.get("cells", [])]
                for r in element.get("rows", [])
            ]
            if rows:
                lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
                parts.extend(["\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows[1:]])])
    return "\n\n".join(parts)


def shown_text(payload: dict[str, Any]) -> str:
    """What an activity shows a person: its ``text``, else its Adaptive Card's content as Markdown."""
    text = payload.get("text")
    if isinstance(text, str) and text:
        return text
    for attachment in payload.get("attachments") or []:
        content = attachment.get("content") if isinstance(attachment, dict) else None
        if not isinstance(content, dict):
            continue
        if attachment.get("contentType") == CARD_TYPE:
            return _card_text(content)
        if attachment.get("contentType") == HERO_TYPE:  # a media item: its caption, as every mock shows media
            return str(content.get("title") or "")
    return ""


def card_actions(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``Action.Submit`` actions of an activity's Adaptive Card."""
    actions: list[dict[str, Any]] = []
    for attachment in payload.get("attachments") or []:
        content = attachment.get("content") if isinstance(attachment, dict) else None
        if isinstance(content, dict) and isinstance(content.get("actions"), list):
            actions.extend(a for a in content["actions"] if isinstance(a, dict) and a.get("type") == "Action.Submit")
    return actions


def _utf16_bytes(payload: dict[str, Any]) -> int:
    return len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-16-le", "surrogatepass"))


def _stream_info(payload: dict[str, Any]) -> dict[str, Any] | None:
    for entity in payload.get("entities") or []:
        if isinstance(entity, dict) and entity.get("type") == "streaminfo":
            return entity
    return None


class MockTeams(MockServer):
    """The mock Bot Framework Connector as Teams runs it (and the token endpoint). See :mod:`mocks.teams`.

    Args:
        rate_limits: enforce :class:`TeamsLimits` (429 with ``Retry-After`` past them).
        limits: the numbers used when ``rate_limits`` is on.
        hang_s: how long a scripted timeout holds its answer.
        clock: monotonic seconds for ``RecordedCall.t``, rate limits and stream time.
        wall_clock: Unix seconds for Graph's ``createdDateTime`` / ``lastModifiedDateTime``.
    """

    platform = "teams"
    title = "Teams (Bot Framework Connector)"

    def __init__(
        self,
        *,
        rate_limits: bool = False,
        limits: TeamsLimits | None = None,
        hang_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(METHODS, rate_limits=rate_limits, hang_s=hang_s, clock=clock)
        self._wall = wall_clock
        self.graph_permission = True
        """The app holds a Graph permission to read messages (``ChatMessage.Read.Chat`` / ``ChannelMessage.Read.Group``
        by resource-specific consent, or ``Chat.Read.All`` / ``ChannelMessage.Read.All``); False: Graph's list calls
        answer 403 ``Forbidden``, as Graph does without one."""
        self.limits = limits or TeamsLimits()
        self.missing: set[str] = set()
        """Conversations the bot is not in: a call there is 403 ``BotNotInConversationRoster``."""
        self._conversations: dict[str, list[StoredActivity]] = {}
        self._threads: dict[str, _Windows] = {}
        self._app = _Windows()
        self._tokens: dict[str, str] = {}
        """Bot Framework tokens granted, by token: the client id (the bot's app id) they were granted to."""
        self._graph_tokens: dict[str, str] = {}
        """Microsoft Graph tokens granted (scope ``https://graph.microsoft.com/.default``), likewise."""
        self._callers: dict[int, str] = {}
        """The app id of each create under way (by ``id(call)``), for its stored activity's ``app_id``."""
        self.typing: dict[str, int] = {}
        """Typing activities received per conversation."""
        self.pressed: list[dict[str, Any]] = []

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/{tenant}/oauth2/v2.0/token", self._token)
        base = "/v3/conversations/{conversation}/activities"
        app.router.add_post(base, self._send)
        app.router.add_post(base + "/{activity}", self._reply)
        app.router.add_put(base + "/{activity}", self._update)
        app.router.add_delete(base + "/{activity}", self._delete)
        app.router.add_get("/v3/conversations/{conversation}/members", self._members)
        app.router.add_get("/v1.0/users/{user}/teamwork/installedApps", self._list_installed)
        app.router.add_get("/v1.0/users/{user}/teamwork/installedApps/{installation}/chat", self._installed_chat)
        app.router.add_get("/v1.0/chats/{chat}/messages", self._list_chat)
        app.router.add_get("/v1.0/teams/{team}/channels/{channel}/messages", self._list_channel)
        app.router.add_get("/v1.0/teams/{team}/channels/{channel}/messages/{message}/replies", self._list_replies)
        app.router.add_get("/v1.0/chats/{chat}/messages/{id}", self._get_chat_message)
        app.router.add_get("/v1.0/teams/{team}/channels/{channel}/messages/{id}", self._get_channel_message)
        app.router.add_get("/v1.0/teams/{team}/channels/{channel}/messages/{message}/replies/{id}", self._get_reply)
        app.router.add_route("*", "/{tail:.*}", self._unknown)

    # ------------------------------------------------------------ scripting and state

    def reset(self) -> None:
        """Forget conversations, activities, tokens, calls, faults, latencies, counters and rate state."""
        super().reset()
        self._conversations, self._threads, self._app = {}, {}, _Windows()
        self._tokens, self._graph_tokens, self._callers = {}, {}, {}
        self.typing, self.pressed = {}, []
        self.missing = set()
        self.graph_permission = True

    def chats(self) -> list[ChatId]:
        """Conversations the bot posted to, in first-activity order."""
        return [c for c, acts in self._conversations.items() if any(a.sender == BOT for a in acts)]

    def visible(self, chat_id: ChatId) -> list[tuple[int | str, str]]:
        """What a person sees of the bot in ``chat_id``: ``(activity id, text)`` of its messages in order (thread
        replies too), deleted ones left out; a card shows its content as Markdown (:func:`shown_text`); a native
        stream shows its streamed text until its final message replaces it."""
        return [
            (a.activity_id, shown_text(a.payload))
            for a in self._conversations.get(str(chat_id), [])
            if a.sender == BOT and not a.deleted
        ]

    def native_streams(self) -> dict[ChatId, list[tuple[int | str, str, str]]]:
        """Per conversation, ``(activity id, state, text shown)`` of each native stream not deleted: ``streaming``
        (chunks so far, no final yet) or ``final``."""
        out: dict[ChatId, list[tuple[int | str, str, str]]] = {}
        for conversation, acts in self._conversations.items():
            for a in acts:
                if a.sender == BOT and a.stream_state is not None and not a.deleted:
                    out.setdefault(conversation, []).append((a.activity_id, a.stream_state, shown_text(a.payload)))
        return out

    def activities(self, chat_id: ChatId) -> list[StoredActivity]:
        """Every activity of conversation ``chat_id`` (the person's too, deleted ones too), in order."""
        return list(self._conversations.get(str(chat_id), []))

    def remove(self, chat_id: ChatId, message_id: int | str) -> None:
        """A person or an admin deletes message ``message_id`` of ``chat_id`` (the control API's ``/_mock/remove``):
        Graph shows it with ``deletedDateTime`` from now on, as Teams keeps a deleted message
        (https://learn.microsoft.com/en-us/graph/api/resources/chatmessage).

        Raises:
            ValueError: no such message, or it is deleted already.
        """
        try:
            found = self._find(str(chat_id), str(message_id))
        except ConnectorError:
            raise ValueError(f"message {message_id} of {chat_id} does not exist (or was deleted)") from None
        found.deleted = True
        found.payload = {"type": "message", "text": ""}
        found.modified_ms = round(self._wall() * 1000)

    def user_message(self, chat_id: ChatId, text: str) -> str:
        """Store a message the person wrote in ``chat_id``; return its activity id.

        Raises:
            ValueError: ``chat_id`` is not a Teams conversation id.
        """
        conversation = str(chat_id)
        if not CONVERSATION_RE.match(conversation):
            raise ValueError(f"{conversation!r} is not a Teams conversation id (a:... or 19:...)")
        return self._store(conversation, PERSON, {"type": "message", "text": text}, None).activity_id

    def press(
        self, chat_id: ChatId, message_id: int | str, data: str | None, user: int | str | None = None
    ) -> dict[str, Any]:
        """A person presses an ``Action.Submit`` button of a bot card: the message activity Teams delivers to the bot
        (``value`` the action's ``data``, ``replyToId`` the card's activity,
        https://learn.microsoft.com/en-us/microsoftteams/platform/task-modules-and-cards/cards/cards-actions#actionsubmit).

        Raises:
            ValueError: no such bot message, or no such button on it.
        """
        conversation = str(chat_id)
        found = next(
            (
                a
                for a in self._conversations.get(conversation, [])
                if a.activity_id == str(message_id) and not a.deleted
            ),
            None,
        )
        if found is None or found.sender != BOT:
            raise ValueError(f"no bot message {message_id!r} in {conversation!r}")
        actions = card_actions(found.payload)
        chosen = next((a for a in actions if data is None or (a.get("data") or {}).get("streamrelay") == data), None)
        if chosen is None:
            raise ValueError(f"message {message_id!r} has no button {data!r}")
        activity = {
            "type": "message",
            "replyToId": found.activity_id,
            "conversation": {"id": conversation},
            "from": {"id": str(user) if user is not None else "29:mock-person"},
            "value": chosen.get("data"),
        }
        self.pressed.append(activity)
        return activity

    def _store(
        self, conversation: str, sender: str, payload: dict[str, Any], reply_to: str | None, app_id: str | None = None
    ) -> StoredActivity:
        now_ms = round(self._wall() * 1000)
        activity = StoredActivity(f"1:{uuid.uuid4().hex[:20]}", sender, payload, reply_to)
        activity.created_ms = activity.modified_ms = now_ms
        activity.app_id = app_id
        self._conversations.setdefault(conversation, []).append(activity)
        return activity

    def _find(self, conversation: str, activity_id: str) -> StoredActivity:
        for activity in self._conversations.get(conversation, []):
            if activity.activity_id == activity_id and not activity.deleted:
                return activity
        raise ConnectorError(404, "ActivityNotFound", f"Activity {activity_id} not found in the conversation")

    # ------------------------------------------------------------ request handling

    async def _token(self, request: web.Request) -> web.StreamResponse:
        """The OAuth client credentials grant (Entra ID's ``/oauth2/v2.0/token``): any GUID client id with a secret
        gets a token for the Bot Framework's scope."""
        call = RecordedCall(method=TOKEN, chat_id=None, message_id=None, text=None, t=self._clock())
        self.calls.append(call)
        form = await request.post()

        def commit() -> dict[str, Any]:
            if form.get("grant_type") != "client_credentials":
                raise ConnectorError(400, "unsupported_grant_type", "grant_type must be client_credentials")
            client_id, secret = str(form.get("client_id", "")), str(form.get("client_secret", ""))
            if not GUID_RE.match(client_id) or not secret:
                raise ConnectorError(401, "invalid_client", "AADSTS7000215: Invalid client secret provided.")
            scope = form.get("scope")
            if scope == GRAPH_SCOPE:
                tenant = request.match_info["tenant"]
                if not (GUID_RE.match(tenant) or tenant.endswith(".onmicrosoft.com")):
                    raise ConnectorError(
                        400,
                        "invalid_request",
                        f"AADSTS90002: an app-only Graph token needs the tenant's id, not {tenant!r}",
                    )
                token = GRAPH_TOKEN_PREFIX + uuid.uuid4().hex
                self._graph_tokens[token] = client_id
                return {"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}
            if scope != "https://api.botframework.com/.default":
                raise ConnectorError(400, "invalid_scope", "AADSTS70011: The provided scope is not valid.")
            token = TOKEN_PREFIX + uuid.uuid4().hex
            self._tokens[token] = client_id
            return {"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}

        return await self._run(request, call, commit)

    async def _run(
        self, request: web.Request, call: RecordedCall, commit: Callable[[], dict[str, Any] | list[Any]]
    ) -> web.StreamResponse:
        def refuse(fault: Fault) -> ConnectorError:
            return fault_error(fault.status, fault.description, fault.retry_after_s)

        try:
            result = await self._scripted(call, commit, refuse)
        except ConnectorError as error:
            call.status, call.ok, call.description = error.status, False, f"{error.code}: {error.message}"
            if error.status == 429:
                call.retry_after_s = error.retry_after_s
            return error.response()
        if result in (Hang.RESET, Hang.RESET_AFTER_COMMIT):
            self._hang_up(request)
        if isinstance(result, Hang):
            return web.json_response(_GAVE_UP, status=504)
        call.status, call.ok = 200, True
        return web.json_response(result, status=201 if call.method in (SEND, REPLY) else 200)

    async def _begin(self, request: web.Request, call: RecordedCall) -> dict[str, Any]:
        conversation = request.match_info["conversation"]
        call.chat_id = conversation
        header = request.headers.get("Authorization", "")
        app_id = self._tokens.get(header.removeprefix("Bearer "))
        if app_id is None:
            raise ConnectorError(401, "Unauthorized", "Authorization has been denied for this request.")
        self._callers[id(call)] = app_id
        if not CONVERSATION_RE.match(conversation):
            raise ConnectorError(400, "BadArgument", f"Invalid conversation id {conversation!r}")
        if request.method == "DELETE":
            return {}
        try:
            body = json.loads(await request.read() or b"{}")
        except ValueError:
            raise ConnectorError(400, "BadSyntax", "The request body is no JSON") from None
        if not isinstance(body, dict):
            raise ConnectorError(400, "BadSyntax", "The request body is no JSON object")
        call.text = shown_text(body) if body.get("type") == "message" else body.get("text")
        return body

    async def _handle(
        self,
        request: web.Request,
        method: str,
        work: Callable[[RecordedCall, str, dict[str, Any]], dict[str, Any] | list[Any]],
    ) -> web.StreamResponse:
        call = RecordedCall(method=method, chat_id=None, message_id=None, text=None, t=self._clock())
        self.calls.append(call)
        try:
            body = await self._begin(request, call)
            if method == SEND and body.get("replyToId"):
                call.method = REPLY  # the SDK's reply: a POST naming its root with replyToId
        except ConnectorError as error:
            call.status, call.ok, call.description = error.status, False, f"{error.code}: {error.message}"
            return error.response()
        conversation = str(call.chat_id)
        try:
            return await self._run(request, call, lambda: work(call, conversation, body))
        finally:
            self._callers.pop(id(call), None)

    def _admit(self, conversation: str) -> None:
        """The per-thread and per-app limits (when on): 429 with the wait; a refused call costs nothing."""
        if conversation in self.missing:
            raise ConnectorError(403, "BotNotInConversationRoster", "The bot is not part of the conversation roster.")
        if not self.rate_limits:
            return
        now = self._clock()
        thread = self._threads.setdefault(conversation.split(";", 1)[0], _Windows())
        wait = max(
            (w for w in (thread.wait(now, self.limits.per_thread), self._app.wait(now, self.limits.per_app)) if w),
            default=None,
        )
        if wait is not None:
            raise ConnectorError(429, "Throttled", "Too many requests", max(wait, 0.001))
        thread.times.append(now)
        self._app.times.append(now)

    @staticmethod
    def _check_size(body: dict[str, Any]) -> None:
        if _utf16_bytes(body) > MESSAGE_BYTES:
            raise ConnectorError(413, "MessageSizeTooBig", "Message size too large")

    @staticmethod
    def _check_stream_size(body: dict[str, Any]) -> None:
        """A streaming activity (start, update or final) past the size limit: 403 ``ContentStreamNotAllowed``
        "Message size too large" (https://learn.microsoft.com/en-us/microsoftteams/platform/bots/streaming-ux#error-codes)."""
        if _utf16_bytes(body) > MESSAGE_BYTES:
            raise ConnectorError(403, "ContentStreamNotAllowed", "Message size too large")

    @staticmethod
    def _check_message(body: dict[str, Any]) -> None:
        if body.get("type") != "message":
            raise ConnectorError(400, "BadArgument", f"Unknown activity type {body.get('type')!r}")
        text = body.get("text")
        if (not isinstance(text, str) or not text) and not body.get("attachments"):
            raise ConnectorError(400, "BadArgument", "Activity must have text or attachments")
        for attachment in body.get("attachments") or []:
            if not isinstance(attachment, dict) or not attachment.get("contentType"):
                raise ConnectorError(400, "BadArgument", "An attachment needs a contentType")

    async def _send(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, SEND, self._create)

    async def _reply(self, request: web.Request) -> web.StreamResponse:
        root = request.match_info["activity"]

        def work(call: RecordedCall, conversation: str, body: dict[str, Any]) -> dict[str, Any]:
            return self._create(call, conversation, {**body, "replyToId": root})

        return await self._handle(request, REPLY, work)

    def _create(self, call: RecordedCall, conversation: str, body: dict[str, Any]) -> dict[str, Any]:
        kind = body.get("type")
        root = body.get("replyToId")
        if root is not None:
            if not conversation.endswith(("@thread.tacv2", "@thread.skype")):
                raise ConnectorError(400, "BadArgument", "Reply chains exist only in channels")
            self._find(conversation, str(root))
        if kind == "typing" or _stream_info(body) is not None:
            return self._stream(call, conversation, body)
        self._check_message(body)
        self._check_size(body)
        self._admit(conversation)
        app_id = self._callers.get(id(call))
        activity = self._store(conversation, BOT, body, str(root) if root else None, app_id)
        call.message_id = activity.activity_id
        return {"id": activity.activity_id}

    def _stream(self, call: RecordedCall, conversation: str, body: dict[str, Any]) -> dict[str, Any]:
        """A typing activity: a plain indicator, or a native stream's update (``streaminfo``), or its final message
        (https://learn.microsoft.com/en-us/microsoftteams/platform/bots/streaming-ux)."""
        info = _stream_info(body)
        if info is None:
            self._admit(conversation)
            self.typing[conversation] = self.typing.get(conversation, 0) + 1
            call.description = "typing"
            return {}
        if not conversation.startswith("a:"):
            raise ConnectorError(403, "ContentStreamNotAllowed", "Content stream is not allowed")
        stream_type = info.get("streamType")
        stream_id = info.get("streamId")
        raw = body.get("text")
        text = raw if isinstance(raw, str) else ""
        if stream_id is None:
            return self._stream_start(call, conversation, body, str(stream_type), text)
        stream = self._open_stream(conversation, str(stream_id))
        call.message_id = stream.activity_id
        self._check_stream_size(body)
        if stream_type == "final":
            if "streamSequence" in info:
                raise ConnectorError(400, "BadRequest", "The final streaming activity must not set streamSequence")
            self._check_message(body)
            self._admit(conversation)
            stream.payload = {k: v for k, v in body.items() if k not in ("entities", "channelData")}
            stream.stream_state = "final"
            stream.modified_ms = round(self._wall() * 1000)
            call.description = "stream final"
            return {"id": stream.activity_id}
        sequence = int(info.get("streamSequence") or 0)
        if sequence <= stream.stream_sequence:
            raise ConnectorError(
                202,
                "ContentStreamSequenceOrderPreConditionFailed",
                "PreCondition failed exception when processing streaming activity.",
            )
        previous = str(stream.payload.get("text", ""))
        if stream_type == "streaming" and not text.startswith(previous):
            raise ConnectorError(
                403, "BadArgument", "Request streamed content should contain the previously streamed content"
            )
        if stream_type == "informative" and len(text) > INFORMATIVE_CHARS:
            raise ConnectorError(400, "BadArgument", "Informative messages must be at most 1000 characters")
        if self.rate_limits and self._clock() - stream.stream_last < STREAM_PACE_S:
            raise ConnectorError(429, "Throttled", "API calls quota exceeded", STREAM_PACE_S)
        self._admit(conversation)
        stream.stream_sequence, stream.stream_last = sequence, self._clock()
        if stream_type == "streaming":
            stream.payload = {"type": "message", "text": text}
        call.description = f"stream {stream_type} #{sequence}"
        return {}

    def _open_stream(self, conversation: str, stream_id: str) -> StoredActivity:
        """The stream ``stream_id``, open and within its two minutes."""
        stream = self._find(conversation, stream_id)
        if stream.stream_state == "final":
            raise ConnectorError(
                403, "ContentStreamNotAllowed", "Content stream is not allowed on a already completed streamed message"
            )
        if stream.stream_state is None:
            raise ConnectorError(400, "BadArgument", f"Activity {stream_id} is no stream")
        if self._clock() - stream.stream_started > STREAM_SECONDS:
            raise ConnectorError(
                403, "ContentStreamNotAllowed", "Content stream finished due to exceeded streaming time."
            )
        return stream

    def _stream_start(
        self, call: RecordedCall, conversation: str, body: dict[str, Any], stream_type: str, text: str
    ) -> dict[str, Any]:
        """A stream's first activity: a ``typing`` activity, ``informative`` or ``streaming``, with text; one open
        stream per chat."""
        info = _stream_info(body) or {}
        if body.get("type") != "typing" or stream_type not in ("informative", "streaming"):
            raise ConnectorError(400, "BadArgument", "Only start streaming and continue streaming types are allowed")
        if not text:
            raise ConnectorError(400, "BadArgument", "Start streaming activities should include text")
        if info.get("streamSequence") != 1:
            raise ConnectorError(400, "BadRequest", "The first streaming activity's streamSequence must be 1")
        if any(a.stream_state == "streaming" for a in self._conversations.get(conversation, [])):
            raise ConnectorError(403, "ContentStreamNotAllowed", "Content stream is not allowed")
        self._check_stream_size(body)
        self._admit(conversation)
        shown = {"type": "message", "text": text if stream_type == "streaming" else ""}
        activity = self._store(conversation, BOT, shown, None, self._callers.get(id(call)))
        activity.stream_state, activity.stream_started = "streaming", self._clock()
        activity.stream_sequence = 1
        activity.stream_last = activity.stream_started
        call.message_id = activity.activity_id
        call.description = f"stream start ({stream_type})"
        return {"id": activity.activity_id}

    async def _update(self, request: web.Request) -> web.StreamResponse:
        activity_id = request.match_info["activity"]

        def work(call: RecordedCall, conversation: str, body: dict[str, Any]) -> dict[str, Any]:
            call.message_id = activity_id
            found = self._find(conversation, activity_id)
            if found.sender != BOT:
                raise ConnectorError(403, "Forbidden", "The bot can update only its own activities")
            if found.stream_state == "streaming":
                raise ConnectorError(403, "ContentStreamNotAllowed", "A stream is updated by its stream activities")
            self._check_message(body)
            self._check_size(body)
            self._admit(conversation)
            found.payload = body
            found.updates += 1
            found.modified_ms = round(self._wall() * 1000)
            return {"id": activity_id}

        return await self._handle(request, UPDATE, work)

    async def _delete(self, request: web.Request) -> web.StreamResponse:
        activity_id = request.match_info["activity"]

        def work(call: RecordedCall, conversation: str, body: dict[str, Any]) -> dict[str, Any]:
            call.message_id = activity_id
            found = self._find(conversation, activity_id)
            if found.sender != BOT:
                raise ConnectorError(403, "Forbidden", "The bot can delete only its own activities")
            self._admit(conversation)
            found.deleted = True
            if found.stream_state == "streaming":
                found.stream_state = "final"  # a deleted stream is over: no more activity, the chat may stream
            found.payload = {"type": "message", "text": ""}
            found.modified_ms = round(self._wall() * 1000)
            return {}

        return await self._handle(request, DELETE, work)

    async def _members(self, request: web.Request) -> web.StreamResponse:
        """Get Conversation Members: the person of a conversation (one per conversation: the mock's chats have one
        person besides the bot) with their Entra object id (:func:`mocks.teams.graph.person_of`)."""

        def work(call: RecordedCall, conversation: str, body: dict[str, Any]) -> list[Any]:
            self._admit(conversation)
            user = graph.person_of(conversation)
            return [{"id": f"29:{user}", "name": "A person", "aadObjectId": user}]  # a bare array, as the Connector's

        return await self._handle(request, MEMBERS, work)

    def _user(self, request: web.Request) -> str:
        """The person a Graph ``/users/{id}`` route names: one of a personal chat the mock holds, else 404."""
        user = request.match_info["user"]
        if not any(graph.person_of(c) == user for c in self._conversations if c.startswith("a:")):
            raise ConnectorError(404, "NotFound", f"User {user} not found")
        return user

    async def _list_installed(self, request: web.Request) -> web.StreamResponse:
        """List apps installed for a user: the calling app (its Graph token's client id) with its bot, and OneNote;
        ``teamsAppDefinition`` only with ``$expand``, its ``bot`` only with
        ``$expand=teamsAppDefinition($expand=bot)``."""
        return await self._graph_get(request, LIST_INSTALLED, self._installed_apps)

    def _installed_apps(self, request: web.Request, app_id: str) -> dict[str, Any]:
        user = self._user(request)
        expand = request.query.get("$expand", "")
        value = []
        for installed, name in ((graph.ONENOTE_APP, "OneNote"), (app_id, "streamrelay (mock)")):
            item: dict[str, Any] = {"id": graph.installation_id(user, installed)}
            if expand.startswith("teamsAppDefinition"):
                definition: dict[str, Any] = {"teamsAppId": installed, "displayName": name, "version": "1.0.0"}
                if "$expand=bot" in expand:
                    definition["bot"] = {"id": installed} if installed == app_id else None
                item["teamsAppDefinition"] = definition
            value.append(item)
        return {"value": value}

    async def _installed_chat(self, request: web.Request) -> web.StreamResponse:
        """Get the chat between a user and an installed app: ``19:{user}_{app}@unq.gbl.spaces``."""

        def answer(request: web.Request, app_id: str) -> dict[str, Any]:
            user = self._user(request)
            installed = graph.installed_app(request.match_info["installation"], user)
            if installed is None:
                raise ConnectorError(404, "NotFound", "Installation not found")
            return {"id": graph.personal_chat_id(user, installed), "chatType": "oneOnOne"}

        return await self._graph_get(request, GET_APP_CHAT, answer)

    def _graph_app(self, request: web.Request) -> str | None:
        """The app a request's Graph token was issued to, or None (no token, or not a Graph one: 401)."""
        return self._graph_tokens.get(request.headers.get("Authorization", "").removeprefix("Bearer "))

    def _check_permission(self, roles: str) -> None:
        """403 Forbidden naming ``roles`` unless the app was granted Graph's application permission
        (:attr:`graph_permission`)."""
        if not self.graph_permission:
            raise ConnectorError(
                403, "Forbidden", f"Missing role permissions on the request. API requires one of {roles}."
            )

    async def _graph_get(
        self, request: web.Request, method: str, answer: Callable[[web.Request, str], dict[str, Any]]
    ) -> web.StreamResponse:
        """One Graph read that is no message list: its token (401), the permission (403), its script, ``answer``."""
        call = RecordedCall(method=method, chat_id=None, message_id=None, text=None, t=self._clock())
        self.calls.append(call)
        app_id = self._graph_app(request)
        if app_id is None:
            return _refused(call, _graph_unauthorized())

        def commit() -> dict[str, Any]:
            self._check_permission(INSTALLATION_READ_ROLES)
            return answer(request, app_id)

        return await self._run(request, call, commit)

    # ------------------------------------------------------------ Microsoft Graph reads (mocks.teams.graph)

    async def _list_chat(self, request: web.Request) -> web.StreamResponse:
        chat = request.match_info["chat"]

        def select() -> list[StoredActivity]:
            if not chat.startswith("19:"):  # a personal chat's Graph id is 19:{user}_{app}@unq.gbl.spaces, not a:...
                raise ConnectorError(404, "NotFound", f"Chat {chat} not found")
            personal = graph.personal_parts(chat)
            if personal is not None:  # the a:... conversation of that person with that app
                user, app = personal
                for conversation, activities in self._conversations.items():
                    if conversation.startswith("a:") and graph.person_of(conversation) == user:
                        return [a for a in activities if a.sender != BOT or (a.app_id or "").lower() == app]
                raise ConnectorError(404, "NotFound", f"Chat {chat} not found")
            return self._conversations.get(chat, [])

        return await self._graph_list(request, LIST_CHAT, chat, select, chat_id=chat)

    def _channel(self, request: web.Request) -> str:
        team, channel = request.match_info["team"], request.match_info["channel"]
        if not GUID_RE.match(team):
            raise ConnectorError(400, "BadRequest", f"Invalid team id {team!r}: a team is its group's id (a GUID)")
        if not channel.endswith(("@thread.tacv2", "@thread.skype")):
            raise ConnectorError(404, "NotFound", f"Channel {channel} not found")
        return channel

    async def _list_channel(self, request: web.Request) -> web.StreamResponse:
        channel = request.match_info["channel"]

        def select() -> list[StoredActivity]:
            self._channel(request)
            return [a for a in self._conversations.get(channel, []) if a.reply_to is None]

        return await self._graph_list(request, LIST_CHANNEL, channel, select, chat_id=None)

    async def _list_replies(self, request: web.Request) -> web.StreamResponse:
        channel, root = request.match_info["channel"], request.match_info["message"]

        def select() -> list[StoredActivity]:
            self._channel(request)
            self._find(channel, root)
            return [a for a in self._conversations.get(channel, []) if a.reply_to == root]

        return await self._graph_list(request, LIST_REPLIES, channel, select, chat_id=None)

    async def _get_chat_message(self, request: web.Request) -> web.StreamResponse:
        chat = request.match_info["chat"]
        if not chat.startswith("19:"):
            return await self._graph_get_message(request, chat, lambda: [], chat_id=chat)
        return await self._graph_get_message(request, chat, lambda: self._conversations.get(chat, []), chat_id=chat)

    async def _get_channel_message(self, request: web.Request) -> web.StreamResponse:
        channel = request.match_info["channel"]

        def select() -> list[StoredActivity]:
            self._channel(request)
            return [a for a in self._conversations.get(channel, []) if a.reply_to is None]

        return await self._graph_get_message(request, channel, select, chat_id=None)

    async def _get_reply(self, request: web.Request) -> web.StreamResponse:
        channel, root = request.match_info["channel"], request.match_info["message"]

        def select() -> list[StoredActivity]:
            self._channel(request)
            return [a for a in self._conversations.get(channel, []) if a.reply_to == root]

        return await self._graph_get_message(request, channel, select, chat_id=None)

    async def _graph_get_message(
        self,
        request: web.Request,
        conversation: str,
        select: Callable[[], list[StoredActivity]],
        *,
        chat_id: str | None,
    ) -> web.StreamResponse:
        """One Graph Get chatMessage (https://learn.microsoft.com/en-us/graph/api/chatmessage-get): its Graph token
        (401), the app's permission (403), its script, then the message (a deleted one with ``deletedDateTime``) or
        404 ``NotFound``."""
        wanted = request.match_info["id"]
        call = RecordedCall(method=GET_MESSAGE, chat_id=conversation, message_id=wanted, text=None, t=self._clock())
        self.calls.append(call)
        if self._graph_app(request) is None:
            return _refused(call, _graph_unauthorized())

        def commit() -> dict[str, Any]:
            self._check_permission(MESSAGE_READ_ROLES)
            found = next((a for a in select() if a.activity_id == wanted), None)
            if found is None:
                raise ConnectorError(404, "NotFound", f"Message {wanted} not found")
            return _chat_message(found, chat_id)

        return await self._run(request, call, commit)

    async def _graph_list(
        self,
        request: web.Request,
        method: str,
        conversation: str,
        select: Callable[[], list[StoredActivity]],
        *,
        chat_id: str | None,
    ) -> web.StreamResponse:
        """One Graph list call: its Graph token (401), the app's permission (403), ``$top`` and ``$orderby``
        (400), its script (faults, latency), then a page of the selected activities, newest first."""
        call = RecordedCall(method=method, chat_id=conversation, message_id=None, text=None, t=self._clock())
        self.calls.append(call)
        query = dict(request.query)
        try:
            if self._graph_app(request) is None:
                raise _graph_unauthorized()
            top = _graph_top(query.get("$top"))
            order = query.get("$orderby", "lastModifiedDateTime desc")
            if order not in ("lastModifiedDateTime desc", "createdDateTime desc") or (
                method != LIST_CHAT and "$orderby" in query
            ):
                raise ConnectorError(400, "BadRequest", f"$orderby {order!r} is not supported here")
            offset = graph.offset_of(query.get("$skiptoken"))
            if offset is None:
                raise ConnectorError(400, "BadRequest", "Invalid $skiptoken")
        except ConnectorError as error:
            return _refused(call, error)

        def commit() -> dict[str, Any]:
            self._check_permission(MESSAGE_READ_ROLES)
            # newest stored first, then by the order asked (stable: messages of one millisecond stay newest first)
            chosen = [a for a in reversed(select()) if a.stream_state != "streaming" or a.payload.get("text")]
            if order.startswith("created"):
                chosen.sort(key=lambda a: a.created_ms, reverse=True)
            else:
                chosen.sort(key=lambda a: a.modified_ms, reverse=True)
            messages = [_chat_message(a, chat_id) for a in chosen]
            url = str(request.url.with_query(None))
            kept = {k: v for k, v in query.items() if k != "$skiptoken"}
            return graph.page(messages, url=url, query=kept, top=top, offset=offset)

        return await self._run(request, call, commit)

    async def _unknown(self, request: web.Request) -> web.Response:
        return ConnectorError(404, "NotFound", f"No route {request.method} {request.path}").response()


def _graph_top(raw: str | None) -> int:
    """``$top``: 1-50 (Graph's maximum for these lists), :data:`graph.DEFAULT_TOP` when absent."""
    if raw is None:
        return graph.DEFAULT_TOP
    if not raw.isdigit() or not 1 <= int(raw) <= graph.MAX_TOP:
        raise ConnectorError(400, "BadRequest", f"$top must be 1-{graph.MAX_TOP}, not {raw!r}")
    return int(raw)


async def serve_forever(host: str = "127.0.0.1", port: int = 8086, rate_limits: bool = False) -> None:
    """Run a mock until cancelled (``streamrelay mock teams --port N``); prints its base URL."""
    await serve_mock(MockTeams(rate_limits=rate_limits), host, port)


def _graph_unauthorized() -> ConnectorError:
    """Graph's answer to a request without a Graph token (https://learn.microsoft.com/en-us/graph/errors)."""
    return ConnectorError(401, "InvalidAuthenticationToken", "Access token is empty or not a Microsoft Graph token.")


MESSAGE_READ_ROLES = "'ChatMessage.Read.Chat, Chat.Read.All, ChannelMessage.Read.Group, ChannelMessage.Read.All'"
"""The application permissions a message read needs (chatmessage-get, chat-list-messages, channel-list-messages)."""
INSTALLATION_READ_ROLES = "'TeamsAppInstallation.ReadForUser.All, TeamsAppInstallation.Read.All'"
"""The application permissions a read of a person's installed apps needs (userteamwork-list-installedapps)."""


def _refused(call: RecordedCall, error: ConnectorError) -> web.StreamResponse:
    """``error``'s answer, recorded on ``call``."""
    call.status, call.ok, call.description = error.status, False, f"{error.code}: {error.message}"
    return error.response()


def _chat_message(activity: StoredActivity, chat_id: str | None) -> dict[str, Any]:
    """A stored activity as Graph's chatMessage (:func:`mocks.teams.graph.chat_message`); the bot's own carry its
    app id."""
    bot_app = (activity.app_id or "00000000-0000-0000-0000-000000000000") if activity.sender == BOT else None
    return graph.chat_message(
        activity_id=activity.activity_id,
        payload=activity.payload,
        reply_to=activity.reply_to,
        created_ms=activity.created_ms,
        modified_ms=activity.modified_ms,
        deleted=activity.deleted,
        app_id=bot_app,
        chat_id=chat_id,
    )
