"""What the sidecar keeps of a run, over HTTP: its delivery timeline, its audit against the platform, and its erasure.

Routes (``Authorization: Bearer <token>``; a client reaches its own runs only: another client's run answers 404, as
with every run route):

- ``GET /v1/runs/{run}/timeline``: the run's delivery timeline (:mod:`core.run.timeline`): 200 ``{"run", "entries":
  [{"type": "opened" | "resumed" | "taken" | "call" | "ended" | "stopped", "at", ...}], "left_out"}`` while the run is
  active here or one of the last finished ones kept in memory; 404 otherwise (finished long ago, before a restart).
  On Redis replicas the owner proxy forwards it to the run's partition owner, which keeps it.
- ``GET /v1/runs/{run}/audit``: re-read each message the run delivered from the platform and say what it shows now
  (:mod:`core.run.audit`): 200 ``{"run", "channel", "platform", "readable", "note", "messages": [{"slot", "role",
  "message_id", "verdict", "detail"}], "drift"}``; 404 for a run the ledger does not know. On Redis replicas the
  owner proxy forwards it to the run's partition owner (503 while the partition moves).
- ``DELETE /v1/runs/{run}``: erase the run's text from every store the sidecar keeps
  (:meth:`core.run.relay.Relay.erase`: memory, journal, ledger with its desk entries and corrections, the adapters'
  render caches): 200 ``{"run", "erased": true, "removed": {"memory", "journal", "ledger"}}``; 409 while the run is
  active (stop it first), 404 for a run no store knows (on Redis replicas it is forwarded to the run's partition
  owner, 503 while the partition moves). Idempotent: erasing
  again answers 200 with nothing removed.
- ``DELETE /v1/conversations/{channel}/{chat_id}``: erase every run of the caller on that channel to that chat (its
  target's ``chat_id``, compared as text), in one pass: 200 ``{"channel", "chat_id", "runs": [run ids], "removed"}``
  (``runs`` empty when there is none); 409 when one of them is active (nothing erased). On Redis
  replicas it is forwarded to the owner of the conversation's partition.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from streamrelay.adapters.ingest_http.callers import Callers, run_of
from streamrelay.core.errors import IngestError
from streamrelay.core.ingest.surface import RunRelay
from streamrelay.core.run.audit import AuditError


class RecordRoutes:
    """The audit (and erasure) routes of one relay (module docstring).

    Args:
        relay: the relay (one process's, or a replica's front).
        callers: who may call.
    """

    def __init__(self, relay: RunRelay, callers: Callers) -> None:
        self.relay = relay
        self.callers = callers

    def routes(self) -> list[BaseRoute]:
        """The routes, for :func:`adapters.ingest_http.app.create_app`."""
        return [
            Route("/v1/runs/{run}/timeline", self.timeline, methods=["GET"]),
            Route("/v1/runs/{run}/audit", self.audit, methods=["GET"]),
            Route("/v1/runs/{run}", self.erase, methods=["DELETE"]),
            Route("/v1/conversations/{channel}/{chat_id}", self.erase_conversation, methods=["DELETE"]),
        ]

    async def timeline(self, request: Request) -> JSONResponse:
        found = run_of(request, self.callers.authorize)
        if isinstance(found, JSONResponse):
            return found
        _, key = found
        run = request.path_params["run"]
        timeline = self.relay.timeline(key)
        if timeline is None:
            return JSONResponse(
                {
                    "error": f"no timeline of run {run!r} here: it is kept while the run is active and for the last "
                    "finished runs (not across a restart)"
                },
                status_code=404,
            )
        return JSONResponse({"run": run, **timeline.public()})

    async def audit(self, request: Request) -> JSONResponse:
        found = run_of(request, self.callers.authorize)
        if isinstance(found, JSONResponse):
            return found
        caller, key = found
        run = request.path_params["run"]
        try:
            report = await self.relay.audit(key)
        except AuditError:
            return JSONResponse({"error": f"unknown run {run!r}"}, status_code=404)
        except IngestError as exc:  # a replica: the run's partition is moving (503)
            return JSONResponse({"error": caller.public(str(exc)).replace(key, run)}, status_code=exc.status)
        return JSONResponse(report.public(run))

    async def erase(self, request: Request) -> JSONResponse:
        found = run_of(request, self.callers.authorize)
        if isinstance(found, JSONResponse):
            return found
        caller, key = found
        run = request.path_params["run"]
        try:
            removed = await self.relay.erase(key)
        except IngestError as exc:
            message = f"unknown run {run!r}" if exc.status == 404 else caller.public(str(exc)).replace(key, run)
            return JSONResponse({"error": message}, status_code=exc.status)
        return JSONResponse({"run": run, "erased": True, "removed": removed})

    async def erase_conversation(self, request: Request) -> JSONResponse:
        caller = self.callers.authorize(request)
        if isinstance(caller, JSONResponse):
            return caller
        channel, chat_id = request.path_params["channel"], request.path_params["chat_id"]
        try:
            done = await self.relay.erase_conversation(channel, chat_id, caller.owns)
        except IngestError as exc:
            return JSONResponse({"error": caller.public(str(exc))}, status_code=exc.status)
        runs = [caller.run_id(key) for key in done["runs"]]
        return JSONResponse({"channel": channel, "chat_id": chat_id, "runs": runs, "removed": done["removed"]})
