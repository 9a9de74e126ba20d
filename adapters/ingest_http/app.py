"""HTTP ingest: NDJSON events per run in, delivery reports out (Starlette).

Routes (all but ``/healthz`` need ``Authorization: Bearer <token>``):

- ``POST /v1/runs/{run}/events``: an NDJSON body, one event per line (``run`` may be omitted). Lines are
  processed as they arrive, so one long request can carry a whole live run. Raw provider events
  (lines with ``type``, no ``kind``) are accepted once the run's ``run.start`` declared ``format``.
- ``POST /v1/events``: the same, each line naming its ``run``.
- ``GET /v1/runs/{run}``: the run's delivery report; ``?wait_s=N`` waits up to N seconds for the end.
- ``GET /v1/runs/{run}/pipeline``, ``GET /v1/runs/{run}/pipeline/stream``, ``POST /v1/runs/{run}/gate``: the
  parent loop's pipeline lane and action gate (adapters/ingest_http/pipeline.py).
- ``GET /v1/runs/{run}/watch``: the link to the run's live page, with its read token.
- ``GET /healthz``.

Answers: 200 ``{"accepted": n}``; a bad line fails alone: the good lines are taken and the answer is
the first failure's 4xx with every rejected line listed (``{"error", "accepted", "rejected": [{"line",
"error"}]}``). 401 for a missing or wrong token, 413 past the size limits.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from adapters.ingest_http.pipeline import PipelineRoutes
from core.errors import IngestError
from core.pipeline import strict_loads
from core.relay import Relay

MAX_REJECTED_SHOWN = 20
"""At most this many rejected lines are listed in one answer (``rejected_total`` counts them all)."""


class _TooLarge(Exception):
    pass


class _Ingest:
    """The request handlers, bound to one relay and one token."""

    def __init__(self, relay: Relay, token: str, max_body_bytes: int, max_line_bytes: int) -> None:
        self.relay = relay
        self._expected = f"Bearer {token}".encode()
        self.max_body_bytes = max_body_bytes
        self.max_line_bytes = max_line_bytes

    def __repr__(self) -> str:
        return f"_Ingest(max_body_bytes={self.max_body_bytes})"  # never the token

    def denied(self, request: Request) -> JSONResponse | None:
        """A 401 answer unless the request carries the right bearer token (constant-time compare)."""
        got = request.headers.get("authorization", "").encode()
        if hmac.compare_digest(got, self._expected):
            return None
        problem = "missing Authorization header" if not got else "wrong bearer token"
        return JSONResponse(
            {"error": f"{problem}: send 'Authorization: Bearer <token>' with the sidecar's token"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    async def lines(self, request: Request) -> AsyncIterator[bytes]:
        """The body's lines as they arrive (linear in the body). Raises _TooLarge past the size limits."""
        total = 0
        buffer = b""
        async for piece in request.stream():
            total += len(piece)
            if total > self.max_body_bytes:
                raise _TooLarge(f"request body over {self.max_body_bytes} bytes: split the run into several requests")
            *complete, buffer = (buffer + piece).split(b"\n")
            for line in complete:
                yield line
            if len(buffer) > self.max_line_bytes:
                raise _TooLarge(f"a line is over {self.max_line_bytes} bytes")
            await asyncio.sleep(0)  # other runs go on while a large body is read
        if buffer.strip():
            yield buffer

    async def take_line(self, raw: bytes, run_hint: str | None) -> int:
        """Decode and submit one line; return the number of events taken. Raises IngestError."""
        if len(raw) > self.max_line_bytes:
            raise _TooLarge(f"a line is over {self.max_line_bytes} bytes")
        try:
            obj = strict_loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise IngestError(f"line is not UTF-8 (byte {exc.start}): send NDJSON encoded as UTF-8") from None
        except ValueError as exc:  # not JSON, NaN / Infinity, a key twice in one object, nested too deeply
            raise IngestError(f"malformed JSON, the line is {exc}") from None
        return await self.relay.submit_line(obj, run_hint)

    async def ingest(self, request: Request, run_hint: str | None) -> JSONResponse:
        if (denied := self.denied(request)) is not None:
            return denied
        accepted, rejected, status = 0, [], 200
        try:
            number = 0
            async for raw in self.lines(request):
                number += 1
                if not raw.strip():
                    continue
                try:
                    accepted += await self.take_line(raw, run_hint)
                except IngestError as exc:
                    rejected.append({"line": number, "error": str(exc)})
                    status = exc.status if status == 200 else status
        except _TooLarge as exc:
            return JSONResponse({"error": str(exc), "accepted": accepted, "rejected": rejected}, status_code=413)
        except ClientDisconnect:
            return JSONResponse({"error": "client disconnected", "accepted": accepted}, status_code=400)
        if not rejected:
            return JSONResponse({"accepted": accepted})
        shown = rejected[:MAX_REJECTED_SHOWN]
        first = rejected[0]
        body: dict[str, Any] = {"error": f"line {first['line']}: {first['error']}", "accepted": accepted}
        body["rejected"] = shown
        if len(rejected) > len(shown):
            body["rejected_total"] = len(rejected)
        return JSONResponse(body, status_code=status)

    async def run_events(self, request: Request) -> JSONResponse:
        return await self.ingest(request, request.path_params["run"])

    async def events(self, request: Request) -> JSONResponse:
        return await self.ingest(request, None)

    async def run_report(self, request: Request) -> JSONResponse:
        if (denied := self.denied(request)) is not None:
            return denied
        run = request.path_params["run"]
        try:
            wait_s = min(600.0, max(0.0, float(request.query_params.get("wait_s", "0"))))
        except ValueError:
            return JSONResponse({"error": "wait_s must be a number of seconds"}, status_code=400)
        report = await self.relay.wait_done(run, wait_s) if wait_s else await self.relay.report(run)
        if report is None:
            return JSONResponse({"error": f"unknown run {run!r}"}, status_code=404)
        return JSONResponse(report.model_dump(mode="json"))

    watch_url: Callable[[str], str] | None = None

    async def watch(self, request: Request) -> JSONResponse:
        """The link to watch a run live (its read token in it): ``{"url", "token"}``; 404 without a web page."""
        if (denied := self.denied(request)) is not None:
            return denied
        run = request.path_params["run"]
        if self.watch_url is None:
            return JSONResponse({"error": "this sidecar serves no live run page"}, status_code=404)
        if self.relay.monitor(run) is None:
            return JSONResponse({"error": f"unknown run {run!r}"}, status_code=404)
        url = self.watch_url(run)
        return JSONResponse({"url": url, "token": url.rsplit("token=", 1)[-1]})

    async def healthz(self, request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "active_runs": len(self.relay.active_runs())})


