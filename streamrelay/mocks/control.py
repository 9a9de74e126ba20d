"""The mock control API: what an operator (or a test) uses to read and script a running mock over HTTP.

Every mock (``streamrelay mock telegram|slack|discord``, and every :class:`mocks.common.MockServer`) serves it
beside its platform API, on the same host and port (loopback by default), without a bot token; its calls are
never recorded in ``calls``:

``GET /_mock/state``
    ``{"platform", "chats": {"<chat_id>": [{"message_id", "text"}]}, "calls": [call records]}``: what a person
    sees of the bot per conversation (``visible``; a media message with its caption as text, ``""`` without),
    and every platform call in the shape of a case transcript (:func:`mocks.calls.call_record`), ``t_ms``
    counted from the mock's start or last reset. A mock of a platform that streams natively adds ``"streams":
    {"<chat_id>": [{"message_id", "state", "text"}]}``: its native streams per conversation, what each shows now and
    its ``state``: Slack ``open`` / ``stopped`` / ``expired`` (a chat.startStream message), Teams ``streaming`` /
    ``final`` (a streamed activity), Telegram ``draft`` (a live sendMessageDraft: not a message, gone by itself
    after about 30 s or when the chat gets a message).
``POST /_mock/script``
    A JSON object in the case format's language (tests/cases/README.md), every key optional::

        {"faults": [{"method", "nth", "reply", "after_commit"?}],
         "latency_ms": {"method": [ms, ...]},
         "rate_limits": true | false,
         "outage": {"seconds": 8, "reply": {"status": 502} | "timeout_before_commit" | "timeout_after_commit"
                    | "reset", "methods": ["sendMessage"]}}

    A ``reply`` is one of (:mod:`mocks.script`):

    - ``{"status", "description"?, "retry_after_s"?}``: an error (status >= 400) in the platform's own shape
      (Telegram ``{"ok": false, "error_code", "description"}``, Slack ``{"ok": false, "error"}``, Discord
      ``{"code", "message"}``), a 429 with its ``retry_after``;
    - ``{"status", "body", "content_type"?}``: an answer in no platform's shape, sent byte for byte: any status
      (200 too), ``body`` a string sent as it is (``""``: empty) or any other JSON value JSON-encoded,
      ``content_type`` the ``Content-Type`` header (default ``application/json``, exactly). E.g.
      ``{"status": 200, "body": {"ok": true}}`` (Telegram without ``result``), ``{"status": 200, "body": ""}``,
      ``{"status": 200, "body": {"id": null}}``, ``{"status": 200, "body": "<html>…</html>", "content_type":
      "text/html"}``. With ``after_commit`` the call is stored first (a message the chat shows, whose answer
      the bot cannot read); its call record has that status and ``ok`` false;
    - ``"timeout_before_commit"``, ``"timeout_after_commit"``, ``"reset"``: no answer.

    ``nth`` and latency positions are RELATIVE to the moment of scripting: ``"nth": 1`` is the next call of
    that method, whatever was called before (the case runner's ``nth`` is the same number, since it scripts a
    fresh mock). An outage makes every call (of ``methods``, else of every method) arriving in the next
    ``seconds`` fail that way, overriding per-call faults; ``"reset"`` closes the connection without an answer.
    All or nothing: 200 ``{"applied": {...}}`` (faults with their absolute ``call`` number, latencies with
    their ``from_call``, the outage's ``until_t_ms``), or 400 ``{"error", "field"}`` naming the bad field
    (``faults[1].reply``) and nothing is applied.
``POST /_mock/user_message``
    ``{"chat_id", "text"}``: a message a person wrote, stored like one (it takes the conversation's next id);
    200 ``{"chat_id", "message_id"}``, 400 ``{"error", "field"}``.
``POST /_mock/press``
    ``{"chat_id", "message_id", "data"?, "user"?}``: a person presses a button of that bot message (the one whose
    callback data / action id / custom id is ``data``; else its first), ``user`` the pressing person's platform
    user id (Telegram an integer, Slack ``U…``, Discord a snowflake string; else the mock's one person): 200 with
    what the platform then delivers to the bot, naming that user as the presser
    (Telegram a ``callback_query`` update, Slack a ``block_actions`` payload, Discord an ``INTERACTION_CREATE``
    dispatch with the component's ``custom_id``), for a test to forward as the bot would; 400 ``{"error",
    "field"}`` when the message does not exist or carries no such button.
``POST /_mock/events`` (Slack)
    ``{"url", "signing_secret"}``: a person's later messages are posted to the app at ``url`` (its Events API
    Request URL, Bolt's ``/slack/events``) as signed ``message`` events (:mod:`mocks.slack.events`). Telegram's bot
    polls for them instead (``getUpdates``: :mod:`mocks.telegram.updates`).
``POST /_mock/webhook`` (WhatsApp)
    ``{"url", "app_secret", "urls"?, "delay_ms"?, "drop"?, "fail"?, "retry_for_s"?}``: every message the bot sends is
    followed by signed ``statuses`` webhooks posted to ``url`` (``sent`` then ``delivered``, echoing the create's
    ``biz_opaque_callback_data``), each held ``delay_ms`` first; the next ``drop`` messages' statuses are never
    posted; the next ``fail`` sends are answered but never shown, and a ``failed`` status (131026) follows; a
    delivery not answered 200 is tried again for ``retry_for_s`` (:mod:`mocks.whatsapp.statuses`); ``urls``: more
    URLs behind the same load balancer (replicas), each attempt posted to the next one of ``url`` and ``urls``.
``POST /_mock/remove`` (Slack, Discord, Matrix, Teams)
    ``{"chat_id", "message_id"}``: a person or a moderator deletes that message after delivery: it is no longer
    shown, and reading it back answers as the platform does for a deleted message (Slack history leaves it out,
    Discord Get Channel Message is 404 10008, Matrix GET event shows it redacted, Teams Graph shows
    ``deletedDateTime``); 200 ``{"removed": true}``, 400
    ``{"error", "field"}`` for an unknown one. What ``streamrelay audit`` finds (docs/audit.md).
``POST /_mock/reset``
    Forget messages, calls, scripts and rate-limit state (as :meth:`MockServer.reset`); 200 ``{"reset": true}``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from aiohttp import web

from streamrelay.mocks.calls import ChatId, RecordedCall, call_record, chat_record
from streamrelay.mocks.script import FaultScript, parse_answer

PREFIX = "/_mock"
_SCRIPT_KEYS = ("faults", "latency_ms", "rate_limits", "outage")


class Controlled(Protocol):
    """What the control API needs of a mock (:class:`mocks.common.MockServer` has it)."""

    platform: str
    rate_limits: bool
    calls: list[RecordedCall]

    @property
    def script(self) -> FaultScript: ...

    @property
    def epoch_s(self) -> float: ...

    def reset(self) -> None: ...

    def chats(self) -> Sequence[ChatId]: ...

    def visible(self, chat_id: ChatId) -> Sequence[tuple[int | str, str]]: ...

    def user_message(self, chat_id: ChatId, text: str) -> int | str: ...

    def press(
        self, chat_id: ChatId, message_id: int | str, data: str | None, user: int | str | None = None
    ) -> dict[str, Any]: ...


@runtime_checkable
class NativeStreams(Protocol):
    """A mock whose platform streams natively also tells its streams (``GET /_mock/state``'s ``streams``)."""

    def native_streams(self) -> Mapping[ChatId, Sequence[tuple[int | str, str, str]]]:
        """Per conversation that has one, ``(message id or draft id, state, text shown)`` of each native stream, in
        order."""
        ...


class FieldError(ValueError):
    """A bad field of a control request: 400 ``{"error": "<field>: <why>", "field"}``."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field


def state(mock: Controlled) -> dict[str, Any]:
    """The body of ``GET /_mock/state``."""
    chats = {str(chat): [chat_record(mid, text) for mid, text in mock.visible(chat)] for chat in mock.chats()}
    calls = [call_record(c, mock.epoch_s) for c in mock.calls]
    body: dict[str, Any] = {"platform": mock.platform, "chats": chats, "calls": calls}
    if isinstance(mock, NativeStreams):
        body["streams"] = {
            str(chat): [{"message_id": i, "state": state, "text": text} for i, state, text in shown]
            for chat, shown in mock.native_streams().items()
        }
    return body


def plan_script(mock: Controlled, body: Any) -> tuple[list[Callable[[], None]], dict[str, Any]]:
    """Validate a ``POST /_mock/script`` body: the changes to make (none made yet) and what they apply.

    Raises:
        FieldError: the first bad field.
    """
    if not isinstance(body, dict):
        raise FieldError("body", "must be a JSON object")
    for key in body:
        if key not in _SCRIPT_KEYS:
            raise FieldError(key, f"unknown key (known: {', '.join(_SCRIPT_KEYS)})")
    changes: list[Callable[[], None]] = []
    applied: dict[str, Any] = {}
    if "faults" in body:
        applied["faults"] = _plan_faults(mock.script, body["faults"], changes)
    if "latency_ms" in body:
        applied["latency_ms"] = _plan_latency(mock.script, body["latency_ms"], changes)
    if "rate_limits" in body:
        applied["rate_limits"] = _plan_rate_limits(mock, body["rate_limits"], changes)
    if "outage" in body:
        applied["outage"] = _plan_outage(mock, body["outage"], changes)
    return changes, applied


def _method(script: FaultScript, value: Any, field: str) -> str:
    name = script.method(value) if isinstance(value, str) else None
    if name is None:
        raise FieldError(field, f"unknown method {value!r} (known: {', '.join(script.methods)})")
    return name


def _plan_faults(script: FaultScript, faults: Any, changes: list[Callable[[], None]]) -> list[dict[str, Any]]:
    if not isinstance(faults, list):
        raise FieldError("faults", "must be a list of fault objects")
    out: list[dict[str, Any]] = []
    taken: set[tuple[str, int]] = set()
    for i, fault in enumerate(faults):
        at = f"faults[{i}]"
        if not isinstance(fault, dict):
            raise FieldError(at, "must be an object {method, nth, reply, after_commit?}")
        unknown = set(fault) - {"method", "nth", "reply", "after_commit"}
        if unknown:
            raise FieldError(f"{at}.{sorted(unknown)[0]}", "unknown key (known: method, nth, reply, after_commit)")
        method = _method(script, fault.get("method"), f"{at}.method")
        nth = fault.get("nth")
        if isinstance(nth, bool) or not isinstance(nth, int) or nth < 1:
            raise FieldError(f"{at}.nth", f"must be an integer >= 1 (1: the next call), got {nth!r}")
        after_commit = fault.get("after_commit", False)
        if not isinstance(after_commit, bool):
            raise FieldError(f"{at}.after_commit", f"must be true or false, got {after_commit!r}")
        try:
            parse_answer(fault.get("reply"), after_commit=after_commit)
        except ValueError as error:
            raise FieldError(f"{at}.reply", str(error)) from None
        call = script.count(method) + nth
        if (method, call) in taken or script.scripted(method, call):
            raise FieldError(f"{at}.nth", f"call {call} of {method} already has a fault")
        taken.add((method, call))
        reply = fault["reply"]
        changes.append(functools.partial(script.add_fault, method, call, reply, after_commit=after_commit))
        out.append({"method": method, "nth": nth, "call": call, "reply": reply, "after_commit": after_commit})
    return out


def _plan_latency(script: FaultScript, latency: Any, changes: list[Callable[[], None]]) -> dict[str, Any]:
    if not isinstance(latency, dict):
        raise FieldError("latency_ms", "must be an object {method: [ms, ...]}")
    out: dict[str, Any] = {}
    for given, delays in latency.items():
        method = _method(script, given, f"latency_ms.{given}")
        ok = isinstance(delays, list) and all(
            isinstance(ms, int | float) and not isinstance(ms, bool) and ms >= 0 for ms in delays
        )
        if not ok:
            raise FieldError(f"latency_ms.{given}", f"must be a list of milliseconds >= 0, got {delays!r}")
        after = script.count(method)
        changes.append(functools.partial(script.set_latency, method, delays, after=after))
        out[method] = {"from_call": after + 1, "delays_ms": delays}
    return out


def _plan_rate_limits(mock: Controlled, value: Any, changes: list[Callable[[], None]]) -> bool:
    words = {"documented": True, "off": False}
    if not isinstance(value, bool) and value not in words:
        raise FieldError("rate_limits", f"must be true or false (or 'documented' / 'off'), got {value!r}")
    enabled = value if isinstance(value, bool) else words[value]

    def apply() -> None:
        mock.rate_limits = enabled

    changes.append(apply)
    return enabled


def _plan_outage(mock: Controlled, outage: Any, changes: list[Callable[[], None]]) -> dict[str, Any]:
    script = mock.script
    if not isinstance(outage, dict):
        raise FieldError("outage", "must be an object {seconds, reply, methods?}")
    unknown = set(outage) - {"seconds", "reply", "methods"}
    if unknown:
        raise FieldError(f"outage.{sorted(unknown)[0]}", "unknown key (known: seconds, reply, methods)")
    seconds = outage.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
        raise FieldError("outage.seconds", f"must be a number of seconds > 0, got {seconds!r}")
    try:
        parse_answer(outage.get("reply"))
    except ValueError as error:
        raise FieldError("outage.reply", str(error)) from None
    given = outage.get("methods")
    if given is not None and not isinstance(given, list):
        raise FieldError("outage.methods", "must be a list of method names")
    methods = [_method(script, m, f"outage.methods[{i}]") for i, m in enumerate(given)] if given is not None else None
    applied: dict[str, Any] = {"seconds": seconds, "reply": outage["reply"], "methods": methods}

    def apply() -> None:
        window = script.set_outage(seconds, outage["reply"], methods)
        applied["until_t_ms"] = round((window.until_s - mock.epoch_s) * 1000, 1)

    changes.append(apply)
    return applied


def add_routes(app: web.Application, mock: Controlled) -> None:
    """Serve the control API of ``mock`` under ``/_mock`` (add it before the platform's catch-all routes)."""

    async def get_state(request: web.Request) -> web.Response:
        return web.json_response(state(mock))

    async def post_script(request: web.Request) -> web.Response:
        try:
            changes, applied = plan_script(mock, await _json(request))
        except FieldError as error:
            return _refuse(error)
        for change in changes:
            change()
        return web.json_response({"applied": applied})

    async def post_user_message(request: web.Request) -> web.Response:
        try:
            return web.json_response(user_message(mock, await _json(request)))
        except FieldError as error:
            return _refuse(error)

    async def post_press(request: web.Request) -> web.Response:
        try:
            return web.json_response(press(mock, await _json(request)))
        except FieldError as error:
            return _refuse(error)

    async def post_reset(request: web.Request) -> web.Response:
        mock.reset()
        return web.json_response({"reset": True})

    app.router.add_get(f"{PREFIX}/state", get_state)
    app.router.add_post(f"{PREFIX}/script", post_script)
    app.router.add_post(f"{PREFIX}/user_message", post_user_message)
    app.router.add_post(f"{PREFIX}/press", post_press)
    app.router.add_post(f"{PREFIX}/reset", post_reset)
    _add_platform_routes(app, mock)


def _add_platform_routes(app: web.Application, mock: Controlled) -> None:
    """The control routes only some mocks serve."""
    events_to = getattr(mock, "events_to", None)
    if events_to is not None:  # Slack: a Bolt app's Request URL (mocks.slack.events)
        app.router.add_post(f"{PREFIX}/events", _events_route(events_to))
    if getattr(mock, "webhook_to", None) is not None:  # WhatsApp: status webhooks (mocks.whatsapp.statuses)
        app.router.add_post(f"{PREFIX}/webhook", _webhook_route(mock))
    if callable(getattr(mock, "remove", None)):  # Slack, Discord, Matrix: a message deleted by someone else
        app.router.add_post(f"{PREFIX}/remove", _remove_route(mock))


def _remove_route(mock: Any) -> Callable[[web.Request], Awaitable[web.Response]]:
    """``POST /_mock/remove``: ``{"chat_id", "message_id"}``, a person or a moderator deletes that message (the
    bot's or anyone's): it is no longer shown, and reading it back (Slack history, Discord Get Channel Message,
    Matrix GET event) says so; 200 ``{"removed": true}``, 400 ``{"error", "field"}`` for an unknown message."""

    async def post_remove(request: web.Request) -> web.Response:
        body = await _json(request)
        if not isinstance(body, dict) or "chat_id" not in body or "message_id" not in body:
            return _refuse(FieldError("", 'want {"chat_id": ..., "message_id": ...}'))
        try:
            mock.remove(body["chat_id"], body["message_id"])
        except (KeyError, ValueError) as error:
            return _refuse(FieldError("message_id", str(error)))
        return web.json_response({"removed": True})

    return post_remove


def _webhook_route(mock: Any) -> Callable[[web.Request], Awaitable[web.Response]]:
    """``POST /_mock/webhook``: where status webhooks go, and their script (WhatsApp)."""

    async def post_webhook(request: web.Request) -> web.Response:
        body = await _json(request)
        if not isinstance(body, dict):
            return _refuse(FieldError("", 'want {"url": "http://...", "app_secret": "..."}'))
        url, secret = body.get("url"), body.get("app_secret")
        if not isinstance(url, str) or not url.startswith("http"):
            return _refuse(FieldError("url", "want the app's webhook URL, http://..."))
        if not isinstance(secret, str) or not secret:
            return _refuse(FieldError("app_secret", "want the Meta app's secret the webhooks are signed with"))
        also = body.get("urls", [])
        if not isinstance(also, list) or not all(isinstance(u, str) and u.startswith("http") for u in also):
            return _refuse(FieldError("urls", "want a list of more webhook URLs behind the same address, http://..."))
        numbers: dict[str, float] = {}
        for key, default in (("delay_ms", 0.0), ("drop", 0), ("fail", 0), ("retry_for_s", 120.0)):
            value = body.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                return _refuse(FieldError(key, "want a number >= 0"))
            numbers[key] = float(value)
        mock.webhook_to(
            url,
            secret,
            delay_ms=numbers["delay_ms"],
            drop=int(numbers["drop"]),
            retry_for_s=numbers["retry_for_s"],
            also=tuple(also),
        )
        mock.failing = int(numbers["fail"])
        return web.json_response({"url": url, "urls": also, **numbers})

    return post_webhook


def _events_route(events_to: Callable[[str, str], None]) -> Callable[[web.Request], Awaitable[web.Response]]:
    """``POST /_mock/events``: where a person's messages are posted as the Events API posts them."""

    async def post_events(request: web.Request) -> web.Response:
        body = await _json(request)
        url, secret = (body.get(k) if isinstance(body, dict) else None for k in ("url", "signing_secret"))
        if not isinstance(url, str) or not url.startswith("http") or not isinstance(secret, str) or not secret:
            return _refuse(FieldError("url", 'want {"url": "http://...", "signing_secret": "..."}'))
        events_to(url, secret)
        return web.json_response({"url": url})

    return post_events


def user_message(mock: Controlled, body: Any) -> dict[str, Any]:
    """``POST /_mock/user_message``: store a person's message; ``{"chat_id", "message_id"}``.

    Raises:
        FieldError: a bad field, or a conversation or text the platform would refuse.
    """
    if not isinstance(body, dict):
        raise FieldError("body", "must be a JSON object {chat_id, text}")
    chat_id, text = body.get("chat_id"), body.get("text")
    if isinstance(chat_id, bool) or not isinstance(chat_id, int | str):
        raise FieldError("chat_id", f"must be a conversation id, got {chat_id!r}")
    if not isinstance(text, str):
        raise FieldError("text", f"must be a string, got {text!r}")
    try:
        message_id = mock.user_message(chat_id, text)
    except ValueError as error:
        raise FieldError("text" if "text" in str(error) else "chat_id", str(error)) from None
    return {"chat_id": chat_id, "message_id": message_id}


def press(mock: Controlled, body: Any) -> dict[str, Any]:
    """``POST /_mock/press``: what the platform delivers to the bot when a person presses the button.

    Raises:
        FieldError: a bad field, or no such message or button.
    """
    if not isinstance(body, dict):
        raise FieldError("body", "must be a JSON object {chat_id, message_id, data?, user?}")
    chat_id, message_id, data, user = body.get("chat_id"), body.get("message_id"), body.get("data"), body.get("user")
    if isinstance(chat_id, bool) or not isinstance(chat_id, int | str):
        raise FieldError("chat_id", f"must be a conversation id, got {chat_id!r}")
    if isinstance(message_id, bool) or not isinstance(message_id, int | str):
        raise FieldError("message_id", f"must be a message id, got {message_id!r}")
    if data is not None and not isinstance(data, str):
        raise FieldError("data", f"must be the button's data or id (a string), got {data!r}")
    if user is not None and (isinstance(user, bool) or not isinstance(user, int | str) or user == ""):
        raise FieldError("user", f"must be the pressing person's platform user id, got {user!r}")
    try:
        return mock.press(chat_id, message_id, data, user)
    except ValueError as error:
        raise FieldError("message_id", str(error)) from None


async def _json(request: web.Request) -> Any:
    try:
        return json.loads(await request.text() or "null")
    except ValueError:
        raise FieldError("body", "is not JSON") from None


def _refuse(error: FieldError) -> web.Response:
    return web.json_response({"error": str(error), "field": error.field}, status=400)


def describe(root_url: str) -> Mapping[str, str]:
    """The control routes of a mock at ``root_url`` (what ``streamrelay mock`` prints)."""
    return {
        "state": f"GET {root_url}{PREFIX}/state",
        "script": f"POST {root_url}{PREFIX}/script",
        "user_message": f"POST {root_url}{PREFIX}/user_message",
        "reset": f"POST {root_url}{PREFIX}/reset",
    }
