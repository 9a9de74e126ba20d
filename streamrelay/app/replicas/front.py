"""What the HTTP app sees of a replica: lines go to their run's partition, reads go to the run's local relay.

Lines are checked here as far as they can be without the run (a JSON object, a valid event, a known channel and
a target the channel takes), then appended to the input stream of the run's partition: a ``run.start`` picks the
partition from its conversation (channel and chat) and records it in the run index; every later line of the run
follows it there (a run's ``text`` lines at a replica that owns its partition go to the owner's relay directly,
journaled without the stream while it holds no entry: :meth:`app.replicas.owner.PartitionOwner.submit_direct`). The
answer counts a line ``accepted`` once it is durable in Redis; the partition's owner drops repeats and lines after
the run's end (its journal knows them), as one process does. A run its reader stopped is
marked in Redis before its owner takes the stop (:meth:`ReplicaFront.stop`); the append checks the mark atomically,
so every front answers the run's later lines 409 :data:`core.run.stop.STOPPED_ERROR`, as one sidecar does (a front
remembers the runs it saw stopped: a stop is final, so their lines are refused without asking Redis again).

Reads (report, monitor, pipeline lane, gate) of a run are answered by the relay of the run's partition on this
replica; :class:`adapters.ingest_http.owner_proxy.OwnerProxy` forwards them here from the other replicas.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from streamrelay.adapters.redis import (
    ClosedRun,
    DataLostError,
    Epochs,
    InputStream,
    RunIndex,
    conversation_key,
    partition_of,
)
from streamrelay.adapters.redis.client_limits import SharedClientLimits
from streamrelay.app.replicas.peers import ReplicaPeers
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.contracts.answers import RunListing
from streamrelay.core.contracts.units import PipelineUnit
from streamrelay.core.errors import IngestError
from streamrelay.core.events import RunStart, TextEvent, event_line, parse_event
from streamrelay.core.ingest.admission import ONE_EVENT, LineResult, ended_note
from streamrelay.core.ingest.clients import ClientBook, run_key, split_key
from streamrelay.core.lanes.gate import GateDecision
from streamrelay.core.lanes.pipeline import PipelineLane
from streamrelay.core.ports import DraftStopControls
from streamrelay.core.records.journal import JournalEntry
from streamrelay.core.records.report import DeliveryReport
from streamrelay.core.run.audit import AuditError, AuditReport
from streamrelay.core.run.audit_sampler import AuditSampler
from streamrelay.core.run.controller import idle_refusal
from streamrelay.core.run.monitor import Watched
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.stop import STOPPED_ERROR, StopState
from streamrelay.core.run.stop_controls import is_short_id, short_id
from streamrelay.core.run.timeline import Timeline

UNREAD_POLL_S = 0.1
"""How often a report request waiting for a run its owner has not read yet asks again."""
ALLOWANCE_S = 0.1
"""A replica reserves this many seconds of a client's ``events_per_s`` ahead with each batch's pace (its later batches
spend them without a round trip while they last, at most this long): a client's pace is kept across replicas to
within this much of it, always on the slow side (what a replica reserved and did not spend is lost)."""
OWED_MAX = 100_000
"""At most this many events a front keeps reserved per client for lines whose append failed (:meth:`ReplicaFront._gate`
spends them first when the lines come again)."""
STOPPED_CACHE = 100_000
"""Stopped runs a front remembers (their lines are refused without a Redis round trip)."""


class DirectOwner(Protocol):
    """A partition's owner on this replica, as the front hands it a request's lines
    (:class:`app.replicas.owner.PartitionOwner`)."""

    async def submit_direct(
        self, lines: Sequence[tuple[Any, str | None]], epoch: str
    ) -> list[LineResult | IngestError] | None:
        """The lines' answers, or None: append them to the input stream."""
        ...


def control_key(key: str) -> str:
    """The key a Stop control's id makes of run ``key`` (what a bot's forwarded click names):
    ``client/<16 hex>`` (:func:`core.run.stop_controls.short_id`)."""
    return run_key(split_key(key)[0], short_id(key))


