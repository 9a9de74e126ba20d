"""The operator page in a real Chromium: it asks for the main token once, keeps it in the tab's sessionStorage and
sends it only as ``Authorization: Bearer`` (never in a URL, never to another origin), refreshes every 2 s, lists the
active runs with their delivery state and links each to its live page; a wrong token is asked again.

Each test saves a screenshot as ``ops.png`` in its ``tmp_path``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

import pytest
from playwright.async_api import Request

from streamrelay.core.ports import TextFormat
from streamrelay.core.records.desk import DeskEntry, DeskState
from streamrelay.core.records.report import SlotRole
from tests.browser.conftest import INGEST_TOKEN, POLL_S, WAIT_MS, LivePage, WebStack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]

RUN = "ops-page-1"


async def _until(live: LivePage, expression: str, timeout_s: float = WAIT_MS / 1000) -> None:
    """Poll ``expression`` in the page until it is true (from here: the page's CSP forbids eval)."""
    async with asyncio.timeout(timeout_s):
        while not await live.page.evaluate(expression):
            await asyncio.sleep(POLL_S)


async def test_the_page_lists_the_active_runs_with_the_main_token_kept_out_of_urls(
    web: WebStack, live: LivePage, tmp_path: Path
) -> None:
    requests: list[Request] = []
    live.page.on("request", lambda request: requests.append(request))
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await client.send(RUN, [{"kind": "text", "mode": "delta", "text": "Hello from the run"}])
        await live.page.goto(web.sidecar.url + "/ops")
        await live.wait_state("locked")
        await live.page.fill("#token", INGEST_TOKEN)
        await live.page.click("button[type=submit]")
        await live.wait_state("live")

        row = live.page.locator(f'tr[data-run="{RUN}"]')
        await row.wait_for()
        cells = [text.strip() for text in await row.locator("td").all_text_contents()]
        assert cells[:3] == [RUN, "web", "preview"] and cells[4] == "pending"
        assert await row.locator("a").get_attribute("href") == web.sidecar.watch_path(RUN)
        assert await live.page.evaluate("sessionStorage.getItem('streamrelay.ops.token')") == INGEST_TOKEN
        assert await live.page.input_value("#token") == ""  # not left in the form
        await _until(live, "window.streamrelayOps.refreshes >= 2")  # refreshed on its own

        async with live.page.context.expect_page() as opened:
            await row.locator("a").click()
        watched = LivePage(await opened.value)
        await watched.wait_state("live")  # the run's live page, reached with its read token
        await watched.page.close()

        await row.locator("button", has_text="timeline").click()  # the run's delivery timeline, below
        await _until(live, "window.streamrelayOps.timeline >= 3")
        assert await live.page.locator('#timeline-rows tr[data-type="opened"]').count() == 1
        await live.page.locator('#timeline-rows tr[data-type="call"]').first.wait_for()

        await live.snapshot(tmp_path / "ops.png")
        await client.send(RUN, [{"kind": "end", "status": "ok"}])
        await live.page.locator("#empty").wait_for()  # the run ended: no longer active
        await live.page.locator('#timeline-rows tr[data-type="ended"]').wait_for()  # its timeline is kept

    timelines = [r for r in requests if r.url.endswith(f"/v1/runs/{RUN}/timeline")]
    assert timelines and all(r.headers.get("authorization") == f"Bearer {INGEST_TOKEN}" for r in timelines)
    api = [r for r in requests if "/v1/runs" in r.url and r not in timelines]
    assert api and all(r.url == web.sidecar.url + "/v1/runs?all=1" for r in api)
    assert all(r.headers.get("authorization") == f"Bearer {INGEST_TOKEN}" for r in api)
    assert all(r.url.startswith(web.sidecar.url) for r in requests)  # nothing from elsewhere
    assert not any(INGEST_TOKEN in r.url for r in requests)
    assert live.problems == []


async def test_the_page_lists_what_ended_runs_did_not_deliver(web: WebStack, live: LivePage, tmp_path: Path) -> None:
    now = time.time()
    entry = DeskEntry(
        run="ended-1",
        slot=0,
        role=SlotRole.ANSWER,
        state=DeskState.UNCERTAIN,
        was=DeskState.UNCERTAIN,
        channel="web",
        target={"chat_id": "page", "thread_id": None, "reply_to": None},
        text="<b>not markup</b>",
        fmt=TextFormat.PLAIN,
        error="uncertain: could not be settled: <script>alert(1)</script>",
        ended_at=now - 75,
        updated_at=now - 75,
    )
    await web.ledger.record_undelivered([entry, dataclasses.replace(entry, slot=1, state=DeskState.RESOLVED)])
    await live.page.goto(web.sidecar.url + "/ops")
    await live.page.fill("#token", INGEST_TOKEN)
    await live.page.click("button[type=submit]")
    await live.wait_state("live")
    row = live.page.locator(f'tr[data-delivery="{entry.id}"]')
    await row.wait_for()
    cells = [text.strip() for text in await row.locator("td").all_text_contents()]
    assert cells[:6] == [entry.id, "ended-1", "web", "page", "answer 0", "uncertain"]
    assert cells[6].startswith("1 min") and cells[7] == entry.error  # as text, never as markup
    assert await live.page.locator("#deliveries tr").count() == 1  # the resolved one is not open
    counts = await live.page.text_content("#desk-counts")
    assert counts is not None and "1 uncertain" in counts and "1 resolved" in counts
    await live.snapshot(tmp_path / "ops.png")
    assert live.problems == []


async def test_a_wrong_token_is_asked_for_again(web: WebStack, live: LivePage) -> None:
    await live.page.goto(web.sidecar.url + "/ops")
    await live.page.fill("#token", "not-the-token")
    await live.page.click("button[type=submit]")
    await _until(live, "document.getElementById('status').textContent.includes('wrong token')")
    assert await live.state() == "locked"
    assert await live.page.evaluate("sessionStorage.getItem('streamrelay.ops.token')") is None
    assert await live.page.locator("#login").is_visible() and not await live.page.locator("#board").is_visible()
