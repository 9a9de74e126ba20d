"""A run's sources (the ``citation`` events: web pages, documents the answer relies on), shown after the answer.

The person sees the run's sources once, as links after the answer: deduplicated by URL (the first appearance keeps
its place; a later title fills one the first lacked), numbered in order of first appearance, each title on one line
and escaped for the channel's format. Only an absolute ``http``/``https`` URL with a host is a link; a source without
one (a document citation, a ``gs://`` or ``file:`` address) is shown by its title, plain, or, with no title either,
counted in the last line: never dropped silently. At most :data:`MAX_SHOWN` are listed; the rest are counted.

The list is part of the final (:func:`with_sources` is applied at the commit point, :func:`core.run.stage.commit_point`)
so the exactly-once machinery of the final covers it: a restarted sidecar replays the journal's lines, which give the
same citations in the same order, hence the same text. Pure and deterministic; no I/O.

Markdown (``fmt`` ``markdown``: each platform renders it as links: Telegram ``text_link`` entities, Slack
``markdown_text``, Discord masked links, the web page's anchors)::

    **Sources**
    1. [Petco confirms security lapse](https://techcrunch.com/2025/12/05/petco/)
    2. Annual report 2024.pdf
    (+1 more without a title or link)

Plain (``fmt`` ``plain``): ``Sources:`` then ``1. Title: https://…`` lines (the platform links a bare URL itself).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from streamrelay.core.media import has_credentials
from streamrelay.core.ports import TextFormat
from streamrelay.core.text.fences import scan_fences

MAX_SHOWN = 20
"""The most sources listed after an answer; the rest are counted in the last line."""
TITLE_MAX_CHARS = 200
"""The longest title shown (characters; ``…`` marks a cut)."""
LINK_URL_MAX_CHARS = 1500
"""The longest URL shown as a link (characters): a Markdown link counts its URL in the message (Discord: 2,000
characters), so a longer one (a signed URL) is shown by its title, or counted."""
BARE_URL_MAX_CHARS = 60
"""The longest link text made of a URL's host and path when a source has no title (characters)."""
HEADING_MARKDOWN = "**Sources**"
HEADING_PLAIN = "Sources:"

_SPACES = re.compile(r"\s+")
_MD_ESCAPE = re.compile(r"([\\`*_\[\]<>~])")
"""ASCII punctuation that may start or end Markdown markup in a title (emphasis, code, a link's brackets, an autolink
or HTML tag), backslash-escaped (CommonMark lets a backslash escape any ASCII punctuation; Telegram's converter,
Discord and the page's markdown-it read it so). Others (``|``, ``#``, ``(``) mean nothing mid-line in a list item."""
_URL_UNSAFE = re.compile(r"[\x00-\x20\x7f\"<>\\^`{|}]")
"""Characters an absolute URL never holds unescaped (RFC 3986): a URL with one is not shown as a link."""
_URL_ENCODE = {"(": "%28", ")": "%29", "[": "%5B", "]": "%5D"}
"""Characters of a link's path, query or fragment percent-encoded in Markdown (the same address to a browser), so no
renderer reads them as the end of the link (an unbalanced parenthesis ends it in CommonMark and Discord)."""


@dataclass(slots=True)
class SourceRef:
    """One source: its ``url`` as given (None: it has none) and its ``title`` (None: untitled)."""

    url: str | None
    title: str | None


