"""An agent of a chaos campaign: streams its run into the sidecar as an agent runtime would, and lives through
the sidecar's kills.

It posts the run's NDJSON lines (``seq`` from 0) in requests of the planned sizes, a few milliseconds apart, then
waits for the delivery report. When a request fails because the sidecar was killed, it waits for the restarted
sidecar and then, as its plan says for that kill, either re-sends its whole run from seq 0 (as a runtime does
after a crash: everything up to where it was in one fast request, then the rest as planned) or never comes back.

With replicas (``--backend redis``) every request (lines or a report) goes to a random live replica: after a kill
of the replica it was talking to, the agent re-sends to another one at once. A replica takes every line into Redis
(the run's owner drops repeats later), so its answer counts a repeated line accepted: not an anomaly there.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from streamrelay.app.chaos.approvals import Approvals
from streamrelay.app.chaos.plan import RunPlan
from streamrelay.app.chaos.services import Services, Sidecar
from streamrelay.core.run.controller import IDLE_REFUSAL
from streamrelay.core.run.stop import STOPPED_ERROR

REPORT_POLL_S = 20
"""``wait_s`` of one report request (the agent asks again until the report says done)."""
UNKNOWN_GRACE_S = 15.0
"""Replicas: how long a watcher keeps asking for a run answered 404 (its lines may still wait in Redis for a new
owner of its partition) before it takes the run as never accepted."""


class Triggers(Protocol):
    """What the campaign does when a run reaches a point of its plan (kills and faults)."""

    def progress(self, plan: RunPlan, sent: int) -> None: ...

    def end_accepted(self, plan: RunPlan) -> None: ...

    def stopped(self, plan: RunPlan) -> None: ...

    def correcting(self, plan: RunPlan) -> None: ...


@dataclass
class AgentRecord:
    """What an agent did and saw (the judge reads it; the transcript keeps it)."""

    run: str
    sent: int = 0
    """Lines sent at least once (a prefix of the run's lines)."""
    confirmed: int = 0
    """Lines the sidecar acknowledged (an answer 200 to their request): journaled for sure."""
    end_confirmed: bool = False
    gone: str | None = None
    """Where the agent stopped for good: ``stream`` or ``report`` after a kill, ``closed`` when the sidecar refused
    its lines (409) because the idle timeout had closed the run (a restart longer than the timeout), ``gave up``;
    None when it stayed."""
    kills_seen: int = 0
    stopped: bool = False
    """The sidecar answered a request 409 "run stopped by the reader; stop streaming": the agent sent nothing more
    (its run's end; the lines of that request before the stop may have been taken)."""
    resends: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    """Answers an agent must never get: a repeated line accepted, a 4xx, a failure without a kill."""
    started_s: float | None = None
    streamed_s: float | None = None
    done_s: float | None = None
    report: dict[str, Any] | None = None
    """The last report read while the run was live (the judge reads a fresh one at the end)."""
    correction: dict[str, Any] | None = None
    """The run's correction (its plan's): ``posted`` (the agent sent it), ``status`` and ``answer`` of the last
    try, ``tries``, ``kills`` met, or ``skipped`` and why (the run was not delivered whole)."""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "report"}


class _Killed(Exception):
    """The sidecar was killed during the request (the agent decides what to do)."""


class _Stopped(Exception):
    """The run was stopped by its reader: the sidecar answered 409 and the agent must stop sending."""


class _Closed(Exception):
    """The run was closed by the idle timeout before these lines were taken (409): nothing more of it is taken,
    so the agent stops sending (a real agent starts a new run)."""


class _GaveUp(Exception):
    """The run's deadline passed while the agent still waited (for an answer other than 503, or a report)."""


