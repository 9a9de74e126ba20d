"""The Stop control on Slack (:class:`core.ports.StopControls`): an ``actions`` block with one button.

Web API and Block Kit rules:

- A message with a button is a message with ``blocks``: its text goes in a ``markdown`` block (standard Markdown,
  at most 12,000 characters, https://docs.slack.dev/reference/block-kit/blocks/markdown-block), then an ``actions``
  block whose button has ``text`` (``plain_text``, at most 75 characters), ``action_id`` and ``value`` (the control
  id, ``stop:<16 hex>``; action_id at most 255 characters)
  (https://docs.slack.dev/reference/block-kit/blocks/actions-block). The top-level ``text`` is then the
  notification fallback; ``markdown_text`` cannot go with ``blocks``
  (https://docs.slack.dev/reference/methods/chat.postMessage).
- chat.update replaces the blocks it is given and keeps the previous ones when it is given none
  (https://docs.slack.dev/reference/methods/chat.update): so once a message carried the control, every edit of it
  sends its blocks (the text block, and the button while the control is on), never ``markdown_text`` alone, which
  would leave the old text showing.
- A click reaches the app as a ``block_actions`` interaction payload
  (https://docs.slack.dev/reference/interaction-payloads/block_actions-payload); the app acknowledges it within 3 s
  and forwards the stop (README: Slack Bolt snippet).

:class:`StopMarks` remembers which messages carry (or carried) a control, so the adapter's edits send their blocks;
:func:`stop_blocks` is such a body; :meth:`~adapters.slack.adapter.SlackAdapter.set_stop` makes the chat.update.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from streamrelay.adapters.invisible import strip_invisible
from streamrelay.adapters.slack.render import INERT, Rendered, escape_text, stream_markdown
from streamrelay.core.events import Target
from streamrelay.core.ports import MarkupPermissions, StopControl, TextFormat

MAX_BUTTON_TEXT = 75
MAX_MARKED = 10_000
STOP_BLOCK_ID = "streamrelay_stop"


@dataclass(frozen=True)
class BlocksBody:
    """A chat.update body with ``blocks`` (the text's ``markdown`` block, and the Stop button when on); ``text`` is
    the notification fallback."""

    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)

    def args(self) -> dict[str, Any]:
        """Keyword arguments for chat.update."""
        return {"text": self.text, "blocks": self.blocks}


def stop_blocks(
    text: str, fmt: TextFormat, control: StopControl | None, rendered: Rendered, allowed: MarkupPermissions = INERT
) -> BlocksBody:
    """The body of a message showing ``text`` in ``fmt`` (``rendered``: its rendering,
    :func:`adapters.slack.render.render`; ``allowed``: the channel's mentions and links) with ``control``'s button
    (or without one: None). The notification fallback is ``text`` escaped (mrkdwn would act on ``<!channel>``).

    Raises:
        ValueError: the button's label is over 75 characters.
    """
    blocks: list[dict[str, Any]] = [{"type": "markdown", "text": stream_markdown(text, fmt, allowed)}]
    if control is not None:
        elements = []
        for i, (control_id, label) in enumerate(control.buttons()):
            if len(label) > MAX_BUTTON_TEXT:
                raise ValueError(f"a Slack button's text is at most {MAX_BUTTON_TEXT} characters: {label!r}")
            button = {
                "type": "button",
                "text": {"type": "plain_text", "text": label, "emoji": True},
                "action_id": control_id,
                "value": control_id,
            }
            if not control.more or i:  # a Stop, an approval's Deny: danger; an approval's Approve: primary
                button["style"] = "danger"
            else:
                button["style"] = "primary"
            elements.append(button)
        blocks.append({"type": "actions", "block_id": STOP_BLOCK_ID, "elements": elements})
    # The notification's text: never markdown_text, and inert (it is mrkdwn).
    fallback = rendered.body if rendered.field == "text" else escape_text(strip_invisible(text))
    return BlocksBody(fallback, blocks)


class StopMarks:
    """The messages that carry a control, or carried one (then None), per chat, bounded by :data:`MAX_MARKED` (the
    oldest are forgotten: their runs ended long ago)."""

    __slots__ = ("_marked",)

    def __init__(self) -> None:
        self._marked: OrderedDict[tuple[str, str], StopControl | None] = OrderedDict()

    def mark(self, target: Target, message_id: str, control: StopControl | None) -> None:
        """Message ``message_id`` carries ``control`` from now on (None: no more). Called before the call: the later
        edits send the blocks whatever its outcome."""
        key = (str(target.chat_id), message_id)
        self._marked[key] = control
        self._marked.move_to_end(key)
        while len(self._marked) > MAX_MARKED:
            self._marked.popitem(last=False)

    def body(
        self,
        target: Target,
        message_id: str,
        text: str,
        fmt: TextFormat,
        rendered: Rendered,
        allowed: MarkupPermissions = INERT,
    ) -> BlocksBody | None:
        """The body an edit of ``message_id`` must send (its blocks), or None: it never carried a control."""
        key = (str(target.chat_id), message_id)
        if key not in self._marked:
            return None
        return stop_blocks(text, fmt, self._marked[key], rendered, allowed)
