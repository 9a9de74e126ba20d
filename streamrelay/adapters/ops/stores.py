"""MeteredJournal and MeteredLedger: the journal and ledger ports with metrics, decorators like the adapter's.

The journal's appends are timed (``streamrelay_journal_append_seconds``: the wait for the group commit, fsync
included, which is what an ingest answer waits for) and start the event-to-call clock of their runs. The ledger
sees every call's verdict as the core records it (``ack``, ``retry``, ``rate_limited``, ``uncertain``, ``failed``,
``found``…): the metered ledger counts those (``streamrelay_delivery_outcomes_total``), the calls that will be made
again (``streamrelay_retries_total``: ``retry``, ``rate_limited``, and an ``uncertain`` edit or delete, which is
retried), the parts that became uncertain, and the runs started (ended runs are counted by the relay,
by their report's status: :meth:`adapters.ops.ServiceMetrics.run_ended`). Both pass every call through unchanged.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TypeVar

from streamrelay.adapters.ops.metrics import ServiceMetrics
from streamrelay.core.ports import PendingSend
from streamrelay.core.records.desk import DeskEntry
from streamrelay.core.records.erase import Conversations, Erasable, Expiring
from streamrelay.core.records.journal import EndedRun, IdleClose, Journal, JournalEntry
from streamrelay.core.records.ledger import Ledger, PartRecord, RunRecord
from streamrelay.core.records.report import PartState, SlotRole

REMEMBERED = 100_000
"""How many runs' channels, calls' ops and uncertain parts the metered ledger remembers (oldest forgotten)."""

RETRIED = {"retry": "unavailable", "rate_limited": "rate_limited"}
"""Ledger outcomes after which the same call is made again, and the ``reason`` label they count under."""

RETRIED_WHEN_UNCERTAIN = frozenset({"edit", "delete", "delete_stray"})
"""Ops that are idempotent: an ``uncertain`` outcome is retried (a create is settled instead)."""

_K = TypeVar("_K")
_V = TypeVar("_V")

_LABEL = re.compile(r"[a-z_]{1,24}")


def _bounded(value: str) -> str:
    """A label value from the core's own vocabulary, or ``other`` (a label never takes free text)."""
    return value if _LABEL.fullmatch(value) else "other"


class MeteredJournal:
    """A :class:`core.records.journal.Journal` whose appends are timed and counted.

    Args:
        inner: the journal (SQLite).
        metrics: where to count.
    """

    def __init__(self, inner: Journal, metrics: ServiceMetrics) -> None:
        self.inner = inner
        self._metrics = metrics

    def __repr__(self) -> str:
        return f"MeteredJournal({self.inner!r})"

    async def append(self, entries: Sequence[JournalEntry]) -> None:
        """The inner append, timed; on success the entries' runs start waiting for a call.

        Raises:
            Exception: what the inner append raised (counted in ``streamrelay_journal_append_failures_total``).
        """
        started = time.monotonic()
        try:
            await self.inner.append(entries)
        except Exception:
            self._metrics.journal_failures.inc()
            raise
        finally:
            self._metrics.journal_append.observe(time.monotonic() - started)
        self._metrics.journal_lines.inc(len(entries))
        self._metrics.lines_accepted({entry.run for entry in entries})

    async def unfinished(self) -> list[str]:
        return await self.inner.unfinished()

    async def lines(self, run: str) -> list[str]:
        return await self.inner.lines(run)

    async def last_at(self, run: str) -> float | None:
        return await self.inner.last_at(run)

    async def finish(self, run: str, last_seq: int | None) -> None:
        await self.inner.finish(run, last_seq)
        self._metrics.run_finished(run)

    async def ended(self, run: str) -> EndedRun | None:
        return await self.inner.ended(run)

    async def close_idle(self, run: str, last_seq: int | None, *, ended: bool = False) -> None:
        await self.inner.close_idle(run, last_seq, ended=ended)

    async def idle_closed(self, run: str) -> IdleClose | None:
        return await self.inner.idle_closed(run)

    async def erase(self, runs: Sequence[str]) -> int:
        """The inner journal's erasure (:class:`core.records.erase.Erasable`).

        Raises:
            NotImplementedError: the inner journal cannot erase.
        """
        return await _erase(self.inner, runs)

    async def close(self) -> None:
        await self.inner.close()


