"""The web channel's HTTP routes: the live run page, its static files, and the run's SSE stream.

- ``GET /runs/{run}?token=T``: the live run page (HTML; everything it loads is served here: no CDN).
- ``GET /static/live.js`` (and ``.css``): its files.
- ``POST /v1/runs/{run}/live/stop`` and ``POST /v1/runs/{run}/live/approvals/{id}``: the page's Stop and its
  Approve/Deny, each with its own token (adapters/web/stop.py, adapters/web/approvals.py).
- ``GET /ops``: the operator page (``static/ops.html``): every active run, refreshed every 2 s from
  ``GET /v1/runs?all=1`` with the main token, which the page asks for once and keeps in the tab's sessionStorage
  (sent as ``Authorization: Bearer``, never in a URL); each run links to its live page. The page itself holds no
  data: it is served without a token.
- ``GET /v1/runs/{run}/live?token=T`` (or ``Authorization: Bearer T``): the run's events (core/run/monitor.py) as
  Server-Sent Events. Each SSE message's data is one event's JSON, whose ``id`` is the event's number in the run
  (1, 2, …); the SSE ``id`` field is ``<epoch>.<that number>`` (e.g. ``6d4dbe23.17``: the epoch names this
  process's monitor of the run, so after a restart an id of the old one gets a ``reset`` instead of wrong events).
  A client that reconnects with ``Last-Event-ID`` (either form; ``?after=`` does the same) gets exactly what it
  missed, once, or one ``reset`` event with the whole state when that is past the replay buffer. A run that has not
  started yet (a right token: the link came from ``GET /v1/runs/{run}/watch``) is waited for: the stream sends one
  ``{"type": "waiting", "run"}`` message (no SSE id) at once, then the run's events from its first when it starts;
  after ``START_WAIT_S`` without it the stream ends and the browser's EventSource reconnects and waits again. (So
  a run that ended before this process started is waited for too: its events are gone.) Comment keepalives
  every ``keepalive_s`` while idle; ``Cache-Control: no-cache`` and ``X-Accel-Buffering: no`` so proxies pass events
  through at once; never compressed. The stream ends after the ``end`` event, unless it was asked with
  ``&corrections=1`` (the page asks so): then it stays open up to ``CORRECTIONS_WATCH_S`` after the end (keepalives
  go on) and a correction of the run (docs/corrections.md) comes as one more ``answer`` event (``text`` the corrected
  answer, ``reset`` and ``final`` true; a retraction's: the retracted line); a page loaded after a correction gets the
  corrected answer in its ``reset``.

Access needs the run's read token (adapters/web/tokens.py): none → 401, a wrong one → 403, and neither says whether
the run exists. SSE: https://html.spec.whatwg.org/multipage/server-sent-events.html
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from streamrelay.adapters.web.approvals import decide_route
from streamrelay.adapters.web.stop import stop_route
from streamrelay.adapters.web.tokens import ReadTokens
from streamrelay.core.ingest.surface import RunRelay
from streamrelay.core.run.live import Live
from streamrelay.core.run.monitor import Watched

STATIC = Path(__file__).with_name("static")
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
START_WAIT_S = 20.0
"""How long one stream waits for a run that has not started; then it ends and the browser reconnects and waits
again (with replicas, a reconnect is routed to the replica that owns the run once it started)."""
START_POLL_S = 0.2
"""How often a waiting stream looks for the run."""
CORRECTIONS_WATCH_S = 600.0
"""How long a stream asked with ``&corrections=1`` stays open after the run's end for its corrections (then it ends:
the page stops following; a page reloaded later shows the corrected answer)."""
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
}


class _Live:
    def __init__(self, relay: RunRelay, tokens: ReadTokens, keepalive_s: float) -> None:
        self.relay = relay
        self.tokens = tokens
        self.keepalive_s = keepalive_s

    def _refused(self, request: Request) -> Response | None:
        """401 without a token, 403 with a wrong one (the same for a run that does not exist)."""
        run = request.path_params["run"]
        token = request.query_params.get("token")
        auth = request.headers.get("authorization", "")
        if token is None and auth.lower().startswith("bearer "):
            token = auth[7:].strip()
        if not token:
            return PlainTextResponse(
                "this run's read token is needed: ?token=… (GET /v1/runs/{run}/watch gives the link)", status_code=401
            )
        if not self.tokens.allows(run, token):
            return PlainTextResponse("wrong read token for this run", status_code=403)
        return None

    async def page(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        return FileResponse(STATIC / "live.html", media_type="text/html", headers=PAGE_HEADERS)

    async def stream(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        run = request.path_params["run"]
        raw = request.headers.get("last-event-id") or request.query_params.get("after")
        monitor = self.relay.monitor(run)
        try:
            after = _event_number(raw) if monitor is None else monitor.resume_after(raw)
        except ValueError:
            return JSONResponse({"error": f"Last-Event-ID must be an event id, got {raw!r}"}, status_code=400)
        linger = CORRECTIONS_WATCH_S if request.query_params.get("corrections") == "1" else 0.0
        events = (
            self._wait_then_follow(run, raw, linger)
            if monitor is None
            else _messages(monitor, after, self._after_end(run, linger))
        )
        return EventSourceResponse(events, headers=STREAM_HEADERS, ping=self.keepalive_s)

    def _after_end(self, run: str, linger_s: float) -> AfterEnd | None:
        """How a stream asked to follow corrections waits for them after the end (None: it ends with the run)."""
        if linger_s <= 0:
            return None
        relay = self.relay

        async def after_end(last_id: int, deadline_s: float) -> Watched | None:
            left = deadline_s - asyncio.get_running_loop().time()
            return await relay.after_end(run, last_id, left) if left > 0 else None

        return AfterEnd(after_end, linger_s)

    async def _wait_then_follow(self, run: str, raw: str | None, linger_s: float) -> AsyncIterator[ServerSentEvent]:
        """A ``waiting`` message, then ``run``'s events once it starts (nothing more after ``START_WAIT_S``)."""
        yield ServerSentEvent(json.dumps({"type": "waiting", "run": run}, ensure_ascii=False))
        loop = asyncio.get_running_loop()
        deadline_s = loop.time() + START_WAIT_S
        while (monitor := self.relay.monitor(run)) is None:
            if loop.time() >= deadline_s:
                return
            await asyncio.sleep(START_POLL_S)
        async for message in _messages(monitor, monitor.resume_after(raw), self._after_end(run, linger_s)):
            yield message


