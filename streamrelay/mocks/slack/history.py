"""Message metadata and reading a conversation back: ``metadata`` on chat.postMessage / chat.update,
conversations.history and conversations.replies, as the mock Slack serves them (no HTTP here).

Metadata (https://docs.slack.dev/messaging/message-metadata, https://docs.slack.dev/reference/methods/chat.postMessage):
``metadata`` is ``{"event_type": str, "event_payload": object}``, a JSON string in form and query bodies or an
object in JSON bodies. Not JSON, or not an object: ``invalid_metadata_format``; an empty or non-string
``event_type`` or a non-object ``event_payload``: ``invalid_metadata_schema``. It is stored with the message and
shown by the read methods only with ``include_all_metadata``. chat.update replaces it when given, keeps it
otherwise.

conversations.history (https://docs.slack.dev/reference/methods/conversations.history): ``channel`` (required),
``oldest`` (default 0), ``latest`` (default now), ``inclusive`` (bounds included; default false), ``limit``
(default 100, at most 999), ``cursor``, ``include_all_metadata``. The channel's top-level messages (thread
replies are not in history), NEWEST first; a thread parent carries ``reply_count``, ``reply_users``,
``reply_users_count`` and ``latest_reply``.

conversations.replies (https://docs.slack.dev/reference/methods/conversations.replies): ``channel``, ``ts``
(required: the parent's ts or a reply's; a missing, unknown or deleted one is ``thread_not_found``; a message
without replies is returned alone), ``oldest``, ``latest``, ``inclusive``, ``limit`` (default and maximum
1000), ``cursor``, ``include_all_metadata``. The parent FIRST (always: the bounds filter the replies), then the
replies oldest first; replies carry ``thread_ts`` and ``parent_user_id``.

Both answer ``{"ok": true, "messages": [...], "has_more": bool, "response_metadata": {"next_cursor": "..."}}``
(``next_cursor`` ``""`` on the last page; history also ``pin_count``); deleted messages are left out. Errors:
``channel_not_found``, ``thread_not_found``, ``invalid_cursor``, ``invalid_ts_oldest``, ``invalid_ts_latest``,
``invalid_arguments`` (a ``limit`` that is not an integer >= 0). Rate limits: Tier 3 each (see
:class:`~mocks.slack.SlackLimits`).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from streamrelay.mocks.slack.wire import message_json
from streamrelay.mocks.slack.workspace import Params, SlackError, StoredMessage, Workspace, flag, ts_key

HISTORY_LIMIT = (100, 999)
"""conversations.history ``limit``: default, maximum."""
REPLIES_LIMIT = (1000, 1000)
"""conversations.replies ``limit``: default, maximum."""

_TS_BOUND = re.compile(r"^\d+(\.\d+)?$")
_NEVER = (2**63, 0)


def metadata_of(params: Params) -> dict[str, Any] | None:
    """The ``metadata`` parameter validated, or None when absent.

    Raises:
        SlackError: ``invalid_metadata_format`` or ``invalid_metadata_schema``.
    """
    value = params.get("metadata")
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise SlackError("invalid_metadata_format") from None
    if not isinstance(value, dict):
        raise SlackError("invalid_metadata_format")
    event_type, payload = value.get("event_type"), value.get("event_payload")
    if not isinstance(event_type, str) or not event_type or not isinstance(payload, dict):
        raise SlackError("invalid_metadata_schema")
    return {"event_type": event_type, "event_payload": payload}


def history(ws: Workspace, channel: str, params: Params) -> dict[str, Any]:
    """conversations.history's answer fields for ``channel`` (an existing channel)."""
    oldest, latest, inclusive = _bounds(params)
    limit = _limit(params, HISTORY_LIMIT)
    top = [m for m in ws.visible(channel) if m.thread_ts is None and _within(m.ts, oldest, latest, inclusive)]
    page, cursor = _page(list(reversed(top)), params, limit)
    with_meta = flag(params.get("include_all_metadata"), False)
    messages = [_json(ws, m, with_meta) for m in page]
    return {
        "messages": messages,
        "has_more": bool(cursor),
        "pin_count": 0,
        "response_metadata": {"next_cursor": cursor},
    }


