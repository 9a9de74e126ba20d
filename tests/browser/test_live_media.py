"""Media on the live page in a real Chromium: a run on the web channel with an image between paragraphs shows the
image as a part of its own (a link with its caption: the page's CSP shows no outside image) in the timeline and in the
deliveries, and a URL is a link only when it is http(s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import LivePage, WebStack

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]

RUN = "live-media"
URL = "https://example.com/charts/q3-revenue.png"


async def test_a_media_item_shows_as_a_link_with_its_caption(web: WebStack, live: LivePage, tmp_path: Path) -> None:
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await live.page.goto(web.sidecar.watch_url(RUN))
        await live.wait_state("live")
        await client.send(
            RUN,
            [
                {"kind": "text", "text": "Here is the chart."},
                {"kind": "media", "url": URL, "media_kind": "image", "caption": "Q3 revenue by region"},
                {"kind": "text", "text": "EMEA grew fastest."},
                {"kind": "end", "status": "ok"},
            ],
        )
        await live.wait_state("ended")

    link = live.page.locator("#timeline li[data-type=media] a.media-link")
    assert await link.count() == 1
    assert (await link.text_content(), await link.get_attribute("href")) == ("Q3 revenue by region", URL)
    assert await link.get_attribute("rel") == "noopener noreferrer nofollow"
    assert await live.text("#timeline li[data-type=media] .badge") == "image"
    roles = await live.texts("#deliveries .part .role")
    assert roles.count("media") == 1 and roles.count("answer") == 2, roles
    assert await live.text("#end-delivery") == "delivered"
    await live.snapshot(tmp_path / "live.png")
