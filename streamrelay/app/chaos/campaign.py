"""A chaos campaign: the plan's runs streamed by their agents against the real sidecar and mocks, with the
sidecar killed and platform faults scripted as planned, then every run judged (:mod:`app.chaos.judge`)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from streamrelay.adapters.registry import REGISTRY
from streamrelay.app.chaos.agent import AgentRecord
from streamrelay.app.chaos.answers import load_recordings
from streamrelay.app.chaos.approvals import ApprovalRecord, judge_approval, set_aside
from streamrelay.app.chaos.driver import Driver
from streamrelay.app.chaos.judge import Verdict, judge
from streamrelay.app.chaos.plan import Options, RunPlan, make_plan
from streamrelay.app.chaos.procs import KillRecord
from streamrelay.app.chaos.services import Services


@dataclass
class Outcome:
    """Everything a campaign produced: the plan, what each agent did, the judgements and the chaos applied."""

    options: Options
    out: Path
    plans: list[RunPlan]
    records: dict[str, AgentRecord]
    reports: dict[str, dict[str, Any] | None]
    states: dict[str, dict[str, Any]]
    verdicts: dict[str, Verdict]
    kills: list[KillRecord]
    faults: list[dict[str, Any]]
    skipped: list[dict[str, Any]]
    scripted: list[dict[str, Any]]
    crashes: list[str]
    stops: dict[str, dict[str, Any]]
    """Per run, the reader's stop the campaign posted (:attr:`app.chaos.triggers.Chaos.stops`)."""
    elapsed_s: float
    approvals: dict[str, ApprovalRecord] = field(default_factory=dict)
    """Per run that asked one, what the campaign saw of its approval (:mod:`app.chaos.approvals`)."""
    faulted_calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per run, the platform calls that got a scripted fault or fell in an outage."""


async def run_campaign(options: Options, on_progress: Callable[[str, dict[str, int]], None] | None = None) -> Outcome:
    """Run a whole campaign; every process it started is stopped before it returns (or raises).

    Args:
        options: the campaign.
        on_progress: called with an event (``started``, ``done``, ``kill``) and counters, for a progress bar.

    Raises:
        RuntimeError: a process could not be started.
        ValueError: the recordings are missing.
    """
    out = options.out or Path(tempfile.mkdtemp(prefix="streamrelay-chaos-"))
    out.mkdir(parents=True, exist_ok=True)
    plans = make_plan(options, load_recordings())
    services = Services(options, out)
    t0 = time.monotonic()
    counters = {"runs": len(plans), "done": 0, "kills": 0, "faults": 0, "streaming": 0}

    def tell(event: str) -> None:
        counters["kills"] = len(services.kills)
        if on_progress is not None:
            on_progress(event, dict(counters))

    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    if task is not None:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGTERM, task.cancel)  # stopped like Ctrl+C: every process stopped
    try:
        await services.start()
        services.t0 = time.monotonic()
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
        async with httpx.AsyncClient(timeout=httpx.Timeout(90.0, connect=10.0), limits=limits) as client:
            await seed_threads(services, client, plans)
            watcher = asyncio.create_task(services.watch())
            try:
                driver = Driver(options, plans, services, client, counters, tell)
                records, reports = await driver.run()
                chaos = driver.chaos
                approvals = driver.approvals.records
                outcome_states = {p: await services.state(client, p) for p in options.platforms}
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
    finally:
        services.close()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGTERM)
    verdicts = {
        p.run: _judged(
            p,
            records[p.run],
            outcome_states[p.platform],
            reports.get(p.run),
            exclusive_bot=options.exclusive_bot,
            stop=chaos.stops.get(p.run),
            approval=approvals.get(p.run),
            states=outcome_states,
        )
        for p in plans
    }
    outcome = Outcome(
        options=options,
        out=out,
        plans=plans,
        records=records,
        reports=reports,
        states=outcome_states,
        verdicts=verdicts,
        kills=services.kills,
        faults=chaos.faults,
        skipped=chaos.skipped,
        scripted=chaos.scripted,
        crashes=services.crashes,
        stops=chaos.stops,
        approvals=approvals,
        elapsed_s=round(time.monotonic() - t0, 1),
    )
    outcome.faulted_calls = faulted_calls(outcome)
    return outcome


async def seed_threads(services: Services, client: httpx.AsyncClient, plans: list[RunPlan]) -> None:
    """A native run answers a person in a private conversation: the person's question is seeded in it first
    (``POST /_mock/user_message``; a Teams personal chat exists before its bot writes, and Graph finds its person);
    where the platform streams only into a thread (Slack, :attr:`DryRunFacts.thread_id`) its id becomes the
    ``thread_id`` of the run's ``run.start`` target.

    Raises:
        RuntimeError: the mock refused to seed it.
    """
    for plan in plans:
        dry = REGISTRY[plan.platform].dry_run
        if plan.mode != "native" or dry is None:
            continue
        url = f"{services.mock_url(plan.platform)}/_mock/user_message"
        answer = await client.post(url, json={"chat_id": plan.chat_id, "text": f"A question for {plan.run}, please."})
        if answer.status_code != 200:
            raise RuntimeError(f"{plan.platform} mock did not seed {plan.run}'s thread: {answer.text[:200]}")
        if dry.thread_id is None:
            continue
        thread = {"chat_id": plan.chat_id, "thread_id": str(answer.json()["message_id"])}
        start = plan.lines[0]
        start["target"] = thread
        if "targets" in start:
            start["targets"] = [{**start["targets"][0], "target": thread}, *start["targets"][1:]]


def _judged(
    plan: RunPlan,
    record: AgentRecord,
    state: dict[str, Any],
    report: dict[str, Any] | None,
    *,
    exclusive_bot: bool,
    stop: dict[str, Any] | None,
    approval: ApprovalRecord | None,
    states: dict[str, dict[str, Any]] | None = None,
) -> Verdict:
    """The run judged: its answer by :func:`app.chaos.judge.judge` (its approval's message set aside), its approval
    by :func:`app.chaos.approvals.judge_approval`."""
    chat = state["chats"].get(str(plan.chat_id), [])
    calls = [c for c in state["calls"] if str(c.get("chat_id")) == str(plan.chat_id)]
    shown, judged_report, judged_calls = set_aside(chat, place_report(report, 0), calls)
    streams = state.get("streams", {}).get(str(plan.chat_id), [])
    verdict = judge(
        plan, record, shown, judged_report, exclusive_bot=exclusive_bot, stop=stop, calls=judged_calls, streams=streams
    )
    verdict.approval = judge_approval(plan, approval, chat)
    verdict.problems += verdict.approval.problems
    for index, (platform, chat_id) in enumerate(plan.places, start=1):  # a fan-out run: each place judged alone
        there = (states or {}).get(platform, {"chats": {}, "calls": []})
        place_chat = there["chats"].get(str(chat_id), [])
        place_calls = [c for c in there["calls"] if str(c.get("chat_id")) == str(chat_id)]
        place = dataclasses.replace(plan, platform=platform, chat_id=chat_id, places=())
        other = judge(
            place, record, place_chat, place_report(report, index), exclusive_bot=exclusive_bot, calls=place_calls
        )
        verdict.lost |= other.lost
        verdict.lying |= other.lying
        verdict.unfinished |= other.unfinished
        verdict.misplaced |= other.misplaced
        verdict.uncertain |= other.uncertain
        if other.doubled and not other.doubled_allowed:
            verdict.doubled = True
        verdict.problems += [f"{platform} {chat_id}: {problem}" for problem in other.problems]
        verdict.notes += [f"{platform} {chat_id}: {note}" for note in other.notes]
        verdict.notes.append(f"fan-out: also judged on {platform} {chat_id}")
    return verdict


def place_report(report: dict[str, Any] | None, index: int) -> dict[str, Any] | None:
    """What a fan-out run's report says of its place ``index`` (its row of ``places`` over the run's fields); the
    report as it is for a run to one place. None: no report, or no row for that place."""
    if report is None or not report.get("places"):
        return report if index == 0 else None
    rows = report["places"]
    return {**report, **rows[index], "places": []} if index < len(rows) else None


def faulted_calls(outcome: Outcome) -> dict[str, list[dict[str, Any]]]:
    """Per run, the platform calls that got a scripted fault (matched by method and call number) or arrived
    during an outage (by the mock's clock); calls of no run are under ``""``."""
    by_chat = {(p.platform, str(p.chat_id)): p.run for p in outcome.plans}
    by_chat.update({(platform, str(chat)): p.run for p in outcome.plans for platform, chat in p.places})
    out: dict[str, list[dict[str, Any]]] = {}
    for platform, state in outcome.states.items():
        scripted: dict[tuple[str, int], str] = {}
        outages: list[tuple[float, float, set[str] | None, str]] = []
        for entry in outcome.scripted:
            applied = entry["applied"]
            if entry["platform"] != platform:
                continue
            for f in applied.get("faults", []):
                scripted[(f["method"], f["call"])] = entry["kind"]
            if "until_t_ms" in applied.get("outage", {}):
                o = applied["outage"]
                methods = set(o["methods"]) if o.get("methods") else None
                outages.append((o["until_t_ms"] - o["seconds"] * 1000, o["until_t_ms"], methods, entry["kind"]))
        counts: dict[str, int] = {}
        for call in state.get("calls", []):
            method = call["method"]
            counts[method] = counts.get(method, 0) + 1
            t = call.get("t_ms", 0)
            # an outage overrides a call's own scripted fault (mocks/script.py)
            kind = next((k for a, b, ms, k in outages if a <= t < b and (ms is None or method in ms)), None)
            if kind is None:
                kind = scripted.get((method, counts[method]))
            if kind is not None:
                run = by_chat.get((platform, str(call.get("chat_id"))), "")
                out.setdefault(run, []).append({**call, "fault": kind})
    return out
