"""A mock Matrix homeserver (Client-Server API v3): real HTTP on loopback, strict like the spec, every call recorded.

matrix-nio talks to it unchanged (``AsyncClient(homeserver=mock.base_url)`` with an access token)::

    async with MockMatrix() as mock:
        client = AsyncClient(mock.base_url, "@streamrelay:mock.local")
        client.access_token = "syt_c3RyZWFtcmVsYXk_DryRunTokenForTheMock_0a1b2c"
        await client.room_send("!room:mock.local", "m.room.message", {"msgtype": "m.text", "body": "hi"}, "t1")

Routes (recorded method names in the second column; tests/cases/README.md names ``send`` and ``redact``):

=================================================================  ==========
``PUT /_matrix/client/v3/rooms/{roomId}/send/{eventType}/{txnId}``  ``send``
``PUT /_matrix/client/v3/rooms/{roomId}/redact/{eventId}/{txnId}``  ``redact``
``PUT /_matrix/client/v3/rooms/{roomId}/typing/{userId}``           ``typing``
``GET /_matrix/client/v3/account/whoami``                           ``whoami``
``POST /_matrix/media/v3/upload``                                   ``upload``
``GET /_matrix/client/v1/media/config`` (and ``/_matrix/media/v3/``) ``media_config``
``GET /_matrix/client/v1/rooms/{roomId}/relations/{eventId}/…``     ``relations``
=================================================================  ==========

An unknown path is 404 ``M_UNRECOGNIZED``. Every route needs an access token (``Authorization: Bearer`` or
``?access_token=``): none is 401 ``M_MISSING_TOKEN``; one not shaped like Synapse's ``syt_<base64 localpart>_…_…``
is 401 ``M_UNKNOWN_TOKEN``; the localpart in it is the user (``@localpart:mock.local``). Errors have the standard
shape ``{"errcode", "error"}`` (https://spec.matrix.org/latest/client-server-api/#standard-error-response).

What it reproduces (https://spec.matrix.org/latest/client-server-api/):

- Transaction ids (https://spec.matrix.org/latest/client-server-api/#transaction-identifiers): a ``send`` or
  ``redact`` whose request path (room, event type or redacted event, txnId) this device (access token) used before
  answers the event id stored then, 200, and stores nothing: a send retried after a timeout lands once. Checked before
  validation and rate limits, and a refused request is not remembered, as Synapse's ``HttpTransactionCache`` does
  (keyed by path, user and device; kept at least 30 minutes:
  https://github.com/element-hq/synapse/blob/develop/synapse/rest/client/transactions.py).
- ``m.room.message`` without a textual ``msgtype`` and ``body`` is 400 ``M_BAD_JSON`` (homeservers SHOULD reject
  it, https://spec.matrix.org/latest/client-server-api/#server-behaviour-7); a body that is no JSON object 400
  ``M_NOT_JSON``.
- The event size limit: the complete event in the federation format, Canonical JSON with signatures, at most 65,536
  bytes (https://spec.matrix.org/latest/client-server-api/#size-limits): past it 413 ``M_TOO_LARGE``
  (:func:`mocks.matrix.wire.pdu_bytes` adds a typical envelope to the client's fields).
- Edits (https://spec.matrix.org/latest/client-server-api/#event-replacements): an event with ``m.relates_to``
  ``rel_type: m.replace`` and ``m.new_content`` replaces what the original shows when sender and type match
  (:meth:`mocks.matrix.rooms.Rooms.shown`); an edit or a thread reply naming an event the room lacks is 400.
- Threads (https://spec.matrix.org/latest/client-server-api/#threading): ``rel_type: m.thread`` to a root event; a
  thread cannot start from an event that has a relation itself (400).
- Redactions (https://spec.matrix.org/latest/client-server-api/#redactions): of an unknown event 404
  ``M_NOT_FOUND``, of another user's event 403 ``M_FORBIDDEN``; a redacted message is gone from :meth:`visible` and
  its content stripped.
- Typing (https://spec.matrix.org/latest/client-server-api/#typing-notifications): for another user 403; shown for
  ``timeout`` ms.
- The content repository (:mod:`mocks.matrix.media`): an upload is stored under a new ``mxc://mock.local/…`` URI
  (uploads carry no transaction id: the same bytes twice are two files); past ``max_upload_bytes`` (Synapse's
  default 50 MiB; the config routes announce it as ``m.upload.size``) it is 413 ``M_TOO_LARGE``
  (https://spec.matrix.org/latest/client-server-api/#post_matrixmediav3upload). An ``m.image`` / ``m.file`` /
  ``m.audio`` / ``m.video`` whose ``url`` is no stored upload is 400 ``M_BAD_JSON`` (stricter than Synapse, which
  does not look). :meth:`MockMatrix.host_file` serves a file at ``/_mock/files/{name}`` for a sidecar to fetch.
- Reactions (https://spec.matrix.org/latest/client-server-api/#event-annotations-and-reactions): an ``m.reaction``
  must be an ``m.annotation`` of an event of the room with a ``key``; the same sender, event and key twice is 400
  ``M_DUPLICATE_ANNOTATION`` (as Synapse). ``relations`` lists the events relating to one.
  :meth:`MockMatrix.press` is a person's reaction with the key of one of the bot's reactions.
- Rooms: any well-formed room id exists and the bot is joined, except :attr:`Rooms.missing` (403 ``M_FORBIDDEN``
  "not in room"); a malformed id is 400 ``M_INVALID_PARAM``.
- Rate limits (when on): Synapse's default ``rc_message``, 0.2 per second per user with a burst of 10
  (:class:`MatrixLimits`), on ``send`` and ``redact``: 429 ``{"errcode": "M_LIMIT_EXCEEDED", "error",
  "retry_after_ms"}`` with ``Retry-After`` in whole seconds (https://spec.matrix.org/latest/client-server-api/#rate-limiting).

Scripted faults and latencies use the method names above (:class:`mocks.common.FaultScript`): a 429 fault answers
``M_LIMIT_EXCEEDED`` with ``retry_after_ms``; another status the standard error (a description ``M_CODE: text``
chooses the errcode). Per call, in order: record, check the token, count (per method, 1-based), wait its latency,
apply its fault, then the transaction-id check, validation, rate limits, store, answer. A recorded ``send``'s
``chat_id`` is the room id, ``message_id`` the new event id (the edited event's id for an edit, the annotated
event's for a reaction, described ``reaction <key>``), ``text`` the ``body`` sent (``m.new_content.body`` for an
edit).
"""

from streamrelay.mocks.matrix.rooms import Room, Rooms, StoredEvent
from streamrelay.mocks.matrix.server import MatrixLimits, MockMatrix, serve_forever
from streamrelay.mocks.matrix.wire import MAX_EVENT_BYTES, METHODS, PERSON, MatrixError, fault_error

__all__ = [
    "MAX_EVENT_BYTES",
    "METHODS",
    "PERSON",
    "MatrixError",
    "MatrixLimits",
    "MockMatrix",
    "Room",
    "Rooms",
    "StoredEvent",
    "fault_error",
    "serve_forever",
]
