"""Breaker findings on issue 15's media out: a media URL or caption that turns into a mention on Slack."""

from __future__ import annotations

import pytest

from streamrelay.adapters.slack.render import media_message
from streamrelay.core.media import MediaItem, MediaKind, check_media_url
from streamrelay.core.ports import TextFormat


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example/x><!channel><",  # was taken: in Slack's <url|label> it closed the link, pinged @channel
        "https://evil.example/a|<!here>",
        'https://evil.example/"onmouseover="x',
        "https://evil.example/a`b",
        "https://evil.example/{a}",
        "https://evil.example/a\\b",
    ],
)
def test_a_media_url_with_characters_a_url_must_percent_encode_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="percent-encode"):
        check_media_url(url)


def test_a_percent_encoded_url_is_taken() -> None:
    url = "https://example.com/a%7Cb%3C%3E.png?x=1&y=%22q%22#frag"
    assert check_media_url(url) == url


@pytest.mark.parametrize("kind", [MediaKind.IMAGE, MediaKind.FILE])
def test_a_slack_media_messages_notification_text_escapes_the_caption(kind: MediaKind) -> None:
    # was: the fallback 'text' (what Slack notifies with, parsed as mrkdwn) held the caption raw: <!channel> pinged
    item = MediaItem(url="https://example.com/chart.png", kind=kind, caption="<!channel> look & see")
    text, blocks = media_message(item, TextFormat.PLAIN)
    assert "<!channel>" not in text and "&lt;!channel&gt; look &amp; see" in text
    mrkdwn = [b["text"]["text"] for b in blocks if b.get("text", {}).get("type") == "mrkdwn"]
    assert all("<!channel>" not in t for t in mrkdwn)
