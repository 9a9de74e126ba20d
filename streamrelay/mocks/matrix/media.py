"""The mock homeserver's content repository: uploaded files by ``mxc://`` URI, the upload size limit, and files the
mock serves for a sidecar to fetch (rules: :mod:`mocks.matrix`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from streamrelay.mocks.matrix.wire import MAX_UPLOAD_BYTES, SERVER_NAME, MatrixError

MEDIA_MSGTYPES = frozenset({"m.image", "m.file", "m.audio", "m.video"})
"""The message types whose ``url`` is an ``mxc://`` URI of the content repository
(https://spec.matrix.org/latest/client-server-api/#mimage and the sections after it)."""


@dataclass(frozen=True)
class StoredMedia:
    """One uploaded file: its ``mxc://`` URI, ``Content-Type``, the ``filename`` of the upload's query and the
    bytes."""

    uri: str
    content_type: str
    filename: str | None
    data: bytes


class ContentRepository:
    """Uploaded files (``POST /_matrix/media/v3/upload``) and the limit the config route announces.

    Args:
        max_upload_bytes: ``m.upload.size``; a larger upload is 413 ``M_TOO_LARGE``.
    """

    def __init__(self, max_upload_bytes: int = MAX_UPLOAD_BYTES) -> None:
        self.max_upload_bytes = max_upload_bytes
        self.files: dict[str, StoredMedia] = {}
        """Uploaded files by ``mxc://`` URI, in upload order."""
        self.hosted: dict[str, tuple[str, bytes]] = {}
        """Files the mock serves at ``/_mock/files/{name}`` (``Content-Type``, bytes): what a media URL a sidecar
        fetches points at in tests and dry runs."""
        self._counter = 0

    def reset(self) -> None:
        """Forget uploads (hosted files are kept: they stand for the web outside the homeserver)."""
        self.files.clear()

    def upload(self, content_type: str, filename: str | None, data: bytes) -> StoredMedia:
        """Store an upload; a new URI each time (uploads carry no transaction id: the same bytes twice are two
        files, https://spec.matrix.org/latest/client-server-api/#post_matrixmediav3upload).

        Raises:
            MatrixError: 413 ``M_TOO_LARGE`` past :attr:`max_upload_bytes`.
        """
        if len(data) > self.max_upload_bytes:
            raise MatrixError(
                413, "M_TOO_LARGE", f"Upload request body is too large: {len(data)} > {self.max_upload_bytes} bytes"
            )
        self._counter += 1
        media_id = hashlib.sha256(f"{self._counter}".encode()).hexdigest()[:24]
        stored = StoredMedia(f"mxc://{SERVER_NAME}/{media_id}", content_type, filename, data)
        self.files[stored.uri] = stored
        return stored

    def check_url(self, msgtype: str, url: object) -> None:
        """A media message's ``url`` must be an ``mxc://`` URI this homeserver holds. Stricter than Synapse, which
        stores any content unchecked: the mock catches a sidecar that sends a link where an ``mxc://`` URI belongs.

        Raises:
            MatrixError: 400 ``M_BAD_JSON``.
        """
        if not isinstance(url, str) or url not in self.files:
            raise MatrixError(400, "M_BAD_JSON", f"{msgtype} needs 'url', an mxc:// URI of an upload: got {url!r}")