def _event_number(raw: str | None) -> int:
    """Checks a ``Last-Event-ID`` (``<epoch>.<n>`` or ``<n>``) of a run not started yet.

    Raises:
        ValueError: not an event id.
    """
    return int(raw.rpartition(".")[2]) if raw else 0


class AfterEnd:
    """How a stream follows a finished run's corrections (``&corrections=1``): ``wait(last_id, deadline_s)`` gives the
    finished run's monitor once it has events after ``last_id`` (None: none before ``deadline_s``, loop time), for
    ``linger_s`` seconds after the end."""

    def __init__(self, wait: Callable[[int, float], Awaitable[Watched | None]], linger_s: float) -> None:
        self.wait = wait
        self.linger_s = linger_s


async def _messages(monitor: Watched, after: int, after_end: AfterEnd | None = None) -> AsyncIterator[ServerSentEvent]:
    """The run's events after ``after`` as SSE messages (SSE id ``<epoch>.<id>``); with ``after_end``, then its
    corrections' events until ``after_end.linger_s`` past the run's end (a finished run's monitor tells when it
    ended: ``ended_at()``; a stream that followed the run to its end waits the whole ``linger_s``)."""
    last = after
    async for event in follow(monitor, after):
        yield ServerSentEvent(json.dumps(event.wire(), ensure_ascii=False), id=monitor.sse_id(event))
        last = event.id
    if after_end is None:
        return
    linger_s = after_end.linger_s
    ended_at = getattr(monitor, "ended_at", None)  # a finished run's monitor: when it ended (a live one ended now)
    if ended_at is not None and (at := ended_at()) is not None:
        linger_s = max(0.0, min(linger_s, at + linger_s - time.time()))  # past the run's end, not this stream's
    deadline_s = asyncio.get_running_loop().time() + linger_s
    while (finished := await after_end.wait(last, deadline_s)) is not None:
        for event in await finished.wait(last):
            yield ServerSentEvent(json.dumps(event.wire(), ensure_ascii=False), id=finished.sse_id(event))
            last = event.id


async def follow(monitor: Watched, after: int) -> AsyncIterator[Live]:
    """The run's events after id ``after`` as they come (a ``reset`` when they are past the buffer), until
    ``end``."""
    while True:
        events = await monitor.wait(after)
        for event in events:
            yield event
            after = event.id
        if monitor.closed and after >= monitor.last_id:
            return
        await asyncio.sleep(0)


async def ops_page(_request: Request) -> Response:
    """The operator page (module docstring)."""
    return FileResponse(STATIC / "ops.html", media_type="text/html", headers=PAGE_HEADERS)


def web_routes(relay: RunRelay, tokens: ReadTokens, *, keepalive_s: float = 15.0) -> list[BaseRoute]:
    """The web channel's routes for ``relay`` (mount them beside the ingest routes).

    Args:
        relay: where the runs' monitors are.
        tokens: the read tokens.
        keepalive_s: seconds of silence after which a stream gets a comment keepalive.
    """
    live = _Live(relay, tokens, keepalive_s)
    return [
        # {run:path}: the page links a run id with "/" in it as %2F, which arrives decoded
        Route("/runs/{run:path}", live.page, methods=["GET"]),
        Route("/v1/runs/{run:path}/live", live.stream, methods=["GET"]),
        stop_route(relay, tokens),  # POST /v1/runs/{run}/live/stop with the run's stop token (adapters/web/stop.py)
        decide_route(relay, tokens),  # POST /v1/runs/{run}/live/approvals/{id}: a viewer's decision (approvals.py)
        Route("/ops", ops_page, methods=["GET"]),
        Route("/favicon.ico", lambda _request: Response(status_code=204), methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
