"""The stop route: the bot that owns a platform's updates forwards a Stop click here (:mod:`core.run.stop`).

``POST /v1/runs/{run}/stop`` with ``Authorization: Bearer <ingest token>`` (like every ``/v1`` route) and an
optional JSON body ``{"by": "telegram:user:123", "reason": "pressed Stop"}``:

``{run}`` is the run id, or the 16 hex characters of the run's Stop control id (``callback_data`` ``stop:<16 hex>``:
:mod:`core.run.stop_controls`), which is all a bot knows of the run when a person clicks.

- 200 ``{"run", "state": "stopping" | "stopped", "by", "reason"}``: the run is ending ``cancelled`` (a second stop
  answers the same state, with the first stop's ``by`` and ``reason``);
- 400 a bad body (it says which field), 401 no or a wrong token, 404 an unknown run (or another client's);
- 409 the run already ended otherwise (``{"error": "run 'r1' already ended (not by a stop): ..."}``);
- 503 the journal could not be written (``Retry-After``): the run was not stopped, press again.

The live page stops with its own token instead (:mod:`adapters.web.stop`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from streamrelay.adapters.ingest_http.callers import Caller, run_of
from streamrelay.core.errors import IngestError
from streamrelay.core.ingest.surface import RunRelay
from streamrelay.core.lanes.pipeline import strict_loads
from streamrelay.core.run.stop import parse_stop_body

_log = logging.getLogger("streamrelay.ingest")


async def read_stop_body(request: Request) -> tuple[str | None, str | None]:
    """``by`` and ``reason`` from a stop request's optional JSON body.

    Raises:
        IngestError: 400, the body is not JSON or not a stop's shape.
    """
    raw = await request.body()
    if not raw.strip():
        return None, None
    try:
        body = strict_loads(raw)
    except ValueError as exc:  # not JSON, a key twice, NaN, nested past MAX_JSON_DEPTH
        raise IngestError(
            f'the body must be JSON: {{"by": "telegram:user:1", "reason": "..."}} (or empty) ({exc})'
        ) from None
    return parse_stop_body(body)


async def answer_stop(
    relay: RunRelay, key: str, shown_run: str, by: str | None, reason: str | None, run_id: Callable[[str], str]
) -> Response:
    """Stop run ``key`` and answer as the module docstring says (``shown_run``: the id the caller knows; ``run_id``
    the caller's id of another key: a Stop control's id names the run it stopped)."""
    try:
        state = await relay.stop(key, by, reason)
    except IngestError as exc:
        headers = {"Retry-After": "1"} if exc.status == 503 else None
        error = str(exc).replace(repr(key), repr(shown_run))  # the caller's own id, never the client-prefixed key
        return JSONResponse({"error": error}, exc.status, headers=headers)
    except Exception:  # the journal: nothing was taken
        _log.exception("run %s: the stop could not be journaled", key)
        return JSONResponse(
            {"error": "the stop could not be recorded (the journal is not writable): press again"},
            503,
            headers={"Retry-After": "1"},
        )
    return JSONResponse({**state.to_json(), "run": shown_run if state.run == key else run_id(state.run)})


class StopRoutes:
    """The ingest-token stop route, bound to one relay.

    Args:
        relay: where the runs are.
        authorize: the calling client, or the 401 answer (the ingest's check).
    """

    def __init__(self, relay: RunRelay, authorize: Callable[[Request], Caller | JSONResponse]) -> None:
        self.relay = relay
        self._authorize = authorize

    async def stop(self, request: Request) -> Response:
        """``POST /v1/runs/{run}/stop`` (module docstring)."""
        found = run_of(request, self._authorize)
        if isinstance(found, Response):
            return found
        caller, key = found
        run = request.path_params["run"]
        try:
            by, reason = await read_stop_body(request)
        except IngestError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        return await answer_stop(self.relay, key, run, by, reason, caller.run_id)
