"""The routes that read a body before they know who sent it stop reading at their limit (adapters/capped_body.py).

Each is called as ASGI with a body sent in 1 MiB pieces and no Content-Length (chunked): the route must answer 413
after reading a few pieces, not read all 64 MiB first (Starlette's ``request.body()`` did: a 500 MB body to the live
page's decision route held 1.1 GB of RSS in a real ``serve``).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from streamrelay.adapters.web.approvals import decide_route
from streamrelay.adapters.web.tokens import ReadTokens
from streamrelay.adapters.whatsapp.webhook import MAX_BODY_BYTES, WEBHOOK_PATH, WhatsAppWebhook
from streamrelay.core.records.receipts import MemoryReceipts

PIECE = b"{" * (1024 * 1024)
PIECES = 64


class _NoRelay:
    """The route must answer before it asks the relay anything."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the relay was asked {name!r} for an oversized body")


async def _post(routes: list[BaseRoute], path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, int, bytes]:
    """(status, pieces read, answer body) of a POST whose body is PIECES pieces of 1 MiB, chunked."""
    read = 0
    answer: dict[str, Any] = {"status": 0, "body": b""}

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        return {"type": "http.request", "body": PIECE, "more_body": read < PIECES}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
        elif message["type"] == "http.response.body":
            answer["body"] += message.get("body", b"")

    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"transfer-encoding", b"chunked"), *headers],
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 8787),
        "client": ("127.0.0.1", 50000),
        "root_path": "",
    }
    await Starlette(routes=routes)(scope, receive, send)
    return answer["status"], read, answer["body"]


async def test_the_live_decision_stops_reading_an_oversized_body() -> None:
    route = decide_route(_NoRelay(), ReadTokens("secret"))
    status, read, body = await _post([route], "/v1/runs/r1/live/approvals/a1", [(b"authorization", b"Bearer x")])
    assert status == 413 and b"over" in body
    assert read <= 2


async def test_the_whatsapp_webhook_stops_reading_an_oversized_body() -> None:
    hook = WhatsAppWebhook(MemoryReceipts(), SecretStr("app-secret"))
    status, read, body = await _post(hook.routes(), WEBHOOK_PATH, [(b"x-hub-signature-256", b"sha256=00")])
    assert status == 413 and str(MAX_BODY_BYTES).encode() in body
    assert read <= MAX_BODY_BYTES // len(PIECE) + 1
