"""Reference-style links on the live page: the answer's blocks rendered once and kept (live-markdown.js) must not
lose a link whose definition is in another block, before or after it, as an LLM writes ``[docs][1]`` ...
``[1]: https://…`` (markdown-it resolves references over the whole text)."""

from __future__ import annotations

import pytest

from tests.browser.conftest import LivePage, WebStack
from tests.browser.test_live_markdown import END, RUN, deltas, send_in

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

USE_THEN_DEFINE = (
    "See [the docs][1] first.\n\nSecond paragraph.\n\nThird paragraph.\n\nFourth paragraph.\n\n"
    "[1]: https://example.org/docs\n"
)
DEFINE_THEN_USE = (
    "[2]: https://example.org/api\n\nFirst paragraph.\n\nSecond paragraph.\n\nThird paragraph.\n\nThen [the API][2].\n"
)


@pytest.mark.parametrize("text", [USE_THEN_DEFINE, DEFINE_THEN_USE], ids=["use-then-define", "define-then-use"])
async def test_a_reference_link_in_another_block_is_a_link(web: WebStack, live: LivePage, text: str) -> None:
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await live.page.goto(web.sidecar.watch_url(RUN))
        await live.wait_state("live")
        await send_in(client, deltas(text, 12), 8, pause_s=0.15)  # rendered between chunks: early blocks kept
        await client.send(RUN, [END])
        await live.wait_state("ended")
    await live.wait_text("#answer", lambda t: "Third paragraph" in t)
    await live.page.wait_for_timeout(300)  # the last render
    shown = await live.text("#answer")
    hrefs = await live.page.locator("#answer a").evaluate_all("(links) => links.map((a) => a.getAttribute('href'))")
    assert len(hrefs) == 1 and hrefs[0].startswith("https://example.org/"), (hrefs, shown)
    assert "][" not in shown and "]: https" not in shown, shown