class ReplicaFront:
    """The relay surface of a replica (what :func:`adapters.ingest_http.create_app` and the web routes call).

    Args:
        channels: the configured channels (shared with the partitions' relays).
        stream: the partitions' input streams.
        index: run → partition.
        partitions: P.
        local: the relay of a partition this replica owns and runs now, or None.
    """

    def __init__(
        self,
        channels: Mapping[str, ChannelRuntime],
        stream: InputStream,
        index: RunIndex,
        partitions: int,
        local: Callable[[int], Relay | None],
    ) -> None:
        self.channels = dict(channels)
        self._stream = stream
        self._index = index
        self._partitions = partitions
        self._local = local
        self._relays: Callable[[], list[Relay]] = lambda: []
        self._stopped: OrderedDict[str, None] = OrderedDict()
        self.book = ClientBook()
        self._allowance: dict[str, tuple[int, float]] = {}  # client -> (events reserved ahead, until: loop time)
        self._owed: dict[str, int] = {}  # client -> events reserved for lines whose append failed (sent again)
        self.audits: AuditSampler | None = None
        """The replica's sampled background audit (:mod:`core.run.audit_sampler`): a run's report, answered here by
        its owner, shows its last audit; None when ``audit_sample`` is 0."""

    def __repr__(self) -> str:
        return f"ReplicaFront(partitions={self._partitions}, channels={sorted(self.channels)})"

    def follow(self, relays: Callable[[], list[Relay]]) -> None:
        """Where the relays of the owned partitions are (for :meth:`active_runs`)."""
        self._relays = relays

    # --- ingest -----------------------------------------------------------------------------------------

    takes_typed = True
    """The app may hand a ``text`` line over decoded and validated in one step (a :class:`core.events.TextEvent`
    with its text: :func:`adapters.ingest_http.lines.decode_text`), as to one process's relay: it is forwarded as
    the bytes it came as, never dumped again."""

    async def submit_lines(
        self, lines: Sequence[tuple[Any, str | None]], run_hint: str | None = None
    ) -> list[LineResult | IngestError]:
        """Route a batch of decoded lines to their runs' partitions (module docstring): each run's lines of the batch
        become one entry of its partition's stream holding their text as it came (joined by ``"\\n"``), and every
        partition's entries are appended in one script (one Redis round trip per partition in the batch).

        Returns:
            Per line: ``LineResult(events=1)`` once it is in its partition's stream, or the :class:`IngestError`
            that refused it (not an event, another run than the URL's, an unknown channel or target, a run that
            has not started, 429 a run start past the client's ``max_active_runs`` on every replica together).
            With :attr:`limits`, the batch first waits its client's pace (``events_per_s`` over every replica).

        Raises:
            adapters.redis.DataLostError: Redis lost its data (:mod:`adapters.redis.epoch`): nothing of the batch is
                accepted (the app answers 503 with the reason).
            redis.exceptions.RedisError: Redis failed: nothing of the batch is accepted (the app answers 503).
        """
        results: list[LineResult | IngestError] = []
        counted, refused = await self._gate(lines, run_hint) if self.limits is not None else (set(), set())
        try:
            await self._append(await self._route_all(lines, run_hint, counted, refused, results), results)
        except BaseException:
            if self.limits is not None:  # nothing of the batch counts taken (503): its pace is kept for it
                self._give_back(lines, run_hint)
            raise
        return results

    async def _route_all(
        self,
        lines: Sequence[tuple[Any, str | None]],
        run_hint: str | None,
        counted: set[str],
        refused: set[str],
        results: list[LineResult | IngestError],
    ) -> dict[int, dict[str, list[tuple[int, str, TextEvent | None]]]]:
        """Each line's result appended to ``results`` (ONE_EVENT, or why it is refused) and the lines taken, by
        partition and run (:meth:`submit_lines`): partition -> run -> [(its index in ``results``, its text, the
        ``text`` event the app decoded and validated from that text (:attr:`takes_typed`), else None)]."""
        batches: dict[int, dict[str, list[tuple[int, str, TextEvent | None]]]] = {}
        known = self._index.known
        failed_starts: list[str] = []
        for obj, raw in lines:
            if refused and (full := self._refused_start(obj, run_hint, refused)) is not None:
                results.append(full)
                continue
            if type(obj) is TextEvent and raw is not None:  # the common line: validated, its run the URL's
                run = obj.run
                partition = known(run)
                if partition is not None and run not in self._stopped:
                    batches.setdefault(partition, {}).setdefault(run, []).append((len(results), raw, obj))
                    results.append(ONE_EVENT)
                    continue
            try:
                partition, run, text = await self._route(obj, raw, run_hint)
            except IngestError as exc:
                results.append(exc)
                if counted and type(obj) is dict and obj.get("run", run_hint) in counted:
                    failed_starts.append(str(obj.get("run", run_hint)))  # counted, yet it never starts
                continue
            typed = obj if type(obj) is TextEvent and text is raw else None  # decoded and validated by the app
            batches.setdefault(partition, {}).setdefault(run, []).append((len(results), text, typed))
            results.append(ONE_EVENT)
        if failed_starts and self.limits is not None:
            for run in failed_starts:
                await self.limits.left(run)
        return batches

    async def _append(
        self,
        batches: dict[int, dict[str, list[tuple[int, str, TextEvent | None]]]],
        results: list[LineResult | IngestError],
    ) -> None:
        """Append each partition's entries (one per run: its lines' texts joined) in one script each; the lines of a
        run found stopped become 409 in ``results``. A partition this replica owns takes a batch of ``text`` events
        directly, without the input stream, when it can (:meth:`app.replicas.owner.PartitionOwner.submit_direct`):
        its answers are the owner's."""
        for partition, runs in batches.items():
            epoch = "" if self.epochs is None else self.epochs.of(partition)
            owner = None if self.direct is None else self.direct(partition)
            if owner is not None and all(event is not None for taken in runs.values() for _, _, event in taken):
                lines = [(event, line) for taken in runs.values() for _, line, event in taken]
                answers = await owner.submit_direct(lines, epoch)
                if answers is not None:
                    ats = [at for taken in runs.values() for at, _, _ in taken]
                    for at, answer in zip(ats, answers, strict=True):
                        results[at] = answer
                    continue
            entries = [JournalEntry(run, "\n".join(line for _, line, _ in taken)) for run, taken in runs.items()]
            typed = [all(text is not None for _, _, text in taken) for taken in runs.values()]
            ids = await self._stream.append_open(partition, entries, epoch=epoch, text=typed)
            for (run, taken), stream_id in zip(runs.items(), ids, strict=True):
                if stream_id is None:  # its run's stop mark is there: refused, never appended
                    self._remember_stopped(run)
                    for at, _, _ in taken:
                        results[at] = IngestError(STOPPED_ERROR, status=409)
                elif isinstance(stream_id, ClosedRun) and stream_id.ended:  # it took its end: an ended run
                    for at, _, _ in taken:
                        results[at] = LineResult(dropped=ended_note(run))
                elif isinstance(stream_id, ClosedRun):  # the idle timeout closed it: as one process answers
                    for at, line, _ in taken:
                        results[at] = _after_idle_close(run, line, stream_id.last_seq)

    def _refused_start(self, obj: Any, run_hint: str | None, refused: set[str]) -> IngestError | None:
        """The 429 of a ``run.start`` line whose run the client's ``max_active_runs`` refused (:meth:`_gate`)."""
        if type(obj) is not dict or obj.get("kind") != "run.start" or obj.get("run", run_hint) not in refused:
            return None
        limits = self.book.limits_for(str(obj.get("run", run_hint)))
        return IngestError(
            "your runs active on every replica are the most you may have "
            f"({limits.setting('max_active_runs')} = {limits.max_active_runs}): end one or retry later",
            status=429,
            retry_after_s=1.0,
        )

    limits: SharedClientLimits | None = None
    """A client's limits counted over every replica (:mod:`adapters.redis.client_limits`); None: counted by each
    partition's relay alone (tests)."""
    book: ClientBook
    """Each client's limits (the replica's book; by default every client's default limits)."""
    paces_clients = True
    """Each client's ``events_per_s`` is paced here, through Redis (:meth:`_gate`), not by the HTTP edge."""

    async def _gate(self, lines: Sequence[tuple[Any, str | None]], run_hint: str | None) -> tuple[set[str], set[str]]:
        """Pace the batch's lines on their client's ``events_per_s`` and count the runs it starts against its
        ``max_active_runs``, across replicas, in one Redis script per client (normally one: a request is one
        client's); waits the pace. A batch that starts no run and fits in what this replica reserved ahead for the
        client (:data:`ALLOWANCE_S`) takes no round trip. Returns the runs counted and the runs refused (429).

        Raises:
            redis.exceptions.RedisError: Redis failed: nothing of the batch is taken (503).
        """
        assert self.limits is not None
        per_client = self._per_client(lines, run_hint)
        counted: set[str] = set()
        refused: set[str] = set()
        wait_s = 0.0
        now = asyncio.get_running_loop().time()
        for key, events, new_runs in per_client.values():
            limits = self.book.limits_for(key)
            owed = self._owed.pop(limits.name, 0)  # reserved for lines not taken then (their append failed)
            if owed > events[0]:
                self._owed[limits.name] = owed - events[0]
            events[0] = max(0, events[0] - owed)
            left, until = self._allowance.get(limits.name, (0, 0.0))
            if not new_runs and events[0] <= left and now < until:  # reserved by this replica a moment ago
                self._allowance[limits.name] = (left - events[0], until)
                continue
            if not new_runs and events[0] == 0:  # every line reserved already, when first sent
                continue
            spare = int(max(1.0, limits.events_per_s) * ALLOWANCE_S)  # reserved ahead: fewer round trips
            wait, no = await self.limits.gate(limits, events[0] + spare, new_runs)
            self._allowance[limits.name] = (spare, now + wait + ALLOWANCE_S)
            wait_s = max(wait_s, wait)
            refused.update(no)
            counted.update(run for run in new_runs if run not in no)
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        return counted, refused

    def _per_client(
        self, lines: Sequence[tuple[Any, str | None]], run_hint: str | None
    ) -> dict[str, tuple[str, list[int], list[str]]]:
        """A batch's lines by client: client -> (one of its run keys, [its lines], the runs its ``run.start`` lines
        start that this replica does not know yet)."""
        per_client: dict[str, tuple[str, list[int], list[str]]] = {}
        for obj, _ in lines:
            if type(obj) is TextEvent:
                run: object = obj.run
            elif type(obj) is dict:
                run = obj.get("run", run_hint)
            else:
                run = run_hint
            if not isinstance(run, str):
                continue
            name = split_key(run)[0]
            found = per_client.get(name)
            if found is None:
                found = per_client[name] = (run, [0], [])
            found[1][0] += 1
            if type(obj) is dict and obj.get("kind") == "run.start" and self._index.known(run) is None:
                found[2].append(run)
        return per_client

    def _give_back(self, lines: Sequence[tuple[Any, str | None]], run_hint: str | None) -> None:
        """A batch whose append failed (503: nothing of it counts taken) keeps what its pace reserved in Redis for the
        same lines sent again to this replica (:attr:`_owed`), instead of reserving it a second time."""
        if self.limits is None:
            return
        for key, events, _ in self._per_client(lines, run_hint).values():
            name = self.book.limits_for(key).name
            self._owed[name] = min(self._owed.get(name, 0) + events[0], OWED_MAX)

    def _remember_stopped(self, run: str) -> None:
        self._stopped[run] = None
        self._stopped.move_to_end(run)
        while len(self._stopped) > STOPPED_CACHE:
            self._stopped.popitem(last=False)

    async def _route(self, obj: Any, raw: str | None, run_hint: str | None) -> tuple[int, str, str]:
        """A line's partition, run and text: the text it came as when the app kept it (its run named as the key, or
        left to the URL), else its JSON dump with its run.

        Raises:
            IngestError: the line is refused (the reasons :meth:`submit_lines` gives).
        """
        if isinstance(obj, TextEvent):  # validated by the app, its run not known here yet
            if obj.run in self._stopped:
                raise IngestError(STOPPED_ERROR, status=409)
            return await self._started(obj.run), obj.run, raw if raw is not None else event_line(obj)
        if not isinstance(obj, dict):
            raise IngestError(f"each line must be a JSON object, got {type(obj).__name__}")
        if run_hint is not None and obj.get("run", run_hint) != run_hint:
            raise IngestError(f"line names run {obj.get('run')!r} but was posted to run {run_hint!r}")
        run = obj.get("run", run_hint)
        if not isinstance(run, str) or not run:
            raise IngestError("line has no 'run': post it to /v1/runs/{run}/events or give 'run'")
        if run in self._stopped:
            raise IngestError(STOPPED_ERROR, status=409)
        if "kind" not in obj:  # a raw provider event: its run's normalizer reads it on the owner
            partition = await self._started(run)
            return partition, run, raw if raw is not None else json.dumps(obj)
        event = parse_event({**obj, "run": run})  # validated here: a bad line is answered 4xx to its agent
        if isinstance(event, RunStart):
            partition = await self._start(event)
        else:
            partition = await self._started(run)
        # Its text as it came (the owner reads its run from the entry), re-encoded only when the app rewrote it.
        return partition, run, raw if raw is not None else json.dumps({**obj, "run": run}, ensure_ascii=False)

    async def _start(self, event: RunStart) -> int:
        """The partition of a new run: its first place's conversation's (a fan-out run's other places are delivered
        by the same owner), every place's channel and target checked first."""
        for place in event.places():
            channel = self.channels.get(place.channel)
            if channel is None:
                known = ", ".join(sorted(self.channels)) or "none"
                raise IngestError(f"unknown channel {place.channel!r}: configured channels are {known}")
            problem = channel.adapter.check_target(place.target)
            if problem is not None:
                raise IngestError(f"bad target for channel {place.channel!r}: {problem}")
        partition = partition_of(conversation_key(event.channel, event.target.chat_id), self._partitions)
        if await self._index.claim(event.run, partition, control_key(event.run)) != partition:
            raise IngestError(
                f"run {event.run!r} already started for another conversation: a run keeps its run.start; use a new "
                "run id",
                status=409,
            )
        return partition

    async def _started(self, run: str) -> int:
        partition = await self._index.partition(run)
        if partition is None:
            if self.epochs is not None:
                await self.epochs.check()  # DataLostError: the batch is refused (503), never answered 409 or 200
            raise IngestError(f"run {run!r} has not started: send its run.start event first", status=409)
        return partition

    direct: Callable[[int], DirectOwner | None] | None = None
    """The owner of a partition this replica owns and has resumed, which takes a request's lines directly
    (:class:`app.replicas.service.ReplicaService` sets it); None: every line goes through the input stream."""

    epochs: Epochs | None = None
    """The epoch markers found at start-up (:class:`app.replicas.service.ReplicaService` sets them), checked by every
    append and before a run is called unknown; None: not checked."""

    async def _check_epochs(self) -> None:
        """Before a run is called unknown (404, 409 "has not started"): is it unknown because Redis lost its data?

        Raises:
            IngestError: 503 with :class:`adapters.redis.DataLostError`'s message.
        """
        if self.epochs is None:
            return
        try:
            await self.epochs.check()
        except DataLostError as exc:
            raise IngestError(str(exc), status=503) from None

    # --- reading (the run's owner: forwarded here by the owner proxy) -----------------------------------

    async def _relay(self, run: str) -> Relay | None:
        """The local relay of ``run``'s partition; None for a run nobody started (404).

        Raises:
            IngestError: 503: the run exists but its partition is not (or no longer) this replica's: the owner
                proxy sent the request here just as the partition moved; the client asks again.
        """
        partition = await self._index.partition(run)
        if partition is None:
            return None
        relay = self._local(partition)
        if relay is None:
            await self._check_epochs()  # the partition lost its owner because Redis lost its data: say so
            raise IngestError(f"run {run!r}: its partition is moving between replicas: retry in a moment", status=503)
        return relay

    async def report(self, run_id: str) -> DeliveryReport | None:
        relay = await self._relay(run_id)
        report = None if relay is None else await relay.report(run_id)
        if report is None:
            await self._check_epochs()  # unknown because Redis lost its data: 503, never 404
        return report

    async def wait_done(self, run_id: str, timeout_s: float) -> DeliveryReport | None:
        """The run's report once it is done or ``timeout_s`` passed. A run whose ``run.start`` was taken (it is in
        the run index) but whose lines its owner has not read from the partition's stream yet (a busy partition, a
        new owner) is not known to the relay: it is waited for too, rather than answered as unknown (None: 404).

        Raises:
            IngestError: 503 when the run's partition is not (or no longer) this replica's: its runs stopped here and
                go on at the next owner; the client (or the owner proxy in front) asks again.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            relay = await self._relay(run_id)  # 503 once the partition is another replica's
            if relay is None:
                await self._check_epochs()
                return None
            report = await relay.report(run_id)
            if report is not None:
                report = await relay.wait_done(run_id, max(0.0, deadline - loop.time()))
                if report is not None and report.done:
                    return report
            # Not read here yet, or the wait ended early with the run unfinished or gone from this relay: its
            # partition was handed over meanwhile (the next _relay answers 503), or taken back here and not read
            # again yet. Before, a run gone from the relay that way was answered 404 "unknown run" though it was
            # delivered (chaos-3-00172; test_replicas_any under load).
            left = deadline - loop.time()
            if left <= 0:
                if report is None:
                    await self._check_epochs()  # unknown because Redis lost its data: 503, never 404
                return report
            await asyncio.sleep(min(UNREAD_POLL_S, left))

    def _cached(self, run_id: str) -> Relay | None:
        """The local relay of a run whose partition is known without asking Redis (sync reads)."""
        for relay in self._relays():
            if relay.monitor(run_id) is not None:
                return relay
        return None

    def monitor(self, run_id: str) -> Watched | None:
        relay = self._cached(run_id)
        return None if relay is None else relay.monitor(run_id)

    def timeline(self, run_id: str) -> Timeline | None:
        """``run_id``'s delivery timeline (:meth:`core.run.relay.Relay.timeline`) from the relay of this replica that
        delivers (or delivered) it; None: not here (the owner proxy forwards the request to the run's owner)."""
        for relay in self._relays():
            found = relay.timeline(run_id)
            if found is not None:
                return found
        return None

    async def after_end(self, run_id: str, last_id: int, timeout_s: float) -> Watched | None:
        """As :meth:`core.run.relay.Relay.after_end`, on the relay of this replica that kept the finished run."""
        relay = self._cached(run_id)
        return None if relay is None else await relay.after_end(run_id, last_id, timeout_s)

    def lane(self, run_id: str) -> PipelineLane | None:
        relay = self._cached(run_id)
        return None if relay is None else relay.lane(run_id)

    async def gate(
        self, run_id: str, call_id: str, *, source_key: str | None = None, wait_s: float = 0.0
    ) -> tuple[GateDecision, PipelineUnit | None]:
        relay = await self._relay(run_id)
        if relay is None:
            raise IngestError(f"unknown run {run_id!r}", status=404)
        return await relay.gate(run_id, call_id, source_key=source_key, wait_s=wait_s)

    async def decide_approval(self, run_id: str, approval: str, decision: str, by: str | None) -> dict[str, Any]:
        """Decide an approval on the run's partition's relay (:meth:`core.run.relay.Relay.decide_approval`), found
        as :meth:`stop` finds a run (its key or its buttons' ``client/<16 hex>``).

        Raises:
            IngestError: 404 unknown run or approval here; as the relay's otherwise.
        """
        key = await self.locate(run_id)
        relay = await self._relay(key)
        if relay is None:
            raise IngestError(f"unknown run {run_id!r}", status=404)
        return await relay.decide_approval(key, approval, decision, by)

    async def erase(self, run_id: str) -> dict[str, int]:
        """Erase an ended run's text (docs/retention.md) on its partition's relay here
        (:meth:`core.run.relay.Relay.erase`): what the relay keeps in memory of the finished run, the partition's
        journal (its lines, its dead letters) and ledger (parts, desk entries, corrections) through the stores this
        owner holds with its grant. The owner proxy forwards ``DELETE /v1/runs/{run}`` here from any replica.

        Raises:
            IngestError: 404 unknown run; 409 still active; 503 its partition is moving between replicas.
        """
        relay = await self._relay(run_id)
        if relay is None:
            raise IngestError(f"unknown run {run_id!r}", status=404)
        return await relay.erase(run_id)

    async def audit(self, run_id: str) -> AuditReport:
        """What the platform shows now of the run's delivered messages, read by its partition's relay here
        (:meth:`core.run.relay.Relay.audit`, docs/audit.md); the owner proxy forwards ``GET /v1/runs/{run}/audit``
        here from any replica.

        Raises:
            AuditError: unknown run (404).
            IngestError: 503 its partition is moving between replicas.
        """
        relay = await self._relay(run_id)
        if relay is None:
            raise AuditError(f"unknown run {run_id!r}")
        return await relay.audit(run_id)

    def conversation_partition(self, channel: str, chat_id: str) -> int:
        """The partition of conversation ``chat_id`` on ``channel`` (where its runs' ``run.start`` placed them)."""
        return partition_of(conversation_key(channel, chat_id), self._partitions)

    async def erase_conversation(self, channel: str, chat_id: str, owns: Callable[[str], bool]) -> dict[str, Any]:
        """Erase every run of the caller (``owns``) to ``chat_id`` on ``channel`` (:meth:`core.run.relay.Relay.
        erase_conversation`) on the relay of the conversation's partition here: the owner proxy forwards
        ``DELETE /v1/conversations/{channel}/{chat_id}`` to its owner. A fan-out run whose first place is another chat
        lives in that chat's partition and is not found: erase it by its id.

        Raises:
            IngestError: 409 one of the runs is active (nothing erased); 503 the partition is moving between replicas.
        """
        relay = self._local(self.conversation_partition(channel, chat_id))
        if relay is None:
            await self._check_epochs()
            raise IngestError(
                f"conversation {chat_id!r} on {channel!r}: its partition is moving between replicas: retry in a moment",
                status=503,
            )
        return await relay.erase_conversation(channel, chat_id, owns)

    def approval(self, run_id: str, approval: str) -> dict[str, Any]:
        """An open run's approval, where this replica delivers the run (:meth:`core.run.relay.Relay.approval`)."""
        relay = self._cached(run_id)
        if relay is None:
            raise IngestError(f"unknown run {run_id!r}", status=404)
        return relay.approval(run_id, approval)

    async def stop(self, run_id: str, by: str | None = None, reason: str | None = None) -> StopState:
        """Stop the run on its partition's relay (:meth:`core.run.relay.Relay.stop`; the owner proxy sends it here).
        ``run_id`` is the run's key or a Stop control's key (``client/<16 hex>``, found in the run index by any
        replica: :meth:`locate`). The run is marked stopped in Redis first, so no front takes its lines from here
        on; the mark is taken back when the relay does not take the stop (404, 409, 503: the run goes on or ended
        otherwise). A Telegram draft's id (``draft:<chat>:<draft>``) is looked for among this replica's runs only.

        Raises:
            IngestError: 404 unknown run, 409 it ended otherwise, 503 its partition is moving (retry).
        """
        key = await self.locate(run_id)
        partition = await self._index.partition(key)
        relay = await self._relay(key)
        if relay is not None and partition is not None:
            marked = await self._index.mark_stopped(key, partition)
            try:
                return await relay.stop(key, by, reason)
            except BaseException:
                if marked:
                    await self._index.unmark_stopped(key, partition)
                raise
        for local in self._relays():  # a Telegram draft's id (draft_partition sent it to this replica)
            try:
                state = await local.stop(run_id, by, reason)
            except IngestError as exc:
                if exc.status != 404:
                    raise
                continue
            if (stopped := await self._index.partition(state.run)) is not None:
                await self._index.mark_stopped(state.run, stopped)  # after: the relay refuses lines meanwhile
            return state
        raise IngestError(f"unknown run {run_id!r}", status=404)

    def draft_partition(self, key: str) -> int | None:
        """The partition of a Telegram draft's stop key (``client/draft:<chat>:<draft>``,
        :func:`core.run.stop_controls.draft_control_id`): its chat's conversation on the channel whose adapter streams
        drafts (None: not a draft's key, or several such channels place the chat in different partitions)."""
        kind, _, rest = split_key(key)[1].partition(":")
        chat = rest.rpartition(":")[0]
        if kind != "draft" or not chat:
            return None
        found = {
            partition_of(conversation_key(name, chat), self._partitions)
            for name, channel in self.channels.items()
            if isinstance(channel.adapter, DraftStopControls)
        }
        return found.pop() if len(found) == 1 else None

    async def locate(self, key: str) -> str:
        """The run key ``key`` names: itself when it is in the run index, else the run a Stop control's key names
        (:func:`control_key`, recorded at the run's ``run.start``), else ``key`` unchanged."""
        if await self._index.partition(key) is not None or not is_short_id(split_key(key)[1]):
            return key
        found = await self._index.run_of_control(key)
        return key if found is None else found

    def active_runs(self) -> list[str]:
        return [run for relay in self._relays() for run in relay.active_runs()]

    peers: ReplicaPeers | None = None
    """The other replicas (:class:`app.replicas.service.ReplicaService` sets it), asked by :meth:`runs`."""

    async def runs(self, *, everywhere: bool = False, bearer: str = "") -> RunListing:
        """The active runs of this replica's partitions (:meth:`core.run.monitor.RunMonitor.row`), each with
        ``replica`` (this replica's id); with ``everywhere``, every other live replica's too, asked with ``bearer``
        (the caller's ``Authorization``), and those that could not be asked (``unreachable``)."""
        me = {} if self.peers is None else {"replica": self.peers.me}
        rows = [row.model_copy(update=me) for relay in self._relays() for row in (await relay.runs()).runs]
        if not everywhere or self.peers is None:
            return RunListing(runs=rows)
        others, unreachable = await self.peers.runs(bearer)
        seen = {row.run for row in rows}  # a run handed over a moment ago: this replica's row wins
        return RunListing(runs=rows + [row for row in others if row.run not in seen], unreachable=unreachable)


def _after_idle_close(run: str, line: str, last_seq: int | None) -> LineResult | IngestError:
    """What a line of ``run`` gets once the idle timeout closed the run (its owner's mark: ``last_seq`` the last
    ``seq`` it took): a repeat of a line it took (its ``seq`` at most ``last_seq``) is acknowledged and dropped; any
    other is refused with 409, so its agent learns its answer was cut where the run stood (as
    :meth:`core.ingest.admission.Admission` answers on one process). Only lines of closed runs come here: the line
    is parsed again for its ``seq``."""
    try:
        seq = json.loads(line).get("seq")
    except (ValueError, AttributeError):
        seq = None
    if isinstance(seq, int) and last_seq is not None and seq <= last_seq:
        return LineResult(dropped=ended_note(run))
    return IngestError(idle_refusal(run), status=409)
