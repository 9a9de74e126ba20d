"""Every recorded provider stream through the real service into the mock Telegram chat (documented rate
limits on): the chat shows the recording's answer once and whole, every message fits, fences balance,
no 429."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from app.demo import recorded_answer
from app.ingest_client import detect_format, recording_lines
from core.chunk_checks import content_key, fences_balanced
from core.ledger import MemoryLedger
from core.units import LengthUnit, text_units
from tests.integration.conftest import INGEST_TOKEN, start_stack, stop_stack

STREAMS = sorted((Path(__file__).resolve().parents[1] / "streams").glob("*/*.jsonl"))
CASES = [pytest.param(path, "preview", id=f"{path.stem}-preview") for path in STREAMS] + [
    pytest.param(path, "block", id=f"{path.stem}-block")
    for path in STREAMS
    if path.stem in ("markdown-long-fences", "multi-message-tools", "web-search-annotations")
]


@pytest.mark.parametrize(("path", "delivery"), CASES)
async def test_a_recording_reaches_the_chat_once_and_whole(path: Path, delivery: str) -> None:
    fmt = detect_format(path)
    events = recording_lines(path)
    mock, relay, sidecar = await start_stack(
        MemoryLedger(), max_body_bytes=16 * 2**20, max_line_bytes=2**20, delivery=delivery, throttle_ms=500
    )
    try:
        start = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 77}, "format": fmt}
        body = "".join(json.dumps(e) + "\n" for e in [start, *events, {"kind": "end", "status": "ok"}])
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=120) as client:
            answer = await client.post("/v1/runs/rec/events", content=body)
            assert answer.status_code == 200, answer.text
            report = (await client.get("/v1/runs/rec", params={"wait_s": 90})).json()
        texts = [t for _, t in mock.visible(77)]
        assert report["status"] == "delivered", report
        assert content_key("\n".join(texts)) == content_key(recorded_answer(events, fmt))
        assert all(text_units(t, LengthUnit.UTF16) <= 4096 for t in texts)
        assert all(fences_balanced(t) for t in texts)
        assert not any(c.status == 429 for c in mock.calls)
    finally:
        await stop_stack(mock, relay, sidecar)


async def test_markdown_parts_fit_once_rendered() -> None:
    path = next(p for p in STREAMS if p.stem == "markdown-long-fences")
    events = recording_lines(path)
    mock, relay, sidecar = await start_stack(
        MemoryLedger(), max_body_bytes=16 * 2**20, max_line_bytes=2**20, delivery="final", format="markdown", limit=1000
    )
    try:
        start = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 78}, "format": "anthropic"}
        body = "".join(json.dumps(e) + "\n" for e in [start, *events, {"kind": "end", "status": "ok"}])
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=120) as client:
            assert (await client.post("/v1/runs/md/events", content=body)).status_code == 200
            report = (await client.get("/v1/runs/md", params={"wait_s": 90})).json()
        assert report["status"] == "delivered", report
        stored = mock.messages(78)
        assert len(stored) >= 9
        assert all(text_units(m.text, LengthUnit.UTF16) <= 1000 for m in stored)
        assert sum(len(m.entities) for m in stored) > 50  # rendered as text + entities
    finally:
        await stop_stack(mock, relay, sidecar)
