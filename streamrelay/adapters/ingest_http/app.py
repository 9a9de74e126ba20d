"""HTTP ingest: NDJSON events per run in, delivery reports out (Starlette).

Routes (all need ``Authorization: Bearer <token>``; the probes ``/healthz``, ``/readyz`` and ``/metrics`` come with
the service's other routes: :mod:`adapters.ops.probes`):

- ``POST /v1/runs/{run}/events``: an NDJSON body, one event per line (``run`` may be omitted). Lines are
  processed as they arrive, so one long request can carry a whole live run. Raw provider events
  (lines with ``type``, no ``kind``) are accepted once the run's ``run.start`` declared ``format``.
- ``POST /v1/events``: the same, each line naming its ``run``.
- ``GET /v1/runs/{run}``: the run's delivery report; ``?wait_s=N`` waits up to N seconds for the end. With the sampled
  background audit on (``[service] audit_sample``), an audited run's report carries its last audit as ``audit``.
- ``GET /v1/runs/{run}/pipeline``, ``GET /v1/runs/{run}/pipeline/stream``, ``POST /v1/runs/{run}/gate``: the
  parent loop's pipeline lane and action gate (adapters/ingest_http/pipeline.py).
- ``POST /v1/runs/{run}/stop``: a person pressed Stop (forwarded by the bot that owns the platform's updates): the
  run ends ``cancelled`` (adapters/ingest_http/stop.py, core/run/stop.py).
- ``POST /v1/runs/{run}/approvals/{id}``: a person pressed Approve or Deny (forwarded by the bot);
  ``GET /v1/runs/{run}/approvals/{id}``: an open run's approval (adapters/ingest_http/approvals.py,
  core/run/approvals.py).
- ``GET /v1/runs/{run}/watch``: the link to the run's live page, with its read token: ``{"url", "token",
  "started"}``; ``?stop=1`` adds the run's stop token to the link (``&stop=…``: its page shows a Stop button;
  hand it only to whoever may stop the run, adapters/web/tokens.py). ``url`` is absolute, built from the address
  the request was made to (its scheme, host and port, as a proxy passes them on). A run that has not started yet
  answers too (``"started": false``): its page waits for the run and follows it from its first event, so a link
  can be handed out before the agent streams. ``?as=web:user:alice`` makes the link that person's: it carries
  ``&viewer=…&decide=…`` and its page decides approvals as them (``by``: they may decide what names them among its
  approvers, or where the channel says ``approvals_anyone``; docs/approvals.md); hand it only to that person.
- ``POST /v1/runs/{run}/corrections``, ``GET /v1/runs/{run}/corrections[/{id}]``: a correction (a new final) or a
  retraction of an ended run, each message edited or deleted once (adapters/ingest_http/corrections.py); an ended
  run's report lists its corrections (``corrections``: each one's id, kind, state and per-message changes).
- ``/v1/deliveries``: the desk, the parts of ended runs not known to be delivered: list, inspect, resend, resolve,
  prune (adapters/ingest_http/deliveries.py).
- ``GET /v1/runs``: the active runs for operators (``streamrelay runs``, the ``/ops`` page), oldest first:
  ``{"runs": [{"run", "channel", "platform", "mode", "started_at", "age_s", "status", "confirmed", "uncertain",
  "failed", "rate_limited", "watch", "replica"?}], "unreachable": [{"replica", "url", "error"}]}``; ``?all=1`` on a
  replica asks every other live replica too (one process holds every run: the same answer).

Clients (adapters/ingest_http/callers.py): the bearer token names the client; a run belongs to the client that
started it and its id is the client's own (two clients may both have a ``run-1``); another client's run answers
exactly as a run that does not exist. ``GET /v1/runs`` lists the caller's runs only.

Lines that arrive together are journaled in one commit before they count as accepted (503 when the journal
cannot be written: retry them). Answers: 200 ``{"accepted": n}`` (``"dropped": k`` when k lines were repeats:
a ``seq`` already taken, a line of a run that already ended, with ``"dropped_reason": "line N: why"`` for the
first of them); a bad line fails alone: the good lines are taken
and the answer is the first rejected line's 4xx with the first rejected lines listed in line order (``{"error",
"accepted", "rejected": [{"line", "error"}], "rejected_total"?}``; after 1,000 rejected lines the body is not read
further).
401 for a missing or wrong token, 413 past the size limits, 422 past a run's limits, 429 past a client's (active
runs with ``Retry-After``, runs per request); each names its setting, e.g. ``clients.NAME.max_active_runs``. Past
the sidecar's capacity a request is cut and answered 503 with ``Retry-After`` and ``pushed_back_from``
(adapters/ingest_http/push_back.py): nothing after that line was taken. The
client's ``events_per_s`` slows its requests down rather than refusing them. Every rejected line is logged (logger
``streamrelay.ingest``, WARNING, with ``run``, ``line``, ``status`` and ``error``; the first 20 of a request), and
every answer is told to the optional :class:`IngestObserver` (the service's metrics).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from typing import Any, Protocol, cast

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from streamrelay.adapters.ingest_http import push_back
from streamrelay.adapters.ingest_http.approvals import ApprovalRoutes
from streamrelay.adapters.ingest_http.callers import Caller, Callers, run_of
from streamrelay.adapters.ingest_http.corrections import CorrectionRoutes, no_corrections_routes
from streamrelay.adapters.ingest_http.deliveries import DeskRoutes, no_desk_route
from streamrelay.adapters.ingest_http.lean import IngestApp
from streamrelay.adapters.ingest_http.lines import (
    BodyTooLargeError,
    Tally,
    TooManyRejectedError,
    batches,
    decode,
    decode_delta,
    decode_deltas,
    decode_text,
)
from streamrelay.adapters.ingest_http.pipeline import PipelineRoutes
from streamrelay.adapters.ingest_http.push_back import cut_at
from streamrelay.adapters.ingest_http.records import RecordRoutes
from streamrelay.adapters.ingest_http.stop import StopRoutes
from streamrelay.adapters.ingest_http.tracing import IngestTrace, ingest_span
from streamrelay.core.errors import IngestError, StoreUnavailableError
from streamrelay.core.events import APPROVER_ID, TextDelta, TextEvent
from streamrelay.core.ingest.admission import ONE_EVENT, LineResult
from streamrelay.core.ingest.clients import ClientLimits
from streamrelay.core.ingest.pressure import Pressure, PushBack
from streamrelay.core.ingest.surface import RunRelay
from streamrelay.core.run.corrections import CorrectionError, CorrectionService
from streamrelay.core.run.desk import Desk
from streamrelay.core.run.relay import Relay

_log = logging.getLogger("streamrelay.ingest")

STORE_RETRY_AFTER_S = 1
"""``Retry-After`` (seconds) of the 503 when the journal could not be written (a full or read-only disk, Redis down or
emptied): the request is cut there, and its agent sends the lines from ``pushed_back_from`` on again."""


class WatchUrl(Protocol):
    """The link to run ``run``'s live page with its read token; with ``stop``, its stop token too; with ``viewer``,
    that person's decide token (approvals on the page: adapters/web/tokens.py)."""

    def __call__(self, run: str, *, stop: bool = False, viewer: str | None = None) -> str: ...


