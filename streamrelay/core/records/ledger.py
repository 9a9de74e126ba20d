"""The ledger port: a durable record per run of what should be shown and what was acknowledged.

Every platform call is written twice: its *intent* before the call, its outcome (ack with message id,
uncertain, failed) after. A create's intent also stores, with its part, the create itself (delivery id, text,
the conversation's newest message id then): an intent without an outcome is a create whose outcome is unknown,
settled with the platform after a restart. A part's ``shown`` text is set only from an ack. On restart, a run's
parts are loaded back, so a replayed run edits the messages that exist instead of sending them again.

Keys: a part is ``(run, slot)``; the *delivery key* is ``(target, slot role, text)`` and the *content
key* the same without the target (DESIGN §4).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from streamrelay.core.json_types import JsonObject
from streamrelay.core.ports import PendingSend
from streamrelay.core.records.corrections import CorrectionRecord, CorrectionState
from streamrelay.core.records.desk import OPEN_STATES, DeskEntry, DeskState, counts_of
from streamrelay.core.records.report import PartReport, PartState, SlotRole


@dataclass
class PartRecord:
    """One message part of a run as the ledger knows it."""

    run: str
    slot: int
    role: SlotRole
    state: PartState = PartState.PENDING
    message_id: str | None = None
    shown: str | None = None
    """The text the platform acknowledged for this part (``None`` before the first ack)."""
    degraded: bool = False
    error: str | None = None
    streaming: bool = False
    """``message_id`` is an open native stream's handle (Slack: the streamed message; Telegram: a draft id,
    no message at all), not yet a persisted message."""
    pending: PendingSend | None = None
    """A create of this part recorded before its call and not settled since: a restart settles it first."""
    unbounded: PendingSend | None = None
    """A create to settle below the part's next message (the platform needed a later message as a bound)."""
    stray: str | None = None
    """A second copy of the part (sent again while the first had landed) still to delete."""
    frozen: bool = False
    """The platform accepts no more edits of this part's message."""
    continues: int | None = None
    """The slot of the frozen part this one continues (it is shown right after it)."""
    precedes: int | None = None
    """The slot this part is shown right before (a part of the text before a media part, claimed after that media
    part: :mod:`core.delivery.segments`). Slot numbers give the order of claims, this the order shown."""

    def report(self) -> PartReport:
        """This part as the delivery report shows it."""
        return PartReport(
            slot=self.slot,
            role=self.role,
            state=self.state,
            message_id=self.message_id,
            chars=len(self.shown or ""),
            degraded=self.degraded,
            error=self.error,
        )


@dataclass
class RunRecord:
    """One run as the ledger knows it: where it goes (``channel``, ``mode``), how it ended."""

    run: str
    channel: str
    target: JsonObject
    """The ``run.start``'s target as its JSON object (:class:`core.events.Target`); a restarted run's is the same."""
    mode: str
    end_status: str | None = None
    ended: bool = False
    errors: list[str] = field(default_factory=list)
    """Why the run ended other than ``ok`` (for its report), recorded with its end."""


def content_key(role: SlotRole, text: str) -> str:
    """Content key: what is shown, independent of where (sha256 hex of role and text)."""
    return hashlib.sha256(f"{role}\x00{text}".encode()).hexdigest()


def delivery_key(target_key: str, role: SlotRole, text: str) -> str:
    """Delivery key: the content key bound to a reply target."""
    return hashlib.sha256(f"{target_key}\x00{role}\x00{text}".encode()).hexdigest()


class Ledger(Protocol):
    """Durable run records. Implementations: :class:`MemoryLedger`, ``adapters.sqlite.SqliteLedger``."""

    async def start_run(self, record: RunRecord) -> None:
        """Create the run record, or keep the existing one (a restart replays ``run.start``)."""
        ...

    async def end_run(self, run: str, end_status: str, errors: Sequence[str] = ()) -> None:
        """Mark the run ended with ``end_status`` and the ``errors`` its report shows."""
        ...

    async def get_run(self, run: str) -> RunRecord | None: ...

    async def record_intent(
        self, run: str, slot: int, role: SlotRole, op: str, text: str, pending: PendingSend | None = None
    ) -> int:
        """Write the intent of one call before it is made; return its call id. ``pending``: the call creates a
        message; it is stored with the part (created if new) until an outcome clears it."""
        ...

    async def save_part(self, part: PartRecord) -> None:
        """Write one part as it is (a create that could not be settled, kept for the report)."""
        ...

    async def record_outcome(self, call_id: int, part: PartRecord, outcome: str, detail: str = "") -> None:
        """Write a call's outcome (``ack``, ``uncertain``, ``failed``, ``rate_limited``, ...) and the part."""
        ...

    async def parts(self, run: str) -> list[PartRecord]:
        """The run's parts in slot order."""
        ...

    async def record_undelivered(self, entries: Sequence[DeskEntry]) -> None:
        """Keep an ended run's parts that are not known to be delivered for the desk
        (:meth:`core.records.desk.DeliveryDesk.record_undelivered`: an entry already kept stays as it is)."""
        ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class CallRecord:
    """One call :class:`MemoryLedger` recorded: its intent, then its ``outcome`` (None while unknown)."""

    run: str
    slot: int
    role: SlotRole
    op: str
    text: str
    outcome: str | None = None
    detail: str = ""


