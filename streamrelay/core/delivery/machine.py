"""The delivery machine: one conversation's message parts and every transition they make. Sans-I/O.

Inputs: the desired parts the run's stages write into the :class:`~core.delivery.slotbook.SlotBook`, and call
outcomes (:mod:`core.delivery.calls`: done, not done, unknown). Outputs: the next call to make, as a value
(:meth:`DeliveryMachine.next_op` decides it with the :class:`~core.delivery.planner.Planner`, :meth:`call_for` makes
it a platform call, :meth:`intent_for` the ledger's intent). It never awaits, sleeps or calls anything: the
:class:`~core.delivery.reconciler.Reconciler` drives it and the :class:`~core.delivery.executor.Executor` makes its
calls, in the manner of h11's ``Connection``.

What each outcome does to a part, per call (DESIGN §4, §5, §8):

- done: :meth:`on_done` (the part shows the text; a create's message id is noted; a settle's settlement applied).
- not done / unknown: the first row of :data:`RULES` whose call kinds and error classes match, e.g.

  ========================== =================================== =============================================
  call                        error                               the part
  ========================== =================================== =============================================
  settle                      429 / outage / timeout / other      asked again later; past the window uncertain
  delete stray copy           gone / 429 / outage / other         done / later / later / the copy is reported
  any                         native streaming refused            native off for the run; goes on as messages
  any                         429                                 merge pending states; the chain pauses
  any                         429 longer than max_retry_after_s   failed (refused for now); the end tries once more
  stream append (timeout)     unknown                             never appended again: rewritten as a message
  stream start (timeout)      unknown                             native off; goes on as a plain message; Slack:
                                                                  settled below it, the stream found deleted
  send (timeout, unreadable)  unknown                             pending kept: settled next, never resent
  stream stop (timeout)       unknown                             uncertain (reported), never sent again
  edit, delete (timeout)      unknown                             retried with backoff inside the window
  any                         outage (not done)                   retried with backoff; past the window failed
  edit                        frozen                              keeps what it shows; a new part continues
  any                         bad format (markdown)               sent again without markup (degraded)
  any                         empty                               skipped
  edit, delete, stream        target gone                         sent anew (a delete: done)
  any                         anything else                       failed, with its cause
  ========================== =================================== =============================================

Settling (a create whose outcome is unknown is never blindly sent again): ``found``: it landed (a second copy made
meanwhile is deleted); ``not_sent``: made again; ``needs_bound``: made again, then settled below the new message;
``unknown``: a text that still grows or changed goes on in a new message (the old create is reported: a duplicate
is possible), a text that timed out as it is stays uncertain; a media item is never sent again on a guess.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass

from streamrelay.core.budgets.fair import Requester
from streamrelay.core.clock import Clock
from streamrelay.core.delivery.buttons import ButtonPlan
from streamrelay.core.delivery.calls import (
    Call,
    CallResult,
    Delete,
    Done,
    Edit,
    NotDone,
    OpenThread,
    SendMedia,
    SendText,
    SetControl,
    Settle,
    StreamAppend,
    StreamCancel,
    StreamInform,
    StreamInformEnd,
    StreamStart,
    StreamStop,
    TypingOff,
    TypingOn,
    Unknown,
)
from streamrelay.core.delivery.controls import ControlPlan
from streamrelay.core.delivery.executor import Intent
from streamrelay.core.delivery.planner import Planner
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import (
    Op,
    OpKind,
    Outcome,
    Slot,
    delivery_id,
    same_render,
    stream_start_id,
)
from streamrelay.core.errors import (
    AnswerTimeoutError,
    DeliveryError,
    MessageFrozenError,
    NativeUnavailableError,
    PayloadRejectedError,
    PlatformUnavailableError,
    RateLimitedError,
    RejectReason,
    RetryAfterTooLongError,
    TargetNotFoundError,
    UncertainDeliveryError,
    UnreadableAnswerError,
)
from streamrelay.core.events import Target
from streamrelay.core.media import MediaItem
from streamrelay.core.ports import PendingSend, Settlement, SettleOutcome, StopControl, TextFormat
from streamrelay.core.records.report import PartState, SlotRole

MAX_BACKOFF_S = 15.0
"""The longest wait between two attempts of a call that is retried through an outage."""

Decision = tuple[Outcome, str, float | None]
"""What an outcome came to for a part: the ledger's label, a detail, and ``retry_after_s`` after a 429."""

_ANY: frozenset[OpKind] = frozenset(OpKind)
_STREAM_ONLY = frozenset({OpKind.STREAM_UPDATE, OpKind.STREAM_REFRESH})
_EDITS_DELETES = frozenset(
    {OpKind.EDIT, OpKind.DELETE, OpKind.STREAM_UPDATE, OpKind.STREAM_REFRESH, OpKind.STREAM_FINISH}
)
_NOT_CREATES = frozenset(k for k in OpKind if not k.creates)
_TRANSIENT = (UncertainDeliveryError, PlatformUnavailableError)


def reached(exc: Exception) -> bool:
    """True when an unknown create reached the platform, which most often stored it: no answer in time, or a 2xx
    answer we could not read (a 5xx or a reset says less)."""
    return isinstance(exc, AnswerTimeoutError) or (isinstance(exc, UnreadableAnswerError) and exc.accepted)


