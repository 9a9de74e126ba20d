"""The mock WhatsApp Cloud API: routes, auth, validation, the customer service window, rate limits, faults,
recording (rules: :mod:`mocks.whatsapp`)."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from streamrelay.mocks.common import ChatId, Hang, MockServer, RecordedCall, serve_mock, utf16_len
from streamrelay.mocks.whatsapp.statuses import StatusSender, message_payload, status_payload

MESSAGES = "messages"
METHODS = (MESSAGES,)
"""The one method (``POST /{version}/{phone-number-id}/messages``): sends, and marks read with typing."""
MAX_TEXT = 4_096
MAX_CAPTION = 1_024
MEDIA_TYPES = ("image", "document", "audio", "video")
VERSION_RE = re.compile(r"^v\d+\.\d+$")
WA_ID_RE = re.compile(r"^\d{6,20}$")
PERSON = "person"
PHONE_ID = "106540352242922"
"""The business phone number id a press's webhook names (the dry run's and the tests' token use it)."""
BOT = "bot"
_CODE_RE = re.compile(r"^(\d+)(?::\s*(.*))?$", re.S)
_GAVE_UP = {"error": {"message": "the client gave up", "type": "OAuthException", "code": 2}}


class GraphError(Exception):
    """An error answer in the Graph API's shape (``{"error": {"message", "type", "code", "error_data",
    "fbtrace_id"}}``, https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes)."""

    def __init__(
        self, status: int, code: int, message: str, details: str | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details
        self.retry_after_s = retry_after_s

    def response(self) -> web.Response:
        error: dict[str, Any] = {
            "message": self.message,
            "type": "OAuthException",
            "code": self.code,
            "fbtrace_id": "AmockTraceId0",
        }
        if self.details:
            error["error_data"] = {"messaging_product": "whatsapp", "details": self.details}
        headers = {"Retry-After": str(max(1, round(self.retry_after_s)))} if self.retry_after_s is not None else None
        return web.json_response({"error": error}, status=self.status, headers=headers)


def fault_error(status: int, description: str | None, retry_after_s: float | None = None) -> GraphError:
    """A scripted fault in the Graph API's shape: a description ``CODE: text`` chooses the code (``131047: …``);
    else a 429 is 130429 (throughput), a 5xx 131000 (something went wrong), another status 100. A scripted
    ``retry_after_s`` is sent as a ``Retry-After`` header (Meta documents none: a script's way to set the wait)."""
    match = _CODE_RE.match(description or "")
    if match:
        code = int(match.group(1))
        return GraphError(status, code, match.group(2) or f"error {code}", match.group(2), retry_after_s)
    if status == 429:
        return GraphError(
            429, 130429, "(#130429) Rate limit hit", "Cloud API message throughput has been reached.", retry_after_s
        )
    if status >= 500:
        return GraphError(status, 131000, "Something went wrong", description)
    return GraphError(status, 100, description or "(#100) Invalid parameter")


@dataclass
class StoredMessage:
    """One message of a chat: ``message_id`` (``wamid.…``), who wrote it, its ``text`` (a media item's caption),
    its ``type`` and the whole payload."""

    message_id: str
    sender: str
    text: str
    type: str
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ApprovedTemplate:
    """A message template approved in WhatsApp Manager: its ``body`` with ``{{1}}``… variables."""

    name: str
    language: str
    body: str

    @property
    def variables(self) -> int:
        """How many ``{{n}}`` variables the body has."""
        return len(set(re.findall(r"\{\{(\d+)\}\}", self.body)))


ANSWER_WAITING = ApprovedTemplate(
    "streamrelay_answer_waiting",
    "en_US",
    "An answer to your question is ready: {{1}}. Reply to this message to read it.",
)
"""The one template the mock knows approved (a utility template a deployment would submit for review)."""


@dataclass(frozen=True)
class WhatsAppLimits:
    """The documented limits: 80 messages a second per business number
    (https://developers.facebook.com/docs/whatsapp/throughput) and the pair rate limit, one message every 6 s to one
    user with bursts of up to 45 (https://developers.facebook.com/docs/whatsapp/cloud-api/overview#pair-rate-limits)."""

    per_second: float = 80.0
    burst: float = 80.0
    pair_per_second: float = 1 / 6
    pair_burst: float = 45.0


class _Bucket:
    """A leaky bucket: each message adds one, ``rate`` leak out a second; past ``burst`` a message is refused."""

    def __init__(self) -> None:
        self.level, self.at = 0.0, 0.0

    def fits(self, now: float, rate: float, burst: float) -> bool:
        return max(0.0, self.level - (now - self.at) * rate) + 1 <= burst

    def take(self, now: float, rate: float) -> None:
        self.level, self.at = max(0.0, self.level - (now - self.at) * rate) + 1, now


class MockWhatsApp(MockServer):
    """The mock WhatsApp Cloud API (Graph API ``/{version}/{phone-number-id}/messages``). See :mod:`mocks.whatsapp`.

    Args:
        rate_limits: enforce :class:`WhatsAppLimits` (130429 and 131056 past them).
        limits: the numbers used when ``rate_limits`` is on.
        hang_s: how long a scripted timeout holds its answer.
        clock: monotonic seconds for ``RecordedCall.t`` and rate limits.
    """

    platform = "whatsapp"
    title = "WhatsApp Cloud API"

    def __init__(
        self,
        *,
        rate_limits: bool = False,
        limits: WhatsAppLimits | None = None,
        hang_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(METHODS, rate_limits=rate_limits, hang_s=hang_s, clock=clock)
        self.limits = limits or WhatsAppLimits()
        self.closed_windows: set[str] = set()
        """Users whose last message is more than 24 hours old: a send to them is 131047."""
        self.templates: dict[tuple[str, str], ApprovedTemplate] = {
            (ANSWER_WAITING.name, ANSWER_WAITING.language): ANSWER_WAITING
        }
        """Approved templates by ``(name, language code)``: another is 132001."""
        self._chats: dict[str, list[StoredMessage]] = {}
        self._typing: dict[str, str] = {}
        self._counter = 0
        self._throughput: dict[str, _Bucket] = {}
        self._pairs: dict[tuple[str, str], _Bucket] = {}
        self.statuses: StatusSender | None = None
        """Where status webhooks go (:meth:`webhook_to`; None: nowhere)."""
        self.failing = 0
        """How many of the next sends are answered (a ``wamid``) but never shown: a ``failed`` status follows."""

    def webhook_to(
        self,
        url: str,
        app_secret: str,
        *,
        delay_ms: float = 0.0,
        drop: int = 0,
        retry_for_s: float = 120.0,
        also: tuple[str, ...] = (),
    ) -> StatusSender:
        """Post status webhooks of the bot's messages to ``url``, signed with ``app_secret``
        (:mod:`mocks.whatsapp.statuses`); ``delay_ms`` before each, the next ``drop`` messages' never posted;
        ``also``: more URLs behind the same load balancer, each attempt to the next one in turn."""
        old = self.statuses
        self.statuses = StatusSender(url, app_secret, also=also, delay_ms=delay_ms, drop=drop, retry_for_s=retry_for_s)
        if old is not None:
            self.statuses.answers, self.statuses.posted = old.answers, old.posted
        return self.statuses

    async def stop(self) -> None:
        """Stop status deliveries under way, then the server (:meth:`MockServer.stop`)."""
        if self.statuses is not None:
            await self.statuses.close()
        await super().stop()

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/{version}/{phone}/messages", self._messages)
        app.router.add_route("*", "/{tail:.*}", self._unknown)

    # ------------------------------------------------------------ scripting and state

    def reset(self) -> None:
        """Forget chats, messages, closed windows, calls, faults, latencies, counters and rate state."""
        super().reset()
        self._chats, self._typing, self._counter = {}, {}, 0
        self._throughput, self._pairs = {}, {}
        self.closed_windows = set()
        self.failing = 0

    def chats(self) -> list[ChatId]:
        """Users the bot sent a message to, in first-message order."""
        return [to for to, msgs in self._chats.items() if any(m.sender == BOT for m in msgs)]

    def visible(self, chat_id: ChatId) -> list[tuple[int | str, str]]:
        """What the person sees of the bot in ``chat_id``: ``(message id, text)`` of its messages in order (a media
        item shows its caption, as every mock shows media)."""
        return [(m.message_id, m.text) for m in self._chats.get(str(chat_id), []) if m.sender == BOT]

    def messages(self, chat_id: ChatId) -> list[StoredMessage]:
        """Every message of chat ``chat_id`` (the person's too), in order."""
        return list(self._chats.get(str(chat_id), []))

    def user_message(self, chat_id: ChatId, text: str) -> str:
        """Store a message the person ``chat_id`` wrote (it opens their 24-hour window); return its id.

        Raises:
            ValueError: ``chat_id`` is not a WhatsApp user id (digits).
        """
        to = str(chat_id)
        if not WA_ID_RE.match(to):
            raise ValueError(f"{to!r} is not a WhatsApp user id (digits)")
        self.closed_windows.discard(to)
        return self._store(to, PERSON, text, "text", {"text": {"body": text}}).message_id

    def buttons_of(self, chat_id: ChatId, message_id: str) -> list[tuple[str, str]]:
        """The ``(id, title)`` reply buttons of the bot's message ``message_id`` (``[]``: none)."""
        for message in self._chats.get(str(chat_id), []):
            if message.message_id == message_id and message.sender == BOT and message.type == "interactive":
                return [
                    (b["reply"]["id"], b["reply"]["title"]) for b in message.payload["interactive"]["action"]["buttons"]
                ]
        return []

    def press(
        self, chat_id: ChatId, message_id: int | str, data: str | None, user: int | str | None = None
    ) -> dict[str, Any]:
        """The person of chat ``chat_id`` taps reply button ``data`` (None: the first) of the bot's message
        ``message_id``: their ``interactive`` ``button_reply`` message is stored (it opens the window) and the
        ``messages`` webhook payload is returned and, when :meth:`webhook_to` set a URL, posted there signed
        (https://developers.facebook.com/documentation/business-messaging/whatsapp/messages/interactive-reply-buttons-messages).
        ``user`` is ignored but for checking: on WhatsApp only the chat's person can tap (a chat is one person).

        Raises:
            ValueError: no such message or button, or ``user`` is not the chat's person.
        """
        to = str(chat_id)
        if user is not None and str(user) != to:
            raise ValueError(f"only {to} can tap buttons in their chat (a WhatsApp chat is one person)")
        buttons = self.buttons_of(to, str(message_id))
        pressed = [(bid, title) for bid, title in buttons if data is None or bid == data]
        if not pressed:
            raise ValueError(f"message {message_id} has no reply button {data!r}: its buttons are {buttons}")
        bid, title = pressed[0]
        reply = {"type": "button_reply", "button_reply": {"id": bid, "title": title}}
        mine = self._store(to, PERSON, title, "interactive", {"interactive": reply})
        self.closed_windows.discard(to)
        message = {
            "from": to,
            "id": mine.message_id,
            "timestamp": str(int(time.time())),
            "type": "interactive",
            "interactive": reply,
            "context": {"from": "15550000000", "id": str(message_id)},
        }
        payload = message_payload(PHONE_ID, to, message)
        if self.statuses is not None:
            self.statuses.send([(payload, mine.message_id, "press")])
        return payload

    def typing_for(self, chat_id: ChatId) -> str | None:
        """The person's message id the bot last showed typing on in ``chat_id`` (None: never)."""
        return self._typing.get(str(chat_id))

    def _store(self, to: str, sender: str, text: str, typ: str, payload: dict[str, Any]) -> StoredMessage:
        self._counter += 1
        raw = f"mock:{to}:{self._counter:08d}".encode()
        message = StoredMessage("wamid." + base64.b64encode(raw).decode(), sender, text, typ, payload)
        self._chats.setdefault(to, []).append(message)
        return message

    # ------------------------------------------------------------ request handling

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        phone = request.match_info["phone"]
        call = RecordedCall(method=MESSAGES, chat_id=None, message_id=None, text=None, t=self._clock())
        self.calls.append(call)
        try:
            body = await self._begin(request, phone)
            call.chat_id = body.get("to") if isinstance(body.get("to"), str) else None
            call.text = _text_of(body)
            result = await self._scripted(
                call,
                lambda: self._commit(call, phone, body),
                lambda f: fault_error(f.status, f.description, f.retry_after_s),
            )
        except GraphError as error:
            call.status, call.ok, call.description = error.status, False, f"{error.code}: {error.message}"
            return error.response()
        if result in (Hang.RESET, Hang.RESET_AFTER_COMMIT):
            self._hang_up(request)
        if isinstance(result, Hang):
            return web.json_response(_GAVE_UP, status=504)
        call.status, call.ok = 200, True
        return web.json_response(result)

    async def _begin(self, request: web.Request, phone: str) -> dict[str, Any]:
        if not VERSION_RE.match(request.match_info["version"]) or not phone.isdigit():
            raise GraphError(400, 100, "Unsupported post request: unknown path components")
        header = request.headers.get("Authorization", "")
        if not header.startswith("Bearer "):
            raise GraphError(400, 190, "An active access token must be used to query information")
        if not re.match(r"^EAA[A-Za-z0-9]{20,}$", header.removeprefix("Bearer ")):
            raise GraphError(401, 190, "Invalid OAuth access token - Cannot parse access token")
        try:
            body = json.loads(await request.read() or b"{}")
        except ValueError:
            raise GraphError(400, 100, "(#100) Invalid JSON in the request body") from None
        if not isinstance(body, dict):
            raise GraphError(400, 100, "(#100) Invalid JSON in the request body")
        if body.get("messaging_product") != "whatsapp":
            raise GraphError(400, 100, "(#100) The parameter messaging_product is required.")
        return body

    def _commit(self, call: RecordedCall, phone: str, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("status") == "read":
            return self._read(call, body)
        to = body.get("to")
        if not isinstance(to, str) or not WA_ID_RE.match(to):
            raise GraphError(400, 100, "(#100) Invalid parameter", "Param to must be a WhatsApp user id")
        typ = body.get("type", "text")
        text = self._template_text(body) if typ == "template" else _checked(typ, body)
        if to in self.closed_windows and typ != "template":  # a template may be sent at any time
            raise GraphError(
                400,
                131047,
                "Re-engagement message",
                "Message failed to send because more than 24 hours have passed since the customer last replied "
                "to this number.",
            )
        self._admit(phone, to)
        callback = body.get("biz_opaque_callback_data")
        callback = callback if isinstance(callback, str) else None
        if self.failing > 0:  # accepted, then failed: a wamid, never shown, a failed status
            self.failing -= 1
            self._counter += 1
            message = StoredMessage(f"wamid.failed{self._counter:08d}", BOT, text, typ, body)
            self._post_statuses(phone, message.message_id, to, callback, failed=True)
        else:
            message = self._store(to, BOT, text, typ, body)
            self._post_statuses(phone, message.message_id, to, callback, failed=False)
        call.message_id = message.message_id
        return {
            "messaging_product": "whatsapp",
            "contacts": [{"input": to, "wa_id": to}],
            "messages": [{"id": message.message_id}],
        }

    def _template_text(self, body: dict[str, Any]) -> str:
        """The text an approved template shows with its parameters.

        Raises:
            GraphError: 132001 for a name and language not approved; 132000 for a parameter count that differs
                (https://developers.facebook.com/documentation/business-messaging/whatsapp/support/error-codes/).
        """
        spec = body.get("template")
        name = spec.get("name") if isinstance(spec, dict) else None
        language = spec.get("language") if isinstance(spec, dict) else None
        code = language.get("code") if isinstance(language, dict) else None
        approved = self.templates.get((str(name), str(code)))
        if approved is None:
            raise GraphError(
                400,
                132001,
                "(#132001) Template name does not exist in the translation",
                f"template name ({name}) does not exist in {code}",
            )
        values: list[str] = []
        for component in spec.get("components") or [] if isinstance(spec, dict) else []:
            if isinstance(component, dict) and component.get("type") == "body":
                values += [str(p.get("text")) for p in component.get("parameters") or [] if isinstance(p, dict)]
        if len(values) != approved.variables:
            raise GraphError(
                400,
                132000,
                "(#132000) Number of parameters does not match the expected number of params",
                f"body: number of localizable_params ({len(values)}) does not match the expected number of params "
                f"({approved.variables})",
            )
        if any(re.search(r"[\n\t]| {5,}", v) for v in values):
            raise GraphError(400, 132018, "(#132018) There was an issue with the parameters in your template.")
        text = approved.body
        for i, value in enumerate(values, 1):
            text = text.replace(f"{{{{{i}}}}}", value)
        return text

    def _post_statuses(self, phone: str, message_id: str, to: str, callback: str | None, *, failed: bool) -> None:
        """The message's status webhooks (``sent`` then ``delivered``, or ``failed`` 131026), when a URL is set."""
        if self.statuses is None:
            return
        if failed:
            states: list[tuple[str, int | None]] = [("failed", 131026)]
        else:
            states = [("sent", None), ("delivered", None)]
        self.statuses.send(
            [(status_payload(phone, message_id, to, st, callback, code), message_id, st) for st, code in states]
        )

    def _read(self, call: RecordedCall, body: dict[str, Any]) -> dict[str, Any]:
        """Mark a person's message as read, with a typing indicator when asked."""
        message_id = body.get("message_id")
        for to, msgs in self._chats.items():
            if any(m.message_id == message_id and m.sender == PERSON for m in msgs):
                call.chat_id, call.message_id, call.description = to, message_id, "read"
                if isinstance(body.get("typing_indicator"), dict):
                    self._typing[to] = str(message_id)
                    call.description = "read, typing"
                return {"success": True}
        raise GraphError(400, 100, "(#100) Invalid parameter", f"message_id {message_id!r} is no received message")

    def _admit(self, phone: str, to: str) -> None:
        """Throughput (130429) and the pair rate limit (131056), when on; a refused message costs nothing."""
        if not self.rate_limits:
            return
        now, lim = self._clock(), self.limits
        number = self._throughput.setdefault(phone, _Bucket())
        pair = self._pairs.setdefault((phone, to), _Bucket())
        if not number.fits(now, lim.per_second, lim.burst):
            raise GraphError(400, 130429, "(#130429) Rate limit hit", "Cloud API message throughput has been reached.")
        if not pair.fits(now, lim.pair_per_second, lim.pair_burst):
            raise GraphError(
                400,
                131056,
                "(#131056) (Business Account, Consumer Account) pair rate limit hit",
                "Too many messages sent from the sender phone number to the same recipient phone number in a short "
                "period of time.",
            )
        number.take(now, lim.per_second)
        pair.take(now, lim.pair_per_second)

    async def _unknown(self, request: web.Request) -> web.Response:
        return GraphError(400, 100, "Unsupported request: unknown path components").response()


def _text_of(body: dict[str, Any]) -> str | None:
    typ = body.get("type", "text")
    part = body.get(typ)
    if not isinstance(part, dict):
        return None
    if typ == "template":
        return f"template {part.get('name')}"
    value = part.get("body") if typ == "text" else part.get("caption")
    return value if isinstance(value, str) else None


def _checked(typ: Any, body: dict[str, Any]) -> str:
    """The text a message shows (a media item: its caption), after the checks of its type."""
    part = body.get(typ) if isinstance(typ, str) else None
    if typ == "text":
        text = part.get("body") if isinstance(part, dict) else None
        if not isinstance(text, str) or not text:
            raise GraphError(400, 100, "(#100) Param text['body'] is required and must be a non-empty string")
        if len(text) > MAX_TEXT:
            raise GraphError(400, 100, f"(#100) Param text['body'] must be at most {MAX_TEXT} characters long")
        return text
    if typ in MEDIA_TYPES:
        if not isinstance(part, dict) or "id" in part:
            raise GraphError(400, 100, f"(#100) Param {typ} must hold a link (this mock stores no uploads)")
        link = part.get("link")
        if not isinstance(link, str) or not link.startswith(("http://", "https://")):
            raise GraphError(
                400, 131009, "(#131009) Parameter value is not valid", f"{typ}.link must be an http(s) URL"
            )
        caption = part.get("caption")
        if caption is not None and typ == "audio":
            raise GraphError(400, 100, "(#100) Param audio['caption'] is not supported")
        if caption is not None and (not isinstance(caption, str) or utf16_len(caption) > MAX_CAPTION):
            raise GraphError(400, 100, f"(#100) Param {typ}['caption'] must be at most {MAX_CAPTION} characters long")
        return caption or ""
    if typ == "interactive":
        return _checked_buttons(part)
    raise GraphError(400, 131051, "(#131051) Unsupported message type", f"type {typ!r} is not supported by this mock")


def _checked_buttons(part: Any) -> str:
    """A reply-buttons message's body text, after its checks: ``interactive.type`` ``button``, a body of 1-1,024
    characters, 1-3 ``reply`` buttons with unique ids of 1-256 characters and unique titles of 1-20
    (https://developers.facebook.com/documentation/business-messaging/whatsapp/messages/interactive-reply-buttons-messages);
    another interactive type is 131051 here (the mock has reply buttons only)."""
    if not isinstance(part, dict) or part.get("type") != "button":
        raise GraphError(400, 131051, "(#131051) Unsupported message type", "this mock sends reply buttons only")
    body = part.get("body")
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str) or not 1 <= utf16_len(text) <= 1024:
        raise GraphError(400, 100, "(#100) Param interactive['body']['text'] must be 1-1024 characters")
    action = part.get("action")
    buttons = action.get("buttons") if isinstance(action, dict) else None
    if not isinstance(buttons, list) or not 1 <= len(buttons) <= 3:
        raise GraphError(400, 131009, "(#131009) Parameter value is not valid", "buttons: 1-3 reply buttons")
    ids, titles = [], []
    for button in buttons:
        reply = button.get("reply") if isinstance(button, dict) and button.get("type") == "reply" else None
        bid = reply.get("id") if isinstance(reply, dict) else None
        title = reply.get("title") if isinstance(reply, dict) else None
        if not isinstance(bid, str) or not 1 <= len(bid) <= 256 or not isinstance(title, str):
            raise GraphError(
                400, 131009, "(#131009) Parameter value is not valid", "a reply button needs an id of 1-256"
            )
        if not 1 <= utf16_len(title) <= 20:
            raise GraphError(
                400, 131009, "(#131009) Parameter value is not valid", f"button title {title!r}: 1-20 characters"
            )
        ids.append(bid)
        titles.append(title)
    if len(set(ids)) != len(ids) or len(set(titles)) != len(titles):
        raise GraphError(400, 131009, "(#131009) Parameter value is not valid", "button ids and titles must be unique")
    return text


async def serve_forever(host: str = "127.0.0.1", port: int = 8085, rate_limits: bool = False) -> None:
    """Run a mock until cancelled (``streamrelay mock whatsapp --port N``); prints its base URL."""
    await serve_mock(MockWhatsApp(rate_limits=rate_limits), host, port)