def create_app(
    relay: Relay,
    *,
    token: str,
    max_body_bytes: int = 16 * 1024 * 1024,
    max_line_bytes: int = 1024 * 1024,
    keepalive_s: float = 15.0,
    watch_url: Callable[[str], str] | None = None,
    extra_routes: Sequence[BaseRoute] = (),
) -> Starlette:
    """The ingest ASGI app for ``relay``.

    Args:
        relay: where events go.
        token: the bearer token clients must send (compared in constant time; never logged).
        max_body_bytes: the largest request body (413 past it).
        max_line_bytes: the largest NDJSON line (413 past it).
        keepalive_s: seconds of silence after which a pipeline stream gets a keepalive.
        watch_url: the link to a run's live page (with its read token), for ``GET /v1/runs/{run}/watch``.
        extra_routes: more routes served by the same app (the web channel's page and stream).
    """
    handlers = _Ingest(relay, token, max_body_bytes, max_line_bytes)
    handlers.watch_url = watch_url
    pipeline = PipelineRoutes(relay, handlers.denied, keepalive_s=keepalive_s)
    return Starlette(
        routes=[
            Route("/v1/runs/{run}/events", handlers.run_events, methods=["POST"]),
            Route("/v1/events", handlers.events, methods=["POST"]),
            Route("/v1/runs/{run}", handlers.run_report, methods=["GET"]),
            Route("/v1/runs/{run}/pipeline", pipeline.units, methods=["GET"]),
            Route("/v1/runs/{run}/pipeline/stream", pipeline.stream, methods=["GET"]),
            Route("/v1/runs/{run}/gate", pipeline.gate, methods=["POST"]),
            Route("/v1/runs/{run:path}/watch", handlers.watch, methods=["GET"]),
            Route("/healthz", handlers.healthz, methods=["GET"]),
            *extra_routes,
        ]
    )
