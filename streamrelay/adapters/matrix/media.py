"""Matrix media: a media item fetched from its URL, uploaded to the homeserver's content repository and sent as an
``m.image`` / ``m.file`` / ``m.audio`` / ``m.video`` message with its ``mxc://`` URI, as Matrix clients send files.

The steps (:meth:`adapters.matrix.adapter.MatrixAdapter.send_media` runs them):

1. The upload limit: ``GET /_matrix/client/v1/media/config`` (authenticated media, spec v1.11+) answers
   ``m.upload.size`` in bytes (https://spec.matrix.org/latest/client-server-api/#get_matrixclientv1mediaconfig);
   matrix-nio's ``content_repository_config`` asks it, once per adapter (None when the homeserver names none).
2. The file: ``GET`` of the item's URL (an http(s) URL without credentials, checked at ingest,
   :func:`core.media.check_media_url`), read to at most the limit (:func:`fetch`): the sidecar fetches it, since Matrix
   has no upload by URL. Redirects are followed (at most :data:`MAX_REDIRECTS`). The sidecar fetching a URL an agent
   names must not become a way into its own network (server-side request forgery: an agent's URL of
   ``http://169.254.169.254/...``, a cloud's metadata service, would be read and posted to the room): unless the
   channel sets ``media_fetch_private = true`` (a homeserver and files on a private network, or the mocks), only
   public addresses are fetched (:func:`is_public_address`): a literal address is checked before each request and
   after each redirect, a name where it is resolved (:class:`PublicResolver`, so a name re-resolved to a private
   address between a check and the connection is refused too,
   https://cheatsheetseries.owasp.org/cheatsheets/Server_Side_Request_Forgery_Prevention_Cheat_Sheet.html).
3. The upload: ``POST /_matrix/media/v3/upload?filename=`` with the bytes and their ``Content-Type`` (nio's
   ``upload``; the spec keeps uploads at this path, https://spec.matrix.org/latest/client-server-api/#post_matrixmediav3upload);
   the answer is ``content_uri``, an ``mxc://`` URI. A file over the limit is 413 ``M_TOO_LARGE``.
4. The message: ``msgtype`` by kind (image ``m.image``, video ``m.video``, audio ``m.audio``, file ``m.file``),
   ``url`` the ``mxc://`` URI, ``filename``, ``info`` (``mimetype``, ``size``), and the caption as ``body`` (with
   ``formatted_body`` when its Markdown formats anything); without a caption ``body`` is the file name
   (https://spec.matrix.org/latest/client-server-api/#mimage, "media captions" since v1.10).

Exactly once: the message is sent by transaction id like every send (the delivery id), so an uncertain send is
settled by sending it again (the homeserver answers the stored event). An upload has no transaction id: one whose
answer is lost leaves a file no message names, and the retry uploads again. That is harmless: the room shows one
message; the repository keeps an unreferenced copy (Synapse's media retention can purge it). Within one adapter the
``mxc://`` content of a delivery id is kept (:class:`UploadCache`), so a settle or a retry of the send after a good
upload does not upload again.

When the file cannot be carried (the URL does not answer 200 within the time, it is larger than ``m.upload.size``,
or the homeserver refuses it with ``M_TOO_LARGE``), the message is the link instead (``m.text`` ``caption: url``,
:func:`link_content`) and its :data:`MEDIA_KEY` says why (``fallback``): a person can still open it, and nothing is
dropped.
"""

from __future__ import annotations

import asyncio
import html
import ipaddress
import socket
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

import aiohttp
import yarl
from aiohttp.abc import AbstractResolver, ResolveResult

from streamrelay.adapters.matrix.render import HTML_FORMAT, markdown_html
from streamrelay.core.media import MediaItem, MediaKind

MEDIA_KEY = "io.streamrelay.media"
"""The content key that names a media item's message (``kind``, ``url``, ``caption``; ``fallback`` when it is a
link): a namespaced custom key, as the spec lets events carry (https://spec.matrix.org/latest/#namespacing); clients
ignore it."""
MSGTYPES = {
    MediaKind.IMAGE: "m.image",
    MediaKind.VIDEO: "m.video",
    MediaKind.AUDIO: "m.audio",
    MediaKind.FILE: "m.file",
}
MAX_REDIRECTS = 5
CHUNK_BYTES = 64 * 1024
UPLOAD_CACHE = 1_000
"""Uploaded contents kept by delivery id (the oldest forgotten past it)."""


PRIVATE_REFUSED = "is not a public address (set media_fetch_private = true on the channel to fetch from it)"


def is_public_address(address: str) -> bool:
    """Whether the IP ``address`` (v4 or v6 text) is a public one a media URL may be fetched from: Python's
    ``is_global`` (not loopback, private, link-local, shared, reserved or documentation ranges; IANA's special-purpose
    registries), an IPv4-mapped IPv6 address judged as its IPv4, and never multicast. Not an IP: False."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


class PublicResolver(AbstractResolver):
    """aiohttp's resolver keeping only public addresses (:func:`is_public_address`): the connection a media fetch
    opens can reach no private address whatever a name resolves to (module docstring, step 2).

    Raises (from :meth:`resolve`):
        OSError: the name resolves to no public address (aiohttp reports it as a ``ClientConnectorError``).
    """

    def __init__(self) -> None:
        self._resolver = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._resolver.resolve(host, port, family)
        public = [entry for entry in found if is_public_address(entry["host"])]
        if not public:
            raise OSError(f"{host} {PRIVATE_REFUSED}")
        return public

    async def close(self) -> None:
        await self._resolver.close()


def _literal_host_refused(url: str) -> str | None:
    """Why ``url`` may not be fetched when its host is a literal IP address that is not public (None: a name, or
    public). aiohttp connects to a literal address without asking the resolver. The host is read as aiohttp reads it
    (yarl, after IDNA normalisation), not as ``urlsplit`` does: ``127。0。0。1`` (ideographic full stops) or
    ``\uff11\uff12\uff17.0.0.1`` (fullwidth digits) is no address to ``urlsplit`` yet 127.0.0.1 to the connection."""
    try:
        host = yarl.URL(url).host or ""
    except ValueError:
        return None  # aiohttp cannot parse it either: its request fails (InvalidUrlClientError)
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None
    return None if is_public_address(host) else f"the URL's host {host} {PRIVATE_REFUSED}"


@dataclass(frozen=True)
class Fetched:
    """A fetched file: its bytes, ``Content-Type`` (without parameters) and a file name from the URL's path."""

    data: bytes
    content_type: str
    filename: str


