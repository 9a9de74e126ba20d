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
  message carries the control, :meth:`TelegramStopControls.stop_markup` gives the edit the keyboard again.
- A natively streamed draft (sendMessageDraft, Bot API 10.3) shows its own stop button with ``can_stop``; a press
  reaches the bot as a ``stopped_message_generation`` update with the ``draft_id``
  (https://core.telegram.org/bots/api#sendmessagedraft).
- A click reaches the bot as a ``callback_query`` update with ``data`` = the ``callback_data``; the bot answers it
  with answerCallbackQuery (https://core.telegram.org/bots/api#answercallbackquery) and forwards the stop to the
  sidecar (examples/stop_bot.py).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TypeVar

from aiogram.methods import EditMessageReplyMarkup, TelegramMethod
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from core.errors import PayloadRejectedError, RejectReason, TargetNotFoundError
from core.events import Target
from core.ports import StopControl, TextFormat

T = TypeVar("T")

MAX_CALLBACK_BYTES = 64
MAX_MARKED = 10_000
"""Messages remembered as carrying a control (the oldest are forgotten past it: their runs ended long ago)."""


def stop_keyboard(control: StopControl) -> InlineKeyboardMarkup:
    """The one-button inline keyboard of ``control``.

    Raises:
        ValueError: the control id is not 1-64 bytes (Telegram would refuse it).
    """
    if not 1 <= len(control.control_id.encode()) <= MAX_CALLBACK_BYTES:
        raise ValueError(f"callback_data must be 1-{MAX_CALLBACK_BYTES} bytes, got {control.control_id!r}")
    button = InlineKeyboardButton(text=control.label, callback_data=control.control_id)
    return InlineKeyboardMarkup(inline_keyboard=[[button]])


class TelegramStopControls:
    """``set_stop`` of :class:`~adapters.telegram.adapter.TelegramAdapter` (mixed in; it provides ``_call``)."""

    _marked: OrderedDict[tuple[str, str], StopControl]

    async def _call(self, method: TelegramMethod[T], target: Target) -> T:
        raise NotImplementedError

    def stop_markup(self, target: Target, message_id: str) -> InlineKeyboardMarkup | None:
        """The keyboard an edit of ``message_id`` must carry again (None: the message carries no control)."""
        marked = getattr(self, "_marked", None)
        control = marked.get((str(target.chat_id), message_id)) if marked is not None else None
        return stop_keyboard(control) if control is not None else None

    def stoppable_draft(self, target: Target, handle: str, stoppable: bool) -> None:
        """Draft ``handle``'s next updates carry ``can_stop`` (Bot API 10.3) while ``stoppable``
        (:class:`core.ports.DraftStopControls`)."""
        if not hasattr(self, "_stoppable"):
            self._stoppable: set[tuple[str, str]] = set()
        key = (str(target.chat_id), handle)
        if stoppable and len(self._stoppable) < MAX_MARKED:
            self._stoppable.add(key)
        else:
            self._stoppable.discard(key)

    def draft_can_stop(self, target: Target, draft_id: int) -> bool | None:
        """``can_stop`` of a sendMessageDraft of ``draft_id`` (None: not sent)."""
        stoppable: set[tuple[str, str]] = getattr(self, "_stoppable", set())
        return True if (str(target.chat_id), str(draft_id)) in stoppable else None

    async def set_stop(
        self, target: Target, message_id: str, text: str, fmt: TextFormat, control: StopControl | None
    ) -> None:
        """Put ``control`` on message ``message_id`` (editMessageReplyMarkup), or take it off (an empty keyboard).
        ``text`` and ``fmt`` are not needed here: the text stays as it is. "Not modified" is success.

        Raises:
            core.errors.TargetNotFoundError: the message is gone (or ``message_id`` is not an integer).
            core.errors.DeliveryError: another subclass, per :mod:`adapters.telegram.errors`.
        """
        if not hasattr(self, "_marked"):
            self._marked = OrderedDict()
        key = (str(target.chat_id), message_id)
        if control is not None:  # before the call: an edit after an unknown outcome keeps it too
            self._marked[key] = control
            while len(self._marked) > MAX_MARKED:
                self._marked.popitem(last=False)
        else:
            self._marked.pop(key, None)
        try:
            number = int(message_id)
        except ValueError:
            raise TargetNotFoundError(
                f"telegram: {message_id!r} is not a message id", platform="telegram", target=str(target.chat_id)
            ) from None
        markup = stop_keyboard(control) if control is not None else InlineKeyboardMarkup(inline_keyboard=[])
        method = EditMessageReplyMarkup(chat_id=target.chat_id, message_id=number, reply_markup=markup)
        try:
            await self._call(method, target)
        except PayloadRejectedError as exc:
            if exc.reason is not RejectReason.NOT_MODIFIED:
                raise
