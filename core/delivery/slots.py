"""The reconciler's vocabulary: message parts (slots), the calls that change them (ops), and what a call's
outcome was. Types, not strings: the planner decides an :class:`Op`, the executor performs it and records an
:class:`Outcome` in the ledger.
"""

from __future__ import annotations

import enum
import hashlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from core.events import Target
from core.ports import STREAM_START_MARK, CallKind, PendingSend, TextFormat
from core.records.report import PartState, SlotRole


class OpKind(enum.StrEnum):
    """One platform call of a part."""

    SEND = "send"
    EDIT = "edit"
    DELETE = "delete"
    DELETE_STRAY = "delete_stray"
    """Delete a second copy of the part (sent again while the first had landed after all)."""
    SETTLE = "settle"
    """Ask the platform whether a create whose outcome is unknown stored a message (:meth:`settle_send`)."""
    STREAM_START = "stream_start"
    STREAM_UPDATE = "stream_update"
    STREAM_REFRESH = "stream_refresh"
    STREAM_FINISH = "stream_finish"
    STREAM_CANCEL = "stream_cancel"
    CONTROL_ON = "control_on"
    """Put the message's control on (:mod:`core.delivery.controls`)."""
    CONTROL_OFF = "control_off"
    """Take the message's control off."""
    OPEN_THREAD = "open_thread"
    """Open a side conversation under the part's message (a sub-agent's thread: :attr:`Slot.thread_title`)."""

    @property
    def call_kind(self) -> CallKind:
        """The rate budgets' name for this op."""
        return _CALL_KINDS[self]

    @property
    def creates(self) -> bool:
        """True when the call makes a new message (its outcome decides whether a message exists)."""
        return self in (OpKind.SEND, OpKind.STREAM_START)

    @property
    def control(self) -> bool:
        """True for a control move (never in the ledger, never told to watchers: not a message's text)."""
        return self in (OpKind.CONTROL_ON, OpKind.CONTROL_OFF)

    @property
    def journaled(self) -> bool:
        """True for a call about a message's text, recorded in the ledger and told to watchers: every call but a
        control move and a thread's opening."""
        return self not in (OpKind.CONTROL_ON, OpKind.CONTROL_OFF, OpKind.OPEN_THREAD)


_CALL_KINDS = {
    OpKind.SEND: CallKind.SEND,
    OpKind.SETTLE: CallKind.SEND,
    OpKind.EDIT: CallKind.EDIT,
    OpKind.DELETE: CallKind.DELETE,
    OpKind.DELETE_STRAY: CallKind.DELETE,
    OpKind.STREAM_START: CallKind.STREAM_START,
    OpKind.STREAM_UPDATE: CallKind.STREAM_UPDATE,
    OpKind.STREAM_REFRESH: CallKind.STREAM_UPDATE,
    OpKind.STREAM_FINISH: CallKind.STREAM_FINISH,
    OpKind.STREAM_CANCEL: CallKind.STREAM_FINISH,
    OpKind.CONTROL_ON: CallKind.EDIT,
    OpKind.CONTROL_OFF: CallKind.EDIT,
    OpKind.OPEN_THREAD: CallKind.SEND,
}


class Outcome(enum.StrEnum):
    """What one call came to, as the ledger records it."""

    ACK = "ack"
    UNCERTAIN = "uncertain"
    """It may have landed; a create is settled next (:data:`OpKind.SETTLE`), an edit retried."""
    RETRY = "retry"
    RATE_LIMITED = "rate_limited"
    FAILED = "failed"
    DEGRADED = "degraded"
    SKIPPED = "skipped"
    GONE = "gone"
    FROZEN = "frozen"
    NATIVE_REFUSED = "native_refused"
    FOUND = "found"
    """A settle found the message: the create had landed."""
    NOT_SENT = "not_sent"
    """A settle found no message: the create is made again."""
    UNKNOWN = "unknown"
    """A settle could not tell: a duplicate is possible and reported."""
    NEEDS_BOUND = "needs_bound"
    """A settle needs a later message as its bound: the part is sent again first."""


SIDE_ROLES = frozenset({SlotRole.STATUS, SlotRole.REASONING})
"""Messages whose edits wait behind the answer's calls."""


def same_render(a: str, b: str | None) -> bool:
    """True when two texts render the same: platforms trim leading and trailing whitespace
    (Telegram: https://core.telegram.org/bots/api#editmessagetext answers "message is not modified")."""
    return b is not None and a.strip() == b.strip()


def delivery_id(run: str, slot: int, attempt: int) -> str:
    """The id a create carries so it can be settled (25 characters: Discord's nonce limit,
    https://discord.com/developers/docs/resources/message#create-message)."""
    return "sr" + hashlib.sha256(f"{run}\x00{slot}\x00{attempt}".encode()).hexdigest()[:23]


