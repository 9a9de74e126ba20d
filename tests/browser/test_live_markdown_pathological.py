"""Pathological Markdown on the live page (an attacker's answer): a line of 50k brackets, emphasis runs, a wide
table; the page renders it as inert text and stays responsive. And nesting deeper than markdown-it's
``maxNesting`` (100), after which markdown-it drops the rest of the text."""

from __future__ import annotations

import pytest

from tests.browser.conftest import LivePage, WebStack
from tests.browser.test_live_markdown import END, RUN, deltas, send_in

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

NASTY = (
    "[" * 30_000
    + "x"
    + "](" * 20_000
    + "\n\n"
    + "*a **" * 10_000
    + "\n\n"
    + "|"
    + "c|" * 2000
    + "\n|"
    + "-|" * 2000
    + "\n"
    + ("|" + "v|" * 2000 + "\n") * 50
    + "\n<img src=x onerror=window.__pwned=1>\n\nthe end\n"
)
DEEP = ">" * 150 + " deep\n\n" + "- " * 150 + "list\n\n" + "> 1. " * 80 + "mixed\n\nthe end\n"


async def _shown(web: WebStack, live: LivePage, text: str, chunk: int) -> str:
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await live.page.goto(web.sidecar.watch_url(RUN))
        await live.wait_state("live")
        await send_in(client, deltas(text, chunk), 20, pause_s=0.02)
        await client.send(RUN, [END])
        await live.wait_state("ended")
    return await live.wait_text("#answer", lambda t: "the end" in t)


async def test_pathological_markdown_renders_inert_and_the_page_stays_responsive(web: WebStack, live: LivePage) -> None:
    await _shown(web, live, NASTY, 4000)
    # the page still runs scripts once the text is shown (a page stuck rendering never answers: the test's hang
    # guard ends it); how fast it renders is a benchmark's business (bench/bench_code_spans.py), not a timed assert
    assert await live.page.evaluate("1 + 1") == 2
    assert await live.page.evaluate("typeof window.__pwned") == "undefined"
    assert await live.page.evaluate("document.querySelectorAll('#answer img, #answer script').length") == 0


async def test_text_after_nesting_past_the_limit_is_shown(web: WebStack, live: LivePage) -> None:
    await _shown(web, live, DEEP, 50)
