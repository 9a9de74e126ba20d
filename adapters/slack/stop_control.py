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
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from adapters.slack.render import Rendered, render, stream_markdown
from core.events import Target
from core.ports import StopControl, TextFormat

MAX_BUTTON_TEXT = 75
MAX_MARKED = 10_000
STOP_BLOCK_ID = "streamrelay_stop"


@dataclass(frozen=True)
class BlocksBody(Rendered):
    """A chat.update body with ``blocks`` (the text's ``markdown`` block, and the Stop button when on)."""

    blocks: list[dict[str, Any]] = field(default_factory=list)

    def args(self) -> dict[str, Any]:
        return {"text": self.body, "blocks": self.blocks}


def stop_blocks(text: str, fmt: TextFormat, control: StopControl | None) -> BlocksBody:
    """The body of a message showing ``text`` in ``fmt`` with ``control``'s button (or without one: None).

    Raises:
        ValueError: the button's label is over 75 characters.
    """
    blocks: list[dict[str, Any]] = [{"type": "markdown", "text": stream_markdown(text, fmt)}]
    if control is not None:
        if len(control.label) > MAX_BUTTON_TEXT:
            raise ValueError(f"a Slack button's text is at most {MAX_BUTTON_TEXT} characters: {control.label!r}")
        button = {
            "type": "button",
            "text": {"type": "plain_text", "text": control.label, "emoji": True},
            "action_id": control.control_id,
            "value": control.control_id,
            "style": "danger",
        }
        blocks.append({"type": "actions", "block_id": STOP_BLOCK_ID, "elements": [button]})
    plain = render(text, fmt)
    fallback = plain.body if plain.field == "text" else text  # the notification's text: never markdown_text here
    return BlocksBody("text", fallback, blocks)


class SlackStopControls:
    """``set_stop`` of :class:`~adapters.slack.adapter.SlackAdapter` (mixed in; it provides ``_update``)."""

    _marked: OrderedDict[tuple[str, str], StopControl | None]

    async def _update(self, target: Target, ts: str, body: Rendered) -> None:
        raise NotImplementedError

    def stop_body(self, target: Target, message_id: str, text: str, fmt: TextFormat) -> BlocksBody | None:
        """The body an edit of ``message_id`` must send (its blocks), or None: it never carried a control."""
        marked = getattr(self, "_marked", None)
        key = (str(target.chat_id), message_id)
        if marked is None or key not in marked:
            return None
        return stop_blocks(text, fmt, marked[key])

    async def set_stop(
        self, target: Target, message_id: str, text: str, fmt: TextFormat, control: StopControl | None
    ) -> None:
        """Put ``control`` on message ``message_id`` (its ts) or take it off, by chat.update with the message's
        text and blocks (module docstring).

        Raises:
            core.errors.DeliveryError: a subclass, per :mod:`adapters.slack.errors`.
        """
        if not hasattr(self, "_marked"):
            self._marked = OrderedDict()
        self._marked[(str(target.chat_id), message_id)] = control  # before the call: later edits send the blocks
        self._marked.move_to_end((str(target.chat_id), message_id))
        while len(self._marked) > MAX_MARKED:
            self._marked.popitem(last=False)
        await self._update(target, message_id, stop_blocks(text, fmt, control))
