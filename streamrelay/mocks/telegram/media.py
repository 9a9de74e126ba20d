"""Media messages as the mock Telegram keeps them: sendPhoto, sendDocument, sendAudio and sendVideo, their captions
and their objects.

Rules (https://core.telegram.org/bots/api#sendphoto, https://core.telegram.org/bots/api#senddocument,
https://core.telegram.org/bots/api#sendaudio, https://core.telegram.org/bots/api#sendvideo):

- The file is ``photo`` / ``document`` / ``audio`` / ``video``: a file id, an HTTP URL, or an upload
  (``attach://<part>`` with a multipart part, as aiogram sends an ``InputFile``). The mock never fetches a URL nor
  reads an upload: any non-empty value is a file. Missing or empty: 400 ``Bad Request: there is no photo in the
  request`` (``document``, ``audio``, ``video`` likewise).
- ``caption`` (optional) with ``caption_entities`` or ``parse_mode``, parsed and trimmed like a message text;
  0-1024 characters after entity parsing, counted in code points like a message text (:mod:`mocks.telegram.content`),
  else 400 ``Bad Request: message caption is too long``.
- What a person sees of it, and what ``visible`` and the control API show, is the caption (``""`` without one);
  editMessageText on it is 400 ``Bad Request: there is no text in the message to edit``.
- editMessageCaption (https://core.telegram.org/bots/api#editmessagecaption) changes it: the same caption again is
  400 "message is not modified" (what a settle probe reads); on a text message it is 400 ``Bad Request: there is no
  caption in the message to edit``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from streamrelay.mocks.telegram.content import Entity, parsed
from streamrelay.mocks.telegram.wire import bad

MEDIA_METHODS = {"sendPhoto": "photo", "sendDocument": "document", "sendAudio": "audio", "sendVideo": "video"}
"""Media methods and the parameter (and message field) of their file."""

MAX_CAPTION_CHARS = 1024
"""Caption limit after entity parsing (https://core.telegram.org/bots/api#sendphoto), counted as the server counts a
message's text (:data:`mocks.telegram.content.MAX_TEXT_CHARS`): in code points. The adapter sends at most 1024 UTF-16
units, never more code points than that."""

NO_TEXT_TO_EDIT = "there is no text in the message to edit"
"""editMessageText on a media message (https://core.telegram.org/bots/api#editmessagetext: edit its caption)."""
NO_CAPTION_TO_EDIT = "there is no caption in the message to edit"
"""editMessageCaption on a text message."""


def caption_content(params: Mapping[str, Any]) -> tuple[str, list[Entity]]:
    """The caption and its entities of an editMessageCaption, or a 400 like Telegram's (too long)."""
    caption, entities = parsed(params, "caption", "caption_entities")
    if len(caption) > MAX_CAPTION_CHARS:
        raise bad("message caption is too long")
    return caption, entities


def media_content(method: str, params: Mapping[str, Any]) -> tuple[str, str, str, list[Entity]]:
    """``(kind, file, caption, caption entities)`` of a media send, or a 400 like Telegram's."""
    kind = MEDIA_METHODS[method]
    file = params.get(kind)
    if not isinstance(file, str) or not file.strip():
        raise bad(f"there is no {kind} in the request")
    caption, entities = parsed(params, "caption", "caption_entities")
    if len(caption) > MAX_CAPTION_CHARS:
        raise bad("message caption is too long")
    return kind, file, caption, entities


def media_json(kind: str, file: str) -> dict[str, Any]:
    """The message field of the file: ``photo`` (a list of PhotoSize), ``document`` (a Document), ``audio`` (an
    Audio) or ``video`` (a Video) (https://core.telegram.org/bots/api#message); ids are derived from the file as
    given."""
    digest = hashlib.sha256(file.encode()).hexdigest()
    file_id, unique = f"AgAC{digest[:40]}", digest[:16]
    if kind == "photo":
        return {"photo": [{"file_id": file_id, "file_unique_id": unique, "width": 1280, "height": 720, "file_size": 1}]}
    name = file.rsplit("/", 1)[-1] or "file"
    common = {"file_id": file_id, "file_unique_id": unique, "file_name": name, "file_size": 1}
    if kind == "audio":
        return {"audio": {**common, "duration": 1}}
    if kind == "video":
        return {"video": {**common, "width": 1280, "height": 720, "duration": 1}}
    return {"document": common}