class IngestObserver(Protocol):
    """Told what became of each ingest request (the service's metrics implement it)."""

    def ingested(self, *, accepted: int, dropped: int, rejected: int, status: int) -> None:
        """One request answered: events accepted, lines dropped as repeats, lines rejected, the answer's status."""
        ...


class _Ingest:
    """The request handlers, bound to one relay and its callers."""

    def __init__(self, relay: RunRelay, callers: Callers, max_body_bytes: int, max_line_bytes: int) -> None:
        self.relay = relay
        self.callers = callers
        self.max_body_bytes = max_body_bytes
        self.max_line_bytes = max_line_bytes
        self.typed = isinstance(relay, Relay) or getattr(relay, "takes_typed", False) is True
        """Whether the relay takes text lines as events already validated (:func:`lines.decode_text`): one process's
        relay, and a replica's front (which forwards their text as it came)."""
        self.deltas = isinstance(relay, Relay)
        """Whether the relay takes a plain delta line as a :class:`core.events.TextDelta` (:func:`lines.decode_delta`):
        one process's relay (its admission carries it to the run stage as the in-process path does)."""
        self.paced_by_relay = getattr(relay, "paces_clients", False) is True
        """Whether the relay paces each client's ``events_per_s`` itself (a replica's front, through Redis)."""

    def __repr__(self) -> str:
        return f"_Ingest(max_body_bytes={self.max_body_bytes})"  # never a token

    observer: IngestObserver | None = None
    pressure: Pressure | None = None
    """Past capacity, pushes requests back (:mod:`adapters.ingest_http.push_back`); None: never."""

    async def ingest(self, request: Request, run: str | None) -> JSONResponse:
        tally = Tally()
        caller = self.callers.authorize(request)
        if isinstance(caller, JSONResponse):
            answer = caller
        else:
            try:
                hint = caller.key(run) if run is not None else None
            except IngestError as exc:
                answer = JSONResponse({"error": str(exc), "accepted": 0}, status_code=exc.status)
            else:
                headers = request.headers
                if "traceparent" not in headers:  # untraced: no span (ingest_span would give None), no context manager
                    answer = await self._take(request, caller, hint, tally)
                else:
                    with ingest_span(headers, run) as traced:
                        answer = await self._take(request, caller, hint, tally, traced)
                        if traced is not None:
                            traced.span.set_attribute("http.response.status_code", answer.status_code)
                            traced.span.set_attribute("streamrelay.accepted", tally.accepted)
        self._tell(run, tally, answer.status_code)
        return answer

    def _tell(self, run: str | None, tally: Tally, status: int) -> None:
        """Log the rejected lines (the first :data:`MAX_REJECTED_SHOWN`) and tell the observer."""
        for rejected in tally.rejected:
            extra = {"run": run or "", "line": rejected["line"], "status": status, "error": rejected["error"]}
            _log.warning("ingest: line %d rejected: %s", rejected["line"], rejected["error"], extra=extra)
        if tally.rejected_total > len(tally.rejected):
            _log.warning("ingest: %d more lines rejected", tally.rejected_total - len(tally.rejected))
        if self.observer is not None:
            self.observer.ingested(
                accepted=tally.accepted, dropped=tally.dropped, rejected=tally.rejected_total, status=status
            )

    async def _take(
        self, request: Request, caller: Caller, hint: str | None, tally: Tally, traced: IngestTrace | None = None
    ) -> JSONResponse:
        """Read, decode and submit the body's lines into ``tally``; the answer. ``traced``: the request's trace
        context, given to the runs it starts (:mod:`adapters.ingest_http.tracing`)."""
        started: set[str] = set()
        try:
            number = 0
            async for whole in batches(request, self.max_body_bytes, self.max_line_bytes):
                level = self.pressure.push_back() if self.pressure is not None else PushBack.NONE
                cut = cut_at(whole, level, lambda raw: self._known_start(raw, caller, hint))
                batch = whole if cut is None else whole[:cut]
                decoded, numbers = self._decode(batch, number, caller, hint, started, tally, traced)
                number += len(batch)
                if decoded:
                    failed = await self._submit(decoded, numbers, caller, hint, tally)
                    if failed is not None:
                        return failed
                if cut is not None and self.pressure is not None:  # the rest of the request is not read
                    return push_back.answer(tally, number + 1, self.pressure, level)
        except BodyTooLargeError as exc:
            return tally.answer(str(exc), 413)
        except TooManyRejectedError as exc:
            return tally.answer(f"{exc}: fix the client (the first rejections are listed)")
        except ClientDisconnect:
            return JSONResponse({"error": "client disconnected", **tally.counts()}, status_code=400)
        return tally.answer()

    def _decode(
        self,
        batch: list[bytes],
        number: int,
        caller: Caller,
        hint: str | None,
        started: set[str],
        tally: Tally,
        traced: IngestTrace | None = None,
    ) -> tuple[list[tuple[Any, str | None]], list[int]]:
        """A batch's lines (numbered from ``number + 1``) decoded, each with its text, and their numbers; an empty
        line is a keep-alive (skipped); a line refused here goes into ``tally``. With the URL's run key (``hint``)
        and a relay that takes typed events a plain delta line is decoded once into a :class:`core.events.TextDelta`
        (:func:`lines.decode_delta`, one process's relay; a batch of them all at once: :func:`lines.decode_deltas`),
        another ``text`` line decoded and validated in one step (:func:`lines.decode_text`), else by :meth:`_line`.

        Raises:
            BodyTooLargeError: a line over the size limit. TooManyRejectedError: as :meth:`Tally.add` says.
        """
        max_line_bytes = self.max_line_bytes
        delta_run = hint if self.deltas else None  # the run a plain delta is carried to, as a TextDelta
        if delta_run is not None and batch and len(max(batch, key=len)) <= max_line_bytes:
            # the common batch, all plain delta lines: decoded and validated in one call (a blank line, a line of
            # another kind or one the decoder cannot be sure of: the batch is read line by line below)
            deltas = decode_deltas(batch, delta_run)
            if deltas is not None:
                return cast(list[tuple[Any, str | None]], deltas), list(range(number + 1, number + 1 + len(batch)))
        decoded: list[tuple[Any, str | None]] = []
        numbers: list[int] = []
        run_json = json.dumps(hint).encode() if hint is not None and self.typed else None  # (only read line by line)
        for raw in batch:
            number += 1
            if not raw.strip():
                continue  # an empty line: a keep-alive of a long request (docs/ingest.md)
            # A normalized event names its kind; a provider's raw line (a format's run) has no "kind" and goes straight
            # to the general path instead of failing the text event's validator first.
            if run_json is not None and len(raw) <= max_line_bytes and b'"kind"' in raw:
                # the common line, a plain delta: decoded once; another text line: decoded and validated in one step
                event: TextDelta | TextEvent | None = decode_delta(raw, delta_run) if delta_run is not None else None
                if event is None:
                    event = decode_text(raw, run_json)
                if event is not None:
                    decoded.append((event, raw.decode("utf-8")))
                    numbers.append(number)
                    continue
            try:
                decoded.append(self._line(raw, caller, hint, started, traced))
                numbers.append(number)
            except IngestError as exc:
                tally.add(number, exc, caller.public(str(exc)))
        return decoded, numbers

    async def _submit(
        self, decoded: list[tuple[Any, str | None]], numbers: list[int], caller: Caller, hint: str | None, tally: Tally
    ) -> JSONResponse | None:
        """Submit one batch's decoded lines (numbered ``numbers``) into ``tally``; the 503 when the journal failed.
        The client's ``events_per_s`` is paced here unless the relay paces it (a replica's front: across replicas)."""
        if not self.paced_by_relay:
            await caller.pace(len(decoded))
        try:
            results = await self.relay.submit_lines(decoded, hint)
        except Exception as exc:  # the journal could not be written: nothing of this batch is accepted
            error = f"the journal could not be written ({type(exc).__name__}: {exc})"
            if isinstance(exc, StoreUnavailableError):  # says why, never a secret (e.g. Redis lost its data)
                error = str(exc)
            first = numbers[0]
            error += f": nothing from line {first} on was taken; send those lines again after Retry-After seconds"
            _log.error("ingest: %s", error, extra={"run": hint or "", "status": 503}, exc_info=True)
            body: dict[str, Any] = {"error": caller.public(error), **tally.counts(), "pushed_back_from": first}
            if tally.rejected:
                body["rejected"] = tally.rejected
            return JSONResponse(body, status_code=503, headers={"Retry-After": str(STORE_RETRY_AFTER_S)})
        if results.count(ONE_EVENT) == len(results):  # the common batch: every line one event (counted in C)
            tally.accepted += len(results)
            return None
        events = 0
        for line_no, result in zip(numbers, results, strict=True):
            if isinstance(result, IngestError):
                public: str | None = caller.public(str(result))
            else:
                public = caller.public(result.dropped) if result.dropped is not None else None
            tally.add(line_no, result, public)
            events += result.events if isinstance(result, LineResult) else 0
        if not self.paced_by_relay:
            await caller.pace(events - len(decoded))  # raw lines may carry many events: paced by what they gave
        return None

    def _known_start(self, raw: bytes, caller: Caller, hint: str | None) -> bool:
        """Whether the ``run.start`` line ``raw`` names a run this process knows (active or ended; else False)."""
        try:
            obj, _ = decode(raw, self.max_line_bytes)
            run = obj.get("run", hint) if isinstance(obj, dict) else None
            return isinstance(run, str) and self.relay.monitor(caller.key(run)) is not None
        except IngestError:
            return False

    def _line(
        self, raw: bytes, caller: Caller, hint: str | None, started: set[str], traced: IngestTrace | None = None
    ) -> tuple[Any, str | None]:
        """One line decoded, its run as the core's key (its text kept when unchanged), a run it starts counted (and
        given the request's trace context when it names none: ``traced``).

        Raises:
            IngestError: not JSON, a bad run id, or a run past the client's runs per request (429).
        """
        obj, text = decode(raw, self.max_line_bytes)
        keyed = caller.rewrite(obj, hint)
        if isinstance(keyed, dict) and keyed.get("kind") == "run.start":
            key = keyed.get("run", hint)
            if isinstance(key, str) and key not in started:
                limits = caller.limits
                if len(started) >= limits.max_runs_per_request:
                    raise IngestError(
                        f"this request already started {len(started)} runs, the most one request may "
                        f"({limits.setting('max_runs_per_request')} = {limits.max_runs_per_request}): "
                        "start the others in another request",
                        status=429,
                    )
                started.add(key)
            if traced is not None and (fields := traced.start_fields(keyed)):
                keyed = {**keyed, **fields}
        return keyed, (text if keyed is obj else None)

    async def run_events(self, request: Request) -> JSONResponse:
        return await self.ingest(request, request.path_params["run"])

    async def events(self, request: Request) -> JSONResponse:
        return await self.ingest(request, None)

    async def run_report(self, request: Request) -> JSONResponse:
        found = run_of(request, self.callers.authorize)
        if isinstance(found, JSONResponse):
            return found
        caller, key = found
        run = request.path_params["run"]
        try:
            asked = float(request.query_params.get("wait_s", "0"))
        except ValueError:
            asked = math.nan
        if asked != asked:  # not a number, or NaN (which min / max would take for 0)
            return JSONResponse({"error": "wait_s must be a number of seconds (0 to 600)"}, status_code=400)
        wait_s = min(600.0, max(0.0, asked))
        try:
            report = await self.relay.wait_done(key, wait_s) if wait_s else await self.relay.report(key)
        except IngestError as exc:  # replicas: the run's partition is moving (503, ask again)
            headers = {"Retry-After": "1"} if exc.status == 503 else None
            return JSONResponse({"error": caller.public(str(exc))}, status_code=exc.status, headers=headers)
        if report is None:
            return JSONResponse({"error": f"unknown run {run!r}"}, status_code=404)
        answer = {**report.model_dump(mode="json"), "run": run}
        sampled = getattr(self.relay, "audits", None)  # the sampled background audit (core/run/audit_sampler.py)
        if sampled is not None and (audited := sampled.result(key)) is not None:
            answer["audit"] = audited.public(run)
        if self.corrections is not None and report.done:
            try:
                made = await self.corrections.list(key)
            except CorrectionError as exc:  # replicas: the run's partition moved meanwhile (503, ask again)
                headers = {"Retry-After": "1"} if exc.status == 503 else None
                return JSONResponse({"error": caller.public(str(exc))}, status_code=exc.status, headers=headers)
            if made:
                answer["corrections"] = [record.summary() for record in made]
        return JSONResponse(answer)

    watch_url: WatchUrl | None = None
    corrections: CorrectionService | None = None
    """Corrections of ended runs: a run's report lists its own (``corrections``: what each changed per message)."""

    async def watch(self, request: Request) -> JSONResponse:
        """The link to watch a run live (module docstring): ``{"url", "token", "started"}``, also for a run that
        has not started yet (its page waits for it); 404 when this sidecar serves no live page."""
        found = run_of(request, self.callers.authorize)
        if isinstance(found, JSONResponse):
            return found
        _, key = found
        if self.watch_url is None:
            return JSONResponse({"error": "this sidecar serves no live run page"}, status_code=404)
        stop = request.query_params.get("stop", "").lower() in ("1", "true", "yes")  # adapters/web/tokens.py
        viewer = request.query_params.get("as")
        if viewer is not None and APPROVER_ID.fullmatch(viewer) is None:
            return JSONResponse(
                {"error": "as must name the page's viewer like 'web:user:alice': 1-200 letters, digits or :_.@#+-"},
                status_code=400,
            )
        url = self.watch_url(key, stop=stop, viewer=viewer)
        if url.startswith("/"):
            url = str(request.base_url).rstrip("/") + url
        started = self.relay.monitor(key) is not None
        return JSONResponse({"url": url, "token": url.rsplit("token=", 1)[-1], "started": started})

    async def runs(self, request: Request) -> JSONResponse:
        """The caller's active runs (module docstring), each with ``watch``: its live page's path with its read
        token (null when this sidecar serves no live page)."""
        caller = self.callers.authorize(request)
        if isinstance(caller, JSONResponse):
            return caller
        everywhere = request.query_params.get("all", "").lower() in ("1", "true", "yes")
        listing = await self.relay.runs(everywhere=everywhere, bearer=request.headers.get("authorization", ""))
        rows = []
        for row in sorted(listing.runs, key=lambda row: (row.started_at is None, row.started_at or 0.0, row.run)):
            if not caller.owns(row.run):
                continue
            if row.watch is None and self.watch_url is not None:
                row = row.model_copy(update={"watch": self.watch_url(row.run)})
            rows.append(caller.unit(row.model_dump(mode="json", exclude_unset=True)))
        unreachable = [lost.model_dump(mode="json") for lost in listing.unreachable]
        return JSONResponse({"runs": rows, "unreachable": unreachable})


