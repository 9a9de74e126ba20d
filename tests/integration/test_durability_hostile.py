"""Durable runs under hostile or unlucky input, found by a reviewer trying to break them: the same run on several
connections at once, an agent coming back while its idle run closes, a seq too large for SQLite."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.app.dry_run import DRY_RUN
from tests.integration.test_durability import TOKEN, _config, _mock, _ready, _serve, _serve_here, _until
from tests.ports import free_port as _free_port

ANSWER = "Your refund of 49.99 EUR for order A-1029 was approved today. It reaches your card within 14 days."


def _nd(lines: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _run_lines(target: dict[str, Any]) -> list[dict[str, Any]]:
    pieces = [ANSWER[i : i + 10] for i in range(0, len(ANSWER), 10)]
    lines: list[dict[str, Any]] = [{"kind": "run.start", "channel": "chat", "target": target, "seq": 0}]
    lines += [{"kind": "text", "mode": "delta", "text": p, "seq": i + 1} for i, p in enumerate(pieces)]
    return [*lines, {"kind": "end", "status": "ok", "seq": len(pieces) + 1}]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("platform", "mode"), [("telegram", "block"), ("slack", "preview"), ("telegram", "final")])
async def test_the_same_run_posted_on_two_connections_at_once_shows_its_final_once(
    tmp_path: Path, platform: str, mode: str
) -> None:
    """An agent that retries a request while the first is still in flight (or two workers of one run)."""
    dry = DRY_RUN[platform]
    target = dry.target()
    async with _mock(platform) as mock:
        port = _free_port()
        config = _config(tmp_path, platform, mock.base_url, port, delivery=mode)
        log = tmp_path / "sidecar.log"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as client:
            with _serve(config, dry.token, log) as proc:
                await _ready(client, proc, log)
                body = _nd(_run_lines(target.model_dump()))
                answers = await asyncio.gather(*[client.post("/v1/runs/r1/events", content=body) for _ in range(3)])
                assert all(a.status_code == 200 for a in answers)
                report = (await client.get("/v1/runs/r1", params={"wait_s": 30})).json()
                await asyncio.sleep(1)
    chat = [text for _, text in mock.visible(target.chat_id)]
    assert chat == [ANSWER], chat  # once, not once per connection
    assert report["status"] == "delivered" and len(report["message_ids"]) == len(chat)


@pytest.mark.timeout(120)
async def test_lines_accepted_while_an_idle_run_is_closing_are_not_lost(tmp_path: Path) -> None:
    """The idle timeout fires, the close is slow (its notice's send waits), the agent comes back meanwhile: its
    lines must not be answered accepted and then never shown: they are refused with a 409 saying they were not taken
    (the run was closed; a 200 "dropped" would read as taken to an agent that checks the status)."""
    dry = DRY_RUN["telegram"]
    target = dry.target()
    async with _mock("telegram") as mock:
        port = _free_port()
        config = _config(tmp_path, "telegram", mock.base_url, port)
        config.write_text(config.read_text().replace("run_idle_timeout_s = 4", "run_idle_timeout_s = 3"))
        log = tmp_path / "sidecar.log"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as client:
            with _serve(config, dry.token, log) as proc:
                await _ready(client, proc, log)
                first = [
                    {"kind": "run.start", "channel": "chat", "target": target.model_dump(), "seq": 0},
                    {"kind": "text", "mode": "delta", "text": "The refund was ", "seq": 1},
                ]
                assert (await client.post("/v1/runs/r/events", content=_nd(first))).status_code == 200
                await _until(lambda: len(mock.visible(target.chat_id)) == 1, 10, "the preview")
                mock.set_latency("sendMessage", [0, 2500, 2500])  # the idle notice's send is slow
                await asyncio.sleep(3.6)
                late = [
                    {"kind": "text", "mode": "delta", "text": "approved: 49.99 EUR.", "seq": 2},
                    {"kind": "end", "status": "ok", "seq": 3},
                ]
                refused = await client.post("/v1/runs/r/events", content=_nd(late))
                report = (await client.get("/v1/runs/r", params={"wait_s": 30})).json()
    chat = " ".join(text for _, text in mock.visible(target.chat_id))
    answer = refused.text
    assert (refused.status_code == 409 and "not taken" in answer) or "approved" in chat, (answer, chat, report)
    assert report["done"] and report["status"] == "partial"


@pytest.mark.timeout(120)
async def test_a_seq_beyond_sqlite_integer_does_not_stop_the_sidecar_from_starting(tmp_path: Path) -> None:
    dry = DRY_RUN["discord"]
    target = dry.target()
    async with _mock("discord") as mock:
        port = _free_port()
        config = _config(tmp_path, "discord", mock.base_url, port)
        log = tmp_path / "sidecar.log"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as client:
            with _serve(config, dry.token, log) as first:
                await _ready(client, first, log)
                lines = [
                    {"kind": "run.start", "channel": "chat", "target": target.model_dump(), "seq": 0},
                    {"kind": "text", "mode": "delta", "text": "Hello there.", "seq": 1},
                    {"kind": "end", "status": "ok", "seq": 2**63},
                ]
                await client.post("/v1/runs/big/events", content=_nd(lines))
                await client.get("/v1/runs/big", params={"wait_s": 20})
                first.send_signal(signal.SIGKILL)
                first.wait(10)
            async with _serve_here(config, dry.token) as second:
                await _ready(client, second, log)  # it starts (the seq was refused at ingest, nothing to choke on)