async def fetch(
    session: aiohttp.ClientSession, url: str, limit: int | None, timeout_s: float, *, public_only: bool = True
) -> Fetched | str:
    """The file at ``url``, read to at most ``limit`` bytes (None: no limit known), or why not (a sentence).

    ``public_only``: refuse a literal private address in the URL or in a redirect (the session's resolver, a
    :class:`PublicResolver`, refuses names); redirects are followed here, at most :data:`MAX_REDIRECTS`, each one
    checked. Never raises for the URL's failures (a status other than 200, a connection refused, a timeout, too
    large, a private address): the caller sends the link instead."""
    try:
        async with asyncio.timeout(timeout_s):
            for _ in range(MAX_REDIRECTS + 1):
                if public_only and (refused := _literal_host_refused(url)) is not None:
                    return refused
                async with session.get(url, allow_redirects=False) as response:
                    if response.status in (301, 302, 303, 307, 308) and "Location" in response.headers:
                        url = urljoin(url, response.headers["Location"])
                        if urlsplit(url).scheme not in ("http", "https"):
                            return "the URL redirected to a URL that is not http(s)"
                        continue
                    read = await _read(response, limit)
                    break
            else:
                return f"the URL redirected more than {MAX_REDIRECTS} times"
    except TimeoutError:
        return f"the URL did not answer within {timeout_s:g} s"
    except aiohttp.ClientConnectorError as exc:
        if PRIVATE_REFUSED in str(exc.os_error):
            return f"the URL's host {exc.host} {PRIVATE_REFUSED}"
        return f"the URL could not be fetched ({type(exc).__name__})"
    except (aiohttp.ClientError, ValueError) as exc:
        return f"the URL could not be fetched ({type(exc).__name__})"
    if isinstance(read, str):
        return read
    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1]) or "file"
    return Fetched(read[0], read[1], name)


async def _read(response: aiohttp.ClientResponse, limit: int | None) -> tuple[bytes, str] | str:
    """The body of a final answer and its ``Content-Type``, read to at most ``limit`` bytes, or why not."""
    if response.status != 200:
        return f"the URL answered HTTP {response.status}"
    length = response.content_length
    if limit is not None and length is not None and length > limit:
        return f"the file has {length} bytes, over the homeserver's m.upload.size of {limit}"
    data = bytearray()
    async for chunk in response.content.iter_chunked(CHUNK_BYTES):
        data += chunk
        if limit is not None and len(data) > limit:
            return f"the file is over the homeserver's m.upload.size of {limit} bytes"
    return bytes(data), response.content_type or "application/octet-stream"


def file_content(media: MediaItem, uri: str, fetched: Fetched, mentions: bool) -> dict[str, Any]:
    """The content of a media message for an upload at ``uri`` (module docstring, step 4)."""
    content: dict[str, Any] = {
        "msgtype": MSGTYPES[media.kind],
        "body": media.caption or fetched.filename,
        "filename": fetched.filename,
        "url": uri,
        "info": {"mimetype": fetched.content_type, "size": len(fetched.data)},
        MEDIA_KEY: {"kind": str(media.kind), "url": media.url, "caption": media.caption or ""},
    }
    if media.caption:
        formatted = markdown_html(media.caption)
        if formatted != f"<p>{html.escape(media.caption, quote=False)}</p>":
            content["format"], content["formatted_body"] = HTML_FORMAT, formatted
    if not mentions:
        content["m.mentions"] = {}
    return content


def link_content(media: MediaItem, mentions: bool, fallback: str | None = None) -> dict[str, Any]:
    """The content of a media item sent as its link: an ``m.text`` (``body`` ``caption: url``, an ``<a>`` in
    ``formatted_body``) and :data:`MEDIA_KEY` naming the item and, when given, why it is no upload."""
    label = media.caption or media.kind.capitalize()
    marker: dict[str, Any] = {"kind": str(media.kind), "url": media.url, "caption": media.caption or ""}
    if fallback is not None:
        marker["fallback"] = fallback
    content: dict[str, Any] = {
        "msgtype": "m.text",
        "body": media.link_text(),
        "format": HTML_FORMAT,
        "formatted_body": f'<a href="{html.escape(media.url)}">{html.escape(label)}</a>',
        MEDIA_KEY: marker,
    }
    if not mentions:
        content["m.mentions"] = {}
    return content


class UploadCache:
    """The media content made for each delivery id (its upload done), bounded by :data:`UPLOAD_CACHE`."""

    def __init__(self) -> None:
        self._made: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def get(self, delivery_id: str) -> dict[str, Any] | None:
        """The content made for ``delivery_id``, or None."""
        return self._made.get(delivery_id)

    def put(self, delivery_id: str, content: dict[str, Any]) -> None:
        """Keep ``content`` for ``delivery_id``."""
        self._made[delivery_id] = content
        while len(self._made) > UPLOAD_CACHE:
            self._made.popitem(last=False)