class Agent:
    """One run's agent.

    Args:
        plan: the run.
        services: the campaign's processes (the sidecar's URL, its up/down state).
        client: the HTTP client shared by all agents.
        triggers: the campaign's kill and fault triggers.
        clock: seconds since the campaign started.
        patience_s: how long the agent keeps at its run (sending through 503s, waiting for the report) before it
            gives up (recorded as an anomaly: the run is then judged as it stands).
    """

    def __init__(
        self,
        plan: RunPlan,
        services: Services,
        client: httpx.AsyncClient,
        triggers: Triggers,
        clock: Callable[[], float],
        patience_s: float = 900.0,
        approvals: Approvals | None = None,
    ) -> None:
        self.plan = plan
        self.approvals = approvals
        self.patience_s = patience_s
        self._deadline = services.up_clock() + patience_s
        """When the agent gives up, on the services' up clock (seconds a sidecar answered)."""
        self._journal_refusals = 0
        self.services = services
        self.client = client
        self.triggers = triggers
        self.clock = clock
        self.record = AgentRecord(plan.run)
        self._kills_decided = 0

    async def stream(self) -> None:
        """Post every line (surviving kills as planned); returns when the ``end`` is acknowledged or the agent
        is gone."""
        await self.services.any_up.wait()
        self.record.started_s = round(self.clock(), 3)
        self._deadline = self.services.up_clock() + self.patience_s
        try:
            await self._stream()
        except _Stopped:
            self.record.stopped = True
            self.record.streamed_s = round(self.clock(), 3)
            self.triggers.stopped(self.plan)
        except _Closed:
            self.record.gone = "closed"  # its end was never taken: judged by the lines acknowledged, like a gone agent
            self.record.streamed_s = round(self.clock(), 3)
        except _GaveUp as exc:
            self.record.anomalies.append(f"the agent gave up streaming after {self.patience_s:g} s: {exc}")
            self.record.gone = "gave up"

    async def _stream(self) -> None:
        pos = 0
        batches = list(self.plan.batches)
        while pos < len(self.plan.lines):
            size = batches.pop(0) if batches else len(self.plan.lines) - pos
            stop = min(len(self.plan.lines), pos + size)
            try:
                await self._post(pos, stop, paced=True)
                pos = stop
            except _Killed:
                if not await self._come_back():
                    self.record.gone = "stream"
                    return
                await self._replay(self.record.sent)
                pos = max(pos, self.record.sent)
            approval = self.plan.approval
            if approval is not None and self.approvals is not None and self.record.confirmed > approval.line:
                await self.approvals.asked(self.plan)  # waits for the decision, as wait_approval does
        self.record.end_confirmed = True
        self.record.streamed_s = round(self.clock(), 3)
        self.triggers.end_accepted(self.plan)

    async def await_report(self) -> None:
        """Wait for the run's report to say done; a kill meanwhile is a decision point too (re-send, or gone)."""
        while True:
            if self.services.up_clock() > self._deadline:
                self.record.anomalies.append(f"the report did not say done within {self.patience_s:g} s")
                self.record.gone = "gave up"
                return
            asked = time.monotonic()
            try:
                report = await self._report()
            except _GaveUp:
                continue
            except _Killed:
                if not await self._come_back():
                    self.record.gone = "report"
                    return
                if not self.record.stopped:
                    try:
                        await self._replay(len(self.plan.lines))
                    except _Stopped:
                        self.record.stopped = True  # stopped since its end: nothing more to send
                    except _Closed:
                        self.record.gone = "closed"  # closed before it took these lines: its report is final
                continue
            if report is not None and report.get("done"):
                self.record.report = report
                self.record.done_s = round(self.clock(), 3)
                return
            if time.monotonic() - asked < 1.0:
                await asyncio.sleep(1.0)  # not done, and answered at once (the run is not live): ask later

    async def correct(self) -> None:
        """Post the plan's correction once the report said done (docs/corrections.md), as an agent would: the same
        id again after a kill or a 503 (applied once), until it is answered otherwise or the agent's patience ends.
        Only a run its report calls ``delivered`` is corrected (the judge then expects the new text alone)."""
        correction = self.plan.correction
        report = self.record.report or {}
        if correction is None:
            return
        if self.record.gone is not None or self.record.stopped or report.get("status") != "delivered":
            self.record.correction = {"skipped": f"report {report.get('status')!r}, agent gone {self.record.gone}"}
            return
        entry: dict[str, Any] = {"posted": True, "tries": 0, "kills": 0, "t": round(self.clock(), 3)}
        self.record.correction = entry
        body = {"kind": "run.correct", "id": correction.id, "text": correction.text}
        self.triggers.correcting(self.plan)
        while self.services.up_clock() < self._deadline:
            sidecar = await self.services.pick()
            generation = sidecar.generation
            entry["tries"] += 1
            try:
                answer = await self.client.post(
                    f"{sidecar.url}/v1/runs/{self.plan.run}/corrections",
                    json=body,
                    headers=self.services.headers,
                    timeout=120,
                )
            except httpx.TransportError as exc:
                entry["error"] = f"{type(exc).__name__}: {exc}"[:200]
                await asyncio.sleep(0.05)
                if sidecar.up.is_set() and sidecar.generation == generation and sidecar.proc.alive:
                    self.record.anomalies.append(f"correction failed with the sidecar up: {entry['error']}")
                    await asyncio.sleep(0.5)
                else:
                    entry["kills"] += 1
                    await self.services.any_up.wait()
                continue
            entry["status"], entry["answer"] = answer.status_code, _json(answer)
            if answer.status_code == 503:
                await asyncio.sleep(1.0)  # a message could not be changed yet: the same correction again
                continue
            if answer.status_code != 200:
                self.record.anomalies.append(f"correction answered {answer.status_code}: {answer.text[:300]}")
            entry["done_s"] = round(self.clock(), 3)
            return
        self.record.anomalies.append("the correction was not answered within the agent's patience")

    async def _come_back(self) -> bool:
        """After a kill: True when this agent re-sends its run (its plan's decision for this kill)."""
        self.record.kills_seen += 1
        decision = self.plan.resend[min(self._kills_decided, len(self.plan.resend) - 1)]
        self._kills_decided += 1
        if decision:
            await self.services.any_up.wait()
            if self.services.options.agent_back_s > 0:  # an agent slower to come back than the run's idle timeout
                await asyncio.sleep(self.services.options.agent_back_s)
        return decision

    async def _replay(self, upto: int) -> None:
        """Re-send lines ``[0, upto)`` in one fast request (repeats until it is answered)."""
        self.record.resends += 1
        while True:
            try:
                await self._post(0, upto, paced=False, replay=True)
                return
            except _Killed:
                self.record.kills_seen += 1  # the replay itself was cut: it is re-sent as soon as it can be
                await self.services.any_up.wait()

    async def _body(self, start: int, stop: int, paced: bool) -> AsyncIterator[bytes]:
        for i in range(start, stop):
            if paced and i > start:
                await asyncio.sleep(self.plan.pace_ms / 1000)
            yield (json.dumps(self.plan.lines[i]) + "\n").encode()
            if i + 1 > self.record.sent:
                self.record.sent = i + 1
                self.triggers.progress(self.plan, self.record.sent)

    async def _post(self, start: int, stop: int, *, paced: bool, replay: bool = False) -> None:
        """One request carrying lines ``[start, stop)``.

        Raises:
            _Killed: the sidecar went away during it (a kill); the restarted one is up, or coming.
            _Stopped: the run was stopped by its reader (409): the agent sends nothing more.
            _Closed: the idle timeout closed the run before it took these lines (409): nothing more is taken.
        """
        while True:
            sidecar = await self.services.pick()
            generation = sidecar.generation
            t = self.clock()
            entry: dict[str, Any] = {"t": round(t, 3), "lines": [start, stop], "replay": replay, "gen": generation}
            if self.services.options.replicated:
                entry["replica"] = sidecar.name
            self.record.requests.append(entry)
            try:
                with sidecar.serving(self.plan.run):
                    answer = await self.client.post(
                        f"{sidecar.url}/v1/runs/{self.plan.run}/events",
                        content=self._body(start, stop, paced),
                        headers=self.services.headers,
                    )
            except httpx.TransportError as exc:
                entry["error"] = f"{type(exc).__name__}: {exc}"[:200]
                await self._after_failure(sidecar, generation, entry)
                continue
            entry["status"] = answer.status_code
            entry["answer"] = _json(answer)
            entry["ms"] = round((self.clock() - t) * 1000)
            if answer.status_code == 409 and STOPPED_ERROR in answer.text:
                raise _Stopped
            if answer.status_code == 409 and IDLE_REFUSAL in answer.text:
                raise _Closed
            if answer.status_code == 503:
                self._journal_refusals += 1
                if self._journal_refusals == 1:
                    self.record.anomalies.append(f"503 (journal not written) at {t:.1f} s: {entry['answer']}"[:300])
                if self.services.up_clock() > self._deadline:
                    raise _GaveUp(f"{self._journal_refusals} answers 503 (the journal could not be written)")
                await asyncio.sleep(0.5)  # the lines are sent again
                continue
            self._check(entry, start, stop, replay)
            return

    async def _after_failure(self, sidecar: Sidecar, generation: int, entry: dict[str, Any]) -> None:
        """A transport failure: a kill when ``sidecar`` went down meanwhile (raises :class:`_Killed`), else an
        anomaly (it was up and failed the request); the request is then sent again."""
        await asyncio.sleep(0.05)
        if sidecar.up.is_set() and sidecar.generation == generation and sidecar.proc.alive:
            self.record.anomalies.append(f"request failed with the sidecar up: {entry['error']}")
            if self.services.up_clock() > self._deadline:
                raise _GaveUp(entry["error"])
            await asyncio.sleep(0.5)
            return
        entry["killed"] = True
        raise _Killed

    def _check(self, entry: dict[str, Any], start: int, stop: int, replay: bool) -> None:
        answer = entry["answer"]
        status = entry["status"]
        if status != 200 or not isinstance(answer, dict):
            self.record.anomalies.append(f"lines {start}-{stop - 1} answered {status}: {json.dumps(answer)[:300]}")
            return
        accepted, dropped = int(answer.get("accepted", 0)), int(answer.get("dropped", 0))
        known = self.record.confirmed if replay else 0
        if accepted > (stop - start) - known and not self.services.options.replicated:
            self.record.anomalies.append(
                f"lines {start}-{stop - 1}: accepted {accepted} though {known} of them were acknowledged before"
                f" (repeated seq taken again); dropped {dropped}"
            )
        if accepted + dropped != stop - start:
            self.record.anomalies.append(f"lines {start}-{stop - 1}: accepted {accepted} + dropped {dropped}")
        self.record.confirmed = max(self.record.confirmed, stop)

    async def _report(self) -> dict[str, Any] | None:
        sidecar = await self.services.pick()
        generation = sidecar.generation
        try:
            with sidecar.serving(self.plan.run):
                answer = await self.client.get(
                    f"{sidecar.url}/v1/runs/{self.plan.run}",
                    params={"wait_s": REPORT_POLL_S},
                    headers=self.services.headers,
                    timeout=REPORT_POLL_S + 30,
                )
        except httpx.TransportError as exc:
            await self._after_failure(sidecar, generation, {"error": f"{type(exc).__name__}: {exc}"[:200]})
            return None
        if answer.status_code == 404:
            self.record.anomalies.append(f"report 404 at {self.clock():.1f} s: {answer.text[:200]}")
            await asyncio.sleep(1.0)
            return None
        body = _json(answer)
        return body if isinstance(body, dict) else None


