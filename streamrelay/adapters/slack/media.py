"""Media out on Slack: a chat.postMessage with blocks (:func:`adapters.slack.render.media_message`): an image block
for an image, a section block with a link for a file, an audio or a video, ``text`` as the notification fallback.

Slack fetches an image block's ``image_url`` itself (https://docs.slack.dev/reference/block-kit/blocks/image-block:
a public URL, at most 3000 characters; ``alt_text`` and ``title`` at most 2000). The create carries the delivery id
as message metadata like a text (https://docs.slack.dev/messaging/message-metadata), so an uncertain media send is
settled the same way (:mod:`adapters.slack.settle`: found by its delivery id, or not sent).
"""

from __future__ import annotations

from streamrelay.adapters.slack.connection import SlackConnection
from streamrelay.adapters.slack.render import media_message
from streamrelay.adapters.slack.settle import delivery_metadata, thread_ts
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem
from streamrelay.core.ports import TextFormat


async def post_media(
    connection: SlackConnection, target: Target, media: MediaItem, fmt: TextFormat, delivery_id: str | None
) -> str:
    """Post ``media`` as its own message (module docstring); return its ``ts``. ``thread_ts`` and the delivery id's
    ``metadata`` as :meth:`SlackAdapter.send_text` sets them.

    Raises:
        core.errors.UncertainDeliveryError: a timeout, a connection lost after sending, or a 5xx: the message may be
            stored (settled by its delivery id).
        core.errors.DeliveryError: another subclass, per :mod:`adapters.slack.errors` (``invalid_blocks``: a URL or
            text Slack refuses).
    """
    text, blocks = media_message(media, fmt)
    channel, thread = str(target.chat_id), thread_ts(target)
    metadata = None if delivery_id is None else delivery_metadata(delivery_id)
    answer = await connection.call(
        "chat.postMessage",
        target,
        lambda: connection.client.chat_postMessage(
            channel=channel, thread_ts=thread, metadata=metadata, text=text, blocks=blocks
        ),
    )
    return str(answer["ts"])