def create_app(
    relay: RunRelay,
    *,
    token: str | None = None,
    clients: Callers | Sequence[tuple[ClientLimits, str]] | None = None,
    max_body_bytes: int = 16 * 1024 * 1024,
    max_line_bytes: int = 1024 * 1024,
    keepalive_s: float = 15.0,
    watch_url: WatchUrl | None = None,
    extra_routes: Sequence[BaseRoute] = (),
    observer: IngestObserver | None = None,
    pressure: Pressure | None = None,
    desk: Desk | None = None,
    corrections: CorrectionService | None = None,
) -> Starlette:
    """The ingest ASGI app for ``relay``.

    Args:
        relay: where events go.
        token: the one bearer token of the default client (when ``clients`` is not given).
        clients: the clients that may call, with their tokens and limits (compared in constant time; never
            logged).
        max_body_bytes: the largest request body (413 past it).
        max_line_bytes: the largest NDJSON line (413 past it).
        keepalive_s: seconds of silence after which a pipeline stream gets a keepalive.
        watch_url: the link to a run's live page (with its read token), for ``GET /v1/runs/{run}/watch``.
        extra_routes: more routes served by the same app (the web channel's page and stream, the probes).
        observer: told what became of every ingest request (the service's metrics).
        pressure: past capacity, ingest pushes back (503 with ``Retry-After``: :mod:`adapters.ingest_http.push_back`);
            None: never.
        desk: the desk of what ended runs did not deliver (``/v1/deliveries``: :mod:`adapters.ingest_http.deliveries`);
            None: those routes answer 404 saying the desk is not served here.
        corrections: corrections and retractions of ended runs (``/v1/runs/{run}/corrections``:
            :mod:`adapters.ingest_http.corrections`); None: those routes answer 501 saying they are not served here.

    Raises:
        ValueError: neither a token nor clients, or clients without tokens of their own.
    """
    callers = as_callers(token, clients)
    handlers = _Ingest(relay, callers, max_body_bytes, max_line_bytes)
    handlers.watch_url = watch_url
    handlers.observer = observer
    handlers.pressure = pressure
    handlers.corrections = corrections
    pipeline = PipelineRoutes(relay, callers.authorize, keepalive_s=keepalive_s)
    approvals = ApprovalRoutes(relay, callers.authorize)
    app = IngestApp(  # POST /v1/runs/{run}/events takes a lean path past Starlette's layers (lean.py)
        exception_handlers={404: _not_found, 405: _not_allowed},
        routes=[
            Route("/v1/runs/{run}/events", handlers.run_events, methods=["POST"]),
            Route("/v1/events", handlers.events, methods=["POST"]),
            Route("/v1/runs", handlers.runs, methods=["GET"]),
            Route("/v1/runs/{run}", handlers.run_report, methods=["GET"]),
            Route("/v1/runs/{run}/pipeline", pipeline.units, methods=["GET"]),
            Route("/v1/runs/{run}/pipeline/stream", pipeline.stream, methods=["GET"]),
            Route("/v1/runs/{run}/gate", pipeline.gate, methods=["POST"]),
            Route("/v1/runs/{run}/stop", StopRoutes(relay, callers.authorize).stop, methods=["POST"]),
            Route("/v1/runs/{run}/approvals/{id}", approvals.decide, methods=["POST"]),
            Route("/v1/runs/{run}/approvals/{id}", approvals.show, methods=["GET"]),
            Route("/v1/runs/{run}/watch", handlers.watch, methods=["GET"]),
            *RecordRoutes(relay, callers).routes(),
            *(DeskRoutes(desk, callers).routes() if desk is not None else [no_desk_route()]),
            *(CorrectionRoutes(corrections, callers).routes() if corrections is not None else no_corrections_routes()),
            *extra_routes,
        ],
    )
    app.router.redirect_slashes = False  # an empty run id is a JSON 404, not a redirect to the listing
    return app