async def observe(
    run: str, services: Services, client: httpx.AsyncClient, patience_s: float
) -> tuple[dict[str, Any] | None, float | None]:
    """Read ``run``'s report until it says done (a watcher's reads, not the agent's: it sends nothing), through
    kills, for ``patience_s`` seconds of a sidecar answering (:meth:`Services.up_clock`); the last report and when
    it said done (monotonic)."""
    report: dict[str, Any] | None = None
    unknown_until: float | None = None
    deadline = services.up_clock() + patience_s
    while services.up_clock() < deadline:
        sidecar = await services.pick()
        wait_s = max(0.0, min(REPORT_POLL_S, deadline - services.up_clock()))
        try:
            answer = await client.get(
                f"{sidecar.url}/v1/runs/{run}",
                params={"wait_s": round(wait_s, 1)},
                headers=services.headers,
                timeout=wait_s + 30,
            )
        except httpx.TransportError:
            await asyncio.sleep(0.2)
            continue
        body = _json(answer)
        if answer.status_code == 404:
            if not services.options.replicated:
                return None, None  # the sidecar resumes its journal before it answers: it never accepted this run
            # a replica: the run's new owner may not have read its lines from Redis yet
            unknown_until = unknown_until or time.monotonic() + UNKNOWN_GRACE_S
            if time.monotonic() > unknown_until:
                return None, None
            await asyncio.sleep(1.0)
            continue
        if answer.status_code == 200 and isinstance(body, dict):
            report = body
            if body.get("done"):
                return report, time.monotonic()
        if answer.elapsed.total_seconds() < 1.0:
            await asyncio.sleep(1.0)  # not done, answered at once: the run is not live, ask again later
    return report, None


def _json(answer: httpx.Response) -> Any:
    try:
        return answer.json()
    except ValueError:
        return answer.text[:300]
