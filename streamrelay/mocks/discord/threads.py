"""Threads started from a message, as the mock Discord keeps them
(https://discord.com/developers/docs/resources/channel#start-thread-from-message).

``POST /channels/{channel_id}/messages/{message_id}/threads`` with ``{"name", "auto_archive_duration"?,
"rate_limit_per_user"?}`` creates a public thread (channel type 11) whose id is the message's id; the answer is
201 with the thread's channel object. A thread is a channel of its own: messages are created, edited and
deleted in it under the thread's id, and it has its own rate-limit buckets (Discord's major parameter is the
channel id). The starting message gets flag ``HAS_THREAD`` (32) and a ``thread`` field.

Refusals, checked in this order (error codes:
https://discord.com/developers/docs/topics/opcodes-and-status-codes#json):

- path ids that are not snowflakes: 400 50035 ``NUMBER_TYPE_COERCE``; an unknown channel: 404 10003;
- the body: ``name`` missing or null is 400 50035 ``BASE_TYPE_REQUIRED``, not a string ``BASE_TYPE_BAD_TYPE``,
  not 1-100 characters (code points) ``BASE_TYPE_BAD_LENGTH``; ``auto_archive_duration`` not one of 60, 1440,
  4320, 10080 minutes ``BASE_TYPE_CHOICES``; ``rate_limit_per_user`` not null nor 0-21600 seconds
  ``NUMBER_TYPE_MAX`` (``BASE_TYPE_BAD_TYPE`` when not an integer);
- the channel is itself a thread: 400 50024 ``Cannot execute action on this channel type`` (threads do not
  nest);
- the message is unknown or deleted: 404 10008 ``Unknown Message``;
- the message already has a thread: 400 160004 ``A thread has already been created for this message``.

Simplifications: the mock has one guild (:data:`GUILD_ID`) and does not tell guild text channels from DM
channels (Discord refuses threads in a DM with 50024; here every channel that is not a thread takes them);
threads never archive; no thread-starter system message (type 21) is stored in the thread, so a thread's
messages are exactly what was sent into it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from streamrelay.mocks.discord.wire import form_error

PUBLIC_THREAD = 11
"""Channel type ``PUBLIC_THREAD`` (https://discord.com/developers/docs/resources/channel#channel-object-channel-types)."""
HAS_THREAD = 1 << 5
"""Message flag: "this message has an associated thread, with the same id as the message"."""
GUILD_ID = "1000000000000000001"
"""The one guild the mock's channels belong to."""
MAX_NAME_CHARS = 100
ARCHIVE_DURATIONS_MIN = (60, 1440, 4320, 10080)
"""``auto_archive_duration`` choices, minutes."""
DEFAULT_ARCHIVE_MIN = 1440
"""When ``auto_archive_duration`` is not sent (a channel's default is 24 hours)."""
MAX_SLOWMODE_S = 21_600

THREAD_EXISTS = (400, 160004, "A thread has already been created for this message")
WRONG_CHANNEL_TYPE = (400, 50024, "Cannot execute action on this channel type")


@dataclass(frozen=True)
class ThreadRequest:
    """A validated Start Thread from Message body."""

    name: str
    auto_archive_duration: int
    rate_limit_per_user: int


@dataclass
class Thread:
    """A public thread as a person sees it in the channel list: its name under its parent channel.

    Attributes:
        id: the thread's channel id, equal to the id of the message it was started from.
        parent_id: the channel of that message.
        owner_id: who started it (the bot's user id).
    """

    id: str
    parent_id: str
    owner_id: str
    name: str
    auto_archive_duration: int
    rate_limit_per_user: int
    created: datetime.datetime


def check_request(body: dict[str, Any]) -> ThreadRequest:
    """Validate a Start Thread from Message body.

    Raises:
        ApiError: 400 50035 naming the field (see the module docstring).
    """
    name = body.get("name")
    if name is None:
        raise form_error("name", "BASE_TYPE_REQUIRED", "This field is required")
    if not isinstance(name, str):
        raise form_error("name", "BASE_TYPE_BAD_TYPE", "Must be a string.")
    if not 1 <= len(name) <= MAX_NAME_CHARS:
        raise form_error("name", "BASE_TYPE_BAD_LENGTH", f"Must be between 1 and {MAX_NAME_CHARS} in length.")
    archive = body.get("auto_archive_duration")
    archive = DEFAULT_ARCHIVE_MIN if archive is None else archive
    if isinstance(archive, bool) or archive not in ARCHIVE_DURATIONS_MIN:
        choices = ", ".join(map(str, ARCHIVE_DURATIONS_MIN))
        raise form_error("auto_archive_duration", "BASE_TYPE_CHOICES", f"Value must be one of {{{choices}}}.")
    slowmode = body.get("rate_limit_per_user")
    slowmode = 0 if slowmode is None else slowmode
    if isinstance(slowmode, bool) or not isinstance(slowmode, int):
        raise form_error("rate_limit_per_user", "BASE_TYPE_BAD_TYPE", "Must be an integer.")
    if not 0 <= slowmode <= MAX_SLOWMODE_S:
        raise form_error("rate_limit_per_user", "NUMBER_TYPE_MAX", f"int value should be <= {MAX_SLOWMODE_S}.")
    return ThreadRequest(name, int(archive), slowmode)


def thread_json(thread: Thread) -> dict[str, Any]:
    """The thread's channel object (https://discord.com/developers/docs/resources/channel#channel-object)."""
    return {
        "id": thread.id,
        "type": PUBLIC_THREAD,
        "guild_id": GUILD_ID,
        "parent_id": thread.parent_id,
        "owner_id": thread.owner_id,
        "name": thread.name,
        "last_message_id": None,
        "rate_limit_per_user": thread.rate_limit_per_user,
        "message_count": 0,
        "member_count": 1,
        "total_message_sent": 0,
        "flags": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": thread.auto_archive_duration,
            "archive_timestamp": thread.created.isoformat(),
            "locked": False,
            "create_timestamp": thread.created.isoformat(),
        },
    }
