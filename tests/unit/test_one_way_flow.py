"""A guard for the one-way flow (ingest → journal → run → machine → executor → send chain → adapter → ledger): one
delta is walked through the sidecar with ``sys.setprofile`` and every call from one project module into another is
recorded with the task it ran in. A call from a later stage into an earlier one is a coupling against the flow: only
the callbacks listed in :data:`CALLBACKS` are allowed, each with its reason. The figures (calls, module stays and
returns per task) are printed for the issue's bookkeeping, never asserted as timings."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import MemoryChat

ROOT = str(Path(__file__).resolve().parents[2]) + "/"

STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "ingest",
        (
            "streamrelay/core/run/relay.py",
            "streamrelay/core/ingest/admission.py",
            "streamrelay/core/ingest/quota.py",
            "streamrelay/core/ingest/clients.py",
        ),
    ),
    ("journal", ("streamrelay/core/records/journal.py",)),
    (
        "run",
        (
            "streamrelay/core/run/",
            "streamrelay/core/text/",
            "streamrelay/core/chunking/",
            "streamrelay/core/policy.py",
            "streamrelay/core/units.py",
            "streamrelay/core/delivery/answer.py",
            "streamrelay/core/delivery/segments.py",
            "streamrelay/core/delivery/modes.py",
            "streamrelay/core/delivery/cap.py",
            "streamrelay/core/delivery/status.py",
            "streamrelay/core/delivery/agents.py",
            "streamrelay/core/delivery/reasoning.py",
            "streamrelay/core/delivery/coverage.py",
        ),
    ),
    (
        "machine",
        (
            "streamrelay/core/delivery/slotbook.py",
            "streamrelay/core/delivery/reconciler.py",
            "streamrelay/core/delivery/machine.py",
            "streamrelay/core/delivery/planner.py",
            "streamrelay/core/delivery/slots.py",
        ),
    ),
    ("executor", ("streamrelay/core/delivery/executor.py",)),
    ("send chain", ("streamrelay/core/delivery/send_chain.py", "streamrelay/core/budgets/")),
    ("adapter", ("streamrelay/core/delivery/calls.py", "adapters/", "tests/unit/fakes.py")),
    ("ledger", ("streamrelay/core/records/ledger.py", "streamrelay/core/records/report.py")),
)
"""The stages in the order data flows, by path prefix (the first match wins)."""

SINKS = (
    "streamrelay/core/clock.py",
    "streamrelay/core/wake.py",
    "streamrelay/core/run/monitor.py",
    "streamrelay/core/run/timeline.py",
    "streamrelay/core/text/safe_text.py",
    "streamrelay/core/tasks.py",
    "streamrelay/core/events.py",
    "streamrelay/core/units.py",
    "streamrelay/core/media.py",
    "streamrelay/core/errors.py",
    "streamrelay/core/text/buffer.py",
)
"""Modules any stage may call: the clock, wake-ups, the watchers' feeds (the monitor, and the delivery timeline the
worker and the executor append to: downstream of every stage, nothing flows back from them), the shared
vocabulary (events, length units, media items, errors) and the run's one copy of the answer, which every stage reads
by ranges (a growing part's pushed :class:`~core.delivery.slots.PendingText` is sliced when its call is due)."""

CALLBACKS = {
    ("executor", "machine"): "the outcome goes back to the machine (Executor.perform's apply)",
    ("send chain", "executor"): "the chain makes the executor's call when its turn comes",
}
"""Calls against the flow that are the design's own callbacks."""


def stage_of(path: str) -> str | None:
    if path.startswith(SINKS):
        return None
    for name, prefixes in STAGES:
        if path.startswith(prefixes):
            return name
    return None


def project_path(frame: FrameType | None) -> tuple[str | None, FrameType | None]:
    """The nearest project frame at or above ``frame`` (library frames skipped), as a path from the root."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(ROOT) and "/.venv/" not in name and "/site-packages/" not in name:
            return name[len(ROOT) :], frame
        frame = frame.f_back
    return None, None


async def walk_one_delta() -> tuple[Counter[tuple[str, str, str]], dict[str, list[str]], Counter[tuple[str, str]]]:
    chat = MemoryChat()
    relay = Relay({"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), chat)}, MemoryLedger(), MonotonicClock())
    await relay.submit_line({"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}, "r")
    for i in range(5):  # a run under way: its preview exists, the delta is an edit
        await relay.submit_line({"kind": "text", "text": f"word{i} "}, "r")
        await asyncio.sleep(0.02)
    edges: Counter[tuple[str, str, str]] = Counter()
    visits: dict[str, list[str]] = {}
    budgets: Counter[tuple[str, str]] = Counter()
    """Per task: platform calls made (``call``) and asks of the rate budgets and 429 pauses (``ask``)."""

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee, _ = project_path(frame)
        if callee is None or callee.startswith("tests/unit/test_"):
            return
        caller, _ = project_path(frame.f_back)
        try:
            task = asyncio.current_task()
        except RuntimeError:
            task = None
        name = task.get_name().split(":")[0] if task is not None else "-"
        visits.setdefault(name, []).append(callee)
        if frame.f_code.co_name == "perform_call":
            budgets[(name, "call")] += 1
        elif callee.startswith("streamrelay/core/budgets/") and frame.f_code.co_name in (
            "remaining",
            "delay",
            "estimate",
        ):
            budgets[(name, "ask")] += 1
        if caller is not None and caller != callee:
            edges[(name, caller, callee)] += 1

    sys.setprofile(profile)
    try:
        await relay.submit_line({"kind": "text", "text": "delta "}, "r")
        for _ in range(200):
            await asyncio.sleep(0.005)
            if any("delta" in text for text in chat.messages.values()):
                break
    finally:
        sys.setprofile(None)
    assert any("delta" in text for text in chat.messages.values())
    await relay.submit_line({"kind": "end"}, "r")
    await relay.wait_done("r", 5)
    await relay.close()
    return edges, visits, budgets


async def test_one_delta_flows_one_way_through_the_stages() -> None:
    edges, visits, budgets = await walk_one_delta()
    order = {name: i for i, (name, _) in enumerate(STAGES)}
    against = []
    for task, caller, callee in edges:
        a, b = stage_of(caller), stage_of(callee)
        if a is None or b is None or a == b or order[a] < order[b]:
            continue
        if (a, b) not in CALLBACKS:
            against.append(f"{task}: {caller} -> {callee} ({a} -> {b})")
    for task, modules in visits.items():  # the bookkeeping the issue asks for
        stays = [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]
        print(f"{task}: {len(modules)} calls, {len(stays)} module stays in {len(set(modules))} modules")
    assert not against, "calls against the flow:\n" + "\n".join(sorted(against))
    stages_seen = {stage_of(m) for modules in visits.values() for m in modules}
    assert {"ingest", "journal", "run", "machine", "executor", "send chain", "adapter", "ledger"} <= stages_seen
    calls, asks = budgets[("reconciler", "call")], budgets[("reconciler", "ask")]
    print(f"reconciler: {calls} platform calls, {asks} asks of the rate budgets and pauses")
    assert calls >= 1 and asks <= calls, "the rate budgets are asked once per call (SendChain.grant)"
