"""What the mock Slack workspace holds and how each method changes it (no HTTP here).

Each ``do_*`` function validates its parameters like Slack, raises :class:`SlackError` with Slack's ``error``
string, and returns the ``ok`` answer's fields. Rules and their sources are listed in :mod:`mocks.slack`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_TEXT_CHARS = 40_000
"""``text`` limit in characters (https://docs.slack.dev/reference/methods/chat.postMessage#truncating)."""
MAX_MARKDOWN_CHARS = 12_000
"""``markdown_text`` limit per call in characters (https://docs.slack.dev/reference/methods/chat.postMessage)."""
BOT_USER_ID = "U0MOCKBOT"
PERSON_USER_ID = "U0PERSON1"
TEAM_ID = "T0MOCKTEAM"
FIRST_TS_S = 1_700_000_000

CHANNEL_RE = re.compile(r"^[CGD][A-Z0-9]{8,}$")
TOKEN_RE = re.compile(r"^xox[bp]-[A-Za-z0-9-]+$")
TS_RE = re.compile(r"^\d+\.\d{6}$")
_PERSON_VIEW = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))

Params = Mapping[str, Any]


class SlackError(Exception):
    """A refusal: HTTP ``status`` (200 for ordinary Slack errors) and Slack's ``error`` string."""

    def __init__(self, error: str, status: int = 200, retry_after_s: int | None = None) -> None:
        super().__init__(error)
        self.error = error
        self.status = status
        self.retry_after_s = retry_after_s


@dataclass
class StoredMessage:
    """A message as a person sees it.

    ``text`` is what a person reads: for ``text`` messages the wire text with ``&amp;``, ``&lt;``, ``&gt;``
    decoded; for ``markdown_text`` messages and streams the Markdown source (the mock does not render
    Markdown). ``wire`` is the text as sent. ``kind`` is ``text`` or ``markdown_text``.
    """

    channel: str
    ts: str
    text: str
    wire: str
    kind: str
    user: str = BOT_USER_ID
    thread_ts: str | None = None
    mrkdwn: bool = True
    streaming: bool = False
    """An open stream (chat.startStream, not yet stopped or expired)."""
    streamed: bool = False
    """It was created by chat.startStream."""
    expired: bool = False
    last_active: float = 0.0
    edited: bool = False
    deleted: bool = False
    metadata: dict[str, Any] | None = None
    """``{"event_type", "event_payload"}`` posted with it (:mod:`mocks.slack.history`)."""
    blocks: list[dict[str, Any]] | None = None
    """Its Block Kit blocks (:mod:`mocks.slack.blocks`); then ``text`` is what a person reads of them."""
    media: dict[str, Any] | None = None
    """``{"kind", "url", "caption"}`` of an image block it shows."""


@dataclass
class Content:
    kind: str
    wire: str
    mrkdwn: bool = True

    @property
    def person_view(self) -> str:
        if self.kind == "markdown_text":
            return self.wire
        text = self.wire
        for entity, char in _PERSON_VIEW:
            text = text.replace(entity, char)
        return text


def ts_key(ts: str) -> tuple[int, int]:
    seconds, _, micros = ts.partition(".")
    return int(seconds), int(micros)


