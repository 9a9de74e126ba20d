"""Corrections and retractions of ended runs over HTTP (:mod:`core.run.corrections`, docs/corrections.md).

Routes (``Authorization: Bearer <token>``; a client corrects its own runs only: another client's run answers exactly
as a run that does not exist):

- ``POST /v1/runs/{run}/corrections`` with a ``run.correct`` (``{"kind": "run.correct", "id": "fix-1", "text":
  "..."}``) or a ``run.retract`` (``{"kind": "run.retract", "id": "retract-1", "reason": "..."}``) object (JSON
  Schema: docs/schema/correction.schema.json): applied before the answer, each message edited or deleted once.
  200 the correction (``state`` ``applied``, or ``partial`` when a step is uncertain or was refused with no
  follow-up: its steps say which); 503 with ``Retry-After`` and the correction when a step could not be done yet
  (an outage, 429s past the retries): send the same object again, done steps are not made again; 400 a bad body,
  404 an unknown run, 409 the run has not ended, shows no answer message, was retracted, or the id was taken by
  another correction.
- ``GET /v1/runs/{run}/corrections``: ``{"corrections": [correction, ...]}``, oldest first.
- ``GET /v1/runs/{run}/corrections/{id}``: one correction (404 unknown).

A correction's shape: :mod:`core.records.corrections`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from streamrelay.adapters.ingest_http.callers import Caller, Callers, run_of
from streamrelay.core.errors import IngestError, OwnershipLostError, StoreUnavailableError
from streamrelay.core.events import parse_correction
from streamrelay.core.lanes.pipeline import strict_loads
from streamrelay.core.records.corrections import CorrectionRecord, StepState
from streamrelay.core.run.corrections import CorrectionError, CorrectionService

MAX_BODY_BYTES = 1024 * 1024
"""The largest correction body (a new final of up to 200,000 characters fits)."""
RETRY_AFTER_S = 5
"""``Retry-After`` of the 503 when a step could not be done yet."""


class CorrectionRoutes:
    """The correction routes (module docstring), bound to one :class:`~core.run.corrections.CorrectionService`."""

    def __init__(self, corrections: CorrectionService, callers: Callers) -> None:
        self.corrections = corrections
        self.callers = callers

    def routes(self) -> list[BaseRoute]:
        """The routes, for :func:`adapters.ingest_http.app.create_app`."""
        return [
            Route("/v1/runs/{run}/corrections", self.submit, methods=["POST"]),
            Route("/v1/runs/{run}/corrections", self.listing, methods=["GET"]),
            Route("/v1/runs/{run}/corrections/{id}", self.show, methods=["GET"]),
        ]

    def _error(self, caller: Caller, key: str, run: str, exc: Exception, status: int) -> JSONResponse:
        headers = {"Retry-After": "1"} if status == 503 else None  # replicas: the run's partition is moving
        shown = caller.public(str(exc).replace(repr(key), repr(run)))
        return JSONResponse({"error": shown}, status_code=status, headers=headers)

    async def submit(self, request: Request) -> JSONResponse:
        """``POST /v1/runs/{run}/corrections`` (module docstring)."""
        found = run_of(request, self.callers.authorize)
        if isinstance(found, JSONResponse):
            return found
        caller, key = found
        run = request.path_params["run"]
        raw = await request.body()
        if len(raw) > MAX_BODY_BYTES:
            return JSONResponse({"error": f"the body is over {MAX_BODY_BYTES} bytes"}, status_code=413)
        try:
            try:
                body = strict_loads(raw)
            except ValueError as exc:  # not JSON, a key twice, NaN, nested past MAX_JSON_DEPTH
                raise IngestError(
                    'the body must be one JSON object: {"kind": "run.correct", "id": "fix-1", "text": "..."} or '
                    f'{{"kind": "run.retract", "id": "retract-1"}} ({exc})'
                ) from None
            asked = parse_correction(body)
            if asked.run is not None and asked.run != run:
                raise IngestError(f"the body names run {asked.run!r}, the path {run!r}: name one run (or none)")
        except IngestError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        try:
            record = await self.corrections.submit(key, asked)
        except CorrectionError as exc:
            return self._error(caller, key, run, exc, exc.status)
        except StoreUnavailableError as exc:
            return JSONResponse(
                {"error": f"the ledger could not be written ({exc}): send the same correction again"},
                status_code=503,
                headers={"Retry-After": "1"},
            )
        except OwnershipLostError:  # replicas: the run's partition went to another replica, which resumes it
            return JSONResponse(
                {
                    "error": "this run's partition moved to another replica while it applied the correction: send the "
                    "same correction again (its next owner finishes it; what was done is not done twice)"
                },
                status_code=503,
                headers={"Retry-After": "1"},
            )
        shown = _shown(record)
        if any(step.state in (StepState.FAILED, StepState.STARTED) for step in record.steps):
            return JSONResponse(
                {
                    "error": "some messages could not be changed yet (the steps say why): send the same correction "
                    "again; what was done is not done twice",
                    "correction": shown,
                },
                status_code=503,
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        return JSONResponse(shown)

    async def listing(self, request: Request) -> JSONResponse:
        """``GET /v1/runs/{run}/corrections``."""
        found = run_of(request, self.callers.authorize)
        if isinstance(found, JSONResponse):
            return found
        caller, key = found
        try:
            records = await self.corrections.list(key)
        except CorrectionError as exc:
            return self._error(caller, key, request.path_params["run"], exc, exc.status)
        return JSONResponse({"corrections": [_shown(r) for r in records]})

    async def show(self, request: Request) -> JSONResponse:
        """``GET /v1/runs/{run}/corrections/{id}``."""
        found = run_of(request, self.callers.authorize)
        if isinstance(found, JSONResponse):
            return found
        caller, key = found
        try:
            record = await self.corrections.get(key, request.path_params["id"])
        except CorrectionError as exc:
            return self._error(caller, key, request.path_params["run"], exc, exc.status)
        return JSONResponse(_shown(record))


def _shown(record: CorrectionRecord) -> dict[str, Any]:
    return dict(record.public())


NOT_SERVED = (
    "corrections are not served here: this sidecar was built without them (docs/corrections.md); `streamrelay "
    "serve` serves them, on SQLite and on Redis replicas"
)


def no_corrections_routes() -> list[BaseRoute]:
    """``/v1/runs/{run}/corrections...`` where corrections are not served: a 501 that says so."""

    async def none(_request: Request) -> JSONResponse:
        return JSONResponse({"error": NOT_SERVED}, status_code=501)

    return [
        Route("/v1/runs/{run}/corrections", none, methods=["GET", "POST"]),
        Route("/v1/runs/{run}/corrections/{id}", none, methods=["GET"]),
    ]
