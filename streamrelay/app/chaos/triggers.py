"""A campaign's triggers: the kills (kill -9 of the sidecar, then a restart) and platform faults (scripted on the
mocks through their control API) a run's plan attaches to a point of its stream."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import httpx

from streamrelay.app.chaos.plan import KillPlan, RunPlan
from streamrelay.app.chaos.services import Services

MIN_KILL_GAP_S = 1.5
"""A planned kill waits until the restarted sidecar has answered for this long (the sidecar gets to work); with
replicas, until the last kill is this long plus the time its partitions take to move (4/3 of ``lease_ttl_s``)
past, and two replicas answer."""
KILL_DEFER_S = 15.0
"""How long a planned kill may wait for that; past it (or once its run is done) it is skipped."""


class Chaos:
    """The campaign's triggers: kills and faults fired when a run reaches the point its plan names."""

    def __init__(self, services: Services, client: httpx.AsyncClient, live: set[str]) -> None:
        self.services = services
        self.client = client
        self.live = live
        self.faults: list[dict[str, Any]] = []
        self.scripted: list[dict[str, Any]] = []
        """Every script applied (faults and kills' in-flight faults), for counting the calls they hit."""
        self.skipped: list[dict[str, Any]] = []
        self.stops: dict[str, dict[str, Any]] = {}
        """Per stopped run, the reader's stop: when, the lines its agent had sent when it was answered (none
        after can show), the answer's status and body."""
        self._sent: dict[str, int] = {}
        self._fired: set[tuple[str, str]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_up = 0.0
        """When the last kill's sidecar answered again (replicas: when the last kill hit)."""
        options = services.options
        self._gap_s = MIN_KILL_GAP_S + (options.lease_ttl_s * 4 / 3 if options.replicated else 0.0)
        self._one_kill = asyncio.Lock()
        self._one_failover = asyncio.Lock()

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def progress(self, plan: RunPlan, sent: int) -> None:
        n = len(plan.lines)
        kill, fault, stop = plan.kill, plan.fault, plan.stop
        self._sent[plan.run] = max(sent, self._sent.get(plan.run, 0))
        if stop is not None and not stop.after_end and sent >= stop.at * n and self._once(plan, "stop"):
            self._spawn(self._stop(plan))
        if kill is not None and kill.kind != "after_end" and sent >= kill.at * n and self._once(plan, "kill"):
            self._spawn(self._kill(plan))
        failover = plan.failover
        if failover is not None and sent >= failover * n and self._once(plan, "failover"):
            self._spawn(self._fail_over(plan))
        if fault is not None and sent >= fault.at * n and self._once(plan, "fault"):
            self._spawn(self._fault(plan))

    def end_accepted(self, plan: RunPlan) -> None:
        if plan.kill is not None and plan.kill.kind == "after_end" and self._once(plan, "kill"):
            self._spawn(self._kill(plan))
        if plan.stop is not None and plan.stop.after_end and self._once(plan, "stop"):
            self._spawn(self._stop(plan))

    def stopped(self, plan: RunPlan) -> None:
        """The run's agent was told its run is stopped (409): a kill it planned later in its stream hits now,
        while the stop is finalized (else a stopped run's kill would never happen)."""
        if plan.kill is not None and self._once(plan, "kill"):
            self._spawn(self._kill(plan))

    def correcting(self, plan: RunPlan) -> None:
        """The run's agent posted its correction: the kill its plan puts in the correction's way fires now."""
        correction = plan.correction
        if correction is not None and correction.kill_ms is not None and self._once(plan, "correction kill"):
            self._spawn(self._kill(plan, KillPlan("correction", 1.0, correction.kill_ms)))

    def _once(self, plan: RunPlan, what: str) -> bool:
        key = (plan.run, what)
        if key in self._fired:
            return False
        self._fired.add(key)
        return True

    def _can_kill(self) -> bool:
        return self.services.can_kill() and time.monotonic() - self._last_up >= self._gap_s

    @property
    def _busy(self) -> str:
        if self.services.options.replicated:
            return "too soon after the last kill, or fewer than two replicas answered"
        return "the sidecar was restarting"

    async def _kill(self, plan: RunPlan, planned: KillPlan | None = None) -> None:
        """Kill -9 the sidecar as ``plan.kill`` says: one kill at a time, in trigger order; a kill waits (up to
        :data:`KILL_DEFER_S`) while the sidecar restarts (it then hits whatever runs are live: its own may be done),
        and is skipped when no run is live any more. ``planned``: a kill other than ``plan.kill`` (the one in a
        correction's way). With replicas it waits for the gap after the last kill and for
        two replicas to answer."""
        kill = planned or plan.kill
        assert kill is not None
        reason = f"{kill.kind} of {plan.run} ({plan.combo})"
        deadline = time.monotonic() + KILL_DEFER_S
        async with self._one_kill:
            deferred = not self._can_kill()
            while not self._can_kill() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            if not self._can_kill() or not self.live:
                why = "no run was live any more" if not self.live else self._busy
                self.skipped.append({"kill": reason, "at_s": round(self.services.elapsed(), 3), "why": why})
                return
            body = kill.script(plan.platform, plan.mode)
            if body is not None:
                with contextlib.suppress(httpx.HTTPError):
                    await self._script(plan.platform, body, f"kill {kill.kind}")
            await asyncio.sleep(kill.delay_ms / 1000)
            if deferred:
                replicated = self.services.options.replicated
                reason += " (deferred)" if replicated else " (deferred while the sidecar restarted)"
            record = await self.services.kill_and_restart(reason, plan.run, sorted(self.live))
            if record is None:
                self.skipped.append({"kill": reason, "at_s": round(self.services.elapsed(), 3), "why": "restarting"})
            self._last_up = time.monotonic()

    async def _fail_over(self, plan: RunPlan) -> None:
        """Kill -9 the Redis primary (a ``primary failover`` fault, listed with the faults): the sentinels promote
        its replica and the killed one comes back as a replica. One at a time; skipped while the primary has no
        replica in sync (nothing could be promoted) or no run is live."""
        entry: dict[str, Any] = {
            "applied": None,
            "at_s": round(self.services.elapsed(), 3),
            "run": plan.run,
            "platform": "redis",
            "kind": "primary failover",
            "body": {},
        }
        async with self._one_failover:
            if not self.live:
                self.skipped.append({"fault": "primary failover", "run": plan.run, "why": "no run was live any more"})
                return
            try:
                record = await self.services.fail_over()
            except RuntimeError as exc:
                entry["error"] = str(exc)
            else:
                entry["applied"], entry["body"] = True, record.to_json()
            self.faults.append(entry)

    async def _stop(self, plan: RunPlan) -> None:
        """The reader's stop, posted as the bot that owns the platform's updates forwards it (whatever kill or
        fault is under way): through a kill it is posted again once a sidecar is up (a second stop answers the
        first one's state); a 404 (the run not known yet) is asked again a few times."""
        assert plan.stop is not None
        await asyncio.sleep(plan.stop.delay_ms / 1000)
        entry: dict[str, Any] = {"at_s": round(self.services.elapsed(), 3), "after_end": plan.stop.after_end}
        self.stops[plan.run] = entry
        body = {"by": "chaos:reader", "reason": "planned stop"}
        for _ in range(40):
            sidecar = await self.services.pick()
            try:
                answer = await self.client.post(
                    f"{sidecar.url}/v1/runs/{plan.run}/stop", json=body, headers=self.services.headers
                )
            except httpx.TransportError as exc:
                entry["errors"] = [*entry.get("errors", []), f"{type(exc).__name__}: {exc}"[:200]]
                await asyncio.sleep(0.2)
                await self.services.any_up.wait()
                continue
            entry["sent"] = self._sent.get(plan.run, 0)
            entry["status"] = answer.status_code
            entry["answer"] = answer.text[:300]
            if answer.status_code not in (404, 503):
                return
            await asyncio.sleep(0.5)

    async def _fault(self, plan: RunPlan) -> None:
        fault = plan.fault
        assert fault is not None
        entry: dict[str, Any] = {
            "applied": None,
            "at_s": round(self.services.elapsed(), 3),
            "run": plan.run,
            "platform": plan.platform,
            "kind": fault.kind,
            "body": fault.body,
        }
        if "outage" in fault.body and any(
            f["platform"] == plan.platform and f.get("until_s", 0) > self.services.elapsed() for f in self.faults
        ):
            self.skipped.append({"fault": fault.kind, "run": plan.run, "why": "an outage is under way"})
            return
        try:
            answer = await self._script(plan.platform, fault.body, fault.kind)
        except httpx.HTTPError as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
        else:
            entry["applied"], entry["error"] = answer.get("applied"), answer.get("error")
        if "outage" in fault.body and entry["applied"]:
            entry["until_s"] = self.services.elapsed() + fault.body["outage"]["seconds"]
        self.faults.append(entry)

    async def _script(self, platform: str, body: dict[str, Any], kind: str) -> dict[str, Any]:
        """Script ``body`` on ``platform``'s mock; faults on calls an earlier fault still waits for move to the
        calls after them. Its answer (with the applied faults, which :func:`faulted_calls` counts) is kept.

        Raises:
            httpx.HTTPError: the mock did not answer.
        """
        for _ in range(5):
            answer = await self.services.script(self.client, platform, body)
            if "already has a fault" not in str(answer.get("error")) or "faults" not in body:
                break
            body = {**body, "faults": [{**f, "nth": f["nth"] + 3} for f in body["faults"]]}
        if answer.get("applied"):
            self.scripted.append({"platform": platform, "kind": kind, "applied": answer["applied"]})
        return answer

    async def settle(self) -> None:
        """Wait for the kills and faults under way."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
