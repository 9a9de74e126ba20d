"""The mock's channels and messages: what is stored, and the checks Discord makes before storing (rules:
:mod:`mocks.discord`)."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamrelay.mocks.discord import threads, wire
from streamrelay.mocks.discord.embeds import check_embeds
from streamrelay.mocks.discord.threads import Thread, ThreadRequest
from streamrelay.mocks.discord.wire import StoredMessage, fail

NONCE_WINDOW_S = 600.0
"""How long ``enforce_nonce`` remembers a nonce: Discord says "the past few minutes"
(https://discord.com/developers/docs/resources/message#create-message); the mock takes 10 minutes."""

Body = dict[str, Any]


@dataclass(frozen=True)
class Draft:
    """A validated createMessage / executeWebhook body."""

    content: str
    embeds: list[Any]
    allowed_mentions: dict[str, Any] | None
    reference: str | None
    nonce: int | str | None
    enforce_nonce: bool


@dataclass(frozen=True)
class Change:
    """A validated edit: the message's content and embeds afterwards, and new allowed mentions (if sent)."""

    content: str
    embeds: list[Any]
    allowed_mentions: dict[str, Any] | None


class Channels:
    """Every channel's messages by id (ids increase, so insertion order is id order), the threads started from
    them (:mod:`mocks.discord.threads`) and the nonces seen.

    Args:
        clock: monotonic seconds, for the nonce window.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.missing: set[str] = set()
        self.reset()

    def reset(self) -> None:
        """Forget messages, threads and nonces (``missing`` is kept)."""
        self.ids = wire.Snowflakes()
        self.messages: dict[str, dict[str, StoredMessage]] = {}
        self.threads: dict[str, Thread] = {}
        """Threads by id (the id of the message each was started from), in creation order."""
        self._nonces: dict[tuple[str, str, str], tuple[str, float]] = {}

    def channel(self, channel_id: str) -> str:
        """``channel_id`` if it names an existing channel: 400 50035 if not a snowflake, 404 10003 if missing."""
        channel = wire.check_snowflake("channel_id", channel_id)
        if channel in self.missing:
            raise fail(wire.UNKNOWN_CHANNEL)
        return channel

    def find(self, channel_id: str, message_id: str, *, principal: str, deleting: bool) -> StoredMessage:
        """The message to edit or delete.

        Raises:
            ApiError: 404 10008 when unknown, deleted or (for a webhook) not the webhook's own; 403 50005 /
                50013 when the bot edits / deletes someone else's.
        """
        channel = self.channel(channel_id)
        message = self.messages.get(channel, {}).get(wire.check_snowflake("message_id", message_id))
        webhook = principal.removeprefix("webhook:") if principal.startswith("webhook:") else None
        if message is None or message.deleted or (webhook is not None and message.webhook_id != webhook):
            raise fail(wire.UNKNOWN_MESSAGE)
        if webhook is None and message.author_id != principal:
            raise fail(wire.MISSING_PERMISSIONS if deleting else wire.NOT_AUTHOR)
        return message

    def check_create(self, channel: str, body: Body, *, replies: bool) -> Draft:
        """Validate a new message for ``channel`` (``replies``: whether ``message_reference`` is read).

        Raises:
            ApiError: 400 50035 (a bad field, content over 2000 characters, an unknown reply target with
                ``fail_if_not_exists``), 400 50006 (nothing to show).
        """
        content = wire.content_of(body, required=True) or ""
        embeds = wire.embeds_of(body) or []
        check_embeds(embeds)
        allowed = wire.allowed_mentions_of(body)
        if not content.strip() and not embeds:
            raise fail(wire.EMPTY)
        reference = self._reference(channel, body) if replies else None
        nonce = wire.nonce_of(body)
        return Draft(content, embeds, allowed, reference, nonce, body.get("enforce_nonce") is True)

    def _reference(self, channel: str, body: Body) -> str | None:
        reference = wire.reference_of(body)
        if reference is None:
            return None
        message_id, fail_if_missing = reference
        target = self.messages.get(channel, {}).get(message_id)
        if target is not None and not target.deleted:
            return message_id
        if fail_if_missing:
            raise wire.form_error("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message")
        return None

    def store(self, channel: str, draft: Draft, *, principal: str) -> StoredMessage:
        """Store a new message by ``principal`` (a bot's user id or ``webhook:<id>``).

        With ``enforce_nonce`` and a nonce this author used in this channel within :data:`NONCE_WINDOW_S` (a
        nonce is compared as a string: ``123`` and ``"123"`` are one nonce, an assumption), the earlier message
        is returned (the caller answers it, 200, as if just created) and nothing is stored; if that message was
        deleted since, 404 10008 ``Unknown Message`` (what discord.py documents for "a message with the same
        nonce as one that has been explicitly deleted shortly earlier"). Without ``enforce_nonce`` a nonce is
        remembered but never checked.

        Raises:
            ApiError: 404 10008, as above.
        """
        now = self._clock()
        key = (channel, principal, str(draft.nonce))
        remembered = self._nonces.get(key)
        if draft.nonce is not None and draft.enforce_nonce and remembered and now < remembered[1]:
            earlier = self.messages[channel][remembered[0]]
            if earlier.deleted:
                raise fail(wire.UNKNOWN_MESSAGE)
            return earlier
        webhook = principal.removeprefix("webhook:") if principal.startswith("webhook:") else None
        message = StoredMessage(self.ids.next(), channel, webhook or principal, draft.content, _now(), draft.embeds)
        message.reference, message.allowed_mentions = draft.reference, draft.allowed_mentions
        message.nonce, message.webhook_id = draft.nonce, webhook
        message.mention_everyone, message.mentions = wire.pings(draft.content, draft.allowed_mentions)
        self.messages.setdefault(channel, {})[message.id] = message
        if draft.nonce is not None:
            self._nonces[key] = (message.id, now + NONCE_WINDOW_S)
        return message

    def check_thread(self, channel: str, message_id: str, body: Body) -> tuple[StoredMessage, ThreadRequest]:
        """Validate Start Thread from Message on message ``message_id`` of the existing ``channel``: the
        message to start from and the thread asked for.

        Raises:
            ApiError: 400 50035 (a bad path id or field), 400 50024 (``channel`` is a thread), 404 10008 (no
                such message), 400 160004 (the message already has a thread).
        """
        mid = wire.check_snowflake("message_id", message_id)
        request = threads.check_request(body)
        if channel in self.threads:
            raise fail(threads.WRONG_CHANNEL_TYPE)
        message = self.messages.get(channel, {}).get(mid)
        if message is None or message.deleted:
            raise fail(wire.UNKNOWN_MESSAGE)
        if mid in self.threads:
            raise fail(threads.THREAD_EXISTS)
        return message, request

    def start_thread(self, message: StoredMessage, request: ThreadRequest, *, principal: str) -> Thread:
        """Store the thread started from ``message`` by ``principal`` (validated by :meth:`check_thread`)."""
        thread = Thread(
            message.id,
            message.channel_id,
            principal,
            request.name,
            request.auto_archive_duration,
            request.rate_limit_per_user,
            _now(),
        )
        self.threads[thread.id] = thread
        return thread

    def seed(self, channel_id: str, content: str) -> StoredMessage:
        """Store a message a person wrote."""
        channel = wire.check_snowflake("channel_id", channel_id)
        message = StoredMessage(self.ids.next(), channel, wire.PERSON_USER_ID, content, _now())
        self.messages.setdefault(channel, {})[message.id] = message
        return message

    @staticmethod
    def check_edit(message: StoredMessage, body: Body) -> Change:
        """Validate an edit: only the fields sent change; ``"content": null`` clears the content.

        Raises:
            ApiError: 400 50035 (a bad field, content over 2000 characters), 400 50006 (nothing left to show).
        """
        content = wire.content_of(body, required=False)
        embeds = wire.embeds_of(body)
        check_embeds(embeds or [])
        allowed = wire.allowed_mentions_of(body)
        new_content = ("" if "content" in body else message.content) if content is None else content
        new_embeds = message.embeds if embeds is None else embeds
        if not new_content.strip() and not new_embeds:
            raise fail(wire.EMPTY)
        return Change(new_content, new_embeds, allowed)

    @staticmethod
    def apply(message: StoredMessage, change: Change) -> None:
        """Apply a validated edit (an unchanged one too: Discord answers 200 and stamps the edit)."""
        message.content, message.embeds, message.edited_timestamp = change.content, change.embeds, _now()
        if change.allowed_mentions is not None:
            message.allowed_mentions = change.allowed_mentions
        message.mention_everyone, message.mentions = wire.pings(change.content, message.allowed_mentions)

    def json(self, message: StoredMessage) -> Body:
        """The message object, with its ``referenced_message`` and, once a thread was started from it, flag
        ``HAS_THREAD`` and its ``thread``."""
        referenced = self.messages[message.channel_id].get(message.reference or "")
        body = wire.message_json(message, referenced)
        thread = self.threads.get(message.id)
        if thread is not None:
            body["flags"] |= threads.HAS_THREAD
            body["thread"] = threads.thread_json(thread)
        return body


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
