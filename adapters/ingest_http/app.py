"""HTTP ingest: NDJSON events per run in, delivery reports out (Starlette).

Routes (all need ``Authorization: Bearer <token>``; the probes ``/healthz``, ``/readyz`` and ``/metrics`` come with
the service's other routes: :mod:`adapters.ops.probes`):

- ``POST /v1/runs/{run}/events``: an NDJSON body, one event per line (``run`` may be omitted). Lines are
  processed as they arrive, so one long request can carry a whole live run. Raw provider events
  (lines with ``type``, no ``kind``) are accepted once the run's ``run.start`` declared ``format``.
- ``POST /v1/events``: the same, each line naming its ``run``.
- ``GET /v1/runs/{run}``: the run's delivery report; ``?wait_s=N`` waits up to N seconds for the end.
- ``GET /v1/runs/{run}/pipeline``, ``GET /v1/runs/{run}/pipeline/stream``, ``POST /v1/runs/{run}/gate``: the
  parent loop's pipeline lane and action gate (adapters/ingest_http/pipeline.py).
- ``GET /v1/runs/{run}/watch``: the link to the run's live page, with its read token.
- ``GET /v1/runs``: the active runs for operators (``streamrelay runs``, the ``/ops`` page), oldest first:
  ``{"runs": [{"run", "channel", "platform", "mode", "started_at", "age_s", "status", "confirmed", "uncertain",
  "failed", "rate_limited", "watch", "replica"?}], "unreachable": [{"replica", "url", "error"}]}``; ``?all=1`` on a
  replica asks every other live replica too (one process holds every run: the same answer).

Lines that arrive together are journaled in one commit before they count as accepted (503 when the journal
cannot be written: retry them). Answers: 200 ``{"accepted": n}`` (``"dropped": k`` when k lines were repeats:
a ``seq`` already taken, a line of a run that already ended); a bad line fails alone: the good lines are taken
and the answer is the first failure's 4xx with every rejected line listed (``{"error", "accepted", "rejected": [{"line",
"error"}]}``). 401 for a missing or wrong token, 413 past the size limits. Every rejected line is logged (logger
``streamrelay.ingest``, WARNING, with ``run``, ``line``, ``status`` and ``error``), and every answer is told to the
optional :class:`IngestObserver` (the service's metrics).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from adapters.ingest_http.pipeline import PipelineRoutes
from core.admission import LineResult
from core.errors import IngestError
from core.pipeline import strict_loads
from core.surface import RunRelay

MAX_REJECTED_SHOWN = 20
"""At most this many rejected lines are listed in one answer (``rejected_total`` counts them all) and logged."""

_log = logging.getLogger("streamrelay.ingest")


class IngestObserver(Protocol):
    """Told what became of each ingest request (the service's metrics implement it)."""

    def ingested(self, *, accepted: int, dropped: int, rejected: int, status: int) -> None:
        """One request answered: events accepted, lines dropped as repeats, lines rejected, the answer's status."""
        ...


class _TooLarge(Exception):
    pass


class _Tally:
    """What became of a request's lines: events accepted, lines dropped as repeats, lines rejected."""

    def __init__(self) -> None:
        self.accepted = 0
        self.dropped = 0
        self.rejected: list[dict[str, Any]] = []
        self.status = 200

    def add(self, line: int, result: LineResult | IngestError) -> None:
        if isinstance(result, IngestError):
            self.rejected.append({"line": line, "error": str(result)})
            self.status = result.status if self.status == 200 else self.status
        elif result.dropped is not None:
            self.dropped += 1
        else:
            self.accepted += result.events

    def counts(self) -> dict[str, int]:
        return {"accepted": self.accepted, **({"dropped": self.dropped} if self.dropped else {})}

    def answer(self) -> JSONResponse:
        if not self.rejected:
            return JSONResponse(self.counts())
        first = self.rejected[0]
        body: dict[str, Any] = {"error": f"line {first['line']}: {first['error']}", **self.counts()}
        body["rejected"] = self.rejected[:MAX_REJECTED_SHOWN]
        if len(self.rejected) > MAX_REJECTED_SHOWN:
            body["rejected_total"] = len(self.rejected)
        return JSONResponse(body, status_code=self.status)


class _Ingest:
    """The request handlers, bound to one relay and one token."""

    def __init__(self, relay: RunRelay, token: str, max_body_bytes: int, max_line_bytes: int) -> None:
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

    async def batches(self, request: Request) -> AsyncIterator[list[bytes]]:
        """The body's complete lines, a batch per piece received (linear in the body), so the lines that arrived
        together are journaled in one commit. Raises _TooLarge past the size limits."""
        total = 0
        buffer = b""
        async for piece in request.stream():
            total += len(piece)
            if total > self.max_body_bytes:
                raise _TooLarge(f"request body over {self.max_body_bytes} bytes: split the run into several requests")
            *complete, buffer = (buffer + piece).split(b"\n")
            if complete:
                yield complete
            if len(buffer) > self.max_line_bytes:
                raise _TooLarge(f"a line is over {self.max_line_bytes} bytes")
            await asyncio.sleep(0)  # other runs go on while a large body is read
        if buffer.strip():
            yield [buffer]

    def decode(self, raw: bytes) -> tuple[Any, str]:
        """One line's JSON value and text. Raises IngestError (or _TooLarge)."""
        if len(raw) > self.max_line_bytes:
            raise _TooLarge(f"a line is over {self.max_line_bytes} bytes")
        try:
            text = raw.decode("utf-8")
            return strict_loads(text), text
        except UnicodeDecodeError as exc:
            raise IngestError(f"line is not UTF-8 (byte {exc.start}): send NDJSON encoded as UTF-8") from None
        except ValueError as exc:  # not JSON, NaN / Infinity, a key twice in one object, nested too deeply
            raise IngestError(f"malformed JSON, the line is {exc}") from None

    observer: IngestObserver | None = None

    async def ingest(self, request: Request, run_hint: str | None) -> JSONResponse:
        if (denied := self.denied(request)) is not None:
            answer = denied
            tally = _Tally()
        else:
            tally = _Tally()
            answer = await self._take(request, run_hint, tally)
        self._tell(run_hint, tally, answer.status_code)
        return answer

    def _tell(self, run_hint: str | None, tally: _Tally, status: int) -> None:
        """Log the rejected lines (at most :data:`MAX_REJECTED_SHOWN`) and tell the observer."""
        for rejected in tally.rejected[:MAX_REJECTED_SHOWN]:
            extra = {"run": run_hint or "", "line": rejected["line"], "status": status, "error": rejected["error"]}
            _log.warning("ingest: line %d rejected: %s", rejected["line"], rejected["error"], extra=extra)
        if len(tally.rejected) > MAX_REJECTED_SHOWN:
            _log.warning("ingest: %d more lines rejected", len(tally.rejected) - MAX_REJECTED_SHOWN)
        if self.observer is not None:
            rejected_n = len(tally.rejected)
            self.observer.ingested(accepted=tally.accepted, dropped=tally.dropped, rejected=rejected_n, status=status)

    async def _take(self, request: Request, run_hint: str | None, tally: _Tally) -> JSONResponse:
        """Read, decode and submit the body's lines into ``tally``; the answer."""
        try:
            number = 0
            async for batch in self.batches(request):
                decoded: list[tuple[Any, str | None]] = []
                numbers: list[int] = []
                for raw in batch:
                    number += 1
                    if not raw.strip():
                        continue
                    try:
                        decoded.append(self.decode(raw))
                        numbers.append(number)
                    except IngestError as exc:
                        tally.add(number, exc)
                if not decoded:
                    continue
                try:
                    results = await self.relay.submit_lines(decoded, run_hint)
                except Exception as exc:  # the journal could not be written: nothing of this batch is accepted
                    error = f"the journal could not be written ({type(exc).__name__}): retry these lines"
                    _log.error("ingest: %s", error, extra={"run": run_hint or "", "status": 503}, exc_info=True)
                    return JSONResponse({"error": error, **tally.counts()}, status_code=503)
                for line_no, result in zip(numbers, results, strict=True):
                    tally.add(line_no, result)
        except _TooLarge as exc:
            return JSONResponse({"error": str(exc), **tally.counts(), "rejected": tally.rejected}, status_code=413)
        except ClientDisconnect:
            return JSONResponse({"error": "client disconnected", **tally.counts()}, status_code=400)
        return tally.answer()

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
        try:
            report = await self.relay.wait_done(run, wait_s) if wait_s else await self.relay.report(run)
        except IngestError as exc:  # replicas: the run's partition is moving (503, ask again)
            headers = {"Retry-After": "1"} if exc.status == 503 else None
            return JSONResponse({"error": str(exc)}, status_code=exc.status, headers=headers)
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

    async def runs(self, request: Request) -> JSONResponse:
        """The active runs (module docstring), each with ``watch``: its live page's path with its read token (null
        when this sidecar serves no live page)."""
        if (denied := self.denied(request)) is not None:
            return denied
        everywhere = request.query_params.get("all", "").lower() in ("1", "true", "yes")
        listing = await self.relay.runs(everywhere=everywhere, bearer=request.headers.get("authorization", ""))
        rows: list[dict[str, Any]] = listing["runs"]
        for row in rows:
            if row.get("watch") is None:
                row["watch"] = None if self.watch_url is None else self.watch_url(row["run"])
        rows.sort(key=lambda row: (row.get("started_at") is None, row.get("started_at") or 0.0, row["run"]))
        return JSONResponse({"runs": rows, "unreachable": listing.get("unreachable", [])})


def create_app(
    relay: RunRelay,
    *,
    token: str,
    max_body_bytes: int = 16 * 1024 * 1024,
    max_line_bytes: int = 1024 * 1024,
    keepalive_s: float = 15.0,
    watch_url: Callable[[str], str] | None = None,
    extra_routes: Sequence[BaseRoute] = (),
    observer: IngestObserver | None = None,
) -> Starlette:
    """The ingest ASGI app for ``relay``.

    Args:
        relay: where events go.
        token: the bearer token clients must send (compared in constant time; never logged).
        max_body_bytes: the largest request body (413 past it).
        max_line_bytes: the largest NDJSON line (413 past it).
        keepalive_s: seconds of silence after which a pipeline stream gets a keepalive.
        watch_url: the link to a run's live page (with its read token), for ``GET /v1/runs/{run}/watch``.
        extra_routes: more routes served by the same app (the web channel's page and stream, the probes).
        observer: told what became of every ingest request (the service's metrics).
    """
    handlers = _Ingest(relay, token, max_body_bytes, max_line_bytes)
    handlers.watch_url = watch_url
    handlers.observer = observer
    pipeline = PipelineRoutes(relay, handlers.denied, keepalive_s=keepalive_s)
    return Starlette(
        routes=[
            Route("/v1/runs/{run}/events", handlers.run_events, methods=["POST"]),
            Route("/v1/events", handlers.events, methods=["POST"]),
            Route("/v1/runs", handlers.runs, methods=["GET"]),
            Route("/v1/runs/{run}", handlers.run_report, methods=["GET"]),
            Route("/v1/runs/{run}/pipeline", pipeline.units, methods=["GET"]),
            Route("/v1/runs/{run}/pipeline/stream", pipeline.stream, methods=["GET"]),
            Route("/v1/runs/{run}/gate", pipeline.gate, methods=["POST"]),
            Route("/v1/runs/{run:path}/watch", handlers.watch, methods=["GET"]),
            *extra_routes,
        ]
    )
