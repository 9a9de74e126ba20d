"""The desk over HTTP: the parts of ended runs not known to be delivered (:mod:`core.run.desk`).

Routes (``Authorization: Bearer <token>``; a client sees and acts on its own runs' entries only, as with runs):

- ``GET /v1/deliveries?state=uncertain,failed,unsent&limit=N``: ``{"deliveries": [entry, ...], "counts": {state: n}}``,
  oldest run end first. ``state`` is one state or several (comma separated, or repeated); ``all`` lists every state
  (``delivered`` and ``resolved`` too); the default is the open ones. ``counts`` counts the client's entries per
  state (every state). The shape of an entry: :mod:`core.records.desk`.
- ``GET /v1/deliveries/{id}``: one entry, with its ``text``.
- ``POST /v1/deliveries/{id}/resend``: deliver it once (settled with the platform first: never a second copy of what
  landed); 200 with the entry (``state`` ``delivered``, ``outcome`` what was done), 409 when it cannot be resent
  (closed; the platform cannot tell whether the first copy landed; nothing to resend), 503 when the platform did not
  do it (try again); each error ``{"error", "delivery"}`` with the entry as it now stands.
- ``POST /v1/deliveries/{id}/resolve`` with ``{"note": "..."}`` (optional): marked handled by hand.
- ``POST /v1/deliveries/prune`` with ``{"older_than_s": N}``: the entries of runs that ended more than N seconds ago
  deleted; ``{"pruned": n}``.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from streamrelay.adapters.ingest_http.callers import Caller, Callers
from streamrelay.core.lanes.pipeline import strict_loads
from streamrelay.core.records.desk import OPEN_STATES, DeskEntry, DeskState
from streamrelay.core.run.desk import Desk, DeskError

MAX_LIST = 1000
"""At most this many entries per listing (``limit`` is capped here)."""
MAX_NOTE_CHARS = 2000


class DeskRoutes:
    """The desk's request handlers (module docstring)."""

    def __init__(self, desk: Desk, callers: Callers) -> None:
        self.desk = desk
        self.callers = callers

    def routes(self) -> list[BaseRoute]:
        """The routes, for :func:`adapters.ingest_http.app.create_app`'s ``extra_routes``."""
        return [
            Route("/v1/deliveries", self.listing, methods=["GET"]),
            Route("/v1/deliveries/prune", self.prune, methods=["POST"]),
            Route("/v1/deliveries/{id}", self.show, methods=["GET"]),
            Route("/v1/deliveries/{id}/resend", self.resend, methods=["POST"]),
            Route("/v1/deliveries/{id}/resolve", self.resolve, methods=["POST"]),
        ]

    def _shown(self, entry: DeskEntry, *, text: bool = False) -> dict[str, Any]:
        return dict(entry.public(self.desk.now(), text=text))

    async def listing(self, request: Request) -> JSONResponse:
        caller = self.callers.authorize(request)
        if isinstance(caller, JSONResponse):
            return caller
        asked = [part.strip() for value in request.query_params.getlist("state") for part in value.split(",")]
        asked = [state for state in asked if state]
        states: set[DeskState] = set()
        for state in asked:
            if state == "all":
                states.update(DeskState)
                continue
            try:
                states.add(DeskState(state))
            except ValueError:
                known = ", ".join([*DeskState, "all"])
                return JSONResponse({"error": f"unknown state {state[:40]!r}: one of {known}"}, status_code=400)
        raw_limit = request.query_params.get("limit", str(MAX_LIST))
        if not raw_limit.isdigit() or int(raw_limit) < 1:
            return JSONResponse({"error": f"limit must be a whole number 1 to {MAX_LIST}"}, status_code=400)
        entries = await self.desk.list(states or OPEN_STATES, client=caller.name, limit=min(MAX_LIST, int(raw_limit)))
        counts = await self.desk.store.delivery_counts(client=caller.name)
        return JSONResponse(
            {
                "deliveries": [self._shown(entry) for entry in entries],
                "counts": {str(state): n for state, n in counts.items()},
            }
        )

    async def show(self, request: Request) -> JSONResponse:
        caller = self.callers.authorize(request)
        if isinstance(caller, JSONResponse):
            return caller
        try:
            entry = await self.desk.get(request.path_params["id"], client=caller.name)
        except DeskError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        return JSONResponse(self._shown(entry, text=True))

    async def resend(self, request: Request) -> JSONResponse:
        caller = self.callers.authorize(request)
        if isinstance(caller, JSONResponse):
            return caller
        entry_id = request.path_params["id"]
        try:
            entry = await self.desk.resend(entry_id, client=caller.name)
        except DeskError as exc:
            return await self._failed(caller, entry_id, exc)
        return JSONResponse(self._shown(entry))

    async def resolve(self, request: Request) -> JSONResponse:
        caller = self.callers.authorize(request)
        if isinstance(caller, JSONResponse):
            return caller
        body = await _body(request)
        if isinstance(body, JSONResponse):
            return body
        note = body.get("note", "resolved by hand")
        if not isinstance(note, str) or len(note) > MAX_NOTE_CHARS:
            return JSONResponse({"error": f"note must be a string of at most {MAX_NOTE_CHARS} characters"}, 400)
        entry_id = request.path_params["id"]
        try:
            entry = await self.desk.resolve(entry_id, note, client=caller.name)
        except DeskError as exc:
            return await self._failed(caller, entry_id, exc)
        return JSONResponse(self._shown(entry))

    async def prune(self, request: Request) -> JSONResponse:
        caller = self.callers.authorize(request)
        if isinstance(caller, JSONResponse):
            return caller
        body = await _body(request)
        if isinstance(body, JSONResponse):
            return body
        older = body.get("older_than_s")
        if isinstance(older, bool) or not isinstance(older, int | float) or not math.isfinite(older) or older < 0:
            return JSONResponse({"error": "older_than_s must be a number of seconds >= 0"}, status_code=400)
        pruned = await self.desk.prune(float(older), client=caller.name)
        return JSONResponse({"pruned": pruned})

    async def _failed(self, caller: Caller, entry_id: str, exc: DeskError) -> JSONResponse:
        answer: dict[str, Any] = {"error": str(exc)}
        if exc.status != 404:
            with contextlib.suppress(DeskError):
                answer["delivery"] = self._shown(await self.desk.get(entry_id, client=caller.name))
        return JSONResponse(answer, status_code=exc.status)


NO_DESK = (
    "this sidecar keeps no desk of undelivered parts (an app built without one; `streamrelay serve` keeps it, on "
    "SQLite and on Redis replicas): each run's report (GET /v1/runs/{run}) says what it did not deliver"
)


def no_desk_route() -> BaseRoute:
    """``/v1/deliveries...`` where no desk is served: a 404 that says so (not "no such route")."""

    async def none(_request: Request) -> JSONResponse:
        return JSONResponse({"error": NO_DESK}, status_code=404)

    return Route("/v1/deliveries{rest:path}", none, methods=["GET", "POST"])


async def _body(request: Request) -> dict[str, Any] | JSONResponse:
    """The request's JSON object body ({} when empty), or its 400."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = strict_loads(raw)
    except ValueError as exc:  # not JSON, a key twice, NaN, nested past MAX_JSON_DEPTH
        return JSONResponse({"error": f"the body must be a JSON object ({exc})"}, status_code=400)
    if not isinstance(body, dict):
        return JSONResponse({"error": "the body must be a JSON object"}, status_code=400)
    return body
