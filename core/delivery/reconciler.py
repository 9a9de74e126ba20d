"""The reconciler: makes a channel show the run's desired message parts, one call at a time.

Delivery modes decide *what* should be visible as an ordered list of slots (one slot = one platform
message: answer parts, a status message, a failure notice). The reconciler decides *when and how*:
it sends a slot that has no message yet (strictly in slot order), edits a slot whose shown text differs
from its desired text, and records every call's intent and outcome in the ledger.

Rules (shared/DESIGN.md §4, §5):

- Preview edits are throttled: at most one call per ``throttle_s`` until finalization starts. With
  ``throttle_s == 0`` every intermediate state is sent in order while the rate budget allows it; when
  it does not (or with a throttle) intermediate states merge into the latest.
- A 429 pauses the conversation (the send chain) for ``retry_after``; everything pending then merges
  into one edit.
- A send that timed out is *uncertain*: it may have landed, so it is never sent again. An edit that timed
  out is retried (an edit is idempotent) with backoff; after ``max_attempts`` the part is uncertain.
- "message is not modified" is success. An edit that would render the same text (platforms trim the
  ends) is not sent. A "not modified" answer to an edit whose text differs from the one last
  acknowledged cannot be checked against anything, so finalization sends that part's final text once
  more (a second "not modified" is then taken as proof).
- A message rejected for its formatting is sent again with the markup removed (``degraded``).
- An edit of a message that is gone (deleted in the chat) sends the part anew; a delete of one is done.
- Network failures and 5xx are retried with exponential backoff, at most ``max_attempts`` times.
- Native streaming (``native`` given): an answer part is opened as a platform stream while it grows
  (``stream_start``, ``stream_update``), persisted with ``stream_finish`` once it is frozen or the run
  finalizes, and abandoned with ``stream_cancel`` when a replace empties it. A platform that refuses
  streaming here turns native off for the rest of the run: the parts continue as preview messages. So does
  a stream start that timed out (the stream holds at most the first words and gives no handle), and an
  append that may have landed is never appended again: that part is rewritten whole by an edit.
- When a budget is short, finalization's calls go before other runs' previews (``final=True``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from core.clock import Clock
from core.errors import (
    DeliveryError,
    NativeUnavailableError,
    PayloadRejectedError,
    PlatformUnavailableError,
    RateLimitedError,
    RejectReason,
    TargetNotFoundError,
    UncertainDeliveryError,
)
from core.events import Target
from core.ledger import Ledger, PartRecord
from core.ports import CallKind, ChannelAdapter, NativeStreaming, TextFormat
from core.report import PartReport, PartState, SlotRole
from core.send_chain import SendChain

T = TypeVar("T")

_CALL_KINDS = {
    "send": CallKind.SEND,
    "edit": CallKind.EDIT,
    "delete": CallKind.DELETE,
    "stream_start": CallKind.STREAM_START,
    "stream_update": CallKind.STREAM_UPDATE,
    "stream_refresh": CallKind.STREAM_UPDATE,
    "stream_finish": CallKind.STREAM_FINISH,
    "stream_cancel": CallKind.STREAM_FINISH,
}
"""The rate budgets' name for each reconciler op."""


_SIDE_ROLES = frozenset({SlotRole.STATUS, SlotRole.REASONING})
"""Messages whose edits wait behind the answer's calls."""


_DELIVERY_STATES = {"send": "sent", "stream_start": "sent", "delete": "deleted", "stream_cancel": "deleted"}


def _delivery_fact(op: _Op, outcome: str, detail: str) -> dict[str, object]:
    """One call's outcome for watchers: ``part``, ``role``, ``state`` (sent, edited, deleted, retrying, uncertain,
    failed, gone, …), ``message_id``, ``text`` (what the part shows now) and ``retry_after_s`` after a 429."""
    slot = op.slot
    if outcome == "ack":
        state = _DELIVERY_STATES.get(op.kind, "edited")
    else:
        state = {"rate_limited": "retrying", "retry": "retrying"}.get(outcome, outcome)
    fact: dict[str, object] = {"part": slot.index, "role": str(slot.role), "state": state}
    fact["message_id"] = slot.message_id
    fact["text"] = slot.shown if slot.shown is not None else ""
    if outcome == "rate_limited":
        fact["retry_after_s"] = float(detail.removeprefix("retry_after="))
    elif outcome != "ack":
        fact["reason"] = slot.error or detail
    return fact


