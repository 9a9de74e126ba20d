"""The relay: the run registry between ingest and delivery.

Ingest (HTTP today, Redis later) hands it decoded JSON lines; the relay validates them, normalizes
provider-native lines, orders each run by ``seq`` and feeds one worker task per run. Runs never share a
queue, so a bad or slow run cannot hold up another. A bad line fails alone with an
:class:`~core.errors.IngestError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from core.channel import ChannelRuntime
from core.clock import Clock
from core.errors import IngestError
from core.events import End, EndStatus, Event, RunStart, parse_event
from core.gate import ActionCatalog, AmbiguousCallError, GateDecision, UnknownCallError, ask_gate
from core.ledger import Ledger
from core.monitor import RunMonitor
from core.normalize import Normalizer, make_normalizer
from core.pipeline import ArgsValidator, PipelineLane
from core.policy import apply_overrides
from core.report import DeliveryReport, summarize, with_gaps
from core.run import RunController
from core.sequencer import SeqGate, join_deltas

_log = logging.getLogger("streamrelay.relay")


BATCH = 256
"""At most this many queued events are taken at once by a run's worker."""


@dataclass(frozen=True)
class _Finished:
    """What stays in memory of a finished run: its report, pipeline lane, live events and last seq."""

    report: DeliveryReport
    lane: PipelineLane
    monitor: RunMonitor
    last_seq: int | None


@dataclass
class _Run:
    controller: RunController
    queue: asyncio.Queue[Event]
    gate: SeqGate
    normalizer: Normalizer | None
    task: asyncio.Task[None] | None = None


