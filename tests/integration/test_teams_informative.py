"""Teams' informative updates end to end: HTTP ingest → relay → delivery machine → the Teams adapter (the Teams SDK
over HTTP) → the stateful Teams mock, which holds the stream rules Microsoft documents (a stream's first
``streamSequence`` is 1 and each next one higher, an informative update at most 1,000 characters, the final without
a sequence, one request a second: https://learn.microsoft.com/en-us/microsoftteams/platform/bots/streaming-ux).

In a personal chat a run's status (a ``status`` event, a ``phase``, a tool starting) shows as informative updates:
first, before the answer's streaming chunks (an informative update opens the stream, the answer goes on in it), and
between them; then the final message completes the one streamed activity. A group chat (no native streaming) gets no
informative update and no stream at all.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from streamrelay.app.cases.inputs import case_channel_settings, case_events, paced
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.events import DeliveryMode
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.calls import RecordedCall

ANSWER = "Refunds take five working days. Ask the desk for anything else."
LONG_STATUS = "Reading " + "the refund policy, " * 80  # 1,528 characters: cut to 1,000 with an ellipsis

EVENTS: list[dict[str, Any]] = [
    {"kind": "status", "text": "Searching the docs…", "at_ms": 0},
    {"kind": "text", "mode": "delta", "text": "Refunds take five ", "at_ms": 1300},
    {"kind": "tool_call", "id": "c1", "name": "lookup", "state": "start", "at_ms": 1400},
    {"kind": "phase", "name": LONG_STATUS, "at_ms": 1450},
    {"kind": "text", "mode": "delta", "text": "working days. Ask the desk ", "at_ms": 2700},
    {"kind": "text", "mode": "delta", "text": "for anything else.", "at_ms": 2800},
    {"kind": "end", "status": "ok", "at_ms": 3000},
]


async def _run(chat: str) -> tuple[list[RecordedCall], list[tuple[Any, str]], dict[str, Any]]:
    """One run of :data:`EVENTS` on a ``native`` Teams channel in a ``chat`` (``private`` or ``group``): the mock's
    calls, what the chat shows, and the run's report."""
    case: dict[str, Any] = {
        "id": f"informative-{chat}",
        "channel": {"platform": "teams", "delivery": "native", "chat": chat, "format": "plain", "throttle_ms": 1000},
        "events": [dict(e) for e in EVENTS],
        "mock": {"rate_limits": "documented"},
    }
    dry = DRY_RUN["teams"]
    mock = dry.make_mock(False)
    mock.configure_from_case(case)
    api_base = await mock.start()
    settings = case_channel_settings(case["channel"], api_base)
    relay = Relay({"case": make_runtime("case", settings, SecretStr(dry.token))}, MemoryLedger(), MonotonicClock())
    token = secrets.token_urlsafe(16)
    sidecar = Sidecar(relay, token=token)
    url = await sidecar.start()
    target = dry.target(group=chat == "group", native=settings.delivery is DeliveryMode.NATIVE)
    run = case["id"]
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"}
    try:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
            lines = case_events(case, run, target, Path(__file__).parent)  # no stream file: the folder is unused
            posted = await client.post(f"/v1/runs/{run}/events", content=paced(lines, time.monotonic()))
            assert posted.status_code == 200, posted.text
            report = (await client.get(f"/v1/runs/{run}", params={"wait_s": 30})).json()
        return list(mock.calls), list(mock.visible(target.chat_id)), report
    finally:
        await sidecar.stop()
        await relay.close()
        await mock.stop()


@pytest.mark.timeout(60)
async def test_a_personal_chat_shows_status_lines_as_informative_updates_then_chunks_then_the_final() -> None:
    calls, chat, report = await _run("private")
    assert [c for c in calls if not c.ok] == []  # the mock refused nothing: sequences, sizes and pace as documented
    assert report["status"] == "delivered" and report["done"]
    assert [text for _, text in chat] == [ANSWER]  # one message, whole, once
    streamed = [c for c in calls if c.description and c.description.startswith("stream")]
    kinds = [c.description.split(" #")[0] for c in streamed if c.description]
    assert kinds[0] == "stream start (informative)" and streamed[0].text == "Searching the docs…"
    assert kinds[-1] == "stream final" and kinds.count("stream final") == 1
    assert "stream streaming" in kinds
    first_chunk = kinds.index("stream streaming")
    # A status line between the answer's chunks: an informative update after the first chunk, before the final.
    between = [c for c in streamed[first_chunk:-1] if c.description and "informative" in c.description]
    assert between, kinds
    assert all(len(c.text or "") <= 1000 for c in between)
    assert any((c.text or "").endswith("…") and (c.text or "").startswith("Reading the refund") for c in between)
    # One stream: every activity after the first names the stream the informative update opened.
    assert {c.message_id for c in streamed} == {streamed[0].message_id}
    sequences = [int(c.description.split("#")[1]) for c in streamed[1:-1] if c.description]
    assert sequences == sorted(set(sequences)) and sequences[0] == 2


@pytest.mark.timeout(60)
async def test_a_group_chat_gets_no_informative_update_and_no_stream() -> None:
    calls, chat, report = await _run("group")
    assert report["status"] == "delivered" and report["done"]
    assert [text for _, text in chat] == [ANSWER]
    assert [c.description for c in calls if c.description and c.description.startswith("stream")] == []
    assert all("Searching the docs" not in (c.text or "") for c in calls)
