"""Probes and metrics over HTTP: ``/healthz``, ``/readyz``, ``/metrics``, and the gate that holds ingest while the
service is not taking input yet.

- ``GET /healthz``: liveness. 200 ``{"ok": true}`` whenever the event loop answers, in every state (a process
  resuming its journal or draining is alive: restarting it would only delay it). It answers anyone, so it tells
  nothing more: the state is ``/readyz``'s, the counts are ``/metrics``'s.
- ``GET /readyz``: readiness. 200 ``{"ready": true, "state": "ready"}`` when the service takes runs
  and a cheap read of the journal and ledger (the SQLite file) answers within :data:`CHECK_TIMEOUT_S`; else 503
  ``{"ready": false, "state", "reason"}``: ``starting``, ``resuming`` (the journal's unfinished runs are being
  rebuilt after a restart), ``draining`` / ``stopping`` (a SIGTERM arrived), or the store check failed. Never
  depends on a chat platform: a platform outage is the core's to ride out (retries, settling), not a reason to
  take the sidecar out of service.
- ``GET /metrics``: the service's metrics in Prometheus's text format. With a metrics token configured, only to
  ``Authorization: Bearer <metrics token>`` (401 otherwise); without one, only to loopback clients (403
  otherwise). It carries counts only: no run id, chat id or text.

:class:`IngestGate` answers 503 (``Retry-After: 1``) to every other route while the service is ``starting`` or
``resuming`` (``serve`` loading its channels' SDKs, or replaying its journal), so no ingest request races them. The
answer carries ``"accepted": 0, "pushed_back_from": 1`` like a push-back past capacity: a client sends the whole
request again after ``Retry-After``, as after any 503.
"""

from __future__ import annotations

import asyncio
import enum
import hmac
import ipaddress
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from streamrelay.adapters.ops.metrics import ServiceMetrics

CHECK_TIMEOUT_S = 2.0
"""How long the readiness read of the store may take before the service counts as not ready."""

PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
"""Routes answered in every state (never held by :class:`IngestGate`)."""


class ServiceState(enum.StrEnum):
    """Where the service is in its life."""

    STARTING = "starting"
    RESUMING = "resuming"
    """Rebuilding the journal's unfinished runs (after a restart); ingest is held."""
    READY = "ready"
    DRAINING = "draining"
    """A stop was asked: active runs finish (ingest still takes their lines), then the service stops."""
    STOPPING = "stopping"


_REASONS = {
    ServiceState.STARTING: "starting up",
    ServiceState.RESUMING: "resuming the journal's unfinished runs",
    ServiceState.DRAINING: "draining: a stop was asked, active runs are finishing",
    ServiceState.STOPPING: "stopping",
}


class Health:
    """The service's state and the readiness check of its store.

    Args:
        check: a cheap read of the journal and ledger; raises when they cannot be read (None: nothing to check).
        active_runs: how many runs the service holds (for the metrics; never in a probe's answer).
        state: the initial state (a service that has nothing to resume starts ``ready``).
        check_timeout_s: how long ``check`` may take.
    """

    def __init__(
        self,
        check: Callable[[], Awaitable[None]] | None = None,
        *,
        active_runs: Callable[[], int] = lambda: 0,
        state: ServiceState = ServiceState.READY,
        check_timeout_s: float = CHECK_TIMEOUT_S,
    ) -> None:
        self._check = check
        self.active_runs = active_runs
        self.state = state
        self.detail = ""
        self.check_timeout_s = check_timeout_s

    def __repr__(self) -> str:
        return f"Health(state={self.state!s})"

    def set(self, state: ServiceState, detail: str = "") -> None:
        """Move to ``state``; ``detail`` adds to the reason a probe gives (e.g. how many runs resume)."""
        self.state, self.detail = state, detail

    @property
    def accepting(self) -> bool:
        """True when ingest is open (``ready``, ``draining``, ``stopping``: uvicorn refuses new connections then)."""
        return self.state not in (ServiceState.STARTING, ServiceState.RESUMING)

    def reason(self) -> str:
        """Why the service is not ready (empty when it is, as far as its state goes)."""
        base = _REASONS.get(self.state, "")
        return f"{base} ({self.detail})" if base and self.detail else base

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        """``(ready, answer)``: the state, then the store read (see the module docstring)."""
        body: dict[str, Any] = {"state": str(self.state)}
        if self.state is not ServiceState.READY:
            return False, {"ready": False, **body, "reason": self.reason()}
        if self._check is not None:
            try:
                await asyncio.wait_for(self._check(), self.check_timeout_s)
            except TimeoutError:
                reason = f"the journal and ledger did not answer within {self.check_timeout_s:g} s"
                return False, {"ready": False, **body, "reason": reason}
            except Exception as exc:
                reason = f"the journal and ledger cannot be read ({type(exc).__name__}: {exc})"
                return False, {"ready": False, **body, "reason": reason}
        return True, {"ready": True, **body}


