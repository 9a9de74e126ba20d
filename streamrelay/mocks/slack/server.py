"""The HTTP side of the mock Slack Web API: routes, auth, faults, rate limits, recording (rules: :mod:`mocks.slack`)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from streamrelay.mocks.common import ChatId, Hang, MockServer, RecordedCall, serve_mock
from streamrelay.mocks.slack import actions, history
from streamrelay.mocks.slack.blocks import read_blocks
from streamrelay.mocks.slack.events import EventSender, message_event
from streamrelay.mocks.slack.limits import RateLimiter, SlackLimits, retry_after_header
from streamrelay.mocks.slack.wire import fault_error, message_json, read_request, str_or_none
from streamrelay.mocks.slack.workspace import (
    BOT_USER_ID,
    PERSON_USER_ID,
    TEAM_ID,
    TOKEN_RE,
    TS_RE,
    Content,
    Params,
    SlackError,
    StoredMessage,
    Workspace,
)

METHODS = (
    "auth.test",
    "chat.postMessage",
    "chat.update",
    "chat.delete",
    "chat.postEphemeral",
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
    "assistant.threads.setStatus",
    "conversations.history",
    "conversations.replies",
)
_GAVE_UP = {"ok": False, "error": "request_timeout"}
Handler = Callable[[str, RecordedCall, Params], dict[str, Any]]


class MockSlack(MockServer):
    """The mock Slack Web API server (see :mod:`mocks.slack` for every rule it enforces).

    Args:
        rate_limits: enforce :class:`SlackLimits` (HTTP 429 past them). Off by default.
        limits: the numbers used when ``rate_limits`` is on (default :class:`SlackLimits`).
        stream_idle_s: an open stream with no append for longer than this expires (Slack: about 5 minutes,
            observed); later appendStream / stopStream calls get ``message_not_in_streaming_state``.
        streaming_enabled: False makes chat.startStream answer ``unknown_method`` ("This method is currently
            not available"), as for an app or workspace without streaming.
        hang_s: how long a scripted timeout holds its answer (released early by ``stop`` / ``reset``).
        clock: monotonic seconds for ``RecordedCall.t``, rate limits and stream idling (inject a fake in tests).
    """

    platform = "slack"
    title = "Slack Web API"
    api_prefix = "/api/"

    def __init__(
        self,
        *,
        rate_limits: bool = False,
        limits: SlackLimits | None = None,
        stream_idle_s: float = 300.0,
        streaming_enabled: bool = True,
        hang_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(METHODS, rate_limits=rate_limits, hang_s=hang_s, clock=clock)
        self.limits = limits or SlackLimits()
        self.events: EventSender | None = None
        """Where a person's messages are posted as Events API requests (:meth:`events_to`); None: nowhere."""
        self._workspace = Workspace(clock, stream_idle_s, streaming_enabled)
        self._handlers: dict[str, Handler] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post,
            "chat.update": self._update,
            "chat.delete": self._delete,
            "chat.postEphemeral": self._post_ephemeral,
            "chat.startStream": self._start_stream,
            "chat.appendStream": self._append_stream,
            "chat.stopStream": self._stop_stream,
            "assistant.threads.setStatus": self._set_status,
            "conversations.history": self._history,
            "conversations.replies": self._replies,
        }
        self.reset()

    # ------------------------------------------------------------ settings kept across reset

    @property
    def stream_idle_s(self) -> float:
        return self._workspace.stream_idle_s

    @stream_idle_s.setter
    def stream_idle_s(self, seconds: float) -> None:
        self._workspace.stream_idle_s = seconds

    @property
    def streaming_enabled(self) -> bool:
        return self._workspace.streaming_enabled

    @streaming_enabled.setter
    def streaming_enabled(self, enabled: bool) -> None:
        self._workspace.streaming_enabled = enabled

    @property
    def missing_channels(self) -> set[str]:
        """Well-formed channel ids that answer ``channel_not_found`` (every other ``[CGD]…`` id exists)."""
        return self._workspace.missing_channels

    def _routes(self, app: web.Application) -> None:
        app.router.add_post("/api/{method}", self._handle)
        app.router.add_get("/api/{method}", self._handle, allow_head=False)  # slack-sdk reads history by GET

    # ------------------------------------------------------------ scripting and state

    def reset(self) -> None:
        """Forget messages, calls, faults, latencies, counters and rate state; release hanging calls.

        ``rate_limits``, ``stream_idle_s``, ``streaming_enabled`` and ``missing_channels`` are kept.
        """
        super().reset()
        self._workspace.messages.clear()
        self._workspace.statuses.clear()
        self._workspace._latest_us.clear()
        self.ephemerals: list[tuple[str, str, str]] = []
        """``(channel, user, text)`` of each chat.postEphemeral: seen by that user only, never in the history."""
        self._rates = RateLimiter(self.limits)

    async def stop(self) -> None:
        """Finish the event deliveries under way, then stop as every mock does (:meth:`MockServer.stop`)."""
        if self.events is not None:
            await self.events.close()
        await super().stop()

    def add_user_message(self, chat_id: ChatId, ts: str | None, text: str, *, thread_ts: str | None = None) -> str:
        """Seed a message a person wrote (the parent of a thread for replies and streams); return its ts.

        Args:
            chat_id: a channel id.
            ts: its ts, e.g. ``1700000000.000100`` (later messages get later ones); None: the next one.
            text: what the person wrote.
            thread_ts: the thread it replies in, if any.

        Seeded messages are not in :meth:`visible` (the other mocks never hold the person's messages either)
        and the bot cannot edit or delete them (``cant_update_message`` / ``cant_delete_message``).

        Raises:
            ValueError: a bad channel, ts or thread, or a ts already taken.
        """
        ws, channel = self._workspace, str(chat_id)
        try:
            ws.channel({"channel": channel})
            parent = ws.thread(channel, thread_ts)
        except SlackError as error:
            raise ValueError(f"cannot seed a message in {channel!r}: {error.error}") from None
        if ts is not None and (not TS_RE.match(ts) or ts in ws.messages.get(channel, {})):
            raise ValueError(f"bad or taken ts {ts!r} in {channel!r}")
        return ws.store(channel, Content("text", text), thread_ts=parent, user=PERSON_USER_ID, ts=ts).ts

    def post_user_message(self, channel: ChatId, text: str, *, thread_ts: str | None = None) -> str:
        """Seed a message a person wrote at the next ts (as ``MockDiscord.post_user_message``); return its ts."""
        return self.add_user_message(channel, None, text, thread_ts=thread_ts)

    def remove(self, chat_id: ChatId, message_id: int | str) -> None:
        """A person or an admin deletes message ``message_id`` (a ts) of ``chat_id`` (the control API's
        ``/_mock/remove``): conversations.history and .replies leave it out from now on.

        Raises:
            ValueError: no such message, or it is deleted already.
        """
        try:
            message = self._workspace.find(str(chat_id), str(message_id))
        except SlackError:
            raise ValueError(f"message {message_id} of {chat_id} does not exist (or was deleted)") from None
        message.deleted = True

    def user_message(self, chat_id: ChatId, text: str) -> str:
        """Store a top-level message a person wrote in ``chat_id`` at the next ts (the control API's
        ``/_mock/user_message``); return its ts.

        Raises:
            ValueError: a bad channel.
        """
        ts = self.add_user_message(chat_id, None, text)
        if self.events is not None:  # the app hears of it as Slack tells it (mocks.slack.events)
            self.events.send(message_event(str(chat_id), PERSON_USER_ID, text, ts))
        return ts

    def events_to(self, url: str, signing_secret: str) -> None:
        """Post a person's later messages to the app at ``url`` (its Events API Request URL, e.g. Bolt's
        ``http://127.0.0.1:3000/slack/events``), signed with ``signing_secret`` (:mod:`mocks.slack.events`)."""
        self.events = EventSender(url, signing_secret)

    def press(
        self, chat_id: ChatId, message_id: int | str, data: str | None, user: int | str | None = None
    ) -> dict[str, Any]:
        """A person presses a button of the bot's message ``message_id`` (its ts): the ``block_actions`` payload
        the app receives (:mod:`mocks.slack.actions`).

        Raises:
            ValueError: no such message or button.
        """
        channel, ts = str(chat_id), str(message_id)
        found = [m for m in self.messages(channel) if m.ts == ts and m.user == BOT_USER_ID]
        if not found:
            raise ValueError(f"message {ts} of {channel} does not exist (or was deleted)")
        pressed = [(b, e) for b, e in actions.buttons(found[0].blocks) if data is None or e["action_id"] == data]
        if not pressed:
            shown = [e["action_id"] for _, e in actions.buttons(found[0].blocks)]
            raise ValueError(f"message {ts} has no button {data!r}: its buttons are {shown}")
        return actions.block_actions(
            message_json(found[0]), channel, *pressed[0], user=None if user is None else str(user)
        )

    def chats(self) -> list[ChatId]:
        """Channels that ever received a message, in first-message order."""
        return list(self._workspace.messages)

    def visible(self, chat_id: ChatId) -> list[tuple[int | str, str]]:
        """What a person sees of the bot in ``chat_id``: ``(ts, current text)`` of its top-level messages and
        thread replies in ts order; deleted ones left out."""
        return [(m.ts, m.text) for m in self.messages(chat_id) if m.user == BOT_USER_ID]

    def native_streams(self) -> dict[ChatId, list[tuple[int | str, str, str]]]:
        """Per channel, ``(ts, state, text)`` of each chat.startStream message not deleted: ``open`` (not yet
        stopped; one idle past ``stream_idle_s`` expires here), ``expired`` or ``stopped``."""
        out: dict[ChatId, list[tuple[int | str, str, str]]] = {}
        for channel in self._workspace.messages:
            for m in self._workspace.visible(channel):
                if m.streamed and m.user == BOT_USER_ID:
                    state = "open" if self._workspace.is_streaming(m) else "expired" if m.expired else "stopped"
                    out.setdefault(channel, []).append((m.ts, state, m.text))
        return out

    def messages(self, chat_id: ChatId) -> list[StoredMessage]:
        """Every stored, not deleted message of ``chat_id`` (seeded ones too), in ts order."""
        return self._workspace.visible(str(chat_id))

    def status(self, channel: str, thread_ts: str) -> str | None:
        """The last assistant.threads.setStatus text of that thread (``""`` clears it)."""
        return self._workspace.statuses.get((channel, thread_ts))

    # ------------------------------------------------------------ request handling

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        call = RecordedCall(method=method, chat_id=None, message_id=None, text=None, t=self._clock())
        self.calls.append(call)
        try:
            params, token = await read_request(request)
            call.chat_id = str_or_none(params.get("channel", params.get("channel_id")))
            call.message_id = str_or_none(params.get("ts"))
            call.text = str_or_none(params.get("text", params.get("markdown_text")))
            result = await self._process(token, call, params)
        except SlackError as error:
            return self._answer_error(call, error)
        if result in (Hang.RESET, Hang.RESET_AFTER_COMMIT):
            self._hang_up(request)
        if isinstance(result, Hang):
            return web.json_response(_GAVE_UP, status=504)  # the client has gone: nobody reads this
        call.status, call.ok = 200, True
        return web.json_response({"ok": True, **result})

    async def _process(self, token: str | None, call: RecordedCall, params: Params) -> dict[str, Any] | Hang:
        if not token:
            raise SlackError("not_authed")
        if not TOKEN_RE.match(token):
            raise SlackError("invalid_auth")
        name = self._script.method(call.method)
        if name is None:
            raise SlackError("unknown_method")
        call.method = name
        return await self._scripted(call, lambda: self._handlers[name](token, call, params), fault_error)

    def _answer_error(self, call: RecordedCall, error: SlackError) -> web.Response:
        headers: dict[str, str] = {}
        if error.retry_after_s is not None:
            headers["Retry-After"] = str(error.retry_after_s)
            call.retry_after_s = float(error.retry_after_s)
        call.status, call.ok, call.description = error.status, False, error.error
        return web.json_response({"ok": False, "error": error.error}, status=error.status, headers=headers)

    def _admit(self, token: str, method: str, channel: str) -> None:
        """Rate limits (when on): a 429 past them, else count this call. A refused call costs nothing."""
        if not self.rate_limits:
            return
        now = self._clock()
        wait_s = self._rates.wait_s(token, method, channel, now)
        if wait_s > 0:
            raise SlackError("ratelimited", 429, retry_after_header(wait_s))
        self._rates.consume(token, method, channel, now)

    # ------------------------------------------------------------ methods

    def _auth_test(self, token: str, call: RecordedCall, params: Params) -> dict[str, Any]:
        return {
            "url": "https://streamrelay-mock.slack.com/",
            "team": "streamrelay mock",
            "user": "streamrelay",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": "B0MOCKBOT",
            "is_enterprise_install": False,
        }

    def _post(self, token: str, call: RecordedCall, params: Params) -> dict[str, Any]:
        view = read_blocks(params)  # a message with blocks shows them; its text is the notification fallback
        channel, given, thread_ts = self._workspace.check_post(params, blocks=view is not None)
        metadata = history.metadata_of(params)
        self._admit(token, call.method, channel)
        message = self._workspace.store(channel, given, thread_ts=thread_ts, user=BOT_USER_ID)
        message.metadata = metadata
        if view is not None:
            message.text, message.blocks, message.media = view.text, view.blocks, view.media
        call.message_id = message.ts
        return {"channel": channel, "ts": message.ts, "message": message_json(message)}

    def _update(self, token: str, call: RecordedCall, params: Params) -> dict[str, Any]:
        """chat.update (https://docs.slack.dev/reference/methods/chat.update): ``blocks`` replace the message's
        blocks, an empty array removes them, and without ``blocks`` the previous ones are retained (the text is then
        only their notification fallback); ``markdown_text`` goes with neither ``blocks`` nor ``text``."""
        message, given = self._workspace.check_update(params)
        cleared = params.get("blocks") in ("[]", [])
        view = None if cleared else read_blocks(params)
        if (view is not None or cleared) and given.kind == "markdown_text":
            raise SlackError("markdown_text_conflict")
        metadata = history.metadata_of(params)
        self._admit(token, call.method, message.channel)
        message.metadata = metadata if metadata is not None else message.metadata
        message.wire, message.kind, message.edited = given.wire, given.kind, True
        if view is not None:
            message.text, message.blocks = view.text, view.blocks
        elif cleared or message.blocks is None:
            message.text, message.blocks = given.person_view, None
        if given.kind == "text" and params.get("mrkdwn") is not None:
            message.mrkdwn = given.mrkdwn
        return {"channel": message.channel, "ts": message.ts, "text": message.wire, "message": message_json(message)}

    def _delete(self, token: str, call: RecordedCall, params: Params) -> dict[str, Any]:
        message = self._workspace.check_delete(params)
        self._admit(token, call.method, message.channel)
        message.deleted = True
        return {"channel": message.channel, "ts": message.ts}

    def _start_stream(self, token: str, call: RecordedCall, params: Params) -> dict[str, Any]:
        channel, given, thread_ts = self._workspace.check_start(params)
        self._admit(token, call.method, channel)
        given = given or Content("markdown_text", "")
        message = self._workspace.store(channel, given, thread_ts=thread_ts, user=BOT_USER_ID)
        message.streaming = message.streamed = True
        message.last_active = self._clock()
        call.message_id = message.ts
        return {"channel": channel, "ts": message.ts}

    def _append_stream(self, token: str, call: RecordedCall, params: Params) -> dict[str, Any]:
        message, given = self._workspace.check_append(params, required=True)
        self._admit(token, call.method, message.channel)
        _append(message, given)
        message.last_active = self._clock()
        return {"channel": message.channel, "ts": message.ts}

    def _stop_stream(self, token: str, call: RecordedCall, params: Params) -> dict[str, Any]:
        message, given = self._workspace.check_append(params, required=False)
        self._admit(token, call.method, message.channel)
        _append(message, given)
        message.streaming = False
        return {"channel": message.channel, "ts": message.ts, "message": message_json(message)}

    def _post_ephemeral(self, token: str, call: RecordedCall, params: Params) -> dict[str, Any]:
        """chat.postEphemeral (https://docs.slack.dev/reference/methods/chat.postEphemeral): a message only
        ``user`` sees in ``channel``, never stored in its history (:attr:`ephemerals`); ``user`` is required
        (``user_not_found`` without a user id), and the text as chat.postMessage's."""
        view = read_blocks(params)
        channel, given, _ = self._workspace.check_post(params, blocks=view is not None)
        user = params.get("user")
        if not isinstance(user, str) or not re.fullmatch(r"[UW][A-Z0-9]{2,}", user):
            raise SlackError("user_not_found")
        self._admit(token, call.method, channel)
        text = view.text if view is not None else given.person_view
        self.ephemerals.append((channel, user, text))
        call.text = text
        return {"message_ts": f"{time.time():.6f}"}

    def _set_status(self, token: str, call: RecordedCall, params: Params) -> dict[str, Any]:
        channel, thread_ts, status = self._workspace.check_status(params)
        call.message_id, call.text = thread_ts, status
        if status:
            self._workspace.statuses[(channel, thread_ts)] = status
        else:  # an empty status clears it
            self._workspace.statuses.pop((channel, thread_ts), None)
        return {}

    def _history(self, token: str, call: RecordedCall, params: Params) -> dict[str, Any]:
        """conversations.history (:mod:`mocks.slack.history`)."""
        channel = self._workspace.channel(params)
        answer = history.history(self._workspace, channel, params)
        self._admit(token, call.method, channel)
        return answer

    def _replies(self, token: str, call: RecordedCall, params: Params) -> dict[str, Any]:
        """conversations.replies (:mod:`mocks.slack.history`)."""
        channel = self._workspace.channel(params)
        answer = history.replies(self._workspace, channel, params)
        self._admit(token, call.method, channel)
        return answer


def _append(message: StoredMessage, given: Content | None) -> None:
    if given is not None:
        message.text += given.wire
        message.wire += given.wire


async def serve_forever(host: str = "127.0.0.1", port: int = 8082, rate_limits: bool = False) -> None:
    """Run a mock until cancelled (``streamrelay mock slack --port N``); prints its base URL."""
    await serve_mock(MockSlack(rate_limits=rate_limits), host, port)
