"""The parent loop's side of the HTTP API: its run's pipeline lane, and the action gate.

Routes (``Authorization: Bearer <token>`` like ingest):

- ``GET /v1/runs/{run}/pipeline?after=N``: the units after position N so far, as JSON ``{"run", "units"}``.
- ``GET /v1/runs/{run}/pipeline/stream?after=N``: the units as they come, one JSON object per line
  (``application/x-ndjson``); with ``Accept: text/event-stream``, as Server-Sent Events (``id`` = the unit's
  ``index``, ``event`` = its ``kind``, ``data`` = the unit); a reconnecting EventSource's ``Last-Event-ID`` resumes
  after that unit. The stream ends after the ``run.end`` unit. Idle streams carry keepalives (an SSE comment,
  or an empty NDJSON line, every ``keepalive_s``). Only pipeline units are sent: never ui-lane text.
- ``POST /v1/runs/{run}/gate`` with ``{"id": "<tool call id>", "source": "<agent key>"?, "wait_s": N?}``:
  may that complete tool call run now? ``{"verdict": "run"|"wait"|"refuse", "reason", "class",
  "compensation", "unit"}`` (core/lanes/gate.py has the policy). 404 when no unit of that call is on the lane (after
  ``wait_s``), 409 when the id is ambiguous.

SSE framing: https://html.spec.whatwg.org/multipage/server-sent-events.html (sse-starlette writes it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from streamrelay.adapters.ingest_http.callers import Caller, run_of
from streamrelay.core.contracts.units import PipelineUnit
from streamrelay.core.errors import IngestError
from streamrelay.core.ingest.clients import run_id_problem
from streamrelay.core.ingest.surface import RunRelay
from streamrelay.core.lanes.pipeline import PipelineLane, strict_loads

STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
"""Headers that stop proxies from buffering a stream (nginx reads X-Accel-Buffering)."""
MAX_GATE_WAIT_S = 600.0


def _after(request: Request) -> int:
    """The position to resume after: the ``Last-Event-ID`` header (a reconnecting EventSource sends it, keeping
    the URL it first opened, ``?after`` included), else ``?after=N``, else 0."""
    raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    try:
        after = int(raw)
    except ValueError:
        raise IngestError(f"after / Last-Event-ID must be a unit index (an integer), got {raw!r}") from None
    if after < 0:
        raise IngestError("after / Last-Event-ID must not be negative")
    return after


def _wire(caller: Caller, unit: PipelineUnit) -> str:
    """One unit as its JSON text, as ``caller`` sees it (the lane holds it typed: it becomes JSON here, at the
    edge)."""
    return json.dumps(caller.unit(unit.model_dump(mode="json")), ensure_ascii=False)


class PipelineRoutes:
    """Handlers of the pipeline lane and the gate, bound to one relay.

    Args:
        relay: where the runs are.
        authorize: the calling client, or the 401 answer (the ingest's check).
        keepalive_s: seconds of silence after which an idle stream gets a keepalive.
    """

    def __init__(
        self, relay: RunRelay, authorize: Callable[[Request], Caller | JSONResponse], keepalive_s: float = 15.0
    ) -> None:
        self.relay = relay
        self._authorize = authorize
        self.keepalive_s = keepalive_s

    def _lane(self, caller: Caller, request: Request) -> PipelineLane:
        run = request.path_params["run"]
        lane = self.relay.lane(caller.key(run)) if run_id_problem(run) is None else None
        if lane is None:
            raise IngestError(f"unknown run {run!r}: send its run.start first", status=404)
        return lane

    def _read(self, request: Request) -> tuple[Caller, PipelineLane, int] | Response:
        """The caller, the lane and the position a read asks for, or the error answer (401, 404, 400)."""
        caller = self._authorize(request)
        if isinstance(caller, Response):
            return caller
        try:
            return caller, self._lane(caller, request), _after(request)
        except IngestError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)

    async def units(self, request: Request) -> Response:
        read = self._read(request)
        if isinstance(read, Response):
            return read
        caller, lane, after = read
        units = [caller.unit(unit.model_dump(mode="json")) for unit in lane.after(after)]
        return JSONResponse({"run": request.path_params["run"], "units": units, "ended": lane.closed})

    async def stream(self, request: Request) -> Response:
        read = self._read(request)
        if isinstance(read, Response):
            return read
        caller, lane, after = read
        if "text/event-stream" in request.headers.get("accept", ""):
            events = (
                ServerSentEvent(
                    json.dumps(caller.unit(u.model_dump(mode="json")), ensure_ascii=False),
                    id=str(u.index),
                    event=u.kind,
                )
                async for u in self._follow(lane, after)
                if u is not None
            )
            return EventSourceResponse(events, headers=STREAM_HEADERS, ping=self.keepalive_s)
        lines = (
            (
                json.dumps(caller.unit(u.model_dump(mode="json")), ensure_ascii=False) + "\n" if u is not None else "\n"
            ).encode()
            async for u in self._follow(lane, after)
        )
        return StreamingResponse(lines, media_type="application/x-ndjson", headers=STREAM_HEADERS)

    async def _follow(self, lane: PipelineLane, after: int) -> AsyncIterator[PipelineUnit | None]:
        """The lane's units after ``after`` as they come, until ``run.end``; None for a keepalive."""
        while True:
            try:
                units = await asyncio.wait_for(lane.wait(after), self.keepalive_s)
            except TimeoutError:
                yield None
                continue
            for unit in units:
                yield unit
            after += len(units)
            if lane.closed and after >= len(lane.units):
                return

    async def gate(self, request: Request) -> Response:
        found = run_of(request, self._authorize)
        if isinstance(found, Response):
            return found
        caller, key = found
        try:  # strictly, as every body (a key twice, NaN, nesting past MAX_JSON_DEPTH: a 400 saying so)
            body = strict_loads(await request.body())
        except (ValueError, UnicodeDecodeError) as exc:
            error = f'the body must be JSON: {{"id": "<tool call id>"}} ({exc})'
            return JSONResponse({"error": error}, status_code=400)
        call_id = body.get("id") if isinstance(body, dict) else None
        if not isinstance(body, dict) or not isinstance(call_id, str) or not call_id:
            return JSONResponse({"error": 'say which tool call: {"id": "<tool call id>"}'}, status_code=400)
        source = body.get("source")
        wait_s = body.get("wait_s", 0)
        if (
            (source is not None and not isinstance(source, str))
            or not isinstance(wait_s, int | float)
            or isinstance(wait_s, bool)
        ):
            return JSONResponse({"error": "source must be a string and wait_s a number of seconds"}, status_code=400)
        try:
            decision, unit = await self.relay.gate(
                key, call_id, source_key=source, wait_s=min(MAX_GATE_WAIT_S, max(0.0, float(wait_s)))
            )
        except IngestError as exc:
            return JSONResponse({"error": caller.public(str(exc))}, status_code=exc.status)
        shown = caller.unit(unit.model_dump(mode="json")) if unit is not None else None
        return JSONResponse({**decision.to_json(), "unit": shown})
