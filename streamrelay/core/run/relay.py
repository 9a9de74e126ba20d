"""The relay: the run registry between ingest and delivery.

Ingest (HTTP today, Redis later) hands it decoded JSON lines, a batch at a time; the relay validates each line,
normalizes provider-native lines, journals the batch (one commit: :mod:`core.records.journal`) and only then hands the
events to their runs (:mod:`core.run.worker`), so an accepted line is never lost. Runs never share a queue, so a
bad or slow run cannot hold up another. A bad line fails alone with an :class:`~core.errors.IngestError`.

At start-up, :meth:`Relay.resume` rebuilds every run the journal holds unfinished by replaying its lines through
the same path, so an interrupted run finishes without its agent sending anything again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import Clock
from streamrelay.core.contracts.answers import RunListing
from streamrelay.core.contracts.units import MalformedToolCallUnit, PipelineUnit, ToolCallUnit
from streamrelay.core.errors import IngestError, OwnershipLostError
from streamrelay.core.events import EVENT_TYPES, Event, RunEvent, event_line
from streamrelay.core.ingest.admission import ONE_EVENT, Admission, Limits, LineResult, line_failed
from streamrelay.core.ingest.clients import ClientBook, ClientLimits
from streamrelay.core.lanes.gate import (
    ActionCatalog,
    AmbiguousCallError,
    GateDecision,
    UnknownCallError,
    ask_gate,
)
from streamrelay.core.lanes.pipeline import ArgsValidator, PipelineLane
from streamrelay.core.normalize import make_normalizer
from streamrelay.core.records.erase import Conversations, Erasable, Expiring, TextCache
from streamrelay.core.records.journal import Journal, JournalEntry, MemoryJournal, entries_of, new_entry
from streamrelay.core.records.ledger import Ledger, PartRecord
from streamrelay.core.records.report import DeliveryReport, with_gaps
from streamrelay.core.run.approvals import approval_state, decide, expiry_entries, forget_approvals
from streamrelay.core.run.audit import AuditReport, audit_run
from streamrelay.core.run.audit_sampler import AuditSampler
from streamrelay.core.run.ended import RunEndObserver, log_run_end
from streamrelay.core.run.fanout import Controller, rebuilt_report
from streamrelay.core.run.finished import FinishedRuns, finished_record
from streamrelay.core.run.monitor import Watched
from streamrelay.core.run.stop import StopState, stop_run
from streamrelay.core.run.timeline import TIMELINE, Timeline, Timelines
from streamrelay.core.run.worker import ActiveRun, consecutive, idle_closing, work
from streamrelay.core.tasks import stop_all
from streamrelay.core.trace import RUN_SPAN, RUN_TRACE, RunSpan, RunTracer

_log = logging.getLogger("streamrelay.relay")

STOP_LIMIT_S = 10.0  # seconds Relay.stop_runs waits for the run workers to stop before it goes on without them
FINALIZING_POLL_S = 0.05
"""How often a watcher following a run past its end (:meth:`Relay.after_end`) looks for it while it is finalized."""


def _json_default(value: Any) -> Any:
    """Pydantic models inside a line given as objects (``Relay.submit``)."""
    if (dump := getattr(value, "model_dump", None)) is None:
        raise TypeError(f"not JSON: {type(value).__name__}")
    return dump(mode="python", exclude_none=True)


def _line_text(obj: Any, raw: str | None) -> str:
    """The JSON text a taken line is journaled as: as it came (``raw``), else its event's or its object's JSON."""
    if raw is not None:
        return raw
    if isinstance(obj, EVENT_TYPES):
        return event_line(obj)
    return json.dumps(obj, default=_json_default)


def _held(run: ActiveRun, held: dict[int, ActiveRun]) -> None:
    """``run`` took a line of this batch: held from its idle close (:meth:`ActiveRun.hold`) once per batch, as it
    takes it (no await since it passed :meth:`ActiveRun.closed_to`)."""
    if id(run) not in held:
        held[id(run)] = run
        run.hold()


def _stage_group(
    lines: Sequence[tuple[Any, str | None]],
    start: int,
    group: tuple[ActiveRun, Sequence[RunEvent], list[LineResult | IngestError]],
    results: list[LineResult | IngestError],
    entries: list[JournalEntry],
    staged: list[tuple[ActiveRun, Sequence[RunEvent]]],
) -> int:
    """Note a group of :meth:`Admission.take_deltas` or :meth:`Admission.take_raw` (``lines[start:]``'s first
    ``len(taken)``): each line's result, the journal entry of each line taken, and one hand-over of its events.
    Returns the index of the line after it."""
    run, events, taken = group
    end = start + len(taken)
    results += taken
    chunk = lines[start:end]
    if taken.count(ONE_EVENT) == len(taken):  # every line taken as one event (a group of deltas)
        texts = [raw for _, raw in chunk if raw is not None]
        if len(texts) < len(chunk):  # lines given without their text: made again
            texts = [_line_text(obj, raw) for obj, raw in chunk]
    else:
        texts = [
            _line_text(obj, raw)
            for (obj, raw), result in zip(chunk, taken, strict=True)
            if type(result) is LineResult and result.dropped is None
        ]
    entries += entries_of(run.run, texts)
    entries += expiry_entries(run.approvals, run.run)  # a mapped approval's ttl_s: fixed in the same append
    if events:
        staged.append((run, events))
    return end


class Relay:
    """Routes events to runs and runs to channels.

    Args:
        channels: configured channels by name.
        ledger: the durable record shared by all runs.
        clock: the injected clock.
        queue_size: per-run queue bound (ingest waits when a run falls this far behind).
        keep_finished: how many finished runs' reports stay in memory (older ones come from the ledger).
        finished_chars: the characters of text all finished runs kept in memory may hold together
            (:mod:`core.run.finished`).
        gap_timeout_s: how long a ``seq`` gap holds later events.
        run_idle_timeout_s: a run that receives nothing for this long is closed as failed, so no preview
            is left hanging and no run holds memory forever.
        retry_window_s: how long a message part's calls that are safe to retry are retried through a platform
            outage before the part is given up and reported (seconds; independent of the idle timeout).
        max_active_runs: past this many active runs, a new ``run.start`` is refused with a 503.
        validator: checks complete tool calls against their tools' JSON Schemas (the action catalog's).
        catalog: the action catalog the gate decides with (empty: every tool waits for the commit point).
        live_buffer: how many of a run's latest live events are kept for watchers that reconnect.
        clients: each client's limits by name (:mod:`core.ingest.clients`; a client not listed gets the defaults), or a
            book of them shared with other relays (a replica's partitions count a client's active runs together).
        observer: told of every run that ends here, with its report and duration (the service's metrics count
            them by the report's status); every ended run also gets one log line (:mod:`core.run.ended`).
        keep_finished_timelines: how many finished runs' delivery timelines stay in memory (:mod:`core.run.timeline`).
        tracer: starts a span for each run that names a trace context (:mod:`core.trace`; the parent of its parts'
            and calls' spans), ended with its report; None: calls' spans are children of the agent's context.
    """

    def __init__(
        self,
        channels: Mapping[str, ChannelRuntime],
        ledger: Ledger,
        clock: Clock,
        *,
        journal: Journal | None = None,
        queue_size: int = 10_000,
        keep_finished: int = 10_000,
        finished_chars: int = 64_000_000,
        gap_timeout_s: float = 2.0,
        run_idle_timeout_s: float = 600.0,
        retry_window_s: float = 600.0,
        max_active_runs: int = 10_000,
        validator: ArgsValidator | None = None,
        catalog: ActionCatalog | None = None,
        live_buffer: int = 1000,
        clients: ClientBook | Mapping[str, ClientLimits] | None = None,
        observer: RunEndObserver | None = None,
        tracer: RunTracer | None = None,
        keep_finished_timelines: int = 1000,
    ) -> None:
        self.channels = dict(channels)
        self.observer = observer
        self.tracer = tracer
        self.audits: AuditSampler | None = None
        """The sampled background audit, when configured (``serve`` sets it: :mod:`core.run.audit_sampler`)."""
        self.timelines = Timelines(keep_finished_timelines)
        """Each active run's delivery timeline and the last finished ones' (:mod:`core.run.timeline`)."""
        self._spans: dict[str, RunSpan] = {}
        """The span of each traced active run (ended when its worker ends)."""
        self._ledger = ledger
        self._journal: Journal = journal if journal is not None else MemoryJournal()
        self._clock = clock
        self._idle_s = run_idle_timeout_s
        self.catalog = catalog if catalog is not None else ActionCatalog()
        self._runs: dict[str, ActiveRun] = {}
        self.interrupted: set[str] = set()
        """Runs stopped unfinished because this process lost their ownership or its store (replicas)."""
        self._finished = FinishedRuns(keep_finished, finished_chars)
        self._after_end: dict[str, tuple[asyncio.Event, int]] = {}
        """Finished runs whose watchers wait for a correction (:meth:`after_end`): the event :meth:`corrected` sets
        and how many wait on it (the entry goes with the last of them)."""
        self._unclosed: dict[str, int | None] = {}
        """Runs that finished here but whose journal could not be marked so (``journal.finish`` failed: a full or
        read-only disk), with their last ``seq``: closed at the next :meth:`resume`, never resumed."""
        limits = Limits(queue_size, gap_timeout_s, run_idle_timeout_s, max_active_runs, live_buffer, retry_window_s)
        book = clients if isinstance(clients, ClientBook) else ClientBook(clients)
        args = (self.channels, self._runs, self._finished, self._journal, ledger, clock, limits, validator, book)
        self._admission = Admission(*args, catalog=self.catalog)

    @property
    def live_buffer(self) -> int:
        """How many of a run's latest live events are kept for watchers that reconnect (new runs)."""
        return self._admission.limits.live_buffer

    @live_buffer.setter
    def live_buffer(self, value: int) -> None:
        self._admission.limits.live_buffer = value

    async def submit_lines(
        self, lines: Sequence[tuple[Any, str | None]], run_hint: str | None = None
    ) -> list[LineResult | IngestError]:
        """Take a batch of decoded NDJSON lines (each with its JSON text, or None to have it re-encoded).

        Each line is validated alone; the good ones are journaled in one commit and only then handed to their
        runs. A line with ``kind`` is a normalized event (``run`` defaults to ``run_hint``); a line with no
        ``kind`` is a raw provider event of a run that declared ``format`` in its ``run.start``.

        Returns:
            Per line, in order: a :class:`LineResult`, or the :class:`IngestError` that rejected it (a 4xx: the
            line is not a valid event, names another run or an unknown channel, belongs to no started run).

        Raises:
            Exception: the journal could not be written: none of the batch is accepted (the caller answers 503).
        """
        if len(lines) == 1:
            # One line a request (an agent posting each line as it comes), taken by a fast path: :meth:`_take` without
            # a batch's bookkeeping (its lists, groups and joins, each a cost per request when every request is one
            # line), nor a coroutine per step. The same journal entry, hand-over and failure as :meth:`_take` gives.
            obj, raw = lines[0]
            mark = _run_mark(obj, run_hint, self._runs)  # the run as admission knew it (undone if not journaled)
            admission = self._admission
            if (taken := admission.take_delta(obj, run_hint)) is not None:  # the common line: a plain text delta
                run, event = taken
                entry = new_entry((run.run, raw if raw is not None else _line_text(obj, raw)))
                run.taking += 1  # ActiveRun.hold, written out: no idle close until it is handed over
                try:
                    try:
                        await self._journal.append((entry,))
                    except Exception:
                        await self._undo((entry,), [(run, (event,))], () if mark is None else (mark,))
                        raise
                    if not (run.opened and run.queue.offer((event,))):  # ActiveRun.offer, written out
                        await self._hand_over([(run, [event])], replay=False)
                finally:
                    run.release()
                return [ONE_EVENT]
            group = admission.take_raw(lines, 0, run_hint, replay=False)  # (else admission.accept takes it, in _take)
            if group is not None:
                run, events, results = group
                result = results[0]
                # Taken (not refused, not dropped): a delta's result is the shared ONE_EVENT.
                if result is ONE_EVENT or (type(result) is LineResult and result.dropped is None):
                    entry = new_entry((run.run, raw if raw is not None else _line_text(obj, raw)))
                    run.hold()
                    try:
                        try:
                            await self._journal.append((entry,))
                        except Exception:
                            undone = [(run, events)] if events else ()
                            await self._undo((entry,), undone, () if mark is None else (mark,))
                            raise
                        if events and not (run.opened and run.queue.offer(events)):  # ActiveRun.offer, written out
                            await self._hand_over([(run, events)], replay=False)
                    finally:
                        run.release()
                return results
        return await self._take(lines, run_hint, replay=False)

    async def submit_line(self, obj: object, run_hint: str | None = None) -> int:
        """Take one decoded line, or one event already typed (taken as it is, never dumped and parsed again); return
        how many normalized events it produced (0 when dropped).

        Raises:
            IngestError: as :meth:`submit_lines` reports it.
        """
        (result,) = await self.submit_lines([(obj, None)], run_hint)
        if isinstance(result, IngestError):
            raise result
        return result.events

    async def submit(self, event: Event) -> None:
        """Take one normalized event, typed as it is (validated when it was built): it is journaled as its JSON line
        (:func:`core.events.event_line`) and handed to its run without being dumped and parsed again.

        Raises:
            IngestError: as :meth:`submit_lines` reports it.
        """
        await self.submit_line(event)

    async def resume(self) -> list[str]:
        """Rebuild every run the journal holds unfinished (after a restart) by replaying its lines; each then
        goes on by itself: reconciled with the ledger, finalized when its ``end`` was journaled, else closed after
        ``run_idle_timeout_s`` counted afresh from the resume (issue 24, item 6: the time the sidecar was down is not
        its agent's silence) unless its agent sends more. A run that cannot be
        rebuilt (its channel is gone, a line no longer parses) is logged and dropped alone. Returns the resumed ids."""
        resumed: list[str] = []
        for run_id in await self._journal.unfinished():
            if run_id in self._runs:
                continue  # active here (resuming again after a store outage): it goes on as it is
            if run_id in self._unclosed:  # it finished here: its journal is closed now, the run stays finished
                await self._close_journal(run_id)
                continue
            self.interrupted.discard(run_id)
            self._finished.pop(run_id, None)  # stopped here unfinished (a store outage): not an ended run
            try:
                if await self._resume_one(run_id):
                    resumed.append(run_id)
            except OwnershipLostError:
                raise  # not this run's fault: it stays in the journal
            except Exception:
                _log.exception("run %s cannot be resumed: dropped from the journal", run_id)
                await self._journal.finish(run_id, None)
        return resumed

    async def _close_journal(self, run_id: str) -> None:
        """Mark the finished run ``run_id`` ended in the journal (its earlier ``finish`` failed); a failure is logged
        and it is tried again at the next :meth:`resume`."""
        try:
            await self._journal.finish(run_id, self._unclosed[run_id])
        except Exception:
            _log.exception("run %s finished but its journal still cannot be closed", run_id)
        else:
            del self._unclosed[run_id]

    async def _resume_one(self, run_id: str) -> bool:
        """Replay one run's journal; True when it is active again (False: it had ended, or cannot be rebuilt).

        A run whose idle close passed its commit point (:meth:`core.records.journal.Journal.idle_closed`) is active
        again closed: it takes no line from now on (those its agent sends later are refused 409, as after any idle
        close), and its worker closes it at once with what it had, the ledger deciding what of its final and notice
        was shown already. Before, it resumed open: a kill after the close's notice, before its end was recorded,
        let it take its agent's later lines and end ``delivered`` under the notice (chaos-10-00017)."""
        lines = [(json.loads(line), line) for line in await self._journal.lines(run_id)]
        closed = await self._journal.idle_closed(run_id)
        # The run.start first: a concurrent request of the same run may have been committed before it.
        lines.sort(key=lambda item: 0 if isinstance(item[0], dict) and item[0].get("kind") == "run.start" else 1)
        results = await self._take(lines, run_id, replay=True)
        seqs = [obj.get("seq") for obj, _ in lines if isinstance(obj, dict)]
        last_seq = max((q for q in seqs if isinstance(q, int)), default=None)
        if (run := self._runs.get(run_id)) is not None:
            if closed is not None and run.closing is None and not run.ended and run.stopped is None:
                # Nothing awaited since the replay: no line was taken since. Every journaled line is taken again
                # (one journaled between two of the close's marks too): the last seq is the journal's.
                run.closing, run.closed_seq = idle_closing(run_id, self._idle_s), last_seq
                _log.info("run %s resumed closed by the idle timeout (its close was journaled)", run_id)
            if problems := [f"line {i + 1}: {r}" for i, r in enumerate(results) if isinstance(r, IngestError)]:
                _log.warning("run %s resumed without %d journaled lines: %s", run_id, len(problems), problems[:3])
            return True
        problems = [f"line {i + 1}: {r}" for i, r in enumerate(results) if isinstance(r, IngestError)]
        record = await self._ledger.get_run(run_id)
        if record is None or not record.ended:  # else it ended just before the journal was told
            _log.error("run %s cannot be resumed (%s): dropped from the journal", run_id, "; ".join(problems[:3]))
        await self._journal.finish(run_id, last_seq)
        return False

    async def _take(
        self, lines: Sequence[tuple[Any, str | None]], run_hint: str | None, *, replay: bool
    ) -> list[LineResult | IngestError]:
        results: list[LineResult | IngestError] = []
        staged: list[tuple[ActiveRun, Sequence[RunEvent]]] = []
        entries: list[JournalEntry] = []
        marks: dict[str, _Mark] = {}  # what admission knew of each run before this batch (undone if not journaled)
        held: dict[int, ActiveRun] = {}  # the runs this batch took lines of, held from their idle close (by id)
        try:
            await self._take_into(lines, run_hint, replay, results, staged, entries, marks, held)
            if entries and not replay:
                await self._journal_or_undo(entries, staged, marks)
            await self._hand_over(staged, replay=replay)
        finally:
            for run in held.values():
                run.release()
        return results

    async def _take_into(
        self,
        lines: Sequence[tuple[Any, str | None]],
        run_hint: str | None,
        replay: bool,
        results: list[LineResult | IngestError],
        staged: list[tuple[ActiveRun, Sequence[RunEvent]]],
        entries: list[JournalEntry],
        marks: dict[str, _Mark],
        held: dict[int, ActiveRun],
    ) -> None:
        """Admission of a batch's lines (:meth:`_take`): each line's result, the journal entries of those taken, the
        events to hand over, and each run that took one ``held`` (:meth:`ActiveRun.hold`) as it takes it."""
        admission = self._admission
        i, n = 0, len(lines)
        while i < n:
            if not replay:
                _mark_run(lines[i][0], run_hint, self._runs, marks)
            group = admission.take_deltas(lines, i, run_hint, replay=replay) or admission.take_raw(
                lines, i, run_hint, replay=replay
            )
            if group is not None:  # the common lines: no await
                i = _stage_group(lines, i, group, results, entries, staged)
                _held(group[0], held)
                continue
            obj, raw = lines[i]
            i += 1
            try:
                run, events, result = await admission.accept(obj, run_hint, replay=replay)
            except IngestError as exc:
                results.append(exc)
                continue
            except OwnershipLostError:
                raise
            except Exception as exc:  # a bug of ours: this line fails alone, never the batch nor the journal's 503
                results.append(line_failed(exc, run_hint))
                continue
            results.append(result)
            if run is not None and result.dropped is None:
                entries.append(JournalEntry(run.run, _line_text(obj, raw)))
                entries += expiry_entries(run.approvals, run.run)  # its ttl_s fixed in the same append
                staged.append((run, events))
                _held(run, held)

    async def _journal_or_undo(
        self, entries: list[JournalEntry], staged: list[tuple[ActiveRun, Sequence[RunEvent]]], marks: dict[str, _Mark]
    ) -> None:
        """Journal a batch's taken lines; when the journal refuses them, admission forgets them (new runs, ``seq``
        numbers, usage, an ``end``, what a raw stream's normalizer made of them), so the same lines sent again are
        taken, never dropped as repeats, and give the same events once.

        Raises:
            Exception: what the journal raised (the batch is answered 503).
        """
        try:
            await self._journal.append(entries)
        except Exception:
            await self._undo(entries, staged, marks.values())
            raise

    async def _undo(
        self,
        entries: Sequence[JournalEntry],
        staged: Sequence[tuple[ActiveRun, Sequence[RunEvent]]],
        marks: Iterable[_Mark],
    ) -> None:
        """Admission forgets what it took of the lines ``entries`` the journal refused: the runs they opened, each
        run's ``seq`` numbers, usage and end (``marks``), the approvals they asked (sent again, asked once), and what
        a raw stream's normalizer made of them."""
        for run, events in staged:
            forget_approvals(run, events)
            if not run.opened and self._runs.get(run.run) is run:
                del self._runs[run.run]
                self._admission.clients.left(run.run, ended=False)  # its agent sends the start again
        taken = _taken_seqs(entries)
        for mark in marks:
            mark.restore(taken.get(mark.run.run, []))
            if mark.run.normalizer is not None:
                await self._renormalize(mark.run)

    async def _renormalize(self, run: ActiveRun) -> None:
        """Give ``run`` a normalizer in the state its journaled lines leave it (fed again, their events dropped):
        the one before a refused batch. Copying the normalizer before each batch would cost ~50 µs a request
        (``copy.deepcopy``); this costs a read of the run's journal, once per refusal. A journal that cannot be read
        either leaves the normalizer as it is (logged)."""
        stream = run.controller.start_event.format
        if stream is None:
            return
        try:
            lines = await self._journal.lines(run.run)
        except Exception:
            _log.exception("run %s: its raw stream's state could not be rebuilt from the journal", run.run)
            return
        fresh = make_normalizer(stream, run.run)
        for line in lines:
            obj = json.loads(line)
            if type(obj) is not dict:
                continue
            if Admission._is_raw_of(run, obj, run.run):
                with contextlib.suppress(Exception):  # it was taken when it came: never refused now
                    fresh.feed({k: v for k, v in obj.items() if k != "seq"})
            elif obj.get("kind") == "end" and obj.get("source") is None:
                fresh.close()
        run.normalizer = fresh

    async def _hand_over(self, staged: list[tuple[ActiveRun, Sequence[RunEvent]]], *, replay: bool) -> None:
        """Give the taken events to their runs, opening new runs first (their queues are bounded: the worker must
        run). A replayed run takes its whole journal as its backlog before it opens: one batch, caught up at once."""
        for run, events in consecutive(staged):
            if not run.opened and not replay:
                await self._open(run)
            await run.put_all(events)
        for run, _ in staged:
            if not run.opened:
                await self._open(run)

    async def _open(self, run: ActiveRun) -> None:
        """Restore the run's parts from the ledger and start its worker (once, whichever request gets here first)."""
        if run.opened:
            return
        run.opened = True  # before the await: a concurrent request must not open it again
        run.opened_at_s = self._clock.now()
        # The run's trace context (core/trace.py) in the context its tasks are made in: the delivery loop started by
        # open() and the worker copy it, so every call they make is traced under it; reset at once, so the
        # request's own task (which may carry several runs) never keeps it.
        context = run.controller.start_event.trace()
        traced = RUN_TRACE.set(context)
        span = None
        if context is not None and self.tracer is not None:
            span = self._spans[run.run] = self.tracer.start_run(run.run, context)
        spanned = RUN_SPAN.set(span)
        run.timeline = self.timelines.open(run.run)
        timed = TIMELINE.set(run.timeline)
        try:
            try:
                await run.controller.open()
            except BaseException:
                self._not_opened(run)
                raise
            run.task = asyncio.create_task(self._drive(run), name=f"run:{run.run}")
        finally:
            TIMELINE.reset(timed)
            RUN_SPAN.reset(spanned)
            RUN_TRACE.reset(traced)
        run.controller.on_lost(lambda: self._lost(run))

    def _not_opened(self, run: ActiveRun) -> None:
        """The run's open failed (its ledger's ``start_run`` or ``parts`` met a store outage, or a Redis primary with
        no replica to acknowledge it): the run leaves the relay unfinished, as a worker stopped by the store does, and
        goes on from the journal at the next :meth:`resume` (``interrupted``). Left registered as opened with no
        worker, every later resume skipped it as active here and its lines went to a queue nobody read: its
        partition's runs silent for good, no call, no idle close (chaos seed 4 with failovers: 18 runs)."""
        run.queue.close()  # a concurrent request of the run waiting for room returns (its lines are journaled)
        self._end_span(run.run, None)
        self.timelines.close(run.run, None)
        if self._runs.get(run.run) is run:
            del self._runs[run.run]
            self._admission.clients.left(run.run, ended=False)  # it goes on, here or at another owner
            self.interrupted.add(run.run)
        self._release(run.controller)

    def _release(self, controller: Controller) -> None:
        """Give back the send chain of every conversation of the run (each of a fan-out run's places)."""
        for channel, target in controller.places:
            runtime = self.channels.get(channel)
            if runtime is not None:
                runtime.release(target)

    def _lost(self, run: ActiveRun) -> None:
        """The run's delivery loop stopped on a store it could not write (or lost ownership): the run stops where it
        is, unfinished, and resumes from the journal when the store is writable again (``interrupted``)."""
        if self._runs.get(run.run) is run and run.task is not None and not run.task.done():
            self.interrupted.add(run.run)
            run.task.cancel()

    async def _drive(self, run: ActiveRun) -> None:
        """The run's worker, then what the relay keeps of it; a run that finished leaves the journal."""
        controller = run.controller
        parts: list[PartRecord] | None = None
        try:
            try:
                await work(run, self._clock, self._idle_s, self._journal.close_idle)
            except OwnershipLostError:
                self.interrupted.add(controller.run)  # left unfinished in the journal: resumed from there
                return
            if controller.done:  # before the run leaves the registry: waiters see it finished only after this
                try:
                    await self._journal.finish(controller.run, run.gate.last)
                except Exception:  # closed at the next resume (the disk healed): never resumed as unfinished
                    self._unclosed[controller.run] = run.gate.last
                    _log.exception("run %s finished but its journal could not be closed", controller.run)
                try:
                    parts = await self._ledger.parts(controller.run)  # what its texts refer to once it is kept
                except Exception:
                    _log.exception(
                        "run %s finished but its parts could not be read: its texts are kept", controller.run
                    )
        finally:
            if self._runs.get(controller.run) is run:
                del self._runs[controller.run]
                self._admission.clients.left(run.run, ended=controller.done)  # else it goes on elsewhere
            self._release(controller)
            report = with_gaps(controller.report(), run.gate.gaps)
            if controller.done:
                self._ended(report, self._clock.now() - run.opened_at_s)
            self._end_span(controller.run, report if controller.done else None)
            self.timelines.close(controller.run, str(report.status) if controller.done else None)
            record = controller.monitor.record()
            kept = finished_record(report, controller.lane, record, run.gate.last, self._ledger, parts)
            self._finished[kept.run] = kept  # one str of its id: the key is its own

    def _end_span(self, run: str, report: DeliveryReport | None) -> None:
        """End the run's span when it has one (its failure never stops the relay)."""
        span = self._spans.pop(run, None)
        if span is not None:
            try:
                span.end(report)
            except Exception:
                _log.exception("run %s: its span could not be ended", run)

    def _ended(self, report: DeliveryReport, duration_s: float) -> None:
        """Tell how a run ended: its log line, then the observer (whose failure never stops the relay)."""
        log_run_end(report, duration_s)
        if self.observer is not None:
            try:
                self.observer.run_ended(report, duration_s)
            except Exception:
                _log.exception("run %s: its end could not be counted", report.run)

    async def erase(self, run: str) -> dict[str, int]:
        """Remove ``run``'s text from everything this relay keeps (docs/retention.md): what it keeps in memory of the
        finished run (its report, lane units and live record: :mod:`core.run.finished`), the channels' adapters'
        caches of recent renderings (:class:`core.records.erase.TextCache`), then the journal and the ledger
        (:class:`core.records.erase.Erasable`: their files byte for byte). Ids, states and counts stay: the run's
        report is rebuilt from the ledger, with no text.

        Returns:
            What was removed: ``{"memory": 0|1, "journal": lines, "ledger": records}``.

        Raises:
            IngestError: 409 while the run is active here (stop it first: POST /v1/runs/{run}/stop, or let it end);
                404 when no store knows it; 501 when a store cannot erase.
        """
        if run in self._runs:
            raise IngestError(
                f"run {run!r} is still active: stop it (POST /v1/runs/{{run}}/stop) or let it end, then erase it",
                status=409,
            )
        known = (
            run in self._finished or await self._ledger.get_run(run) is not None or bool(await self._journal.lines(run))
        )
        if not known:
            raise IngestError(f"unknown run {run!r}", status=404)
        return await self._erase([run])

    async def erase_conversation(self, channel: str, chat_id: str, owns: Callable[[str], bool]) -> dict[str, Any]:
        """Remove the text of every run on ``channel`` to chat ``chat_id`` that ``owns`` says is the caller's (its
        run key), as :meth:`erase` does for one, in one pass over each store.

        Returns:
            ``{"runs": [run keys erased], "removed": {"memory", "journal", "ledger"}}``.

        Raises:
            IngestError: 409 when one of them is active here (nothing erased: stop it first), 501 when the ledger
                cannot list a conversation's runs or a store cannot erase.
        """
        if not isinstance(self._ledger, Conversations):
            raise IngestError(f"{type(self._ledger).__name__} cannot list a conversation's runs", status=501)
        try:
            runs = [run for run in await self._ledger.runs_in(channel, chat_id) if owns(run)]
        except NotImplementedError as exc:
            raise IngestError(str(exc), status=501) from None
        active = [run for run in runs if run in self._runs]
        if active:
            raise IngestError(
                f"{len(active)} run(s) of this conversation are still active: stop them or let them end, then erase it",
                status=409,
            )
        removed = await self._erase(runs) if runs else {"memory": 0, "journal": 0, "ledger": 0}
        return {"runs": runs, "removed": removed}

    async def _erase(self, runs: list[str]) -> dict[str, int]:
        """:meth:`erase` of ``runs`` (none active here)."""
        for store in (self._journal, self._ledger):
            if not isinstance(store, Erasable):
                raise IngestError(f"{type(store).__name__} cannot erase a run's text", status=501)
        removed = {"memory": 0, "journal": 0, "ledger": 0}
        for run in runs:
            if self._finished.pop(run, None) is not None:
                removed["memory"] += 1
            self.timelines.forget(run)  # no text in it, but the run's erasure leaves no trace of when it spoke
            if self.audits is not None:
                self.audits.forget(run)
            self.interrupted.discard(run)
        self._clear_text_caches()
        try:
            removed["journal"] = await cast(Erasable, self._journal).erase(runs)
            removed["ledger"] = await cast(Erasable, self._ledger).erase(runs)
        except NotImplementedError as exc:  # a wrapper whose inner store cannot erase
            raise IngestError(str(exc), status=501) from None
        extra = {f"erased_{k}": v for k, v in removed.items()}
        _log.info("%d run(s) erased: %s", len(runs), ", ".join(runs[:20]), extra={"runs": len(runs), **extra})
        return removed

    async def expire_texts(self, now_s: float, limit: int = 500) -> list[str]:
        """Drop the text of runs that ended longer ago than their channel's ``text_retention_s`` (Unix seconds
        ``now_s``; at most ``limit`` runs per channel per call): from the ledger (:class:`core.records.erase.Expiring`)
        and from what the relay keeps of them in memory. A ledger that cannot expire text keeps it (logged once per
        call). The runs whose text went.

        Raises:
            Exception: the ledger could not be written (tried again at the next call).
        """
        expiring = [r.policy for r in self.channels.values() if r.policy.text_retention_s is not None]
        if not expiring:
            return []
        if not isinstance(self._ledger, Expiring):
            _log.warning("text_retention_hours is set but %s cannot drop text", type(self._ledger).__name__)
            return []
        gone: list[str] = []
        for policy in expiring:
            assert policy.text_retention_s is not None
            try:
                runs = await self._ledger.expire(policy.name, now_s - policy.text_retention_s, limit)
            except NotImplementedError as exc:
                _log.warning("text_retention_hours is set but the ledger cannot drop text: %s", exc)
                return gone
            for run in runs:
                self._finished.pop(run, None)
            gone += runs
        if gone:
            self._clear_text_caches()
            _log.info("retention: the text of %d ended runs dropped", len(gone), extra={"expired": len(gone)})
        return gone

    def _clear_text_caches(self) -> None:
        for runtime in self.channels.values():
            cache = getattr(runtime.adapter, "render", None)
            if isinstance(cache, TextCache):
                cache.clear()

    def timeline(self, run: str) -> Timeline | None:
        """``run``'s delivery timeline (:mod:`core.run.timeline`), while it is active here or one of the last finished
        ones; None: not known here (finished longer ago, before a restart, or at another replica)."""
        return self.timelines.get(run)

    async def audit(self, run: str) -> AuditReport:
        """What the platform shows now of ``run``'s delivered messages (:func:`core.run.audit.audit_run`).

        Raises:
            AuditError: the ledger knows no such run, or its channel is not configured here.
        """
        return await audit_run(run, self._ledger, self.channels)

    async def stop(self, run_id: str, by: str | None = None, reason: str | None = None) -> StopState:
        """Stop the active run ``run_id`` for its reader (:func:`core.run.stop.stop_run`: journaled, idempotent).

        Raises:
            IngestError: 404 for an unknown run, 409 for one that ended otherwise.
        """
        return await stop_run(self._admission, run_id, by, reason)

    async def decide_approval(self, run_id: str, approval: str, decision: str, by: str | None) -> dict[str, Any]:
        """Decide approval ``approval`` of run ``run_id`` (:func:`core.run.approvals.decide`: journaled, once).

        Raises:
            IngestError: 404 unknown run or approval, 409 the run ended first.
            core.run.approvals.DecisionRefused: 403 ``by`` may not decide, 409 decided already.
        """
        return (await decide(self._admission, run_id, approval, decision, by))[1]

    def approval(self, run_id: str, approval: str) -> dict[str, Any]:
        """Approval ``approval`` of the open run ``run_id`` (:func:`core.run.approvals.approval_state`).

        Raises:
            IngestError: 404 not an open run's approval.
        """
        return approval_state(self._admission, run_id, approval)

    # --- reading ----------------------------------------------------------------------------------------

    def controller(self, run_id: str) -> Controller | None:
        """The controller of an active run (None once it finished)."""
        run = self._runs.get(run_id)
        return run.controller if run is not None else None

    def pipeline(self, run_id: str) -> list[PipelineUnit] | None:
        """The run's pipeline units so far (None for an unknown run)."""
        lane = self.lane(run_id)
        return list(lane.units) if lane is not None else None

    def monitor(self, run_id: str) -> Watched | None:
        """The run's live progress, active or finished (:class:`core.run.finished.FinishedMonitor`; None for a run
        unknown to this process)."""
        run = self._runs.get(run_id)
        if run is not None:
            return run.controller.monitor
        finished = self._finished.get(run_id)
        return finished.monitor if finished is not None else None

    def corrected(self, run_id: str, text: str) -> bool:
        """A correction of finished run ``run_id`` was applied (:mod:`core.run.corrections`): its live page shows
        ``text`` as its answer from now on (a page loaded later gets it in its ``reset``) and its watchers get it as
        one ``answer`` event (:meth:`core.run.finished.Finished.corrected`). False when this process keeps nothing
        of the run (its page then shows what a restarted sidecar shows of it)."""
        finished = self._finished.get(run_id)
        if finished is None:
            return False
        self._finished[run_id] = finished.corrected(text, time.time())
        waiting = self._after_end.pop(run_id, None)
        if waiting is not None:
            waiting[0].set()  # every watcher of the run wakes up
        return True

    async def after_end(self, run_id: str, last_id: int, timeout_s: float) -> Watched | None:
        """The finished run's monitor once it has events after ``last_id`` (a correction's: :meth:`corrected`),
        waiting up to ``timeout_s``; None when none came (or the run is not kept here)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            finished = self._finished.get(run_id)
            left = deadline - loop.time()
            if finished is None:  # unknown here, or its end was just watched and it is being finalized
                if run_id not in self._runs or left <= 0:
                    return None
                await asyncio.sleep(min(FINALIZING_POLL_S, left))
                continue
            if finished.last_id > last_id:
                return finished.monitor
            if left <= 0:
                return None
            waiting, watchers = self._after_end.get(run_id, (asyncio.Event(), 0))
            self._after_end[run_id] = (waiting, watchers + 1)
            try:
                await asyncio.wait_for(waiting.wait(), left)
            except TimeoutError:
                return None
            finally:
                kept = self._after_end.get(run_id)
                if kept is not None and kept[0] is waiting:  # not set yet: this watcher leaves it
                    if kept[1] <= 1:
                        del self._after_end[run_id]
                    else:
                        self._after_end[run_id] = (waiting, kept[1] - 1)

    def lane(self, run_id: str) -> PipelineLane | None:
        """The run's pipeline lane, active or finished (None for a run unknown to this process)."""
        run = self._runs.get(run_id)
        if run is not None:
            return run.controller.lane
        finished = self._finished.get(run_id)
        return finished.lane if finished is not None else None

    async def gate(
        self, run_id: str, call_id: str, *, source_key: str | None = None, wait_s: float = 0.0
    ) -> tuple[GateDecision, PipelineUnit | None]:
        """May tool call ``call_id`` of run ``run_id`` run now? The decision and the call's pipeline unit (a held
        call's: its refusing ``approval`` unit, or None while a person has yet to decide; :mod:`core.lanes.gate` has
        the policy).

        Args:
            run_id: the run.
            call_id: the call's id as the pipeline lane carries it.
            source_key: which agent made the call when several used that id (``root`` for the root).
            wait_s: wait up to this long while the verdict is ``wait`` or the call is not complete yet.

        Raises:
            IngestError: 404 for an unknown run or a call not on its pipeline lane; 409 for an ambiguous id.
        """
        lane = self.lane(run_id)
        if lane is None:
            raise IngestError(f"unknown run {run_id!r} (or it ended before this sidecar started)", status=404)
        try:
            decision, unit = await ask_gate(self.catalog, lane, call_id, source_key=source_key, wait_s=wait_s)
        except UnknownCallError as exc:
            raise IngestError(str(exc), status=409 if isinstance(exc, AmbiguousCallError) else 404) from None
        if (active := self._runs.get(run_id)) is not None:  # a finished run's events ended with its end
            monitor = active.controller.monitor
            name = unit.name if isinstance(unit, ToolCallUnit | MalformedToolCallUnit) else None
            fields = {"call_id": call_id, "name": name, "verdict": str(decision.verdict)}
            monitor.publish("decision", what="gate", reason=decision.reason, **fields)
        return decision, unit

    async def report(self, run_id: str) -> DeliveryReport | None:
        """The run's delivery report (from memory, else rebuilt from the ledger), or None if unknown."""
        run = self._runs.get(run_id)
        if run is not None:
            return with_gaps(run.controller.report(), run.gate.gaps)
        finished = self._finished.get(run_id)
        if finished is not None:
            return finished.report
        return await rebuilt_report(self._ledger, run_id)

    async def wait_done(self, run_id: str, timeout_s: float) -> DeliveryReport | None:
        """Wait until the run is finalized (or the timeout passes); return its report. A run taken but not opened
        yet (its lines are being journaled) is waited for too."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        run = self._runs.get(run_id)
        while run is not None and run.task is None and loop.time() < deadline:
            await asyncio.sleep(0.02)
            run = self._runs.get(run_id)
        if run is not None and run.task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(run.task), max(0.0, deadline - loop.time()))
        return await self.report(run_id)

    def active_runs(self) -> list[str]:
        return list(self._runs)

    def backlog(self) -> int:
        """Events taken but not yet handled by their runs' workers, over every active run (O(active runs))."""
        return sum(run.queue.qsize() for run in self._runs.values())

    async def runs(self, *, everywhere: bool = False, bearer: str = "") -> RunListing:
        """The active runs (:meth:`core.run.monitor.RunMonitor.row` of each), none unreachable. One process holds every
        run: ``everywhere`` and ``bearer`` (a replica asks the others with them) change nothing."""
        rows = [r.controller.monitor.row(with_gaps(r.controller.report(), r.gate.gaps)) for r in self._runs.values()]
        return RunListing(runs=rows)

    async def close(self) -> None:
        """Stop every run worker (unfinished runs stay in the journal), cancel the approvals' expiry timers (a
        restarted sidecar arms them again from the journal) and close adapters."""
        await self.stop_runs()
        await self._admission.cancel_expiries()
        for channel in self.channels.values():
            await channel.adapter.close()

    async def stop_runs(self) -> None:
        """Stop every run worker without finalizing (unfinished runs stay in the journal); the adapters stay open
        (replicas: a partition handed to another replica, while this one serves others with the same channels)."""
        tasks = [run.task for run in list(self._runs.values()) if run.task is not None]
        for task in await stop_all(tasks, limit_s=STOP_LIMIT_S):
            _log.error("%s did not stop within %g s: it is left behind (its calls are fenced)", task, STOP_LIMIT_S)


class _Mark:
    """What admission knows of one active run (its ``seq`` numbers taken, its usage, its end) before a batch, so a
    batch the journal refused (a full or read-only disk) leaves the run as it was: the agent's same lines sent again
    are taken, never dropped as repeats. A raw provider stream's normalizer is rebuilt from the journal instead
    (:meth:`Relay._renormalize`).

    Cheap to take (O(1), for the one-line request too): the counts are a few numbers, the longest texts a reference
    (that dict is replaced, never changed in place: :meth:`core.ingest.quota.RunUsage.charge`), and of the ``seq``
    numbers only the floor. Undoing reverses what the refused lines took (their own ``seq`` numbers:
    :meth:`core.ingest.sequencer.SeqFloor.untake`), so numbers another request took meanwhile stay taken; before the
    run's first ``seq`` (no floor, so none above it) the numbers are restored as they were.
    """

    __slots__ = ("chars", "end_seq", "ended", "events", "floor", "longest", "max_seq", "run")

    def __init__(self, run: ActiveRun) -> None:
        self.run = run
        self.floor = run.seqs.floor
        usage = run.usage
        self.events, self.chars, self.max_seq, self.longest = usage.events, usage.chars, usage.max_seq, usage._longest
        self.ended, self.end_seq = run.ended, run.end_seq

    def restore(self, seqs: list[int]) -> None:
        """Undo the batch's lines of this run that took ``seqs``."""
        run = self.run
        if self.floor is None:
            run.seqs.floor, run.seqs.above = None, set()
        else:
            run.seqs.untake(self.floor, seqs)
        usage = run.usage
        usage.events, usage.chars, usage.max_seq, usage._longest = self.events, self.chars, self.max_seq, self.longest
        run.ended, run.end_seq = self.ended, self.end_seq


def _line_run(obj: Any, run_hint: str | None) -> object:
    """The run a line names: a decoded line's ``run`` (or ``run_hint``); an event already typed (the ``text`` event
    HTTP ingest and a replica's front decode and validate: :func:`adapters.ingest_http.lines.decode_text`) carries
    its own, as admission reads it (:meth:`core.ingest.admission.Admission.take_deltas`). Without it, a typed line
    whose journal append failed kept its ``seq`` taken, and its agent's resend was dropped as a repeat: answered
    200, never journaled."""
    if type(obj) is dict:
        return obj.get("run", run_hint)
    run = getattr(obj, "run", None)
    return run if run is not None else run_hint


def _run_mark(obj: Any, run_hint: str | None, runs: Mapping[str, ActiveRun]) -> _Mark | None:
    """The run ``obj`` names (or ``run_hint``) as admission knows it now, or None: no such active run. O(1)."""
    run_id = _line_run(obj, run_hint)
    if type(run_id) is str and (run := runs.get(run_id)) is not None:
        return _Mark(run)
    return None


def _taken_seqs(entries: Sequence[JournalEntry]) -> dict[str, list[int]]:
    """The ``seq`` of each journal entry that has one, by run (read back from the lines: only when they are undone)."""
    taken: dict[str, list[int]] = {}
    for run, line in entries:
        obj = json.loads(line)
        seq = obj.get("seq") if isinstance(obj, dict) else None
        if type(seq) is int:
            taken.setdefault(run, []).append(seq)
    return taken


def _mark_run(obj: Any, run_hint: str | None, runs: Mapping[str, ActiveRun], marks: dict[str, _Mark]) -> None:
    """Remember the run ``obj`` names (or ``run_hint``) as it is now, once per batch (O(1))."""
    run_id = _line_run(obj, run_hint)
    if type(run_id) is str and run_id not in marks and (run := runs.get(run_id)) is not None:
        marks[run_id] = _Mark(run)
