"""One partition owned by this replica: its relay, fed from the partition's input stream.

The lease's grant gives a fencing token; the partition's journal and ledger are opened fenced with it, so once
another replica is granted the partition every write of this one is refused (:class:`adapters.redis.FencedError`,
a :class:`core.errors.OwnershipLostError`) and its runs stop without another call. On a grant the owner:

1. resumes the runs the partition's journal holds unfinished (as a restarted single process does);
2. takes the input entries nobody acknowledged (its own before a restart, a dead owner's: XAUTOCLAIM);
3. reads new entries (each one run's lines of one request, as the front took them: a fenced XREADGROUP, then a
   blocking XREAD from where it got to, one round trip per wake-up: :meth:`adapters.redis.InputStream.read`), parses
   each line once and hands them to the relay, as few batches as can be (:meth:`PartitionOwner._feed`). An entry
   is acknowledged (deleted) in the same fenced Redis script that journals it; an entry the relay dropped or refused
   (a repeat, a line after the run's end) is acknowledged right after. Entries that keep failing (delivered
   :data:`MAX_DELIVERIES` times) go to the dead-letter stream (``streamrelay runs --dead`` lists them).

A request's ``text`` lines that reach this replica's own front are handed to the relay directly instead, journaled
in one fenced script that refuses while the input stream holds any entry (:meth:`PartitionOwner.submit_direct`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from itertools import groupby
from typing import Any, Protocol

from pydantic import TypeAdapter, ValidationError

from streamrelay.adapters.ingest_http.lines import decode_text
from streamrelay.adapters.redis import FencedError, InputEntry, InputStream, NotDirectError, RedisJournal, RedisLedger
from streamrelay.core.errors import IngestError, OwnershipLostError, StoreUnavailableError
from streamrelay.core.events import TextEvent
from streamrelay.core.ingest.admission import LineResult
from streamrelay.core.records.journal import EndedRun, IdleClose, JournalEntry
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.corrections import Corrections
from streamrelay.core.run.desk import Desk
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.worker import CloseIdle
from streamrelay.core.tasks import stop

_log = logging.getLogger("streamrelay.replicas")

MAX_DELIVERIES = 5
"""An input entry delivered this many times without being acknowledged goes to the dead-letter stream."""
READ_BLOCK_MS = 1000
"""How long one XREADGROUP waits for new entries (below the client's socket timeout)."""
READ_COUNT = 1000
STOP_WAIT_S = 5.0
"""How long a stop waits for a cancelled reader (it goes on in the background past that)."""
_TEXT_EVENTS = TypeAdapter(list[TextEvent]).validate_json
"""The ``text`` event's validator over a JSON array of them (pydantic-core, one call for an entry's lines)."""
CATCH_UP_S = 5.0
"""How long an idle close waits for the reader to hand over the entries appended before its mark (seconds); past
that (the reader failing) the run is closed with what it took, and the lines left are logged."""
RUN_MARK_TTL_S = 7 * 24 * 3600
"""How long a run's idle-close mark lives (seconds: as long as the run index remembers a run)."""
RETRY_S = 1.0
"""Pause after a failure to read or hand over (Redis unreachable) before the pending entries are taken again."""


class AckingJournal:
    """The partition's fenced journal, acknowledging the input entries a batch came from in its own append.

    :class:`core.run.relay.Relay` journals what it accepts with ``append(entries)``; the owner sets :attr:`acks` to
    the batch's stream ids just before handing the batch over, so the lines become durable in the journal and
    leave the input stream in one script: a kill between the two cannot journal a line twice.
    """

    def __init__(self, inner: RedisJournal, close_idle: CloseIdle) -> None:
        self.inner = inner
        self._close_idle = close_idle
        self.acks: list[str] = []
        self.feeder: asyncio.Task[Any] | None = None
        """The task handing the batch over: only its own append takes :attr:`acks` (a Stop journaled meanwhile by
        another task must not delete the batch's entries before the batch's lines are journaled)."""
        self.direct: dict[asyncio.Task[Any], _Direct] = {}
        """The tasks of the front's requests handed to the relay directly (:meth:`PartitionOwner.submit_direct`):
        their appends are journaled with the direct checks (:meth:`adapters.redis.RedisJournal.append`'s ``direct``)."""

    def __repr__(self) -> str:
        return f"AckingJournal({self.inner!r})"

    async def append(self, entries: Sequence[JournalEntry]) -> None:
        if self.direct and (direct := self.direct.get(asyncio.current_task())) is not None:  # type: ignore[arg-type]
            direct.sent = True
            await self.inner.append(entries, direct=direct.epoch)
            direct.journaled = True
            return
        acks: list[str] = []
        if self.acks and asyncio.current_task() is self.feeder:
            acks, self.acks = self.acks, []
        await self.inner.append(entries, acks=acks)

    async def unfinished(self) -> list[str]:
        return await self.inner.unfinished()

    async def lines(self, run: str) -> list[str]:
        return await self.inner.lines(run)

    async def last_at(self, run: str) -> float | None:
        return await self.inner.last_at(run)

    async def finish(self, run: str, last_seq: int | None) -> None:
        await self.inner.finish(run, last_seq)

    async def close_idle(self, run: str, last_seq: int | None, *, ended: bool = False) -> None:
        """The owner's commit point of an idle close (:meth:`PartitionOwner.close_idle`)."""
        await self._close_idle(run, last_seq, ended=ended)

    async def idle_closed(self, run: str) -> IdleClose | None:
        return await self.inner.idle_closed(run)

    async def ended(self, run: str) -> EndedRun | None:
        return await self.inner.ended(run)

    async def erase(self, runs: Sequence[str]) -> int:
        """The fenced journal's erasure (:meth:`adapters.redis.journal.RedisJournal.erase`)."""
        return await self.inner.erase(runs)

    async def close(self) -> None:
        await self.inner.close()


class _Direct:
    """One direct hand-over's journal state (:meth:`PartitionOwner.submit_direct`): the epoch its appends check,
    whether an append was sent (its outcome may be unknown) and whether one was journaled."""

    __slots__ = ("epoch", "journaled", "sent")

    def __init__(self, epoch: str) -> None:
        self.epoch = epoch
        self.sent = False
        self.journaled = False


MakeRelay = Callable[[Ledger, AckingJournal], Relay]
"""Builds a partition's relay on the replica's channels, with the partition's fenced ledger and journal."""


class EndedRuns(Protocol):
    """What a partition's owner does for its ended runs (:class:`app.replicas.ended.OwnedEnded`): their corrections
    and their desk resends, written through the owner's fenced ledger."""

    corrections: Corrections
    desk: Desk

    async def resume(self) -> None:
        """Apply the corrections a previous owner (or this replica before a restart) left ``applying``."""
        ...


MakeEnded = Callable[[RedisLedger, Relay], EndedRuns]
"""Builds a partition owner's :class:`EndedRuns` from its fenced ledger and its relay."""


class PartitionOwner:
    """Owns ``partition`` with the grant ``token`` until :meth:`stop` (module docstring).

    Args:
        partition: the partition.
        token: the fencing token of this replica's grant.
        owner: this replica's id (the stream consumer's name).
        stream: the partitions' input streams.
        journal: the partition's journal (read-only; fenced here).
        ledger: the partition's ledger (read-only; fenced here).
        make_relay: builds the relay.
        make_ended: builds what the owner does for ended runs (:class:`EndedRuns`); its corrections a previous
            owner left ``applying`` are resumed once the partition's runs are.
    """

    def __init__(
        self,
        partition: int,
        token: int,
        *,
        owner: str,
        stream: InputStream,
        journal: RedisJournal,
        ledger: RedisLedger,
        make_relay: MakeRelay,
        make_ended: MakeEnded | None = None,
    ) -> None:
        self.partition = partition
        self.token = token
        self._owner = owner
        self._stream = stream
        self.journal = AckingJournal(journal.fenced(token), self.close_idle)
        self._handed = (0, 0)
        """The newest input entry id handed to the relay, as ``(ms, seq)``: where an idle close waits for."""
        self._fed = asyncio.Event()
        """Set after each hand-over (an idle close waiting for the reader to pass its mark wakes)."""
        self.ledger = ledger.fenced(token)
        """The partition's ledger, every write fenced with this grant's token (the relay's, the corrections' and the
        desk's resends')."""
        self.relay = make_relay(self.ledger, self.journal)
        self.ended: EndedRuns | None = make_ended(self.ledger, self.relay) if make_ended is not None else None
        """What this owner does for the partition's ended runs (corrections, desk resends); None: nothing."""
        self._resuming: asyncio.Task[None] | None = None
        self.ready = asyncio.Event()
        """Set once the partition's unfinished runs were resumed and its pending entries taken."""
        self.lost = False
        """A write was refused: another replica holds the partition now."""
        self.task: asyncio.Task[None] | None = None
        self._stopping = False
        self._feeding = False
        """The reader is handing entries of the input stream to the relay: no direct hand-over starts meanwhile."""
        self._direct = 0
        """Direct hand-overs in flight (:meth:`submit_direct`): the reader waits for none before it hands over."""
        self._no_direct = asyncio.Event()
        self._no_direct.set()
        self._suspect = False
        """A direct hand-over's journal append failed with an unknown outcome: the relay may not know lines the
        journal holds. No direct hand-over, and nothing read is handed over, until the runs are rebuilt from the
        journal (:meth:`_recover`)."""

    def __repr__(self) -> str:
        return f"PartitionOwner(partition={self.partition}, token={self.token}, runs={len(self.relay.active_runs())})"

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name=f"partition:{self.partition}")

    async def _run(self) -> None:
        try:
            started = False  # the first pass resumes the partition's runs and takes its pending entries
            retake = False
            claimed = True  # entries were just claimed: those delivered too often go to the dead letters
            while not self._stopping:
                try:
                    # Inside the try, the first pass too: Redis may refuse it (a primary alone after a failover
                    # refuses the runs' ledger.start_run). Outside it, the task ended while the lease keeper went on
                    # renewing the lease: no replica read the partition until this one restarted.
                    if not started:
                        await self._start()
                        started, retake, claimed = True, False, True
                        self.ready.set()
                        if self.ended is not None and self._resuming is None:
                            self._resuming = asyncio.create_task(
                                self.ended.resume(), name=f"partition:{self.partition}:corrections"
                            )
                    elif retake or self.relay.interrupted or self._suspect:
                        await self._recover()
                        retake = False
                        claimed = True
                    if claimed:  # only a claim counts a delivery again: a plain read never makes an entry dead
                        await self._stream.bury(self.partition, max_deliveries=MAX_DELIVERIES, token=self.token)
                        claimed = False
                    entries = await self._stream.read(
                        self.partition, self._owner, count=READ_COUNT, block_ms=READ_BLOCK_MS, token=self.token
                    )
                    if self._suspect:  # read again after the runs are rebuilt (the next read is a fenced one)
                        continue
                    await self._feed(entries)
                except StoreUnavailableError as exc:
                    _log.warning(
                        "partition %d: Redis did not answer (%s): its runs resume when it does", self.partition, exc
                    )
                    await asyncio.sleep(RETRY_S)
                    retake = True
                except (OwnershipLostError, asyncio.CancelledError):
                    raise
                except Exception:
                    _log.exception("partition %d: input not handed over; taken again in %g s", self.partition, RETRY_S)
                    await asyncio.sleep(RETRY_S)
                    retake = True
        except OwnershipLostError:
            self.lost = True
            _log.warning("partition %d: another replica holds it now (token %d refused)", self.partition, self.token)
            await self.relay.stop_runs()

    async def _start(self) -> None:
        """The first pass of a grant: the partition's unfinished runs resumed from the journal, then the entries
        taken but never acknowledged handed over. Tried again, from the runs' stop, until it passes."""
        await self.relay.stop_runs()  # a pass that failed half way may have opened some: they start again with all
        resumed = await self.relay.resume()
        if resumed:
            _log.info("partition %d: %d unfinished runs resumed", self.partition, len(resumed))
        await self._take_pending()

    async def _recover(self) -> None:
        """After a Redis outage (or a hand-over that failed): every run of the partition stops and goes on from the
        journal, together, with its admission state (``seq`` numbers taken, usage, end) rebuilt from it; then the
        entries taken but never acknowledged are handed over again.

        Also the runs the outage did not stop: what this process knows of them may not be what Redis holds. A
        journal append that failed here may have been applied there (not acknowledged by a replica in time, or its
        reply lost): its lines are journaled and their input entries acknowledged in the same script, so they are
        never handed over again, while admission undid them; kept in memory, the run went on without them (a hole
        in its text, ``seq`` numbers "never arrived") and took them again as new when its agent sent them again.
        A direct hand-over's append that failed the same way (:meth:`submit_direct`) is recovered from here too."""
        async with self._exclusive():
            await self.relay.stop_runs()
            resumed = await self.relay.resume()
            self._suspect = False  # rebuilt from the journal: what a direct append left unknown is known again
        _log.info("partition %d: %d runs resumed after a Redis outage", self.partition, len(resumed))
        await self._take_pending()

    async def _take_pending(self) -> None:
        """Hand over the entries taken but never acknowledged (this owner's or a previous owner's)."""
        await self._feed(await self._stream.claim(self.partition, self._owner, min_idle_ms=0, token=self.token))

    async def _feed(self, entries: Sequence[InputEntry]) -> None:
        """Hand ``entries`` to the relay in stream order, as few batches as can be. Each line is parsed once, here: a
        ``text`` line decoded and validated in one step (:func:`adapters.ingest_http.lines.decode_text`, as one
        process does), any other by ``json.loads``. Normalized events are given their entry's run, so a stretch of
        entries (any runs) is one batch, journaled in one script; an entry holding a raw provider line needs its run
        given, so a stretch of one run's such entries is a batch of its own. An entry is never split between batches:
        its lines are journaled, and the entry acknowledged, in one script.

        No direct hand-over (:meth:`submit_direct`) runs meanwhile: the ones in flight finish first, new ones go
        through the input stream, so the relay takes lines in the order the journal holds them. When one it waited for
        left its outcome unknown (:attr:`_suspect`), nothing is handed over: admission may lack lines the journal
        holds before these (the run would take an ``end`` without them); the entries stay pending, and
        :meth:`_recover` takes them once the runs are rebuilt."""
        if not entries:
            return
        async with self._exclusive():
            if self._suspect:  # a direct hand-over it waited for lost its outcome: left pending, taken once rebuilt
                return
            await self._feed_entries(entries)

    @contextlib.asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[None]:
        """Inside, the reader alone hands lines to the relay (or rebuilds its runs): the direct hand-overs in flight
        (:meth:`submit_direct`) finished first, new ones go through the input stream."""
        self._feeding = True
        try:
            while self._direct:
                await self._no_direct.wait()
            yield
        finally:
            self._feeding = False

    async def _feed_entries(self, entries: Sequence[InputEntry]) -> None:
        """:meth:`_feed`, once no direct hand-over is in flight."""
        decoded: list[tuple[InputEntry, list[tuple[Any, str]], bool]] = []
        for entry in entries:
            lines, raw = self._decode(entry)
            if lines:
                decoded.append((entry, lines, raw))
            else:
                await self._stream.ack(self.partition, [entry.id], token=self.token)
        try:
            await self._hand_over(decoded)
        finally:
            if entries:
                self._handed = max(self._handed, max(_entry_id(entry.id) for entry in entries))
                self._fed.set()

    async def _hand_over(self, decoded: list[tuple[InputEntry, list[tuple[Any, str]], bool]]) -> None:
        """:meth:`_feed`'s hand-over of the decoded entries."""
        for run, group in groupby(decoded, key=lambda item: item[0].run if item[2] else None):
            batch = list(group)
            self.journal.acks = [entry.id for entry, _, _ in batch]
            self.journal.feeder = asyncio.current_task()
            lines = [line for _, taken, _ in batch for line in taken]
            results = await self.relay.submit_lines(lines, run)
            if self.journal.acks:  # nothing of it was journaled (repeats, lines after the end, refused lines)
                await self._stream.ack(self.partition, self.journal.acks, token=self.token)
                self.journal.acks = []
            runs = [entry.run for entry, taken, _ in batch for _ in taken]
            for line_run, result in zip(runs, results, strict=True):
                if isinstance(result, IngestError):
                    _log.warning("run %s: a line was refused by its owner: %s", line_run, result)

    async def submit_direct(
        self, lines: Sequence[tuple[Any, str | None]], epoch: str
    ) -> list[LineResult | IngestError] | None:
        """Hand a request's lines, taken by this replica's front for this partition, to the relay directly, as one
        process does: journaled in one fenced script that also makes the input stream's checks (``epoch``, the runs'
        stop and idle-close marks), so they never pass through the input stream, and the reader is not woken for
        them (one Redis round trip instead of three: the stream's append, the reader's wake-up, its journal append).

        Order: the script journals them only while the partition's input stream is empty (an entry leaves it only
        once journaled, and the reader admits entries only while no direct hand-over is in flight: :meth:`_feed`),
        so every line any front answered 200 for the partition before these came was taken by the relay first.

        Args:
            lines: ``text`` events the front decoded and validated (:class:`core.events.TextEvent`), each with its
                text, of runs of this partition.
            epoch: the partition's epoch marker as this replica found it ('' unchecked).

        Returns:
            Per line, the relay's answer (as one process answers it); None when the lines were not taken here and
            must be appended to the input stream (nothing of them was taken): the partition is not ready, is being
            read, lost or stopping; a run is not active here (its ``run.start`` not read yet, or it ended: the stream
            path answers as the owner will); the script refused them (:class:`adapters.redis.NotDirectError`: the
            stream holds entries, a mark, the epoch; or :class:`adapters.redis.FencedError`); or a line was refused by
            admission without a journal append proving it knew every earlier line.

        Raises:
            core.errors.StoreUnavailableError: the journal append's outcome is unknown (the connection failed, or it
                was not replicated in time): nothing counts taken (503; the agent sends the lines again); the
                partition's runs are rebuilt from the journal before anything else is handed over (:meth:`_recover`).
        """
        if self._feeding or self._suspect or self.lost or self._stopping or not self.ready.is_set():
            return None
        relay = self.relay
        for obj, _ in lines:
            if relay.controller(obj.run) is None:
                return None
        task = asyncio.current_task()
        if task is None:
            return None
        direct = self.journal.direct[task] = _Direct(epoch)
        self._direct += 1
        self._no_direct.clear()
        try:
            results = await relay.submit_lines(lines)
        except (NotDirectError, FencedError):  # refused before any write: the stream's append takes them
            return None
        except BaseException:  # (cancelled too: admission then kept what the journal may not hold)
            if direct.sent and not direct.journaled:  # maybe journaled, while admission forgot them (or not)
                self._suspect = True
            raise
        finally:
            del self.journal.direct[task]
            self._direct -= 1
            if not self._direct:
                self._no_direct.set()
        if not direct.journaled and any(isinstance(result, IngestError) for result in results):
            return None  # (admission may not have had every earlier line: the owner answers them from the stream)
        return results

    async def close_idle(self, run: str, last_seq: int | None, *, ended: bool = False) -> None:
        """The commit point of closing ``run`` on the idle timeout (:meth:`core.records.journal.Journal.close_idle`):
        its idle-close mark in Redis (every front refuses its later lines from then on: 409, as one process does),
        then the entries appended before the mark handed over to the relay (lines its agent sent in the instant
        before, answered 200: the run takes them before it closes). With ``ended`` (those entries held the run's own
        ``end``): the mark says the run ended, and every front acknowledges and drops its later lines, as one process
        does for an ended run.

        Raises:
            core.errors.OwnershipLostError: another replica holds the partition now (nothing marked).
            core.errors.StoreUnavailableError: Redis did not answer (the run resumes from the journal).
        """
        newest = await self._stream.close_idle(
            self.partition, run, last_seq, token=self.token, ttl_s=RUN_MARK_TTL_S, ended=ended
        )
        if not newest or ended:
            return
        upto = _entry_id(newest)
        deadline = asyncio.get_running_loop().time() + CATCH_UP_S
        while self._handed < upto and not self._stopping:
            self._fed.clear()
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                _log.warning(
                    "partition %d: run %s closed before its reader handed over entries up to %s",
                    self.partition,
                    run,
                    newest,
                )
                return
            try:
                await asyncio.wait_for(self._fed.wait(), left)
            except TimeoutError:
                continue

    def _decode(self, entry: InputEntry) -> tuple[list[tuple[Any, str]], bool]:
        """The entry's lines decoded, each with its text; and whether one of them is a raw provider line (its run
        must be given as the batch's hint). A line that is not JSON is logged and left out (the front parsed it).
        An entry whose lines are all ``text`` events the front validated (:attr:`adapters.redis.InputEntry.text`) is
        validated in one call, as a JSON array (the same validator, the same values, without a Python call per
        line and without the checks the front made already: :func:`adapters.ingest_http.lines.decode_text`)."""
        if entry.text:
            texts = entry.lines()
            head = '{"run":' + json.dumps(entry.run) + ","
            try:
                events = _TEXT_EVENTS(("[" + ",".join(head + text[1:] for text in texts) + "]").encode())
            except ValidationError:
                _log.warning(
                    "partition %d: entry %s of run %s is not the text events its front said",
                    self.partition,
                    entry.id,
                    entry.run,
                )
            else:
                return list(zip(events, texts, strict=True)), False
        out: list[tuple[Any, str]] = []
        raw = False
        run_json: bytes | None = None
        for text in entry.lines():
            data = text.encode()
            if b'"kind"' in data:
                if run_json is None:
                    run_json = json.dumps(entry.run).encode()
                event = decode_text(data, run_json)  # the common line: decoded and validated in one step
                if event is not None:
                    out.append((event, text))
                    continue
            try:
                obj = json.loads(text)
            except ValueError:
                _log.error(
                    "partition %d: a line of entry %s of run %s is not JSON: dropped",
                    self.partition,
                    entry.id,
                    entry.run,
                )
                continue
            if isinstance(obj, dict) and "kind" in obj:
                obj.setdefault("run", entry.run)  # the front left it to the entry (its text is journaled as it is)
            else:
                raw = True
            out.append((obj, text))
        return out, raw

    async def drain(self, timeout_s: float) -> None:
        """Let the active runs finish for up to ``timeout_s`` seconds (input is still read: their lines come
        through it)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while self.relay.active_runs() and asyncio.get_running_loop().time() < deadline and not self.lost:
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        """Stop at once: reading, and every run (without finalizing: the next owner resumes them).

        The reader is asked to stop and given a blocking read's time to do so; it is cancelled only past that (again
        while it runs on: a cancellation Python 3.11's ``wait_for`` dropped inside redis-py is repeated,
        :func:`core.tasks.stop`), and not waited for beyond :data:`STOP_WAIT_S`."""
        self._stopping = True
        if self._resuming is not None and not self._resuming.done():
            await stop(self._resuming, limit_s=STOP_WAIT_S)
        task = self.task
        if task is not None and not task.done():
            await asyncio.wait({task}, timeout=2 * READ_BLOCK_MS / 1000)
            if not task.done() and not await stop(task, limit_s=STOP_WAIT_S):
                _log.error("partition %d: its reader did not stop within %g s", self.partition, STOP_WAIT_S)
        await self.relay.stop_runs()


def _entry_id(entry_id: str) -> tuple[int, int]:
    """A stream entry id (``"<ms>-<seq>"``) as a tuple that orders as Redis orders ids."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)
