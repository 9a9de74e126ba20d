"""Reading Slack's answers: the one place where every Web API answer slack-sdk received is checked before use.

Slack answers every call with HTTP 200 and a JSON object whose ``ok`` says done or refused, and a refusal's
``error`` says why (https://docs.slack.dev/apis/web-api/#responses); a rate limit is HTTP 429
(https://docs.slack.dev/apis/web-api/rate-limits). What a method returns on success is on its page:
chat.postMessage and chat.startStream answer the new message's ``ts``
(https://docs.slack.dev/reference/methods/chat.postMessage, https://docs.slack.dev/reference/methods/chat.startStream),
conversations.history and conversations.replies a ``messages`` array
(https://docs.slack.dev/reference/methods/conversations.history,
https://docs.slack.dev/reference/methods/conversations.replies).

Anything else with a success status (an empty body, an HTML page from a proxy, JSON that is no object, an object
without a boolean ``ok``, a status 2xx other than 200, ``ok`` without the field its method answers with) cannot be
read: slack-sdk would raise an ``AttributeError`` or a ``SlackApiError`` around a bare aiohttp response, or hand
back ``{}``, which the adapter would have read as a refusal (a stored message counted as failed) or as an answer
without a ``ts`` (``"None"`` as a message id). :class:`CheckedWebClient` raises :class:`UnreadableAnswer` for
them instead, which :func:`adapters.slack.errors.translate` turns into
:class:`core.errors.UnreadableAnswerError`: *unknown*, whatever the method (a create is settled by its metadata, an
edit retried). An answer with another status keeps Slack's rules (429, 5xx, 4xx: :mod:`adapters.slack.errors`),
its unreadable body read as no body.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from slack_sdk.web.slack_response import SlackResponse

TS_RE = re.compile(r"[0-9]+\.[0-9]+")
r"""A message ts, matched whole (``fullmatch``): ``digits.digits``."""


def _is_ts(value: Any) -> bool:
    return isinstance(value, str) and TS_RE.fullmatch(value) is not None


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


ANSWER_FIELDS: dict[str, tuple[str, Callable[[Any], bool], str]] = {
    "chat.postMessage": ("ts", _is_ts, "a message ts"),
    "chat.startStream": ("ts", _is_ts, "a message ts"),
    "conversations.history": ("messages", _is_list, "an array"),
    "conversations.replies": ("messages", _is_list, "an array"),
}
"""What an ``ok`` answer of a method must hold for the adapter to use it: ``method → (field, check, what)``.
Methods not listed are read for their ``ok`` only."""

_BODY: contextvars.ContextVar[bytes | None] = contextvars.ContextVar("slack_answer_body", default=None)
"""The body of the answer the current task read last (:class:`BodyKeepingResponse`)."""


class BodyKeepingResponse(aiohttp.ClientResponse):
    """An aiohttp response that leaves its body where :class:`CheckedWebClient` finds it, so an unreadable answer
    can be quoted (slack-sdk drops a body it could not decode). The session's ``response_class``."""

    async def read(self) -> bytes:
        body = await super().read()
        _BODY.set(body)
        return body


class UnreadableAnswer(SlackClientError):
    """A success status whose answer cannot be read (module docstring).

    Args:
        status: the HTTP status.
        why: what is wrong, e.g. ``ok without a ts``.
        body: the answer's body as received (quoted shortened and token-free by the error it becomes).
    """

    def __init__(self, status: int, why: str, body: bytes) -> None:
        super().__init__(f"unreadable answer (HTTP {status}): {why}")
        self.status = status
        self.why = why
        self.body = body


def unreadable_why(method: str, status: int, data: Any, body: bytes | None, content_type: str) -> str | None:
    """What makes an answer of ``method`` unreadable, or None when it can be read.

    Args:
        method: the Web API method, e.g. ``chat.postMessage``.
        status: the HTTP status; any status outside 2xx can be read (Slack's status rules apply to it).
        data: the body as slack-sdk decoded it (``{}`` when it could not, ``None`` for an empty JSON body).
        body: the body as received, when known.
        content_type: the ``Content-Type`` header (``""``: none).
    """
    if not 200 <= status < 300:
        return None
    if status != 200:
        return f"HTTP {status}, not Slack's 200"
    if data is None or (body is not None and not body.strip()):
        return "an empty body"
    if not isinstance(data, Mapping) or (not data and (body or b"").strip() != b"{}"):
        return f"no JSON object ({content_type or 'no Content-Type'})"
    ok = data.get("ok")
    if not isinstance(ok, bool):
        return "no boolean 'ok'"
    field = ANSWER_FIELDS.get(method)
    if ok and field is not None and not field[1](data.get(field[0])):
        return f"ok without {field[2]} in '{field[0]}'"
    return None


class CheckedWebClient(AsyncWebClient):
    """slack-sdk's ``AsyncWebClient`` whose every answer passes :func:`unreadable_why` first: ``_request`` is where
    slack-sdk returns an answer's status, headers and decoded body, for every method alike.

    Raises:
        UnreadableAnswer: from any call whose answer cannot be read (module docstring).
    """

    async def _request(self, *, http_verb: str, api_url: str, req_args: dict[str, Any]) -> dict[str, Any]:
        method = api_url.rstrip("/").rsplit("/", 1)[-1]
        _BODY.set(None)
        try:
            answer: dict[str, Any] = await super()._request(http_verb=http_verb, api_url=api_url, req_args=req_args)
        except SlackApiError as exc:
            if isinstance(exc.response, SlackResponse | AsyncSlackResponse):
                raise
            # slack-sdk's "non-JSON format" error carries the bare aiohttp response: a body that is not JSON
            raw: aiohttp.ClientResponse = exc.response
            if 200 <= raw.status < 300:
                shape = f"no JSON object ({raw.content_type})"
                raise UnreadableAnswer(raw.status, shape, _BODY.get() or b"") from None
            return {"data": {}, "headers": raw.headers, "status_code": raw.status}  # Slack's status rules apply
        status, data = answer["status_code"], answer["data"]
        content_type = answer["headers"].get("Content-Type", "")
        why = unreadable_why(method, status, data, _BODY.get(), content_type)
        if why is not None:
            raise UnreadableAnswer(status, why, _BODY.get() or b"")
        if not 200 <= status < 300 and not isinstance(data, dict):
            return {**answer, "data": {}}  # e.g. a 502 proxy page in text/plain: read as no body
        return answer
