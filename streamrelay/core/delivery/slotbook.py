"""The slot book: the parts a conversation should show (desired) beside what the platform acknowledged.

It is the state between the two halves of delivery, and the only one they share. Upstream, the run's stages
(a delivery mode, the reasoning view, the status board) claim slots and set their desired texts: they never call
anything. Downstream, the sans-I/O :class:`~core.delivery.machine.DeliveryMachine` reads the book (its
:class:`~core.delivery.planner.Planner` decides the next call), the executor makes it, and the machine writes the
outcome back. A restart
restores the book from the ledger: acknowledged parts are edited, never sent again; a create recorded without an
outcome is settled first; a part that continues a frozen one stays after it.
"""

from __future__ import annotations

from collections.abc import Callable

from streamrelay.core.delivery.cap import MessageLimit
from streamrelay.core.delivery.slots import LiveText, PendingText, Slot, same_render
from streamrelay.core.ports import PendingSend, TextFormat
from streamrelay.core.records.ledger import PartRecord
from streamrelay.core.records.report import PartReport, PartState, SlotRole, is_cut
from streamrelay.core.text.buffer import Pinned
from streamrelay.core.units import LengthUnit, text_units
from streamrelay.core.wake import Wake

_ACKED = PartState.ACKED
"""Looked up once: :meth:`SlotBook.set_live` runs once per delta (an enum member's lookup on its class is a call)."""
_FIRST = frozenset({SlotRole.ANSWER, SlotRole.NOTICE})
"""Roles that may take the last message under the limit while the answer has none (side messages leave it free)."""


