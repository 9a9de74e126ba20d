"""The mock Cloud API's status webhooks behind a load balancer (``POST /_mock/webhook`` with ``urls``): each delivery
attempt goes to the next URL in turn, so a replica that does not answer is passed over, as Meta's one URL behind a
load balancer reaches whichever replica answers (the chaos campaign's replicas take them so)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web

from streamrelay.mocks.whatsapp import MockWhatsApp
from tests.hooks import serve_hook
from tests.ports import free_port

pytestmark = pytest.mark.timeout(20)

PHONE = "106540352242922"
TOKEN = "EAAGm0PX4ZCpsBAmockSecretToken0123456789abcdef"


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[str, list[dict[str, object]]]]:
    """A live replica's webhook: its URL and the statuses it took."""
    took: list[dict[str, object]] = []

    async def hook(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        took.extend(body["entry"][0]["changes"][0]["value"]["statuses"])
        return web.Response(text="ok")

    async with serve_hook(hook) as url:
        yield url, took


async def test_a_dead_replica_is_passed_over_and_the_live_one_takes_every_status(
    receiver: tuple[str, list[dict[str, object]]],
) -> None:
    url, took = receiver
    mock = MockWhatsApp()
    base = await mock.start()
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            dead = f"http://127.0.0.1:{free_port()}/hook"  # nobody listens there
            answer = await http.post(f"{base}/_mock/webhook", json={"url": dead, "urls": [url], "app_secret": "s"})
            assert answer.status_code == 200 and answer.json()["urls"] == [url]
            body = {"messaging_product": "whatsapp", "to": "15551234567", "type": "text", "text": {"body": "hi"}}
            sent = await http.post(
                f"{base}/v21.0/{PHONE}/messages", json=body, headers={"Authorization": f"Bearer {TOKEN}"}
            )
            assert sent.status_code == 200, sent.text
        wamid = sent.json()["messages"][0]["id"]
        async with asyncio.timeout(10):
            while [s["status"] for s in took] != ["sent", "delivered"]:
                await asyncio.sleep(0.02)
        assert {s["id"] for s in took} == {wamid}
        assert mock.statuses is not None and 0 in mock.statuses.answers  # the dead one was tried, and passed over
    finally:
        await mock.stop()


@pytest.mark.parametrize("urls", ["http://one", ["ftp://x"], [3]])
async def test_urls_that_are_not_a_list_of_http_urls_are_refused_by_name(urls: object) -> None:
    mock = MockWhatsApp()
    base = await mock.start()
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            body = {"url": "http://127.0.0.1:1/hook", "urls": urls, "app_secret": "s"}
            answer = await http.post(f"{base}/_mock/webhook", json=body)
        assert answer.status_code == 400 and answer.json()["field"] == "urls"
        assert mock.statuses is None
    finally:
        await mock.stop()
