"""Telegram captions counted by Telegram's rule (issue 25, item 6): 0-1024 characters after entity parsing
(https://core.telegram.org/bots/api#sendphoto). The adapter counts the caption after entity parsing in UTF-16 units,
like message text; the mock counts code points after parsing, as the server does (text and captions alike); ingest
bounds the raw caption in UTF-16 units. Through aiogram against the mock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from streamrelay.adapters.telegram.adapter import TelegramAdapter
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import make_adapter
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.errors import IngestError, PayloadRejectedError, RejectReason
from streamrelay.core.events import parse_event
from streamrelay.core.media import MediaItem, MediaKind
from streamrelay.core.ports import TextFormat
from streamrelay.mocks.telegram import MockTelegram
from streamrelay.mocks.telegram.content import MAX_TEXT_CHARS
from streamrelay.mocks.telegram.media import MAX_CAPTION_CHARS, media_content

URL = "https://example.com/q3.png"
EMOJI = "😀"  # U+1F600: one code point, two UTF-16 units


@pytest.fixture
async def rig() -> AsyncIterator[tuple[TelegramAdapter, MockTelegram]]:
    dry = DRY_RUN["telegram"]
    mock = dry.make_mock(False)
    assert isinstance(mock, MockTelegram)
    api = await mock.start()
    adapter = make_adapter(
        "c", ChannelSettings.model_validate({"platform": "telegram", "api_base": api}), SecretStr(dry.token)
    )
    assert isinstance(adapter, TelegramAdapter)
    try:
        yield adapter, mock
    finally:
        await adapter.close()
        await mock.stop()


def captions(mock: MockTelegram) -> list[str]:
    return [m.text for m in mock.messages(DRY_RUN["telegram"].target().chat_id) if m.media]


async def test_a_caption_of_1024_utf16_units_is_sent_and_one_more_is_refused_before_any_call(
    rig: tuple[TelegramAdapter, MockTelegram],
) -> None:
    adapter, mock = rig
    target = DRY_RUN["telegram"].target()
    fits = EMOJI * 512  # 1024 UTF-16 units, 512 code points
    await adapter.send_media(target, MediaItem(URL, MediaKind.IMAGE, fits), TextFormat.PLAIN)
    assert captions(mock) == [fits]
    calls = len(mock.calls)
    with pytest.raises(PayloadRejectedError, match="1026 UTF-16 units") as refused:
        await adapter.send_media(target, MediaItem(URL, MediaKind.IMAGE, EMOJI * 513), TextFormat.PLAIN)
    assert refused.value.reason is RejectReason.TOO_LONG and len(mock.calls) == calls  # no call made


async def test_markdown_is_counted_after_entity_parsing(rig: tuple[TelegramAdapter, MockTelegram]) -> None:
    adapter, mock = rig
    target = DRY_RUN["telegram"].target()
    caption = "**" + "x" * 1000 + "** [a link](https://example.com/" + "p" * 200 + ")"  # 1245 raw, 1007 shown
    await adapter.send_media(target, MediaItem(URL, MediaKind.IMAGE, caption), TextFormat.MARKDOWN)
    assert captions(mock) == ["x" * 1000 + " a link"]


def test_the_mock_counts_captions_in_code_points_after_parsing_like_text() -> None:
    assert MAX_TEXT_CHARS == 4096 and MAX_CAPTION_CHARS == 1024
    assert media_content("sendPhoto", {"photo": URL, "caption": EMOJI * 1024})[2] == EMOJI * 1024  # code points
    with pytest.raises(Exception, match="caption is too long"):
        media_content("sendPhoto", {"photo": URL, "caption": "x" * 1025})


@pytest.mark.parametrize(("caption", "taken"), [("x" * 1024, True), (EMOJI * 512, True), (EMOJI * 513, False)])
def test_ingest_counts_a_caption_in_utf16_units(caption: str, taken: bool) -> None:
    line = {"kind": "media", "run": "r", "url": URL, "media_kind": "image", "caption": caption}
    if taken:
        assert parse_event(line).kind == "media"
    else:
        with pytest.raises(IngestError, match="1026 UTF-16 units"):
            parse_event(line)
