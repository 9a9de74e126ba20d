"""A mock Telegram Bot API server: real HTTP on loopback, strict like Telegram, every call recorded.

aiogram talks to it unchanged::

    async with MockTelegram() as mock:
        session = AiohttpSession(api=TelegramAPIServer.from_base(mock.base_url))
        bot = Bot("123456:ABC-DEF", session=session)

Routes ``POST|GET /bot{token}/{method}`` with form-encoded, multipart, JSON or query parameters. Methods:
``getMe``, ``sendMessage``, ``editMessageText``, ``deleteMessage``, ``sendChatAction`` (names are
case-insensitive, as on Telegram). A token not shaped ``<digits>:<secret>`` gets 401 ``Unauthorized``; an
unknown method gets 404 ``Not Found``.

What it reproduces (https://core.telegram.org/bots/api#sendmessage,
https://core.telegram.org/bots/api#formatting-options):

- Text is trimmed of leading and trailing whitespace before it is stored (entities shift with it); empty text
  is 400 ``Bad Request: message text is empty``; more than 4096 code points after entity parsing is 400
  ``Bad Request: message is too long`` (the server counts code points; a text of <= 4096 UTF-16 code units
  always fits, so clients may split by UTF-16 units safely).
- ``entities`` (JSON array, UTF-16 offsets) are validated: known type, offset/length inside the text, ``url``
  for ``text_link``; else 400 ``Bad Request: can't parse entities: ...``. Given entities win over
  ``parse_mode``, as on Telegram.
- ``parse_mode=HTML`` is parsed with the supported tags into text + entities (unsupported or unbalanced tags
  are 400 ``can't parse entities``). ``MarkdownV2``/``Markdown`` are NOT parsed: the text is stored verbatim
  and its escaping rules are not checked (the streamrelay adapter never sends ``parse_mode``).
- Editing with the same text and entities is 400 ``message is not modified: ...``; editing or deleting a
  message (or in a chat) that does not exist is 400 ``message to edit not found`` /
  ``message to delete not found``; a reply to a missing message is 400 ``message to be replied not found``
  unless ``allow_sending_without_reply``.

Rate limits (off by default; https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this),
see :class:`TelegramLimits`: sends and edits both count; past a limit the answer is HTTP 429 ::

    {"ok": false, "error_code": 429, "description": "Too Many Requests: retry after N",
     "parameters": {"retry_after": N}}

with header ``Retry-After: N`` (N = whole seconds, rounded up, at least 1). A refused call costs nothing.

Per call, in order: record the call, count it (per method, 1-based), wait its scripted latency, apply its
scripted fault, validate, check flood control, store, answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import math
import re
import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from http import HTTPStatus
from types import TracebackType
from typing import Any, Self

from aiohttp import web

MAX_TEXT_CHARS = 4096
"""Text limit in code points after entity parsing (https://core.telegram.org/bots/api#sendmessage)."""

NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are exactly the "
    "same as a current content and reply markup of the message"
)
METHODS = ("getMe", "sendMessage", "editMessageText", "deleteMessage", "sendChatAction")
_GAVE_UP = {"ok": False, "error_code": 504, "description": "Gateway Timeout"}
_METHOD_BY_LOWER = {m.lower(): m for m in METHODS}
_TOKEN_RE = re.compile(r"^\d+:[A-Za-z0-9_-]+$")
_ENTITY_TYPES = frozenset((
    "mention", "hashtag", "cashtag", "bot_command", "url", "email", "phone_number", "bold", "italic",
    "underline", "strikethrough", "spoiler", "blockquote", "expandable_blockquote", "code", "pre",
    "text_link", "text_mention", "custom_emoji", "date_time",
))  # fmt: skip
_ENTITY_EXTRAS = ("url", "user", "language", "custom_emoji_id", "unix_time", "date_time_format")
_CHAT_ACTIONS = frozenset((
    "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
    "upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note",
))  # fmt: skip

ChatId = int | str
Entity = dict[str, Any]


