"""The desk at work: an ended run's undelivered parts taken down (:func:`undelivered`), and an operator's resend,
resolve and prune (:class:`Desk`). The records themselves: :mod:`core.records.desk`.

A resend goes through the conversation's executor like every call of a run (its send chain, rate budgets, the
adapter's one ``perform``, metrics) and never shows a part twice:

- a part whose message exists (an edit that failed or may have landed, a part left short) is edited to its text:
  an edit is idempotent;
- an ``uncertain`` create is settled with the platform first (:meth:`core.ports.ChannelAdapter.settle_send`:
  Discord's nonce, Slack's read back of the conversation, Telegram's probe with an exclusive bot). ``found``: the
  first copy shows, nothing is sent; ``not_sent``: sent now under the same delivery id; ``needs_bound`` (a Telegram
  private chat): sent, then settled again below the new message, and a first copy found means the new one is
  deleted; ``unknown`` (Telegram without ``exclusive_bot``): nothing is sent, the entry stays uncertain and the
  operator checks the chat and resolves it by hand;
- a ``failed`` or ``unsent`` create is sent under the entry's own delivery id (:func:`desk_delivery_id`); a send
  whose outcome is unknown leaves the entry ``uncertain`` with that create, settled by the next resend.

Every step is written to the ledger before the next call (the intent, then the outcome), so a resend cut by a crash
is settled, not repeated blindly.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Collection, Mapping, Sequence

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import Clock
from streamrelay.core.delivery.calls import (
    Call,
    CallResult,
    Delete,
    Done,
    Edit,
    NotDone,
    SendMedia,
    SendText,
    Settle,
    Unknown,
)
from streamrelay.core.delivery.executor import Executor
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.delivery.slots import Slot, delivery_id, same_render
from streamrelay.core.errors import StreamrelayError
from streamrelay.core.events import Target
from streamrelay.core.json_types import JsonObject
from streamrelay.core.media import MediaItem
from streamrelay.core.ports import PendingSend, Settlement, SettleOutcome, TextFormat
from streamrelay.core.records.desk import OPEN_STATES, DeliveryDesk, DeskEntry, DeskState, is_open
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.records.report import PartState, SlotRole

DESK_ATTEMPT = 0
"""The attempt number of the entry's own delivery id (a run's creates count from 1:
:func:`core.delivery.slots.delivery_id`), so a desk resend never carries the id of one of the run's creates."""


def desk_delivery_id(run: str, slot: int) -> str:
    """The delivery id a desk resend of part ``slot`` of run ``run`` carries (the same for every resend of it: on
    Discord a second send with it returns the first message)."""
    return delivery_id(run, slot, DESK_ATTEMPT)


_STATE_OF = {PartState.UNCERTAIN: DeskState.UNCERTAIN, PartState.FAILED: DeskState.FAILED}


def undelivered(
    book: SlotBook, *, channel: str, target: JsonObject, ended_at: float, errors: Sequence[str] = ()
) -> list[DeskEntry]:
    """The parts of ``book`` (a run's root conversation, after its finalization) that are not known to be delivered,
    as desk entries: uncertain, failed, or still pending (``unsent``) with text to show. ``errors``: the run's own
    errors, the first of which explains an unsent part (e.g. it was stopped). ``ended_at``: wall-clock seconds.

    A create that could not be settled and whose part went on in a new message (an orphan: a negative slot) may show
    the part's text. When that part is not delivered and the create sent its text, the part's entry carries the create
    (its resend settles it first: it may be the one copy that shows) and the orphan has no entry of its own. Otherwise
    the orphan is an entry of its own, a possible second copy, never resent."""
    entries: list[DeskEntry] = []
    why_unsent = errors[0] if errors else "the run ended before it was sent"
    parts = {slot.index: _entry_of(book.run, slot, channel, target, ended_at, why_unsent) for slot in book.slots}
    for orphan in book.orphans:
        part, text, create = book.orphan_creates.get(orphan.slot, (None, "", None))
        entry = parts.get(part) if part is not None else None
        if entry is not None and create is not None and entry.pending is None and same_render(entry.text, text):
            entry.pending = create  # the part's resend settles this create first
            continue
        entries.append(
            DeskEntry(
                run=book.run,
                slot=orphan.slot,
                role=orphan.role,
                state=DeskState.UNCERTAIN,
                was=DeskState.UNCERTAIN,
                channel=channel,
                target=target,
                text=text,
                fmt=create.fmt if create is not None else TextFormat.PLAIN,
                error=orphan.error,
                ended_at=ended_at,
                updated_at=ended_at,
                pending=create,
            )
        )
    entries += [entry for entry in parts.values() if entry is not None]
    return entries


