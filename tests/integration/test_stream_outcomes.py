"""A stream's own error, refusal or length cut, streamed tool arguments and items no chat can show, replayed from the
protocols' upstream fixtures (tests/streams/<format>/upstream/, README there) exactly as ``streamrelay replay`` sends
them (run.start with the format, every raw line, ``end`` ``ok``) through the real sidecar into the mock Telegram chat;
asserted on what the person sees, the report, the pipeline lane and the action gate (issue 26)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from streamrelay.app.client import RelayClient
from streamrelay.app.ingest_client import detect_format, recording_lines, replay
from streamrelay.core.contracts.units import MalformedToolCallUnit, RunEndUnit, ToolCallUnit
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.stage import FAILURE_NOTICE, PROGRESS_DONE, PROGRESS_FAILED
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import INGEST_TOKEN, start_stack, stop_stack

pytestmark = pytest.mark.timeout(120)

UPSTREAM = Path(__file__).resolve().parents[1] / "streams"
CHAT = 4242


def upstream(name: str) -> Path:
    """A stream under tests/streams/<format>/upstream/."""
    fmt, stem = name.split("/")
    return UPSTREAM / fmt / "upstream" / f"{stem}.jsonl"


@dataclass
class Replayed:
    report: dict[str, Any]
    shown: list[str]
    units: list[Any]
    gate: dict[str, str]
    """The gate's verdict on each tool call of the lane (complete or malformed), once the run ended."""


@pytest.fixture
async def sidecar_for() -> AsyncIterator[Any]:
    """Start a sidecar (mock Telegram, a delivery mode) on demand; everything is stopped at the end."""
    stacks: list[Any] = []

    async def start(delivery: str) -> tuple[MockTelegram, str]:
        mock, relay, sidecar = await start_stack(
            MemoryLedger(), max_body_bytes=16 * 2**20, max_line_bytes=2**20, delivery=delivery
        )
        stacks.append((mock, relay, sidecar))
        return mock, sidecar.url

    yield start
    for mock, relay, sidecar in stacks:
        await stop_stack(mock, relay, sidecar)


async def replayed(sidecar_for: Any, name: str, delivery: str = "preview") -> Replayed:
    """Replay the upstream stream ``name`` as ``streamrelay replay`` does; what the chat shows, the report, the lane."""
    mock, url = await sidecar_for(delivery)
    path = upstream(name)
    run = path.stem
    report = await replay(
        url,
        INGEST_TOKEN,
        run=run,
        channel="telegram",
        chat_id=CHAT,
        fmt=detect_format(path),
        events=recording_lines(path),
        wait_s=60,
    )
    async with RelayClient(url, INGEST_TOKEN) as client:
        units = await client.units(run)
        calls = [u.id for u in units if isinstance(u, ToolCallUnit | MalformedToolCallUnit)]
        gate = {call: str((await client.gate(run, call)).verdict) for call in calls}
    return Replayed(report, [m.text for m in mock.messages(CHAT)], units, gate)


def run_end(units: list[Any]) -> RunEndUnit:
    end = units[-1]
    assert isinstance(end, RunEndUnit), units
    return end


FAILURES = [
    # (stream, the text said before the failure (None: nothing), the protocol's own words in the notice)
    ("ag-ui/run-error-after-text", "Processing...", "An error occurred while processing the request"),
    ("ai-sdk-ui/error-finish-error", None, "The model is overloaded, try again later"),
    ("a2a/jsonrpc-error-after-first-event", None, "-32603: Internal error"),
    ("openai-responses/error-insufficient-quota", None, "insufficient_quota: You exceeded your current quota"),
    ("openai-responses/failed-only", None, "rate_limit_exceeded: Request too large for gpt-4o-mini"),
    ("anthropic/overloaded-after-text", "Hello there", "overloaded_error: Overloaded"),
]


@pytest.mark.parametrize(("name", "said", "words"), FAILURES, ids=[f[0] for f in FAILURES])
async def test_a_streams_own_failure_fails_the_run(sidecar_for: Any, name: str, said: str | None, words: str) -> None:
    seen = await replayed(sidecar_for, name)
    if said is not None:
        assert seen.shown[0] == said  # what was said stays, as it was said
    notice = seen.shown[-1]
    assert notice.startswith(FAILURE_NOTICE) and words in notice, seen.shown
    assert seen.report["end_status"] == "error" and seen.report["status"] != "delivered", seen.report
    assert any(words in e for e in seen.report["errors"])
    end = run_end(seen.units)
    assert (str(end.status), end.committed) == ("error", False)


async def test_a_failed_stream_in_progress_mode_does_not_say_done(sidecar_for: Any) -> None:
    seen = await replayed(sidecar_for, "ai-sdk-ui/error-finish-error", delivery="progress")
    assert seen.shown[0].startswith(PROGRESS_FAILED) and not any(t.startswith(PROGRESS_DONE) for t in seen.shown)
    assert seen.report["end_status"] == "error"


