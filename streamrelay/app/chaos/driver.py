"""Driving a campaign's runs: every run's agent streams (``concurrency`` at a time), then waits for its report (or,
gone after a kill, is watched until its report says done); then every run's final report is read."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx

from streamrelay.app.chaos.agent import Agent, AgentRecord, observe
from streamrelay.app.chaos.approvals import Approvals
from streamrelay.app.chaos.plan import Options, RunPlan
from streamrelay.app.chaos.services import Services
from streamrelay.app.chaos.triggers import Chaos

PATIENCE_S = 180.0
"""How long an agent keeps at its run (through 503s, waiting for its report), plus the idle timeout and the longest
outage; past it the run is judged as it stands (unfinished when its report never said done)."""
STRAGGLER_S = 60.0
"""A run still waiting for its report after this long no longer counts against the runs in delivery."""
MOVING_S = 60.0
"""Replicas: how long a final report answered 503 (its partition changing owner) is asked again."""
DRAIN_S = 300.0
"""After the last agent finished streaming, how long runs may take to be reported done (plus the idle timeout
and the longest outage), in seconds of a sidecar answering (:meth:`Services.up_clock`), as every patience here."""


class Driver:
    """Runs every plan's agent and collects what they saw.

    Args:
        options: the campaign's options.
        plans: the runs.
        services: the processes.
        client: the HTTP client every agent shares.
        counters: progress counters (``streaming``, ``done``, ``faults``), updated in place.
        tell: called with an event name after each change of the counters.
    """

    def __init__(
        self,
        options: Options,
        plans: list[RunPlan],
        services: Services,
        client: httpx.AsyncClient,
        counters: dict[str, int],
        tell: Callable[[str], None],
    ) -> None:
        self.options = options
        self.plans = plans
        self.services = services
        services.watch_runs((p.run, p.platform, p.chat_id) for p in plans)
        self.client = client
        self.counters = counters
        self.tell = tell
        self.live: set[str] = set()
        """Runs started and not yet done (what a kill interrupts)."""
        self.chaos = Chaos(services, client, self.live)
        self.approvals = Approvals(services, client)
        self.records: dict[str, AgentRecord] = {}
        self._streaming = asyncio.Semaphore(options.concurrency)
        self._in_delivery = asyncio.Semaphore(options.concurrency * 4)
        self._streams_left = len(plans)
        self._drain_deadline: float | None = None
        self._longest_outage = 180.0 if options.long else 10.0
        self._patience = PATIENCE_S + options.idle_s + self._longest_outage

    async def run(self) -> tuple[dict[str, AgentRecord], dict[str, dict[str, Any] | None]]:
        """Every run to its end (or the drain deadline); every run's final report."""
        tasks = [asyncio.create_task(self._life(p), name=f"agent:{p.run}") for p in self.plans]
        try:
            pending = set(tasks)
            while pending:
                _, pending = await asyncio.wait(pending, timeout=1.0)
                if self._drain_deadline is not None and self.services.up_clock() > self._drain_deadline:
                    break
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for task in tasks:
                if not task.cancelled() and task.exception() is not None:
                    name = task.get_name().removeprefix("agent:")
                    self.records[name].anomalies.append(f"the agent failed: {task.exception()!r}")
            await self.chaos.settle()
        finally:
            for task in tasks:
                task.cancel()
        await self.services.up.wait()
        for plan in self.plans:
            await self.approvals.final_read(plan)
        return self.records, await self._final_reports()

    async def _life(self, plan: RunPlan) -> None:
        agent = Agent(
            plan,
            self.services,
            self.client,
            self.chaos,
            self.services.elapsed,
            patience_s=self._patience,
            approvals=self.approvals,
        )
        self.records[plan.run] = agent.record
        await self._in_delivery.acquire()
        held = [True]

        def let_go() -> None:  # a straggler (or a finished run) no longer holds back new runs
            if held[0]:
                held[0] = False
                self._in_delivery.release()

        straggler = None
        try:
            await self._stream(agent)
            straggler = asyncio.get_running_loop().call_later(STRAGGLER_S, let_go)
            if agent.record.gone is None:
                await agent.await_report()
            if plan.correction is not None:
                await agent.correct()
            if agent.record.gone in ("stream", "report", "closed"):
                report, _ = await observe(plan.run, self.services, self.client, self._patience)
                agent.record.report = report
        finally:
            if straggler is not None:
                straggler.cancel()
            let_go()
            self.live.discard(plan.run)
            self.counters["done"] += 1
            self.counters["faults"] = len(self.chaos.faults)
            self.tell("done")

    async def _stream(self, agent: Agent) -> None:
        async with self._streaming:
            self.live.add(agent.plan.run)
            self.counters["streaming"] += 1
            self.tell("started")
            try:
                await agent.stream()
            finally:
                self.counters["streaming"] -= 1
                self._streams_left -= 1
                if self._streams_left == 0:
                    self._drain_deadline = (
                        self.services.up_clock() + DRAIN_S + self.options.idle_s + self._longest_outage
                    )

    async def _final_reports(self) -> dict[str, dict[str, Any] | None]:
        """Every run's report as the sidecar gives it now (after any restart: rebuilt from the ledger)."""
        gate = asyncio.Semaphore(32)
        services, client = self.services, self.client

        async def one(plan: RunPlan) -> tuple[str, dict[str, Any] | None]:
            async with gate:
                moving = time.monotonic() + MOVING_S
                tries = 0
                while tries < 5:
                    sidecar = await services.pick()
                    try:
                        answer = await client.get(f"{sidecar.url}/v1/runs/{plan.run}", headers=services.headers)
                    except httpx.TransportError:
                        tries += 1
                        await services.up.wait()
                        continue
                    if answer.status_code == 503 and self.options.replicated and time.monotonic() < moving:
                        await asyncio.sleep(0.5)  # its partition is changing owner
                        continue
                    if answer.status_code == 404:
                        return plan.run, None
                    body: dict[str, Any] = answer.json()
                    return plan.run, body
                return plan.run, None

        return dict(await asyncio.gather(*(one(p) for p in self.plans)))
