"""The live page's routes parse their bodies strictly (core.lanes.pipeline.strict_loads), as ingest lines are: a key
twice is refused (``{"decision": "deny", "decision": "approve"}`` decided *approve*: a proxy or log reading the first
key saw another decision than the sidecar took), and a body nested past MAX_JSON_DEPTH is a 400, not a 500 with a
RecursionError traceback (4,000 ``[`` fit under the 4 KiB cap)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from streamrelay.adapters.web.approvals import decide_route
from streamrelay.adapters.web.stop import stop_route
from streamrelay.adapters.web.tokens import ReadTokens

TOKENS = ReadTokens("secret")
BODIES = [
    (b'{"decision": "deny", "decision": "approve", "viewer": "web:user:bob"}', "key 'decision' appears twice"),
    (b"[" * 2000 + b"]" * 2000, "nested too deeply"),  # valid JSON (unclosed, the reason depends on the stack)
    (b'{"decision": "approve", "viewer": "web:user:bob", "x": NaN}', "NaN is not JSON"),
]
"""Each body with what its 400 must say was wrong ("the body must be JSON" alone left a client guessing)."""


class _NoRelay:
    """The route must answer before it asks the relay anything."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the relay was asked {name!r} for a body that is not strict JSON")


async def _post(app: Starlette, path: str, token: str, body: bytes) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
        return await client.post(path, content=body, headers={"Authorization": f"Bearer {token}"})


@pytest.mark.parametrize(("body", "why"), BODIES)
async def test_a_live_decision_body_that_is_not_strict_json_is_a_400_saying_why(body: bytes, why: str) -> None:
    app = Starlette(routes=[decide_route(_NoRelay(), TOKENS)])
    answer = await _post(app, "/v1/runs/r1/live/approvals/a1", TOKENS.decide_token("r1", "web:user:bob"), body)
    assert answer.status_code == 400
    assert "JSON" in answer.json()["error"] and why in answer.json()["error"]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"reason": "a", "reason": "b"}', "key 'reason' appears twice"),
        (b"[" * 2000 + b"]" * 2000, "nested too deeply"),
        (b"[" * 100_000, "JSON"),  # unclosed: too deep or not JSON, as far as the parser gets (a 500 once)
    ],
)
async def test_a_live_stop_body_that_is_not_strict_json_is_a_400_saying_why(body: bytes, why: str) -> None:
    app = Starlette(routes=[stop_route(_NoRelay(), TOKENS)])
    answer = await _post(app, "/v1/runs/r1/live/stop", TOKENS.stop_token("r1"), body)
    assert answer.status_code == 400
    assert "JSON" in answer.json()["error"] and why in answer.json()["error"]
