"""Approvals on the live page: ``POST /v1/runs/{run}/live/approvals/{id}`` with the viewer's decide token.

Who decides on the web is explicit: a page decides only when its link was made for a person
(``GET /v1/runs/{run}/watch?as=web:user:alice`` gives ``&viewer=web:user:alice&decide=<token>``,
adapters/web/tokens.py), and then only as that person. The page sends ``Authorization: Bearer <decide token>`` (never
in a URL it requests) and the JSON body ``{"decision": "approve" | "deny", "viewer": "web:user:alice"}``; the token
must be that viewer's on that run. Whether the viewer may decide the approval is the approval's own rule, as for a
press forwarded by a bot (:func:`core.run.approvals.decide`): one of its ``approvers``, or anyone only where the
channel says ``approvals_anyone = true``. A read or stop token never decides.

Answers as ``POST /v1/runs/{run}/approvals/{id}`` (adapters/ingest_http/approvals.py): 200 the decided approval;
403 ``{"error", "tell"}`` the viewer may not decide it (nothing changed; the page shows ``tell``); 409 ``{"error",
"tell", "approval"}`` decided already (the first decision) or the run ended first; 400 a bad body; 404 an unknown
run or approval; 413 a body over 4,096 bytes (not read further); 503 the journal could not be written (press
again). 401 without a token, 403 ``{"error"}`` with a token that is not this viewer's decide token on this run (the
same for a run that does not exist).
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamrelay.adapters.capped_body import read_capped
from streamrelay.adapters.web.tokens import ReadTokens
from streamrelay.core.errors import IngestError
from streamrelay.core.events import APPROVER_ID
from streamrelay.core.ingest.surface import RunRelay
from streamrelay.core.lanes.pipeline import strict_loads
from streamrelay.core.run.approvals import DECISIONS, DecisionRefused

_log = logging.getLogger("streamrelay.web")

BODY_HINT = '{"decision": "approve" | "deny", "viewer": "web:user:alice"}'
MAX_BODY_BYTES = 4096
"""A decision's body is under 300 bytes (a viewer is at most 200 characters); past this: 413, the rest unread."""


class _Decide:
    def __init__(self, relay: RunRelay, tokens: ReadTokens) -> None:
        self.relay = relay
        self.tokens = tokens

    async def decide(self, request: Request) -> Response:
        run, name = request.path_params["run"], request.path_params["id"]
        auth = request.headers.get("authorization", "")
        token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        if not token:
            return JSONResponse({"error": "this viewer's decide token is needed: Authorization: Bearer <token>"}, 401)
        raw = await read_capped(request, MAX_BODY_BYTES)
        if raw is None:
            return JSONResponse({"error": f"the body is over {MAX_BODY_BYTES} bytes: send only {BODY_HINT}"}, 413)
        body = _body(raw)
        if isinstance(body, Response):
            return body
        decision, viewer = body
        if not self.tokens.allows_decide(run, viewer, token):
            error = f"this token does not let {viewer} decide approvals of this run (ask for a link made for them)"
            return JSONResponse({"error": error}, 403)
        try:
            answer = await self.relay.decide_approval(run, name, decision, viewer)
        except DecisionRefused as refused:
            out: dict[str, Any] = {"error": refused.error, "tell": refused.tell}
            if refused.approval:
                out["approval"] = refused.approval
            return JSONResponse(out, refused.status)
        except IngestError as exc:
            headers = {"Retry-After": "1"} if exc.status == 503 else None
            return JSONResponse({"error": str(exc)}, exc.status, headers=headers)
        except Exception:  # the journal could not be written: nothing was decided
            _log.exception("run %s: the live page's decision of approval %s could not be journaled", run, name)
            failed = {"error": "the decision could not be recorded (the journal is not writable): press again"}
            return JSONResponse(failed, 503, headers={"Retry-After": "1"})
        return JSONResponse(answer)


def _body(raw: bytes) -> tuple[str, str] | Response:
    """``(decision, viewer)`` of the body, or the 400 answer naming what is wrong."""
    try:
        body = strict_loads(raw)
    except ValueError as exc:  # not JSON, a key twice, NaN, nested past MAX_JSON_DEPTH
        return JSONResponse({"error": f"the body must be JSON: {BODY_HINT} ({exc})"}, 400)
    if not isinstance(body, dict) or set(body) - {"decision", "viewer"}:
        return JSONResponse({"error": f"the body takes only {BODY_HINT}"}, 400)
    decision, viewer = body.get("decision"), body.get("viewer")
    if decision not in DECISIONS:
        return JSONResponse({"error": f"decision must be 'approve' or 'deny', got {decision!r}"}, 400)
    if not isinstance(viewer, str) or APPROVER_ID.fullmatch(viewer) is None:
        error = "viewer must be the page's viewer as its link names it (viewer=…), like 'web:user:alice'"
        return JSONResponse({"error": error}, 400)
    return decision, viewer


def decide_route(relay: RunRelay, tokens: ReadTokens) -> Route:
    """``POST /v1/runs/{run}/live/approvals/{id}`` (module docstring) for ``relay``'s runs."""
    return Route("/v1/runs/{run:path}/live/approvals/{id}", _Decide(relay, tokens).decide, methods=["POST"])
