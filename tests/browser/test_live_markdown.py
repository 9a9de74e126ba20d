"""The live page renders the answer as Markdown, safely, and follows it: a recorded Markdown answer shows code
blocks, bold, tables and lists (no raw ``**``), once on the web channel; hostile input stays inert text; the
answer box scrolls with the answer while the reader is at its bottom and stays put when they scrolled up; an
85k answer streams with throttled renders; a page opened before its run starts waits for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.adapters.web import routes
from streamrelay.app.client import RelayClient, recorded_events
from streamrelay.core.events import ProviderFormat
from tests.browser.conftest import INGEST_TOKEN, LivePage, WebStack
from tests.integration.test_subagents import answer_text

pytestmark = [pytest.mark.browser, pytest.mark.timeout(90)]

STREAMS = Path(__file__).parents[1] / "streams"
RUN = "md-1"
END = {"kind": "end", "status": "ok"}
LONG = "anthropic/markdown-long-fences.jsonl"


def recording(name: str) -> list[dict[str, Any]]:
    return recorded_events(STREAMS / name, ProviderFormat(name.split("/")[0]), RUN)


def deltas(text: str, size: int) -> list[dict[str, Any]]:
    return [{"kind": "text", "mode": "delta", "text": text[i : i + size]} for i in range(0, len(text), size)]


async def send_in(client: RelayClient, events: Sequence[dict[str, Any]], count: int, pause_s: float = 0.05) -> None:
    size = max(1, -(-len(events) // count))
    for i in range(0, len(events), size):
        await client.send(RUN, list(events[i : i + size]))
        await asyncio.sleep(pause_s)


async def box(live: LivePage) -> dict[str, float]:
    """The answer box's scroll geometry, and the page's height."""
    value: dict[str, float] = await live.page.evaluate(
        """() => {
            const b = document.getElementById("answer-box");
            return {top: b.scrollTop, height: b.scrollHeight, client: b.clientHeight,
                    page: document.documentElement.scrollHeight};
        }"""
    )
    return value


def at_end(geometry: dict[str, float]) -> bool:
    return geometry["top"] + geometry["client"] >= geometry["height"] - 30


async def settled_at_end(live: LivePage, timeout_s: float = 10.0) -> dict[str, float]:
    """The box's geometry once it shows its end (renders wait for an animation frame: polled)."""
    async with asyncio.timeout(timeout_s):
        while not at_end(geometry := await box(live)):
            await asyncio.sleep(0.05)
    return geometry


async def prose(live: LivePage) -> str:
    """The rendered answer's text outside code (where Markdown markup would show if it were not rendered)."""
    text: str = await live.page.evaluate(
        """() => {
            const copy = document.getElementById("answer").cloneNode(true);
            copy.querySelectorAll("pre, code").forEach((el) => el.remove());
            return copy.textContent;
        }"""
    )
    return text


async def test_a_recorded_markdown_answer_is_rendered_once(web: WebStack, live: LivePage, tmp_path: Path) -> None:
    root = recording(LONG)
    expected = answer_text(root).strip()
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await live.page.goto(web.sidecar.watch_url(RUN))
        await live.wait_state("live")
        await send_in(client, root, 10)
        await client.send(RUN, [END])
        await live.wait_state("ended")
    await live.wait_text("#answer", lambda text: "Key Takeaways" in text)
    assert await live.text("#answer-source") == expected  # the exact text, behind "Markdown source"

    answer = live.page.locator("#answer")
    assert await answer.locator("pre > code").count() == 9  # the nine fences
    assert await answer.locator("strong").count() > 0 and await answer.locator("h2, h3").count() > 0
    assert await answer.locator("table").count() + await answer.locator("ul > li, ol > li").count() > 0
    text = await prose(live)
    assert "**" not in text and "```" not in text and "|---" not in text and "\n## " not in text
    # Shown once: the web channel's answer part does not repeat it; the page is no taller than the window
    # allows for (the answer box scrolls).
    last_words = "Would you like me to dive deeper"
    seen = await live.page.evaluate("document.body.innerText")
    assert seen.count(last_words) == 1
    geometry = await box(live)
    assert geometry["height"] > geometry["client"] and geometry["page"] < 1400
    # Nothing in them, so not shown: the agents (this run has no sub-agents); the timeline only with entries.
    entries = await live.texts("#timeline li")
    assert await live.page.locator("#timeline-panel").is_visible() == bool(entries), entries
    assert not await live.page.locator("#agents-panel").is_visible()
    assert await live.page.locator("#deliveries-panel").is_visible()
    # The source view shows the Markdown as written.
    await live.page.click("#answer-view")
    assert await live.page.locator("#answer-source").is_visible() and not await answer.is_visible()
    await live.snapshot(tmp_path / "live.png")


HOSTILE = (
    "# Title\n\n<img src=x onerror=window.__pwned=1> and <script>window.__pwned=2</script>\n\n"
    "[click](javascript:alert(1)) [data](data:text/html,<b>x</b>) [rel](/runs/other) "
    "[ok](https://example.org/a) [mail](mailto:a@example.org)\n\n![pixel](https://example.org/p.png)\n\n"
    '<a href="javascript:alert(2)">raw</a>\n'
)


