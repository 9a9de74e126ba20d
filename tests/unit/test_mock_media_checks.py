"""The mocks check media calls as the platforms do: Slack's image and section blocks
(https://docs.slack.dev/reference/block-kit/blocks/image-block), Discord's embed limits
(https://discord.com/developers/docs/resources/message#embed-object-embed-limits), Telegram's media methods."""

from __future__ import annotations

from typing import Any

import pytest

from streamrelay.mocks.discord.embeds import check_embeds, shown_text
from streamrelay.mocks.discord.wire import ApiError
from streamrelay.mocks.slack.blocks import read_blocks
from streamrelay.mocks.slack.workspace import SlackError
from streamrelay.mocks.telegram.media import MEDIA_METHODS, media_content, media_json
from streamrelay.mocks.telegram.wire import ApiError as TelegramError

IMAGE = {"type": "image", "image_url": "https://example.com/a.png", "alt_text": "a chart"}


def test_slack_an_image_block_shows_its_title_and_keeps_the_media() -> None:
    view = read_blocks({"blocks": [{**IMAGE, "title": {"type": "plain_text", "text": "Q3"}}]})
    assert view is not None and view.text == "Q3"
    assert view.media == {"kind": "image", "url": "https://example.com/a.png", "caption": "Q3"}
    link = read_blocks(
        {"blocks": '[{"type": "section", "text": {"type": "mrkdwn", "text": "<https://e.com/f|Q3 &amp; Q4>"}}]'}
    )
    assert link is not None and link.text == "Q3 & Q4" and link.media is None


@pytest.mark.parametrize(
    ("blocks", "error"),
    [
        ([{"type": "image", "image_url": "https://example.com/a.png"}], "invalid_blocks"),  # no alt_text
        ([{**IMAGE, "alt_text": "x" * 2001}], "invalid_blocks"),
        ([{**IMAGE, "image_url": "ftp://example.com/a.png"}], "invalid_blocks"),
        ([{**IMAGE, "title": {"type": "mrkdwn", "text": "Q3"}}], "invalid_blocks"),  # a title is plain_text
        ([{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}], "invalid_blocks"),
        ([{"type": "nope"}], "invalid_blocks"),
        ("[not json", "invalid_blocks_format"),
    ],
)
def test_slack_refuses_blocks_as_slack_does(blocks: Any, error: str) -> None:
    with pytest.raises(SlackError) as refused:
        read_blocks({"blocks": blocks})
    assert refused.value.error == error


@pytest.mark.parametrize(
    ("embed", "field"),
    [
        ({"title": "x" * 257}, "embeds.0.title"),
        ({"description": "x" * 4097}, "embeds.0.description"),
        ({"image": {"url": "file:///a.png"}}, "embeds.0.image.url"),
        ({"url": "javascript:alert(1)"}, "embeds.0.url"),
    ],
)
def test_discord_refuses_embeds_past_their_limits(embed: dict[str, Any], field: str) -> None:
    with pytest.raises(ApiError) as refused:
        check_embeds([embed])
    assert refused.value.status == 400 and field in refused.value.body["errors"]


def test_discord_all_embeds_together_hold_6000_characters() -> None:
    with pytest.raises(ApiError):
        check_embeds([{"description": "x" * 4000}, {"description": "x" * 2001}])
    check_embeds([{"description": "x" * 4000, "image": {"url": "https://example.com/a.png"}}])
    assert shown_text("", [{"description": "Q3", "image": {"url": "https://e.com/a.png"}}]) == "Q3"
    assert shown_text("", [{"image": {"url": "https://e.com/a.png"}}]) == ""


@pytest.mark.parametrize("method", sorted(MEDIA_METHODS))
def test_telegram_each_media_method_needs_its_file_and_a_short_caption(method: str) -> None:
    field = MEDIA_METHODS[method]
    kind, file, caption, _ = media_content(method, {field: "https://example.com/f", "caption": "hi"})
    assert (kind, file, caption) == (field, "https://example.com/f", "hi")
    assert field in media_json(kind, file)
    with pytest.raises(TelegramError, match=f"there is no {field} in the request"):
        media_content(method, {"caption": "hi"})
    with pytest.raises(TelegramError, match="message caption is too long"):
        media_content(method, {field: "https://example.com/f", "caption": "x" * 1025})
