"""The approval routes: the bot that owns a platform's updates forwards an Approve or Deny press here
(:mod:`core.run.approvals`, docs/approvals.md).

``POST /v1/runs/{run}/approvals/{id}`` with ``Authorization: Bearer <ingest token>`` (like every ``/v1`` route) and
a JSON body ``{"decision": "approve" | "deny", "by": "telegram:user:123"}``. ``{run}`` is the run id or the 16 hex
of its buttons (``approve:<run16>:<id16>``), ``{id}`` the approval's id or its 16 hex, which is all a bot knows
when a person presses:

- 200 ``{"run", "id", "state": "decided", "decision": "approved" | "denied" | "expired", "approved", "by", "at",
  "expires_at"}``: decided now (a press after the expiry is answered with the expiry's decision);
- 400 a bad body (it says which field), 401 no or a wrong token, 404 an unknown run or approval;
- 403 ``{"error", "tell"}``: ``by`` may not decide; nothing changed; ``tell`` is what the bot shows the person
  (Telegram answerCallbackQuery ``text``, Slack/Discord an ephemeral reply);
- 409 ``{"error", "tell", "approval"}``: decided already (``approval`` the first decision), or the run ended first;
- 503 the journal could not be written (``Retry-After``): nothing was decided, press again.

``GET /v1/runs/{run}/approvals/{id}``: the approval of an open run, ``state`` ``pending`` or ``decided``.
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
from streamrelay.core.run.approvals import DecisionRefused, parse_decision_body

_log = logging.getLogger("streamrelay.ingest")


def _public(caller: Caller, key: str, run: str, exc: IngestError) -> str:
    """An error as the caller may see it: its own run id as it wrote it (``run``, maybe its buttons' 16 hex), and
    any other key of its own (the run the 16 hex named) as its run id, never client-prefixed."""
    return caller.public(str(exc).replace(repr(key), repr(run)))


class ApprovalRoutes:
    """The ingest-token approval routes, bound to one relay.

    Args:
        relay: where the runs are.
        authorize: the calling client, or the 401 answer (the ingest's check).
    """

    def __init__(self, relay: RunRelay, authorize: Callable[[Request], Caller | JSONResponse]) -> None:
        self.relay = relay
        self._authorize = authorize

    async def decide(self, request: Request) -> Response:
        """``POST /v1/runs/{run}/approvals/{id}`` (module docstring)."""
        found = run_of(request, self._authorize)
        if isinstance(found, Response):
            return found
        caller, key = found
        run, name = request.path_params["run"], request.path_params["id"]
        try:
            raw = await request.body()
            try:
                body = strict_loads(raw)
            except ValueError as exc:  # not JSON, a key twice, NaN, nested past MAX_JSON_DEPTH
                raise IngestError(
                    f'the body must be JSON: {{"decision": "approve", "by": "telegram:user:1"}} ({exc})'
                ) from None
            decision, by = parse_decision_body(body)
            answer = await self.relay.decide_approval(key, name, decision, by)
        except DecisionRefused as refused:
            body = {"error": refused.error, "tell": refused.tell}
            if refused.approval:
                body["approval"] = {**refused.approval, "run": run}
            return JSONResponse(body, refused.status)
        except IngestError as exc:
            return JSONResponse({"error": _public(caller, key, run, exc)}, exc.status)
        except Exception:  # the journal: nothing was decided
            _log.exception("run %s: approval %s could not be journaled", key, name)
            return JSONResponse(
                {"error": "the decision could not be recorded (the journal is not writable): press again"},
                503,
                headers={"Retry-After": "1"},
            )
        return JSONResponse({**answer, "run": run if answer["run"] == key else caller.run_id(answer["run"])})

    async def show(self, request: Request) -> Response:
        """``GET /v1/runs/{run}/approvals/{id}`` (module docstring)."""
        found = run_of(request, self._authorize)
        if isinstance(found, Response):
            return found
        caller, key = found
        run = request.path_params["run"]
        try:
            answer = self.relay.approval(key, request.path_params["id"])
        except IngestError as exc:
            return JSONResponse({"error": _public(caller, key, run, exc)}, exc.status)
        return JSONResponse({**answer, "run": run if answer["run"] == key else caller.run_id(answer["run"])})