ROUTES_HINT = (
    "the API is under /v1 (POST /v1/runs/{run}/events, GET /v1/runs/{run}, GET /v1/runs); probes: /healthz, /readyz, "
    "/metrics; the docs: docs/ingest.md in the source"
)
"""What a request for no route is told (``GET /`` included: someone looking at the sidecar for the first time)."""


async def _not_found(request: Request, exc: Exception) -> JSONResponse:
    """No route: a JSON answer like every other, saying where the routes are; under ``/v1/runs/`` the likely cause
    (a run id with ``/`` or an empty one matches no route)."""
    path = request.url.path
    why = " (run ids hold no '/')" if path.startswith("/v1/runs/") else f": {ROUTES_HINT}"
    return JSONResponse({"error": f"no such route: {request.method} {path[:200]}{why}"}, 404)


async def _not_allowed(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"error": f"{request.method} is not allowed on {request.url.path[:200]}"}, 405)


def as_callers(token: str | None, clients: Callers | Sequence[tuple[ClientLimits, str]] | None) -> Callers:
    """The callers of an app: ``clients`` as given, else the default client holding ``token``.

    Raises:
        ValueError: neither is given, or a token is empty or shared.
    """
    if isinstance(clients, Callers):
        return clients
    if clients is not None:
        return Callers(clients)
    if not token:
        raise ValueError("a bearer token (or clients with tokens) is needed")
    return Callers([(ClientLimits(), token)])
