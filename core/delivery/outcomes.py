"""What a failed call means for its part: the reconciler's error rules (:class:`OutcomeRules`).

Every platform call has three outcomes: done, not done, unknown (DESIGN §8). Here is what each error is:

- ``RateLimitedError`` (429): not done; the chain pauses for ``retry_after``; pending states merge into one.
- ``PlatformUnavailableError`` (network before sending; 5xx of an edit or a delete): not done; retried with
  backoff (0.25 s doubling, at most 15 s) for up to ``retry_window_s``, then the part fails and finalization
  tries it once more.
- ``UncertainDeliveryError`` (a timeout, a 5xx of a create, a reset after sending): unknown. A create keeps its
  pending delivery and is settled next; an edit or a delete is retried (idempotent); a stream update that may
  have landed is never appended again (the part is rewritten whole as a message).
- ``MessageFrozenError``: the message keeps what it shows; a new part continues it.
- ``PayloadRejectedError``: bad format → sent again without markup (``degraded``); empty → skipped.
- ``TargetNotFoundError`` on an edit: the message is gone, the part is sent anew; on a delete: done.
- ``NativeUnavailableError``: native streaming is off for the run, the parts go on as messages.
- Anything else: the part failed, with its cause.
"""

from __future__ import annotations

from core.clock import Clock
from core.delivery.slotbook import SlotBook
from core.delivery.slots import Op, OpKind, Outcome, Slot
from core.errors import (
    AnswerTimeoutError,
    DeliveryError,
    MessageFrozenError,
    NativeUnavailableError,
    PayloadRejectedError,
    PlatformUnavailableError,
    RateLimitedError,
    RejectReason,
    TargetNotFoundError,
    UncertainDeliveryError,
)
from core.ports import TextFormat
from core.records.report import PartState

MAX_BACKOFF_S = 15.0
"""The longest wait between two attempts of a call that is retried through an outage."""