def flag(value: Any, default: bool) -> bool:
    """A boolean as Slack reads it from JSON (``true``) or a form (``"true"``, ``"1"``)."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() not in ("0", "false", "no")


def _text_param(params: Params, name: str) -> str | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise SlackError("invalid_arguments")
    return value


def content(params: Params, *, required: bool = True, chunk: bool = False) -> Content | None:
    """``text`` or ``markdown_text`` (never both), within its limit.

    A message (``chunk=False``) must have text that is not whitespace only, else ``no_text``; a stream chunk
    (``chunk=True``) may be whitespace (a paragraph break streamed on its own) but not empty when
    ``required``. Without ``required``, no text at all is None.
    """
    text, markdown = _text_param(params, "text"), _text_param(params, "markdown_text")
    if text is not None and markdown is not None:
        raise SlackError("markdown_text_conflict")
    given = Content("markdown_text", markdown) if markdown is not None else None
    if text is not None:
        given = Content("text", text, flag(params.get("mrkdwn"), True))
    if given is None or not given.wire:
        if required:
            raise SlackError("no_text")
        return None
    if not chunk and not given.wire.strip():
        raise SlackError("no_text")
    limit = MAX_MARKDOWN_CHARS if given.kind == "markdown_text" else MAX_TEXT_CHARS
    if len(given.wire) > limit:
        raise SlackError("msg_too_long")
    return given


@dataclass
class Workspace:
    """Messages per channel and the stream rules.

    Args:
        clock: monotonic seconds (stream idling).
        stream_idle_s: an open stream with no append for longer than this expires.
    """

    clock: Callable[[], float]
    stream_idle_s: float
    streaming_enabled: bool = True
    missing_channels: set[str] = field(default_factory=set)
    messages: dict[str, dict[str, StoredMessage]] = field(default_factory=dict)
    statuses: dict[tuple[str, str], str] = field(default_factory=dict)
    _latest_us: dict[str, int] = field(default_factory=dict)

    # ------------------------------------------------------------ lookups

    def channel(self, params: Params, name: str = "channel") -> str:
        channel = params.get(name)
        if not isinstance(channel, str) or not CHANNEL_RE.match(channel) or channel in self.missing_channels:
            raise SlackError("channel_not_found")
        return channel

    def find(self, channel: str, ts: Any) -> StoredMessage:
        if ts is None or ts == "":
            raise SlackError("invalid_arguments")
        message = self.messages.get(channel, {}).get(str(ts))
        if message is None or message.deleted:
            raise SlackError("message_not_found")
        return message

    def thread(self, channel: str, thread_ts: Any) -> str | None:
        """A thread parent: a visible top-level message of ``channel`` (a reply's ts is not a thread)."""
        if thread_ts is None or thread_ts == "":
            return None
        parent = self.messages.get(channel, {}).get(str(thread_ts))
        if parent is None or parent.deleted or parent.thread_ts is not None:
            raise SlackError("thread_not_found")
        return parent.ts

    def is_streaming(self, message: StoredMessage) -> bool:
        """Whether a stream is open; one idle past ``stream_idle_s`` expires here."""
        if message.streaming and self.clock() - message.last_active > self.stream_idle_s:
            message.streaming, message.expired = False, True
        return message.streaming

    def store(
        self, channel: str, given: Content, *, thread_ts: str | None, user: str, ts: str | None = None
    ) -> StoredMessage:
        """Store a message at ``ts``, by default 100 µs after the channel's latest (``1700000000.000100`` first)."""
        if ts is None:
            latest = self._latest_us.get(channel, FIRST_TS_S * 1_000_000)
            ts = f"{(latest + 100) // 1_000_000}.{(latest + 100) % 1_000_000:06d}"
        seconds, micros = ts_key(ts)
        self._latest_us[channel] = max(self._latest_us.get(channel, 0), seconds * 1_000_000 + micros)
        message = StoredMessage(
            channel, ts, given.person_view, given.wire, given.kind, user, thread_ts, mrkdwn=given.mrkdwn
        )
        self.messages.setdefault(channel, {})[ts] = message
        if user == BOT_USER_ID and thread_ts is not None:  # the app replied: the thread's status goes
            self.statuses.pop((channel, thread_ts), None)
        return message

    def own(self, message: StoredMessage, error: str) -> StoredMessage:
        if message.user != BOT_USER_ID:
            raise SlackError(error)
        return message

    # ------------------------------------------------------------ methods (validation only; storing is apart)

    def check_post(self, params: Params, *, blocks: bool = False) -> tuple[str, Content, str | None]:
        """Channel, text and thread of a chat.postMessage; with ``blocks`` the text may be left out (it is then
        only the notification fallback: https://docs.slack.dev/reference/methods/chat.postMessage)."""
        channel = self.channel(params)
        given = content(params, required=not blocks) or Content("text", "")
        return channel, given, self.thread(channel, params.get("thread_ts"))

    def check_update(self, params: Params) -> tuple[StoredMessage, Content]:
        message = self.own(self.find(self.channel(params), params.get("ts")), "cant_update_message")
        given = content(params)
        assert given is not None
        if self.is_streaming(message):
            raise SlackError("streaming_state_conflict")
        return message, given

    def check_delete(self, params: Params) -> StoredMessage:
        message = self.own(self.find(self.channel(params), params.get("ts")), "cant_delete_message")
        if self.is_streaming(message):
            raise SlackError("cant_delete_message")  # observed: an open stream cannot be deleted
        return message

    def check_start(self, params: Params) -> tuple[str, Content | None, str]:
        channel = self.channel(params)
        if not self.streaming_enabled:
            raise SlackError("unknown_method")
        if not params.get("thread_ts"):
            raise SlackError("invalid_arguments")
        if not channel.startswith("D"):
            for name in ("recipient_user_id", "recipient_team_id"):
                if not params.get(name):
                    raise SlackError(f"missing_{name}")
        given = content(params, required=False, chunk=True)
        if given is not None and given.kind != "markdown_text":
            raise SlackError("invalid_arguments")  # streams take markdown_text only
        thread_ts = self.thread(channel, params.get("thread_ts"))
        assert thread_ts is not None
        return channel, given, thread_ts

    def check_append(self, params: Params, *, required: bool) -> tuple[StoredMessage, Content | None]:
        message = self.own(self.find(self.channel(params), params.get("ts")), "cant_update_message")
        given = content(params, required=required, chunk=True)
        if given is not None and given.kind != "markdown_text":
            raise SlackError("invalid_arguments")
        if not self.is_streaming(message):
            raise SlackError("message_not_in_streaming_state")
        return message, given

    def check_status(self, params: Params) -> tuple[str, str, str]:
        channel = self.channel(params, "channel_id")
        thread_ts = self.thread(channel, params.get("thread_ts"))
        status = params.get("status")
        if thread_ts is None or not isinstance(status, str):
            raise SlackError("invalid_arguments")
        return channel, thread_ts, status

    def visible(self, channel: str) -> list[StoredMessage]:
        stored = self.messages.get(channel, {}).values()
        return sorted((m for m in stored if not m.deleted), key=lambda m: ts_key(m.ts))
