"""Settling an uncertain Slack send by its message metadata: :func:`settle_send` on the adapter's connection.

Every chat.postMessage of :class:`~adapters.slack.adapter.SlackAdapter` that has a delivery id carries it as
message metadata, ``{"event_type": "streamrelay_delivery", "event_payload": {"delivery_id": ...}}``
(https://docs.slack.dev/messaging/message-metadata), which conversations.history and conversations.replies return
with ``include_all_metadata`` (https://docs.slack.dev/reference/methods/conversations.history,
https://docs.slack.dev/reference/methods/conversations.replies). So an uncertain send is settled by reading the
conversation since the newest message known before it (``oldest`` = ``PendingSend.after_id``, exclusive) and
looking for that delivery id.

A chat.startStream carries no metadata (https://docs.slack.dev/reference/methods/chat.startStream): an unknown start
is settled once the part went on in a message of its own (:func:`settle_start`), by reading the thread between the
newest message known before the start and that message (``latest`` = ``PendingSend.before_id``, exclusive): a
message of the bot there that carries no delivery id and shows the start's text is the stream.

Reading history needs the ``channels:history`` / ``groups:history`` / ``im:history`` / ``mpim:history`` scope of
the conversation, and membership of it: without them (``missing_scope``, ``not_in_channel``) the answer is
``unknown``. Commercially distributed apps outside the Slack Marketplace get conversations.history and .replies
at 1 request per minute and 15 messages per page (https://docs.slack.dev/apis/web-api/rate-limits); pages are
:data:`PAGE_SIZE` messages, at most :data:`MAX_PAGES` of them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from slack_sdk.web.async_slack_response import AsyncSlackResponse

from streamrelay.adapters.http_failures import unreadable_answer
from streamrelay.adapters.slack.answers import TS_RE
from streamrelay.adapters.slack.connection import Refused, SlackConnection
from streamrelay.adapters.slack.errors import PLATFORM
from streamrelay.core.events import Target
from streamrelay.core.ports import PendingSend, Settlement, SettleOutcome, Shown

EVENT_TYPE = "streamrelay_delivery"
"""The metadata ``event_type`` of a message that carries a delivery id."""
PAGE_SIZE = 15
"""Messages per conversations.history / conversations.replies page (the most some apps may ask for)."""
MAX_PAGES = 4
"""Pages read per settlement; past them, with more to read, the answer is ``unknown``."""
NO_ACCESS = ("missing_scope", "not_in_channel", "channel_not_found")
"""Refusals that mean the history cannot be read here: ``unknown``, not a failure of the call."""

Page = Callable[[str | None], Awaitable[AsyncSlackResponse]]
"""One page of a conversation's messages from a cursor (None: the first page)."""


def delivery_metadata(delivery_id: str) -> dict[str, Any]:
    """The chat.postMessage ``metadata`` that names a create by ``delivery_id``."""
    return {"event_type": EVENT_TYPE, "event_payload": {"delivery_id": delivery_id}}


def carries(message: Mapping[str, Any], delivery_id: str) -> bool:
    """Whether a message of conversations.history / .replies carries ``delivery_id`` in its metadata."""
    metadata = message.get("metadata")
    if not isinstance(metadata, Mapping) or metadata.get("event_type") != EVENT_TYPE:
        return False
    payload = metadata.get("event_payload")
    return isinstance(payload, Mapping) and payload.get("delivery_id") == delivery_id


async def settle_send(connection: SlackConnection, target: Target, pending: PendingSend) -> Settlement:
    """Find the message of an uncertain send by its delivery id.

    Reads conversations.replies of the thread when ``target`` posts into one (``thread_id``, else
    ``reply_to``, like chat.postMessage's ``thread_ts``), else conversations.history, with
    ``include_all_metadata``, ``oldest`` = ``pending.after_id`` (when given) and ``limit`` = :data:`PAGE_SIZE`,
    following ``response_metadata.next_cursor`` for at most :data:`MAX_PAGES` pages.

    Returns:
        ``found`` with the message ts; ``not_sent`` when every message since ``after_id`` was read and none
        carries the id; ``unknown`` when more pages remain past the bound or the history cannot be read
        (:data:`NO_ACCESS`).

    Raises:
        core.errors.UnreadableAnswerError: an answer that cannot be read (no ``messages`` array, or the message
            found has no ``ts``): unknown, asked again.
        core.errors.DeliveryError: a subclass, as every call (429 with ``scope=method``, 5xx, timeout).
    """
    method, page = _history(connection, target, pending.after_id)
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        answer = await connection.try_call(method, target, functools.partial(page, cursor), allow=NO_ACCESS)
        if isinstance(answer, Refused):
            return Settlement(SettleOutcome.UNKNOWN)
        for message in answer["messages"]:  # an array: adapters.slack.answers checked it
            if isinstance(message, Mapping) and carries(message, pending.delivery_id):
                return Settlement(SettleOutcome.FOUND, _found_ts(connection, method, target, message))
        cursor = (answer.get("response_metadata") or {}).get("next_cursor") or None
        if not answer.get("has_more") or cursor is None:
            return Settlement(SettleOutcome.NOT_SENT)
    return Settlement(SettleOutcome.UNKNOWN)


