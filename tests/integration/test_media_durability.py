"""A media send in flight at a kill -9 (`streamrelay serve` as its own process, SQLite journal and ledger), then a
restart on the same files (in the test's process: test_durability.py's ``_serve_here``): the media item is never
shown twice. Slack and Discord settle it by asking the platform (its delivery id in the message metadata, its nonce),
Telegram with an exclusive bot token by probing message ids with editMessageCaption; with a shared token Telegram
cannot be asked, so it is reported uncertain, never resent."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.app.dry_run import DRY_RUN
from tests.integration.test_durability import TOKEN, _config, _mock, _ready, _serve, _serve_here, _until
from tests.ports import free_port as _free_port

TEXT = "Here is the revenue chart for Q3."
AFTER = "As you can see, EMEA grew fastest."
CAPTION = "Q3 revenue by region"
MEDIA_SEND = {"telegram": ("sendPhoto", 1), "slack": ("chat.postMessage", 2), "discord": ("createMessage", 2)}
"""The call that sends the image, and which of its kind it is (Slack and Discord send text by the same call)."""


def _events(run: str, target: dict[str, Any]) -> bytes:
    lines: list[dict[str, Any]] = [
        {"kind": "run.start", "channel": "chat", "target": target, "seq": 0},
        {"kind": "text", "text": TEXT, "seq": 1},
        {"kind": "media", "url": "https://example.com/q3.png", "media_kind": "image", "caption": CAPTION, "seq": 2},
        {"kind": "text", "text": AFTER, "seq": 3},
        {"kind": "end", "status": "ok", "seq": 4},
    ]
    return "".join(json.dumps({"run": run, **line}) + "\n" for line in lines).encode()


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("platform", "exclusive"),
    [("telegram", False), ("telegram", True), ("slack", False), ("discord", False)],
    ids=["telegram-shared-bot", "telegram-exclusive-bot", "slack", "discord"],
)
async def test_a_media_send_in_flight_at_a_kill_is_never_shown_twice(
    tmp_path: Path, platform: str, exclusive: bool
) -> None:
    dry = DRY_RUN[platform]
    target = dry.target()
    method, nth = MEDIA_SEND[platform]
    async with _mock(platform) as mock:
        mock.add_fault(method, nth, "timeout_after_commit")  # stored by the platform, never answered
        port = _free_port()
        config = _config(tmp_path, platform, mock.base_url, port, delivery="block", exclusive_bot=exclusive)
        log = tmp_path / "sidecar.log"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
            with _serve(config, dry.token, log) as first:
                await _ready(client, first, log)
                answer = await client.post("/v1/runs/r1/events", content=_events("r1", target.model_dump()))
                assert answer.status_code == 200, answer.text
                await _until(lambda: len(mock.visible(target.chat_id)) == 2, 20, "the image to be stored")
                first.send_signal(signal.SIGKILL)  # the media send is in flight: an intent without an outcome
                first.wait(10)
            async with _serve_here(config, dry.token) as second:
                await _ready(client, second, log)
                report = (await client.get("/v1/runs/r1", params={"wait_s": 60})).json()
        shown = [text for _, text in mock.visible(target.chat_id)]
    assert shown == [TEXT, CAPTION, AFTER]  # the image once, in its place
    assert report["done"] and report["media_parts"] == 1, report
    if platform == "telegram" and not exclusive:  # a shared token cannot probe: uncertain, reported, never resent
        assert report["status"] == "partial" and report["uncertain"] == 1 and report["media"] == 0, report
    else:  # found by its delivery id (Slack metadata), its nonce (Discord), its caption (Telegram's id probe)
        assert report["status"] == "delivered" and report["uncertain"] == 0 and report["media"] == 1, report
