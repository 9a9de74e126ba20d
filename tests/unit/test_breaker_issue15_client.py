"""Breaker finding on the typed RelayClient (issue 15 part 4): its models forbid extra fields, so a sidecar one
version ahead (a new field in a unit or report, a new unit kind: 'stop' was one today) breaks every older client
with a pydantic ValidationError, not a RelayError, and the parent loop loses the run's units."""

from __future__ import annotations

import json

import httpx

from streamrelay.app.client import RelayClient

UNITS = [
    {"index": 1, "kind": "commit", "run": "r1", "source": None, "added_later": "a field a newer sidecar sends"},
    {"index": 2, "kind": "run.end", "run": "r1", "status": "ok", "committed": True, "source": None},
]


def _sidecar(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=json.dumps({"run": "r1", "units": UNITS, "ended": True}).encode())


async def test_a_field_a_newer_sidecar_adds_does_not_break_an_older_client() -> None:
    async with RelayClient("http://sidecar.test", "token") as relay:
        relay._http = httpx.AsyncClient(base_url="http://sidecar.test", transport=httpx.MockTransport(_sidecar))
        units = await relay.units("r1")
    assert [u.kind for u in units] == ["commit", "run.end"]
