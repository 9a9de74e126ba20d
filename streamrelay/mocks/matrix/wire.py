"""The mock homeserver's wire: method names, the standard error body, the 429 shape, and the event size rule
(rules: :mod:`mocks.matrix`)."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from typing import Any

from aiohttp import web

SEND = "send"
"""``PUT /_matrix/client/v3/rooms/{roomId}/send/{eventType}/{txnId}``: a room event by transaction id (tests/cases
README's fault name)."""
REDACT = "redact"
"""``PUT /_matrix/client/v3/rooms/{roomId}/redact/{eventId}/{txnId}``."""
TYPING = "typing"
"""``PUT /_matrix/client/v3/rooms/{roomId}/typing/{userId}``."""
WHOAMI = "whoami"
"""``GET /_matrix/client/v3/account/whoami``."""
GET_EVENT = "get_event"
"""``GET /rooms/{roomId}/event/{eventId}`` (https://spec.matrix.org/v1.11/client-server-api/#get_matrixclientv3roomsroomideventeventid)."""
UPLOAD = "upload"
"""``POST /_matrix/media/v3/upload``: a file into the content repository (no transaction id: a repeat is a second
file, https://spec.matrix.org/latest/client-server-api/#post_matrixmediav3upload)."""
MEDIA_CONFIG = "media_config"
"""``GET /_matrix/client/v1/media/config`` (and the deprecated ``/_matrix/media/v3/config``): ``m.upload.size``
(https://spec.matrix.org/latest/client-server-api/#get_matrixclientv1mediaconfig)."""
RELATIONS = "relations"
"""``GET /_matrix/client/v1/rooms/{roomId}/relations/{eventId}/{relType}[/{eventType}]``: the events that relate to
one (https://spec.matrix.org/latest/client-server-api/#get_matrixclientv1roomsroomidrelationseventidreltypeeventtype)."""
METHODS = (SEND, REDACT, TYPING, WHOAMI, UPLOAD, MEDIA_CONFIG, RELATIONS, GET_EVENT)
MEDIA_PREFIX = "/_matrix/media/v3"
CLIENT_V1_PREFIX = "/_matrix/client/v1"
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
"""Synapse's default ``max_upload_size``, 50M
(https://element-hq.github.io/synapse/latest/usage/configuration/config_documentation.html#max_upload_size)."""

CLIENT_PREFIX = "/_matrix/client/v3"
SERVER_NAME = "mock.local"
MAX_EVENT_BYTES = 65_536
"""The complete event, as the federation format in Canonical JSON with its signatures, must not be larger than
65,536 bytes (https://spec.matrix.org/latest/client-server-api/#size-limits)."""
ROOM_ID_RE = re.compile(r"^![A-Za-z0-9._=\-/+]+:[A-Za-z0-9.\-]+(:\d{1,5})?$")
"""A room id: ``!opaque:server`` (https://spec.matrix.org/latest/appendices/#room-ids)."""
TOKEN_RE = re.compile(r"^syt_([A-Za-z0-9_\-]+?)_[A-Za-z0-9]+_[A-Za-z0-9]+$")
"""Synapse's access-token shape ``syt_<base64 of the localpart>_<random>_<checksum>``; the mock takes the user from
it (a token is opaque to clients: https://spec.matrix.org/latest/client-server-api/#using-access-tokens)."""
PERSON = f"@person:{SERVER_NAME}"
"""Who writes the person's messages (:meth:`MockMatrix.user_message`)."""
MODERATOR = f"@moderator:{SERVER_NAME}"
"""Who redacts a message through the control API (:meth:`MockMatrix.remove`): a room moderator."""


class MatrixError(Exception):
    """An error answer in the Client-Server API's standard shape ``{"errcode", "error"}``
    (https://spec.matrix.org/latest/client-server-api/#standard-error-response); a 429 also carries
    ``retry_after_ms`` and ``Retry-After`` (https://spec.matrix.org/latest/client-server-api/#rate-limiting)."""

    def __init__(self, status: int, errcode: str, error: str, *, retry_after_ms: int | None = None) -> None:
        super().__init__(f"{status} {errcode}: {error}")
        self.status, self.errcode, self.error, self.retry_after_ms = status, errcode, error, retry_after_ms

    def body(self) -> dict[str, Any]:
        """The JSON body."""
        body: dict[str, Any] = {"errcode": self.errcode, "error": self.error}
        if self.retry_after_ms is not None:
            body["retry_after_ms"] = self.retry_after_ms
        return body

    def response(self) -> web.Response:
        """The HTTP answer (``Retry-After`` in whole seconds, rounded up, on a 429)."""
        headers = {}
        if self.retry_after_ms is not None:
            headers["Retry-After"] = str(max(1, math.ceil(self.retry_after_ms / 1000)))
        return web.json_response(self.body(), status=self.status, headers=headers)


def limit_exceeded(retry_after_s: float) -> MatrixError:
    """A 429 ``M_LIMIT_EXCEEDED`` asking to wait ``retry_after_s`` seconds (``retry_after_ms`` in the body)."""
    return MatrixError(429, "M_LIMIT_EXCEEDED", "Too Many Requests", retry_after_ms=round(retry_after_s * 1000))


_BY_STATUS = {
    400: "M_BAD_JSON",
    401: "M_UNKNOWN_TOKEN",
    403: "M_FORBIDDEN",
    404: "M_NOT_FOUND",
    413: "M_TOO_LARGE",
}
_ERRCODE_RE = re.compile(r"^(M_[A-Z_]+)(?::\s*(.*))?$", re.S)


def fault_error(status: int, description: str | None, retry_after_s: float | None) -> MatrixError:
    """A scripted fault in the homeserver's error shape: a 429 is ``M_LIMIT_EXCEEDED`` with ``retry_after_ms``; a
    description ``M_CODE: text`` chooses the errcode, else it comes from the status (5xx: ``M_UNKNOWN``)."""
    if status == 429:
        return limit_exceeded(retry_after_s if retry_after_s is not None else 1.0)
    match = _ERRCODE_RE.match(description or "")
    if match:
        return MatrixError(status, match.group(1), match.group(2) or match.group(1))
    return MatrixError(status, _BY_STATUS.get(status, "M_UNKNOWN"), description or f"HTTP {status}")


def canonical_json(value: Any) -> bytes:
    """Canonical JSON: sorted keys, no insignificant whitespace, UTF-8
    (https://spec.matrix.org/latest/appendices/#canonical-json)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()


def event_id(counter: int) -> str:
    """An event id as room versions 4 and later spell it: ``$`` and 43 characters of unpadded URL-safe base64 of a
    SHA-256 reference hash (https://spec.matrix.org/latest/rooms/v4/#event-ids); here of a counter."""
    digest = hashlib.sha256(counter.to_bytes(8, "big")).digest()
    return "$" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def pdu_bytes(room_id: str, sender: str, event_type: str, content: dict[str, Any], ts_ms: int) -> int:
    """The size of the event as federation sees it (the unit of the 65,536-byte limit): the client's fields plus a
    typical envelope (three auth events, one previous event, depth, content hash, one server signature), in
    Canonical JSON."""
    ref = event_id(0)
    pdu = {
        "auth_events": [ref, ref, ref],
        "content": content,
        "depth": 1_000_000,
        "hashes": {"sha256": "A" * 43},
        "origin_server_ts": ts_ms,
        "prev_events": [ref],
        "room_id": room_id,
        "sender": sender,
        "signatures": {SERVER_NAME: {"ed25519:a_AAAA": "A" * 86}},
        "type": event_type,
        "unsigned": {"age_ts": ts_ms},
    }
    return len(canonical_json(pdu))


def user_of(token: str) -> str | None:
    """The user an access token belongs to (``@localpart:mock.local``), or None for a token of another shape."""
    match = TOKEN_RE.match(token)
    if not match:
        return None
    part = match.group(1)
    try:
        localpart = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return None
    if not re.fullmatch(r"[a-z0-9._=\-/+]+", localpart):
        return None
    return f"@{localpart}:{SERVER_NAME}"
