"""Runs one case file (tests/cases/README.md): unit cases drive one core stage; scenario cases drive the
whole service — HTTP ingest → relay → the platform's real SDK (aiogram, slack-sdk, discord.py) → its mock
server on loopback — and read back what a person would see.

Result: :class:`CaseResult` with the transcript written as ``DIR/<id>.json`` by the CLI.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from pydantic import SecretStr

from streamrelay.adapters.registry import REGISTRY
from streamrelay.app.cases.expect import check_expectations
from streamrelay.app.cases.inputs import case_channel_settings, case_events, paced
from streamrelay.app.cases.result import CaseResult, call_record
from streamrelay.app.cases.web import run_web_scenario
from streamrelay.app.dry_run import DRY_RUN, seed_thread
from streamrelay.app.platform_loading import load_platforms
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.core.chunking import BreakKind, Chunker, ChunkParams
from streamrelay.core.clock import FakeClock, MonotonicClock
from streamrelay.core.events import DeliveryMode, TextMode, Visibility
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.text.assembler import TextAssembler
from streamrelay.core.text.chunk_checks import chunk_property_failures
from streamrelay.core.text.coalescer import Chunk, CoalesceParams, Coalescer
from streamrelay.core.units import LengthUnit

CASE_CONCURRENCY = 8
"""How many case files :func:`start_case_files` runs at once. A scenario mostly waits (on its paced events, its
channel's throttle, a scripted latency or ``retry_after``), each with its own mock and sidecar on free ports of
loopback in one event loop: the 58 handed cases took 60-110 s one at a time (one after the other summed), about
a fifth of that eight at a time."""


ONE_AT_A_TIME = frozenset({"discord"})
"""Platforms whose scenarios run one at a time, never beside another of theirs: discord.py keeps its API base URL
in a class attribute (``Route.BASE``), so two open Discord adapters in one process must share it, and each case's
mock listens on its own port (adapters/discord/connection.py refuses the second)."""


def case_platform(path: Path) -> str | None:
    """The platform the scenario case file ``path`` names (``channel.platform``); None for a unit case, or a file
    that cannot be read as a case (:func:`run_case_file` reports why)."""
    try:
        case = json.loads(path.read_text(encoding="utf-8"))
        platform = case.get("channel", {}).get("platform") if case.get("type") == "scenario" else None
    except (OSError, ValueError, AttributeError):
        return None
    return platform if isinstance(platform, str) else None


async def start_case_files(
    files: Sequence[Path], concurrency: int = CASE_CONCURRENCY
) -> list[asyncio.Task[CaseResult]]:
    """Start running the case files ``files``, at most ``concurrency`` at once, in their order; one task per file,
    in that order (await them in turn to report in the files' order); a platform of :data:`ONE_AT_A_TIME` one
    scenario at a time, in a slot of its own (``concurrency`` minus one slot per such platform for the others, at
    least one): its scenarios run one after the other from the start, beside the others, instead of each waiting
    for a slot behind every case queued before it (the four Discord scenarios, about 24 s one after the other, were
    the last to end of the 58 handed cases: 32 s of cases, 24 s with a slot of their own). The SDKs of the
    platforms the scenarios name are imported first, in a worker thread (aiogram: 5-6 CPU-seconds), so that no
    import inside the event loop holds up a running case's clock."""
    await asyncio.to_thread(load_platforms, {p for p in map(case_platform, files) if p is not None})
    alone = {platform: asyncio.Lock() for platform in ONE_AT_A_TIME}
    gate = asyncio.Semaphore(max(1, concurrency - len(alone)))

    async def one(path: Path) -> CaseResult:
        lock = alone.get(case_platform(path) or "")
        async with lock if lock is not None else gate:
            return await run_case_file(path)

    return [asyncio.create_task(one(path), name=f"case:{path.stem}") for path in files]


async def run_case_file(path: Path) -> CaseResult:
    """Load and run one case file."""
    case = json.loads(path.read_text(encoding="utf-8"))
    return await run_case(case, base_dir=path.resolve().parent.parent)


async def run_case(case: dict[str, Any], *, base_dir: Path) -> CaseResult:
    """Run one decoded case. ``base_dir`` is the folder that holds the cases folder (for stream files)."""
    started = time.monotonic()
    kind = case.get("type")
    try:
        if kind == "unit":
            result = _run_unit(case)
        elif kind == "scenario":
            result = await _run_scenario(case, base_dir)
        else:
            result = CaseResult(str(case.get("id")), str(kind), False, [f"unknown case type {kind!r}"])
    except Exception as exc:  # one broken case must not stop the others
        result = CaseResult(str(case.get("id")), str(kind), False, [f"the case crashed: {type(exc).__name__}: {exc}"])
    result.seconds = time.monotonic() - started
    return result


# --- unit cases -------------------------------------------------------------------------------------------


def _run_unit(case: dict[str, Any]) -> CaseResult:
    stage, expect, cid = case.get("stage"), case.get("expect", {}), case["id"]
    failures: list[str] = []
    if stage == "text":
        assembler = TextAssembler()
        for mode, text in case["events"]:
            assembler.apply(None, 0, TextMode(mode), text)
        visible = assembler.text(None, 0)
        transcript: dict[str, Any] = {"visible": visible}
        if "visible" in expect and visible != expect["visible"]:
            failures.append(f"visible text is {visible!r}, expected {expect['visible']!r}")
    elif stage == "chunker":
        p = case["params"]
        params = ChunkParams(
            min_chars=p["min_chars"],
            max_chars=p["max_chars"],
            break_preference=BreakKind(p.get("break_preference", "paragraph")),
            unit=LengthUnit(p.get("unit", "chars")),
        )
        chunker = Chunker(params)
        chunks: list[str] = []
        for piece in case["appends"]:
            chunks.extend(chunker.append(piece))
        chunks.extend(chunker.drain(force=True))
        transcript = {"chunks": chunks}
        if "chunks" in expect and chunks != expect["chunks"]:
            failures.append(f"chunks are {chunks!r}, expected {expect['chunks']!r}")
        if "properties" in expect:
            failures.extend(chunk_property_failures(chunks, expect["properties"], params, case["appends"]))
    elif stage == "coalescer":
        p = case["params"]
        clock = FakeClock()
        coalescer = Coalescer(
            CoalesceParams(p["min_chars"], p["max_chars"], p["idle_ms"], p.get("joiner", "\n\n")), clock
        )
        blocks = []
        for item in case["inputs"]:
            at = item.get("at_ms")
            if at is not None and at / 1000 > clock.now():
                clock.advance(at / 1000 - clock.now())
            blocks.extend(coalescer.poll(clock.now()))
            chunk = Chunk(
                text=item["text"],
                visibility=Visibility(item.get("visibility", "answer")),
                message=item.get("message", 0),
                reply_to=item.get("reply_to"),
            )
            blocks.extend(coalescer.push(chunk, clock.now()))
        blocks.extend(coalescer.flush())
        texts = [b.text for b in blocks]
        transcript = {"blocks": texts}
        if "blocks" in expect and texts != expect["blocks"]:
            failures.append(f"blocks are {texts!r}, expected {expect['blocks']!r}")
    else:
        return CaseResult(cid, "unit", False, [f"unknown unit stage {stage!r}: text, chunker or coalescer"])
    return CaseResult(cid, "unit", not failures, failures, transcript)


# --- scenario cases ---------------------------------------------------------------------------------------


async def _run_scenario(case: dict[str, Any], base_dir: Path) -> CaseResult:
    cid, channel = case["id"], case["channel"]
    platform = channel.get("platform")
    if platform == "web":
        return await run_web_scenario(case, base_dir)
    dry = DRY_RUN.get(platform) if isinstance(platform, str) else None
    if dry is None:
        why = f"platform {platform!r} is not one streamrelay knows ({', '.join(REGISTRY)})"
        return CaseResult(cid, "scenario", False, [why], unsupported=why)
    mock = dry.make_mock(False)
    mock.configure_from_case(case)
    api_base = await mock.start()
    settings = case_channel_settings(channel, api_base)
    policy = settings.policy("case")
    relay = Relay({"case": make_runtime("case", settings, SecretStr(dry.token))}, MemoryLedger(), MonotonicClock())
    token = secrets.token_urlsafe(16)
    sidecar = Sidecar(relay, token=token)
    url = await sidecar.start()
    target = dry.target(group=channel.get("chat") == "group", native=settings.delivery is DeliveryMode.NATIVE)
    seed_thread(mock, target)
    chat_id = target.chat_id
    run = f"case-{cid}"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"}
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=900) as client:
            t0 = time.monotonic()
            posted = await client.post(
                f"/v1/runs/{run}/events", content=paced(case_events(case, run, target, base_dir), t0)
            )
            failures = [] if posted.status_code == 200 else [f"ingest answered {posted.status_code}: {posted.text}"]
            got = await client.get(f"/v1/runs/{run}", params={"wait_s": 600})
            report = got.json()
        transcript = {
            "calls": [call_record(c, t0) for c in mock.calls],
            "chat": [{"message_id": mid, "text": text} for mid, text in mock.visible(chat_id)],
            "pipeline": [unit.model_dump(mode="json") for unit in relay.pipeline(run) or []],
            "report": report,
        }
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()
    if not report.get("done"):
        failures.append(f"the run did not finish: report {report}")
    ctx = {"limit": policy.max_units, "unit": str(policy.unit)}
    failures.extend(check_expectations(case.get("expect", {}), transcript, ctx))
    return CaseResult(cid, "scenario", not failures, failures, transcript)
