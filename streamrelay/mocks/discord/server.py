"""The HTTP side of the mock Discord REST API: routes, auth, faults, rate limits, recording (rules:
:mod:`mocks.discord`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from streamrelay.mocks.common import ChatId, Fault, Hang, MockServer, RecordedCall, serve_mock
from streamrelay.mocks.discord import wire
from streamrelay.mocks.discord.channels import Channels
from streamrelay.mocks.discord.components import components_of, custom_ids, interaction_create
from streamrelay.mocks.discord.embeds import shown_text
from streamrelay.mocks.discord.limits import DiscordLimits, Key, RateLimiter, bucket_hash, retry_after_header
from streamrelay.mocks.discord.routes import API_PREFIX, METHODS, Route, json_response, read_body, resolve
from streamrelay.mocks.discord.threads import Thread, thread_json
from streamrelay.mocks.discord.wire import ApiError, StoredMessage, fail, form_error

Body = dict[str, Any]
Result = tuple[int, Body | None]
"""HTTP status and JSON body (None: 204 No Content)."""


_GAVE_UP = {"code": 0, "message": "504: Gateway Timeout"}


@dataclass
class _Call:
    """One request being handled: its route, path parameters, JSON body and who is calling."""

    route: Route
    params: dict[str, str]
    body: Body
    query: Mapping[str, str]
    record: RecordedCall
    principal: str = ""
    """The bot's user id, or ``webhook:<id>``."""
    channel: str = ""

    @property
    def key(self) -> Key:
        major = self.params.get("webhook", self.params.get("channel", ""))
        return self.principal, self.route.bucket, major