class MeteredLedger:
    """A :class:`core.records.ledger.Ledger` that counts the core's verdicts (see the module docstring).

    Args:
        inner: the ledger (SQLite).
        metrics: where to count.
    """

    def __init__(self, inner: Ledger, metrics: ServiceMetrics) -> None:
        self.inner = inner
        self._metrics = metrics
        self._channels: OrderedDict[str, str] = OrderedDict()
        self._ops: OrderedDict[int, tuple[str, str]] = OrderedDict()
        self._uncertain: OrderedDict[tuple[str, int], None] = OrderedDict()

    def __repr__(self) -> str:
        return f"MeteredLedger({self.inner!r})"

    @staticmethod
    def _remember(book: OrderedDict[_K, _V], key: _K, value: _V) -> None:
        book[key] = value
        book.move_to_end(key)
        while len(book) > REMEMBERED:
            book.popitem(last=False)

    def _channel(self, run: str) -> str:
        return self._channels.get(run, "unknown")

    async def start_run(self, record: RunRecord) -> None:
        known = await self.inner.get_run(record.run)
        await self.inner.start_run(record)
        self._remember(self._channels, record.run, record.channel)
        if known is None:  # a restart replays the run.start of a run the ledger has: not a new run
            self._metrics.runs_started.labels(record.channel).inc()

    async def end_run(self, run: str, end_status: str, errors: Sequence[str] = ()) -> None:
        await self.inner.end_run(run, end_status, errors)  # counted by the relay, by its report's status
        self._channels.pop(run, None)  # its last record: its calls' outcomes came before its end

    async def get_run(self, run: str) -> RunRecord | None:
        return await self.inner.get_run(run)

    async def record_intent(
        self, run: str, slot: int, role: SlotRole, op: str, text: str, pending: PendingSend | None = None
    ) -> int:
        call_id = await self.inner.record_intent(run, slot, role, op, text, pending)
        self._remember(self._ops, call_id, (run, op))
        return call_id

    async def save_part(self, part: PartRecord) -> None:
        await self.inner.save_part(part)
        self._note_part(part)

    async def record_outcome(self, call_id: int, part: PartRecord, outcome: str, detail: str = "") -> None:
        await self.inner.record_outcome(call_id, part, outcome, detail)
        run, op = self._ops.pop(call_id, (part.run, "unknown"))
        channel, op_label, outcome_label = self._channel(run), _bounded(op), _bounded(outcome)
        self._metrics.outcomes.labels(channel, op_label, outcome_label).inc()
        reason = RETRIED.get(outcome)
        if reason is None and outcome == "uncertain" and op in RETRIED_WHEN_UNCERTAIN:
            reason = "uncertain"
        if reason is not None:
            self._metrics.retries.labels(channel, op_label, reason).inc()
        self._note_part(part)

    def _note_part(self, part: PartRecord) -> None:
        """Count a part the first time it is saved uncertain."""
        key = (part.run, part.slot)
        if part.state is PartState.UNCERTAIN and key not in self._uncertain:
            self._remember(self._uncertain, key, None)
            self._metrics.uncertain_parts.labels(self._channel(part.run)).inc()

    async def parts(self, run: str) -> list[PartRecord]:
        return await self.inner.parts(run)

    async def record_undelivered(self, entries: Sequence[DeskEntry]) -> None:
        await self.inner.record_undelivered(entries)

    async def runs_in(self, channel: str, chat_id: str) -> list[str]:
        """The inner ledger's runs of a conversation (:class:`core.records.erase.Conversations`).

        Raises:
            NotImplementedError: the inner ledger cannot list them.
        """
        if not isinstance(self.inner, Conversations):
            raise NotImplementedError(f"{type(self.inner).__name__} cannot list a conversation's runs")
        return await self.inner.runs_in(channel, chat_id)

    async def expire(self, channel: str, ended_before_s: float, limit: int) -> list[str]:
        """The inner ledger's retention (:class:`core.records.erase.Expiring`).

        Raises:
            NotImplementedError: the inner ledger cannot drop text.
        """
        if not isinstance(self.inner, Expiring):
            raise NotImplementedError(f"{type(self.inner).__name__} cannot drop text")
        return await self.inner.expire(channel, ended_before_s, limit)

    async def erase(self, runs: Sequence[str]) -> int:
        """The inner ledger's erasure (:class:`core.records.erase.Erasable`); the run's remembered channel and
        uncertain parts are ids, kept.

        Raises:
            NotImplementedError: the inner ledger cannot erase.
        """
        return await _erase(self.inner, runs)

    async def close(self) -> None:
        await self.inner.close()


async def _erase(store: object, runs: Sequence[str]) -> int:
    if not isinstance(store, Erasable):
        raise NotImplementedError(f"{type(store).__name__} cannot erase a run's text")
    return await store.erase(runs)
