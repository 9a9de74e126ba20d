"""The Stop control on a run's live message (channel setting ``stop_button = true``; :mod:`core.run.stop`).

Which message carries it: the run's newest live message, the one a person is looking at: in ``preview`` mode the
growing preview (after a rollover, the new one), in ``block`` mode the latest block reply, in ``progress`` mode the
status message. In ``final`` mode nothing shows before the end, so no control is shown (the live page's Stop
still works). A natively streamed message carries none while it streams (Slack chat.startStream), except a Telegram
draft, which shows its own stop button instead (``can_stop``, Bot API 10.3: :class:`core.ports.DraftStopControls`);
the bot forwards its ``stopped_message_generation`` update as ``POST /v1/runs/draft:<chat_id>:<draft_id>/stop``.

How: which message carries the control is the delivery machine's (:mod:`core.delivery.controls`): right after
the create that made a new live message, it puts the control on it (:meth:`core.ports.StopControls.set_stop`,
counted as an edit, through the conversation's executor like every call) and then takes it off the previous
carrier. The text is never touched by these calls, and the adapter's own text edits keep the control, so the
exactly-once final text is the machine's alone. When the run ends, any way, after the final text is delivered, the
control comes off every message that may carry it; a removal that fails after its retries is reported in the run's
report ("the Stop control may still show on message …"), never silently kept. :class:`StopControlKeeper` names the
control and marks the drafts that show Telegram's own stop button.

A click names the run by :func:`control_id` only: ``stop:`` and 16 hex characters of a hash of the run's key
(never a secret, 21 bytes: within Telegram's ``callback_data`` 1-64 bytes,
https://core.telegram.org/bots/api#inlinekeyboardbutton). :func:`core.run.stop.stop_run` finds the run from it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import Slot
from streamrelay.core.events import Target
from streamrelay.core.ports import DraftStopControls, StopControl, StopControls
from streamrelay.core.records.report import SlotRole

_log = logging.getLogger("streamrelay.delivery")

CONTROL_PREFIX = "stop:"
SHORT_ID_CHARS = 16
_LIVE_ROLES = frozenset({str(SlotRole.ANSWER), str(SlotRole.STATUS)})

Feed = Callable[[dict[str, object]], None]


def short_id(run_key: str) -> str:
    """16 hex characters naming run ``run_key`` in a Stop control (a hash: the key is not readable from it)."""
    return hashlib.sha256(b"streamrelay stop control\x00" + run_key.encode()).hexdigest()[:SHORT_ID_CHARS]


def control_id(run_key: str) -> str:
    """The control id of run ``run_key``: ``stop:<16 hex>`` (what the platform hands the bot on a click)."""
    return CONTROL_PREFIX + short_id(run_key)


def draft_control_id(chat_id: int | str, handle: str) -> str:
    """What names a run whose natively streamed draft showed a stop button: ``draft:<chat_id>:<draft_id>`` (what
    Telegram's ``stopped_message_generation`` update gives the bot, Bot API 10.3)."""
    return f"draft:{chat_id}:{handle}"


def is_short_id(value: str) -> bool:
    """True when ``value`` looks like a :func:`short_id` (16 lowercase hex characters)."""
    return len(value) == SHORT_ID_CHARS and all(c in "0123456789abcdef" for c in value)


class StopControlKeeper:
    """One run's Stop control: its id, and the natively streamed drafts that show Telegram's own stop button
    (:class:`core.ports.DraftStopControls`: no call is made, the draft's next update carries it). Which message carries
    the control is the delivery machine's (:mod:`core.delivery.controls`).

    Args:
        run: the run's key (the control names it by :func:`control_id`).
        controls: the adapter, which can show a control.
        target: the conversation.
        feed: where the reconciler's facts go on to (the watchers' feed).
    """

    def __init__(self, *, run: str, controls: StopControls, target: Target, feed: Feed | None = None) -> None:
        self.control = StopControl(control_id(run))
        self._controls = controls
        self._target = target
        self._next = feed
        self.book: SlotBook | None = None
        """The conversation's slot book (set once built): which part a fact's message is."""
        self._live = True
        self.drafts: dict[str, str] = {}
        """Streamed drafts that show a stop button: :func:`draft_control_id` → the draft's handle."""

    def __call__(self, fact: dict[str, object]) -> None:
        """A reconciler fact: a new live draft shows the stop button; the fact goes on to the watchers."""
        message_id = fact.get("message_id")
        if (
            self._live
            and message_id is not None
            and fact.get("state") == "sent"
            and fact.get("role") in _LIVE_ROLES
            and isinstance(self._controls, DraftStopControls)
        ):
            slot = self._slot(str(message_id))
            if slot is not None and slot.streaming:
                self._controls.stoppable_draft(self._target, str(message_id), True)  # Telegram: can_stop
                self.drafts[draft_control_id(self._target.chat_id, str(message_id))] = str(message_id)
        if self._next is not None:
            self._next(fact)

    def _slot(self, message_id: str) -> Slot | None:
        if self.book is None:
            return None
        return next((s for s in self.book.slots if s.message_id == message_id), None)

    def finish(self) -> None:
        """The run ended: no draft shows the stop button any more."""
        self._live = False
        if isinstance(self._controls, DraftStopControls):
            for handle in self.drafts.values():
                self._controls.stoppable_draft(self._target, handle, False)
