"""Matrix media through matrix-nio against the mock homeserver: fetched, uploaded to the content repository
(``POST /_matrix/media/v3/upload``), sent as ``m.image`` / ``m.file`` with the ``mxc://`` URI; the upload limit read
from ``/_matrix/client/v1/media/config``; a file past it sent as its link; an uncertain send stays exactly once."""

from __future__ import annotations

import pytest

from streamrelay.adapters.matrix import MatrixAdapter
from streamrelay.core.errors import PlatformUnavailableError, UncertainDeliveryError
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem, MediaKind
from streamrelay.core.ports import PendingSend, SettleOutcome, TextFormat
from streamrelay.mocks.matrix import MockMatrix
from tests.contract.conftest import platform_fixtures

TOKEN = "syt_c3RyZWFtcmVsYXk_mockSecretToken0123456789_1a2b3c"
ROOM = "!media:mock.local"
TARGET = Target(chat_id=ROOM)
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 2_000


def _private_ok(url: str) -> MatrixAdapter:
    """The mock serves its files on 127.0.0.1: the channel's ``media_fetch_private = true``."""
    adapter = MatrixAdapter(TOKEN, base_url=url, send_timeout_s=2.0)
    adapter.allow_private_media()
    return adapter


mock, matrix = platform_fixtures(lambda: MockMatrix(max_upload_bytes=4_096), _private_ok, adapter="matrix")


def calls(mock: MockMatrix, method: str) -> int:
    return sum(1 for c in mock.calls if c.method == method)


async def test_an_image_is_uploaded_and_sent_as_m_image_with_its_mxc_uri(
    mock: MockMatrix, matrix: MatrixAdapter
) -> None:
    url = mock.host_file("chart.png", PNG, "image/png")
    item = MediaItem(url=url, kind=MediaKind.IMAGE, caption="Q3 **revenue**")
    event_id = await matrix.send_media(TARGET, item, TextFormat.MARKDOWN, delivery_id="sr-img")
    [(event, content)] = mock.messages(ROOM)
    assert event.event_id == event_id and content["msgtype"] == "m.image"
    stored = mock.media.files[content["url"]]
    assert stored.data == PNG and stored.content_type == "image/png" and stored.filename == "chart.png"
    assert content["info"] == {"mimetype": "image/png", "size": len(PNG)} and content["filename"] == "chart.png"
    assert content["body"] == "Q3 **revenue**" and "<strong>revenue</strong>" in content["formatted_body"]
    assert mock.visible(ROOM) == [(event_id, "Q3 **revenue**")]
    assert calls(mock, "media_config") == 1 and calls(mock, "upload") == 1


async def test_a_file_without_caption_is_m_file_named_by_its_file_name(mock: MockMatrix, matrix: MatrixAdapter) -> None:
    url = mock.host_file("report q3.pdf", b"%PDF-1.7 ...", "application/pdf")
    await matrix.send_media(TARGET, MediaItem(url=url, kind=MediaKind.FILE), TextFormat.MARKDOWN)
    [(_, content)] = mock.messages(ROOM)
    assert (content["msgtype"], content["body"], content["filename"]) == ("m.file", "report q3.pdf", "report q3.pdf")


async def test_a_file_over_m_upload_size_is_sent_as_its_link_without_uploading(
    mock: MockMatrix, matrix: MatrixAdapter
) -> None:
    url = mock.host_file("big.png", b"x" * 5_000, "image/png")
    await matrix.send_media(TARGET, MediaItem(url=url, kind=MediaKind.IMAGE, caption="Big"), TextFormat.MARKDOWN)
    [(_, content)] = mock.messages(ROOM)
    assert content["msgtype"] == "m.text" and content["body"] == f"Big: {url}"
    assert "m.upload.size of 4096" in content["io.streamrelay.media"]["fallback"]
    assert calls(mock, "upload") == 0 and not mock.media.files