def link_url(url: str | None) -> str | None:
    """``url`` when it can be shown as a link: an absolute ``http``/``https`` URL with a host, at most
    :data:`LINK_URL_MAX_CHARS` long, with no whitespace, control or other character a URL never holds unescaped and no
    credentials before its host (``user:password@``, :func:`core.media.has_credentials`); else None. Pure."""
    if not url:
        return None
    url = url.strip()
    if len(url) > LINK_URL_MAX_CHARS or _URL_UNSAFE.search(url) is not None or has_credentials(url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return url


def one_line_title(title: str | None) -> str:
    """``title`` on one line (runs of whitespace as one space), cut to :data:`TITLE_MAX_CHARS`; ``""`` for none."""
    text = _SPACES.sub(" ", title or "").strip()
    return text if len(text) <= TITLE_MAX_CHARS else text[: TITLE_MAX_CHARS - 1] + "…"


class SourceList:
    """A run's (or a sub-agent's) sources in order of first appearance, deduplicated (by URL; a source without a URL
    by its title). O(1) per :meth:`add`."""

    __slots__ = ("_by_key", "items")

    def __init__(self) -> None:
        self.items: list[SourceRef] = []
        self._by_key: dict[str, SourceRef] = {}

    def __len__(self) -> int:
        return len(self.items)

    def add(self, url: str | None, title: str | None) -> bool:
        """Take one source; True when it changed the list (a new source, or a title for one that had none)."""
        url = (url or "").strip() or None
        title = one_line_title(title) or None
        if url is None and title is None:
            return False
        key = "u:" + url if url is not None else "t:" + (title or "")
        known = self._by_key.get(key)
        if known is not None:
            if known.title is None and title is not None:
                known.title = title
                return True
            return False
        ref = self._by_key[key] = SourceRef(url, title)
        self.items.append(ref)
        return True

    def render(self, fmt: TextFormat) -> str:
        """The list as the channel shows it after the answer (module docstring), or ``""`` when there is none."""
        if not self.items:
            return ""
        markdown = fmt is not TextFormat.PLAIN
        lines = [HEADING_MARKDOWN if markdown else HEADING_PLAIN]
        untitled = over = 0
        for ref in self.items:
            line = _line(ref, markdown)
            if line is None:
                untitled += 1
            elif len(lines) > MAX_SHOWN:
                over += 1
            else:
                lines.append(f"{len(lines)}. {line}")
        counted = [f"+{over} more"] if over else []
        if untitled:
            counted.append(f"+{untitled} without a title or link")
        if counted:
            lines.append(f"({', '.join(counted)})")
        return "\n".join(lines)


def _line(ref: SourceRef, markdown: bool) -> str | None:
    """One source's line without its number, or None when it has nothing to show (no link, no title: counted)."""
    url = link_url(ref.url)
    title = ref.title or ""
    if url is None:
        if not title:
            return None
        return _MD_ESCAPE.sub(r"\\\1", title) if markdown else title
    if not markdown:
        return f"{title}: {url}" if title else url
    text = _MD_ESCAPE.sub(r"\\\1", title or _bare(url))
    return f"[{text}]({_md_destination(url)})"


def _bare(url: str) -> str:
    """A link text for an untitled URL: its host and path, cut to :data:`BARE_URL_MAX_CHARS`."""
    parts = urlsplit(url)
    text = (parts.hostname or "") + (parts.path if parts.path != "/" else "")
    return text if len(text) <= BARE_URL_MAX_CHARS else text[: BARE_URL_MAX_CHARS - 1] + "…"


def _md_destination(url: str) -> str:
    """``url`` as a Markdown link destination: what follows its host percent-encoded where a renderer could misread
    it (:data:`_URL_ENCODE`)."""
    end = url.index("//") + 2 + len(urlsplit(url).netloc)
    return url[:end] + "".join(_URL_ENCODE.get(ch, ch) for ch in url[end:])


def with_sources(answer: str, sources: SourceList, fmt: TextFormat) -> str:
    """The final text the channel shows: ``answer``, then a blank line and the sources (:meth:`SourceList.render`);
    ``answer`` itself when there are none. A Markdown answer that ends inside an open code fence gets the fence closed
    first, so the list is never shown as code. O(len(answer)) when there are sources, O(1) otherwise."""
    block = sources.render(fmt)
    if not block:
        return answer
    if fmt is not TextFormat.PLAIN and ("```" in answer or "~~~" in answer):
        opener = scan_fences(answer).open_line
        if opener is not None:
            marker = opener.lstrip(" >-*+0123456789.)")
            fence = marker[: len(marker) - len(marker.lstrip(marker[0]))] if marker else "```"
            answer = answer.rstrip("\n") + "\n" + fence
    return f"{answer.rstrip()}\n\n{block}" if answer.strip() else block
