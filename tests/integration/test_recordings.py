"""A recorded stream through the real service into the mock Telegram chat as Markdown: rendered to text +
entities, every part fits once rendered. (Every recording on every platform: test_platforms.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from streamrelay.app.ingest_client import recording_lines
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.units import LengthUnit, text_units
from tests.integration.conftest import INGEST_TOKEN, start_stack, stop_stack

STREAMS = sorted((Path(__file__).resolve().parents[1] / "streams").glob("*/*.jsonl"))


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