class MockDiscord(MockServer):
    """The mock Discord REST API v10 server (see :mod:`mocks.discord` for every rule it enforces).

    Args:
        rate_limits: enforce :class:`~mocks.discord.DiscordLimits` (HTTP 429 past them). Off by default; the
            ``X-RateLimit-*`` headers are sent either way.
        limits: the numbers announced and enforced (default :class:`~mocks.discord.DiscordLimits`).
        hang_s: how long a scripted timeout holds its answer (released early by ``stop`` / ``reset``).
        clock: monotonic seconds for ``RecordedCall.t`` and rate limits (inject a fake one in tests).
    """

    platform = "discord"
    title = "Discord REST API"
    api_prefix = API_PREFIX

    def __init__(
        self,
        *,
        rate_limits: bool = False,
        limits: DiscordLimits | None = None,
        hang_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(METHODS, rate_limits=rate_limits, hang_s=hang_s, clock=clock)
        self.limits = limits or DiscordLimits()
        self._channels = Channels(clock)
        self._webhooks: dict[str, tuple[str, str]] = {}
        self._handlers: dict[str, Callable[[_Call], Result]] = {
            "getCurrentUser": self._identity,
            "getCurrentBotApplicationInformation": self._identity,
            "createMessage": self._create,
            "editMessage": self._edit,
            "deleteMessage": self._delete,
            "getChannelMessage": self._get,
            "triggerTypingIndicator": self._typing,
            "startThreadFromMessage": self._start_thread,
            "executeWebhook": self._create,
            "editWebhookMessage": self._edit,
            "deleteWebhookMessage": self._delete,
            "createInteractionResponse": self._respond,
        }
        self.reset()

    @property
    def missing_channels(self) -> set[str]:
        """Snowflake channel ids that answer 404 10003 ``Unknown Channel`` (every other snowflake exists)."""
        return self._channels.missing

    def _routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._handle)

    # ------------------------------------------------------------ scripting and state

    def reset(self) -> None:
        """Forget messages, calls, faults, latencies, counters, nonces and rate state; release hanging calls.

        ``rate_limits``, ``limits``, ``missing_channels`` and webhooks are kept.
        """
        super().reset()
        self._channels.reset()
        self._rates = RateLimiter(self.limits)
        self._interactions: dict[str, str] = {}
        """Each pressed interaction's token by its id, until it is responded to."""
        self.responses: list[dict[str, Any]] = []
        """Each interaction response (:meth:`_respond`): ``{"interaction", "type", "content", "ephemeral"}``."""

    def add_webhook(self, channel_id: ChatId) -> tuple[str, str]:
        """Create a webhook posting into ``channel_id``; return ``(webhook id, webhook token)``."""
        webhook_id = self._channels.ids.next()
        token = f"mock-webhook-token-{webhook_id}"
        self._webhooks[webhook_id] = (token, wire.check_snowflake("channel_id", str(channel_id)))
        return webhook_id, token

    def remove(self, chat_id: ChatId, message_id: int | str) -> None:
        """A person or a moderator deletes message ``message_id`` of channel ``chat_id`` (the control API's
        ``/_mock/remove``): Get Channel Message answers 404 10008 from now on.

        Raises:
            ValueError: no such message, or it is deleted already.
        """
        message = self._channels.messages.get(str(chat_id), {}).get(str(message_id))
        if message is None or message.deleted:
            raise ValueError(f"message {message_id} of {chat_id} does not exist (or was deleted)")
        message.deleted = True

    def user_message(self, chat_id: ChatId, text: str) -> str:
        """Store a message a person wrote in ``chat_id`` (the control API's ``/_mock/user_message``); its id.

        Raises:
            ValueError: ``chat_id`` is not a snowflake.
        """
        try:
            return self.post_user_message(chat_id, text)
        except ApiError:
            raise ValueError(f"chat_id {chat_id!r} is not a snowflake") from None

    def post_user_message(self, channel_id: ChatId, content: str) -> str:
        """Seed a message a person wrote (a reply target); return its id.

        It is in :meth:`messages` but not in :meth:`visible` (which shows what the bot delivered), and the bot
        can neither edit it (403 50005) nor delete it (403 50013).
        """
        return self._channels.seed(str(channel_id), content).id

    def press(
        self, chat_id: ChatId, message_id: int | str, data: str | None, user: int | str | None = None
    ) -> dict[str, Any]:
        """A person presses a button of the bot's message ``message_id``: the ``INTERACTION_CREATE`` dispatch the
        app receives (:mod:`mocks.discord.components`).

        Raises:
            ValueError: no such message or button.
        """
        found = [m for m in self.messages(chat_id) if m.id == str(message_id) and m.author_id != wire.PERSON_USER_ID]
        if not found:
            raise ValueError(f"message {message_id} of channel {chat_id} does not exist (or was deleted)")
        ids = custom_ids(found[0].components)
        chosen = next((c for c in ids if data is None or c == data), None)
        if chosen is None:
            raise ValueError(f"message {message_id} has no button {data!r}: its buttons are {ids}")
        dispatch = interaction_create(self._channels.json(found[0]), chosen, None if user is None else str(user))
        self._interactions[dispatch["d"]["id"]] = dispatch["d"]["token"]
        return dispatch

    def chats(self) -> list[ChatId]:
        """Channels (threads included: a thread is a channel) that ever received a message, in first-message
        order."""
        return list(self._channels.messages)

    def visible(self, chat_id: ChatId) -> list[tuple[int | str, str]]:
        """What a person sees of the bot in ``chat_id``: ``(message id, content)`` in id order, deleted ones and
        the person's own (seeded) messages left out; a message of embeds alone (media) shows its caption
        (:func:`mocks.discord.embeds.shown_text`)."""
        return [
            (m.id, shown_text(m.content, m.embeds))
            for m in self.messages(chat_id)
            if m.author_id != wire.PERSON_USER_ID
        ]

    def messages(self, chat_id: ChatId) -> list[StoredMessage]:
        """Every stored, not deleted message of ``chat_id`` (seeded ones too), in id order."""
        return [m for m in self._channels.messages.get(str(chat_id), {}).values() if not m.deleted]

    def threads(self, parent_id: ChatId | None = None) -> list[Thread]:
        """The threads started from messages (of channel ``parent_id``, else of every channel), oldest first.
        A thread's id is its starting message's id; its messages are :meth:`messages` of that id."""
        every = self._channels.threads.values()
        return [t for t in every if parent_id is None or t.parent_id == str(parent_id)]

    # ------------------------------------------------------------ request handling

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        route, params = resolve(request.method, request.path)
        name = route.name if route else f"{request.method} {request.path}"
        record = RecordedCall(name, params.get("channel"), params.get("message"), None, self._clock())
        self.calls.append(record)
        body, body_error = await read_body(request)
        if isinstance(body.get("content"), str):
            record.text = body["content"]
        call: _Call | None = None
        try:
            if route is None:
                raise fail(wire.METHOD_NOT_ALLOWED if params else wire.NOT_FOUND)
            call = _Call(route, params, body, request.query, record)
            self._authenticate(request, call)
            result = await self._process(call, body_error)
        except ApiError as exc:
            return self._answer_error(record, exc, call)
        if result in (Hang.RESET, Hang.RESET_AFTER_COMMIT):
            self._hang_up(request)
        if isinstance(result, Hang):
            return json_response(_GAVE_UP, status=504)  # the client has gone: nobody reads this
        status, payload = result
        record.status, record.ok = status, True
        headers = self._headers(call, consumed=True)
        if payload is None:
            return web.Response(status=status, headers=headers)
        return json_response(payload, status=status, headers=headers)

    def _authenticate(self, request: web.Request, call: _Call) -> None:
        """Bot routes need ``Authorization: Bot <token>``; webhook routes an existing id and its token."""
        if "interaction" in call.params:  # an interaction's token is its credential (no bot token)
            if self._interactions.get(call.params["interaction"]) != call.params["token"]:
                answered = any(r["interaction"] == call.params["interaction"] for r in self.responses)
                raise fail(wire.ALREADY_ACKNOWLEDGED if answered else wire.UNKNOWN_INTERACTION)
            call.principal = f"interaction:{call.params['interaction']}"
            return
        if "webhook" in call.params:
            webhook = self._webhooks.get(call.params["webhook"])
            if webhook is None:
                raise fail(wire.UNKNOWN_WEBHOOK)
            if webhook[0] != call.params["token"]:
                raise fail(wire.INVALID_WEBHOOK_TOKEN)
            call.principal = f"webhook:{call.params['webhook']}"
            call.channel = call.record.chat_id = call.query.get("thread_id", webhook[1])
            return
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        bot_id = wire.bot_id_from_token(token) if scheme == "Bot" else None
        if bot_id is None:
            raise fail(wire.UNAUTHORIZED)
        call.principal = bot_id
        call.channel = call.params.get("channel", "")

    async def _process(self, call: _Call, body_error: ApiError | None) -> Result | Hang:
        """Count + latency + fault (the script), then validate, rate limits, store (:meth:`MockServer._scripted`)."""
        message_route = "message" in call.params

        def commit() -> Result:
            if body_error is not None:
                raise body_error
            return self._handlers[call.route.name](call)

        def refuse(fault: Fault) -> ApiError:
            return wire.fault_error(fault.status, fault.description, fault.retry_after_s, message_route=message_route)

        return await self._scripted(call.record, commit, refuse)

    def _answer_error(self, record: RecordedCall, exc: ApiError, call: _Call | None) -> web.Response:
        record.status, record.ok, record.description = exc.status, False, str(exc.body.get("message"))
        headers = self._headers(call, consumed=False) if call is not None and call.principal else {"Via": "1.1 google"}
        if exc.status == 429:
            assert exc.retry_after_s is not None
            record.retry_after_s = exc.retry_after_s
            headers["Retry-After"] = str(retry_after_header(exc.retry_after_s))
            headers["X-RateLimit-Scope"] = exc.scope
            if exc.is_global:
                headers = {k: v for k, v in headers.items() if not k.startswith("X-RateLimit-")}
                headers.update({"X-RateLimit-Global": "true", "X-RateLimit-Scope": "global"})
            else:
                headers["X-RateLimit-Remaining"] = "0"
                headers["X-RateLimit-Reset-After"] = f"{exc.retry_after_s:.3f}"
                headers["X-RateLimit-Reset"] = f"{time.time() + exc.retry_after_s:.3f}"
        return json_response(exc.body, status=exc.status, headers=headers)

    def _headers(self, call: _Call | None, *, consumed: bool) -> dict[str, str]:
        """``Via`` and the bucket's ``X-RateLimit-*`` headers
        (https://discord.com/developers/docs/topics/rate-limits#header-format)."""
        headers = {"Via": "1.1 google"}
        if call is None:
            return headers
        view = self._rates.view(call.key, self._clock(), enforced=self.rate_limits, consumed=consumed)
        headers.update(
            {
                "X-RateLimit-Limit": str(view.limit),
                "X-RateLimit-Remaining": str(view.remaining),
                "X-RateLimit-Reset": f"{time.time() + view.reset_after_s:.3f}",
                "X-RateLimit-Reset-After": f"{view.reset_after_s:.3f}",
                "X-RateLimit-Bucket": bucket_hash(view.name),
            }
        )
        return headers

    def _admit(self, call: _Call) -> None:
        """Rate limits (when on): a 429 past them, else count this call. A refused call costs nothing."""
        if not self.rate_limits:
            return
        now, counts_globally = self._clock(), not call.principal.startswith("webhook:")
        refusal = self._rates.refusal(call.key, now, counts_globally=counts_globally)
        if refusal is not None:
            retry_after_s, is_global = refusal
            raise wire.rate_limited(retry_after_s, is_global=is_global, scope="global" if is_global else "user")
        self._rates.consume(call.key, now, counts_globally=counts_globally)

    # ------------------------------------------------------------ methods

    def _identity(self, call: _Call) -> Result:
        """getCurrentUser / getCurrentBotApplicationInformation: the bot named by the token (discord.py's login)."""
        self._admit(call)
        if call.route.name == "getCurrentUser":
            return 200, wire.current_user_json(call.principal)
        return 200, wire.application_json(call.principal)

    def _create(self, call: _Call) -> Result:
        """createMessage / executeWebhook (https://discord.com/developers/docs/resources/message#create-message)."""
        channel = self._channels.channel(call.channel)
        draft = self._channels.check_create(channel, call.body, replies=call.route.name == "createMessage")
        rows = components_of(call.body)
        self._admit(call)
        message = self._channels.store(channel, draft, principal=call.principal)
        message.components = rows or []
        call.record.message_id = message.id
        if call.route.name == "executeWebhook" and call.query.get("wait", "").lower() != "true":
            return 204, None
        return 200, self._channels.json(message)

    def _edit(self, call: _Call) -> Result:
        """editMessage / editWebhookMessage (https://discord.com/developers/docs/resources/message#edit-message)."""
        message = self._channels.find(call.channel, call.params["message"], principal=call.principal, deleting=False)
        change = self._channels.check_edit(message, call.body)
        rows = components_of(call.body)  # not given: kept; []: removed
        self._admit(call)
        self._channels.apply(message, change)
        message.components = message.components if rows is None else rows
        return 200, self._channels.json(message)

    def _get(self, call: _Call) -> Result:
        """getChannelMessage (https://discord.com/developers/docs/resources/message#get-channel-message): any
        message of the channel, the bot's or a person's; 404 10008 when unknown or deleted."""
        channel = self._channels.channel(call.channel)
        message = self._channels.messages.get(channel, {}).get(
            wire.check_snowflake("message_id", call.params["message"])
        )
        if message is None or message.deleted:
            raise fail(wire.UNKNOWN_MESSAGE)
        self._admit(call)
        return 200, self._channels.json(message)

    def _delete(self, call: _Call) -> Result:
        """deleteMessage / deleteWebhookMessage: 204 No Content."""
        message = self._channels.find(call.channel, call.params["message"], principal=call.principal, deleting=True)
        self._admit(call)
        message.deleted = True
        return 204, None

    def _start_thread(self, call: _Call) -> Result:
        """startThreadFromMessage: 201 with the new public thread's channel object, its id the message's
        (https://discord.com/developers/docs/resources/channel#start-thread-from-message; rules:
        :mod:`mocks.discord.threads`)."""
        channel = self._channels.channel(call.channel)
        message, request = self._channels.check_thread(channel, call.params["message"], call.body)
        self._admit(call)
        thread = self._channels.start_thread(message, request, principal=call.principal)
        return 201, thread_json(thread)

    def _respond(self, call: _Call) -> Result:
        """createInteractionResponse: 204 (200 with the interaction callback response with ``?with_response=true``,
        https://discord.com/developers/docs/interactions/receiving-and-responding#interaction-callback-interaction-callback-response-object),
        once per interaction (a second: 400 40060; an unknown one, or a wrong
        token: 404 10062) (https://discord.com/developers/docs/interactions/receiving-and-responding#create-interaction-response).
        ``type`` 4 (a message; ``data.flags`` 64: ephemeral, only the presser sees it), 5 or 6 (deferred); any other
        is 400 50035. Discord's 3 s to respond is not enforced (tests run on loaded machines)."""
        kind, data = call.body.get("type"), call.body.get("data") or {}
        if kind not in (4, 5, 6) or not isinstance(data, dict):
            raise form_error("type", "BASE_TYPE_CHOICES", f"Value must be one of (4, 5, 6) here, got {kind!r}.")
        if kind == 4 and not str(data.get("content") or "").strip():
            raise fail(wire.EMPTY)
        del self._interactions[call.params["interaction"]]
        ephemeral = bool(int(data.get("flags") or 0) & 64)
        content = data.get("content")
        call.record.text = content
        self.responses.append(
            {"interaction": call.params["interaction"], "type": kind, "content": content, "ephemeral": ephemeral}
        )
        if call.query.get("with_response", "").lower() not in ("1", "true"):
            return 204, None
        # ?with_response: the interaction callback response object (its interaction, the response's type)
        interaction = {
            "id": call.params["interaction"],
            "type": 3,
            "response_message_loading": kind == 5,
            "response_message_ephemeral": ephemeral,
        }
        return 200, {"interaction": interaction, "resource": {"type": kind}}

    def _typing(self, call: _Call) -> Result:
        """triggerTypingIndicator: 204; the indicator shows for about 10 s
        (https://discord.com/developers/docs/resources/channel#trigger-typing-indicator)."""
        self._channels.channel(call.channel)
        self._admit(call)
        return 204, None


async def serve_forever(host: str = "127.0.0.1", port: int = 8083, rate_limits: bool = False) -> None:
    """Run a mock until cancelled (``streamrelay mock discord --port N``); prints its base URL."""
    await serve_mock(MockDiscord(rate_limits=rate_limits), host, port)
