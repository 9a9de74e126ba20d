"""The Stop control on a run's live message (channel setting ``stop_button = true``; :mod:`core.run.stop`).

Which message carries it: the run's newest live message, the one a person is looking at: in ``preview`` mode the
growing preview (after a rollover, the new one), in ``block`` mode the latest block reply, in ``progress`` mode the
status message. In ``final`` mode nothing shows before the end, so no control is shown (the live page's Stop
still works). A natively streamed message carries none while it streams (Slack chat.startStream), except a Telegram
draft, which shows its own stop button instead (``can_stop``, Bot API 10.3: :class:`core.ports.DraftStopControls`);
the bot forwards its ``stopped_message_generation`` update as ``POST /v1/runs/draft:<chat_id>:<draft_id>/stop``.

How: once the reconciler acknowledges a new live message (a ``sent`` fact of an ``answer`` or ``status`` part, its
feed), :class:`StopControlKeeper` puts the control on it with one call through the conversation's send chain
(:meth:`core.ports.StopControls.set_stop`, counted as an edit), then takes it off the previous carrier. The text
is never touched by these calls, and the adapter's own text edits keep the control, so the exactly-once final
text is the reconciler's alone. When the run ends, any way, :meth:`StopControlKeeper.finish` (after the final
text is delivered) takes the control off every message that may carry it; a removal that fails after its retries
is reported in the run's report ("the Stop control may still show on message …"), never silently kept.

A click names the run by :func:`control_id` only: ``stop:`` and 16 hex characters of a hash of the run's key
(never a secret, 21 bytes: within Telegram's ``callback_data`` 1-64 bytes,
https://core.telegram.org/bots/api#inlinekeyboardbutton). :func:`core.run.stop.stop_run` finds the run from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Callable

from core.delivery.calls import Done, SetControl
from core.delivery.executor import Executor
from core.delivery.slotbook import SlotBook
from core.delivery.slots import Slot
from core.errors import DeliveryError, TransientDeliveryError
from core.events import Target
from core.ports import DraftStopControls, StopControl, StopControls
from core.records.report import SlotRole
from core.tasks import stop

_log = logging.getLogger("streamrelay.delivery")

CONTROL_PREFIX = "stop:"
SHORT_ID_CHARS = 16
CLEAR_ATTEMPTS = 3
"""Tries to take a control off a message at the end (a 429 or an outage in between waits in the send chain)."""
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
    """Keeps one run's Stop control on its newest live message (module docstring).

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
        """The conversation's slot book (set once built): the carrier's current text and format."""
        self.executor: Executor | None = None
        """The conversation's executor (set with the book): every Stop move is a call it makes (paced, metered)."""
        self._live = True
        self._wanted: str | None = None
        self._carrier: str | None = None
        self._maybe: dict[str, None] = {}
        """Messages that carry the control or may (a call whose outcome is unknown), oldest first."""
        self._task: asyncio.Task[None] | None = None
        self.errors: list[str] = []
        """Controls that could not be taken off (for the run's report)."""
        self.drafts: dict[str, str] = {}
        """Streamed drafts that show a stop button: :func:`draft_control_id` → the draft's handle."""

    def __call__(self, fact: dict[str, object]) -> None:
        """A reconciler fact: a new live message gets the control; the fact goes on to the watchers."""
        message_id = fact.get("message_id")
        if self._live and fact.get("state") == "sent" and fact.get("role") in _LIVE_ROLES and message_id is not None:
            slot = self._slot(str(message_id))
            if slot is not None and slot.streaming and isinstance(self._controls, DraftStopControls):
                self._controls.stoppable_draft(self._target, str(message_id), True)  # Telegram: can_stop
                self.drafts[draft_control_id(self._target.chat_id, str(message_id))] = str(message_id)
            elif slot is not None and not slot.streaming:
                self._wanted = str(message_id)
                if self._task is None or self._task.done():
                    self._task = asyncio.create_task(self._move(), name="stop-control")
        if self._next is not None:
            self._next(fact)

    def _slot(self, message_id: str) -> Slot | None:
        if self.book is None:
            return None
        return next((s for s in self.book.slots if s.message_id == message_id), None)

    def restored(self) -> None:
        """The book was restored from the ledger (a restart): its newest live message may carry the control, and so
        may the one before it: the control moves by putting it on the new message first and then taking it off the
        previous one, one call later in the chat's rate budget (a second apart on Telegram), and the process may have
        died in between. Both are taken off at the end (taking off a control a message does not show is harmless).
        Older messages are not tried: each earlier move finished before the next message came, unless its removal
        failed then; such a message is not known across a restart (the ledger does not record carriers)."""
        if self.book is None:
            return
        live = [s for s in self.book.slots if str(s.role) in _LIVE_ROLES and s.message_id and not s.streaming]
        for slot in live[-2:]:
            self._maybe[str(slot.message_id)] = None
        if live:
            self._carrier = self._wanted = str(live[-1].message_id)

    async def _move(self) -> None:
        """Put the control on the wanted message, then off the previous one, until they agree (or the run ends)."""
        while self._live and self._wanted is not None and self._wanted != self._carrier:
            wanted, previous = self._wanted, self._carrier
            self._maybe[wanted] = None
            try:
                await self._set(wanted, self.control)
            except DeliveryError as exc:  # not shown (or unknown): the end takes it off anyway
                _log.info("the Stop control could not be put on message %s: %s", wanted, exc)
                return
            self._carrier = wanted
            if previous is not None:
                with contextlib.suppress(DeliveryError):  # failing, it stays in _maybe: the end tries again
                    await self._set(previous, None)
                    self._maybe.pop(previous, None)

    async def _set(self, message_id: str, control: StopControl | None) -> None:
        book, slot = self.book, self._slot(message_id)
        if book is None or slot is None:  # the message is gone (deleted by a replace): nothing carries a control there
            return
        text = slot.shown if slot.shown is not None else slot.desired
        assert self.executor is not None  # set with the book
        call = SetControl(self._target, message_id, text, slot.fmt, control)
        result = await self.executor.perform(call, final=not self._live)
        if not isinstance(result, Done):
            raise result.error

    async def cancel(self) -> None:
        """The run stops here unfinished (service shutdown, another replica takes it): no more control calls; the
        run's next owner restores the carrier from the ledger (:meth:`restored`) and takes it off at the end."""
        self._live = False
        if self._task is not None:
            await stop(self._task)

    async def finish(self) -> None:
        """The run ended (its final text is delivered): take the control off every message that may carry it."""
        self._live = False
        if isinstance(self._controls, DraftStopControls):
            for handle in self.drafts.values():
                self._controls.stoppable_draft(self._target, handle, False)
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        for message_id in list(self._maybe):
            for attempt in range(1, CLEAR_ATTEMPTS + 1):
                try:
                    await self._set(message_id, None)
                except TransientDeliveryError as exc:
                    if attempt == CLEAR_ATTEMPTS:
                        self.errors.append(f"the Stop control may still show on message {message_id}: {exc}")
                    continue
                except DeliveryError as exc:
                    self.errors.append(f"the Stop control may still show on message {message_id}: {exc}")
                self._maybe.pop(message_id, None)
                break
        self._carrier = None
