"""Slack's wire shapes for the mock: reading a request, message objects, scripted faults as Slack answers them."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from aiohttp import web

from streamrelay.mocks.common import Fault
from streamrelay.mocks.slack.limits import retry_after_header
from streamrelay.mocks.slack.workspace import SlackError, StoredMessage


def fault_error(fault: Fault) -> SlackError:
    """A scripted :class:`~mocks.common.Fault` in Slack's shapes.

    429 → HTTP 429, ``Retry-After`` (whole seconds, rounded up) and ``{"ok": false, "error": "ratelimited"}``;
    >= 500 → that HTTP status with ``error`` = the description or the status phrase in snake case; another 4xx
    with a description → HTTP 200 ``{"ok": false, "error": description}`` (how Slack refuses); a 4xx without
    one → that HTTP status, ``error`` = the phrase in snake case.
    """
    if fault.status == 429:
        return SlackError("ratelimited", 429, retry_after_header(fault.retry_after_s or 1.0))
    phrase = HTTPStatus(fault.status).phrase.lower().replace(" ", "_").replace("-", "_")
    if fault.status < 500 and fault.description:
        return SlackError(fault.description)
    return SlackError(fault.description or phrase, fault.status)


def message_json(message: StoredMessage) -> dict[str, Any]:
    """A message object (https://docs.slack.dev/reference/objects/message-object), the fields the mock knows."""
    body: dict[str, Any] = {"type": "message", "user": message.user, "ts": message.ts, "text": message.wire}
    if message.thread_ts is not None:
        body["thread_ts"] = message.thread_ts
    if message.edited:
        body["edited"] = {"user": message.user, "ts": message.ts}
    if message.blocks is not None:
        body["blocks"] = message.blocks
    return body


def str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


async def read_request(request: web.Request) -> tuple[dict[str, Any], str | None]:
    """Parameters (query, then a JSON or form body) and the token.

    The token comes from ``Authorization: Bearer`` or, for query and form parameters only, a ``token``
    parameter: JSON bodies must use the header (https://docs.slack.dev/apis/web-api/#json-bodies).
    """
    params: dict[str, Any] = dict(request.query)
    if request.body_exists and request.content_type == "application/json":
        try:
            body = await request.json()
        except ValueError:
            raise SlackError("invalid_json") from None
        if not isinstance(body, dict):
            raise SlackError("invalid_json")
        body.pop("token", None)
        params.update(body)
    elif request.body_exists:
        form = await request.post()
        params.update({k: v for k, v in form.items() if isinstance(v, str)})
    header = request.headers.get("Authorization", "")
    token = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else None
    param_token = params.pop("token", None)
    return params, token or (param_token if isinstance(param_token, str) else None)
