"""Replicas: what only a run's owner can answer is forwarded to it, so every route works on any replica.

A run lives on the replica that owns its partition (its monitor, its pipeline lane, its gate are in that
process). Any replica takes a run's lines (they go through Redis); the reads and the gate of a run,
``/v1/runs/{run}`` and everything under it but ``/events``, are forwarded as they are (headers, body, a streamed
answer such as the live page's SSE) to the owner's URL. While a partition has no owner (its lease lapsed and no
replica took it yet), or its owner does not take the connection (it died and its lease has not lapsed yet), the
request waits for the partition's next owner for up to ``patience_s``; then the answer is 503 with
``Retry-After``. A request that was forwarded once is never forwarded again: ownership moved meanwhile, and the
client retries. A run's corrections (``/v1/runs/{run}/corrections[/{id}]``), its audit (``GET /v1/runs/{run}/audit``),
its delivery timeline (``GET /v1/runs/{run}/timeline``, kept in the owner's memory) and its erasure
(``DELETE /v1/runs/{run}``) are forwarded so, and a desk entry's resend (``POST /v1/deliveries/{id}/resend``)
goes to the owner of the partition whose desk holds the entry, a conversation's erasure
(``DELETE /v1/conversations/{channel}/{chat_id}``) to the owner of the conversation's partition.

Written here rather than taken from a proxy library: it is one ASGI middleware in front of the app, forwarding
to a target chosen per request from Redis, streaming both ways with the httpx client the project already has.
"""

from __future__ import annotations

import asyncio
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
SUFFIXES = (
    "/pipeline/stream",
    "/pipeline",
    "/gate",
    "/live/stop",
    "/live",
    "/watch",
    "/stop",
    "/corrections",
    "/audit",
    "/timeline",
)
APPROVALS = "/approvals/"
"""``/v1/runs/{run}/approvals/{id}``: an approval's decision, taken by the run's owner (docs/approvals.md)."""
LIVE = "/live"
"""``/v1/runs/{run}/live/approvals/{id}``: the live page's decision (adapters/web/approvals.py), also the owner's."""
CORRECTIONS = "/corrections/"
"""``/v1/runs/{run}/corrections[/{id}]``: a run's corrections, applied and kept by the run's owner
(docs/corrections.md)."""
DESK = "/v1/deliveries/"
RESEND = "/resend"
"""``POST /v1/deliveries/{id}/resend``: a desk entry resent by its run's owner (docs/deliveries.md)."""
DESK_ENTRY = "/desk/"
"""What :func:`run_of` names a resend's entry by: this and the entry's id (a run id holds no ``/``, so no run is
named so); :data:`Locate` finds the partition that holds the entry."""
RETRY_AFTER_S = 1
CONVERSATIONS = "/v1/conversations/"
CONVERSATION = "/chat/"
"""What :func:`run_of` names a conversation's erasure by (``DELETE /v1/conversations/{channel}/{chat_id}``): this,
the channel, ``/`` and the chat id; :data:`Locate` finds the owner of the conversation's partition."""
WAIT_POLL_S = 0.2
"""How often a request waiting for a partition's owner asks again (seconds)."""


class OwnerUnavailableError(Exception):
    """The run's partition has no owner right now (a takeover is under way), or Redis, which knows the owner, did
    not answer: retry in a moment. A ``str`` first argument says why (shown to the client)."""


Locate = Callable[[str], Awaitable[str | None]]
"""Where run ``run`` must be answered: the owner's base URL (``http://host:port``), or None to answer here (this
replica owns it, or nobody knows the run: the app answers 404). Raises :class:`OwnerUnavailableError`."""


