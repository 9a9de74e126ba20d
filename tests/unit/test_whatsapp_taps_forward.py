"""A WhatsApp webhook batching taps of runs two other replicas own (Meta batches messages in one webhook): it is
posted on to both owners at once, so two owners each slow to answer cost one forward's wait, not the sum (Meta waits
about 20 s for an answer, https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks; two forwards of up to
:data:`adapters.whatsapp.webhook.FORWARD_TIMEOUT_S` one after the other could pass it)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp import web
from pydantic import SecretStr
from starlette.applications import Starlette

from streamrelay.adapters.whatsapp import webhook as wa
from streamrelay.adapters.whatsapp.webhook import FORWARDED, SIGNATURE_HEADER, WEBHOOK_PATH, WhatsAppWebhook, signature
from streamrelay.core.records.receipts import MemoryReceipts
from streamrelay.core.run.approvals import button_ids

SECRET = "forward-app-secret"
RUN16 = web.AppKey("run16", str)


def _tap(button: str, sender: str) -> dict[str, Any]:
    reply = {"type": "button_reply", "button_reply": {"id": button, "title": "Approve"}}
    return {"from": sender, "id": f"wamid.{sender}", "timestamp": "0", "type": "interactive", "interactive": reply}


@pytest.fixture
async def owners() -> AsyncIterator[tuple[list[str], list[dict[str, Any]]]]:
    """Two owner replicas' webhooks, each answering only once both were posted to (a barrier: one after the other,
    the first waits out the forward's timeout); the bodies each was posted, with their headers."""
    arrived: list[dict[str, Any]] = []
    both = asyncio.Event()

    async def answer(request: web.Request) -> web.Response:
        body = await request.read()
        arrived.append({"forwarded": request.headers.get(FORWARDED), "signature": request.headers[SIGNATURE_HEADER]})
        if len(arrived) == 2:
            both.set()
        await both.wait()
        buttons = [
            m["interactive"]["button_reply"]["id"]
            for m in json.loads(body)["entry"][0]["changes"][0]["value"]["messages"]
        ]
        mine = request.app[RUN16]
        presses = [
            {"button": b, "status": 200, "decision": "approved"}
            if f":{mine}:" in b
            else {"button": b, "status": 503, "tell": wa.NOT_MINE}
            for b in buttons
        ]
        return web.json_response({"recorded": 0, "presses": presses})

    runners, urls = [], []
    for run in ("run-a", "run-b"):
        app = web.Application()
        app[RUN16] = button_ids(run, "refund")[0].split(":")[1]
        app.router.add_post(WEBHOOK_PATH, answer)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        runners.append(runner)
        urls.append(f"http://127.0.0.1:{port}")
    try:
        yield urls, arrived
    finally:
        both.set()
        for runner in runners:
            await runner.cleanup()


async def test_taps_of_runs_two_other_replicas_own_are_posted_on_to_both_at_once(
    owners: tuple[list[str], list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    urls, arrived = owners
    monkeypatch.setattr(wa, "FORWARD_TIMEOUT_S", 5.0)  # the barrier's hang guard: one after the other, a 500
    approve_a, approve_b = button_ids("run-a", "refund")[0], button_ids("run-b", "refund")[0]
    where = {approve_a.split(":")[1]: urls[0], approve_b.split(":")[1]: urls[1]}

    async def owner_of(run16: str) -> str | None:
        return where[run16]

    async def decide(run16: str, id16: str, decision: str, by: str) -> dict[str, Any]:
        raise AssertionError("no tap is this replica's")

    hook = WhatsAppWebhook(MemoryReceipts(), SecretStr(SECRET), None, decide=decide, owner_of=owner_of)
    messages = [_tap(approve_a, "15550001111"), _tap(approve_b, "15550001114")]
    payload = {
        "object": "whatsapp_business_account",
        "entry": [{"id": "1", "changes": [{"field": "messages", "value": {"messages": messages}}]}],
    }
    raw = json.dumps(payload).encode()
    transport = httpx.ASGITransport(app=Starlette(routes=hook.routes()))
    async with httpx.AsyncClient(transport=transport, base_url="http://replica") as meta:
        answer = await meta.post(WEBHOOK_PATH, content=raw, headers={SIGNATURE_HEADER: signature(SECRET, raw)})
    assert answer.status_code == 200, answer.text
    assert [(p["button"], p["status"]) for p in answer.json()["presses"]] == [(approve_a, 200), (approve_b, 200)]
    assert arrived == [{"forwarded": "1", "signature": signature(SECRET, raw)}] * 2  # signed as it came, marked


@pytest.mark.parametrize(
    "garbage",
    [
        {"presses": "all fine"},
        {"presses": [{"button": "{button}", "status": "200"}]},
        {"presses": [{"button": "{button}", "status": None}]},
        {"presses": []},
        ["not", "an", "object"],
    ],
)
async def test_an_owner_answering_garbage_is_a_500_so_meta_sends_the_webhook_again(garbage: Any) -> None:
    """An owner whose answer does not say what became of the tap (not a list, a status not a number, the tap
    missing): never a crash, never a 200 that tells Meta the tap was taken."""
    approve = button_ids("run-a", "refund")[0]

    async def answer(request: web.Request) -> web.Response:
        return web.json_response(json.loads(json.dumps(garbage).replace("{button}", approve)))

    app = web.Application()
    app.router.add_post(WEBHOOK_PATH, answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]

    async def owner_of(run16: str) -> str | None:
        return url

    async def decide(run16: str, id16: str, decision: str, by: str) -> dict[str, Any]:
        raise AssertionError("the tap is the owner's")

    hook = WhatsAppWebhook(MemoryReceipts(), SecretStr(SECRET), None, decide=decide, owner_of=owner_of)
    payload = {
        "object": "whatsapp_business_account",
        "entry": [{"id": "1", "changes": [{"field": "messages", "value": {"messages": [_tap(approve, "1555")]}}]}],
    }
    raw = json.dumps(payload).encode()
    try:
        transport = httpx.ASGITransport(app=Starlette(routes=hook.routes()))
        async with httpx.AsyncClient(transport=transport, base_url="http://replica") as meta:
            answer_ = await meta.post(WEBHOOK_PATH, content=raw, headers={SIGNATURE_HEADER: signature(SECRET, raw)})
    finally:
        await runner.cleanup()
    assert answer_.status_code == 500, answer_.text
    assert "send again" in answer_.json()["error"]