def same_render(a: str, b: str | None) -> bool:
    """True when two texts render the same: platforms trim leading and trailing whitespace
    (Telegram: https://core.telegram.org/bots/api#editmessagetext answers "message is not modified")."""
    return b is not None and a.strip() == b.strip()


@dataclass
class Slot:
    """One message part: what it should show and what the platform acknowledged."""

    index: int
    role: SlotRole
    desired: str = ""
    fmt: TextFormat = TextFormat.PLAIN
    message_id: str | None = None
    shown: str | None = None
    state: PartState = PartState.PENDING
    degraded: bool = False
    error: str | None = None
    attempts: int = 0
    retry_at: float = 0.0
    verify: bool = False
    """A "not modified" answered an edit to a text never acknowledged: confirm it at finalization."""
    maybe_shown: str | None = None
    """The text of an edit that timed out: it may be shown (a later "not modified" for it is expected)."""
    live: Callable[[], str] | None = None
    """Where the desired text comes from while it grows (read only when a call is about to be made)."""
    stale: bool = False
    """``live`` has changed since ``desired`` was last read from it."""
    retired: bool = False
    """Emptied by a replace: its message is deleted now rather than at finalization."""
    retry_at_finish: bool = False
    """Given up on during the stream after transient failures (an outage): finalization tries it again."""
    history: deque[str] = field(default_factory=deque)
    native: bool = False
    """Shown through the platform's own stream while it grows."""
    streaming: bool = False
    """``message_id`` is an open stream's handle (not yet a persisted message)."""
    streamed_at: float = 0.0
    """Clock seconds of the stream's last call (a stream that must be refreshed is shown again in time)."""

    def settled(self) -> bool:
        """True when no further call is needed for this slot."""
        if self.state in (PartState.UNCERTAIN, PartState.FAILED, PartState.SKIPPED):
            return True
        if not self.desired.strip():
            return self.message_id is None
        return self.message_id is not None and self.shown == self.desired


@dataclass(frozen=True)
class _Op:
    slot: Slot
    kind: str  # "send" | "edit" | "delete" | "stream_start" | "stream_update" | "stream_finish" | "stream_cancel"
    text: str
    not_before: float


