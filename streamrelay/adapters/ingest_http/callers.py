"""Who is calling: a bearer token names a client (:mod:`core.ingest.clients`), and a client's run ids become the core's
run keys on the way in and run ids again on the way out.

``Authorization: Bearer <token>``: the scheme in any case (RFC 7235 §2.1: "case-insensitive",
https://www.rfc-editor.org/rfc/rfc7235#section-2.1), the token compared with every client's in constant time
(``hmac.compare_digest``, no early exit), so neither the answer's timing nor its text says which part was wrong or
which clients exist. A client sees only its own runs: another client's run answers exactly as a run that does not
exist, because its id names another key (``core.ingest.clients.run_key``).

Each client's ``events_per_s`` is paced here, at the edge, with aiolimiter's leaky bucket (acquire-or-wait: a
request sending faster than its client's rate is read more slowly, nothing is refused:
https://aiolimiter.readthedocs.io/).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Sequence
from typing import Any

from aiolimiter import AsyncLimiter
from starlette.requests import Request
from starlette.responses import JSONResponse

from streamrelay.core.errors import IngestError
from streamrelay.core.ingest.clients import KEY_SEPARATOR, ClientLimits, run_id_problem, run_key, split_key
from streamrelay.core.json_types import JsonObject


class Caller:
    """One authenticated client: its limits, its pace, and the mapping of its run ids to run keys."""

    def __init__(self, limits: ClientLimits) -> None:
        self.limits = limits
        self.name = limits.name
        self._limiter = AsyncLimiter(max(1.0, limits.events_per_s), 1.0)
        self._prefix = run_key(self.name, "")  # "" for the default client

    def __repr__(self) -> str:
        return f"Caller({self.name!r})"

    def key(self, run: str) -> str:
        """The core's key of this client's run ``run``.

        Raises:
            IngestError: 400, ``run`` is not a valid run id (:data:`core.ingest.clients.RUN_ID_PATTERN`).
        """
        if (problem := run_id_problem(run)) is not None:
            raise IngestError(f"{problem}; got {run!r}"[:300])
        return run_key(self.name, run)

    def owns(self, key: str) -> bool:
        """True when the run keyed ``key`` is this client's."""
        return split_key(key)[0] == self.name

    def run_id(self, key: str) -> str:
        """The run id this client knows for ``key`` (one of its keys)."""
        return split_key(key)[1]

    def public(self, text: str) -> str:
        """``text`` (an error from the core) with this client's run keys shown as its run ids."""
        if not self._prefix:
            return text
        return text.replace(f"'{self._prefix}", "'").replace(f'"{self._prefix}', '"')

    def unit(self, unit: JsonObject) -> JsonObject:
        """A pipeline unit (or any answer with a ``run`` key) as this client sees it."""
        run = unit.get("run")
        if isinstance(run, str) and self._prefix and run.startswith(self._prefix):
            return {**unit, "run": run[len(self._prefix) :]}
        return unit

    async def pace(self, events: int) -> None:
        """Wait until this client may send ``events`` more events (its ``events_per_s``)."""
        capacity = int(self._limiter.max_rate)
        while events > 0:
            step = min(events, capacity)
            await self._limiter.acquire(step)
            events -= step

    def rewrite(self, obj: Any, run_hint: str | None) -> Any:
        """One decoded line with its ``run`` as the core's key (other values as they are; the core judges them).

        Raises:
            IngestError: the line's ``run`` is not a valid run id.
        """
        if isinstance(obj, dict) and "run" in obj:
            run = obj["run"]
            if (problem := run_id_problem(run)) is not None:
                raise IngestError(problem)
            if self._prefix:
                return {**obj, "run": self._prefix + run}
        return obj


def run_of(
    request: Request, authorize: Callable[[Request], Caller | JSONResponse]
) -> tuple[Caller, str] | JSONResponse:
    """The caller and the core's run key a run-scoped request (``/v1/runs/{run}/...``) is about: its ``run`` path
    parameter, client-prefixed (:meth:`Caller.key`). Else the answer to give: ``authorize``'s 401, or a 404 for a run
    id that is not valid (it names no run, as another client's run names none)."""
    caller = authorize(request)
    if isinstance(caller, JSONResponse):
        return caller
    run = request.path_params["run"]
    try:
        return caller, caller.key(run)
    except IngestError:
        return JSONResponse({"error": f"unknown run {run!r}"}, status_code=404)


class Callers:
    """The clients that may call, by bearer token.

    Args:
        clients: each client's limits and bearer token (never shown: not in the repr, not in any answer).

    Raises:
        ValueError: no client, an empty token, or two clients with one token.
    """

    def __init__(self, clients: Sequence[tuple[ClientLimits, str]]) -> None:
        if not clients:
            raise ValueError("at least one client (a bearer token) is needed")
        tokens = [token for _, token in clients]
        if any(not token for token in tokens) or len(set(tokens)) != len(tokens):
            raise ValueError("every client needs a token of its own (empty or shared tokens)")
        self._clients = [(f"Bearer {token}".encode(), Caller(limits)) for limits, token in clients]
        self.secret = "\x00".join(tokens)
        """Every token joined: the key the run pages' read tokens are derived from (adapters/web/tokens.py)."""

    def __repr__(self) -> str:
        return f"Callers({[caller.name for _, caller in self._clients]!r})"

    def identify(self, header: str) -> Caller | None:
        """The client whose token ``header`` (an ``Authorization`` value) carries, or None."""
        scheme, _, credentials = header.strip().partition(" ")
        got = b"Bearer " + credentials.strip().encode("utf-8", "replace")
        if scheme.lower() != "bearer":
            got = b""
        found: Caller | None = None
        for expected, caller in self._clients:  # every client compared: no early exit
            if hmac.compare_digest(got, expected) and found is None:
                found = caller
        return found

    def authorize(self, request: Request) -> Caller | JSONResponse:
        """The calling client, or the 401 answer for a missing or wrong token."""
        header = request.headers.get("authorization", "")
        caller = self.identify(header)
        if caller is not None:
            return caller
        problem = "missing Authorization header" if not header else "wrong bearer token"
        return JSONResponse(
            {"error": f"{problem}: send 'Authorization: Bearer <token>' with your client's token"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    def key_of(self, header: str, run: str) -> str | None:
        """The run key a request with ``header`` means by ``run`` (None: no client, or not a valid run id)."""
        caller = self.identify(header)
        if caller is None or run_id_problem(run) is not None:
            return None
        return caller.key(run)


__all__ = ["KEY_SEPARATOR", "Caller", "Callers", "run_of"]
