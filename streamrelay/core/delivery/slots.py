"""The reconciler's vocabulary: message parts (slots), the calls that change them (ops), and what a call's
outcome was. Types, not strings: the planner decides an :class:`Op`, the executor performs it and records an
:class:`Outcome` in the ledger.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from streamrelay.core.chunking.containers import dedent
from streamrelay.core.events import Target
from streamrelay.core.ports import STREAM_START_MARK, CallKind, PendingSend, StopControl, TextFormat
from streamrelay.core.records.report import PartState, SlotRole
from streamrelay.core.text.buffer import Pinned, TextSource


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


@dataclass(slots=True)
class PendingText:
    """What a growing part shows, as the run stage pushes it on every change: a range of the text it is kept in (the
    run's answer, shared: no copy), made in O(1); its text is built only when a call is due (:meth:`text`), never per
    delta. A preview's live part: the chunker's pending text (:meth:`core.chunking.Chunker.pending_range`).

    A value: nothing changes one once it is pushed (the stage pushes a new one). Not declared ``frozen``: one is made
    per delta, and a frozen dataclass's ``__init__`` sets each of its seven fields through ``object.__setattr__``,
    about four times the cost of plain slot stores (as :class:`core.delivery.answer.AnswerChange`).

    Attributes:
        source: the text it is a range of (None: ``head`` is the whole text).
        start: where the range starts in ``source``. end: where it ends.
        head: the text before the range (a reopened fence opener).
        widths: the list items the text starts in, whose indentation is removed
            (:func:`core.chunking.containers.dedent`; empty: none).
    """

    source: TextSource | None
    start: int = 0
    end: int = 0
    head: str = ""
    widths: tuple[int, ...] = ()
    fmt: TextFormat = TextFormat.PLAIN
    max_units: int = 0
    """The most a message holds once rendered in ``fmt`` (0: not checked)."""

    def text(self, measure: Callable[[str, TextFormat], int]) -> str:
        """The text. ``measure``: its length once rendered (the adapter's, downstream; its rendering is kept for the
        call that follows). The chunker keeps the pending text within a message on the source; should the
        rendering make it longer than ``max_units`` (escapes, a rule line), the longest start of it that fits is
        shown, cut at a line or a space (:func:`fitting_start`). O(its length)."""
        text = self.source.slice(self.start, self.end) if self.source is not None else ""
        if self.head:
            text = self.head + text
        if self.widths:
            text = dedent(text, self.widths)
        if self.max_units and text and measure(text, self.fmt) > self.max_units:
            return fitting_start(text, lambda t: measure(t, self.fmt), self.max_units)
        return text


def fitting_start(text: str, measure: Callable[[str], int], max_units: int) -> str:
    """The longest start of ``text`` that measures at most ``max_units``, cut after its last line break or space
    inside that length when there is one (trailing whitespace dropped); ``""`` when nothing fits. O(len(text) * log
    len(text)) measures' work: only for a live part that its rendering made too long."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if measure(text[:mid]) <= max_units:
            lo = mid
        else:
            hi = mid - 1
    for sep in ("\n", " "):
        cut = text.rfind(sep, 0, lo + 1)
        if cut > 0 and text[:cut].strip():
            lo = cut
            break
    head = text[:lo].rstrip()
    while head and measure(head) > max_units:  # a rendering that is not monotone in its text: shorter still
        head = head[: len(head) * 9 // 10].rstrip()
    return head


@dataclass(frozen=True, slots=True)
class TailText:
    """What a message that shows the latest part of a growing text shows (the reasoning message), pushed on every
    change like :class:`PendingText`: ``mark`` and the text stripped, or, when that measures more than ``max_units``,
    ``cut_mark`` and the latest part of it that fits (:meth:`text`).

    Attributes:
        source: the growing text. end: how much of it there is. mark: what opens the message. cut_mark: what opens it
        when the text's beginning is left out. max_units: the most a message holds, measured as the platform does.
    """

    source: TextSource
    end: int
    mark: str
    cut_mark: str
    max_units: int

    def text(self, measure: Callable[[str, TextFormat], int]) -> str:
        """The message's text (plain); ``measure``: a text's length once rendered, in the platform's unit (the
        adapter's, downstream). O(the text's length) plus a few measures when it is longer than a message."""
        body = self.source.slice(0, self.end).strip()
        if not body:
            return ""
        plain = TextFormat.PLAIN
        text = self.mark + body
        if measure(text, plain) <= self.max_units:
            return text
        keep = min(len(body), self.max_units)
        while keep > 0:
            text = self.cut_mark + body[len(body) - keep :].lstrip()
            if measure(text, plain) <= self.max_units:
                return text
            keep = keep * 9 // 10
        return self.cut_mark


LiveText = PendingText | TailText
"""A growing part's text as the run stage pushes it (:meth:`core.delivery.slotbook.SlotBook.set_live`)."""


@dataclass(slots=True)
class Slot:
    """One message part: what it should show and what the platform acknowledged."""

    index: int
    """The part's key in the ledger (its position is its place in the reconciler's list)."""
    role: SlotRole
    desired_kept: str | Pinned = ""
    """What it should show (:attr:`desired`): a string, or its range of the run's answer
    (:class:`core.text.buffer.Pinned`: the part holds no copy of the text between its calls) once a call showed it,
    or at once for a frozen part whose text is exactly one (:meth:`core.delivery.slotbook.SlotBook.pin_text`)."""
    fmt: TextFormat = TextFormat.PLAIN
    message_id: str | None = None
    shown_kept: str | Pinned | None = None
    """What the platform acknowledged it shows (:attr:`shown`), kept like ``desired_kept``."""
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
    live: LiveText | None = None
    """What the part shows while it grows, as the run stage last pushed it (its text is built only when a call is
    about to be made)."""
    stale: bool = False
    """``live`` has changed since ``desired`` was last built from it."""
    retired: bool = False
    """Emptied by a replace: its message is deleted now rather than at finalization."""
    retry_at_finish: bool = False
    """Given up on during the stream after transient failures (an outage): finalization tries it again."""
    history: list[str] = field(default_factory=list)
    """The texts set while every state is sent (:meth:`core.delivery.slotbook.SlotBook.set_text`), oldest first, each
    dropped once acknowledged. A list, not a deque: an empty deque is 624 bytes and every part has one (most parts
    never use it)."""
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
    uncertain_create: PendingSend | None = None
    """That create itself (its delivery id and bounds), for the desk (:mod:`core.run.desk`) to settle after the run;
    None when it is not known (restored from the ledger after a restart)."""
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
    buttons: StopControl | None = None
    """The buttons this part's message should carry (an approval's Approve and Deny: :mod:`core.delivery.buttons`)."""
    buttons_shown: StopControl | None = None
    """The buttons the platform acknowledged on it."""
    buttons_doubt: bool = False
    """What it carries is not known (restored from the ledger, or a call's outcome unknown): set again."""
    pinned: tuple[str, Pinned] | None = None
    """The desired text built for the call that is due and the range of the answer it is exactly (a live part's plain
    range, not blank): once that call is done the part keeps the range instead of the string
    (:meth:`core.delivery.machine.DeliveryMachine`'s ``_sent``)."""

    @property
    def desired(self) -> str:
        """What the part should show (built from its range when it is kept as one: O(its length))."""
        kept = self.desired_kept
        return kept if kept.__class__ is str else kept.value()  # type: ignore[union-attr]

    @desired.setter
    def desired(self, text: str) -> None:
        self.desired_kept = text

    @property
    def shown(self) -> str | None:
        """What the platform acknowledged the part shows (None: no message), built like :attr:`desired`."""
        kept = self.shown_kept
        return kept if kept is None or kept.__class__ is str else kept.value()  # type: ignore[union-attr]

    @shown.setter
    def shown(self, text: str | None) -> None:
        self.shown_kept = text

    def has_text(self) -> bool:
        """True when the part should show something (``desired`` not blank). O(1) for a kept range (never blank)."""
        kept = self.desired_kept
        return bool(kept.strip()) if isinstance(kept, str) else kept.length > 0

    def shows_desired(self) -> bool:
        """True when what it shows is what it should show (``shown == desired``; O(1) when both are the same kept
        string or range)."""
        desired, shown = self.desired_kept, self.shown_kept
        if desired is shown:
            return True
        if shown is None or len(desired) != len(shown):
            return False
        return self.desired == self.shown

    def settled(self) -> bool:
        """True when no further call is needed for this slot."""
        if self.pending is not None or self.stray is not None:
            return False
        if self.state in (PartState.UNCERTAIN, PartState.FAILED, PartState.SKIPPED):
            return True
        if not self.has_text():
            return self.message_id is None
        return self.message_id is not None and self.shows_desired()


@dataclass(frozen=True, slots=True)
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
        state = _FACT_STATES.get(outcome, outcome.value)
    fact: dict[str, object] = {"part": slot.index, "role": slot.role.value, "state": state}
    fact["message_id"] = slot.message_id
    fact["text"] = slot.shown_kept if slot.shown_kept is not None else ""  # a range stays one (no copy)
    if retry_after_s is not None:
        fact["retry_after_s"] = retry_after_s
    elif outcome not in (Outcome.ACK, Outcome.FOUND):
        fact["reason"] = slot.error or detail
    return fact
