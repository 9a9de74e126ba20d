"""The live run page in a real Chromium: a recorded run streams into it (answer, nested sub-agents, progress,
deliveries), a cut stream resumes without duplicates (replayed from the buffer, or rebuilt from a ``reset``),
and a page or stream without the run's read token is refused.

Each test saves a screenshot as ``live.png`` in its ``tmp_path``. ``STREAMRELAY_SCREENSHOT=docs/live-page.png
uv run pytest -m browser -k thinking`` also writes the live page's picture (docs/platforms.md) from that finished run.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Route

from streamrelay.app.client import RelayClient, recorded_events
from streamrelay.core.events import ProviderFormat, Source
from tests.browser.conftest import LivePage, WebStack
from tests.integration.test_subagents import answer_text, interleave

pytestmark = [pytest.mark.browser, pytest.mark.timeout(60)]

STREAMS = Path(__file__).parents[1] / "streams"
RUN = "live-1"
RESEARCHER = Source(agent_id="researcher", session_id="s-res", parent_session_id="s-root", depth=1, path="s/researcher")
FETCHER = Source(
    agent_id="fetcher", session_id="s-fetch", parent_session_id="s-res", depth=2, path="s/researcher/fetcher"
)
END = {"kind": "end", "status": "ok"}
PAUSE_S = 0.08
"""Between batches: the page sees the answer grow."""


def recording(name: str, source: Source | None = None) -> list[dict[str, Any]]:
    return recorded_events(STREAMS / name, ProviderFormat(name.split("/")[0]), RUN, source)


def progress(*names: str) -> list[dict[str, Any]]:
    return [{"kind": "phase", "name": name} for name in names]


def ended(source: Source) -> dict[str, Any]:
    return {**END, "source": source.model_dump()}


def batches(events: Sequence[dict[str, Any]], count: int) -> list[list[dict[str, Any]]]:
    size = max(1, -(-len(events) // count))
    return [list(events[i : i + size]) for i in range(0, len(events), size)]


async def send_slowly(client: RelayClient, events: Sequence[dict[str, Any]], count: int = 5) -> None:
    """Post ``events`` over HTTP in ``count`` batches, pausing between them."""
    for batch in batches(events, count):
        await client.send(RUN, batch)
        await asyncio.sleep(PAUSE_S)


@pytest.mark.parametrize("name", ["openai-chat/long-text.jsonl", "anthropic/thinking-then-text.jsonl"])
async def test_a_recorded_run_streams_into_the_page(web: WebStack, live: LivePage, name: str, tmp_path: Path) -> None:
    root = recording(name)
    researcher = recording("anthropic/multi-message-tools.jsonl", RESEARCHER)
    fetcher = recording("openai-chat/tool-call.jsonl", FETCHER)
    expected = answer_text(root).strip()
    answers = [i for i, e in enumerate(root) if e["kind"] == "text" and e.get("visibility", "answer") == "answer"]
    half = answers[len(answers) // 2]  # the answer is half there (a thinking recording thinks first)

    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await live.page.goto(web.sidecar.watch_url(RUN))
        await live.wait_state("live")
        await client.send(RUN, progress("planning"))
        await send_slowly(client, interleave(researcher, fetcher))
        await client.send(RUN, [ended(FETCHER), ended(RESEARCHER), *progress("writing")])
        await send_slowly(client, root[:half])
        partial = await live.wait_text("#answer-source", bool)
        await send_slowly(client, root[half:])
        await client.send(RUN, [END])
        await live.wait_state("ended")

    assert expected.startswith(partial) and len(partial) < len(expected)  # it streamed
    assert await live.text("#answer-source") == expected
    assert await live.page.locator("#final-badge").is_visible()
    assert (await live.text("#ended"), await live.text("#end-delivery")) == ("ok", "delivered")
    # The children: the fetcher nested inside the researcher, both done, each with its own text.
    panel = live.page.locator(f'#agent-tree > section.agent[data-key="{RESEARCHER.key}"]')
    nested = panel.locator(f':scope > .agent-children > section.agent[data-key="{FETCHER.key}"]')
    assert (await panel.count(), await nested.count()) == (1, 1)
    assert [await panel.get_attribute("data-state"), await nested.get_attribute("data-state")] == ["done", "done"]
    # Its text, its messages apart by a blank line as in its pipeline message.
    text = await panel.locator(":scope > .agent-text > .agent-source").text_content() or ""
    assert text == answer_text(researcher) != ""
    # Progress: the root's phases in order, the children's tool calls with their agent.
    assert await live.texts("#timeline li[data-type=phase] .name") == ["planning", "writing"]
    calls = await live.texts("#timeline li[data-type=tool_call]:has(.src) .tool-name")
    assert {"readNoteTree", "executeEditorOperation", "weather"} <= set(calls)
    # Deliveries: the web channel's one part, which is the Answer panel (its text not shown a second time).
    part = '#deliveries .part[data-key="web/0"]'
    assert await live.text(f"{part} .role") == "answer"
    assert await live.page.locator(f"{part} .part-note").is_visible()
    assert not await live.page.locator(f"{part} .part-text").is_visible()

    await live.snapshot(tmp_path / "live.png")
    if docs := os.environ.get("STREAMRELAY_SCREENSHOT"):
        await live.page.screenshot(path=docs, full_page=True)  # the live page's picture in docs/platforms.md


@pytest.mark.parametrize("live_buffer", [1000, 5], ids=["replayed", "reset"])
async def test_a_cut_stream_resumes_without_duplicates(
    web: WebStack, live: LivePage, live_buffer: int, tmp_path: Path
) -> None:
    root = recording("openai-chat/long-text.jsonl")
    expected = answer_text(root).strip()
    first, gap, rest = root[:200], root[200:450], root[450:]
    steps = [{"kind": "status", "text": f"step {i}"} for i in range(8)]

    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await live.page.goto(web.sidecar.watch_url(RUN))
        await client.send(RUN, progress("before"))
        await send_slowly(client, first, 3)
    await live.wait_text("#answer-source", bool)
    await web.stop_sidecar()  # cuts the page's stream
    await live.wait_state("reconnecting")
    for batch in batches(steps + gap, 6):  # the run goes on while nobody serves the page
        await web.submit(RUN, batch)
        await asyncio.sleep(PAUSE_S)
    await web.start_sidecar()  # the same port: the page's EventSource reconnects with Last-Event-ID
    await live.wait_state("live")
    async with web.client() as client:
        await client.send(RUN, progress("after"))
        await send_slowly(client, rest, 3)
        await client.send(RUN, [END])
    await live.wait_state("ended")

    assert await live.text("#answer-source") == expected
    assert await live.texts("#timeline li[data-type=phase] .name") == ["before", "after"]
    assert await live.texts("#timeline li[data-type=status] .what") == [f"step {i}" for i in range(8)]
    ids = await live.page.locator("#timeline li").evaluate_all("(items) => items.map((li) => li.dataset.id)")
    assert len(ids) == len(set(ids))
    view, monitor = await live.view(), web.relay.monitor(RUN)
    assert monitor is not None and view["lastId"] == monitor.last_id
    if live_buffer >= monitor.last_id:
        assert (view["resets"], view["ignored"], view["eventsApplied"]) == (0, 0, monitor.last_id)  # each once
    else:
        assert view["resets"] >= 1 and view["eventsApplied"] < monitor.last_id
    await live.snapshot(tmp_path / "live.png")


async def test_no_or_a_wrong_token_is_refused(web: WebStack, live: LivePage, tmp_path: Path) -> None:
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
    async with httpx.AsyncClient(base_url=web.sidecar.url, timeout=10) as http:
        assert (await http.get(f"/v1/runs/{RUN}/live", params={"token": "wrong"})).status_code == 403
        assert (await http.get(f"/v1/runs/{RUN}/live")).status_code == 401
        assert (await http.get("/v1/runs/other/live", params={"token": "wrong"})).status_code == 403  # says nothing
        assert (await http.get(f"/runs/{RUN}")).status_code == 401
    # The page itself needs the token: a wrong one gets the refusal, not the page.
    answer = await live.page.goto(f"{web.sidecar.url}/runs/{RUN}?token=wrong")
    assert answer is not None and answer.status == 403
    assert "wrong read token" in await live.text("body")
    await live.snapshot(tmp_path / "live.png")
    await web.relay.submit_line(END, RUN)


async def test_the_page_shows_denied_when_its_stream_is_refused(web: WebStack, live: LivePage, tmp_path: Path) -> None:
    """The page loads, its stream request carries a wrong token (403). (A right token of a run not started yet
    waits for the run: test_live_markdown.py.)"""
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")

    async def wrong_token(route: Route) -> None:
        await route.continue_(url=route.request.url.split("?")[0] + "?token=wrong")

    await live.page.route(lambda url: "/live?" in url, wrong_token)
    await live.page.goto(web.sidecar.watch_url(RUN))
    await live.wait_state("denied")

    assert await live.page.locator("#notice").is_visible()
    assert "cannot be shown" in await live.text("#notice")
    assert (await live.view())["eventsApplied"] == 0
    await live.snapshot(tmp_path / "live.png")
    await web.relay.submit_line(END, RUN)


HTML = '<img src=x onerror="window.__pwned=1"><b>bold</b>'
"""Model text that is also HTML: the page shows it as text, never as markup."""


async def test_model_text_that_is_html_shows_literally_and_never_runs(
    web: WebStack, live: LivePage, tmp_path: Path
) -> None:
    """Every place the page writes model or runtime text (answer, agent panel and id, timeline entries, the
    delivered part) gets an HTML payload: it shows as the characters sent, no element is made and no handler
    runs. Independent of the page's CSP (which would refuse an inline handler too): the DOM is checked."""
    child = Source(agent_id=HTML, session_id="s-html", depth=1)
    async with web.client() as client:
        await client.start(RUN, channel="web", chat_id="page")
        await live.page.goto(web.sidecar.watch_url(RUN))
        await live.wait_state("live")
        await client.send(
            RUN,
            [
                {"kind": "phase", "name": HTML},
                {"kind": "status", "text": HTML},
                {"kind": "tool_call", "id": "c1", "name": HTML, "state": "start"},
                {"kind": "tool_call", "id": "c1", "name": HTML, "state": "end", "args": {HTML: HTML}},
                {"kind": "tool_result", "id": "c1", "name": HTML, "summary": HTML},
                {"kind": "text", "mode": "delta", "text": HTML, "source": child.model_dump()},
                ended(child),
                {"kind": "error", "message": HTML},
                {"kind": "text", "mode": "delta", "text": HTML[:17]},
                {"kind": "text", "mode": "delta", "text": HTML[17:] + "\u202e"},
            ],
        )
        await client.send(RUN, [END])
        await live.wait_state("ended")

    assert await live.text("#answer-source") == HTML  # literally (and the bidi override it ended in removed)
    assert (await live.text("#answer")).strip() == HTML  # rendered as Markdown: a paragraph of that text
    assert not await live.page.locator('#deliveries .part[data-key="web/0"] .part-text').is_visible()  # once
    panel = live.page.locator(f'#agent-tree section.agent[data-key="{child.key}"]')
    assert (await panel.locator(".agent-id").text_content(), await panel.locator(".agent-source").text_content()) == (
        HTML,
        HTML,
    )
    assert await live.texts("#timeline li[data-type=phase] .name") == [HTML]
    assert await live.texts("#timeline li[data-type=status] .what") == [HTML]
    assert await live.texts("#timeline li[data-type=error] .what") == [HTML]
    assert HTML in await live.texts("#timeline li[data-type=tool_result] .summary")
    made = await live.page.evaluate("document.querySelectorAll('body img, body b, [onerror]').length")
    assert made == 0
    assert await live.page.evaluate("typeof window.__pwned") == "undefined"
    await live.snapshot(tmp_path / "live.png")  # also: no script error, no CSP violation
