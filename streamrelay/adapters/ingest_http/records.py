"""What the sidecar keeps of a run, over HTTP: its audit against the platform, and its erasure.

Routes (``Authorization: Bearer <token>``; a client reaches its own runs only: another client's run answers 404, as
with every run route):

- ``GET /v1/runs/{run}/audit``: re-read each message the run delivered from the platform and say what it shows now
  (:mod:`core.run.audit`): 200 ``{"run", "channel", "platform", "readable", "note", "messages": [{"slot", "role",
  "message_id", "verdict", "detail"}], "drift"}``; 404 for a run the ledger does not know; 501 when this sidecar
  cannot audit (a replica's front: ask the run's owner).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from streamrelay.adapters.ingest_http.callers import Callers, run_of
from streamrelay.core.run.audit import AuditError


class RecordRoutes:
    """The audit (and erasure) routes of one relay (module docstring).

    Args:
        relay: the relay; audited when it has ``audit(run)`` (:meth:`core.run.relay.Relay.audit`).
        callers: who may call.
    """

    def __init__(self, relay: Any, callers: Callers) -> None:
        self.relay = relay
        self.callers = callers

    def routes(self) -> list[BaseRoute]:
        """The routes, for :func:`adapters.ingest_http.app.create_app`."""
        return [Route("/v1/runs/{run}/audit", self.audit, methods=["GET"])]

    async def audit(self, request: Request) -> JSONResponse:
        found = run_of(request, self.callers.authorize)
        if isinstance(found, JSONResponse):
            return found
        _, key = found
        run = request.path_params["run"]
        audit = getattr(self.relay, "audit", None)
        if audit is None:
            return JSONResponse({"error": "this sidecar cannot audit runs: ask the run's owner"}, status_code=501)
        try:
            report = await audit(key)
        except AuditError:
            return JSONResponse({"error": f"unknown run {run!r}"}, status_code=404)
        return JSONResponse(report.public(run))
