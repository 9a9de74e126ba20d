"""Media out, one contract for three platforms: each adapter's ``send_media`` through its real SDK against its mock,
which checks the call as the platform does (the caption, Slack's image block, Discord's embed) and shows the media
message with its caption. A 5xx after the platform stored a media create is uncertain, then settled: found, once
(Slack by its metadata, Discord by its nonce, Telegram with an exclusive bot by probing ids with editMessageCaption)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import SecretStr

from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import make_adapter
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.errors import PayloadRejectedError, RejectReason, UncertainDeliveryError
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem, MediaKind
from streamrelay.core.ports import ChannelAdapter, PendingSend, SettleOutcome, TextFormat
from streamrelay.mocks.common import MockPlatform

SEND = {"telegram": "sendPhoto", "slack": "chat.postMessage", "discord": "createMessage"}
IMAGE = MediaItem("https://example.com/q3.png", MediaKind.IMAGE, "Q3 revenue by region")
FILE = MediaItem("https://example.com/files/q3.xlsx", MediaKind.FILE, "Q3 numbers")


@pytest.fixture(params=["telegram", "slack", "discord"])
async def rig(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, MockPlatform, ChannelAdapter, Target]]:
    platform: str = request.param
    dry = DRY_RUN[platform]
    mock = dry.make_mock(False)
    api = await mock.start()
    settings = ChannelSettings.model_validate({"platform": platform, "api_base": api, "send_timeout_ms": 600})
    adapter = make_adapter("c", settings, SecretStr(dry.token))
    try:
        yield platform, mock, adapter, dry.target()
    finally:
        await adapter.close()
        await mock.stop()


def _shown(mock: MockPlatform, target: Target) -> list[str]:
    return [text for _, text in mock.visible(target.chat_id)]


async def test_an_image_and_a_file_are_messages_showing_their_captions(rig: Any) -> None:
    platform, mock, adapter, target = rig
    first = await adapter.send_media(target, IMAGE, TextFormat.PLAIN, delivery_id="sr-image")
    second = await adapter.send_media(target, FILE, TextFormat.MARKDOWN, delivery_id="sr-file")
    assert first != second
    assert _shown(mock, target) == ["Q3 revenue by region", "Q3 numbers"]
    if platform == "telegram":
        assert [c.method for c in mock.calls if c.method.startswith("send")] == ["sendPhoto", "sendDocument"]


async def test_a_media_create_stored_then_answered_with_a_5xx_is_uncertain_then_settled_once(rig: Any) -> None:
    platform, mock, adapter, target = rig
    before = await adapter.send_text(target, "Before", TextFormat.PLAIN, delivery_id="sr-before")
    mock.add_fault(SEND[platform], 2 if platform != "telegram" else 1, {"status": 502}, after_commit=True)
    with pytest.raises(UncertainDeliveryError):
        await adapter.send_media(target, IMAGE, TextFormat.PLAIN, delivery_id="sr-maybe")
    assert _shown(mock, target) == ["Before", "Q3 revenue by region"]  # it landed

    pending = PendingSend("sr-maybe", IMAGE.text(), TextFormat.PLAIN, after_id=before, exclusive=True, media=IMAGE)
    settled = await adapter.settle_send(target, pending)
    [stored] = [mid for mid, text in mock.visible(target.chat_id) if text == "Q3 revenue by region"]
    assert (settled.outcome, settled.message_id) == (SettleOutcome.FOUND, str(stored))
    if platform == "telegram":  # probed by its caption: editMessageText was never tried on the photo
        assert [c.method for c in mock.calls if c.method.startswith("edit")] == ["editMessageCaption"]
    assert _shown(mock, target) == ["Before", "Q3 revenue by region"]  # shown once


@pytest.mark.parametrize("platform", ["telegram"])
async def test_telegram_refuses_a_caption_over_1024_characters(platform: str) -> None:
    dry = DRY_RUN[platform]
    mock = dry.make_mock(False)
    api = await mock.start()
    adapter = make_adapter(
        "c", ChannelSettings.model_validate({"platform": platform, "api_base": api}), SecretStr(dry.token)
    )
    try:
        with pytest.raises(PayloadRejectedError) as refused:
            await adapter.send_media(dry.target(), MediaItem(IMAGE.url, IMAGE.kind, "x" * 1025), TextFormat.PLAIN)
        assert refused.value.reason is RejectReason.TOO_LONG
        assert _shown(mock, dry.target()) == []
    finally:
        await adapter.close()
        await mock.stop()