def media_of(slot: Slot, text: str) -> MediaItem | None:
    """The media item a create of ``slot`` sends (its text is :meth:`MediaItem.text`), or None for a text part.

    Raises:
        ValueError: a media part whose text is not a media item's (a ledger written by something else).
    """
    return MediaItem.from_text(text) if slot.role is SlotRole.MEDIA else None


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of the outcome table: for a call of one of ``kinds`` that ended in one of ``errors``, ``decide``
    (a method name of :class:`DeliveryMachine`, called with the op and the error) says what the part does."""

    kinds: frozenset[OpKind]
    errors: tuple[type[DeliveryError], ...]
    decide: str
    why: str


RULES: tuple[Rule, ...] = (
    Rule(frozenset({OpKind.SETTLE}), (DeliveryError,), "_settle_failed", "asked again later; then uncertain"),
    Rule(frozenset({OpKind.DELETE_STRAY}), (DeliveryError,), "_stray_failed", "gone is done; the copy is reported"),
    Rule(_ANY, (NativeUnavailableError,), "_native_refused", "native off for the run; the parts go on as messages"),
    Rule(_ANY, (RateLimitedError,), "_rate_limited", "pending states merge into one; the chain pauses"),
    Rule(_ANY, (RetryAfterTooLongError,), "_refused_for_now", "failed: a wait past the cap; the end tries again"),
    Rule(_STREAM_ONLY, (UncertainDeliveryError,), "_append_unknown", "never appended again: rewritten as a message"),
    Rule(
        frozenset({OpKind.STREAM_START}),
        (UncertainDeliveryError,),
        "_start_unknown",
        "native off: a message; settled below",
    ),
    Rule(frozenset({OpKind.SEND}), (UncertainDeliveryError,), "_send_unknown", "settled next, never sent blindly"),
    Rule(
        frozenset({OpKind.STREAM_FINISH}),
        (UncertainDeliveryError,),
        "_finish_unknown",
        "a create: settled; repeatable: sent again; else uncertain",
    ),
    Rule(_ANY, (UncertainDeliveryError,), "_retry_unknown", "idempotent: retried with backoff in the window"),
    Rule(_ANY, (PlatformUnavailableError,), "_retry_outage", "retried with backoff; past the window failed"),
    Rule(frozenset({OpKind.EDIT}), (MessageFrozenError,), "_frozen", "keeps what it shows; a new part continues"),
    Rule(_ANY, (PayloadRejectedError,), "_rejected", "bad markup: sent stripped; empty: skipped; else failed"),
    Rule(_NOT_CREATES, (TargetNotFoundError,), "_gone", "the message is gone: sent anew (a delete: done)"),
    Rule(_ANY, (DeliveryError,), "_failed", "failed, with its cause"),
)
"""The outcome table (module docstring): the first row matching the call's kind and the error's class decides."""


def rule_for(kind: OpKind, error: DeliveryError) -> Rule:
    """The row of :data:`RULES` that decides a call of ``kind`` ending in ``error`` (the last row matches all)."""
    for rule in RULES:
        if kind in rule.kinds and isinstance(error, rule.errors):
            return rule
    raise AssertionError("the last rule matches every delivery error")


class StatusVerdict(enum.StrEnum):
    """What a status line's outcome comes to (:data:`STATUS_RULES`)."""

    SHOWN = "shown"
    """Done: the stream shows it."""
    AGAIN = "again"
    """Not done for now (a 429; the chain pauses for its ``retry_after``): the latest line is tried again after it,
    while the stream is still open (never after its final)."""
    DROPPED = "dropped"
    """Refused, unknown or failed: cosmetic, so dropped (logged at debug); the next status change is tried."""


@dataclass(frozen=True, slots=True)
class StatusRule:
    """One row of the status lines' outcome table: an outcome class, and for a not-done/unknown one the error
    classes it covers (empty: all)."""

    outcome: type[Done] | type[NotDone] | type[Unknown]
    errors: tuple[type[DeliveryError], ...]
    verdict: StatusVerdict
    why: str


STATUS_RULES: tuple[StatusRule, ...] = (
    StatusRule(Done, (), StatusVerdict.SHOWN, "the stream shows the line"),
    StatusRule(NotDone, (RetryAfterTooLongError,), StatusVerdict.DROPPED, "a wait past the cap: cosmetic, dropped"),
    StatusRule(NotDone, (RateLimitedError,), StatusVerdict.AGAIN, "429: the latest line after the pause"),
    StatusRule(NotDone, (), StatusVerdict.DROPPED, "refused (the stream ended, not allowed, bad): dropped"),
    StatusRule(Unknown, (), StatusVerdict.DROPPED, "may show: never sent again blind"),
)
"""The outcome table of :class:`~core.delivery.calls.StreamInform` (a status line on a native stream): the first
row matching decides. A status line never changes a part, never turns native streaming off and is never in the
ledger: the answer's calls decide that."""


def cut_status(line: str, limit: int) -> str:
    """``line`` within ``limit`` UTF-16 units (> 0): as it is, or cut between code points and ended with "…"."""
    if len(line.encode("utf-16-le")) <= 2 * limit:
        return line
    units, end = 1, 0  # the ellipsis is one unit
    for end, char in enumerate(line):  # noqa: B007 (end is used after the loop)
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            break
    return line[:end].rstrip() + "…"


