"""One run delivered to several places: a fan-out ``run.start`` (its ``targets``) and the controller of such a run.

    journal ─▶ one run (admission, seq gate, inbox, worker) ─▶ FanoutController
                                                                 ├▶ RunController (place 1: run id r)    ─▶ chat A
                                                                 ├▶ RunController (place 2: ledger r/to:1) ─▶ chat B
                                                                 └▶ RunController (place 3: ledger r/to:2) ─▶ chat C

A run has one journal, one ``seq`` order, one pipeline lane, one live monitor and one approval book; every place
has its own stage (its channel's chunk sizes, delivery mode and unit of length differ, so what each shows is cut for
it), its own delivery machine, executor and send chain (its channel's rate budget and 429 pauses), and its own
ledger records (the first place's under the run's id, place ``i`` > 0 under :func:`place_ledger_run`): each place
is settled and finalized as a single-place run is, and one place's failure or 429 storm never waits on another's.

How the people in the loop act across places (docs/ingest.md, "One run, several places"):

- Stop from any place stops the run: every place's Stop control carries the run's id, the run ends ``cancelled``
  everywhere.
- An approval is shown in every place that can show it (one shared :class:`~core.run.approvals.ApprovalBook`); a
  decision taken in one is journaled once and shown decided in all. Who may decide is the first place's channel's
  rule.
- The pipeline lane and the answer watchers read are the run's, made once by the first place's stage; every
  place's calls are published on the run's monitor, each place on a row of its own (:func:`place_row_name`).

The run ends in one place (:meth:`FanoutController.end`): every place delivers its final at once, and the first
place records the run's end in the ledger only after every other place recorded its own, so a crash in between
resumes the run and finalizes the places that had not ended (finalizing again never shows a part twice).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from streamrelay.core.events import MAX_PLACES, RunEvent, RunStart, Target
from streamrelay.core.json_types import JsonObject
from streamrelay.core.records.ledger import Ledger, RunRecord
from streamrelay.core.records.report import DeliveryReport, PlaceReport, ReportStatus, summarize
from streamrelay.core.run.controller import RunController, RunEnding

_log = logging.getLogger("streamrelay.run")

PLACE_MARK = "/to:"
"""What joins a run's id and a later place's number in that place's ledger run id (``r1/to:1``)."""


def place_ledger_run(run: str, index: int) -> str:
    """The ledger's run id of place ``index`` (0-based, as in ``targets``) of run ``run``: the run's own for the first
    place, ``<run>/to:<index>`` for the others (a sub-agent's thread is ``<run>/<child key>`` the same way)."""
    return run if index == 0 else f"{run}{PLACE_MARK}{index}"


def place_start(start: RunStart, index: int) -> RunStart:
    """The ``run.start`` place ``index`` of ``start`` is delivered as: the run itself for the first place, else the
    same run with that place's channel, target, mode and overrides (no ``targets``)."""
    if index == 0:
        return start
    place = start.places()[index]
    return start.model_copy(
        update={
            "channel": place.channel,
            "target": place.target,
            "mode": place.mode,
            "overrides": place.overrides or {},
            "targets": None,
        }
    )


def place_row_name(start: RunStart, index: int) -> str:
    """The row watchers see place ``index``'s calls on (the live page, ``/ops``): its channel's name, or, when an
    earlier place has the same channel, ``<channel> → <chat_id>``."""
    places = start.places()
    place = places[index]
    if all(p.channel != place.channel for p in places[:index]):
        return place.channel
    return f"{place.channel} → {place.target.chat_id}"


def combined_status(rows: Sequence[PlaceReport], *, done: bool) -> ReportStatus:
    """The run's status over its places: ``pending`` until every place is done; ``delivered`` (or ``empty``,
    ``failed``) when every place is; else ``partial`` (some place shows less than its answer)."""
    if not done:
        return ReportStatus.PENDING
    statuses = {row.status for row in rows}
    if len(statuses) == 1:
        return next(iter(statuses))
    return ReportStatus.PARTIAL


def place_row(report: DeliveryReport, target: JsonObject, ledger_run: str) -> PlaceReport:
    """The ``places`` row of one place, from its own report (``target`` as the ``run.start`` named it)."""
    return PlaceReport(
        channel=report.channel,
        target={k: v for k, v in target.items() if isinstance(v, str | int) and not isinstance(v, bool)},
        ledger_run=ledger_run,
        done=report.done,
        status=report.status,
        end_status=report.end_status,
        confirmed=report.confirmed,
        uncertain=report.uncertain,
        failed=report.failed,
        unsent=report.unsent,
        message_ids=list(report.message_ids),
        parts=list(report.parts),
        errors=list(report.errors),
    )


def with_places(first: DeliveryReport, rows: list[PlaceReport]) -> DeliveryReport:
    """The run's report from its first place's and every place's row (:attr:`DeliveryReport.places`): ``done`` and
    ``status`` over every place, every place's errors (another place's prefixed with its channel and ledger run)."""
    report = first.model_copy()
    report.done = all(row.done for row in rows)
    report.status = combined_status(rows, done=report.done)
    report.errors = [*first.errors] + [
        f"{row.channel} ({row.ledger_run}): {error}" for row in rows[1:] for error in row.errors
    ]
    report.places = rows
    return report


