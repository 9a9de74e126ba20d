"""Replicas: what only a run's owner can answer is forwarded to it, so every route works on any replica.

A run lives on the replica that owns its partition (its monitor, its pipeline lane, its gate are in that
process). Any replica takes a run's lines (they go through Redis); the reads and the gate of a run,
``/v1/runs/{run}`` and everything under it but ``/events``, are forwarded as they are (headers, body, a streamed
answer such as the live page's SSE) to the owner's URL. While a partition has no owner (its lease lapsed and no
replica took it yet) the answer is 503 with ``Retry-After``. A request that was forwarded once is never forwarded
again: ownership moved meanwhile, and the client retries.

Written here rather than taken from a proxy library: it is one ASGI middleware in front of the app, forwarding
to a target chosen per request from Redis, streaming both ways with the httpx client the project already has.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import unquote

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_log = logging.getLogger("streamrelay.replicas")

FORWARDED = "x-streamrelay-forwarded"
"""Marks a forwarded request (a replica forwards a request at most once)."""
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer", "host"}
)
"""Headers that belong to one connection (RFC 9110 §7.6.1), never forwarded; nor ``host``."""
SUFFIXES = ("/pipeline/stream", "/pipeline", "/gate", "/live", "/watch")
RETRY_AFTER_S = 1


class OwnerUnavailableError(Exception):
    """The run's partition has no owner right now (a takeover is under way): retry in a moment."""


Locate = Callable[[str], Awaitable[str | None]]
"""Where run ``run`` must be answered: the owner's base URL (``http://host:port``), or None to answer here (this
replica owns it, or nobody knows the run: the app answers 404). Raises :class:`OwnerUnavailableError`."""


def run_of(method: str, path: str) -> str | None:
    """The run a request is about when only the run's owner can answer it, else None (ingest, pages, probes)."""
    if not path.startswith("/v1/runs/") or (method == "POST" and path.endswith("/events")):
        return None
    rest = path[len("/v1/runs/") :]
    for suffix in SUFFIXES:
        if rest.endswith(suffix):
            rest = rest[: -len(suffix)]
            break
    return unquote(rest) or None


class OwnerProxy:
    """ASGI middleware: forward run-scoped requests to the run's owner (module docstring).

    Args:
        app: the replica's own app.
        locate: where a run must be answered (:data:`Locate`).
        timeout_s: how long connecting to the owner and sending to it may take (reading a streamed answer is not
            limited: a live page stays open for the whole run).
    """

    def __init__(self, app: ASGIApp, locate: Locate, *, timeout_s: float = 10.0) -> None:
        self.app = app
        self._locate = locate
        timeout = httpx.Timeout(timeout_s, read=None)
        self._client = httpx.AsyncClient(timeout=timeout, follow_redirects=False)

    async def close(self) -> None:
        await self._client.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (run := run_of(scope["method"], scope["path"])) is None:
            return await self.app(scope, receive, send)
        forwarded = any(name == FORWARDED.encode() for name, _ in scope["headers"])
        try:
            owner = await self._locate(run)
        except OwnerUnavailableError:
            return await _unavailable(send, "this run's partition is changing owner: retry in a moment")
        if owner is None:
            return await self.app(scope, receive, send)
        if forwarded:
            return await _unavailable(send, "this run moved to another replica: retry in a moment")
        await self._forward(owner, scope, receive, send)

    async def _forward(self, owner: str, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k, v) for k, v in scope["headers"] if k.decode("latin-1").lower() not in HOP_BY_HOP]
        headers.append((FORWARDED.encode(), b"1"))
        query = scope.get("query_string", b"").decode("latin-1")
        path = scope.get("raw_path") or scope["path"].encode("latin-1")
        url = owner.rstrip("/") + path.decode("latin-1")
        request = self._client.build_request(
            scope["method"], url + (f"?{query}" if query else ""), headers=headers, content=body
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            _log.warning("the owner at %s did not answer (%s): 503", owner, type(exc).__name__)
            return await _unavailable(send, "the replica that holds this run did not answer: retry in a moment")
        try:
            out = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()]
            out = [(k, v) for k, v in out if k.decode("latin-1").lower() not in (*HOP_BY_HOP, "content-length")]
            await send({"type": "http.response.start", "status": response.status_code, "headers": out})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()


async def _unavailable(send: Send, why: str) -> None:
    body = json.dumps({"error": why}).encode()
    start: Message = {
        "type": "http.response.start",
        "status": 503,
        "headers": [(b"content-type", b"application/json"), (b"retry-after", str(RETRY_AFTER_S).encode())],
    }
    await send(start)
    await send({"type": "http.response.body", "body": body})


__all__ = ["FORWARDED", "Locate", "OwnerProxy", "OwnerUnavailableError", "run_of"]