class OutcomeRules:
    """The error rules, mixed into the reconciler (which provides the attributes declared here)."""

    _clock: Clock
    retry_window_s: float
    book: SlotBook

    @property
    def finalizing(self) -> bool:
        raise NotImplementedError

    def _native_off(self) -> None:
        raise NotImplementedError

    def on_error(self, op: Op, exc: DeliveryError) -> tuple[Outcome, str, float | None]:
        """What ``exc`` means for ``op``'s part: ``(outcome, detail, retry_after_s)``; updates the part."""
        slot = op.slot
        if op.kind is OpKind.SEND and not isinstance(exc, UncertainDeliveryError):
            slot.pending = None  # the platform answered: nothing was stored
        if op.kind in (OpKind.SETTLE, OpKind.DELETE_STRAY):
            return self._on_settle_error(op, exc) if op.kind is OpKind.SETTLE else self._on_stray_error(op, exc)
        if isinstance(exc, NativeUnavailableError):
            self._native_off()  # the parts continue as preview messages
            slot.streaming = False
            return Outcome.NATIVE_REFUSED, str(exc), None
        if isinstance(exc, RateLimitedError):
            slot.history.clear()  # everything pending merges into one call after the pause
            return Outcome.RATE_LIMITED, str(exc), exc.retry_after_s
        if isinstance(exc, UncertainDeliveryError | PlatformUnavailableError):
            return self._on_transient(op, exc)
        if isinstance(exc, MessageFrozenError) and slot.message_id is not None and op.kind is OpKind.EDIT:
            self.book.freeze(slot)
            return Outcome.FROZEN, str(exc), None
        if isinstance(exc, PayloadRejectedError):
            if exc.reason is RejectReason.BAD_FORMAT and slot.fmt is TextFormat.MARKDOWN:
                slot.fmt, slot.degraded = TextFormat.STRIPPED, True
                return Outcome.DEGRADED, str(exc), None
            if exc.reason is RejectReason.EMPTY:
                slot.state = PartState.SKIPPED
                return Outcome.SKIPPED, str(exc), None
        if isinstance(exc, TargetNotFoundError) and not op.kind.creates:
            slot.message_id, slot.shown = None, None  # the message is gone: show the part anew
            slot.native = slot.streaming = False
            if op.kind in (OpKind.DELETE, OpKind.STREAM_CANCEL):
                slot.state = PartState.SKIPPED  # ... or, for a delete, that was the point
            return Outcome.GONE, str(exc), None
        slot.state, slot.error = PartState.FAILED, f"{type(exc).__name__}: {exc}"
        slot.history.clear()
        return Outcome.FAILED, str(exc), None

    def _on_settle_error(self, op: Op, exc: DeliveryError) -> tuple[Outcome, str, float | None]:
        """Settling failed: asked again later (429, outage) within the retry window; past it, or on a permanent
        error, the create stays uncertain (reported; never sent again)."""
        slot = op.slot
        if isinstance(exc, RateLimitedError):
            return Outcome.RATE_LIMITED, str(exc), exc.retry_after_s
        transient = isinstance(exc, UncertainDeliveryError | PlatformUnavailableError)
        if transient and not self._give_up(slot):
            return Outcome.RETRY, str(exc), None
        pending = slot.pending
        slot.pending = None
        slot.uncertain_text = pending.text if pending is not None else None
        slot.state, slot.error = PartState.UNCERTAIN, f"uncertain: could not be settled: {exc}"
        return Outcome.UNCERTAIN, str(exc), None

    def _on_stray_error(self, op: Op, exc: DeliveryError) -> tuple[Outcome, str, float | None]:
        """Deleting a second copy failed: gone already is done; an outage is retried in the window; else the copy
        stays and is reported (a duplicate shows)."""
        slot = op.slot
        if isinstance(exc, TargetNotFoundError):
            slot.stray = None
            return Outcome.GONE, str(exc), None
        if isinstance(exc, RateLimitedError):
            return Outcome.RATE_LIMITED, str(exc), exc.retry_after_s
        transient = isinstance(exc, UncertainDeliveryError | PlatformUnavailableError)
        if transient and not self._give_up(slot):
            return Outcome.RETRY, str(exc), None
        slot.stray = None
        self.book.orphans_of(slot, slot.shown or "")
        return Outcome.FAILED, str(exc), None

    def _on_transient(self, op: Op, exc: DeliveryError) -> tuple[Outcome, str, float | None]:
        """A timeout (unknown) or an outage (not done): settle, retry with backoff, or give up."""
        slot = op.slot
        if isinstance(exc, UncertainDeliveryError):
            if op.kind in (OpKind.STREAM_UPDATE, OpKind.STREAM_REFRESH):
                # An append that may have landed must never be repeated: the part goes on as a message,
                # rewritten whole by an edit (a draft id is no message: that edit finds it gone and re-sends).
                slot.streaming = slot.native = False
                slot.shown = None
                return Outcome.UNCERTAIN, str(exc), None
            if op.kind is OpKind.STREAM_START:
                # A stream that may have opened holds only the first words and no handle to go on with: the part
                # goes on as a plain message (a Telegram draft lapses by itself; on Slack the fragment may stay).
                self._native_off()
                return Outcome.UNCERTAIN, str(exc), None
            if op.kind is OpKind.SEND:
                slot.history.clear()
                slot.timed_out = isinstance(exc, AnswerTimeoutError)
                return Outcome.UNCERTAIN, str(exc), None  # slot.pending stays: it is settled next
            if op.kind is OpKind.STREAM_FINISH:  # may have landed: never sent again
                slot.state, slot.error = PartState.UNCERTAIN, f"uncertain: {exc}"
                slot.history.clear()
                return Outcome.UNCERTAIN, str(exc), None
            # an edit or a delete is idempotent: retried with backoff, like a network failure
            slot.maybe_shown = op.text if op.kind is OpKind.EDIT else None
            if self._give_up(slot):
                slot.state = PartState.UNCERTAIN
                slot.error = f"uncertain: no answer after {slot.attempts} attempts: {exc}"
                slot.retry_at_finish = not self.finalizing
            return Outcome.UNCERTAIN, str(exc), None
        if self._give_up(slot):
            slot.state, slot.error = PartState.FAILED, f"gave up after {slot.attempts} attempts: {exc}"
            slot.retry_at_finish = not self.finalizing
            return Outcome.FAILED, str(exc), None
        return Outcome.RETRY, str(exc), None

    def _give_up(self, slot: Slot) -> bool:
        """Count a failed attempt; True when the retry window (from the first failure in a row) is used up, else
        schedule the retry with exponential backoff (0.25 s doubling, at most :data:`MAX_BACKOFF_S`)."""
        now = self._clock.now()
        slot.attempts += 1
        if slot.failing_since is None:
            slot.failing_since = now
        if now - slot.failing_since >= self.retry_window_s:
            return True
        slot.retry_at = now + min(MAX_BACKOFF_S, 0.25 * 2 ** min(slot.attempts - 1, 16))
        return False
