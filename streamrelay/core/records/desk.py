"""The desk: what ended runs did not deliver, kept for an operator to list, inspect, resend, resolve and prune.

When a run ends (:meth:`core.run.controller.RunController.end`), each of its message parts that is not known to be
delivered becomes one :class:`DeskEntry` in the ledger (:class:`DeliveryDesk`): the part's state then (``uncertain``:
a create or an edit may have landed; ``failed``: the platform refused it; ``unsent``: the run ended before it was
sent), the text it should show, the create's delivery identity (its delivery id and the conversation's newest
message id then, which a settle needs) and the run's channel, chat and client. Shape (JSON, ``GET /v1/deliveries``)::

    {"id": "dlv-3f2a9c1e0b7d", "run": "r1", "client": "default", "channel": "telegram", "chat": {"chat_id": 7},
     "slot": 0, "role": "answer", "state": "uncertain", "was": "uncertain", "error": "uncertain: ...",
     "chars": 120, "message_id": null, "ended_at": 1765000000.0, "age_s": 42.0, "resends": 0, "note": null,
     "outcome": null}

An entry leaves the open states only by an operator: ``delivered`` (a resend landed, or its settle found the first
copy: :mod:`core.run.desk`) or ``resolved`` (marked by hand, with a note). ``was`` keeps the state the run ended
with. Entries older than the retention (``[service] deliveries_retention_days``) are pruned, open or not.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from streamrelay.core.ingest.clients import split_key
from streamrelay.core.json_types import JsonObject
from streamrelay.core.ports import PendingSend, TextFormat
from streamrelay.core.records.report import SlotRole


class DeskState(enum.StrEnum):
    """Where a desk entry stands. The first three are open (listed by default); the last two are closed."""

    UNCERTAIN = "uncertain"
    """A create or an edit of the part may have landed: settled with the platform before any resend."""
    FAILED = "failed"
    """The platform refused the part (or an outage outlasted the retry window): it does not show."""
    UNSENT = "unsent"
    """The run ended before the part was sent (or before its last text was)."""
    DELIVERED = "delivered"
    """A resend landed, or its settle found that the first create had: the chat shows the part once."""
    RESOLVED = "resolved"
    """An operator marked it handled by hand (``note`` says how)."""


OPEN_STATES = frozenset({DeskState.UNCERTAIN, DeskState.FAILED, DeskState.UNSENT})
"""The states ``GET /v1/deliveries`` and ``streamrelay deliveries`` list by default."""


def entry_id(run: str, slot: int) -> str:
    """The desk id of part ``slot`` of run ``run`` (a run key): ``dlv-`` and 12 hex characters of a sha256."""
    return "dlv-" + hashlib.sha256(f"{run}\x00{slot}".encode()).hexdigest()[:12]


@dataclass(slots=True)
class DeskEntry:
    """One part of an ended run that is not known to be delivered (module docstring).

    Attributes:
        run: the run key (:func:`core.ingest.clients.run_key`: ``client/run`` or a default client's id).
        slot: the part's slot in the run's ledger (negative: a create that may show beside its part, which shows).
        role: what the part is for (answer, status, media, ...).
        state: where it stands now.
        was: the state the run ended with.
        channel: the run's channel name.
        target: the run's target as JSON (``chat_id``, ``thread_id``, ``reply_to``).
        text: what the part should show (a media part: :meth:`core.media.MediaItem.text`); ``""`` when unknown.
        fmt: how it is rendered.
        error: why it is not delivered (the part's error).
        pending: the create whose outcome is unknown (delivery id, text, bounds), for its settle; None for a
            failed or unsent create, or an uncertain one whose bounds were lost (a restart).
        message_id: the part's message when it has one (an uncertain or failed edit: a resend edits it; a delivered
            entry: the message that shows it).
        ended_at: when the run ended (wall-clock seconds).
        updated_at: when the entry last changed (wall-clock seconds).
        resends: how many resends were tried.
        note: the operator's note (``resolve --note``).
        outcome: what the last resend found (one line).
    """

    run: str
    slot: int
    role: SlotRole
    state: DeskState
    was: DeskState
    channel: str
    target: JsonObject
    text: str
    fmt: TextFormat
    error: str | None
    ended_at: float
    updated_at: float
    pending: PendingSend | None = None
    message_id: str | None = None
    resends: int = 0
    note: str | None = None
    outcome: str | None = None

    @property
    def id(self) -> str:
        """The entry's id (:func:`entry_id`)."""
        return entry_id(self.run, self.slot)

    @property
    def client(self) -> str:
        """The client whose run it was (:func:`core.ingest.clients.split_key`)."""
        return split_key(self.run)[0]

    def public(self, now_s: float, *, text: bool = False) -> JsonObject:
        """The entry as the API shows it (module docstring); ``text``: with the part's text
        (``GET /v1/deliveries/{id}``). ``now_s``: wall-clock seconds, for ``age_s``."""
        shown: JsonObject = {
            "id": self.id,
            "run": split_key(self.run)[1],
            "client": self.client,
            "channel": self.channel,
            "chat": {key: value for key, value in self.target.items() if value is not None},
            "slot": self.slot,
            "role": str(self.role),
            "state": str(self.state),
            "was": str(self.was),
            "error": self.error,
            "chars": len(self.text),
            "message_id": self.message_id,
            "delivery_id": self.pending.delivery_id if self.pending is not None else None,
            "ended_at": self.ended_at,
            "age_s": round(max(0.0, now_s - self.ended_at), 3),
            "resends": self.resends,
            "note": self.note,
            "outcome": self.outcome,
        }
        if text:
            shown["text"] = self.text
        return shown


class DeliveryDesk(Protocol):
    """Where desk entries are kept: the ledger (``MemoryLedger``, ``adapters.sqlite.SqliteLedger``,
    ``adapters.redis.RedisLedger``). Writes of one entry replace it whole (keyed by :attr:`DeskEntry.id`)."""

    async def record_undelivered(self, entries: Sequence[DeskEntry]) -> None:
        """Keep ``entries`` (a run's undelivered parts at its end). An entry already kept is left as it is: a run
        finalized again after a restart does not reopen what an operator closed."""
        ...

    async def deliveries(
        self, states: Collection[DeskState] = OPEN_STATES, *, client: str | None = None, limit: int = 1000
    ) -> list[DeskEntry]:
        """The entries in ``states`` (of ``client`` only, when given), oldest run end first, at most ``limit``."""
        ...

    async def delivery(self, entry_id: str) -> DeskEntry | None:
        """One entry by its id, or None."""
        ...

    async def save_delivery(self, entry: DeskEntry) -> None:
        """Write ``entry`` as it now stands (a resend's intent or outcome, a resolve)."""
        ...

    async def prune_deliveries(self, ended_before_s: float, *, client: str | None = None) -> int:
        """Delete the entries of runs that ended before ``ended_before_s`` (wall-clock seconds; of ``client`` only,
        when given); return how many."""
        ...

    async def delivery_counts(self, *, client: str | None = None) -> dict[DeskState, int]:
        """How many entries are in each state (of ``client`` only, when given; every state present, 0 when none)."""
        ...


def is_open(entry: DeskEntry) -> bool:
    """True while nobody delivered or resolved the entry."""
    return entry.state in OPEN_STATES


def counts_of(entries: Sequence[DeskEntry]) -> dict[DeskState, int]:
    """Entries per state, every state present."""
    counts = dict.fromkeys(DeskState, 0)
    for entry in entries:
        counts[entry.state] += 1
    return counts
