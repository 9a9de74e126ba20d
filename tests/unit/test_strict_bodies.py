"""The live page's routes parse their bodies strictly (core.lanes.pipeline.strict_loads), as ingest lines are: a key
twice is refused (``{"decision": "deny", "decision": "approve"}`` decided *approve*: a proxy or log reading the first
key saw another decision than the sidecar took), and a body nested past MAX_JSON_DEPTH is a 400, not a 500 with a
RecursionError traceback (4,000 ``[`` fit under the 4 KiB cap)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

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


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"id": "c1", "id": "c2"}', "key 'id' appears twice"),  # decided c2 while a log of the first key read c1
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),  # was a 500 with a RecursionError traceback
        (b'{"id": "c1", "wait_s": NaN}', "NaN is not JSON"),
        (b'{"id": "c1", "wait_s": true}', "wait_s a number of seconds"),  # was a wait of 1 s
    ],
)
async def test_a_gate_body_that_is_not_strict_json_is_a_400_saying_why(body: bytes, why: str) -> None:
    """``POST /v1/runs/{run}/gate`` parsed its body with Starlette's ``request.json()`` (the breaker, on a real
    ``serve``): a key twice took the last, a deep body was a 500, a boolean ``wait_s`` was a number."""
    from streamrelay.adapters.ingest_http.callers import Caller
    from streamrelay.adapters.ingest_http.pipeline import PipelineRoutes
    from streamrelay.core.ingest.clients import ClientLimits

    routes = PipelineRoutes(_NoRelay(), lambda _request: Caller(ClientLimits()))
    app = Starlette(routes=[Route("/v1/runs/{run}/gate", routes.gate, methods=["POST"])])
    answer = await _post(app, "/v1/runs/r1/gate", "client-token", body)
    assert answer.status_code == 400
    assert why in answer.json()["error"]


async def test_a_signed_whatsapp_webhook_nested_too_deeply_is_a_400_not_a_500() -> None:
    """A signed body of 100,000 nested ``[`` was a 500 with a RecursionError traceback (the breaker, on a real serve):
    Meta would deliver it again for 7 days. Meta's payloads are never that deep; the answer is a 400 that says why."""
    from pydantic import SecretStr

    from streamrelay.adapters.whatsapp.webhook import WEBHOOK_PATH, WhatsAppWebhook, presses_of, signature
    from streamrelay.core.records.receipts import MemoryReceipts

    hook = WhatsAppWebhook(MemoryReceipts(), SecretStr("app-secret"))
    body = b"[" * 100_000 + b"]" * 100_000
    transport = httpx.ASGITransport(app=Starlette(routes=hook.routes()), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://sidecar") as client:
        answer = await client.post(
            WEBHOOK_PATH, content=body, headers={"X-Hub-Signature-256": signature("app-secret", body)}
        )
    assert answer.status_code == 400 and "nested too deeply" in answer.json()["error"]
    tap = {"type": "interactive", "interactive": {"button_reply": {"id": "approve:" + "a" * 16 + ":" + "b" * 16}}}
    payload = {"entry": [{"changes": [{"value": {"messages": [{**tap, "from": "\u0661\u0665\u0665\u0665"}]}}]}]}
    assert presses_of(payload) == []  # Arabic-Indic digits pass str.isdigit; a wa_id is ASCII digits