def _loopback(host: str | None) -> bool:
    if host is None:
        return False
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class _Probes:
    def __init__(self, health: Health, metrics: ServiceMetrics | None, metrics_token: str | None) -> None:
        self.health = health
        self.metrics = metrics
        self._expected = f"Bearer {metrics_token}".encode() if metrics_token else None

    def __repr__(self) -> str:
        return f"_Probes({self.health!r})"  # never the token

    async def healthz(self, request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    async def readyz(self, request: Request) -> JSONResponse:
        ready, body = await self.health.readiness()
        return JSONResponse(body, status_code=200 if ready else 503)

    def _denied(self, request: Request) -> JSONResponse | None:
        if self._expected is not None:
            got = request.headers.get("authorization", "").encode()
            if hmac.compare_digest(got, self._expected):
                return None
            return JSONResponse(
                {"error": "send 'Authorization: Bearer <metrics token>' (the variable metrics_token_env names)"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        if _loopback(request.client.host if request.client else None):
            return None
        error = "/metrics answers loopback clients only: set a metrics token (metrics_token_env) to scrape from afar"
        return JSONResponse({"error": error}, status_code=403)

    async def metrics_page(self, request: Request) -> Response:
        if (denied := self._denied(request)) is not None:
            return denied
        if self.metrics is None:
            return JSONResponse({"error": "this service keeps no metrics"}, status_code=404)
        body, content_type = self.metrics.exposition_for(request.headers.get("accept", ""))
        return Response(body, headers={"Content-Type": content_type})


def probe_routes(
    health: Health, metrics: ServiceMetrics | None = None, *, metrics_token: str | None = None
) -> Sequence[BaseRoute]:
    """The routes ``/healthz``, ``/readyz`` and ``/metrics``.

    Args:
        health: the service's state and store check.
        metrics: the service's metrics (None: ``/metrics`` answers 404).
        metrics_token: the bearer token ``/metrics`` wants; None: loopback clients only.
    """
    probes = _Probes(health, metrics, metrics_token)
    return [
        Route("/healthz", probes.healthz, methods=["GET"]),
        Route("/readyz", probes.readyz, methods=["GET"]),
        Route("/metrics", probes.metrics_page, methods=["GET"]),
    ]


class IngestGate:
    """ASGI middleware: 503 to every route but the probes while ``health`` is not accepting (starting, resuming).

    Args:
        app: the ASGI app to guard.
        health: the service's state.
        open_paths: more paths answered in every state (WhatsApp's status webhook: it only records receipts, whose
            store is open before the listener, and a create being settled while the service resumes waits for them).
    """

    def __init__(self, app: ASGIApp, health: Health, open_paths: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.health = health
        self.open_paths = PROBE_PATHS | open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.health.accepting and scope["path"] not in self.open_paths:
            error = f"the sidecar is {self.health.reason()}: send again in a moment"
            # Nothing was taken: the push-back answer's fields say so, and a client that honours them
            # (app.client.RelayClient) sends the whole request again after Retry-After.
            body = {"error": error, "state": str(self.health.state), "accepted": 0, "pushed_back_from": 1}
            await JSONResponse(body, status_code=503, headers={"Retry-After": "1"})(scope, receive, send)
            return
        await self.app(scope, receive, send)