def stream_start_id(run: str, slot: int, attempt: int) -> str:
    """The id the ledger records with a native stream start's intent: no platform call carries it (a stream start
    cannot be found again); a restart that finds it unanswered knows a stream may have opened (its first words may
    show) and reports it (:meth:`core.delivery.machine.DeliveryMachine.restored`)."""
    return STREAM_START_MARK + delivery_id(run, slot, attempt)[2:]


@dataclass
class Slot:
    """One message part: what it should show and what the platform acknowledged."""

    index: int
    """The part's key in the ledger (its position is its place in the reconciler's list)."""
    role: SlotRole
    desired: str = ""
    fmt: TextFormat = TextFormat.PLAIN
    message_id: str | None = None
    shown: str | None = None
    state: PartState = PartState.PENDING
    degraded: bool = False
    error: str | None = None
    attempts: int = 0
    failing_since: float | None = None
    """Clock seconds of the first of the current run of transient failures (the retry window starts there)."""
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
    pending: PendingSend | None = None
    """A create of this part whose outcome is unknown: settled before anything else is done with the part."""
    unbounded: PendingSend | None = None
    """A create the platform can settle only below a later message (``needs_bound``): the part is sent again, then
    this create is settled with the new message as its bound."""
    restarted: bool = False
    """Its pending create was found in the ledger at a restart: no answer of it was ever seen (the process died)."""
    timed_out: bool = False
    """Its pending create went unanswered within the send timeout (:class:`core.errors.AnswerTimeoutError`): the
    platform was reached and most often stored it (a 5xx or a reset says less)."""
    stray: str | None = None
    """A message of this part that must go: sent again while an older copy existed (found by a bounded settle)."""
    creates: int = 0
    """Creates made for this part (each carries its own delivery id)."""
    uncertain_text: str | None = None
    """The text of an unsettled create this part stands on (state ``uncertain``, no message id)."""
    frozen: bool = False
    """The platform accepts no more edits of its message: it keeps ``shown``; ``cont`` shows the rest."""
    cont: Slot | None = None
    """The part that continues a frozen one (right after it, in order)."""
    parent: Slot | None = None
    """The frozen part this one continues."""
    precedes: Slot | None = None
    """The part this one was placed right before (claimed later than it: :meth:`SlotBook.claim_slot`'s ``before``)."""
    cut: str | None = None
    """This part ends an answer cut at the run's message limit (it ends with the notice): the report's error
    (:mod:`core.delivery.cap`)."""
    over_limit: bool = False
    """Claimed past the run's message limit: in no book, never shown (:meth:`SlotBook.claim_slot`)."""
    thread_title: str | None = None
    """A side conversation is wanted under this part's message, with this title (a sub-agent's thread): the
    machine opens it once the message is shown (:data:`OpKind.OPEN_THREAD`)."""
    thread: Target | None = None
    """Where the thread opened under this part's message takes its messages."""
    thread_error: str | None = None
    """Why no thread could be opened under it (one attempt: the sub-agent stays a status line)."""

    def settled(self) -> bool:
        """True when no further call is needed for this slot."""
        if self.pending is not None or self.stray is not None:
            return False
        if self.state in (PartState.UNCERTAIN, PartState.FAILED, PartState.SKIPPED):
            return True
        if not self.desired.strip():
            return self.message_id is None
        return self.message_id is not None and self.shown == self.desired


@dataclass(frozen=True)
class Op:
    """One call the planner decided: ``kind`` on ``slot`` with ``text``, not before clock second ``not_before``."""

    slot: Slot
    kind: OpKind
    text: str
    not_before: float


_DELIVERY_STATES = {
    OpKind.SEND: "sent",
    OpKind.STREAM_START: "sent",
    OpKind.SETTLE: "sent",
    OpKind.DELETE: "deleted",
    OpKind.DELETE_STRAY: "sent",
    OpKind.STREAM_CANCEL: "deleted",
}
_FACT_STATES = {
    Outcome.RATE_LIMITED: "retrying",
    Outcome.RETRY: "retrying",
    Outcome.NOT_SENT: "retrying",
    Outcome.UNKNOWN: "uncertain",
    Outcome.NEEDS_BOUND: "retrying",
}


def delivery_fact(op: Op, outcome: Outcome, detail: str, retry_after_s: float | None) -> dict[str, object]:
    """One call's outcome for watchers: ``part``, ``role``, ``state`` (sent, edited, deleted, retrying, uncertain,
    failed, gone, frozen, …), ``message_id``, ``text`` (what the part shows now) and ``retry_after_s`` after a 429."""
    slot = op.slot
    if outcome in (Outcome.ACK, Outcome.FOUND):
        state = _DELIVERY_STATES.get(op.kind, "edited")
    else:
        state = _FACT_STATES.get(outcome, str(outcome))
    fact: dict[str, object] = {"part": slot.index, "role": str(slot.role), "state": state}
    fact["message_id"] = slot.message_id
    fact["text"] = slot.shown if slot.shown is not None else ""
    if retry_after_s is not None:
        fact["retry_after_s"] = retry_after_s
    elif outcome not in (Outcome.ACK, Outcome.FOUND):
        fact["reason"] = slot.error or detail
    return fact
