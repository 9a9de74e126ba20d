"""Media out (issue 15, part 2) through the real service: an image and a file between paragraphs reach Telegram, Slack,
Discord (their real SDKs against the mocks) and the web channel as their own messages, in order with the text around
them, exactly once, in every delivery mode; the report counts them; an uncertain media send is settled or reported,
never doubled. The mocks check the calls as the platforms do (captions, image blocks, embeds)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.adapters.web import WebAdapter
from streamrelay.app.dry_run import DRY_RUN, seed_thread
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import Target
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.calls import RecordedCall
from streamrelay.mocks.common import MockPlatform
from tests.integration.conftest import INGEST_TOKEN

PLATFORMS = ("telegram", "slack", "discord", "teams", "web")
MODES = ("preview", "block", "native", "final", "progress")
NATIVE = ("telegram", "slack", "teams")
"""Platforms with native streaming (the others refuse ``delivery = "native"`` in their settings)."""
FIRST = "Here is the revenue chart for Q3."
IMAGE = {"kind": "media", "url": "https://example.com/charts/q3-revenue.png", "media_kind": "image"}
SECOND = "The raw numbers are in the spreadsheet below."
FILE = {"kind": "media", "url": "https://example.com/files/q3.xlsx", "media_kind": "file"}
THIRD = "As you can see, EMEA grew fastest, up 14% on Q2."
EVENTS: list[dict[str, Any]] = [
    {"kind": "text", "text": "Here is the revenue "},
    {"kind": "text", "text": "chart for Q3."},
    {**IMAGE, "caption": "Q3 revenue by region"},
    {"kind": "text", "text": SECOND},
    {**FILE, "caption": "Q3 numbers (xlsx)"},
    {"kind": "text", "text": "As you can see, EMEA grew fastest, "},
    {"kind": "text", "text": "up 14% on Q2."},
]
CHAT = [FIRST, "Q3 revenue by region", SECOND, "Q3 numbers (xlsx)", THIRD]
"""What a person sees (a media message shows its caption), in order, each once."""
MEDIA_SENDS = {"telegram": ("sendPhoto", "sendDocument"), "slack": ("chat.postMessage",), "discord": ("createMessage",)}


@dataclass
class Channel:
    """One platform's mock (None for the web channel: the sidecar is its platform) behind a running sidecar."""

    platform: str
    mock: MockPlatform | None
    web: WebAdapter | None
    target: Target
    client: httpx.AsyncClient

    def chat(self) -> list[str]:
        """What the conversation shows, in order (a thread's parent message left out)."""
        if self.web is not None:
            return [text for _, text in self.web.visible(self.target.chat_id)]
        assert self.mock is not None
        return [text for mid, text in self.mock.visible(self.target.chat_id) if mid != self.target.thread_id]

    def calls(self, *methods: str) -> list[RecordedCall]:
        assert self.mock is not None
        return [c for c in self.mock.calls if c.method in methods]

    async def run(self, run: str, events: Sequence[dict[str, Any]], *, mode: str | None = None) -> dict[str, Any]:
        """Post a run's events (``run.start`` and ``end`` added) and wait for its report."""
        start: dict[str, Any] = {
            "kind": "run.start",
            "channel": "c",
            "target": self.target.model_dump(exclude_none=True),
        }
        if mode is not None:
            start["mode"] = mode
        lines = [start, *events, {"kind": "end", "status": "ok"}]
        answer = await self.client.post(f"/v1/runs/{run}/events", content="".join(json.dumps(e) + "\n" for e in lines))
        assert answer.status_code == 200, answer.text
        report: dict[str, Any] = (await self.client.get(f"/v1/runs/{run}", params={"wait_s": 60})).json()
        assert report["done"], report
        return report


@asynccontextmanager
async def channel(platform: str, delivery: str = "block", **settings: Any) -> AsyncIterator[Channel]:
    """A sidecar with one channel ``c`` on ``platform`` (its mock started with the documented rate limits)."""
    mock = DRY_RUN[platform].make_mock(True) if platform != "web" else None
    api = await mock.start() if mock is not None else None
    values = {"platform": platform, "delivery": delivery, "format": "plain", "typing": False, **settings}
    if api is not None:
        values["api_base"] = api
    token = DRY_RUN[platform].token if platform != "web" else "unused"
    runtime = make_runtime("c", ChannelSettings.model_validate(values), SecretStr(token))
    web = runtime.adapter if isinstance(runtime.adapter, WebAdapter) else None
    if web is not None:
        web.record = True  # the page's texts kept for visible() (the service keeps digests)
    relay = Relay({"c": runtime}, MemoryLedger(), MonotonicClock())
    sidecar = Sidecar(relay, token=INGEST_TOKEN, max_body_bytes=2**20, max_line_bytes=2**16)
    await sidecar.start()
    if mock is not None:
        target = DRY_RUN[platform].target(native=delivery == "native")
        seed_thread(mock, target)
    else:
        target = Target(chat_id="page-1")
    headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
    try:
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=90) as client:
            yield Channel(platform, mock, web, target, client)
    finally:
        await sidecar.stop()
        await relay.close()
        if mock is not None:
            await mock.stop()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("platform", "mode"),
    [(p, m) for p in PLATFORMS for m in MODES if m != "native" or p in NATIVE],
)
async def test_an_image_and_a_file_between_paragraphs_show_in_order_once(platform: str, mode: str) -> None:
    async with channel(platform, mode) as ch:
        report = await ch.run("r1", EVENTS)
        shown = ch.chat()
    if mode == "progress":  # the status message comes first ("Done."): the answer and the media follow it
        assert shown[0].startswith("Done"), shown
        shown = shown[1:]
    assert shown == CHAT
    assert report["status"] == "delivered", report
    assert (report["media"], report["media_parts"]) == (2, 2), report
    assert [p["role"] for p in report["parts"] if p["role"] != "status"] == [
        "answer",
        "media",
        "answer",
        "media",
        "answer",
    ]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("platform", ["telegram", "slack", "discord"])
