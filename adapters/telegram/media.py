"""Media out on Telegram: sendPhoto / sendDocument / sendAudio / sendVideo by URL, with a caption.

Bot API rules (https://core.telegram.org/bots/api#sendphoto, #senddocument, #sendaudio, #sendvideo,
https://core.telegram.org/bots/api#sending-files):

- The file is given by HTTP URL: Telegram fetches it (photos up to 5 MB, other files up to 20 MB by URL; the
  upload limits of 10 MB / 50 MB are for multipart uploads). A URL it cannot fetch is a 400 ("wrong file
  identifier/HTTP URL specified", "failed to get HTTP URL content"): the part fails with that cause.
- ``caption``: 0-1024 characters after entity parsing; rendered like a message text (:mod:`adapters.telegram.render`:
  text + ``caption_entities``, never ``parse_mode``). Longer: 400 "message caption is too long"
  (``PayloadRejectedError(too_long)``).
- ``image`` → sendPhoto, ``file`` → sendDocument, ``audio`` → sendAudio, ``video`` → sendVideo.
- A media message cannot carry a delivery id: an uncertain media send is settled like a text, by probing message
  ids (only with an exclusive bot token), with editMessageCaption of its caption instead of editMessageText
  (:mod:`adapters.telegram.settle`); without one it stays ``unknown``: reported uncertain, never sent again
  (:mod:`core.delivery.settling`).
"""

from __future__ import annotations

from typing import Any, TypeVar

from aiogram.methods import SendAudio, SendDocument, SendPhoto, SendVideo, TelegramMethod
from aiogram.types import Message, ReplyParameters

from adapters.telegram.errors import PLATFORM
from adapters.telegram.render import render
from core.errors import TargetNotFoundError
from core.events import Target
from core.media import MediaItem, MediaKind
from core.ports import TextFormat

T = TypeVar("T")

METHODS: dict[MediaKind, str] = {
    MediaKind.IMAGE: "sendPhoto",
    MediaKind.FILE: "sendDocument",
    MediaKind.AUDIO: "sendAudio",
    MediaKind.VIDEO: "sendVideo",
}
"""The Bot API method of each kind of media."""


def media_method(target: Target, media: MediaItem, fmt: TextFormat) -> TelegramMethod[Message]:
    """The Bot API call that sends ``media`` to ``target`` (module docstring): the file by URL, the caption rendered
    in ``fmt``, ``message_thread_id`` and ``reply_parameters`` as :meth:`TelegramAdapter.send_text` sets them.

    Raises:
        core.errors.TargetNotFoundError: ``thread_id`` or ``reply_to`` is not an integer.
    """
    caption, entities = render(media.caption, fmt) if media.caption else (None, None)
    reply_to = _int(target.reply_to, target)
    fields: dict[str, Any] = {
        "chat_id": target.chat_id,
        "caption": caption,
        "caption_entities": entities,
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


class TelegramMedia:
    """``send_media`` of :class:`~adapters.telegram.adapter.TelegramAdapter` (mixed in; it provides ``_call``)."""

    async def _call(self, method: TelegramMethod[T], target: Target) -> T:
        raise NotImplementedError

    async def send_media(
        self, target: Target, media: MediaItem, fmt: TextFormat, *, delivery_id: str | None = None
    ) -> str:
        """Send ``media`` as its own message (:func:`media_method`); return its message id. ``delivery_id`` is not
        sent: a Telegram message cannot carry one.

        Raises:
            core.errors.UncertainDeliveryError: a timeout, a connection lost after sending, or a 5xx: it may be
                stored (settled by probing ids with an exclusive bot, else reported, never sent again).
            core.errors.PayloadRejectedError: the caption is too long (``too_long``) or cannot be parsed.
            core.errors.DeliveryError: another subclass, per :mod:`adapters.telegram.errors` (a URL Telegram
                cannot fetch: the part fails with Telegram's description).
        """
        sent = await self._call(media_method(target, media, fmt), target)
        return str(sent.message_id)


def _int(value: int | str | None, target: Target) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise TargetNotFoundError(
            f"telegram: {value!r} is not a message id", platform=PLATFORM, target=str(target.chat_id)
        ) from None
