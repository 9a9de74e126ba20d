"""Routing and HTTP bodies of the mock Discord REST API: the route table, JSON in, JSON out."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from streamrelay.mocks.discord import wire
from streamrelay.mocks.discord.wire import ApiError, fail

API_PREFIX = "/api/v10"

Body = dict[str, Any]


@dataclass(frozen=True)
class Route:
    """One REST route: HTTP method, path pattern, Discord's method name, its rate-limit bucket."""

    http_method: str
    pattern: re.Pattern[str]
    name: str
    bucket: str


def route(http_method: str, path: str, name: str, bucket: str) -> Route:
    """``/channels/{channel}/messages`` → a regex with a named group per ``{parameter}``."""
    literal = re.escape(API_PREFIX + path).replace(r"\{", "{").replace(r"\}", "}")
    regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", literal)
    return Route(http_method, re.compile(f"^{regex}$"), name, bucket)


ROUTES = (
    route("GET", "/users/@me", "getCurrentUser", "identity"),
    route("GET", "/oauth2/applications/@me", "getCurrentBotApplicationInformation", "identity"),
    route("POST", "/channels/{channel}/messages", "createMessage", "create_message"),
    route("PATCH", "/channels/{channel}/messages/{message}", "editMessage", "edit_message"),
    route("DELETE", "/channels/{channel}/messages/{message}", "deleteMessage", "delete_message"),
    route("GET", "/channels/{channel}/messages/{message}", "getChannelMessage", "get_message"),
    route("POST", "/channels/{channel}/typing", "triggerTypingIndicator", "typing"),
    route("POST", "/channels/{channel}/messages/{message}/threads", "startThreadFromMessage", "start_thread"),
    route("POST", "/webhooks/{webhook}/{token}", "executeWebhook", "webhook"),
    route("PATCH", "/webhooks/{webhook}/{token}/messages/{message}", "editWebhookMessage", "webhook"),
    route("DELETE", "/webhooks/{webhook}/{token}/messages/{message}", "deleteWebhookMessage", "webhook"),
    route("POST", "/interactions/{interaction}/{token}/callback", "createInteractionResponse", "webhook"),
)
METHODS = tuple(r.name for r in ROUTES)


def resolve(http_method: str, path: str) -> tuple[Route | None, dict[str, str]]:
    """The route and its path parameters; ``(None, {})`` for an unknown path, ``(None, params)`` for a known
    path with the wrong HTTP method."""
    found: dict[str, str] | None = None
    for candidate in ROUTES:
        match = candidate.pattern.match(path)
        if match is None:
            continue
        if candidate.http_method == http_method:
            return candidate, match.groupdict()
        found = match.groupdict() or {"path": path}
    return None, found or {}


async def read_body(request: web.Request) -> tuple[Body, ApiError | None]:
    """The JSON body (``payload_json`` of a multipart body); ``({}, error)`` when it is not a JSON object."""
    if not request.body_exists:
        return {}, None
    if request.content_type.startswith("multipart/"):
        form = await request.post()
        raw = form.get("payload_json")
        text = raw if isinstance(raw, str) else ""
    else:
        text = (await request.read()).decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        return {}, fail(wire.INVALID_JSON)
    return (body, None) if isinstance(body, dict) else ({}, fail(wire.INVALID_JSON))


def json_response(payload: Body, *, status: int, headers: Mapping[str, str] | None = None) -> web.Response:
    """A JSON answer with ``Content-Type: application/json`` exactly, as Discord sends it (discord.py decodes a
    body only when the header is exactly that; aiohttp's ``json_response`` would add ``; charset=utf-8``)."""
    all_headers = {**(headers or {}), "Content-Type": "application/json"}
    return web.Response(body=json.dumps(payload).encode(), status=status, headers=all_headers)
