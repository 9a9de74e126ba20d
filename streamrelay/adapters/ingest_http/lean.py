"""The ingest app with a lean path for its busiest route: ``POST /v1/runs/{run}/events`` is handed to its handler
directly, without Starlette's middleware and router layers (each of which wraps the request and every message of the
answer in a closure of its own: about 20 µs of a 20-line request's ~300 µs on this service's path); every other
request goes through Starlette as before.

What the lean path keeps of the layers it skips, so an agent sees the same answers: the route's own match (its
compiled path pattern and converter: a run id holds no ``/``; the method ``POST``; no ``root_path``, else Starlette
decides), the scope's keys those layers set (``app``, ``router``, ``route``, ``endpoint``, ``path_params``), and the
server-error middleware's answer to an exception the handler raises before its answer started: the same ``500
Internal Server Error`` (Starlette's default: this app installs no 500 handler and runs without ``debug``), the
exception then raised again for the server to log. The exception middleware's handlers (``404`` and ``405``) answer
only an ``HTTPException``, which the ingest handler never raises: it answers every error itself. An app given more of
Starlette's layers (middleware, a body size limit, ``debug``, a 500 handler) takes them for every request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

RUN_EVENTS_PATH = "/v1/runs/{run}/events"
"""The route the lean path serves (the first of the app's routes)."""


class IngestApp(Starlette):
    """A Starlette app whose first route, ``POST`` :data:`RUN_EVENTS_PATH`, takes the lean path (module docstring).

    Args:
        kwargs: Starlette's; ``routes[0]`` must be the ``POST`` route of :data:`RUN_EVENTS_PATH` to an async handler.

    Raises:
        ValueError: the first route is not that one.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        route = self.router.routes[0] if self.router.routes else None
        if not isinstance(route, Route) or route.path != RUN_EVENTS_PATH or route.methods != {"POST"}:
            raise ValueError(f"the first route must be POST {RUN_EVENTS_PATH}")
        self._route = route
        self._handler: Callable[[Request], Awaitable[Response]] = route.endpoint
        self._pattern = route.path_regex
        self._run = route.param_convertors["run"]

    def _plain(self) -> bool:
        """Whether Starlette's layers are only those the lean path stands for: no middleware added, no body size limit
        of Starlette's own, no ``debug`` tracebacks, no handler of its own for a 500 (else every request takes them:
        read per request, as they may be changed after the app was made)."""
        handlers = self.exception_handlers
        return (
            not self.user_middleware
            and self.max_body_size is None
            and not self.debug
            and 500 not in handlers
            and Exception not in handlers
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path") or not self._plain():
            await super().__call__(scope, receive, send)
            return
        match = self._pattern.match(scope["path"])
        if match is None:
            await super().__call__(scope, receive, send)
            return
        route = self._route
        scope["app"] = self
        scope["router"] = self.router
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = {**scope.get("path_params", {}), "run": self._run.convert(match.group("run"))}
        started = False
        try:
            response = await self._handler(Request(scope, receive, send))
            started = True  # Response.__call__ sends the start first: what the middleware counts as started
            await response(scope, receive, send)
        except Exception:
            if not started:
                await PlainTextResponse("Internal Server Error", status_code=500)(scope, receive, send)
            raise