async def test_hostile_markdown_stays_inert_text(web: WebStack, live: LivePage, tmp_path: Path) -> None:
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await live.page.goto(web.sidecar.watch_url(RUN))
        await live.wait_state("live")
        await send_in(client, deltas(HOSTILE, 7), 4)
        await client.send(RUN, [END])
        await live.wait_state("ended")
    text = await live.wait_text("#answer", lambda t: "raw" in t)

    made = await live.page.evaluate("document.querySelectorAll('#answer img, #answer script, [onerror]').length")
    assert made == 0 and await live.page.evaluate("typeof window.__pwned") == "undefined"
    hrefs = await live.page.locator("#answer a").evaluate_all("(links) => links.map((a) => a.getAttribute('href'))")
    # Only http(s) and mailto are links; an image is a link to it, never loaded (no tracking pixel).
    assert hrefs == ["https://example.org/a", "mailto:a@example.org", "https://example.org/p.png"]
    rel = await live.page.locator("#answer a").first.get_attribute("rel")
    assert rel is not None and "noopener" in rel and "noreferrer" in rel
    for shown in ("<img src=x onerror=window.__pwned=1>", "<script>", "[click](javascript:alert(1))", "<a href="):
        assert shown in text  # shown as the characters sent
    assert await live.page.locator("#answer h1").text_content() == "Title"
    await live.snapshot(tmp_path / "live.png")  # also: no script error, no CSP violation


async def test_the_answer_box_follows_the_end_unless_the_reader_scrolled_up(
    web: WebStack, live: LivePage, tmp_path: Path
) -> None:
    """An 85k answer (the recording ten times) in 2,000-odd deltas: renders are throttled, the box follows the
    end, stays where a reader scrolled up to, and follows again once they are back at the bottom."""
    one = answer_text(recording(LONG)).strip()
    text = "\n\n".join([one] * 10)
    events = deltas(text, 40)
    first, middle, last = events[: len(events) // 3], events[len(events) // 3 : 2 * len(events) // 3], events[-700:]
    middle = events[len(first) : len(events) - len(last)]
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await live.page.goto(web.sidecar.watch_url(RUN))
        await live.wait_state("live")
        await send_in(client, first, 8)
        await live.wait_text("#answer-source", lambda t: len(t) >= sum(len(e["text"]) for e in first))
        at = await settled_at_end(live)
        assert at["height"] > at["client"]  # it scrolls, and shows the end
        # The reader scrolls up: the box stays there while the answer grows.
        await live.page.hover("#answer-box")
        await live.page.mouse.wheel(0, -1200)
        await asyncio.sleep(0.3)
        held = (await box(live))["top"]
        await send_in(client, middle, 8)
        await asyncio.sleep(0.3)
        now = await box(live)
        assert abs(now["top"] - held) < 2 and now["height"] > at["height"]
        # Back at the bottom: it follows again.
        await live.page.evaluate(
            "(() => { const b = document.getElementById('answer-box'); b.scrollTop = b.scrollHeight; })()"
        )
        await asyncio.sleep(0.2)
        await send_in(client, last, 6)
        await client.send(RUN, [END])
        await live.wait_state("ended")
    await live.wait_text("#answer-source", lambda t: t == text)
    await live.wait_text("#answer", lambda t: t.rstrip().endswith("cover another section?"))
    end = await settled_at_end(live)
    assert end["page"] < 1400
    view = await live.view()
    assert 0 < view["answerRenders"] < len(events) / 2  # throttled: far fewer renders than deltas
    assert (await live.page.locator("#answer pre > code").count()) == 90
    await live.snapshot(tmp_path / "live.png")


async def test_a_page_opened_before_its_run_starts_waits_and_follows(
    web: WebStack, live: LivePage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The link works before the run: the page waits (its stream ends every START_WAIT_S and the browser asks
    again, still waiting), then follows the run from its first event."""
    monkeypatch.setattr(routes, "START_WAIT_S", 0.5)
    async with httpx.AsyncClient(base_url=web.sidecar.url, timeout=10) as http:
        link = (await http.get(f"/v1/runs/{RUN}/watch", headers={"Authorization": f"Bearer {INGEST_TOKEN}"})).json()
    assert link["started"] is False and link["url"].startswith(f"{web.sidecar.url}/runs/{RUN}?token=")
    await live.page.goto(link["url"])
    await live.wait_state("waiting")
    await asyncio.sleep(1.5)  # its first stream ended: the browser asks again
    assert await live.state() == "waiting"
    assert "waiting" in await live.text("#status") and not await live.page.locator("#notice").is_visible()
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await client.send(RUN, deltas("Hello **there**", 5))
        await live.wait_text("#answer strong", lambda text: text == "there")
        # A run with no progress to show has no empty Progress or Agents panel (nor a column for them).
        assert not await live.page.locator("#timeline-panel").is_visible()
        assert not await live.page.locator("#agents-panel").is_visible()
        await client.send(RUN, [END])
    await live.wait_state("ended")
    assert await live.texts("#timeline li .what") == ["answer committed"]  # then it has an entry: shown
    assert await live.page.locator("#timeline-panel").is_visible()
    await live.snapshot(tmp_path / "live.png")
