"""The live page's Stop: ``POST /v1/runs/{run}/live/stop`` with the run's stop token (adapters/web/tokens.py).

The token goes in ``Authorization: Bearer <stop token>`` (the page sends it so: never in a URL it requests). The
body is optional JSON ``{"reason": "..."}``; the stop is recorded as ``by: "web"`` (the page knows no user).
Answers as ``POST /v1/runs/{run}/stop`` (adapters/ingest_http/stop.py): 200 ``{"run", "state", "by", "reason"}``
(again for a second stop), 409 for a run that ended otherwise, 404 for a run unknown here; 401 without a token,
403 with a wrong one (a read token is a wrong one: stopping is a separate permission). The run then ends
``cancelled`` like any stop (core/run/stop.py).
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamrelay.adapters.web.tokens import ReadTokens
from streamrelay.core.errors import IngestError
from streamrelay.core.ingest.surface import RunRelay
from streamrelay.core.lanes.pipeline import strict_loads
from streamrelay.core.run.stop import check_reason

_log = logging.getLogger("streamrelay.web")

WEB_STOPPER = "web"
"""The ``by`` of a stop made on the live page."""


class _Stop:
    def __init__(self, relay: RunRelay, tokens: ReadTokens) -> None:
        self.relay = relay
        self.tokens = tokens

    async def stop(self, request: Request) -> Response:
        run = request.path_params["run"]
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        if not token:
            return JSONResponse({"error": "this run's stop token is needed: Authorization: Bearer <token>"}, 401)
        if not self.tokens.allows_stop(run, token):
            return JSONResponse({"error": "this token does not allow stopping this run"}, 403)
        reason = await _reason(request)
        if isinstance(reason, Response):
            return reason
        try:
            state = await self.relay.stop(run, WEB_STOPPER, reason)
        except IngestError as exc:
            headers = {"Retry-After": "1"} if exc.status == 503 else None
            return JSONResponse({"error": str(exc)}, exc.status, headers=headers)
        except Exception:  # the journal could not be written: nothing was taken
            _log.exception("run %s: the live page's stop could not be journaled", run)
            error = {"error": "the stop could not be recorded: try again"}
            return JSONResponse(error, 503, headers={"Retry-After": "1"})
        return JSONResponse(state.to_json())


async def _reason(request: Request) -> str | Response | None:
    """The optional ``reason`` of the body, or the 400 answer."""
    raw = await request.body()
    if not raw.strip():
        return None
    try:
        body = strict_loads(raw)
    except ValueError as exc:  # not JSON, a key twice, NaN, nested past MAX_JSON_DEPTH
        return JSONResponse({"error": f'the body must be JSON: {{"reason": "..."}} (or empty) ({exc})'}, 400)
    if not isinstance(body, dict) or set(body) - {"reason"}:
        return JSONResponse({"error": 'the body takes only {"reason": "..."}'}, 400)
    try:
        return check_reason(body.get("reason"))
    except IngestError as exc:
        return JSONResponse({"error": str(exc)}, 400)


def stop_route(relay: RunRelay, tokens: ReadTokens) -> Route:
    """``POST /v1/runs/{run}/live/stop`` (module docstring) for ``relay``'s runs."""
    return Route("/v1/runs/{run:path}/live/stop", _Stop(relay, tokens).stop, methods=["POST"])
