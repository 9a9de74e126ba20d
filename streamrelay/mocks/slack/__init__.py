"""A mock Slack Web API server: real HTTP on loopback, strict like Slack, every call recorded.

slack-sdk talks to it unchanged::

    async with MockSlack() as mock:
        client = AsyncWebClient("xoxb-1-2-abc", base_url=mock.base_url, retry_handlers=[])

Routes ``POST|GET /api/{method}`` with JSON, form-encoded or query parameters (slack-sdk reads
conversations.history and conversations.replies by GET with query parameters, booleans as ``1``/``0``); the
token comes in ``Authorization: Bearer xoxb-…`` (or, except with a JSON body, a ``token`` parameter). Methods:
``auth.test``, ``chat.postMessage``, ``chat.update``, ``chat.delete``, ``chat.startStream``,
``chat.appendStream``, ``chat.stopStream``, ``assistant.threads.setStatus``, ``conversations.history``,
``conversations.replies``. Errors are HTTP 200 ``{"ok": false, "error": "…"}``
(https://docs.slack.dev/apis/web-api/#responses): no token ``not_authed``; a token not shaped ``xoxb-…`` /
``xoxp-…`` ``invalid_auth``; an unknown method ``unknown_method``.

What it reproduces:

- Channels are ids ``[CGD]`` + at least 8 of ``[A-Z0-9]`` (names such as ``#general`` are not resolved):
  anything else, or an id in ``missing_channels``, is ``channel_not_found``. ``C``/``G`` are channels, ``D``
  direct messages.
- Content is ``text`` (mrkdwn; ``mrkdwn=false`` turns the markup off) or ``markdown_text`` (standard
  Markdown), never both (``markdown_text_conflict``); none, or whitespace only, is ``no_text``. Strict limits
  (https://docs.slack.dev/reference/methods/chat.postMessage): ``text`` over 40,000 characters is
  ``msg_too_long`` (Slack truncates it instead: the mock refuses, so a client that relies on truncation is
  caught), ``markdown_text`` over 12,000 characters per call is ``msg_too_long``.
- ``ts`` ids look like ``1700000000.000100`` and increase per channel. ``thread_ts`` must name a visible
  top-level message of the channel (a reply's ts is not a thread), else ``thread_not_found``; seed the
  person's question with :meth:`MockSlack.add_user_message`.
- chat.update / chat.delete: an unknown or deleted ts is ``message_not_found``; the person's messages are
  ``cant_update_message`` / ``cant_delete_message``; an unchanged text is ``ok`` (Slack has no "not
  modified"). While a stream is open, chat.update is ``streaming_state_conflict`` and chat.delete
  ``cant_delete_message`` (https://docs.slack.dev/reference/methods/chat.update lists the first; both are
  observed): stop the stream first.
- Streams (https://docs.slack.dev/reference/methods/chat.startStream): chat.startStream needs ``thread_ts``
  (``invalid_arguments`` without it) and, outside direct messages, ``recipient_user_id`` and
  ``recipient_team_id`` (``missing_recipient_user_id`` / ``missing_recipient_team_id``: "Required when
  streaming to channels"); it answers the stream message's ``ts``. chat.appendStream appends
  ``markdown_text`` (required, <= 12,000); chat.stopStream appends an optional ``markdown_text`` and ends the
  stream. A stream idle (no append) longer than ``stream_idle_s`` (300 s, as observed) expires; appends and
  stops on a stream that is not open are ``message_not_in_streaming_state``; an expired or stopped stream
  can be updated and deleted. ``streaming_enabled=False`` makes chat.startStream ``unknown_method``.
- ``metadata`` (``{"event_type", "event_payload"}``) on chat.postMessage and chat.update is stored with the
  message; conversations.history (newest first) and conversations.replies (parent first) read messages back and
  show it with ``include_all_metadata`` (:mod:`mocks.slack.history`, which has the rules and errors).
- assistant.threads.setStatus needs ``channel_id``, an existing ``thread_ts`` and ``status``; the status is
  kept (:meth:`MockSlack.status`), not shown as a message, until the app posts in the thread or sets an empty
  status (https://docs.slack.dev/reference/methods/assistant.threads.setStatus: without a message it would
  stay two minutes).

Rate limits (off by default; https://docs.slack.dev/apis/web-api/rate-limits), see :class:`SlackLimits`:
past one, the answer is HTTP 429 with ``Retry-After: N`` (whole seconds, rounded up, at least 1) and
``{"ok": false, "error": "ratelimited"}``. A refused call costs nothing; calls refused for another reason are
not counted either.

Scripted faults use Slack method names (``"chat.postMessage"``); their shapes are in
:func:`~mocks.slack.wire.fault_error`. Per call, in order: record the call, check the token, count it (per
method, 1-based), wait its scripted latency, apply its scripted fault, validate, check rate limits, store,
answer. A recorded call's ``chat_id`` is the ``channel`` (``channel_id``), ``message_id`` the new ts of a
post or stream, else the requested ``ts`` (the ``thread_ts`` for setStatus), ``text`` the ``text`` or
``markdown_text`` as sent (the status for setStatus).
"""

from streamrelay.mocks.slack.limits import SlackLimits
from streamrelay.mocks.slack.server import METHODS, MockSlack, serve_forever
from streamrelay.mocks.slack.wire import fault_error
from streamrelay.mocks.slack.workspace import (
    BOT_USER_ID,
    MAX_MARKDOWN_CHARS,
    MAX_TEXT_CHARS,
    PERSON_USER_ID,
    TEAM_ID,
    StoredMessage,
)

__all__ = [
    "BOT_USER_ID",
    "MAX_MARKDOWN_CHARS",
    "MAX_TEXT_CHARS",
    "METHODS",
    "PERSON_USER_ID",
    "TEAM_ID",
    "MockSlack",
    "SlackLimits",
    "StoredMessage",
    "fault_error",
    "serve_forever",
]