class SlotBook:
    """One conversation's slots in order: what it should show and what the platform acknowledged.

    Args:
        run: the ledger's run id of the conversation.
        throttle_s: minimum seconds between preview calls (0: every state is sent).
        native: answer parts stream natively (:class:`core.ports.NativeStreaming`) while this is True.
        limit: the most slots the conversation's stages may claim (None: no limit; :mod:`core.delivery.cap`).
        measure: a text's length once rendered in a format, in the platform's unit (the adapter's ``measure``;
            default: UTF-16 units): what a growing part's text is fitted with when its call is due
            (:class:`~core.delivery.slots.PendingText`, :class:`~core.delivery.slots.TailText`).
    """

    __slots__ = (
        "_answers",
        "_restored",
        "_unsaved",
        "catching_up",
        "changed",
        "claimed",
        "finalizing",
        "limit",
        "measure",
        "native",
        "orphan_creates",
        "orphans",
        "run",
        "slots",
        "stream_status",
        "throttle_s",
        "urgent",
    )

    def __init__(
        self,
        run: str,
        throttle_s: float,
        native: bool,
        limit: MessageLimit | None = None,
        measure: Callable[[str, TextFormat], int] | None = None,
    ) -> None:
        self.run = run
        self.limit = limit
        self.measure: Callable[[str, TextFormat], int] = measure if measure is not None else _utf16_units
        self.claimed = 0
        """Slots claimed so far (restored ones handed out again included), in the stages' order."""
        self._answers = 0
        self.throttle_s = throttle_s
        self.native = native
        self.finalizing = False
        """The run is ending: no throttle, intermediate states merge, emptied parts are deleted."""
        self.slots: list[Slot] = []
        self.orphans: list[PartRecord] = []
        """Creates that may have landed but could not be settled, and whose text went on in a new message."""
        self.orphan_creates: dict[int, tuple[int, str, PendingSend | None]] = {}
        """Of the orphans made in this process by :meth:`orphan`, by orphan slot: the part's slot, the create's text and
        the create (for the desk, :mod:`core.run.desk`: a resend of the part settles that create first)."""
        self._unsaved: list[PartRecord] = []
        self._restored: list[Slot] = []
        self.catching_up = False
        """A resumed run is replaying its journal: only the resulting state is sent, not every step."""
        self.stream_status = ""
        """The run's latest status line (a phase, a ``status`` event, a tool starting, sub-agents' lines), for the
        platforms that show one on a native stream (:class:`core.ports.StreamStatus`): :meth:`set_stream_status`."""
        self.changed = Wake()
        """Set whenever a desired text changes (the reconciler waits on it)."""
        self.urgent = Wake()
        """Set when a change may need a call before the preview throttle's next turn (a part emptied or retired:
        its message is deleted at once; the end of the run): a reconciler that waits only for the throttle
        (every call waits for it) is woken by these, not by every new text."""

    def restore(self, records: list[PartRecord]) -> None:
        """Load the parts recorded before a restart, so they are edited, never sent again; a create recorded
        without an outcome is settled first. Restored slots are handed out again by :meth:`claim_slot`, in order,
        per role; a part that continues a frozen one is placed after it and kept by the reconciler (a frozen part
        whose continuation has no record gets a new one)."""
        by_index: dict[int, Slot] = {}
        precedes: dict[int, int] = {}
        for rec in records:
            if rec.slot < 0:
                self.orphans.append(rec)
                continue
            # A finish that creates the message (Telegram's sendMessage after the drafts) was in flight: the part's
            # handle is a draft id, no message; its pending create is settled, never taken for that id.
            finishing = rec.pending is not None and rec.streaming and not rec.pending.stream_start
            slot = Slot(
                index=rec.slot,
                role=rec.role,
                desired_kept=rec.shown or "",
                message_id=None if finishing else rec.message_id,
                shown_kept=None if finishing else rec.shown,
                state=rec.state,
                degraded=rec.degraded,
                error=rec.error,
                # An open stream goes on as one when this run still streams natively; else its handle is taken
                # for a message (Slack's stream is one; a Telegram draft id then fails as gone and is re-sent).
                native=rec.streaming and self.native and not finishing,
                streaming=rec.streaming and self.native and not finishing,
                pending=rec.pending,
                restarted=rec.pending is not None,
                unbounded=rec.unbounded,
                stray=rec.stray,
                frozen=rec.frozen,
                creates=1 if rec.pending is not None else 0,
            )
            if is_cut(slot.error):
                slot.error = None  # the replay cuts it again where it was cut (deterministic)
            if rec.state is PartState.UNCERTAIN and rec.message_id is None:
                slot.uncertain_text = rec.shown
            by_index[rec.slot] = slot
            parent = by_index.get(rec.continues) if rec.continues is not None else None
            if parent is not None:
                parent.cont, slot.parent = slot, parent
                self.slots.insert(self.slots.index(parent) + 1, slot)
            else:
                self.slots.append(slot)
                self._restored.append(slot)
                if rec.precedes is not None:
                    precedes[rec.slot] = rec.precedes
        for slot in [s for s in self.slots if s.frozen and s.cont is None]:
            # Frozen, and killed before its continuation had a record: the rest of its text goes on in a new part
            # as at the freeze (else it was never shown: chaos, native, seed 5 on Teams).
            cont = Slot(index=self._next_index(), role=slot.role, fmt=slot.fmt, parent=slot)
            slot.cont = cont
            self.slots.insert((self._position(slot) or 0) + 1, cont)
        self._placed(precedes)

    def restored_text(self, role: SlotRole) -> str | None:
        """What the next restored part of ``role`` that no mode claimed yet shows (None when there is none). A media
        part ends the search for other roles: the text parts after it belong to the text after the media."""
        for slot in self._restored:
            if slot.role is SlotRole.MEDIA and role is not SlotRole.MEDIA:
                return None
            if slot.role is role:
                if slot.pending is not None and slot.message_id is None:
                    return slot.pending.text
                if slot.message_id is None and slot.uncertain_text is not None:
                    return slot.uncertain_text
                return slot.shown or ""
        return None

    def room(self, role: SlotRole = SlotRole.ANSWER) -> int | None:
        """How many more slots of ``role`` may be claimed under the limit (None: no limit)."""
        if self.limit is None:
            return None
        left = self.limit.max_messages - self.claimed
        if role is SlotRole.MEDIA:  # one message stays free for the text after it, or the cut notice
            return max(0, left - 1)
        if role in _FIRST or self._answers:
            return max(0, left)
        return max(0, left - 1)  # one message stays free for the answer

    def claim_slot(
        self, role: SlotRole, text: str = "", fmt: TextFormat = TextFormat.PLAIN, *, before: Slot | None = None
    ) -> Slot:
        """A slot for the next part of ``role``: a restored one if any is left, else a new one at the end, or right
        before ``before`` (the media part that ends the text this part belongs to: :mod:`core.delivery.segments`).
        Past the limit (:meth:`room` is 0), a slot in no book (:attr:`Slot.over_limit`): what it is given is never
        shown."""
        if self.room(role) == 0:
            return Slot(index=-1, role=role, desired_kept=text, fmt=fmt, over_limit=True)
        self.claimed += 1
        self._answers += role is SlotRole.ANSWER
        for i, slot in enumerate(self._restored):
            if slot.role is role:
                del self._restored[i]
                if slot.degraded:
                    fmt = TextFormat.STRIPPED if fmt is TextFormat.MARKDOWN else fmt
                slot.fmt = fmt
                self._place(slot, before)
                self.set_text(slot, text)
                return slot
        slot = Slot(index=self._next_index(), role=role, fmt=fmt)
        slot.native = self.native and role is SlotRole.ANSWER
        self.slots.append(slot)
        self._place(slot, before)
        self.set_text(slot, text)
        return slot

    def _place(self, slot: Slot, before: Slot | None) -> None:
        """Move ``slot`` right before ``before`` when it stands after it (the ledger restores parts in slot number
        order; the order they are shown in is the stages' claims)."""
        if before is None or slot.parent is not None or slot.cont is not None:
            return
        at = self._position(slot)
        to = self._position(before)
        if at is not None and to is not None and at > to:
            del self.slots[at]
            self.slots.insert(to, slot)
            slot.precedes = before

    def _placed(self, precedes: dict[int, int]) -> None:
        """Restored parts placed right before the part they preceded (``slot → slot``), in slot order, among the
        parts and among the restored ones: the order shown, not the order claimed."""
        by_index = {slot.index: slot for slot in self.slots}
        for index, target in sorted(precedes.items()):
            slot, before = by_index.get(index), by_index.get(target)
            if slot is None or before is None:
                continue
            slot.precedes = before
            for order in (self.slots, self._restored):
                at = next((i for i, other in enumerate(order) if other is slot), None)
                if at is None:
                    continue
                del order[at]
                to = next((i for i, other in enumerate(order) if other is before), len(order))
                order.insert(to, slot)

    def _position(self, slot: Slot) -> int | None:
        """Where ``slot`` stands in :attr:`slots` (by identity: two slots may hold equal values), or None."""
        return next((i for i, other in enumerate(self.slots) if other is slot), None)

    def _next_index(self) -> int:
        return max((s.index for s in self.slots), default=-1) + 1

    def set_live(self, slot: Slot, live: LiveText, *, every_state: bool = True) -> None:
        """``slot`` shows ``live``, a value the run stage pushes on every change (O(1): a range of a text kept
        elsewhere); its text is built only when a call is about to be made (or at once with ``throttle_s == 0`` and
        ``every_state``, where every state is sent). Wakes the loop."""
        slot.live, slot.retired = live, False
        if every_state and self.throttle_s == 0 and self._every_state():
            self._build(slot, live)
            return
        slot.stale = True
        if slot.state is _ACKED:
            slot.state = PartState.PENDING
        self.changed.set()

    def mark_cut(self, slot: Slot, cut: bool, what: str = "the answer") -> None:
        """``slot`` ends ``what`` cut at the limit (its record's error says so), or no longer does."""
        slot.cut = self.limit.error(what) if cut and self.limit is not None else None

    def drop_unsent(self, role: SlotRole) -> None:
        """Forget every part of ``role`` that no message shows yet (a cancelled run sends no more)."""
        for slot in self.slots:
            if slot.role is role and slot.message_id is None and slot.state is PartState.PENDING and not slot.pending:
                self.set_text(slot, "")
                slot.history.clear()

    def retire(self, slot: Slot) -> None:
        """Empty ``slot`` and delete its message now (a replace made the text shorter)."""
        self.set_text(slot, "")
        slot.retired = True
        self.changed.set()
        self.urgent.set()

    def set_stream_status(self, line: str) -> None:
        """The run's status is now ``line`` (stripped; empty: nothing to show): wakes the loop when it changed. Only a
        native stream that shows status lines takes it (:meth:`DeliveryMachine.status_due
        <core.delivery.machine.DeliveryMachine.status_due>`); other conversations ignore it."""
        line = line.strip()
        if line != self.stream_status:
            self.stream_status = line
            self.changed.set()

    def set_text(self, slot: Slot, text: str) -> None:
        """Set what ``slot`` should show (a fixed text: ends ``set_live``); wakes the loop."""
        slot.live, slot.stale, slot.retired = None, False, False
        self.assign(slot, text)

    def pin_text(self, slot: Slot, text: str, pin: Pinned) -> None:
        """``slot``'s desired ``text`` (just set) is exactly ``pin``, a range of the run's answer: the part keeps the
        range instead of the string from now on (a frozen preview part: its text is built again when its call is due,
        and the string the chunker cut is not kept meanwhile, 4 bytes a character when it holds an emoji). O(1)."""
        if slot.desired_kept is text and pin.length == len(text) and text.strip():
            slot.desired_kept, slot.pinned = pin, None

    def _every_state(self) -> bool:
        return self.throttle_s == 0 and not self.finalizing and not self.catching_up

    def assign(self, slot: Slot, text: str) -> None:
        """Set ``slot``'s desired text, keeping a live source (the planner gives a continuation its text so)."""
        kept = slot.desired_kept
        if len(text) == len(kept) and text == slot.desired:
            return
        slot.desired, slot.pinned = text, None
        if slot.state is PartState.ACKED or (slot.state is PartState.SKIPPED and text.strip()):
            slot.state = PartState.PENDING
        if (
            slot.uncertain_text is not None
            and not same_render(text, slot.uncertain_text)
            and slot.role is not SlotRole.APPROVAL  # an approval message is never sent blind twice (machine)
        ):
            self.orphan(slot)  # the text moved on from what the unsettled create sent: it goes on anew
        if self._every_state():
            if text.strip():  # an emptied state is never sent as an edit: the preview waits for text
                slot.history.append(text)
        else:
            slot.history.clear()
        self.changed.set()
        if not text or text.isspace():
            self.urgent.set()

    def refresh(self, slot: Slot) -> None:
        """Build a live slot's text now from what the stage pushed (its cost is the text's length: done once per
        call, not per delta)."""
        live = slot.live
        if slot.stale and live is not None:
            slot.stale = False
            self._build(slot, live)

    def _build(self, slot: Slot, live: LiveText) -> None:
        """``slot``'s desired text built from ``live``; when it is exactly a range of the answer (after a reopened
        fence's opener, when there is one), that range is noted with it (:attr:`Slot.pinned`): once a call showed the
        text, the part keeps the range instead."""
        text = live.text(self.measure)
        self.assign(slot, text)
        if (
            isinstance(live, PendingText)
            and live.source is not None
            and slot.desired_kept is text
            and not live.widths
            and len(text) == len(live.head) + live.end - live.start
            and text.strip()
        ):
            pin = live.source.pin(live.start, live.end)
            if live.head:  # a reopened fence's opener before the range: kept as a string piece of the pin
                pin = Pinned((live.head, *pin.pieces))
            slot.pinned = (text, pin)

    def orphan(self, slot: Slot) -> None:
        """The slot's unsettled create stays reported as uncertain; the slot itself goes on as a new message."""
        self.orphans_of(slot, slot.uncertain_text or "")
        self.orphan_creates[self.orphans[-1].slot] = (slot.index, slot.uncertain_text or "", slot.uncertain_create)
        slot.uncertain_text = slot.uncertain_create = None
        slot.state, slot.error, slot.message_id, slot.shown = PartState.PENDING, None, None, None
        self.changed.set()

    def orphans_of(self, slot: Slot, text: str) -> None:
        """Report a create of ``slot`` that may show beside its message (a duplicate is possible): a part of its own
        in the report and the ledger (negative slot numbers), never settled again."""
        orphan = PartRecord(
            run=self.run,
            slot=-(len(self.orphans) + 1),
            role=slot.role,
            state=PartState.UNCERTAIN,
            error=f"uncertain: a message of {len(text)} characters may show too (a duplicate is possible)",
        )
        self.orphans.append(orphan)
        self._unsaved.append(orphan)

    def freeze(self, slot: Slot) -> None:
        """``slot``'s message takes no more edits: it keeps what it shows; a new part right after it continues."""
        slot.frozen, slot.state, slot.history = True, PartState.ACKED, type(slot.history)()
        cont = Slot(index=self._next_index(), role=slot.role, fmt=slot.fmt, parent=slot)
        slot.cont = cont
        self.slots.insert(self.slots.index(slot) + 1, cont)
        # In the ledger before the freeze's outcome: a restart finds the continuation as one (its create's intent
        # alone names no parent: chaos-6-00036 restored it apart, and the rest went out twice).
        self._unsaved.append(self.record(cont))
        self.changed.set()

    def take_unsaved(self) -> list[PartRecord]:
        """The orphan parts made since the last call, to be saved in the ledger (emptied)."""
        unsaved, self._unsaved = self._unsaved, []
        return unsaved

    def parts(self) -> list[PartReport]:
        """Every part, in order, with the creates that could not be settled (uncertain) first."""
        return [o.report() for o in self.orphans] + [self.record(s).report() for s in self.slots]

    def record(self, slot: Slot, shown: str | None = None) -> PartRecord:
        """``slot`` as the ledger keeps it. ``shown``: the string of what the part shows when the caller holds one
        (the text of the call that was just done, which the part keeps as a range of the answer): used as is, so no
        second copy of the text is built from the range (O(its length) and, with one emoji in it, 4 bytes a
        character); None: built from the part."""
        if slot.message_id is None and slot.uncertain_text is not None:
            shown = slot.uncertain_text
        elif shown is None or len(shown) != len(slot.shown_kept or ""):
            shown = slot.shown
        return PartRecord(
            run=self.run,
            slot=slot.index,
            role=slot.role,
            state=slot.state,
            message_id=slot.message_id,
            shown=shown,
            degraded=slot.degraded,
            error=slot.error or slot.cut,
            streaming=slot.streaming,
            pending=slot.pending,
            unbounded=slot.unbounded,
            stray=slot.stray,
            frozen=slot.frozen,
            continues=slot.parent.index if slot.parent is not None else None,
            precedes=slot.precedes.index if slot.precedes is not None else None,
        )


def _utf16_units(text: str, fmt: TextFormat) -> int:
    return text_units(text, LengthUnit.UTF16)