def _entry_of(
    run: str, slot: Slot, channel: str, target: JsonObject, ended_at: float, why_unsent: str
) -> DeskEntry | None:
    if slot.state in (PartState.ACKED, PartState.SKIPPED):
        return None
    state = _STATE_OF.get(slot.state, DeskState.UNSENT)
    if state is DeskState.UNSENT and not slot.has_text():
        return None
    pending = None
    text = slot.desired
    if state is DeskState.UNCERTAIN and slot.message_id is None:
        pending = slot.uncertain_create
        text = slot.uncertain_text if slot.uncertain_text is not None else text
    return DeskEntry(
        run=run,
        slot=slot.index,
        role=slot.role,
        state=state,
        was=state,
        channel=channel,
        target=target,
        text=text,
        fmt=slot.fmt,
        error=slot.error if slot.error else (why_unsent if state is DeskState.UNSENT else None),
        ended_at=ended_at,
        updated_at=ended_at,
        pending=pending,
        message_id=slot.message_id,
    )


class DeskError(StreamrelayError):
    """An operator's desk request that cannot be done: ``status`` is its HTTP status (404 unknown entry, 409 not
    possible in its state, 503 the platform or the store did not answer: try again)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Desk:
    """An operator's desk over the ledger's entries and the configured channels.

    Args:
        ledger: the ledger (the executor's: a desk call records no run's part in it).
        store: where the entries are: the same ledger, its :class:`~core.records.desk.DeliveryDesk` side.
        channels: the configured channels by name (their adapters and send chains).
        clock: the injected clock (the send chains').
        wall: wall-clock seconds (entries' ages and times).
        route: where an entry is resent, when not by this desk: the desk of the process that owns the entry's
            conversation (Redis replicas: its partition's owner, :mod:`app.replicas.ended`), which resends it
            through its own send chain and fenced ledger. Raises :class:`DeskError` (503) when none is here.
    """

    def __init__(
        self,
        ledger: Ledger,
        store: DeliveryDesk,
        channels: Mapping[str, ChannelRuntime],
        clock: Clock,
        wall: Callable[[], float] = time.time,
        *,
        route: Callable[[DeskEntry], Desk] | None = None,
    ) -> None:
        self.ledger = ledger
        self.store = store
        self.channels = channels
        self._clock = clock
        self._wall = wall
        self._route = route
        self._resending: set[str] = set()
        """Entries a resend is under way for (a second one at the same time could send a second copy)."""

    def now(self) -> float:
        """Wall-clock seconds."""
        return self._wall()

    async def list(
        self, states: Collection[DeskState] = OPEN_STATES, *, client: str | None = None, limit: int = 1000
    ) -> list[DeskEntry]:
        """The entries in ``states`` (of ``client`` only, when given), oldest run end first."""
        return await self.store.deliveries(states, client=client, limit=limit)

    async def get(self, entry_id: str, *, client: str | None = None) -> DeskEntry:
        """One entry (``client``: only when it is that client's).

        Raises:
            DeskError: 404, no such entry (or another client's).
        """
        entry = await self.store.delivery(entry_id)
        if entry is None or (client is not None and entry.client != client):
            raise DeskError(f"no delivery {entry_id!r}: list them with GET /v1/deliveries", 404)
        return entry

    async def resolve(self, entry_id: str, note: str, *, client: str | None = None) -> DeskEntry:
        """Mark an open entry handled by hand, with ``note`` (how).

        Raises:
            DeskError: 404 unknown; 409 already delivered or resolved.
        """
        entry = await self.get(entry_id, client=client)
        if not is_open(entry):
            raise DeskError(f"delivery {entry_id} is already {entry.state}: nothing to resolve", 409)
        entry.state, entry.note, entry.updated_at = DeskState.RESOLVED, note, self.now()
        await self.store.save_delivery(entry)
        return entry

    async def prune(self, older_than_s: float, *, client: str | None = None) -> int:
        """Delete the entries of runs that ended more than ``older_than_s`` seconds ago (open or not; of ``client``
        only, when given); how many."""
        return await self.store.prune_deliveries(self.now() - older_than_s, client=client)

    async def resend(self, entry_id: str, *, client: str | None = None) -> DeskEntry:
        """Deliver an open entry once (module docstring); the entry as it now stands (``outcome`` says what was
        done). A resend that could not decide (the platform cannot tell; a settle or send not done) leaves the entry
        open and raises.

        Raises:
            DeskError: 404 unknown entry or channel; 409 closed, nothing to resend (a possible second copy), a resend
                of it under way, or the platform cannot tell whether the first copy landed; 503 the platform did not
                do it (try again).
        """
        if self._route is not None:
            return await self._route(await self.get(entry_id, client=client)).resend(entry_id, client=client)
        if entry_id in self._resending:
            raise DeskError(f"delivery {entry_id}: a resend of it is under way; look at it again when it is done", 409)
        self._resending.add(entry_id)
        try:
            return await self._resend(entry_id, client)
        finally:
            self._resending.discard(entry_id)

    async def _resend(self, entry_id: str, client: str | None) -> DeskEntry:
        entry = await self.get(entry_id, client=client)
        if not is_open(entry):
            raise DeskError(
                f"delivery {entry_id} is already {entry.state}: a part known delivered is never resent", 409
            )
        if entry.slot < 0 or not entry.text:
            raise DeskError(
                f"delivery {entry_id} is a create that may show beside its part, which was sent again: a possible "
                "second copy, nothing to resend; check the chat, delete the second copy if it is there, then "
                "resolve it",
                409,
            )
        runtime = self.channels.get(entry.channel)
        if runtime is None:
            raise DeskError(f"delivery {entry_id}: channel {entry.channel!r} is not configured here", 404)
        target = Target.model_validate(entry.target)
        with runtime.ended_run_executor(target, self._clock, self.ledger, entry.run) as (executor, chain):
            return await _Resend(self, entry, runtime, target, executor, chain).run()


class _Resend:
    """One resend of one entry (:meth:`Desk.resend`)."""

    def __init__(
        self,
        desk: Desk,
        entry: DeskEntry,
        runtime: ChannelRuntime,
        target: Target,
        executor: Executor,
        chain: SendChain,
    ) -> None:
        self.desk, self.entry, self.runtime, self.target = desk, entry, runtime, target
        self.executor, self.chain = executor, chain

    async def _save(self, **changes: object) -> None:
        entry = dataclasses.replace(self.entry, **changes)  # type: ignore[arg-type]
        entry.updated_at = self.desk.now()
        await self.desk.store.save_delivery(entry)
        self.entry = entry

    async def _call(self, call: Call) -> CallResult:
        return await self.executor.perform(call, final=True)

    async def run(self) -> DeskEntry:
        entry = self.entry
        await self._save(resends=entry.resends + 1)
        if entry.message_id is not None:
            return await self._edit(entry.message_id)
        if entry.pending is not None:  # a create that may have landed: settled first, whatever the part's state
            return await self._settle_first(entry.pending)
        if entry.state is DeskState.UNCERTAIN:
            await self._save(outcome="not settled: its create's delivery id and bounds were not kept")
            raise DeskError(
                f"delivery {entry.id}: its create's delivery id and bounds were not kept (the run was restarted after "
                "it): whether it landed cannot be asked; check the chat, then resolve it",
                409,
            )
        return await self._send(desk_delivery_id(entry.run, entry.slot), bound=None)

    async def _edit(self, message_id: str) -> DeskEntry:
        entry = self.entry
        if entry.role is SlotRole.MEDIA:
            raise DeskError(f"delivery {entry.id}: a media message is never edited; resolve it by hand", 409)
        result = await self._call(Edit(self.target, message_id, entry.text, entry.fmt))
        if isinstance(result, Done):
            await self._save(state=DeskState.DELIVERED, outcome=f"edited message {message_id} to the part's text")
            return self.entry
        return await self._not_done(result, f"the edit of message {message_id}")

    async def _settle_first(self, pending: PendingSend) -> DeskEntry:
        entry = self.entry
        settlement = await self._settlement(pending)
        if settlement.outcome is SettleOutcome.FOUND and settlement.message_id is not None:
            found = settlement.message_id
            await self._save(
                state=DeskState.DELIVERED,
                message_id=found,
                outcome=f"settled: the first create landed as message {found}; nothing sent",
            )
            return self.entry
        if settlement.outcome is SettleOutcome.NOT_SENT:
            return await self._send(pending.delivery_id, bound=None)
        if settlement.outcome is SettleOutcome.NEEDS_BOUND:
            return await self._send(pending.delivery_id, bound=pending)
        await self._save(outcome="not settled: the platform cannot tell whether the first create landed; nothing sent")
        raise DeskError(
            f"delivery {entry.id}: {self.runtime.adapter.platform} cannot tell whether the first create landed "
            "(Telegram settles only with exclusive_bot = true): nothing sent; check the chat, then resolve it",
            409,
        )

    async def _settlement(self, pending: PendingSend) -> Settlement:
        asked = dataclasses.replace(
            pending, exclusive=self.runtime.policy.exclusive_bot, media=self._media(pending.text)
        )
        result = await self._call(Settle(self.target, asked))
        if isinstance(result, Done) and isinstance(result.value, Settlement):
            return result.value
        await self._not_done(result, "the settle")
        raise AssertionError("unreachable")  # pragma: no cover

    def _media(self, text: str) -> MediaItem | None:
        return MediaItem.from_text(text) if self.entry.role is SlotRole.MEDIA else None

    async def _send(self, create_id: str, *, bound: PendingSend | None) -> DeskEntry:
        """Send the part under ``create_id``; ``bound``: the first create to settle below the new message."""
        entry = self.entry
        media = self._media(entry.text)
        pending = PendingSend(create_id, entry.text, entry.fmt, after_id=self.chain.last_message_id, media=media)
        before = (entry.state, entry.pending)
        if bound is None:  # the intent: a crash from here leaves the entry uncertain with this create
            await self._save(state=DeskState.UNCERTAIN, pending=pending, outcome="sending")
        call: Call = (
            SendMedia(self.target, media, entry.fmt, create_id)
            if media is not None
            else SendText(self.target, entry.text, entry.fmt, create_id)
        )
        result = await self._call(call)
        if isinstance(result, Done):
            sent = str(result.value)
            self.chain.note_message(sent)
            if bound is not None:
                return await self._bounded(bound, sent)
            await self._save(state=DeskState.DELIVERED, message_id=sent, outcome=f"sent as message {sent}")
            return self.entry
        if isinstance(result, Unknown):
            await self._save(
                state=DeskState.UNCERTAIN,
                pending=bound or pending,
                outcome=f"sent, outcome unknown ({result.error}): the next resend settles it",
            )
            raise DeskError(
                f"delivery {entry.id}: the send's outcome is unknown: {result.error}; resend to settle", 503
            )
        await self._save(state=before[0], pending=before[1])  # not done: nothing was stored, the intent goes
        return await self._not_done(result, "the send")

    async def _bounded(self, first: PendingSend, sent: str) -> DeskEntry:
        """The part was sent again as ``sent`` while its first create could be told only below a later message: settle
        that create below ``sent``; found, the new copy goes (one copy shows)."""
        settlement = await self._settlement(dataclasses.replace(first, before_id=sent))
        if settlement.outcome is SettleOutcome.FOUND and settlement.message_id not in (None, sent):
            assert settlement.message_id is not None
            found = settlement.message_id
            deleted = await self._call(Delete(self.target, sent))
            outcome = f"settled below the new message {sent}: the first create landed as message {found}"
            if isinstance(deleted, Done):
                outcome += f"; the new copy {sent} deleted"
            else:
                outcome += f"; the new copy {sent} could not be deleted ({_why(deleted)}): delete it by hand"
            await self._save(state=DeskState.DELIVERED, message_id=found, outcome=outcome)
            return self.entry
        outcome = f"sent as message {sent}"
        if settlement.outcome is not SettleOutcome.NOT_SENT:
            outcome += "; whether the first create landed too cannot be told: a second copy is possible"
        await self._save(state=DeskState.DELIVERED, message_id=sent, outcome=outcome)
        return self.entry

    async def _not_done(self, result: CallResult, what: str) -> DeskEntry:
        why = _why(result)
        await self._save(outcome=f"{what} was not done: {why}")
        raise DeskError(f"delivery {self.entry.id}: {what} was not done: {why}; try again later", 503)


def _why(result: CallResult) -> str:
    if isinstance(result, NotDone | Unknown):
        return f"{type(result.error).__name__}: {result.error}"
    return "done"
