"""Sources shown as links (issue 26): the three recordings that cite sources (the AI SDK UI ``source-url``, Anthropic
``citations_delta`` from a web search, OpenAI Responses ``url_citation`` annotations) replayed exactly as ``streamrelay
replay`` sends them (run.start with the format, every raw line, ``end`` ``ok``) through the real sidecar into each
platform's mock (and the web page): the person sees the run's sources once, after the answer, as links of the
platform's own Markdown rendering; and a sidecar killed in the middle of a run and restarted on its SQLite journal
shows them once too."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.adapters.web import WebAdapter
from streamrelay.app.client import RelayClient
from streamrelay.app.dry_run import DRY_RUN, seed_thread
from streamrelay.app.ingest_client import detect_format, recording_lines, replay
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.contracts.units import MessageUnit
from streamrelay.core.delivery.sources import HEADING_MARKDOWN
from streamrelay.core.events import Target
from streamrelay.core.records.ledger import Ledger, MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.common import MockPlatform
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import INGEST_TOKEN
from tests.integration.test_threads import threads_of

pytestmark = pytest.mark.timeout(180)

STREAMS = Path(__file__).resolve().parents[1] / "streams"
RECORDINGS = {
    # recording → its sources, read off the raw lines by eye: (count of distinct URLs, the first URL, its title)
    "ai-sdk-ui/reasoning-tool-text": (
        1,
        "https://www.dwd.de/EN/weather/forecasts/",
        "Deutscher Wetterdienst forecast",
    ),
    "anthropic/server-tool-citations": (
        4,
        "https://www.apple.com/newsroom/2025/09/the-all-new-apple-ginza-opens-this-friday-september-26-in-tokyo/",
        "The all-new Apple Ginza opens this Friday, September 26, in Tokyo - Apple",
    ),
    "openai-responses/web-search-annotations": (
        7,
        "https://techcrunch.com/2025/12/05/petco-confirms-security-lapse-exposed-customers-personal-data/?utm_source=openai",
        "Petco confirms security lapse exposed customers\u2019 personal data | TechCrunch",
    ),
}
PLATFORMS = ("telegram", "slack", "discord", "web")
LINK = re.compile(r"^(\d+)\. \[(.+)\]\((https?://[^)\s]+)\)$")
"""One line of the sources list in Markdown: ``N. [title](url)``."""


def recording(name: str) -> Path:
    return STREAMS / f"{name}.jsonl"


@dataclass
class Chat:
    platform: str
    mock: MockPlatform | None
    web: WebAdapter | None
    target: Target
    url: str

    def texts(self) -> list[str]:
        """What the conversation shows, in order (Markdown as sent; Telegram's as text + entities)."""
        if self.web is not None:
            return [text for _, text in self.web.visible(self.target.chat_id)]
        assert self.mock is not None
        return [text for mid, text in self.mock.visible(self.target.chat_id) if mid != self.target.thread_id]

    async def replay(self, run: str, path: Path) -> dict[str, Any]:
        """Send the recording as ``streamrelay replay`` does (its own function) and wait for the report."""
        return await replay(
            self.url,
            INGEST_TOKEN,
            run=run,
            channel="c",
            chat_id=self.target.chat_id,
            thread_id=self.target.thread_id,
            fmt=detect_format(path),
            events=recording_lines(path),
            wait_s=90,
        )


@asynccontextmanager
async def chat(platform: str, delivery: str, ledger: Ledger | None = None) -> AsyncIterator[Chat]:
    """A sidecar with one Markdown channel ``c`` on ``platform``'s mock (the web channel is its own platform)."""
    mock = DRY_RUN[platform].make_mock(True) if platform != "web" else None
    api = await mock.start() if mock is not None else None
    values: dict[str, Any] = {"platform": platform, "delivery": delivery, "format": "markdown", "typing": False}
    if api is not None:
        values["api_base"] = api
    token = DRY_RUN[platform].token if platform != "web" else "unused"
    runtime = make_runtime("c", ChannelSettings.model_validate(values), SecretStr(token))
    web = runtime.adapter if isinstance(runtime.adapter, WebAdapter) else None
    if web is not None:
        web.record = True
    relay = Relay({"c": runtime}, ledger or MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN, max_body_bytes=16 * 2**20, max_line_bytes=2**20)
    await sidecar.start()
    if mock is not None:
        target = DRY_RUN[platform].target(native=delivery == "native")
        seed_thread(mock, target)
    else:
        target = Target(chat_id="page-1")
    try:
        yield Chat(platform, mock, web, target, sidecar.url)
    finally:
        await sidecar.stop()
        await relay.close()
        if mock is not None:
            await mock.stop()


def markdown_sources(texts: Sequence[str]) -> list[tuple[str, str]]:
    """``(title, url)`` of each line of the sources list the chat shows (Markdown as sent); the list shows once."""
    shown = "\n".join(texts)
    assert shown.count(HEADING_MARKDOWN) == 1, shown[-2000:]
    lines = shown[shown.index(HEADING_MARKDOWN) + len(HEADING_MARKDOWN) :].strip().splitlines()
    links = [LINK.match(line) for line in lines]
    assert all(links), lines
    assert [int(m[1]) for m in links if m] == list(range(1, len(lines) + 1))  # numbered in order
    return [(m[2], m[3]) for m in links if m]


def telegram_sources(mock: MockTelegram, chat_id: int | str) -> list[tuple[str, str]]:
    """``(link text, url)`` of each ``text_link`` after the one "Sources" heading (a bold entity) the chat shows."""
    found: list[tuple[str, str]] = []
    headings = 0
    for message in mock.messages(chat_id):
        units = message.text.encode("utf-16-le")
        after = None
        for entity in message.entities:
            text = units[2 * entity["offset"] : 2 * (entity["offset"] + entity["length"])].decode("utf-16-le")
            if entity["type"] == "bold" and text == "Sources":
                headings += 1
                after = entity["offset"]
            elif entity["type"] == "text_link" and after is not None and entity["offset"] > after:
                found.append((text, entity["url"]))
    assert headings == 1, [m.text for m in mock.messages(chat_id)]
    return found


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("name", sorted(RECORDINGS))
async def test_a_recordings_sources_show_once_as_links_after_the_answer(platform: str, name: str) -> None:
    count, first_url, first_title = RECORDINGS[name]
    async with chat(platform, "preview") as seen:
        report = await seen.replay("src", recording(name))
        texts = seen.texts()
        if platform == "telegram":
            assert isinstance(seen.mock, MockTelegram)
            links = telegram_sources(seen.mock, seen.target.chat_id)
            assert links[0] == (first_title, first_url)
        else:
            links = [(title, url) for title, url in markdown_sources(texts)]
            assert links[0][1] == first_url
    assert report["status"] == "delivered", report
    urls = [url for _, url in links]
    assert len(urls) == count and len(set(urls)) == count, urls  # each source once
    assert HEADING_MARKDOWN not in texts[0] or texts[0].index(HEADING_MARKDOWN) > 0  # after the answer, never before


@pytest.mark.parametrize("delivery", ["block", "final", "progress", "native"])
async def test_every_mode_shows_the_sources_once_after_the_answer(delivery: str) -> None:
    """``block``: the list is the final's last block (what no block showed); ``final``: the end of the one answer;
    ``progress``: with the committed answer, never as a progress line; ``native``: Slack's stream ends with it."""
    name = "openai-responses/web-search-annotations"
    async with chat("slack", delivery) as seen:
        report = await seen.replay("src", recording(name))
        texts = seen.texts()
        assert seen.mock is not None
        streamed = any(c.method == "chat.startStream" for c in seen.mock.calls)
    assert streamed is (delivery == "native")
    assert report["status"] == "delivered", report
    answer = [t for t in texts if not t.startswith(("Done.", "Working on it"))]
    assert len(markdown_sources(answer)) == RECORDINGS[name][0]
    assert HEADING_MARKDOWN in answer[-1]  # the sources end the answer


@pytest.mark.parametrize("delivery", ["preview", "block"])
async def test_a_restart_in_the_middle_of_a_run_still_shows_the_sources_once(tmp_path: Path, delivery: str) -> None:
    """Case-style: the Responses recording with ``seq`` on every line; the sidecar is killed after half of it (the
    chat shows the answer so far), restarted on the same SQLite journal and ledger, and the runtime sends the whole
    run again from ``seq`` 0 with its ``end``: the answer and the sources list each show once."""
    path = recording("openai-responses/web-search-annotations")
    raws = recording_lines(path)
    count = RECORDINGS["openai-responses/web-search-annotations"][0]
    start = {"seq": 0, "kind": "run.start", "channel": "c", "format": detect_format(path)}
    numbered = [{**raw, "seq": i} for i, raw in enumerate(raws, start=1)]
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    mock = DRY_RUN["telegram"].make_mock(True)
    assert isinstance(mock, MockTelegram)
    api = await mock.start()
    try:
        shown_before: list[str] = []
        for life in (1, 2):
            ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
            values = {"platform": "telegram", "api_base": api, "delivery": delivery, "format": "markdown"}
            runtime = make_runtime("c", ChannelSettings.model_validate(values), SecretStr(DRY_RUN["telegram"].token))
            relay = Relay({"c": runtime}, ledger, MonotonicClock())
            sidecar = Sidecar(relay, token=INGEST_TOKEN, max_body_bytes=16 * 2**20, max_line_bytes=2**20)
            await sidecar.start()
            if life == 1:  # the runtime's stream, numbered as replay numbers it; the process dies 3/4 into it
                lines = [{**start, "target": {"chat_id": 77}}, *numbered][: (len(raws) + 1) * 3 // 4]
                body = "".join(json.dumps(line) + "\n" for line in lines)
                async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=120) as client:
                    assert (await client.post("/v1/runs/r/events", content=body)).status_code == 200
                for _ in range(200):  # until the chat shows some of the answer
                    if mock.visible(77):
                        break
                    await asyncio.sleep(0.02)
                shown_before = [t for _, t in mock.visible(77)]
            else:  # the runtime sends the whole run again, from seq 0, with its end: streamrelay replay
                fmt = detect_format(path)
                report = await replay(sidecar.url, INGEST_TOKEN, run="r", channel="c", chat_id=77, fmt=fmt, events=raws)
            await sidecar.stop()
            await relay.close()
            await ledger.close()
        assert shown_before and not any("Sources" in t for t in shown_before)  # killed before the final
        links = telegram_sources(mock, 77)
        assert len(links) == count and len({url for _, url in links}) == count, links
        assert report["status"] == "delivered", report
        sends = [c for c in mock.calls if c.method == "sendMessage" and c.status == 200]
        assert len(sends) == len(mock.messages(77))  # no message sent twice
    finally:
        await mock.stop()


@pytest.mark.parametrize("platform", ["slack", "telegram"])
async def test_a_sub_agents_sources_follow_its_text_in_its_thread_never_the_root_answer(platform: str) -> None:
    """``subagents = "thread"``: the researcher's sources end its thread's final text; the root's answer lists only
    the root's own; the parent loop gets the child's on its ``message`` unit."""
    researcher = {"agent_id": "researcher", "session_id": "s-r", "depth": 1, "path": "s/researcher"}
    dry = DRY_RUN[platform]
    mock = dry.make_mock(True)
    api = await mock.start()
    values = {"platform": platform, "api_base": api, "subagents": "thread", "format": "markdown", "throttle_ms": 100}
    relay = Relay(
        {"c": make_runtime("c", ChannelSettings.model_validate(values), SecretStr(dry.token))},
        MemoryLedger(),
        MonotonicClock(),
    )
    sidecar = Sidecar(relay, token=INGEST_TOKEN)
    await sidecar.start()
    chat_id = dry.private
    try:
        async with RelayClient(sidecar.url, INGEST_TOKEN) as client:
            await client.start("t1", channel="c", chat_id=chat_id)
            await client.send(
                "t1",
                [
                    {"kind": "text", "text": "Refund rules found.", "source": researcher},
                    {"kind": "citation", "url": "https://kb.example/refunds", "title": "Refunds", "source": researcher},
                    {"kind": "end", "status": "ok", "source": researcher},
                    {"kind": "text", "text": "Refunds take 14 days."},
                    {"kind": "citation", "url": "https://shop.example/terms", "title": "Terms"},
                    {"kind": "end", "status": "ok"},
                ],
            )
            report = await client.report("t1", wait_s=30)
            units = await client.units("t1")
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()
    assert report.status == "delivered", report
    shown = [text for _, text in mock.visible(chat_id)]
    line = next(text for text in shown if text.startswith("↳ researcher"))
    anchor = next(mid for mid, text in mock.visible(chat_id) if text == line)
    [[thread]] = threads_of(mock, chat_id, anchor)
    root = [t for t in shown if t.startswith("Refunds take")]
    if platform == "telegram":  # rendered: text + entities
        assert thread == "Refund rules found.\n\nSources\n1. Refunds" and root == [
            "Refunds take 14 days.\n\nSources\n1. Terms"
        ]
    else:
        assert thread == f"Refund rules found.\n\n{HEADING_MARKDOWN}\n1. [Refunds](https://kb.example/refunds)"
        assert root == [f"Refunds take 14 days.\n\n{HEADING_MARKDOWN}\n1. [Terms](https://shop.example/terms)"]
    message = next(u for u in units if isinstance(u, MessageUnit))
    assert [(s.url, s.title) for s in message.sources] == [("https://kb.example/refunds", "Refunds")]
