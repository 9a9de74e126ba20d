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

mock, matrix = platform_fixtures(
    lambda: MockMatrix(max_upload_bytes=4_096),
    lambda url: MatrixAdapter(TOKEN, base_url=url, send_timeout_s=2.0),
    adapter="matrix",
)


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