class Hang(enum.StrEnum):
    """Scripted timeouts: the answer never comes within any client timeout."""

    AFTER_COMMIT = "timeout_after_commit"
    """The call is processed (a message is stored), then the answer hangs."""
    BEFORE_COMMIT = "timeout_before_commit"
    """The call hangs and is never processed."""


@dataclass(frozen=True)
class TelegramLimits:
    """Flood control the mock enforces when ``rate_limits`` is on (sends and edits count alike).

    Official FAQ: about 1 message per second per chat with short bursts, 20 messages per minute per group,
    about 30 messages per second per bot (https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this).
    Edits count toward flood control (observed: https://grammy.dev/advanced/flood).

    Attributes:
        chat_burst: token-bucket capacity per (bot, chat).
        chat_per_s: token refill per second per (bot, chat).
        group_per_min: calls per sliding 60 s window per (bot, group/supergroup/channel).
        global_per_s: calls per sliding 1 s window per bot.
    """

    chat_burst: int = 3
    chat_per_s: float = 1.0
    group_per_min: int = 20
    global_per_s: int = 30


@dataclass
class RecordedCall:
    """One call the mock received (failed ones too), in arrival order.

    ``status`` is the HTTP status answered; ``None`` while unanswered and for a scripted hang (the client
    gave up first). ``retry_after_s`` is set on a 429. ``message_id`` is the new id for a stored send, the
    requested id for edits and deletes. ``text`` is the text as requested (before trimming/parsing).
    """

    method: str
    chat_id: ChatId | None
    message_id: int | None
    text: str | None
    t: float
    status: int | None = None
    ok: bool = False
    retry_after_s: float | None = None
    description: str | None = None


@dataclass
class StoredMessage:
    """A message as a person sees it: current text and entities (UTF-16 offsets)."""

    message_id: int
    chat_id: ChatId
    text: str
    entities: list[Entity]
    date: int
    edit_date: int | None = None
    thread_id: int | None = None
    reply_to: int | None = None
    deleted: bool = False


class _ApiError(Exception):
    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after


def _bad(description: str) -> _ApiError:
    return _ApiError(400, f"Bad Request: {description}")