def status_rule(result: CallResult) -> StatusRule:
    """The row of :data:`STATUS_RULES` that decides a status line's ``result`` (the last rows match all)."""
    for rule in STATUS_RULES:
        if isinstance(result, rule.outcome) and (
            not rule.errors or (not isinstance(result, Done) and isinstance(result.error, rule.errors))
        ):
            return rule
    raise AssertionError("the status rules cover every outcome")


class DeliveryMachine:
    """One conversation's delivery state and transitions (module docstring). Sans-I/O.

    Args:
        book: the conversation's slot book.
        chain: the conversation's send chain, for its known message ids (``note_message``, ``known_ids``,
            ``last_message_id``); the machine never calls through it and asks no budget.
        target: where the conversation's messages go.
        clock: the injected clock (backoff, throttle).
        retry_window_s: how long calls safe to retry are retried through an outage (seconds).
        native: the run streams answers natively (the adapter has :class:`core.ports.NativeStreaming`).
        stream_refresh_s: seconds after which an unchanged native stream must be shown again, or None.
        exclusive_bot: the bot token is the sidecar's alone (Telegram can then settle by probing ids).
        requester: who asks for the bot's shared budgets (the machine asks no budget: its calls' grants are asked
            when they are due, :meth:`SendChain.grant`).
        typing_every_s: while the run is open and nothing new became visible for this many seconds, a typing
            indicator is due (at the start too); None: never. Never during finalization.
        control: the Stop control the conversation's newest live message carries (:mod:`core.delivery.controls`),
            or None.
        finish_creates: a native stream's finish creates the message (Telegram's sendMessage after the drafts;
            :attr:`core.ports.NativeStreaming.finish_creates`).
        finish_repeats: a finish that is no create and whose outcome is unknown is sent again, retried like an edit
            (:attr:`core.ports.NativeStreaming.finish_repeats`, Teams); else it is reported uncertain.
        settles_start: a stream start whose outcome is unknown can be settled with the platform
            (:attr:`core.ports.NativeStreaming.settles_start`, Slack): settled below the message the part goes on
            in, and the stream's first words deleted when found; else they are reported uncertain.
        status_chars: the adapter shows status lines on its native stream (:class:`core.ports.StreamStatus`), at
            most this many characters each; None: it does not (no :class:`~core.delivery.calls.StreamInform`).
    """

    __slots__ = (
        "_chain",
        "_clock",
        "_exclusive",
        "_finish_creates",
        "_finish_repeats",
        "_last_typing_at",
        "_settles_start",
        "_status_sent",
        "_target",
        "book",
        "buttons",
        "controls",
        "last_visible_at",
        "native",
        "planner",
        "requester",
        "retry_window_s",
        "run",
        "status_calls",
        "status_chars",
        "typing_calls",
        "typing_every_s",
    )

    def __init__(
        self,
        *,
        book: SlotBook,
        chain: SendChain,
        target: Target,
        clock: Clock,
        retry_window_s: float,
        native: bool,
        stream_refresh_s: float | None,
        exclusive_bot: bool,
        requester: Requester,
        typing_every_s: float | None = None,
        control: StopControl | None = None,
        finish_creates: bool = False,
        finish_repeats: bool = False,
        settles_start: bool = False,
        status_chars: int | None = None,
    ) -> None:
        self.book = book
        self.run = book.run
        self._chain = chain
        self._target = target
        self._clock = clock
        self.retry_window_s = retry_window_s
        self._exclusive = exclusive_bot
        self.requester = requester
        """Who asks for the bot's shared budgets (the reconciler asks the grants of this machine's calls as it)."""
        self.planner = Planner(book)
        self.planner.native = native
        self.planner.stream_refresh_s = stream_refresh_s
        self.native = native
        self.last_visible_at: float | None = None
        """Clock seconds when a call last made something visible (the typing indicator waits after it)."""
        self.typing_every_s = typing_every_s
        self._last_typing_at: float | None = None
        self.typing_calls = 0
        """Typing indicators asked for (the run's end takes one down only when it showed any)."""
        self._finish_creates = finish_creates
        self._finish_repeats = finish_repeats
        self._settles_start = settles_start
        self.controls = ControlPlan(control, book) if control is not None else None
        """Which message carries the control and which may (None: no control)."""
        self.buttons = ButtonPlan(book)
        """The buttons approval parts carry (:mod:`core.delivery.buttons`)."""
        self.status_chars = status_chars
        self._status_sent = ""
        """The last status line shown on the stream, or dropped (it is not tried again unless the status changes)."""
        self.status_calls = 0
        """Status lines shown on the stream (the run's end takes a stream of status lines alone down only then)."""

    @property
    def finalizing(self) -> bool:
        return self.book.finalizing

    def next_op(self) -> Op | None:
        """The next call, with the earliest clock second it may start: a control move right after the create that
        made a new live message, then what the parts need (:meth:`Planner.next_op`); once the final is delivered,
        the control taken off every message that may carry it (:class:`~core.delivery.controls.ControlPlan`)."""
        if (op := self.buttons.next_op()) is not None:
            return op  # an approval's buttons: on right after its message, off before the edit with the decision
        controls = self.controls
        if controls is not None and not self.finalizing and (op := controls.next_op()) is not None:
            return op  # due at once: it waits for the edit budget and 429 pauses, never for the preview throttle
        op = self.planner.next_op()
        if op is None and controls is not None and self.finalizing:
            if not controls.ending:
                controls.end()
            return controls.next_op()
        return op

    def held_back(self, op: Op) -> None:
        """``op`` is due but the rate budgets or a 429 pause hold it back (:meth:`SendChain.grant`): the platform
        is not keeping up, so the part's pending states merge into one (its latest text goes next)."""
        if op.kind.journaled:
            op.slot.history.clear()

    def typing_due(self) -> float | None:
        """When the next typing indicator is due (clock seconds), or None (no indicator, or finalizing)."""
        if self.typing_every_s is None or self.finalizing:
            return None
        last = max((t for t in (self.last_visible_at, self._last_typing_at) if t is not None), default=None)
        return self._clock.now() if last is None else last + self.typing_every_s

    def typing_call(self, room: bool) -> TypingOn | None:
        """The typing indicator, now that it is due: a :class:`~core.delivery.calls.TypingOn`, or None when the
        rate budget has no ``room`` for it (:meth:`SendChain.grant`; skipped: the next one is due ``typing_every_s``
        later). Never in the ledger (it is not a message), never retried."""
        self._last_typing_at = self._clock.now()
        if not room:
            return None
        self.typing_calls += 1
        return TypingOn(self._target)

    def typing_off(self) -> TypingOff | None:
        """At the run's end: take down an indicator that would outlive it, when any was shown."""
        return TypingOff(self._target) if self.typing_calls else None

    def status_due(self) -> bool:
        """A status line is due on the native stream (:class:`~core.delivery.calls.StreamInform`): the adapter shows
        them, the run still streams natively and is not finalizing, the run's status changed since the last line
        tried, and the answer's stream is open or about to open (no answer part yet; never on a finished one)."""
        if self.status_chars is None or not self.native or self.finalizing or self.book.catching_up:
            return False
        line = self.book.stream_status
        if not line or line == self._status_sent:
            return False
        answers = [slot for slot in self.book.slots if slot.role is SlotRole.ANSWER]
        return not answers or answers[-1].streaming

    def status_call(self) -> StreamInform:
        """The status line now due (:meth:`status_due`), cut to ``status_chars`` with an ellipsis: counted in UTF-16
        units (what a character limit most often counts; at least the code points), cut between code points."""
        assert self.status_chars is not None
        return StreamInform(self._target, cut_status(self.book.stream_status, self.status_chars))

    def status_applied(self, line: str, result: CallResult) -> StatusRule:
        """The outcome of the status line ``line`` (the book's status when it was due), by :data:`STATUS_RULES`:
        shown or dropped (not tried again until the status changes), or kept due (a 429: the chain pauses)."""
        rule = status_rule(result)
        if rule.verdict is not StatusVerdict.AGAIN:
            self._status_sent = line
        if isinstance(result, Done):
            self.status_calls += 1
        return rule

    def status_off(self) -> StreamInformEnd | None:
        """At the run's end: take down a stream that showed status lines alone, when any was shown."""
        return StreamInformEnd(self._target) if self.status_calls else None

    # --- calls out ----------------------------------------------------------------------------------------

    def shortcut(self, op: Op) -> bool:
        """True when ``op`` needs no call: an edit that would render what the part shows ("not modified")."""
        slot, kept = op.slot, op.slot.shown_kept
        if op.kind not in (OpKind.EDIT, OpKind.STREAM_UPDATE) or kept is None or slot.verify:
            return False
        if len(op.text.strip()) > len(kept):  # longer than all it shows (a growing preview's edit): no text built
            return False
        if same_render(op.text, slot.shown):
            self._sent(slot, op.text)
            return True
        return False

    def call_for(self, op: Op) -> Call:
        """The platform call ``op`` is (a create gets a new delivery id and becomes the part's pending create:
        under way from here, so a stop meanwhile keeps it, and a restart settles it once its intent is written)."""
        slot, target, kind = op.slot, self._target, op.kind
        if kind is OpKind.SEND:
            slot.pending = self._new_create(slot, op.text)
            media = slot.pending.media
            if media is not None:
                return SendMedia(target, media, slot.fmt, slot.pending.delivery_id)
            return SendText(target, op.text, slot.fmt, slot.pending.delivery_id)
        if kind is OpKind.SETTLE:
            assert slot.pending is not None
            pending = dataclasses.replace(
                slot.pending,
                known_ids=self._chain.known_ids(),
                exclusive=self._exclusive,
                media=slot.pending.media or media_of(slot, slot.pending.text),  # restored from the ledger
            )
            return Settle(target, pending)
        if kind is OpKind.DELETE_STRAY:
            assert slot.stray is not None
            return Delete(target, slot.stray)
        if kind is OpKind.STREAM_START:
            return StreamStart(target, op.text, slot.fmt)
        assert slot.message_id is not None
        if kind is OpKind.OPEN_THREAD:
            return OpenThread(target, slot.message_id, op.text)
        if kind.control:
            return self._control_call(op)
        mid = slot.message_id
        if kind is OpKind.EDIT:
            return Edit(target, mid, op.text, slot.fmt)
        if kind is OpKind.DELETE:
            return Delete(target, mid)
        if kind in (OpKind.STREAM_UPDATE, OpKind.STREAM_REFRESH):
            return StreamAppend(target, mid, slot.shown or "", op.text, slot.fmt)
        if kind is OpKind.STREAM_FINISH:
            return StreamStop(target, mid, slot.shown or "", op.text, slot.fmt)
        return StreamCancel(target, mid)

    def _control_call(self, op: Op) -> SetControl:
        """A control call: an approval part's own buttons (:mod:`core.delivery.buttons`), or the run's Stop control
        put on or taken off (:mod:`core.delivery.controls`)."""
        slot = op.slot
        assert slot.message_id is not None
        if slot.role is SlotRole.APPROVAL:
            return SetControl(self._target, slot.message_id, op.text, slot.fmt, ButtonPlan.control_for(op))
        assert self.controls is not None
        control = self.controls.control if op.kind is OpKind.CONTROL_ON else None
        return SetControl(self._target, slot.message_id, op.text, slot.fmt, control)

    def _new_create(self, slot: Slot, text: str) -> PendingSend:
        """A new create of ``slot`` showing ``text``: its own delivery id, the newest message known before it (the
        stored message, if any, is newer), and, for a media part, its item."""
        slot.creates += 1
        return PendingSend(
            delivery_id(self.run, slot.index, slot.creates),
            text,
            slot.fmt,
            after_id=self._chain.last_message_id,
            exclusive=self._exclusive,
            media=media_of(slot, text),
        )

    def intent_for(self, op: Op) -> Intent | None:
        """The ledger's record of ``op`` before it is made (call :meth:`call_for` first: a create's pending)."""
        if not op.kind.journaled:
            return None  # a control move or a thread's opening is no message's text: paced and metered, not journaled
        slot = op.slot
        pending = slot.pending if op.kind is OpKind.SEND else None
        if op.kind is OpKind.STREAM_START:  # in the ledger only: a restart learns a stream may have opened
            pending = self._start_pending(slot, op.text)
        elif op.kind is OpKind.STREAM_FINISH and self._finish_creates:
            # In the ledger only: a finish that creates the message (Telegram's sendMessage) cut by a restart is a
            # create whose outcome is unknown, settled then, never sent again blindly (chaos-6-00009: shown twice).
            pending = PendingSend(
                delivery_id(self.run, slot.index, slot.creates + 1),
                op.text,
                slot.fmt,
                after_id=self._chain.last_message_id,
                exclusive=self._exclusive,
            )
        return Intent(slot.index, slot.role, str(op.kind), op.text, pending)

    def _start_pending(self, slot: Slot, text: str) -> PendingSend:
        """A stream start of ``slot`` showing ``text``, as its settle needs it (no platform call carries its id)."""
        start_id = stream_start_id(self.run, slot.index, slot.creates + 1)
        return PendingSend(start_id, text, slot.fmt, after_id=self._chain.last_message_id)

    def restored(self) -> None:
        """After the book was restored from the ledger (a restart): a native stream start that was in flight when
        the process died is settled like one answered unknown where the platform settles starts (Slack reads the
        thread back below the part's message: no id of the call is needed): the part goes on as a message, the start
        is settled below it (found: its stream deleted). Elsewhere it cannot be settled: its first words may show
        (Teams) and are reported as an uncertain part of its own; a Telegram draft lapses by itself; the part is
        shown anew, streaming again when the run streams. A start answered unknown before the restart and not yet
        settled (``unbounded``) goes on as a message, to be settled below it; a part
        whose message shows already (a second restart) has it settled below that message next."""
        for slot in self.book.slots:
            pending = slot.pending
            if pending is not None and pending.stream_start:
                slot.pending, slot.restarted = None, False
                if slot.message_id is None:
                    slot.creates = 0
                if self._settles_start:  # never a second stream beside one that may be open (chaos-5-00025)
                    slot.unbounded, slot.native = pending, False
                    self._bound_start(slot)  # its message shows already (a second restart): settled below it next
                    continue
                if not self._finish_creates:
                    self.book.orphans_of(slot, pending.text)
                slot.native = self.native  # nothing of it is known to show: it may stream again
            if slot.unbounded is not None and slot.unbounded.stream_start:
                slot.native = False  # it goes on as a message, and its unknown start is settled below it
                self._bound_start(slot)  # below the part's message when it shows already

    # --- outcomes in ----------------------------------------------------------------------------------------

    def apply(self, op: Op, result: CallResult) -> Decision:
        """What ``result`` does to ``op``'s part (module docstring): :meth:`on_done`, or the table's rule."""
        if op.kind is OpKind.OPEN_THREAD:
            return self._thread_opened(op.slot, result)
        if op.kind.control:
            error = None if isinstance(result, Done) else result.error
            retry_after_s = error.retry_after_s if isinstance(error, RateLimitedError) else None
            if op.slot.role is SlotRole.APPROVAL:
                return self.buttons.apply(op, error), str(error or ""), retry_after_s
            assert self.controls is not None
            return self.controls.apply(op, error), str(error or ""), retry_after_s
        if isinstance(result, Done):
            return self.on_done(op, result.value), "", None
        return self.on_error(op, result.error)

    def _thread_opened(self, slot: Slot, result: CallResult) -> Decision:
        """A thread's opening under ``slot``'s message, made once: done, the part's ``thread`` is where its messages
        go; else ``thread_error`` says why (the sub-agent stays a status line)."""
        if isinstance(result, Done) and isinstance(result.value, Target):
            slot.thread = result.value
            return Outcome.ACK, "", None
        error = result.error if not isinstance(result, Done) else f"an answer without a thread: {result.value!r}"
        slot.thread_error = str(error)
        retry_after_s = error.retry_after_s if isinstance(error, RateLimitedError) else None
        return Outcome.FAILED, str(error), retry_after_s

    def on_error(self, op: Op, exc: DeliveryError) -> Decision:
        """What ``exc`` means for ``op``'s part: the first matching row of :data:`RULES`."""
        if op.kind is OpKind.SEND and not isinstance(exc, UncertainDeliveryError):
            op.slot.pending = None  # the platform answered: nothing was stored
        decide: Callable[[Op, DeliveryError], Decision] = getattr(self, rule_for(op.kind, exc).decide)
        return decide(op, exc)

    def on_done(self, op: Op, value: object) -> Outcome:
        """The call was done: the part shows its text; ``value`` is what the platform answered."""
        slot, kind = op.slot, op.kind
        if kind is OpKind.SETTLE:
            assert isinstance(value, Settlement)
            return self._settled(op, value)
        if kind is OpKind.DELETE_STRAY:
            slot.stray = None
            return Outcome.ACK
        if kind is OpKind.SEND:
            slot.message_id = str(value)
            slot.pending = None
            self._chain.note_message(slot.message_id)
            self._sent(slot, op.text)
            if self.controls is not None:
                self.controls.shown(slot)
            if slot.unbounded is not None:  # now the older create can be settled below this message
                slot.pending, slot.unbounded = dataclasses.replace(slot.unbounded, before_id=slot.message_id), None
        elif kind is OpKind.EDIT:
            # "not modified" (False) that was not expected: verified at the end. What the part showed is built only
            # then (O(its length), a string of a range of the answer), not on every edit.
            verifying = slot.verify
            slot.verify = (
                value is False
                and not verifying
                and not (same_render(op.text, slot.shown) or same_render(op.text, slot.maybe_shown))
            )
            slot.maybe_shown = None
            self._sent(slot, op.text)
        elif kind is OpKind.STREAM_START:
            slot.message_id = str(value)
            slot.streaming, slot.streamed_at = True, self._clock.now()
            self._sent(slot, op.text)
        elif kind in (OpKind.STREAM_UPDATE, OpKind.STREAM_REFRESH):
            slot.streamed_at = self._clock.now()
            self._sent(slot, op.text)
        elif kind is OpKind.STREAM_FINISH:
            slot.message_id = str(value)
            slot.streaming = False
            self._chain.note_message(slot.message_id)
            self._sent(slot, op.text)
            self._bound_start(slot)
        elif kind is OpKind.STREAM_CANCEL:
            slot.message_id, slot.shown, slot.streaming, slot.state = None, None, False, PartState.SKIPPED
        else:  # a delete
            slot.message_id, slot.shown, slot.state = None, None, PartState.SKIPPED
        return Outcome.ACK

    def _sent(self, slot: Slot, text: str) -> None:
        pinned = slot.pinned
        if pinned is not None and pinned[0] is text:  # the text is a range of the answer: the part keeps the range
            slot.shown_kept = pinned[1]
            if slot.desired_kept is text:
                slot.desired_kept = pinned[1]
            slot.pinned = None
        elif self._is_desired_range(slot, text):  # the part keeps its desired range (a frozen part): shown is it
            slot.shown_kept = slot.desired_kept
        else:
            slot.shown = text
        self.last_visible_at = self._clock.now()
        history = slot.history
        if history:  # the texts set before this one are passed (each O(len(history)): a few at a time)
            at = history.index(text) + 1 if text in history else len(history)
            del history[:at]
        slot.attempts, slot.failing_since, slot.error = 0, None, None
        if slot.shows_desired():
            slot.state = PartState.ACKED

    @staticmethod
    def _is_desired_range(slot: Slot, text: str) -> bool:
        """True when the part keeps what it should show as a range of the answer and ``text`` is exactly it. O(1)
        unless the lengths match, then O(its length)."""
        kept = slot.desired_kept
        return kept.__class__ is not str and len(kept) == len(text) and slot.desired == text

    def _settled(self, op: Op, settlement: Settlement) -> Outcome:
        """What the platform said of the part's unsettled create (module docstring). A bounded settle (the part
        was sent again because the platform needed a later message) keeps one copy: the older."""
        slot = op.slot
        pending = slot.pending
        assert pending is not None
        slot.pending = None
        again = slot.message_id  # the part sent again (bounded settle), or None
        if pending.stream_start:
            return self._start_settled(slot, pending, settlement)
        if settlement.outcome is SettleOutcome.FOUND and settlement.message_id is not None:
            slot.message_id, slot.stray = settlement.message_id, again  # the first copy stays; a second one goes
            self._chain.note_message(settlement.message_id, newest=False)
            self._sent(slot, pending.text)
            if self.controls is not None:
                self.controls.shown(slot)
            self._bound_start(slot)
            return Outcome.FOUND
        if settlement.outcome is SettleOutcome.NOT_SENT:
            return Outcome.NOT_SENT  # made again (or it was: the bound's message is the only copy)
        if settlement.outcome is SettleOutcome.NEEDS_BOUND and again is None and pending.before_id is None:
            slot.unbounded = pending  # sent again next; settled once the new message gives the bound
            return Outcome.NEEDS_BOUND
        if again is not None:
            self.book.orphans_of(slot, pending.text)  # the part shows; the older create may show too
            return Outcome.UNKNOWN
        slot.uncertain_text, slot.uncertain_create = pending.text, pending
        slot.state, slot.error = PartState.UNCERTAIN, "uncertain: the platform cannot tell whether it was stored"
        timed_out, slot.timed_out, slot.restarted = slot.timed_out and not slot.restarted, False, False
        media = pending.media or media_of(slot, pending.text)
        if media is not None:
            return Outcome.UNKNOWN  # a media item is never sent again on a guess: it stays uncertain, reported
        if slot.role is SlotRole.APPROVAL:
            # An approval message is never sent blind twice (a person would see two, with buttons on one): it stays
            # uncertain, reported, and is not grown with its decision (SlotBook.assign); the decision is still taken
            # from the live page or the API. A platform that settles (Telegram with exclusive_bot, Slack, Discord,
            # Matrix, WhatsApp with its webhooks, Teams with Graph) never gets here with a stored one.
            slot.error = "uncertain: the approval message may show; never sent again (the platform cannot tell)"
            return Outcome.UNKNOWN
        if slot.live is not None or not same_render(slot.desired, pending.text) or not timed_out:
            # Still growing or changed: the text goes on in a new message. Or the create died with the process, or
            # met a 5xx or a reset (a proxy's 502 and a refused connection mostly mean not stored): sent again
            # rather than risk it missing; the report says a duplicate is possible. Only a create that timed out
            # after reaching the platform (which most often stored it) stays as it is, reported uncertain: the case
            # timeout-then-continue.
            self.book.orphan(slot)
        return Outcome.UNKNOWN

    def _start_settled(self, slot: Slot, start: PendingSend, settlement: Settlement) -> Outcome:
        """What the platform said of an unknown stream start, settled below the message the part went on in: its
        first words found are deleted (the part's message shows them, and the rest); not stored: nothing to do;
        cannot tell: reported, a part of its own that may show."""
        if settlement.outcome is SettleOutcome.FOUND and settlement.message_id is not None:
            slot.stray = settlement.message_id
            return Outcome.FOUND
        if settlement.outcome is SettleOutcome.NOT_SENT:
            return Outcome.NOT_SENT
        self.book.orphans_of(slot, start.text)
        return Outcome.UNKNOWN

    def _bound_start(self, slot: Slot) -> None:
        """The part's message is known now (an unknown create of it was found): an unknown stream start before it
        is settled next, below it (:meth:`on_done` does this for a create that was answered)."""
        start = slot.unbounded
        if start is not None and start.stream_start and slot.message_id is not None and slot.pending is None:
            slot.pending, slot.unbounded = dataclasses.replace(start, before_id=slot.message_id), None

    def native_off(self) -> None:
        """Native streaming is off for the rest of the run: the parts go on as preview messages."""
        self.native = self.planner.native = self.book.native = False
        for slot in self.book.slots:
            slot.native = False

    # --- the rows of RULES ----------------------------------------------------------------------------------

    def _settle_failed(self, op: Op, exc: DeliveryError) -> Decision:
        slot = op.slot
        if isinstance(exc, RateLimitedError):
            return Outcome.RATE_LIMITED, str(exc), exc.retry_after_s
        if isinstance(exc, _TRANSIENT) and not self._give_up(slot):
            return Outcome.RETRY, str(exc), None
        pending = slot.pending
        slot.pending = None
        if pending is not None and pending.stream_start:  # the part shows; the stream's first words may show too
            self.book.orphans_of(slot, pending.text)
            return Outcome.UNCERTAIN, str(exc), None
        slot.uncertain_text = pending.text if pending is not None else None
        slot.uncertain_create = pending
        slot.state, slot.error = PartState.UNCERTAIN, f"uncertain: could not be settled: {exc}"
        return Outcome.UNCERTAIN, str(exc), None

    def _stray_failed(self, op: Op, exc: DeliveryError) -> Decision:
        slot = op.slot
        if isinstance(exc, TargetNotFoundError):
            slot.stray = None
            return Outcome.GONE, str(exc), None
        if isinstance(exc, RateLimitedError):
            return Outcome.RATE_LIMITED, str(exc), exc.retry_after_s
        if isinstance(exc, _TRANSIENT) and not self._give_up(slot):
            return Outcome.RETRY, str(exc), None
        slot.stray = None
        self.book.orphans_of(slot, slot.shown or "")
        return Outcome.FAILED, str(exc), None

    def _native_refused(self, op: Op, exc: DeliveryError) -> Decision:
        self.native_off()
        op.slot.streaming = False
        return Outcome.NATIVE_REFUSED, str(exc), None

    def _rate_limited(self, op: Op, exc: DeliveryError) -> Decision:
        assert isinstance(exc, RateLimitedError)
        op.slot.history.clear()  # everything pending merges into one call after the pause
        return Outcome.RATE_LIMITED, str(exc), exc.retry_after_s

    def _refused_for_now(self, op: Op, exc: DeliveryError) -> Decision:
        # A 429 asking for more than the channel obeys: the platform refuses the part for now. It is failed at once
        # with that reason (the run's report, then the desk), never waited for; the rest of the conversation goes
        # on (the chain paused nothing). Failed while the run streams, the end tries it once more (a preview is
        # the answer's one message: the final must not be lost to a refusal met on the way).
        slot = op.slot
        slot.state, slot.error = PartState.FAILED, f"{type(exc).__name__}: {exc}"
        slot.history.clear()
        slot.retry_at_finish = not self.finalizing
        return Outcome.FAILED, str(exc), None

    def _append_unknown(self, op: Op, exc: DeliveryError) -> Decision:
        # An append that may have landed must never be repeated: the part goes on as a message, rewritten whole by
        # an edit (a draft id is no message: that edit finds it gone and re-sends).
        slot = op.slot
        slot.streaming = slot.native = False
        slot.shown = None
        return Outcome.UNCERTAIN, str(exc), None

    def _start_unknown(self, op: Op, exc: DeliveryError) -> Decision:
        # A stream that may have opened holds only the first words and no handle to go on with: the part goes on
        # as a plain message, at once (a settle reads history, a slow budget on Slack). A Telegram draft lapses by
        # itself. Where the platform can settle a start (Slack), it is settled below the part's new message and its
        # first words, found, are deleted: the chat shows them once. Elsewhere they may stay in the thread:
        # reported (a part of its own, uncertain), never claimed delivered beside the answer.
        self.native_off()
        slot = op.slot
        if self._settles_start:
            slot.unbounded = self._start_pending(slot, op.text)
        elif not self._finish_creates:
            self.book.orphans_of(slot, op.text)
        return Outcome.UNCERTAIN, str(exc), None

    def _send_unknown(self, op: Op, exc: DeliveryError) -> Decision:
        op.slot.history.clear()
        op.slot.timed_out = reached(exc)
        return Outcome.UNCERTAIN, str(exc), None  # slot.pending stays: it is settled next

    def _finish_unknown(self, op: Op, exc: DeliveryError) -> Decision:
        slot = op.slot
        slot.history.clear()
        if self._finish_creates:
            # Telegram: the finish is a sendMessage after the drafts, a create like any other: settled (probed with
            # an exclusive bot), never sent blindly, never reported as the draft id, which is no message.
            slot.pending = self._new_create(slot, op.text)
            slot.message_id, slot.shown, slot.streaming, slot.native = None, None, False, False
            slot.timed_out = reached(exc)
            return Outcome.UNCERTAIN, str(exc), None
        if self._finish_repeats:  # Teams: a second final on a completed stream is refused, and that is done
            return self._retry_unknown(op, exc)
        slot.state, slot.error = PartState.UNCERTAIN, f"uncertain: {exc}"  # never sent again
        return Outcome.UNCERTAIN, str(exc), None

    def _retry_unknown(self, op: Op, exc: DeliveryError) -> Decision:
        slot = op.slot  # an edit or a delete is idempotent: retried with backoff, like a network failure
        slot.maybe_shown = op.text if op.kind is OpKind.EDIT else None
        if self._give_up(slot):
            slot.state = PartState.UNCERTAIN
            slot.error = f"uncertain: no answer after {slot.attempts} attempts: {exc}"
            slot.retry_at_finish = not self.finalizing
        return Outcome.UNCERTAIN, str(exc), None

    def _retry_outage(self, op: Op, exc: DeliveryError) -> Decision:
        slot = op.slot
        if self._give_up(slot):
            slot.state, slot.error = PartState.FAILED, f"gave up after {slot.attempts} attempts: {exc}"
            slot.retry_at_finish = not self.finalizing
            return Outcome.FAILED, str(exc), None
        return Outcome.RETRY, str(exc), None

    def _frozen(self, op: Op, exc: DeliveryError) -> Decision:
        if op.slot.message_id is None:
            return self._failed(op, exc)
        self.book.freeze(op.slot)
        return Outcome.FROZEN, str(exc), None

    def _rejected(self, op: Op, exc: DeliveryError) -> Decision:
        assert isinstance(exc, PayloadRejectedError)
        slot = op.slot
        if exc.reason is RejectReason.BAD_FORMAT and slot.fmt is TextFormat.MARKDOWN:
            slot.fmt, slot.degraded = TextFormat.STRIPPED, True
            return Outcome.DEGRADED, str(exc), None
        if exc.reason is RejectReason.EMPTY:
            slot.state = PartState.SKIPPED
            return Outcome.SKIPPED, str(exc), None
        return self._failed(op, exc)

    def _gone(self, op: Op, exc: DeliveryError) -> Decision:
        slot = op.slot
        slot.message_id, slot.shown = None, None  # the message is gone: show the part anew
        slot.native = slot.streaming = False
        if op.kind in (OpKind.DELETE, OpKind.STREAM_CANCEL):
            slot.state = PartState.SKIPPED  # ... or, for a delete, that was the point
        return Outcome.GONE, str(exc), None

    def _failed(self, op: Op, exc: DeliveryError) -> Decision:
        slot = op.slot
        slot.state, slot.error = PartState.FAILED, f"{type(exc).__name__}: {exc}"
        slot.history.clear()
        return Outcome.FAILED, str(exc), None

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
