"""The live page's Stop in a real Chromium: a link with the run's stop token shows a Stop button; a click ends the
run cancelled (the answer so far kept, the notice, a ``stop`` unit for the parent loop) and the button goes. A read
token alone shows no button and cannot stop the run."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from streamrelay.core.contracts.units import StopUnit
from streamrelay.core.run.stage import STOPPED_NOTICE
from tests.browser.conftest import INGEST_TOKEN, LivePage, WebStack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]

RUN = "stop-1"


async def watch_link(web: WebStack, run: str, *, stop: bool) -> dict[str, object]:
    async with httpx.AsyncClient(base_url=web.sidecar.url, headers={"Authorization": f"Bearer {INGEST_TOKEN}"}) as h:
        answer = await h.get(f"/v1/runs/{run}/watch", params={"stop": "1"} if stop else {})
    assert answer.status_code == 200
    link: dict[str, object] = answer.json()
    return link


async def test_the_stop_button_stops_the_run(web: WebStack, live: LivePage, tmp_path: Path) -> None:
    link = await watch_link(web, RUN, stop=True)
    assert "stop=" in str(link["url"]) and str(link["url"]).endswith(f"token={link['token']}")
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await client.send(RUN, [{"kind": "text", "text": "The answer so far"}])
        await live.page.goto(str(link["url"]))
        await live.wait_state("live")
        await live.wait_text("#answer-source", lambda text: text == "The answer so far")
        button = live.page.locator("#stop")
        assert await button.is_visible()
        await button.click()
        await live.wait_state("ended")
        assert await live.text("#ended") == "cancelled"
        assert not await button.is_visible()  # the control disappears when the run ends
        report = await client.report(RUN, wait_s=10)
        assert report.end_status == "cancelled"
        assert "stopped by the reader (web)" in report.errors
        units = await client.units(RUN)
        assert [u.kind for u in units] == ["stop", "run.end"]
        assert isinstance(units[0], StopUnit) and units[0].by == "web"
        # What the web channel shows: the answer so far, then the notice.
        parts = [t for t in await live.texts("#deliveries .part .part-text") if t]
        assert STOPPED_NOTICE in parts
    await live.snapshot(tmp_path / "live.png")


async def test_a_read_token_alone_cannot_stop(web: WebStack, live: LivePage) -> None:
    link = await watch_link(web, "stop-2", stop=False)
    assert "stop=" not in str(link["url"])
    async with web.client() as client:
        await client.start("stop-2", channel="web", chat_id="page")
        await client.send("stop-2", [{"kind": "text", "text": "Still going"}])
        await live.page.goto(str(link["url"]))
        await live.wait_state("live")
        assert not await live.page.locator("#stop").is_visible()
        async with httpx.AsyncClient(base_url=web.sidecar.url) as http:
            path = "/v1/runs/stop-2/live/stop"
            assert (await http.post(path)).status_code == 401
            read = await http.post(path, headers={"Authorization": f"Bearer {link['token']}"})
            assert read.status_code == 403  # reading is not stopping
        assert (await client.report("stop-2")).done is False
        await client.send("stop-2", [{"kind": "end", "status": "ok"}])
