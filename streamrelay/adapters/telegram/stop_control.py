"""The Stop control on Telegram (:class:`core.ports.StopControls`): an inline keyboard with one button.

Bot API rules:

- An inline keyboard is ``reply_markup`` = InlineKeyboardMarkup ``{"inline_keyboard": [[button, ...], ...]}``; a
  callback button has ``text`` and ``callback_data`` of 1-64 bytes
  (https://core.telegram.org/bots/api#inlinekeyboardmarkup, #inlinekeyboardbutton). The control id
  (``stop:<16 hex>``, 21 bytes) is the ``callback_data``.
- editMessageReplyMarkup puts the keyboard on a message or, with an empty keyboard, takes it off
  (https://core.telegram.org/bots/api#editmessagereplymarkup). The same markup again is 400 "message is not
  modified": success.
- editMessageText without ``reply_markup`` takes the inline keyboard away
  (https://core.telegram.org/bots/api#editmessagetext: the markup is part of what an edit sets), so while a
  message carries the control, :meth:`StopMarks.markup` gives the edit the keyboard again.
- A natively streamed draft (sendMessageDraft, Bot API 10.3) shows its own stop button with ``can_stop``; a press
  reaches the bot as a ``stopped_message_generation`` update with the ``draft_id``
  (https://core.telegram.org/bots/api#sendmessagedraft).
- A click reaches the bot as a ``callback_query`` update with ``data`` = the ``callback_data``; the bot answers it
  with answerCallbackQuery (https://core.telegram.org/bots/api#answercallbackquery) and forwards the stop to the
  sidecar (examples/stop_bot.py).

:class:`StopMarks` remembers which messages and drafts carry a control (the adapter holds one); :func:`stop_method`
is the editMessageReplyMarkup call; :meth:`~adapters.telegram.adapter.TelegramAdapter.set_stop` makes it.
"""

from __future__ import annotations

from collections import OrderedDict

from aiogram.methods import EditMessageReplyMarkup
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from streamrelay.core.errors import TargetNotFoundError
from streamrelay.core.events import Target
from streamrelay.core.ports import StopControl

MAX_CALLBACK_BYTES = 64
MAX_MARKED = 10_000
"""Messages remembered as carrying a control (the oldest are forgotten past it: their runs ended long ago)."""


def stop_keyboard(control: StopControl) -> InlineKeyboardMarkup:
    """The inline keyboard of ``control``: one row with its buttons (a Stop's one; an approval's Approve and Deny).

    Raises:
        ValueError: a control id is not 1-64 bytes (Telegram would refuse it).
    """
    row = []
    for control_id, label in control.buttons():
        if not 1 <= len(control_id.encode()) <= MAX_CALLBACK_BYTES:
            raise ValueError(f"callback_data must be 1-{MAX_CALLBACK_BYTES} bytes, got {control_id!r}")
        row.append(InlineKeyboardButton(text=label, callback_data=control_id))
    return InlineKeyboardMarkup(inline_keyboard=[row])


def stop_method(target: Target, message_id: str, control: StopControl | None) -> EditMessageReplyMarkup:
    """The editMessageReplyMarkup that puts ``control`` on message ``message_id`` or, with None, takes the keyboard off
    (an empty one).

    Raises:
        core.errors.TargetNotFoundError: ``message_id`` is not an integer.
        ValueError: the control id is not 1-64 bytes.
    """
    try:
        number = int(message_id)
    except ValueError:
        raise TargetNotFoundError(
            f"telegram: {message_id!r} is not a message id", platform="telegram", target=str(target.chat_id)
        ) from None
    markup = stop_keyboard(control) if control is not None else InlineKeyboardMarkup(inline_keyboard=[])
    return EditMessageReplyMarkup(chat_id=target.chat_id, message_id=number, reply_markup=markup)


class StopMarks:
    """Which messages carry a Stop control and which drafts show a stop button, per chat (each bounded by
    :data:`MAX_MARKED`: the oldest are forgotten, their runs ended long ago)."""

    __slots__ = ("_marked", "_stoppable")

    def __init__(self) -> None:
        self._marked: OrderedDict[tuple[str, str], StopControl] = OrderedDict()
        self._stoppable: set[tuple[str, str]] = set()

    def mark(self, target: Target, message_id: str, control: StopControl | None) -> None:
        """Message ``message_id`` carries ``control`` from now on (None: no control). Called before the call that
        puts it on: an edit after an unknown outcome keeps it too."""
        key = (str(target.chat_id), message_id)
        if control is not None:
            self._marked[key] = control
            while len(self._marked) > MAX_MARKED:
                self._marked.popitem(last=False)
        else:
            self._marked.pop(key, None)

    def markup(self, target: Target, message_id: str) -> InlineKeyboardMarkup | None:
        """The keyboard an edit of ``message_id`` must carry again (None: the message carries no control)."""
        control = self._marked.get((str(target.chat_id), message_id))
        return stop_keyboard(control) if control is not None else None

    def stoppable_draft(self, target: Target, handle: str, stoppable: bool) -> None:
        """Draft ``handle``'s next updates carry ``can_stop`` (Bot API 10.3) while ``stoppable``."""
        key = (str(target.chat_id), handle)
        if stoppable and len(self._stoppable) < MAX_MARKED:
            self._stoppable.add(key)
        else:
            self._stoppable.discard(key)

    def draft_can_stop(self, target: Target, draft_id: int) -> bool | None:
        """``can_stop`` of a sendMessageDraft of ``draft_id`` (None: not sent)."""
        return True if (str(target.chat_id), str(draft_id)) in self._stoppable else None