async def settle_start(connection: SlackConnection, target: Target, pending: PendingSend, streamed: str) -> Settlement:
    """Find the stream an unknown chat.startStream opened (``pending.stream_start``), showing ``streamed`` (the
    Markdown it sent), in the target's thread between ``pending.after_id`` and ``pending.before_id``.

    Every message there is the part's new message, a person's, another create of this sidecar (it carries a
    delivery id, or its id is in ``known_ids``) or the stream: a message of the bot (auth.test's ``user_id``) that
    carries no delivery id is the stream when its text is ``streamed`` (whitespace and Slack's ``&amp;`` ``&lt;``
    ``&gt;`` aside).

    Returns:
        ``found`` with the stream's ts; ``not_sent`` when every message in the bounds was read and none is a
        message of the bot without a delivery id; ``unknown`` when one is, but shows another text, when more pages
        remain, or when the history cannot be read (:data:`NO_ACCESS`).

    Raises:
        core.errors.UnreadableAnswerError: an answer that cannot be read: unknown, asked again.
        core.errors.DeliveryError: a subclass, as every call (429 with ``scope=method``, 5xx, timeout).
    """
    bot = await connection.user_id()
    thread = thread_ts(target)
    want = _plain(streamed)
    method, page = _history(connection, target, pending.after_id, pending.before_id)
    cursor: str | None = None
    unclear = False
    for _ in range(MAX_PAGES):
        answer = await connection.try_call(method, target, functools.partial(page, cursor), allow=NO_ACCESS)
        if isinstance(answer, Refused):
            return Settlement(SettleOutcome.UNKNOWN)
        for message in answer["messages"]:
            if not isinstance(message, Mapping) or not _may_be_stream(message, thread, bot, pending.known_ids):
                continue
            if _plain(message.get("text")) == want:
                return Settlement(SettleOutcome.FOUND, _found_ts(connection, method, target, message))
            unclear = True
        cursor = (answer.get("response_metadata") or {}).get("next_cursor") or None
        if not answer.get("has_more") or cursor is None:
            return Settlement(SettleOutcome.UNKNOWN if unclear else SettleOutcome.NOT_SENT)
    return Settlement(SettleOutcome.UNKNOWN)


def _may_be_stream(message: Mapping[str, Any], thread: str | None, bot: str | None, known: frozenset[str]) -> bool:
    """Whether ``message`` may be a stream this bot opened: not the thread's parent, not a create of this sidecar,
    not a person's."""
    ts = message.get("ts")
    if ts == thread or ts in known or _ours(message):
        return False
    return bot is None or message.get("user") == bot


def _ours(message: Mapping[str, Any]) -> bool:
    metadata = message.get("metadata")
    return isinstance(metadata, Mapping) and metadata.get("event_type") == EVENT_TYPE


def _plain(text: Any) -> str:
    """``text`` without whitespace, Slack's three escapes undone (how a stream's text is compared)."""
    if not isinstance(text, str):
        return ""
    return "".join(text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").split())


def _found_ts(connection: SlackConnection, method: str, target: Target, message: Mapping[str, Any]) -> str:
    """The ts of the message found; one without a ts cannot be read (it is not "None")."""
    ts = message.get("ts")
    if isinstance(ts, str) and TS_RE.fullmatch(ts):
        return ts
    raise unreadable_answer(
        PLATFORM,
        method,
        status=200,
        why="the message that carries the delivery id has no ts",
        body=json.dumps(message, default=str),
        target=str(target.chat_id),
        scrub=connection.scrub,
    )


def _history(
    connection: SlackConnection, target: Target, after_id: str | None, before_id: str | None = None
) -> tuple[str, Page]:
    channel, thread = str(target.chat_id), thread_ts(target)
    args: dict[str, Any] = {"channel": channel, "include_all_metadata": True, "limit": PAGE_SIZE}
    if after_id is not None:
        args |= {"oldest": after_id, "inclusive": False}
    if before_id is not None:
        args |= {"latest": before_id, "inclusive": False}
    if thread is not None:
        return "conversations.replies", lambda cursor: connection.client.conversations_replies(
            ts=thread, cursor=cursor, **args
        )
    return "conversations.history", lambda cursor: connection.client.conversations_history(cursor=cursor, **args)


def thread_ts(target: Target) -> str | None:
    """The thread a target posts into: ``thread_id``, else ``reply_to`` (Slack replies are thread replies)."""
    value = target.thread_id if target.thread_id is not None else target.reply_to
    return None if value is None else str(value)


async def read_back(connection: SlackConnection, target: Target, ts: str, expected: str) -> Shown:
    """Whether message ``ts`` of ``target`` still shows ``expected`` (the body the adapter rendered for the text the
    ledger acknowledged): conversations.history (conversations.replies in a thread) with ``oldest`` = ``latest`` =
    ``ts`` and ``inclusive``, so only that message can come back (https://docs.slack.dev/reference/methods/
    conversations.history). Not returned: ``gone`` (Slack leaves deleted messages out); returned with another text
    (whitespace and Slack's three escapes aside): ``changed``.

    Raises:
        core.errors.DeliveryError: a subclass, as every call: no access to the history (``missing_scope``,
            ``not_in_channel``) is a refusal, not a deleted message.
    """
    channel, thread = str(target.chat_id), thread_ts(target)
    args: dict[str, Any] = {"channel": channel, "oldest": ts, "latest": ts, "inclusive": True, "limit": 1}
    if thread is not None and thread != ts:
        method = "conversations.replies"
        answer = await connection.call(
            method, target, lambda: connection.client.conversations_replies(ts=thread, **args)
        )
    else:
        method = "conversations.history"
        answer = await connection.call(method, target, lambda: connection.client.conversations_history(**args))
    for message in answer["messages"]:  # an array: adapters.slack.answers checked it
        if isinstance(message, Mapping) and message.get("ts") == ts:
            return Shown.AS_DELIVERED if _plain(message.get("text")) == _plain(expected) else Shown.CHANGED
    return Shown.GONE
