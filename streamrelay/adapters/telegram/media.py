"""Media out on Telegram: sendPhoto / sendDocument / sendAudio / sendVideo by URL, with a caption.

Bot API rules (https://core.telegram.org/bots/api#sendphoto, #senddocument, #sendaudio, #sendvideo,
https://core.telegram.org/bots/api#sending-files):

- The file is given by HTTP URL: Telegram fetches it (photos up to 5 MB, other files up to 20 MB by URL; the
  upload limits of 10 MB / 50 MB are for multipart uploads). A URL it cannot fetch is a 400 ("wrong file
  identifier/HTTP URL specified", "failed to get HTTP URL content"): the part fails with that cause.
- ``caption``: 0-1024 characters after entity parsing; rendered like a message text (:mod:`adapters.telegram.render`:
  text + ``caption_entities``, never ``parse_mode``; the adapter hands :func:`media_method` its rendering) and
  counted like one: the text after entity parsing, in UTF-16 units (:data:`MAX_CAPTION_UNITS`). Telegram's server
  counts code points (the mock does the same, for text and captions alike); a caption within 1024 UTF-16 units is
  within 1024 code points, so it is never refused for its length. Longer: refused before any call
  (:func:`check_caption`), as Telegram would with 400 "message caption is too long"
  (``PayloadRejectedError(too_long)``).
- ``image`` → sendPhoto, ``file`` → sendDocument, ``audio`` → sendAudio, ``video`` → sendVideo.
- A media message cannot carry a delivery id: an uncertain media send is settled like a text, by probing message
  ids (only with an exclusive bot token), with editMessageCaption of its caption instead of editMessageText
  (:mod:`adapters.telegram.settle`); without one it stays ``unknown``: reported uncertain, never sent again
  (:mod:`core.delivery.machine`).

:func:`media_method` builds the call; :meth:`~adapters.telegram.adapter.TelegramAdapter.send_media` makes it.
"""

from __future__ import annotations

from typing import Any

from aiogram.methods import SendAudio, SendDocument, SendPhoto, SendVideo, TelegramMethod
from aiogram.types import Message, ReplyParameters

from streamrelay.adapters.telegram.errors import PLATFORM
from streamrelay.adapters.telegram.render import Rendered
from streamrelay.core.errors import PayloadRejectedError, RejectReason, TargetNotFoundError
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem, MediaKind

METHODS: dict[MediaKind, str] = {
    MediaKind.IMAGE: "sendPhoto",
    MediaKind.FILE: "sendDocument",
    MediaKind.AUDIO: "sendAudio",
    MediaKind.VIDEO: "sendVideo",
}
"""The Bot API method of each kind of media."""

MAX_CAPTION_UNITS = 1024
"""A caption's limit after entity parsing, in UTF-16 units (https://core.telegram.org/bots/api#sendphoto: "0-1024
characters after entities parsing"; counted like message text, :data:`core.media.MAX_CAPTION_CHARS`)."""


def check_caption(caption: Rendered, target: Target) -> None:
    """Refuse a rendered caption past :data:`MAX_CAPTION_UNITS` before it is sent.

    Raises:
        core.errors.PayloadRejectedError: ``too_long``, with both lengths.
    """
    if caption.units > MAX_CAPTION_UNITS:
        raise PayloadRejectedError(
            f"telegram: the caption has {caption.units} UTF-16 units after entity parsing, at most "
            f"{MAX_CAPTION_UNITS} are sent (https://core.telegram.org/bots/api#sendphoto)",
            reason=RejectReason.TOO_LONG,
            platform=PLATFORM,
            target=str(target.chat_id),
        )


def media_method(target: Target, media: MediaItem, caption: Rendered | None) -> TelegramMethod[Message]:
    """The Bot API call that sends ``media`` to ``target`` (module docstring): the file by URL, ``caption`` (the
    item's caption rendered in the channel's format, None without one), ``message_thread_id`` and
    ``reply_parameters`` as :meth:`TelegramAdapter.send_text` sets them.

    Raises:
        core.errors.TargetNotFoundError: ``thread_id`` or ``reply_to`` is not an integer.
    """
    reply_to = _int(target.reply_to, target)
    fields: dict[str, Any] = {
        "chat_id": target.chat_id,
        "caption": None if caption is None else caption.text,
        "caption_entities": None if caption is None else caption.entities,
        "message_thread_id": _int(target.thread_id, target),
        "reply_parameters": (
            ReplyParameters(message_id=reply_to, allow_sending_without_reply=True) if reply_to is not None else None
        ),
    }
    if media.kind is MediaKind.IMAGE:
        return SendPhoto(photo=media.url, **fields)
    if media.kind is MediaKind.AUDIO:
        return SendAudio(audio=media.url, **fields)
    if media.kind is MediaKind.VIDEO:
        return SendVideo(video=media.url, **fields)
    return SendDocument(document=media.url, **fields)


def _int(value: int | str | None, target: Target) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise TargetNotFoundError(
            f"telegram: {value!r} is not a message id", platform=PLATFORM, target=str(target.chat_id)
        ) from None