class MemoryLedger:
    """A ledger in memory: for unit tests and ``ledger = "memory"`` (nothing survives a restart).

    Attributes:
        calls: every call recorded, by call id (its index).
    """

    def __init__(self) -> None:
        self._runs: dict[str, RunRecord] = {}
        self._parts: dict[tuple[str, int], PartRecord] = {}
        self._desk: dict[str, DeskEntry] = {}
        self._corrections: dict[tuple[str, str], str] = {}
        self.calls: list[CallRecord] = []

    async def start_run(self, record: RunRecord) -> None:
        self._runs.setdefault(record.run, record)

    async def end_run(self, run: str, end_status: str, errors: Sequence[str] = ()) -> None:
        rec = self._runs.get(run)
        if rec is not None:
            rec.end_status = end_status
            rec.ended = True
            rec.errors = list(errors)

    async def get_run(self, run: str) -> RunRecord | None:
        return self._runs.get(run)

    async def record_intent(
        self, run: str, slot: int, role: SlotRole, op: str, text: str, pending: PendingSend | None = None
    ) -> int:
        self.calls.append(CallRecord(run, slot, role, op, text))
        if pending is not None:
            part = self._parts.get((run, slot)) or PartRecord(run=run, slot=slot, role=role)
            self._parts[(run, slot)] = replace(part, pending=pending)
        return len(self.calls) - 1

    async def save_part(self, part: PartRecord) -> None:
        self._parts[(part.run, part.slot)] = replace(part)

    async def record_outcome(self, call_id: int, part: PartRecord, outcome: str, detail: str = "") -> None:
        call = self.calls[call_id]
        call.outcome, call.detail = outcome, detail
        self._parts[(part.run, part.slot)] = replace(part)

    async def runs_in(self, channel: str, chat_id: str) -> list[str]:
        """Every run on ``channel`` to chat ``chat_id`` (:class:`core.records.erase.Conversations`)."""
        return [r.run for r in self._runs.values() if r.channel == channel and str(r.target.get("chat_id")) == chat_id]

    async def erase(self, runs: Sequence[str]) -> int:
        """Remove ``runs``' text (:class:`core.records.erase.Erasable`, as :meth:`SqliteLedger.erase` does): parts'
        shown and pending texts, desk entries' texts, corrections, and the text of each recorded call."""
        wanted = set(runs)
        changed = 0
        for key, part in list(self._parts.items()):
            if key[0] in wanted and (part.shown is not None or part.pending is not None or part.unbounded is not None):
                self._parts[key] = replace(part, shown=None, pending=None, unbounded=None)
                changed += 1
        for entry_id, entry in list(self._desk.items()):
            if entry.run in wanted and (entry.text or entry.pending is not None):
                self._desk[entry_id] = replace(entry, text="", pending=None)
                changed += 1
        for correction in [c for c in self._corrections if c[0] in wanted]:
            del self._corrections[correction]
            changed += 1
        for call in self.calls:
            if call.run in wanted and call.text:
                call.text = ""
                changed += 1
        return changed

    async def parts(self, run: str) -> list[PartRecord]:
        found = [p for (r, _), p in self._parts.items() if r == run]
        return sorted(found, key=lambda p: p.slot)

    # --- the desk (:class:`core.records.desk.DeliveryDesk`) ---------------------------------------------------

    async def record_undelivered(self, entries: Sequence[DeskEntry]) -> None:
        for entry in entries:
            self._desk.setdefault(entry.id, replace(entry))

    async def deliveries(
        self, states: Collection[DeskState] = OPEN_STATES, *, client: str | None = None, limit: int = 1000
    ) -> list[DeskEntry]:
        found = [
            replace(e) for e in self._desk.values() if e.state in states and (client is None or e.client == client)
        ]
        return sorted(found, key=lambda e: (e.ended_at, e.run, e.slot))[:limit]

    async def delivery(self, entry_id: str) -> DeskEntry | None:
        entry = self._desk.get(entry_id)
        return replace(entry) if entry is not None else None

    async def save_delivery(self, entry: DeskEntry) -> None:
        self._desk[entry.id] = replace(entry)

    async def prune_deliveries(self, ended_before_s: float, *, client: str | None = None) -> int:
        gone = [
            key
            for key, e in self._desk.items()
            if e.ended_at < ended_before_s and (client is None or e.client == client)
        ]
        for key in gone:
            del self._desk[key]
        return len(gone)

    async def delivery_counts(self, *, client: str | None = None) -> dict[DeskState, int]:
        return counts_of([e for e in self._desk.values() if client is None or e.client == client])

    # --- corrections (:class:`core.records.corrections.CorrectionStore`) --------------------------------------

    async def save_correction(self, record: CorrectionRecord) -> None:
        self._corrections[(record.run, record.id)] = record.to_json()

    async def correction(self, run: str, correction_id: str) -> CorrectionRecord | None:
        raw = self._corrections.get((run, correction_id))
        return CorrectionRecord.from_json(raw) if raw is not None else None

    async def corrections(self, run: str) -> list[CorrectionRecord]:
        found = [CorrectionRecord.from_json(raw) for (r, _), raw in self._corrections.items() if r == run]
        return sorted(found, key=lambda c: c.created_at)

    async def open_corrections(self) -> list[CorrectionRecord]:
        found = [CorrectionRecord.from_json(raw) for raw in self._corrections.values()]
        return sorted((c for c in found if c.state is CorrectionState.APPLYING), key=lambda c: c.created_at)

    async def close(self) -> None:
        return None