class Reconciler:
    """Drives one run's slots to their desired texts through the conversation's send chain.

    Args:
        run: the run id (ledger key).
        adapter: the channel adapter (single-attempt calls).
        chain: the conversation's send chain.
        target: where the messages go.
        ledger: records intents and outcomes.
        clock: injected clock.
        throttle_s: minimum seconds between preview calls before finalization (0: no throttle).
        max_attempts: attempts for transient failures (network, 5xx) before a part fails.
        native: the adapter's native streaming, when the run streams answers natively (None: preview).
        typing_every_s: while the run is open and nothing new became visible for this many seconds, show a
            typing indicator (at the start too); None: never. Never during finalization or after it.
    """

    def __init__(
        self,
        *,
        run: str,
        adapter: ChannelAdapter,
        chain: SendChain,
        target: Target,
        ledger: Ledger,
        clock: Clock,
        throttle_s: float = 0.0,
        max_attempts: int = 5,
        native: NativeStreaming | None = None,
        typing_every_s: float | None = None,
    ) -> None:
        self.run = run
        self._adapter = adapter
        self._chain = chain
        self._target = target
        self._ledger = ledger
        self._clock = clock
        self.throttle_s = throttle_s
        self._max_attempts = max_attempts
        self._native = native
        self.slots: list[Slot] = []
        self.finalizing = False
        self._closed = False
        self._wake = asyncio.Event()
        self._last_call_at: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._restored: list[Slot] = []
        self._typing_every_s = typing_every_s
        self._last_visible_at: float | None = None
        self._last_typing_at: float | None = None
        self.typing_calls = 0
        self.on_delivery: Callable[[dict[str, object]], None] | None = None
        """Told every call's outcome as a fact for watchers (the run monitor's ``delivery`` event fields)."""

    # --- what should be visible -------------------------------------------------------------------------

    def restore(self, records: list[PartRecord]) -> None:
        """Load the parts recorded before a restart, so they are edited, never sent again.

        Restored slots are handed out again by :meth:`claim_slot`, in order, per role.
        """
        for rec in records:
            slot = Slot(
                index=len(self.slots),
                role=rec.role,
                desired=rec.shown or "",
                message_id=rec.message_id,
                shown=rec.shown,
                state=rec.state,
                degraded=rec.degraded,
                error=rec.error,
                # An open stream goes on as one when this run still streams natively; else its handle is taken
                # for a message (Slack's stream is one; a Telegram draft id then fails as gone and is re-sent).
                native=rec.streaming and self._native is not None,
                streaming=rec.streaming and self._native is not None,
            )
            self.slots.append(slot)
            self._restored.append(slot)

    def claim_slot(self, role: SlotRole, text: str = "", fmt: TextFormat = TextFormat.PLAIN) -> Slot:
        """A slot for the next part of ``role``: a restored one if any is left, else a new one at the end."""
        for i, slot in enumerate(self._restored):
            if slot.role is role:
                del self._restored[i]
                if slot.degraded:
                    fmt = TextFormat.STRIPPED if fmt is TextFormat.MARKDOWN else fmt
                slot.fmt = fmt
                self.set_text(slot, text)
                return slot
        slot = Slot(index=len(self.slots), role=role, fmt=fmt)
        slot.native = self._native is not None and role is SlotRole.ANSWER
        self.slots.append(slot)
        self.set_text(slot, text)
        return slot

    def set_live(self, slot: Slot, live: Callable[[], str], *, every_state: bool = True) -> None:
        """``slot`` shows what ``live()`` returns; it is read only when a call is about to be made (or at
        once with ``throttle_s == 0`` and ``every_state``, where every state is sent). Wakes the loop."""
        slot.live, slot.retired = live, False
        if self.throttle_s == 0 and every_state and not self.finalizing:
            self._set(slot, live())
            return
        slot.stale = True
        if slot.state is PartState.ACKED:
            slot.state = PartState.PENDING
        self._wake.set()

    def drop_unsent(self, role: SlotRole) -> None:
        """Forget every part of ``role`` that no message shows yet (a cancelled run sends no more)."""
        for slot in self.slots:
            if slot.role is role and slot.message_id is None and slot.state is PartState.PENDING:
                self.set_text(slot, "")
                slot.history.clear()

    def retire(self, slot: Slot) -> None:
        """Empty ``slot`` and delete its message now (a replace made the text shorter)."""
        self.set_text(slot, "")
        slot.retired = True
        self._wake.set()

    def set_text(self, slot: Slot, text: str) -> None:
        """Set what ``slot`` should show (a fixed text: ends ``set_live``); wakes the loop."""
        slot.live, slot.stale, slot.retired = None, False, False
        self._set(slot, text)

    def _set(self, slot: Slot, text: str) -> None:
        if text == slot.desired:
            return
        slot.desired = text
        if slot.state is PartState.ACKED or (slot.state is PartState.SKIPPED and text.strip()):
            slot.state = PartState.PENDING
        if self.throttle_s == 0 and not self.finalizing:
            if text.strip():  # an emptied state is never sent as an edit: the preview waits for text
                slot.history.append(text)
        else:
            slot.history.clear()
        self._wake.set()

    # --- running ----------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the delivery loop as a task."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=f"reconciler:{self.run}")

    def stop_typing(self) -> None:
        """No typing indicator from now on (the run is ending)."""
        self._typing_every_s = None

    async def finish(self) -> None:
        """Finalization: drop the throttle, deliver everything, and stop the loop."""
        self.finalizing = True
        self._closed = True
        for slot in self.slots:
            if slot.retry_at_finish:  # an outage during the stream must not freeze the final answer
                slot.retry_at_finish, slot.attempts, slot.retry_at = False, 0, 0.0
                slot.state, slot.error = PartState.PENDING, None
        self._wake.set()
        self.start()
        assert self._task is not None
        await self._task

    async def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def parts(self) -> list[PartReport]:
        return [self._record(s).report() for s in self.slots]

    async def _loop(self) -> None:
        while True:
            op = self._next_op()
            if op is None:
                if self._closed:
                    return
                typing_at = self._typing_due()
                if typing_at is None:
                    self._wake.clear()
                    await self._wake.wait()
                elif typing_at > self._clock.now():
                    await self._sleep_or_wake(typing_at - self._clock.now())
                else:
                    await self._typing()
                continue
            delay = op.not_before - self._clock.now()
            if delay > 0:
                await self._sleep_or_wake(delay)
                continue
            if op.slot.stale:
                self._refresh(op.slot)  # read the live text now that the edit is due
                continue
            await self._perform(op)

    async def _sleep_or_wake(self, delay_s: float) -> None:
        """Wait ``delay_s`` seconds on the injected clock, or less if :meth:`set_text` / :meth:`finish` wake
        the loop first (a new state may be due earlier, or the throttle was dropped)."""
        self._wake.clear()
        sleeper = asyncio.ensure_future(self._clock.sleep(delay_s))
        waker = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait((sleeper, waker), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, waker):
                task.cancel()
            await asyncio.wait((sleeper, waker))

    def _typing_due(self) -> float | None:
        """When the next typing indicator is due (clock seconds), or None (no indicator, or finalizing)."""
        if self._typing_every_s is None or self.finalizing:
            return None
        last = max((t for t in (self._last_visible_at, self._last_typing_at) if t is not None), default=None)
        return self._clock.now() if last is None else last + self._typing_every_s

    async def _typing(self) -> None:
        """Show the typing indicator once (one attempt, never in the ledger: it is not a message); a rate
        limited or failed indicator is skipped, the next one is due ``typing_every_s`` later."""
        self._last_typing_at = self._clock.now()
        if self._chain.ready_in(CallKind.TYPING) > 0:
            return
        adapter, target = self._adapter, self._target
        with contextlib.suppress(DeliveryError):
            self.typing_calls += 1
            await self._chain.call(lambda: adapter.send_typing(target), CallKind.TYPING)

    def _refresh(self, slot: Slot) -> None:
        """Read a live slot's text now (its cost is the text's length: done once per call, not per delta)."""
        if slot.stale and slot.live is not None:
            slot.stale = False
            self._set(slot, slot.live())

    def _next_op(self) -> _Op | None:
        """The next call: the first part (in order) that needs one; but an answer or a notice goes before
        an edit of a status or reasoning message, so progress never delays the answer when the budget is short."""
        op = self._first_op(0)
        if op is not None and op.kind == "edit" and op.slot.role in _SIDE_ROLES:
            later = self._first_op(op.slot.index + 1)
            if later is not None and later.slot.role not in _SIDE_ROLES:
                return later
        return op

    def _first_op(self, start: int) -> _Op | None:
        """The first call due from slot ``start`` on, in order. A part that has no text yet and no message (an
        answer that is only whitespace so far) holds the parts after it, but not a status or reasoning message:
        those may go first, so sub-agent lines and progress show while the answer has not begun."""
        waiting = False
        for slot in self.slots[start:]:
            if waiting and slot.role not in _SIDE_ROLES:
                continue
            op, blocked = self._slot_op(slot)
            if op is not None:
                return op
            if blocked:
                if slot.message_id is not None or slot.desired.strip():
                    return None
                waiting = True
        return None

    def _slot_op(self, slot: Slot) -> tuple[_Op | None, bool]:
        """The call ``slot`` needs now, or ``(None, blocked)``: ``blocked`` when later parts must wait for
        it (order), else it needs nothing."""
        if slot.stale and (slot.message_id is None or self.finalizing):
            self._refresh(slot)
        open_state = slot.state not in (PartState.UNCERTAIN, PartState.FAILED, PartState.SKIPPED)
        if slot.stale and open_state:
            return self._timed(slot, self._update_kind(slot), ""), True  # the text is read when the edit is due
        if slot.streaming and open_state:
            if not slot.desired.strip():
                return _Op(slot, "stream_cancel", "", 0.0), True
            if self.finalizing or slot.live is None:  # frozen, or the end: persist the streamed part
                return self._timed(slot, "stream_finish", None), True
            refresh_s = self._native.stream_refresh_s if self._native is not None else None
            if refresh_s and not slot.stale and slot.shown == slot.desired:  # keep a lapsing stream alive
                return _Op(slot, "stream_refresh", slot.desired, slot.streamed_at + refresh_s), True
        if slot.verify and self.finalizing and slot.message_id is not None and slot.desired.strip():
            return _Op(slot, "edit", slot.desired, slot.retry_at), True
        if slot.settled():
            return None, self._settle(slot)
        if not slot.desired.strip():
            if slot.message_id is not None and (self.finalizing or slot.retired):
                return _Op(slot, "delete", "", 0.0), True
            return None, slot.message_id is not None  # an emptied preview waits for text
        return self._timed(slot, self._update_kind(slot), None), True

    def _settle(self, slot: Slot) -> bool:
        """Mark a settled pending slot acknowledged or skipped; True when later parts must wait for it."""
        if slot.state is PartState.PENDING:
            if slot.message_id is not None:
                slot.state = PartState.ACKED
            elif not self.finalizing:
                return True  # emptied before it was ever sent: later parts wait for it (order)
            else:
                slot.state = PartState.SKIPPED  # nothing to show, nothing shown
        return False

    def _update_kind(self, slot: Slot) -> str:
        """The call that brings ``slot`` to its desired text: open or grow a stream, send or edit."""
        if slot.message_id is None:
            live = slot.native and self._native is not None and not self.finalizing and slot.live is not None
            return "stream_start" if live else "send"
        return "stream_update" if slot.streaming else "edit"

    def _timed(self, slot: Slot, kind: str, text: str | None) -> _Op:
        """The op for ``slot`` with the earliest time it may start (rate budget, 429 pause, throttle)."""
        ready_in = self._chain.ready_in(_CALL_KINDS[kind], final=self.finalizing)
        if ready_in > 0:
            slot.history.clear()  # the platform is not keeping up: pending states merge into one
        if text is None:
            text = slot.history[0] if slot.history else slot.desired
        not_before = max(slot.retry_at, self._clock.now() + ready_in)
        if not self.finalizing and self._last_call_at is not None:
            not_before = max(not_before, self._last_call_at + self.throttle_s)
        return _Op(slot, kind, text, not_before)

    def _sent(self, slot: Slot, text: str) -> None:
        slot.shown = text
        self._last_visible_at = self._clock.now()
        while slot.history and slot.history[0] != text:
            slot.history.popleft()
        if slot.history:
            slot.history.popleft()
        slot.attempts = 0
        slot.error = None
        if slot.shown == slot.desired:
            slot.state = PartState.ACKED

    async def _perform(self, op: _Op) -> None:
        slot = op.slot
        if op.kind in ("edit", "stream_update") and same_render(op.text, slot.shown) and not slot.verify:
            self._sent(slot, op.text)
            return
        call_id = await self._ledger.record_intent(self.run, slot.index, slot.role, op.kind, op.text)
        self._last_call_at = self._clock.now()
        outcome, detail = "ack", ""
        try:
            if op.kind.startswith("stream_"):
                await self._stream_call(op)
            else:
                await self._message_call(op)
        except DeliveryError as exc:
            outcome, detail = self._on_error(op, exc)
        await self._ledger.record_outcome(call_id, self._record(slot), outcome, detail)
        if self.on_delivery is not None:
            self.on_delivery(_delivery_fact(op, outcome, detail))

    async def _call(self, op: _Op, fn: Callable[[], Awaitable[T]]) -> T:
        return await self._chain.call(fn, _CALL_KINDS[op.kind], final=self.finalizing)

    async def _message_call(self, op: _Op) -> None:
        slot, target, adapter = op.slot, self._target, self._adapter
        if op.kind == "send":
            slot.message_id = await self._call(op, lambda: adapter.send_text(target, op.text, slot.fmt))
            self._sent(slot, op.text)
        elif op.kind == "edit":
            assert slot.message_id is not None
            mid, before, verifying = slot.message_id, slot.shown, slot.verify
            changed = await self._call(op, lambda: adapter.edit_text(target, mid, op.text, slot.fmt))
            expected = same_render(op.text, before) or same_render(op.text, slot.maybe_shown)
            slot.verify = not changed and not verifying and not expected
            slot.maybe_shown = None
            self._sent(slot, op.text)
        else:
            assert slot.message_id is not None
            mid = slot.message_id
            await self._call(op, lambda: adapter.delete_message(target, mid))
            slot.message_id, slot.shown, slot.state = None, None, PartState.SKIPPED

    async def _stream_call(self, op: _Op) -> None:
        slot, target, native = op.slot, self._target, self._native
        assert native is not None
        if op.kind == "stream_start":
            slot.message_id = await self._call(op, lambda: native.stream_start(target, op.text, slot.fmt))
            slot.streaming, slot.streamed_at = True, self._clock.now()
            self._sent(slot, op.text)
            return
        assert slot.message_id is not None
        handle, shown = slot.message_id, slot.shown or ""
        if op.kind in ("stream_update", "stream_refresh"):
            await self._call(op, lambda: native.stream_update(target, handle, shown, op.text, slot.fmt))
            slot.streamed_at = self._clock.now()
            self._sent(slot, op.text)
        elif op.kind == "stream_finish":
            finish = native.stream_finish
            slot.message_id = await self._call(op, lambda: finish(target, handle, shown, op.text, slot.fmt))
            slot.streaming = False
            self._sent(slot, op.text)
        else:
            await self._call(op, lambda: native.stream_cancel(target, handle))
            slot.message_id, slot.shown, slot.streaming, slot.state = None, None, False, PartState.SKIPPED

    def _on_error(self, op: _Op, exc: DeliveryError) -> tuple[str, str]:
        slot = op.slot
        if isinstance(exc, NativeUnavailableError):
            self._native_off()  # the parts continue as preview messages
            slot.streaming = False
            return "native_refused", str(exc)
        if isinstance(exc, RateLimitedError):
            slot.history.clear()  # everything pending merges into one call after the pause
            return "rate_limited", f"retry_after={exc.retry_after_s}"
        if isinstance(exc, UncertainDeliveryError | PlatformUnavailableError):
            return self._on_transient(op, exc)
        if isinstance(exc, PayloadRejectedError):
            if exc.reason is RejectReason.BAD_FORMAT and slot.fmt is TextFormat.MARKDOWN:
                slot.fmt, slot.degraded = TextFormat.STRIPPED, True
                return "degraded", str(exc)
            if exc.reason is RejectReason.EMPTY:
                slot.state = PartState.SKIPPED
                return "skipped", str(exc)
        if isinstance(exc, TargetNotFoundError) and op.kind not in ("send", "stream_start"):
            slot.message_id, slot.shown = None, None  # the message is gone: show the part anew
            slot.native = slot.streaming = False
            if op.kind in ("delete", "stream_cancel"):
                slot.state = PartState.SKIPPED  # ... or, for a delete, that was the point
            return "gone", str(exc)
        slot.state, slot.error = PartState.FAILED, f"{type(exc).__name__}: {exc}"
        slot.history.clear()
        return "failed", str(exc)

    def _on_transient(self, op: _Op, exc: DeliveryError) -> tuple[str, str]:
        """A timeout (uncertain) or an outage (network, 5xx): retry with backoff, or give up."""
        slot = op.slot
        if isinstance(exc, UncertainDeliveryError):
            if op.kind in ("stream_update", "stream_refresh"):
                # An append that may have landed must never be repeated: the part goes on as a message,
                # rewritten whole by an edit (a draft id is no message: that edit finds it gone and re-sends).
                slot.streaming = slot.native = False
                slot.shown = None
                return "uncertain", str(exc)
            if op.kind == "stream_start":
                # A stream that may have opened holds only the first words and no handle to go on with: the part
                # goes on as a plain message (a Telegram draft lapses by itself; on Slack the fragment may stay).
                self._native_off()
                return "uncertain", str(exc)
            if op.kind in ("send", "stream_finish"):  # may have landed: never sent again
                slot.state, slot.error = PartState.UNCERTAIN, f"uncertain: {exc}"
                slot.history.clear()
                return "uncertain", str(exc)
            # an edit or a delete is idempotent: retried with backoff, like a network failure
            slot.maybe_shown = op.text if op.kind == "edit" else None
            if self._give_up(slot):
                slot.state = PartState.UNCERTAIN
                slot.error = f"uncertain: no answer after {slot.attempts} attempts: {exc}"
                slot.retry_at_finish = not self.finalizing
            return "uncertain", str(exc)
        if isinstance(exc, PlatformUnavailableError):
            if self._give_up(slot):
                slot.state, slot.error = PartState.FAILED, f"gave up after {slot.attempts} attempts: {exc}"
                slot.retry_at_finish = not self.finalizing
                return "failed", str(exc)
            return "retry", str(exc)
        raise AssertionError(f"not a transient error: {exc!r}")

    def _native_off(self) -> None:
        self._native = None
        for slot in self.slots:
            slot.native = False

    def _give_up(self, slot: Slot) -> bool:
        """Count a failed attempt; True when ``max_attempts`` are used up, else schedule the retry
        with exponential backoff (0.25 s doubling, at most 8 s)."""
        slot.attempts += 1
        if slot.attempts >= self._max_attempts:
            return True
        slot.retry_at = self._clock.now() + min(8.0, 0.25 * 2 ** (slot.attempts - 1))
        return False

    def _record(self, slot: Slot) -> PartRecord:
        return PartRecord(
            run=self.run,
            slot=slot.index,
            role=slot.role,
            state=slot.state,
            message_id=slot.message_id,
            shown=slot.shown,
            degraded=slot.degraded,
            error=slot.error,
            streaming=slot.streaming,
        )