def replies(ws: Workspace, channel: str, params: Params) -> dict[str, Any]:
    """conversations.replies's answer fields for ``channel`` (an existing channel).

    Raises:
        SlackError: ``thread_not_found`` (and the bound, limit and cursor errors).
    """
    ts = params.get("ts")
    found = ws.messages.get(channel, {}).get(ts) if isinstance(ts, str) else None
    if found is None or found.deleted:
        raise SlackError("thread_not_found")
    parent = ws.messages[channel][found.thread_ts] if found.thread_ts is not None else found
    if parent.deleted:
        raise SlackError("thread_not_found")
    oldest, latest, inclusive = _bounds(params)
    limit = _limit(params, REPLIES_LIMIT)
    thread = [m for m in _replies(ws, parent) if _within(m.ts, oldest, latest, inclusive)]
    page, cursor = _page([parent, *thread], params, limit)
    with_meta = flag(params.get("include_all_metadata"), False)
    messages = [_json(ws, m, with_meta) for m in page]
    return {"messages": messages, "has_more": bool(cursor), "response_metadata": {"next_cursor": cursor}}


def _replies(ws: Workspace, parent: StoredMessage) -> list[StoredMessage]:
    return [m for m in ws.visible(parent.channel) if m.thread_ts == parent.ts]


def _json(ws: Workspace, message: StoredMessage, with_metadata: bool) -> dict[str, Any]:
    body = message_json(message)
    if with_metadata and message.metadata is not None:
        body["metadata"] = message.metadata
    if message.thread_ts is not None:
        parent = ws.messages[message.channel].get(message.thread_ts)
        body["parent_user_id"] = parent.user if parent is not None else None
        return body
    thread = _replies(ws, message)
    if thread:
        users = list(dict.fromkeys(m.user for m in thread))
        body.update(
            thread_ts=message.ts,
            reply_count=len(thread),
            reply_users=users,
            reply_users_count=len(users),
            latest_reply=thread[-1].ts,
        )
    return body


def _bound(params: Params, name: str, error: str) -> tuple[int, int] | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    text = str(value)
    if not _TS_BOUND.match(text):
        raise SlackError(error)
    seconds, _, fraction = text.partition(".")
    return int(seconds), int((fraction + "000000")[:6])


def _bounds(params: Params) -> tuple[tuple[int, int], tuple[int, int], bool]:
    oldest = _bound(params, "oldest", "invalid_ts_oldest") or (0, 0)
    latest = _bound(params, "latest", "invalid_ts_latest") or _NEVER
    return oldest, latest, flag(params.get("inclusive"), False)


def _within(ts: str, oldest: tuple[int, int], latest: tuple[int, int], inclusive: bool) -> bool:
    key = ts_key(ts)
    return oldest <= key <= latest if inclusive else oldest < key < latest


def _limit(params: Params, default_max: tuple[int, int]) -> int:
    default, maximum = default_max
    value = params.get("limit")
    if value is None or value == "":
        return default
    try:
        limit = int(value)
    except (TypeError, ValueError):
        raise SlackError("invalid_arguments") from None
    if limit < 0:
        raise SlackError("invalid_arguments")
    return min(limit or default, maximum)


def _page(ordered: list[StoredMessage], params: Params, limit: int) -> tuple[list[StoredMessage], str]:
    """One page of ``ordered`` from the ``cursor`` (``next_ts:<ts>``, base64: the ts of the first message of
    the page), and the cursor of the next page (``""``: none)."""
    start = 0
    cursor = params.get("cursor")
    if cursor:
        try:
            decoded = base64.b64decode(str(cursor), validate=True).decode("ascii")
        except (binascii.Error, UnicodeDecodeError):
            raise SlackError("invalid_cursor") from None
        ts = decoded.removeprefix("next_ts:")
        index = next((i for i, m in enumerate(ordered) if m.ts == ts), None)
        if not decoded.startswith("next_ts:") or index is None:
            raise SlackError("invalid_cursor")
        start = index
    page = ordered[start : start + limit]
    rest = ordered[start + limit :]
    return page, base64.b64encode(f"next_ts:{rest[0].ts}".encode()).decode() if rest else ""