async def rebuilt_report(ledger: Ledger, run: str) -> DeliveryReport | None:
    """A run's report rebuilt from the ledger (a run no longer in memory here), with a row per place for a fan-out
    run (its places found by their ledger run ids, :func:`place_ledger_run`); None for a run the ledger does not
    know. O(places + parts) ledger reads."""
    found: list[tuple[RunRecord, DeliveryReport]] = []
    for index in range(MAX_PLACES):
        record = await ledger.get_run(place_ledger_run(run, index))
        if record is None:
            break
        parts = [p.report() for p in await ledger.parts(record.run)]
        report = summarize(run, record.channel, parts, done=record.ended, end_status=record.end_status)
        report.errors = record.errors + report.errors
        found.append((record, report))
    if not found:
        return None
    if len(found) == 1:
        return found[0][1]
    return with_places(found[0][1], [place_row(report, record.target, record.run) for record, report in found])


class FanoutController:
    """Delivers one run to several places: one :class:`~core.run.controller.RunController` per place, driven as one.

    It answers what the run's worker, the relay and admission ask of a controller (module docstring for what is
    shared and what is each place's).

    Args:
        places: the places' controllers, the first one's ledger run id the run's own (``ledger_run`` of the others:
            :func:`place_ledger_run`), built from the same ``run.start``.
    """

    def __init__(self, places: Sequence[RunController]) -> None:
        if len(places) < 2:
            raise ValueError("a fan-out run has at least two places")
        self._places = list(places)
        first = self._first = places[0]
        self.run = first.run
        self.start_event = first.start_event
        self.policy = first.policy
        self.lane = first.lane
        self.monitor = first.monitor
        self.approvals = first.approvals
        self.stop_controls = first.stop_controls
        for place in self._places[1:]:
            place.share_approvals(first.approvals)
        self._ending: list[asyncio.Task[DeliveryReport]] = []
        first.before_end = self._others_ended
        self.stage_handle: Callable[[RunEvent], None] = self._stage_handle
        self.stage_deadline: Callable[[], float | None] = self.deadline

    @property
    def controllers(self) -> list[RunController]:
        """Every place's controller, in the ``targets``' order."""
        return list(self._places)

    @property
    def places(self) -> list[tuple[str, Target]]:
        return [pair for place in self._places for pair in place.places]

    @property
    def done(self) -> bool:
        return all(place.done for place in self._places)

    @property
    def committed(self) -> str | None:
        return self._first.committed

    @property
    def errors(self) -> list[str]:
        return self.report().errors

    def report(self) -> DeliveryReport:
        """The run's report: the first place's parts and message ids (what a single-place reader reads), the run's
        status over every place, and a row per place (``places``) with its own status and message ids."""
        reports = [place.report() for place in self._places]
        rows = [
            place_row(report, place.start_event.target.model_dump(mode="json"), place.ledger_run)
            for place, report in zip(self._places, reports, strict=True)
        ]
        return with_places(reports[0], rows)

    # --- the run's life ---------------------------------------------------------------------------------

    async def open(self) -> None:
        """Open every place (each restores what its ledger records say it showed before a restart)."""
        for place in self._places:
            await place.open()

    def handle(self, event: RunEvent) -> None:
        for place in self._places:
            place.handle(event)

    def _stage_handle(self, event: RunEvent) -> None:
        for place in self._places:
            place.stage_handle(event)

    def deadline(self) -> float | None:
        dues = [due for place in self._places if (due := place.stage_deadline()) is not None]
        return min(dues) if dues else None

    def tick(self) -> None:
        for place in self._places:
            place.tick()

    def catching_up(self, on: bool) -> None:
        for place in self._places:
            place.catching_up(on)

    def on_lost(self, callback: Callable[[], None]) -> None:
        for place in self._places:
            place.on_lost(callback)

    async def end(self, ending: RunEnding, *, gaps: Sequence[str] = ()) -> DeliveryReport:
        """End the run in every place at once (:meth:`RunController.end` each): the other places' ends are recorded
        before the first place's (which says the run ended), and one place's slow or failing delivery never holds
        another's calls."""
        self._ending = [
            asyncio.create_task(place.end(ending, gaps=gaps), name=f"run:{self.run}:{place.ledger_run}")
            for place in self._places[1:]
        ]
        await self._first.end(ending, gaps=gaps)
        await self._others_ended()
        return self.report()

    async def _others_ended(self) -> None:
        """Wait for the other places' ends; a bug in one is logged and reported there (its place is not done)."""
        results = await asyncio.gather(*self._ending, return_exceptions=True)
        for place, result in zip(self._places[1:], results, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                _log.error("run %s: place %s could not end", self.run, place.ledger_run, exc_info=result)
                place.stage.fail(f"internal error, delivery stopped: {type(result).__name__}: {result}")

    async def interrupt(self, *, gaps: Sequence[str] = ()) -> None:
        """Stop delivering in every place without finalizing (the journal resumes the run)."""
        for task in self._ending:
            task.cancel()
        await asyncio.gather(*self._ending, return_exceptions=True)
        await asyncio.gather(*(place.interrupt(gaps=gaps) for place in self._places), return_exceptions=True)


Controller = RunController | FanoutController
"""A run's controller: one place's, or a fan-out run's (the same questions answered)."""