def run_of(method: str, path: str) -> str | None:
    """The run a request is about when only the run's owner can answer it, else None (ingest, pages, probes); a desk
    entry's resend: :data:`DESK_ENTRY` and the entry's id; a conversation's erasure: :data:`CONVERSATION`, the
    channel, ``/`` and the chat id."""
    if method == "POST" and path.startswith(DESK) and path.endswith(RESEND):
        entry = unquote(path[len(DESK) : -len(RESEND)])
        return DESK_ENTRY + entry if entry and "/" not in entry else None
    if method == "DELETE" and path.startswith(CONVERSATIONS):
        channel, _, chat = path[len(CONVERSATIONS) :].partition("/")
        return CONVERSATION + channel + "/" + chat if channel and chat and "/" not in chat else None
    if not path.startswith("/v1/runs/") or (method == "POST" and path.endswith("/events")):
        return None
    rest = path[len("/v1/runs/") :]
    head, approvals, tail = rest.rpartition(APPROVALS)
    if approvals and tail and "/" not in tail:  # /v1/runs/{run}/approvals/{id}: decided by the run's owner, once
        head = head.removesuffix(LIVE)  # /v1/runs/{run}/live/approvals/{id}: the live page's decision
        return unquote(head) or None
    head, corrections, tail = rest.rpartition(CORRECTIONS)
    if corrections and tail and "/" not in tail:  # /v1/runs/{run}/corrections/{id}: one correction, the owner's
        return unquote(head) or None
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
        patience_s: how long a request waits for a partition without a reachable owner (a takeover takes up to
            4/3 of the lease's ttl).
        max_body_bytes: a forwarded request's body at most (a gate call is a few hundred bytes): past it, 413
            before anything else is read (the owner checks the token, so this replica reads untrusted bytes).
        key_of: the run key a request's ``Authorization`` value means by a run id
            (:meth:`adapters.ingest_http.Callers.key_of`; None for no client: answered here, 401). The live page's
            routes carry the key itself (their watch links do). None: run ids are keys.
    """

    def __init__(
        self,
        app: ASGIApp,
        locate: Locate,
        *,
        timeout_s: float = 10.0,
        patience_s: float = 15.0,
        max_body_bytes: int = 1024 * 1024,
        key_of: Callable[[str, str], str | None] | None = None,
    ) -> None:
        self.app = app
        self._key_of = key_of
        self._max_body = max_body_bytes
        self._locate = locate
        self._patience_s = patience_s
        self._timeout_s = timeout_s
        self._client = httpx.AsyncClient(follow_redirects=False)

    async def close(self) -> None:
        await self._client.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (run := run_of(scope["method"], scope["path"])) is None:
            return await self.app(scope, receive, send)
        own_token = scope["path"].endswith(("/live", "/live/stop")) or run.startswith((DESK_ENTRY, CONVERSATION))
        if self._key_of is not None and not own_token:  # read/stop tokens; a desk entry: its owner checks the token
            header = next((v.decode("latin-1") for k, v in scope["headers"] if k.lower() == b"authorization"), "")
            key = self._key_of(header, run)
            if key is None:  # no client (401) or no such run (404): this replica says so
                return await self.app(scope, receive, send)
            run = key
        forwarded = any(name == FORWARDED.encode() for name, _ in scope["headers"])
        body = await _body(receive, self._max_body)
        if body is None:
            return await _answer(send, 413, f"a request to a run's owner carries at most {self._max_body} bytes")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(self._patience_s, _wait_s(scope))
        why = "this run's partition is changing owner: retry in a moment"
        while True:
            try:
                owner = await self._locate(run)
            except OwnerUnavailableError as exc:
                owner, why = "", _why(exc, why)
            if owner is None:
                last = loop.time() >= deadline or scope["method"] != "GET"
                if await self._here(scope, body, send, last=last):
                    return
                continue  # the partition moved on while this replica answered: ask for its next owner
            if owner and forwarded:
                return await _unavailable(send, "this run moved to another replica: retry in a moment")
            if owner and await self._forward(owner, scope, body, send):
                return
            if loop.time() >= deadline:
                return await _unavailable(send, why)
            await asyncio.sleep(WAIT_POLL_S)

    async def _here(self, scope: Scope, body: bytes, send: Send, *, last: bool) -> bool:
        """Answer on this replica; unless ``last``, a 503 (the run's partition left this replica while it answered)
        is not sent (False: ask for the owner again)."""
        refused = False

        async def guarded(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] == 503 and not last:
                refused = True
            if not refused:
                await send(message)

        await self.app(scope, _replay(body), guarded)
        if refused:
            await asyncio.sleep(WAIT_POLL_S)
        return not refused

    async def _forward(self, owner: str, scope: Scope, body: bytes, send: Send) -> bool:
        """Forward the request to ``owner`` and stream its answer back; False when the owner did not take the
        connection (nothing was sent: ask for the owner again)."""
        headers = [(k, v) for k, v in scope["headers"] if k.decode("latin-1").lower() not in HOP_BY_HOP]
        headers.append((FORWARDED.encode(), b"1"))
        query = scope.get("query_string", b"").decode("latin-1")
        path = scope.get("raw_path") or scope["path"].encode("latin-1")
        url = owner.rstrip("/") + path.decode("latin-1") + (f"?{query}" if query else "")
        streams = scope["path"].endswith(("/live", "/stream"))
        # A stream's answer lasts the run (keepalives every few seconds); another answer comes within its wait_s.
        read_s = None if streams else _wait_s(scope) + self._timeout_s
        timeout = httpx.Timeout(self._timeout_s, read=read_s)
        request = self._client.build_request(scope["method"], url, headers=headers, content=body, timeout=timeout)
        try:
            response = await self._client.send(request, stream=True)
        except (httpx.ConnectError, httpx.ReadTimeout):
            return False  # it died, or it is paused: its lease lapses, ask for the next owner
        except httpx.HTTPError as exc:
            _log.warning("the owner at %s did not answer (%s): 503", owner, type(exc).__name__)
            await _unavailable(send, "the replica that holds this run did not answer: retry in a moment")
            return True
        if response.status_code == 503 and scope["method"] == "GET":
            await response.aclose()
            return False  # the partition moved on while the owner waited: ask for the next owner
        try:
            out = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()]
            out = [(k, v) for k, v in out if k.decode("latin-1").lower() not in (*HOP_BY_HOP, "content-length")]
            await send({"type": "http.response.start", "status": response.status_code, "headers": out})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()
        return True


def _wait_s(scope: Scope) -> float:
    """The request's ``wait_s`` (a report waiting for the run's end), 0 without one."""
    for pair in scope.get("query_string", b"").decode("latin-1").split("&"):
        name, _, value = pair.partition("=")
        if name == "wait_s":
            try:
                return min(600.0, max(0.0, float(value)))
            except ValueError:
                return 0.0
    return 0.0


async def _body(receive: Receive, limit: int) -> bytes | None:
    """The request's body, or None past ``limit`` bytes (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = bytes(message.get("body", b""))
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _replay(body: bytes) -> Receive:
    """A ``receive`` that gives the app the body already read, then waits (the app only listens for a
    disconnect from there on)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    return receive


def _why(exc: OwnerUnavailableError, default: str) -> str:
    """What a 503 says when the owner could not be located: ``exc``'s reason when it gives one (Redis is down)."""
    if exc.args and isinstance(exc.args[0], str):
        return f"this run's owner cannot be found: {exc.args[0]}: retry in a moment"
    return default


async def _unavailable(send: Send, why: str) -> None:
    await _answer(send, 503, why)


async def _answer(send: Send, status: int, why: str) -> None:
    headers = [(b"content-type", b"application/json")]
    if status == 503:
        headers.append((b"retry-after", str(RETRY_AFTER_S).encode()))
    start: Message = {"type": "http.response.start", "status": status, "headers": headers}
    await send(start)
    await send({"type": "http.response.body", "body": json.dumps({"error": why}).encode()})


__all__ = ["CONVERSATION", "DESK_ENTRY", "FORWARDED", "Locate", "OwnerProxy", "OwnerUnavailableError", "run_of"]