async def test_the_homeserver_refuses_an_oversize_upload_with_m_too_large(
    mock: MockMatrix, matrix: MatrixAdapter
) -> None:
    """The config said more than the upload route takes (an operator lowered it): 413 M_TOO_LARGE, then the link."""
    mock.add_fault("media_config", 1, {"status": 200, "body": {"m.upload.size": 1_000_000}})
    url = mock.host_file("big.png", b"x" * 5_000, "image/png")
    await matrix.send_media(TARGET, MediaItem(url=url, kind=MediaKind.IMAGE), TextFormat.MARKDOWN)
    [upload] = [c for c in mock.calls if c.method == "upload"]
    assert (upload.status, upload.description) == (
        413,
        "M_TOO_LARGE: Upload request body is too large: 5000 > 4096 bytes",
    )
    [(_, content)] = mock.messages(ROOM)
    assert content["msgtype"] == "m.text" and "M_TOO_LARGE" in content["io.streamrelay.media"]["fallback"]


async def test_a_url_that_does_not_answer_200_is_sent_as_its_link(mock: MockMatrix, matrix: MatrixAdapter) -> None:
    url = mock.control_url + "/files/missing.png"
    await matrix.send_media(TARGET, MediaItem(url=url, kind=MediaKind.IMAGE, caption="Gone"), TextFormat.MARKDOWN)
    [(_, content)] = mock.messages(ROOM)
    assert (
        content["body"] == f"Gone: {url}" and content["io.streamrelay.media"]["fallback"] == "the URL answered HTTP 404"
    )


async def test_the_mock_refuses_a_media_message_whose_url_is_no_upload(mock: MockMatrix, matrix: MatrixAdapter) -> None:
    from nio import RoomSendError

    client = matrix._conn.client
    matrix._conn.session()
    answer = await client.room_send(ROOM, "m.room.message", {"msgtype": "m.image", "body": "x", "url": "https://e.x/a"})
    assert isinstance(answer, RoomSendError) and answer.status_code == "M_BAD_JSON"


async def test_an_uncertain_media_send_is_settled_once_without_a_second_upload(
    mock: MockMatrix, matrix: MatrixAdapter
) -> None:
    url = mock.host_file("chart.png", PNG, "image/png")
    item = MediaItem(url=url, kind=MediaKind.IMAGE, caption="Once")
    mock.add_fault("send", 1, "timeout_after_commit")
    matrix.send_timeout_s = 0.5
    with pytest.raises(UncertainDeliveryError):
        await matrix.send_media(TARGET, item, TextFormat.MARKDOWN, delivery_id="sr-once")
    settled = await matrix.settle_send(TARGET, PendingSend("sr-once", item.text(), TextFormat.MARKDOWN, media=item))
    [(event_id, shown)] = mock.visible(ROOM)
    assert (settled.outcome, settled.message_id, shown) == (SettleOutcome.FOUND, event_id, "Once")
    assert calls(mock, "upload") == 1 and len(mock.media.files) == 1  # the content was kept: no second upload


async def test_a_lost_upload_answer_is_retried_and_leaves_one_message(mock: MockMatrix, matrix: MatrixAdapter) -> None:
    """An upload has no transaction id: its answer lost (a 5xx after storing), the retry uploads again. The room
    shows one message; the repository keeps one unreferenced file (harmless)."""
    url = mock.host_file("chart.png", PNG, "image/png")
    item = MediaItem(url=url, kind=MediaKind.IMAGE, caption="Retry")
    mock.add_fault("upload", 1, {"status": 502, "description": "bad gateway"}, after_commit=True)
    with pytest.raises(PlatformUnavailableError):
        await matrix.send_media(TARGET, item, TextFormat.MARKDOWN, delivery_id="sr-retry")
    assert mock.messages(ROOM) == []  # no message was sent: not uncertain
    await matrix.send_media(TARGET, item, TextFormat.MARKDOWN, delivery_id="sr-retry")
    [(_, content)] = mock.messages(ROOM)
    assert len(mock.media.files) == 2 and content["url"] == list(mock.media.files)[1]


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("2606:4700::1111", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # a cloud's metadata service
        ("100.64.0.1", False),  # shared address space (carrier-grade NAT)
        ("0.0.0.0", False),
        ("::1", False),
        ("fe80::1%eth0", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),  # IPv4-mapped loopback
        ("::ffff:8.8.8.8", True),
        ("224.0.0.1", False),
        ("example.com", False),  # not an address
    ],
)
def test_only_public_addresses_are_fetched_by_default(address: str, public: bool) -> None:
    from streamrelay.adapters.matrix.media import is_public_address

    assert is_public_address(address) is public


