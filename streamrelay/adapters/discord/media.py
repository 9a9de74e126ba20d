"""Media out on Discord: one message with one embed (https://discord.com/developers/docs/resources/message#embed-object).

- An image: the embed's ``image.url`` is the image's URL (Discord fetches and shows it), its ``description`` the
  caption.
- A file, an audio or a video: a link embed: ``title`` the file's name (at most 256 characters) linking to ``url``,
  ``description`` the caption.

Limits (https://discord.com/developers/docs/resources/message#embed-object-embed-limits): ``title`` 256 characters,
``description`` 4096, all of a message's embeds together 6000; ``url`` and ``image.url`` http(s). A caption is at
most 1024 characters at ingest (:mod:`core.media`), so it always fits. ``content`` stays empty: a person reads the
caption in the embed. The create carries the delivery id as its ``nonce`` like a text, so an uncertain media send is
settled the same way (the same create again, deduplicated by the nonce).
"""

from __future__ import annotations

from streamrelay.adapters.discord._sdk import discord
from streamrelay.adapters.discord.markdown import discord_markdown
from streamrelay.adapters.invisible import strip_invisible
from streamrelay.adapters.markdown_strip import strip_markdown
from streamrelay.core.media import MediaItem, MediaKind
from streamrelay.core.ports import TextFormat

MAX_TITLE_CHARS = 256
"""An embed title's limit (https://discord.com/developers/docs/resources/message#embed-object-embed-limits)."""
ICONS = {MediaKind.FILE: "📎", MediaKind.AUDIO: "🎵", MediaKind.VIDEO: "🎬", MediaKind.IMAGE: "🖼"}


def media_embed(media: MediaItem, fmt: TextFormat) -> discord.Embed:
    """The embed that shows ``media`` (module docstring); the caption rendered like a message's text in ``fmt``."""
    caption = strip_invisible(media.caption or "") or None
    if caption is not None and fmt is TextFormat.STRIPPED:
        caption = strip_markdown(caption)
    elif caption is not None and fmt is TextFormat.MARKDOWN:
        caption = discord_markdown(caption)
    if media.kind is MediaKind.IMAGE:
        return discord.Embed(description=caption).set_image(url=media.url)
    name = media.url.rstrip("/").rsplit("/", 1)[-1] or media.url
    title = f"{ICONS[media.kind]} {name}"[:MAX_TITLE_CHARS]
    return discord.Embed(title=title, url=media.url, description=caption)