class Relay:
    """Routes events to runs and runs to channels.

    Args:
        channels: configured channels by name.
        ledger: the durable record shared by all runs.
        clock: the injected clock.
        queue_size: per-run queue bound (ingest waits when a run falls this far behind).
        keep_finished: how many finished runs' reports stay in memory (older ones come from the ledger).
        gap_timeout_s: how long a ``seq`` gap holds later events.
        run_idle_timeout_s: a run that receives nothing for this long is closed as failed, so no preview
            is left hanging and no run holds memory forever.
        max_active_runs: past this many active runs, a new ``run.start`` is refused with a 503.
        validator: checks complete tool calls against their tools' JSON Schemas (the action catalog's).
        catalog: the action catalog the gate decides with (empty: every tool waits for the commit point).
        live_buffer: how many of a run's latest live events are kept for watchers that reconnect.
    """

    def __init__(
        self,
        channels: Mapping[str, ChannelRuntime],
        ledger: Ledger,
        clock: Clock,
        *,
        queue_size: int = 10_000,
        keep_finished: int = 10_000,
        gap_timeout_s: float = 2.0,
        run_idle_timeout_s: float = 600.0,
        max_active_runs: int = 10_000,
        validator: ArgsValidator | None = None,
        catalog: ActionCatalog | None = None,
        live_buffer: int = 1000,
    ) -> None:
        self.channels = dict(channels)
        self._ledger = ledger
        self._clock = clock
        self._queue_size = queue_size
        self._keep = keep_finished
        self._gap_timeout_s = gap_timeout_s
        self._idle_s = run_idle_timeout_s
        self._max_active = max_active_runs
        self._validator = validator
        self.catalog = catalog if catalog is not None else ActionCatalog()
        self.live_buffer = live_buffer
        self._runs: dict[str, _Run] = {}
        self._finished: OrderedDict[str, _Finished] = OrderedDict()

    # --- ingest -----------------------------------------------------------------------------------------

    async def submit_line(self, obj: Any, run_hint: str | None = None) -> int:
        """Take one decoded NDJSON line; return how many normalized events it produced.

        A line with ``kind`` is a normalized event (``run`` defaults to ``run_hint``); a line with
        no ``kind`` is a raw provider event of a run that declared ``format`` in its ``run.start``.

        Raises:
            IngestError: the line is not a valid event, names another run, or belongs to no started run.
        """
        if not isinstance(obj, dict):
            raise IngestError(f"each line must be a JSON object, got {type(obj).__name__}")
        if run_hint is not None and obj.get("run", run_hint) != run_hint:
            raise IngestError(f"line names run {obj.get('run')!r} but was posted to run {run_hint!r}")
        run_id = obj.get("run", run_hint)
        if "kind" not in obj:
            return await self._submit_raw(run_id, obj)
        if run_hint is not None and "run" not in obj:
            obj = {**obj, "run": run_hint}
        await self.submit(parse_event(obj))
        return 1

    async def _submit_raw(self, run_id: Any, obj: dict[str, Any]) -> int:
        run = self._runs.get(run_id) if isinstance(run_id, str) else None
        if run is None or run.normalizer is None:
            raise IngestError(
                "line has no 'kind': a normalized event needs one (run.start, text, end, ...); raw provider "
                "events are taken only for a started run whose run.start declares 'format' (anthropic, "
                "openai-responses, openai-chat)",
                status=409 if run is None and "type" in obj else 400,
            )
        events = run.normalizer.feed(obj)
        for event in events:
            await self.submit(event)
        return len(events)

    async def submit(self, event: Event) -> None:
        """Queue one normalized event for its run (waits if the run's queue is full).

        Raises:
            IngestError: ``run.start`` names an unknown channel, a bad target or override, repeats a run
                with different settings, or names a run that already ended (409); too many runs are
                active (503); an event arrives for a run that has not started or already ended (409).
                A repeated ``seq`` of an ended run is dropped silently (a safe retry).
        """
        run = self._runs.get(event.run)
        finished = self._finished.get(event.run)
        seq, last_seq = event.seq, finished.last_seq if finished is not None else None
        if seq is not None and last_seq is not None and seq <= last_seq:
            return  # a retry of what was already taken
        if isinstance(event, RunStart):
            if run is not None:
                self._check_replayed_start(run.controller.start_event, event)
                return  # a replayed run.start
            if finished is not None:
                raise IngestError(f"run {event.run!r} already ended; start a new run id", status=409)
            await self._start(event)
            return
        if run is None:
            if finished is not None:
                raise IngestError(f"run {event.run!r} already ended; its events are no longer taken", status=409)
            raise IngestError(f"run {event.run!r} has not started: send its run.start event first", status=409)
        if isinstance(event, End) and run.normalizer is not None and event.source is None:
            for extra in run.normalizer.close():
                await run.queue.put(extra)
        await run.queue.put(event)

    @staticmethod
    def _check_replayed_start(first: RunStart, again: RunStart) -> None:
        fields = ("channel", "target", "mode", "format", "overrides")
        changed = [f for f in fields if getattr(first, f) != getattr(again, f)]
        if changed:
            raise IngestError(
                f"run {again.run!r} already started with another {', '.join(changed)}: a run keeps its "
                "run.start; use a new run id",
                status=409,
            )

    async def _start(self, event: RunStart) -> None:
        channel = self.channels.get(event.channel)
        if channel is None:
            known = ", ".join(sorted(self.channels)) or "none"
            raise IngestError(f"unknown channel {event.channel!r}: configured channels are {known}")
        if len(self._runs) >= self._max_active:
            raise IngestError(
                f"{len(self._runs)} runs are active, the most this sidecar takes: retry later", status=503
            )
        problem = channel.adapter.check_target(event.target)
        if problem is not None:
            raise IngestError(f"bad target for channel {event.channel!r}: {problem}")
        record = await self._ledger.get_run(event.run)
        if record is not None:
            if record.ended:
                raise IngestError(f"run {event.run!r} already ended; start a new run id", status=409)
            if record.channel != event.channel or record.target != event.target.model_dump(mode="json"):
                raise IngestError(
                    f"run {event.run!r} was started before on another channel or target; use a new run id",
                    status=409,
                )
        policy = apply_overrides(channel.policy, event.overrides)
        if event.mode is not None and event.mode is not policy.delivery:
            policy = replace(policy, delivery=event.mode)
        controller = RunController(
            event,
            policy,
            channel.adapter,
            channel.chain_for(event.target, self._clock),
            self._ledger,
            self._clock,
            validator=self._validator,
            chain_for=lambda target: channel.chain_for(target, self._clock),
            release=channel.release,
            monitor=RunMonitor(event.run, buffer=self.live_buffer),
        )
        normalizer = make_normalizer(event.format, event.run) if event.format is not None else None
        gate = SeqGate(self._gap_timeout_s, last=event.seq)
        run = _Run(controller, asyncio.Queue(self._queue_size), gate, normalizer)
        self._runs[event.run] = run
        await controller.open()
        run.task = asyncio.create_task(self._work(run), name=f"run:{event.run}")

    # --- the per-run worker -----------------------------------------------------------------------------

    async def _work(self, run: _Run) -> None:
        controller = run.controller
        last_event_at = self._clock.now()
        try:
            while True:
                idle_at = last_event_at + self._idle_s
                deadlines = [d for d in (controller.deadline(), run.gate.deadline(), idle_at) if d is not None]
                timeout = max(0.0, min(deadlines) - self._clock.now())
                batch = await self._next_events(run.queue, timeout)
                if batch:
                    last_event_at = self._clock.now()
                    ready = join_deltas([e for event in batch for e in run.gate.push(event, last_event_at)])
                elif self._clock.now() >= idle_at:
                    controller.errors.append(f"the agent sent nothing for {self._idle_s:g} s: run closed")
                    ready = [End(run=controller.run, status=EndStatus.ERROR)]
                else:
                    controller.tick()
                    ready = run.gate.expire(self._clock.now())
                for item in ready:
                    if isinstance(item, End) and item.source is None:
                        await controller.close(item)
                        return
                    controller.handle(item)
        except asyncio.CancelledError:
            await controller.abort()
            raise
        except Exception as exc:  # a bug in one run must not take others down
            _log.exception("run %s failed", controller.run)
            await self._fail_run(controller, f"internal error, delivery stopped: {type(exc).__name__}: {exc}")
        finally:
            self._runs.pop(controller.run, None)
            runtime = self.channels.get(controller.policy.name)
            if runtime is not None:
                runtime.release(controller.start_event.target)
            if not controller.lane.closed:  # cancelled (service shutdown): subscribers are not left waiting
                controller.lane.close("cancelled", committed=controller.committed is not None)
            report = with_gaps(controller.report(), run.gate.gaps)
            if not controller.monitor.closed:
                controller.monitor.publish("end", status="cancelled", delivery=str(report.status))
            self._finished[controller.run] = _Finished(report, controller.lane, controller.monitor, run.gate.last)
            while len(self._finished) > self._keep:
                self._finished.popitem(last=False)

    async def _fail_run(self, controller: RunController, reason: str) -> None:
        """A bug stopped the run: show the person a failure if finalizing still works, else just stop. The
        reason goes to the report, not to the person (it is about the sidecar, not their answer)."""
        if not controller.done:
            try:
                await asyncio.wait_for(controller.close(End(run=controller.run, status=EndStatus.ERROR)), 30)
                controller.errors.append(reason)
                return
            except Exception:
                _log.exception("run %s could not show its failure", controller.run)
        with contextlib.suppress(Exception):
            await controller.abort()
        controller.fail(reason)

    async def _next_events(self, queue: asyncio.Queue[Event], timeout_s: float) -> list[Event]:
        """The events waiting in ``queue`` (at most :data:`BATCH`), waiting up to ``timeout_s`` on the
        injected clock for the first one; [] when the time ran out."""
        if queue.empty():
            getter = asyncio.ensure_future(queue.get())
            sleeper = asyncio.ensure_future(self._clock.sleep(timeout_s))
            try:
                await asyncio.wait((getter, sleeper), return_when=asyncio.FIRST_COMPLETED)
            finally:
                getter.cancel()
                sleeper.cancel()
                await asyncio.wait((getter, sleeper))
            if getter.cancelled():
                return []
            batch = [getter.result()]
        else:
            batch = [queue.get_nowait()]
        while len(batch) < BATCH and not queue.empty():
            batch.append(queue.get_nowait())
        return batch

    # --- reading ----------------------------------------------------------------------------------------

    def controller(self, run_id: str) -> RunController | None:
        """The controller of an active run (None once it finished)."""
        run = self._runs.get(run_id)
        return run.controller if run is not None else None

    def pipeline(self, run_id: str) -> list[dict[str, Any]] | None:
        """The run's pipeline units so far (None for an unknown run)."""
        lane = self.lane(run_id)
        return list(lane.units) if lane is not None else None

    def monitor(self, run_id: str) -> RunMonitor | None:
        """The run's live progress, active or finished (None for a run unknown to this process)."""
        run = self._runs.get(run_id)
        if run is not None:
            return run.controller.monitor
        finished = self._finished.get(run_id)
        return finished.monitor if finished is not None else None

    def lane(self, run_id: str) -> PipelineLane | None:
        """The run's pipeline lane, active or finished (None for a run unknown to this process)."""
        run = self._runs.get(run_id)
        if run is not None:
            return run.controller.lane
        finished = self._finished.get(run_id)
        return finished.lane if finished is not None else None

    async def gate(
        self, run_id: str, call_id: str, *, source_key: str | None = None, wait_s: float = 0.0
    ) -> tuple[GateDecision, dict[str, Any]]:
        """May tool call ``call_id`` of run ``run_id`` run now? The decision and the call's pipeline unit
        (:mod:`core.gate` has the policy).

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
        if (monitor := self.monitor(run_id)) is not None:
            fields = {"call_id": call_id, "name": unit.get("name"), "verdict": str(decision.verdict)}
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
        record = await self._ledger.get_run(run_id)
        if record is None:
            return None
        parts = [p.report() for p in await self._ledger.parts(run_id)]
        report = summarize(run_id, record.channel, parts, done=record.ended)
        report.end_status = record.end_status
        return report

    async def wait_done(self, run_id: str, timeout_s: float) -> DeliveryReport | None:
        """Wait until the run is finalized (or the timeout passes); return its report."""
        run = self._runs.get(run_id)
        if run is not None and run.task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(run.task), timeout_s)
        return await self.report(run_id)

    def active_runs(self) -> list[str]:
        return list(self._runs)

    async def close(self) -> None:
        """Stop every run worker (unfinished runs stay in the ledger) and close adapters."""
        for run in list(self._runs.values()):
            if run.task is not None:
                run.task.cancel()
        for run in list(self._runs.values()):
            if run.task is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await run.task
        for channel in self.channels.values():
            await channel.adapter.close()