async def test_each_kind_goes_by_the_platforms_own_call(platform: str) -> None:
    kinds = ["image", "file", "audio", "video"]
    events = [
        {"kind": "media", "url": f"https://example.com/m/{k}.bin", "media_kind": k, "caption": f"the {k}"}
        for k in kinds
    ]
    async with channel(platform) as ch:
        report = await ch.run("r1", events)
        assert ch.chat() == [f"the {k}" for k in kinds]
        methods = [c.method for c in ch.calls("sendPhoto", "sendDocument", "sendAudio", "sendVideo")]
        if platform == "telegram":
            assert methods == ["sendPhoto", "sendDocument", "sendAudio", "sendVideo"]
    assert report["status"] == "delivered" and report["media"] == 4, report


@pytest.mark.timeout(120)
async def test_a_media_run_without_text_is_delivered_not_empty() -> None:
    async with channel("telegram") as ch:
        report = await ch.run("r1", [{**IMAGE, "caption": ""}])
        assert ch.chat() == [""]  # a photo without a caption
    assert report["status"] == "delivered" and report["media"] == 1, report


@pytest.mark.timeout(120)
@pytest.mark.parametrize("platform", ["slack", "discord"])
async def test_an_uncertain_media_send_is_settled_by_the_platform_and_shown_once(platform: str) -> None:
    async with channel(platform, exclusive_bot=True, send_timeout_ms=1500) as ch:
        assert ch.mock is not None
        ch.mock.add_fault(MEDIA_SENDS[platform][0], 2, "timeout_after_commit")  # the image: stored, never answered
        report = await ch.run("r1", EVENTS)
        assert ch.chat() == CHAT
    assert report["status"] == "delivered" and report["uncertain"] == 0 and report["media"] == 2, report


@pytest.mark.timeout(120)
async def test_an_uncertain_telegram_media_send_is_found_by_its_caption_with_an_exclusive_bot() -> None:
    async with channel("telegram", exclusive_bot=True, send_timeout_ms=1500) as ch:
        assert ch.mock is not None
        ch.mock.add_fault("sendPhoto", 1, "timeout_after_commit")  # stored, never answered
        report = await ch.run("r1", EVENTS)
        assert ch.chat() == CHAT  # found by editMessageCaption ("message is not modified"): shown once
        assert len(ch.calls("sendPhoto")) == 1 and len(ch.calls("editMessageCaption")) >= 1
    assert report["status"] == "delivered" and report["uncertain"] == 0 and report["media"] == 2, report


@pytest.mark.timeout(120)
async def test_an_uncertain_telegram_media_send_on_a_shared_bot_is_reported_never_sent_again() -> None:
    async with channel("telegram", send_timeout_ms=1500) as ch:
        assert ch.mock is not None
        ch.mock.add_fault("sendPhoto", 1, "timeout_after_commit")  # stored; a shared bot token cannot probe ids
        report = await ch.run("r1", EVENTS)
        assert ch.chat() == CHAT  # shown once: never sent again on a guess
        assert len(ch.calls("sendPhoto")) == 1
    assert report["status"] == "partial" and report["uncertain"] == 1, report
    assert (report["media"], report["media_parts"]) == (1, 2), report
    media = [p for p in report["parts"] if p["role"] == "media"]
    assert media[0]["state"] == "uncertain" and "uncertain" in (media[0]["error"] or ""), media


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("platform", "error"),
    [("telegram", "Bad Request: wrong file identifier/HTTP URL specified"), ("slack", "invalid_blocks")],
)
async def test_a_media_item_the_platform_refuses_makes_the_run_partial_not_delivered(platform: str, error: str) -> None:
    async with channel(platform) as ch:
        assert ch.mock is not None
        ch.mock.add_fault(
            MEDIA_SENDS[platform][0], 2 if platform == "slack" else 1, {"status": 400, "description": error}
        )
        report = await ch.run("r1", EVENTS)
        assert ch.chat() == [FIRST, SECOND, "Q3 numbers (xlsx)", THIRD]
    assert report["status"] == "partial" and report["failed"] == 1 and report["media"] == 1, report


@pytest.mark.timeout(60)
async def test_a_bad_media_event_is_refused_with_what_to_send() -> None:
    async with channel("telegram") as ch:
        start = {"kind": "run.start", "channel": "c", "target": ch.target.model_dump(exclude_none=True)}
        await ch.client.post("/v1/runs/r1/events", content=json.dumps(start) + "\n")
        for bad, expected in [
            ({**IMAGE, "media_kind": "gif"}, "'image', 'file', 'audio' or 'video'"),
            ({**IMAGE, "url": "file:///tmp/chart.png"}, "not an absolute http(s) URL"),
            ({**IMAGE, "caption": "x" * 1025}, "at most 1024"),
        ]:
            answer = await ch.client.post("/v1/runs/r1/events", content=json.dumps(bad) + "\n")
            assert answer.status_code == 400 and expected in answer.text, answer.text