REFUSALS = [
    ("anthropic/refusal-explained", None, "This request was refused due to policy."),
    ("anthropic/refusal-no-block", None, "was blocked under Anthropic's Usage Policy."),
    ("anthropic/hi-then-refusal", "hi", "This request was refused due to policy."),
]


@pytest.mark.parametrize(("name", "said", "words"), REFUSALS, ids=[r[0] for r in REFUSALS])
async def test_a_refusal_is_told_with_its_explanation(
    sidecar_for: Any, name: str, said: str | None, words: str
) -> None:
    seen = await replayed(sidecar_for, name)
    if said is not None:
        assert seen.shown[0] == said
    assert words in seen.shown[-1], seen.shown  # the provider's explanation, not an empty chat
    assert seen.report["end_status"] == "refused" and seen.report["status"] != "delivered", seen.report
    assert run_end(seen.units).committed is False


CUTS = [("openai-chat/length-cut-json", '{"', "(length)"), ("anthropic/max-tokens-json", '{"value":', "(max_tokens)")]


@pytest.mark.parametrize(("name", "said", "reason"), CUTS, ids=[c[0] for c in CUTS])
async def test_a_length_cut_is_shown_with_a_notice_and_reported_cut(
    sidecar_for: Any, name: str, said: str, reason: str
) -> None:
    seen = await replayed(sidecar_for, name)
    assert seen.shown[0] == said
    assert "cut off: the model reached its output limit" in seen.shown[-1] and reason in seen.shown[-1]
    assert seen.report["end_status"] == "cut" and seen.report["status"] == "partial", seen.report
    assert run_end(seen.units).committed is False


async def test_gemini_streamed_arguments_reach_the_lane_whole(sidecar_for: Any) -> None:
    """Vertex's streamFunctionCallArguments: every line taken (none refused), both calls whole on the lane."""
    seen = await replayed(sidecar_for, "gemini/streamed-function-call-args")
    calls = [(u.name, u.args) for u in seen.units if isinstance(u, ToolCallUnit)]
    assert calls == [
        ("controlLight", {"room": "living", "brightness": 50, "color": "warm white"}),
        ("setThermostat", {"temp": 21}),
    ]
    assert seen.report["end_status"] == "ok"
    assert run_end(seen.units).committed is True
    assert seen.gate == {"call-0-1": "run", "call-0-2": "run"}  # whole calls of a run that ended well


async def test_gemini_arguments_cut_mid_stream_are_never_a_call(sidecar_for: Any) -> None:
    seen = await replayed(sidecar_for, "gemini/streamed-args-cut")
    assert not any(isinstance(u, ToolCallUnit) for u in seen.units)
    cut = [u for u in seen.units if isinstance(u, MalformedToolCallUnit)]
    assert [u.name for u in cut] == ["weather"]
    assert seen.gate == {cut[0].id: "refuse"}
    assert seen.report["end_status"] == "cut"


async def test_a_responses_custom_tool_call_reaches_the_lane(sidecar_for: Any) -> None:
    seen = await replayed(sidecar_for, "openai-responses/custom-tool")
    calls = [(u.id, u.name, u.args) for u in seen.units if isinstance(u, ToolCallUnit)]
    assert calls == [("call_custom_sql_001", "write_sql", {"input": "SELECT * FROM users WHERE age > 25"})]


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("openai-responses/mcp-tool-approval", "not shown: an MCP approval request (zip1: create_short_url)"),
        ("openai-responses/image-generation", "not shown: an image the model generated: given inline (base64)"),
    ],
)
async def test_what_no_chat_can_show_is_reported_not_dropped(sidecar_for: Any, name: str, line: str) -> None:
    seen = await replayed(sidecar_for, name, delivery="progress")
    assert any(line in e for e in seen.report["errors"]), seen.report
    assert any(line in t for t in seen.shown), seen.shown  # the progress message says so too
    assert seen.report["end_status"] == "ok"  # told, and the run still ends as it ended


async def test_the_gate_refuses_the_calls_of_a_run_whose_stream_failed(sidecar_for: Any) -> None:
    """A real recorded tool call (tests/streams/anthropic/tool-use-json.jsonl), then the stream's own error: the call
    is whole on the lane, but the run never passed its commit point, so the gate refuses it (a tool outside the
    catalog counts as irreversible)."""
    _, url = await sidecar_for("preview")
    path = UPSTREAM / "anthropic" / "tool-use-json.jsonl"
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    events = [*recording_lines(path), error]
    report = await replay(
        url,
        INGEST_TOKEN,
        run="tool-then-error",
        channel="telegram",
        chat_id=CHAT,
        fmt=detect_format(path),
        events=events,
        wait_s=60,
    )
    async with RelayClient(url, INGEST_TOKEN) as client:
        units = await client.units("tool-then-error")
        call = next(u for u in units if isinstance(u, ToolCallUnit))
        verdict = await client.gate("tool-then-error", call.id)
    assert verdict.verdict == "refuse" and "ended (error)" in verdict.reason
    assert report["end_status"] == "error" and run_end(units).committed is False