async def test_a_media_url_on_a_private_address_is_sent_as_its_link_unless_the_channel_allows_it(
    mock: MockMatrix,
) -> None:
    """Server-side request forgery: the sidecar fetches a Matrix media URL itself, so an agent's URL naming the
    sidecar's own network (127.0.0.1 here, by address and by name; 169.254.169.254 in a cloud) is not fetched: the
    message is the link, with the reason; nothing is uploaded."""
    url = mock.host_file("secret.txt", b"internal only", "text/plain")
    port = url.split(":")[2].split("/")[0]
    adapter = MatrixAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=2.0)
    try:
        for link in (url, f"http://localhost:{port}/_mock/files/secret.txt", "http://[::1]:1/x"):
            await adapter.send_media(TARGET, MediaItem(url=link, kind=MediaKind.FILE), TextFormat.MARKDOWN)
        contents = [content for _, content in mock.messages(ROOM)]
        assert [c["msgtype"] for c in contents] == ["m.text"] * 3
        reasons = [c["io.streamrelay.media"]["fallback"] for c in contents]
        assert reasons == [
            "the URL's host 127.0.0.1 is not a public address (set media_fetch_private = true on the channel to "
            "fetch from it)",
            "the URL's host localhost is not a public address (set media_fetch_private = true on the channel to "
            "fetch from it)",
            "the URL's host ::1 is not a public address (set media_fetch_private = true on the channel to fetch "
            "from it)",
        ]
        assert calls(mock, "upload") == 0 and not mock.media.files
        adapter.allow_private_media()
        await adapter.send_media(TARGET, MediaItem(url=url, kind=MediaKind.FILE), TextFormat.MARKDOWN)
        assert mock.messages(ROOM)[-1][1]["msgtype"] == "m.file" and calls(mock, "upload") == 1
    finally:
        await adapter.close()


async def test_a_private_address_spelled_with_unicode_dots_or_digits_is_not_fetched(mock: MockMatrix) -> None:
    """An address the URL parser and the HTTP client read differently: ``127。0。0。1`` (ideographic full stops) and
    ``\uff11\uff12\uff17.0.0.1`` (fullwidth digits) are no IP address to ``urlsplit`` but are 127.0.0.1 once yarl's IDNA
    normalisation has run, and aiohttp connects to a literal address without asking the resolver: both fetched the
    sidecar's own file (the breaker's probe). The host is judged as the client will connect to it."""
    url = mock.host_file("secret.txt", b"internal only", "text/plain")
    port = url.split(":")[2].split("/")[0]
    adapter = MatrixAdapter(TOKEN, base_url=mock.base_url, send_timeout_s=2.0)
    try:
        for host in ("127\u30020\u30020\u30021", "\uff11\uff12\uff17.0.0.1", "127\uff0e0\uff0e0\uff0e1"):
            link = f"http://{host}:{port}/_mock/files/secret.txt"
            await adapter.send_media(TARGET, MediaItem(url=link, kind=MediaKind.FILE), TextFormat.MARKDOWN)
        contents = [content for _, content in mock.messages(ROOM)]
        assert [c["msgtype"] for c in contents] == ["m.text"] * 3
        assert all("127.0.0.1 is not a public address" in c["io.streamrelay.media"]["fallback"] for c in contents)
        assert calls(mock, "upload") == 0 and not mock.media.files
    finally:
        await adapter.close()
