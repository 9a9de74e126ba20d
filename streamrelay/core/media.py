"""Media out: one media item (an image, a file, an audio or a video by URL, with an optional caption) as the
core carries it from the ``media`` event (shared/DESIGN.md §3) to :meth:`core.ports.ChannelAdapter.send_media`.

A media item is always its own message, never merged into text buffers: the delivery modes end their text before it
and start a new message after it (:mod:`core.delivery.segments`). In the slot book and the ledger a media part's text
is :meth:`MediaItem.text` (``"<kind>: <url>"``, then a newline and the caption when there is one): what the live page
and the ledger show, the media part's delivery key (``(target, "media", text)``,
:func:`core.records.ledger.delivery_key`),
and what :meth:`MediaItem.from_text` reads back after a restart.

Rules checked at ingest (:mod:`core.events`), with the platforms they come from:

- ``media_kind``: ``image``, ``file``, ``audio`` or ``video``.
- ``url``: an absolute ``http``/``https`` URL of at most :data:`MAX_URL_CHARS` characters, no whitespace (Telegram
  fetches a file "by URL", https://core.telegram.org/bots/api#sending-files; a Slack image block's ``image_url`` is
  at most 3000 characters, https://docs.slack.dev/reference/block-kit/blocks/image-block; a Discord embed's
  ``url``/``image.url`` must be http(s), https://discord.com/developers/docs/resources/message#embed-object).
- ``url`` never carries credentials: a user name or password before its host (``https://user:secret@host/…``,
  ``https://token@host/…``) is refused (a 422 whose message does not repeat the URL), since the URL would reach the
  chat, the ledger, the logs and the live page as it is. Link a URL that needs none (public, or pre-signed: a
  signature in the query is the platform's to fetch with, never shown as a password).
- ``caption``: at most :data:`MAX_CAPTION_CHARS` UTF-16 units (Telegram: 0-1024 characters after entity parsing,
  https://core.telegram.org/bots/api#sendphoto, the strictest of the platforms). Counted like message text, in UTF-16
  units (an emoji past U+FFFF is 2), so a caption that passes fits whichever way a platform counts; its Markdown
  markup only adds to it here (Telegram counts after entity parsing, and the Telegram adapter checks that again).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_CAPTION_CHARS = 1024
"""The longest caption, in UTF-16 units: Telegram's caption limit (https://core.telegram.org/bots/api#sendphoto: 0-1024
characters after entity parsing), counted like message text."""
MAX_URL_CHARS = 2048
"""The longest media URL, in characters (inside Slack's 3000 of an image block's ``image_url``)."""
_NO_SPACE = re.compile(r"\S+")
_NOT_IN_URL = re.compile(r'[\x00-\x1f\x7f<>"{}|\\^`]')
"""Characters RFC 3986 does not allow in a URL unencoded (https://www.rfc-editor.org/rfc/rfc3986#section-2: they are
not among its reserved and unreserved characters): controls, ``<`` ``>`` ``"`` ``{`` ``}`` ``|``, the backslash,
``^`` and the backtick. Taken as they are, ``>`` and ``|`` end a Slack link early (``<url|label>``,
https://docs.slack.dev/messaging/formatting-message-text#linking-urls): ``https://x/a><!channel>`` would ping the
channel."""


_USERINFO = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:/*[^/?#@]*@")
"""A URL whose authority holds a userinfo part (RFC 3986 §3.2.1: ``user:password@``; its use is deprecated there)."""
CREDENTIALS_REFUSED = (
    "the URL carries credentials before its host (user:password@): they would reach the chat, the logs and the live "
    "page; link a URL that needs none (public, or pre-signed in its query)"
)
"""The refusal's message: it never repeats the URL (nor its password)."""


class CredentialsInUrlError(ValueError):
    """A media URL holds credentials (:data:`CREDENTIALS_REFUSED`): at ingest a 422 (well-formed, refused)."""


def has_credentials(url: str) -> bool:
    """``url`` holds a user name or password before its host (``scheme://user:secret@host``)."""
    return _USERINFO.match(url) is not None


class MediaKind(enum.StrEnum):
    """What a media item is: each platform sends it its own way (Telegram sendPhoto / sendDocument / sendAudio /
    sendVideo; Slack an image block or a link; Discord an image embed or a link)."""

    IMAGE = "image"
    FILE = "file"
    AUDIO = "audio"
    VIDEO = "video"


def check_media_url(url: str) -> str:
    """``url`` unchanged when it is an absolute ``http``/``https`` URL with a host, without whitespace or another
    character a URL must percent-encode (:data:`_NOT_IN_URL`), of at most :data:`MAX_URL_CHARS` characters.

    Raises:
        ValueError: what is wrong and what to send instead; a URL with credentials (:func:`has_credentials`) is
            refused first, as :class:`CredentialsInUrlError`, whose message never repeats the URL.
    """
    if has_credentials(url):
        raise CredentialsInUrlError(CREDENTIALS_REFUSED)
    if len(url) > MAX_URL_CHARS:
        raise ValueError(f"the URL has {len(url)} characters, at most {MAX_URL_CHARS} are taken: link a shorter one")
    if not _NO_SPACE.fullmatch(url):
        raise ValueError("the URL holds whitespace (or is empty): send one absolute http(s) URL, percent-encoded")
    if (bad := _NOT_IN_URL.search(url)) is not None:
        raise ValueError(
            f"the URL holds {bad.group()!r} at character {bad.start()}, which a URL may not hold as it is: "
            f"percent-encode it (%{ord(bad.group()):02X})"
        )
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ValueError(
            f"{url[:80]!r} is not an absolute http(s) URL: send e.g. 'https://example.com/chart.png' (the platforms "
            "fetch the file themselves, so a file path, a data: URL or a relative link cannot be shown)"
        )
    return url


def check_caption(caption: str) -> str:
    """``caption`` unchanged when it has at most :data:`MAX_CAPTION_CHARS` UTF-16 units.

    Raises:
        ValueError: it is longer (the message gives both lengths and the source of the limit).
    """
    units = len(caption) if caption.isascii() else len(caption.encode("utf-16-le", "surrogatepass")) // 2
    if units > MAX_CAPTION_CHARS:
        raise ValueError(
            f"the caption has {units} UTF-16 units, at most {MAX_CAPTION_CHARS} are taken (Telegram's caption limit, "
            "https://core.telegram.org/bots/api#sendphoto, counted like message text): shorten it or send the rest "
            "as text"
        )
    return caption


@dataclass(frozen=True)
class MediaItem:
    """One media item to send: ``url`` (absolute http(s)), ``kind`` and ``caption`` (None: no caption; at most
    :data:`MAX_CAPTION_CHARS` characters). The ingest checks come first (:mod:`core.events`); this type trusts them."""

    url: str
    kind: MediaKind
    caption: str | None = None

    def text(self) -> str:
        """The part's text in the slot book and the ledger: ``"<kind>: <url>"`` and, on the next line, the caption."""
        head = f"{self.kind}: {self.url}"
        return f"{head}\n{self.caption}" if self.caption else head

    @classmethod
    def from_text(cls, text: str) -> MediaItem:
        """The item whose :meth:`text` is ``text``.

        Raises:
            ValueError: ``text`` is not such a text (a ledger written by something else).
        """
        head, _, caption = text.partition("\n")
        kind, sep, url = head.partition(": ")
        if not sep or kind not in {k.value for k in MediaKind}:
            raise ValueError(f"not a media part's text: {text[:80]!r}")
        return cls(url=url, kind=MediaKind(kind), caption=caption or None)

    def link_text(self) -> str:
        """The item as one line of plain text for a person: the caption (or the kind) and the URL."""
        return f"{self.caption or self.kind.capitalize()}: {self.url}"