def _bad_entities(detail: str) -> _ApiError:
    return _bad(f"can't parse entities: {detail}")


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units (Telegram's entity unit)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _fault_error(reply: Mapping[str, Any]) -> _ApiError:
    status = int(reply["status"])
    if status < 400:
        raise ValueError(f"a fault reply needs an error status (>= 400), got {status}")
    description = reply.get("description")
    if status == 429:
        retry_after = max(1, math.ceil(float(reply.get("retry_after_s", 1))))
        return _ApiError(429, description or f"Too Many Requests: retry after {retry_after}", retry_after)
    return _ApiError(status, description or HTTPStatus(status).phrase)


# ---------------------------------------------------------------- parameters and text


def _chat_key(value: Any) -> ChatId | None:
    """A chat id as Telegram reads it: an integer, or an ``@username`` string; ``None`` if missing."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        return text


def _int_param(params: Mapping[str, Any], name: str) -> int | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _bad(f"invalid {name} specified") from None


def _json_param(params: Mapping[str, Any], name: str) -> Any:
    value = params.get(name)
    if not isinstance(value, str):
        return value
    if value == "":
        return None
    try:
        return json.loads(value)
    except ValueError:
        raise _bad(f"can't parse {name} JSON object") from None


def _require_chat(params: Mapping[str, Any]) -> ChatId:
    chat = _chat_key(params.get("chat_id"))
    if chat is None:
        raise _bad("chat_id is empty")
    if isinstance(chat, str) and not (chat.startswith("@") and len(chat) > 1):
        raise _bad("chat not found")
    return chat


def _validate_entities(value: Any, text: str) -> list[Entity]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _bad_entities("entities must be an array")
    size = utf16_len(text)
    out: list[Entity] = []
    for i, raw in enumerate(value):
        if not isinstance(raw, dict):
            raise _bad_entities(f"entity {i} is not an object")
        kind, offset, length = raw.get("type"), raw.get("offset"), raw.get("length")
        if kind not in _ENTITY_TYPES:
            raise _bad_entities(f"unsupported entity type {kind!r}")
        if not (type(offset) is int and type(length) is int) or offset < 0 or length <= 0:
            raise _bad_entities(f"entity {i} has a bad offset or length")
        if offset + length > size:
            raise _bad_entities(f"entity {i} ends at {offset + length}, beyond the text ({size} UTF-16)")
        if kind == "text_link" and not raw.get("url"):
            raise _bad_entities(f"entity {i}: text_link needs a url")
        entity: Entity = {"type": kind, "offset": offset, "length": length}
        entity.update({k: raw[k] for k in _ENTITY_EXTRAS if raw.get(k) is not None})
        out.append(entity)
    return out


def _trim(text: str, entities: list[Entity]) -> tuple[str, list[Entity]]:
    """Strip surrounding whitespace as Telegram does; shift and clip entities with the text."""
    body = text.strip()
    shift = utf16_len(text[: len(text) - len(text.lstrip())])
    size = utf16_len(body)
    out: list[Entity] = []
    for entity in entities:
        start = max(entity["offset"] - shift, 0)
        end = min(entity["offset"] + entity["length"] - shift, size)
        if end > start:
            out.append({**entity, "offset": start, "length": end - start})
    return body, out


_HTML_TAGS = {
    "b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline", "ins": "underline",
    "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough", "tg-spoiler": "spoiler",
    "span": "spoiler", "code": "code", "pre": "pre", "a": "text_link", "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}  # fmt: skip


class _HtmlEntities(HTMLParser):
    """parse_mode=HTML → (text, entities), for the tags listed at https://core.telegram.org/bots/api#html-style."""

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self._source = source
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", source)]
        self.parts: list[str] = []
        self.entities: list[Entity] = []
        self._size = 0
        self._open: list[tuple[str, Entity | None]] = []

    def _byte_offset(self) -> int:
        line, col = self.getpos()
        return len(self._source[: self._line_starts[line - 1] + col].encode())

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = dict(attrs)
        kind = _HTML_TAGS.get(tag)
        if kind is None or (tag == "span" and attr.get("class") != "tg-spoiler"):
            raise _bad_entities(f'Unsupported start tag "{tag}" at byte offset {self._byte_offset()}')
        entity: Entity = {"type": kind, "offset": self._size}
        if tag == "a":
            entity["url"] = attr.get("href") or ""
        elif tag == "blockquote" and "expandable" in attr:
            entity["type"] = "expandable_blockquote"
        elif tag == "tg-emoji":
            entity["custom_emoji_id"] = attr.get("emoji-id") or ""
        elif tag == "code" and self._open and self._open[-1][0] == "pre":
            pre = self._open[-1][1]
            language = (attr.get("class") or "").removeprefix("language-")
            if pre is not None and language:
                pre["language"] = language
            self._open.append((tag, None))  # <pre><code class="language-x"> is one pre entity
            return
        self._open.append((tag, entity))

    def handle_endtag(self, tag: str) -> None:
        if not self._open or self._open[-1][0] != tag:
            expected = f'"</{self._open[-1][0]}>"' if self._open else "nothing"
            at = self._byte_offset()
            raise _bad_entities(f'Unmatched end tag at byte offset {at}, expected {expected}, found "</{tag}>"')
        _, entity = self._open.pop()
        if entity is not None and self._size > entity["offset"]:
            self.entities.append({**entity, "length": self._size - entity["offset"]})

    def handle_data(self, data: str) -> None:
        self.parts.append(data)
        self._size += utf16_len(data)

    def parse(self) -> tuple[str, list[Entity]]:
        self.feed(self._source)
        self.close()
        if self._open:
            raise _bad_entities(f'Can\'t find end tag corresponding to start tag "{self._open[-1][0]}"')
        return "".join(self.parts), sorted(self.entities, key=lambda e: int(e["offset"]))


def _message_content(params: Mapping[str, Any]) -> tuple[str, list[Entity]]:
    """The text and entities a person would see (trimmed, parsed), or a 400 like Telegram's."""
    raw = params.get("text")
    text = str(raw) if isinstance(raw, str | int | float) and not isinstance(raw, bool) else ""
    given = _json_param(params, "entities")
    mode = str(params.get("parse_mode") or "").lower()
    if given is not None or not mode:
        entities = _validate_entities(given, text)
    elif mode == "html":
        text, entities = _HtmlEntities(text).parse()
    elif mode in ("markdownv2", "markdown"):
        entities = []  # stored verbatim: MarkdownV2 is not parsed by the mock (module docstring)
    else:
        raise _bad("unsupported parse_mode")
    text, entities = _trim(text, entities)
    if not text:
        raise _bad("message text is empty")
    if len(text) > MAX_TEXT_CHARS:
        raise _bad("message is too long")
    return text, entities


# ---------------------------------------------------------------- flood control


class _FloodControl:
    """Token bucket per (bot, chat), sliding windows per group and per bot (:class:`TelegramLimits`)."""

    def __init__(self, limits: TelegramLimits) -> None:
        self._limits = limits
        self._buckets: dict[tuple[str, ChatId], tuple[float, float]] = {}
        self._groups: defaultdict[tuple[str, ChatId], deque[float]] = defaultdict(deque)
        self._bots: defaultdict[str, deque[float]] = defaultdict(deque)

    def _tokens(self, key: tuple[str, ChatId], now: float) -> float:
        tokens, at = self._buckets.get(key, (float(self._limits.chat_burst), now))
        return min(float(self._limits.chat_burst), tokens + (now - at) * self._limits.chat_per_s)

    @staticmethod
    def _window_wait_s(window: deque[float], span_s: float, limit: int, now: float) -> float:
        while window and window[0] <= now - span_s:
            window.popleft()
        return window[0] + span_s - now if len(window) >= limit else 0.0

    def wait_s(self, bot: str, chat: ChatId, now: float) -> float:
        """Seconds until this call would be admitted (0.0: admitted now)."""
        tokens = self._tokens((bot, chat), now)
        waits = [0.0 if tokens >= 1.0 else (1.0 - tokens) / self._limits.chat_per_s]
        if _chat_type(chat) != "private":
            group = self._groups[(bot, chat)]
            waits.append(self._window_wait_s(group, 60.0, self._limits.group_per_min, now))
        waits.append(self._window_wait_s(self._bots[bot], 1.0, self._limits.global_per_s, now))
        return max(waits)

    def consume(self, bot: str, chat: ChatId, now: float) -> None:
        self._buckets[(bot, chat)] = (self._tokens((bot, chat), now) - 1.0, now)
        if _chat_type(chat) != "private":
            self._groups[(bot, chat)].append(now)
        self._bots[bot].append(now)


def _chat_type(chat: ChatId) -> str:
    if isinstance(chat, str):
        return "channel"
    if chat > 0:
        return "private"
    return "supergroup" if chat <= -1_000_000_000_000 else "group"


# ---------------------------------------------------------------- the server


class MockTelegram:
    """The mock Bot API server. See the module docstring for the rules it enforces.

    Args:
        rate_limits: enforce :class:`TelegramLimits` (429 past them). Off by default.
        limits: the flood-control numbers used when ``rate_limits`` is on.
        hang_s: how long a scripted timeout hangs before it gives up (released early by ``stop``/``reset``).
        clock: monotonic seconds, for ``RecordedCall.t`` and flood control (inject a fake one in tests).
    """

    def __init__(
        self,
        *,
        rate_limits: bool = False,
        limits: TelegramLimits = TelegramLimits(),  # frozen: safe to share
        hang_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate_limits = rate_limits
        self.limits = limits
        self.hang_s = hang_s
        self._clock = clock
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None
        self._release = asyncio.Event()
        self.reset()

    # ------------------------------------------------------------ lifecycle

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on ``host:port`` (0: any free port); return the base URL, e.g. ``http://127.0.0.1:PORT``."""
        if self._runner is not None:
            raise RuntimeError("MockTelegram is already running")
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)  # the access log shows tokens
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self._release = asyncio.Event()
        bound = runner.addresses[0]
        self._runner, self._base_url = runner, f"http://{host}:{bound[1]}"
        return self._base_url

    async def stop(self) -> None:
        """Release hanging calls and close the server (idempotent)."""
        self._release.set()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` of the running server."""
        if self._base_url is None:
            raise RuntimeError("MockTelegram is not started")
        return self._base_url

    # ------------------------------------------------------------ scripting and state

    def reset(self) -> None:
        """Forget messages, calls, faults, latencies, counters and flood state; release hanging calls."""
        self._release.set()
        self._release = asyncio.Event()
        self.calls: list[RecordedCall] = []
        self._messages: dict[ChatId, dict[int, StoredMessage]] = {}
        self._next_id: defaultdict[ChatId, int] = defaultdict(lambda: 1)
        self._counts: defaultdict[str, int] = defaultdict(int)
        self._faults: dict[tuple[str, int], _ApiError | Hang] = {}
        self._latency_ms: dict[str, list[float]] = {}
        self._flood = _FloodControl(self.limits)

    def add_fault(self, method: str, nth: int, reply: Mapping[str, Any] | str) -> None:
        """Script the answer to the ``nth`` (1-based, every call of ``method`` counts) call of ``method``.

        Args:
            method: a Bot API method name, e.g. ``sendMessage``.
            nth: which call, 1-based.
            reply: ``{"status", "description"?, "retry_after_s"?}`` (429 carries ``parameters.retry_after``
                and ``Retry-After``; 5xx default to Telegram's ``Bad Gateway``-style phrase), or
                ``"timeout_after_commit"`` / ``"timeout_before_commit"`` (see :class:`Hang`).

        Raises:
            ValueError: unknown method, ``nth`` < 1, a bad reply, or that call is already scripted.
        """
        name = _METHOD_BY_LOWER.get(method.lower())
        if name is None or nth < 1:
            raise ValueError(f"bad fault: method {method!r}, nth {nth}")
        if (name, nth) in self._faults:
            raise ValueError(f"call {nth} of {name} already has a fault")
        self._faults[(name, nth)] = Hang(reply) if isinstance(reply, str) else _fault_error(reply)

    def set_latency(self, method: str, delays_ms: Sequence[float]) -> None:
        """The k-th call of ``method`` waits ``delays_ms[k-1]`` ms first (none past the list)."""
        name = _METHOD_BY_LOWER.get(method.lower())
        if name is None:
            raise ValueError(f"unknown method {method!r}")
        self._latency_ms[name] = [float(ms) for ms in delays_ms]

    def configure_from_case(self, case: Mapping[str, Any]) -> None:
        """Apply a case's ``faults``, ``latency_ms`` and ``mock.rate_limits`` (shared/cases/README.md)."""
        for fault in case.get("faults", []):
            self.add_fault(fault["method"], int(fault["nth"]), fault["reply"])
        for method, delays in case.get("latency_ms", {}).items():
            self.set_latency(method, delays)
        self.rate_limits = case.get("mock", {}).get("rate_limits", "off") == "documented"

    def chats(self) -> list[ChatId]:
        """Chats that ever received a message, in first-message order."""
        return list(self._messages)

    def visible(self, chat_id: ChatId) -> list[tuple[int, str]]:
        """What a person sees: ``(message_id, current text)`` by message id, deleted ones left out."""
        return [(m.message_id, m.text) for m in self.messages(chat_id)]

    def messages(self, chat_id: ChatId) -> list[StoredMessage]:
        """The visible stored messages of ``chat_id`` (with entities), by message id."""
        key = _chat_key(chat_id)
        stored = self._messages.get(key, {}) if key is not None else {}
        return [m for _, m in sorted(stored.items()) if not m.deleted]

    # ------------------------------------------------------------ request handling

    async def _handle(self, request: web.Request) -> web.Response:
        token, method = request.match_info["token"], request.match_info["method"]
        call = RecordedCall(method=method, chat_id=None, message_id=None, text=None, t=self._clock())
        self.calls.append(call)
        try:
            params = await _read_params(request)
            call.method = _METHOD_BY_LOWER.get(method.lower(), method)
            call.chat_id = _chat_key(params.get("chat_id"))
            call.message_id = _safe_int(params.get("message_id"))
            call.text = params.get("text") if isinstance(params.get("text"), str) else None
            result = await self._process(token, call, params)
        except _ApiError as error:
            return self._answer_error(call, error)
        if isinstance(result, Hang):
            return web.json_response(_GAVE_UP, status=504)  # the client has gone: nobody reads this
        call.status, call.ok = 200, True
        return web.json_response({"ok": True, "result": result})

    async def _process(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        if not _TOKEN_RE.match(token):
            raise _ApiError(401, "Unauthorized")
        if call.method not in METHODS:
            raise _ApiError(404, "Not Found")
        self._counts[call.method] += 1
        nth = self._counts[call.method]
        delays = self._latency_ms.get(call.method, [])
        if nth <= len(delays):
            await self._wait(delays[nth - 1] / 1000)
        fault = self._faults.get((call.method, nth))
        if isinstance(fault, _ApiError):
            raise fault
        if fault is Hang.BEFORE_COMMIT:
            return await self._hang(call, fault)
        result = self._dispatch(token, call, params)
        if fault is Hang.AFTER_COMMIT:
            return await self._hang(call, fault)
        return result

    async def _wait(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._release.wait(), seconds)

    async def _hang(self, call: RecordedCall, kind: Hang) -> Hang:
        call.description = kind.value
        await self._wait(self.hang_s)
        return kind

    def _answer_error(self, call: RecordedCall, error: _ApiError) -> web.Response:
        body: dict[str, Any] = {"ok": False, "error_code": error.status, "description": error.description}
        headers: dict[str, str] = {}
        if error.retry_after is not None:
            body["parameters"] = {"retry_after": error.retry_after}
            headers["Retry-After"] = str(error.retry_after)
            call.retry_after_s = float(error.retry_after)
        call.status, call.ok, call.description = error.status, False, error.description
        return web.json_response(body, status=error.status, headers=headers)

    def _dispatch(self, token: str, call: RecordedCall, params: Mapping[str, Any]) -> Any:
        bot_id = int(token.partition(":")[0])
        if call.method == "getMe":
            return _bot_user(bot_id)
        chat = _require_chat(params)
        if call.method == "sendChatAction":
            if params.get("action") not in _CHAT_ACTIONS:
                raise _bad("wrong parameter action in request")
            return True
        if call.method == "deleteMessage":
            self._find(chat, params, "message to delete not found").deleted = True
            return True
        text, entities = _message_content(params)
        if call.method == "sendMessage":
            message = self._send(token, chat, text, entities, params)
            call.message_id = message.message_id
        else:
            message = self._edit(token, chat, text, entities, params)
        return _message_json(message, bot_id, self._messages[chat])

    def _find(self, chat: ChatId, params: Mapping[str, Any], missing: str) -> StoredMessage:
        message_id = _int_param(params, "message_id")
        if message_id is None:
            raise _bad("message identifier is not specified")
        message = self._messages.get(chat, {}).get(message_id)
        if message is None or message.deleted:
            raise _bad(missing)
        return message

    def _admit(self, token: str, chat: ChatId) -> None:
        """Flood control: raise a 429 past the limits, else count this call."""
        if not self.rate_limits:
            return
        now = self._clock()
        wait_s = self._flood.wait_s(token, chat, now)
        if wait_s > 0:
            retry_after = max(1, math.ceil(wait_s - 1e-9))
            raise _ApiError(429, f"Too Many Requests: retry after {retry_after}", retry_after)
        self._flood.consume(token, chat, now)

    def _send(
        self, token: str, chat: ChatId, text: str, entities: list[Entity], params: Mapping[str, Any]
    ) -> StoredMessage:
        reply = _json_param(params, "reply_parameters")
        reply_to = _int_param(reply, "message_id") if isinstance(reply, dict) else None
        reply_to = reply_to or _int_param(params, "reply_to_message_id")
        allow_missing = isinstance(reply, dict) and bool(reply.get("allow_sending_without_reply"))
        if reply_to is not None:
            target = self._messages.get(chat, {}).get(reply_to)
            if target is None or target.deleted:
                if not allow_missing:
                    raise _bad("message to be replied not found")
                reply_to = None
        self._admit(token, chat)
        message_id = self._next_id[chat]
        self._next_id[chat] += 1
        message = StoredMessage(
            message_id=message_id,
            chat_id=chat,
            text=text,
            entities=entities,
            date=int(time.time()),
            thread_id=_int_param(params, "message_thread_id"),
            reply_to=reply_to,
        )
        self._messages.setdefault(chat, {})[message_id] = message
        return message

    def _edit(
        self, token: str, chat: ChatId, text: str, entities: list[Entity], params: Mapping[str, Any]
    ) -> StoredMessage:
        if params.get("inline_message_id"):
            raise _bad("inline messages are not supported by the mock")
        message = self._find(chat, params, "message to edit not found")
        if message.text == text and message.entities == entities:
            raise _ApiError(400, NOT_MODIFIED)
        self._admit(token, chat)
        message.text, message.entities, message.edit_date = text, entities, int(time.time())
        return message


async def _read_params(request: web.Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query)
    if not request.body_exists:
        return params
    if request.content_type == "application/json":
        try:
            body = await request.json()
        except ValueError:
            raise _bad("can't parse JSON object") from None
        if not isinstance(body, dict):
            raise _bad("can't parse JSON object")
        params.update(body)
    else:
        form = await request.post()
        params.update({k: v for k, v in form.items() if isinstance(v, str)})
    return params


def _safe_int(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _bot_user(bot_id: int) -> dict[str, Any]:
    return {"id": bot_id, "is_bot": True, "first_name": "streamrelay mock", "username": "sr_mock_bot"}


def _chat_json(chat: ChatId) -> dict[str, Any]:
    kind = _chat_type(chat)
    if isinstance(chat, str):
        fake_id = -1_000_000_000_000 - sum(map(ord, chat))
        return {"id": fake_id, "type": kind, "username": chat[1:], "title": chat}
    if kind == "private":
        return {"id": chat, "type": kind, "first_name": "Person"}
    return {"id": chat, "type": kind, "title": "Mock group"}


def _message_json(message: StoredMessage, bot_id: int, chat: Mapping[int, StoredMessage]) -> dict[str, Any]:
    """A Bot API Message object (https://core.telegram.org/bots/api#message)."""
    body: dict[str, Any] = {
        "message_id": message.message_id,
        "date": message.date,
        "chat": _chat_json(message.chat_id),
        "from": _bot_user(bot_id),
        "text": message.text,
    }
    if message.entities:
        body["entities"] = message.entities
    if message.edit_date is not None:
        body["edit_date"] = message.edit_date
    if message.thread_id is not None:
        body["message_thread_id"] = message.thread_id
    if message.reply_to is not None and message.reply_to in chat:
        body["reply_to_message"] = _message_json(chat[message.reply_to], bot_id, {})
    return body


async def serve_forever(host: str = "127.0.0.1", port: int = 8081, rate_limits: bool = False) -> None:
    """Run a mock until cancelled (``streamrelay mock telegram --port N``); prints its base URL."""
    mock = MockTelegram(rate_limits=rate_limits)
    base_url = await mock.start(host, port)
    try:
        limits = "on" if rate_limits else "off"
        print(f"mock Telegram Bot API on {base_url} (rate limits {limits})", flush=True)
        await asyncio.Event().wait()
    finally:
        await mock.stop()
