"""Erasure (docs/retention.md): a run's text removed from every store the sidecar keeps, and found nowhere after.

One sidecar (SQLite journal and ledger files, the Telegram mock) delivers two runs, A and B, each with a unique marker
word in its answer; A's last block is refused (403), so the desk keeps its text, and A gets a correction whose new text
carries the marker too. ``DELETE /v1/runs/A`` then erases A, and the test searches every store for A's marker: the
SQLite files byte for byte (the database, its write-ahead log and shared-memory files), what the relay keeps in memory
of finished runs, the adapters' render caches, every read route of the run (report, pipeline lane, corrections, the
desk), and every log record of the whole test at DEBUG. B's text is untouched. The platform (the mock chat) still shows
what was delivered: erasure is of the sidecar's copy, not of the chat.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.adapters.sqlite.journal import SqliteJournal
from streamrelay.app.cli import app
from streamrelay.app.service import Sidecar, make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.run.corrections import Corrections
from streamrelay.core.run.desk import Desk
from streamrelay.core.run.relay import Relay
from streamrelay.mocks.telegram import MockTelegram
from tests.integration.conftest import BOT_TOKEN, INGEST_TOKEN

MARK_A = "quokka-vermilion-5521"
MARK_B = "heron-cobalt-8830"
BLOCKS_A = (f"Your order {MARK_A} shipped.", "It arrives on Friday.", f"Track it with code {MARK_A}.")
BLOCKS_B = (f"Order {MARK_B} is ready.", "Pick it up any time.")


def _body(run_blocks: tuple[str, ...], chat: int) -> str:
    events: list[dict[str, Any]] = [{"kind": "run.start", "channel": "telegram", "target": {"chat_id": chat}}]
    for block in run_blocks:
        events += [{"kind": "text", "text": block}, {"kind": "block_end"}]
    events.append({"kind": "end", "status": "ok"})
    return "".join(json.dumps(e) + "\n" for e in events)


def _files(tmp_path: Path) -> list[Path]:
    return sorted(p for p in tmp_path.iterdir() if p.name.startswith(("ledger", "journal")))


def _in_files(tmp_path: Path, marker: str) -> list[str]:
    return [p.name for p in _files(tmp_path) if marker.encode() in p.read_bytes()]


async def test_an_erased_run_is_found_nowhere_and_other_runs_are_untouched(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with MockTelegram() as mock:
        settings = ChannelSettings.model_validate(
            {
                "platform": "telegram",
                "api_base": mock.base_url,
                "throttle_ms": 0,
                "delivery": "block",
                "typing": False,
                "coalesce": {"min_chars": 1, "max_chars": 4000, "idle_ms": 0},
            }
        )
        runtime = make_runtime("telegram", settings, SecretStr(BOT_TOKEN))
        ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
        journal = await SqliteJournal.open(tmp_path / "journal.sqlite3")
        relay = Relay({"telegram": runtime}, ledger, MonotonicClock(), journal=journal)
        desk = Desk(ledger, ledger, relay.channels, MonotonicClock())
        corrections = Corrections(ledger, ledger, relay.channels, MonotonicClock())
        sidecar = Sidecar(relay, token=INGEST_TOKEN, desk=desk, corrections=corrections)
        await sidecar.start()
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        try:
            async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
                mock.add_fault(
                    "sendMessage", 3, {"status": 403, "description": "Forbidden: bot was blocked by the user"}
                )
                assert (await client.post("/v1/runs/A/events", content=_body(BLOCKS_A, 7))).status_code == 200
                report = (await client.get("/v1/runs/A", params={"wait_s": 20})).json()
                assert report["done"] and report["failed"] == 1, report
                assert (await client.post("/v1/runs/B/events", content=_body(BLOCKS_B, 8))).status_code == 200
                assert (await client.get("/v1/runs/B", params={"wait_s": 20})).json()["status"] == "delivered"
                fix = {"kind": "run.correct", "id": "fix-1", "text": f"Corrected: order {MARK_A} ships Monday."}
                corrected = await client.post("/v1/runs/A/corrections", json=fix)
                assert corrected.status_code == 200, corrected.text
                desk_before = (await client.get("/v1/deliveries")).json()["deliveries"]
                assert [d["run"] for d in desk_before] == ["A"]
                entry = (await client.get(f"/v1/deliveries/{desk_before[0]['id']}")).json()
                assert MARK_A in json.dumps(entry)
                assert _in_files(tmp_path, MARK_A), "the marker should be in the ledger before the erasure"

                active = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 9}}
                assert (await client.post("/v1/runs/C/events", json=active)).status_code == 200
                refused = await client.delete("/v1/runs/C")
                assert refused.status_code == 409 and "still active" in refused.json()["error"]
                assert (await client.delete("/v1/runs/nope")).status_code == 404
                assert (await client.delete("/v1/runs/A", headers={"Authorization": "Bearer x"})).status_code == 401

                erased = await client.delete("/v1/runs/A")
                assert erased.status_code == 200, erased.text
                body = erased.json()
                assert body["erased"] is True and body["removed"]["memory"] == 1 and body["removed"]["ledger"] >= 3
                again = (await client.delete("/v1/runs/A")).json()
                assert again["removed"] == {"memory": 0, "journal": 0, "ledger": 0}

                # every read route of the run: ids and counts, no text
                reads = [
                    await client.get("/v1/runs/A"),
                    await client.get("/v1/runs/A/pipeline"),
                    await client.get("/v1/runs/A/corrections"),
                    await client.get("/v1/deliveries", params={"state": "all"}),
                    await client.get(f"/v1/deliveries/{desk_before[0]['id']}"),
                    await client.get("/v1/runs"),
                ]
                for answer in reads:
                    assert MARK_A not in answer.text, answer.request.url
                after = reads[0].json()
                assert after["confirmed"] == report["confirmed"]
                assert after["message_ids"] == report["message_ids"]
                b_report = (await client.get("/v1/runs/B")).json()
                assert b_report["status"] == "delivered" and b_report["confirmed"] == len(BLOCKS_B)
        finally:
            await sidecar.stop()
            await relay.close()

        # memory: the finished runs kept, the adapters' renderings
        assert "A" not in relay._finished
        render = getattr(runtime.adapter, "render", None)
        assert render is not None and len(render) == 0
        assert MARK_A not in repr(list(relay._finished.items()))
        await ledger.close()
        await journal.close()
        # the files, byte for byte (database, -wal, -shm)
        assert _files(tmp_path), "no SQLite files found"
        assert _in_files(tmp_path, MARK_A) == []
        assert _in_files(tmp_path, MARK_B) != []  # B untouched
        reopened = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
        try:
            b_parts = await reopened.parts("B")
            assert [p.shown for p in b_parts] == list(BLOCKS_B)
            a_parts = await reopened.parts("A")
            assert a_parts and all(p.shown is None for p in a_parts)
            assert [p.message_id for p in a_parts if p.message_id] != []  # ids kept
        finally:
            await reopened.close()
        # the chat still shows what was delivered: the platform's copy is not the sidecar's to erase
        assert any(MARK_A in text for _, text in mock.visible(7))

    # no log record of the whole test (DEBUG included) carries the text
    for record in caplog.records:
        assert MARK_A not in record.getMessage(), record.name
        assert MARK_A not in json.dumps({k: str(v) for k, v in vars(record).items()}), record.name
    await asyncio.sleep(0)


async def test_text_retention_drops_the_text_of_runs_ended_long_enough_ago(tmp_path: Path) -> None:
    """``text_retention_hours`` on one channel: its runs' text goes once they ended that long ago (the relay asked
    with a clock an hour and a second later), byte for byte; the report and message ids stay; a channel without it
    keeps its text."""
    async with MockTelegram() as mock:
        common = {"platform": "telegram", "api_base": mock.base_url, "throttle_ms": 0, "delivery": "block"}
        kept = ChannelSettings.model_validate(common)
        brief = ChannelSettings.model_validate({**common, "text_retention_hours": 1})
        assert brief.policy("brief").text_retention_s == 3600.0
        channels = {
            "telegram": make_runtime("telegram", kept, SecretStr(BOT_TOKEN)),
            "brief": make_runtime("brief", brief, SecretStr(BOT_TOKEN)),
        }
        ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
        journal = await SqliteJournal.open(tmp_path / "journal.sqlite3")
        relay = Relay(channels, ledger, MonotonicClock(), journal=journal)
        sidecar = Sidecar(relay, token=INGEST_TOKEN)
        await sidecar.start()
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        try:
            async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
                short = _body(BLOCKS_A, 7).replace('"channel": "telegram"', '"channel": "brief"')
                assert (await client.post("/v1/runs/A/events", content=short)).status_code == 200
                assert (await client.post("/v1/runs/B/events", content=_body(BLOCKS_B, 8))).status_code == 200
                reports = [(await client.get(f"/v1/runs/{r}", params={"wait_s": 20})).json() for r in "AB"]
                assert [r["status"] for r in reports] == ["delivered", "delivered"]
                assert await relay.expire_texts(time.time()) == []  # not an hour yet
                assert await relay.expire_texts(time.time() + 3601) == ["A"]
                assert await relay.expire_texts(time.time() + 3601) == []  # nothing left to drop
                after = await client.get("/v1/runs/A")
                assert MARK_A not in after.text and after.json()["message_ids"] == reports[0]["message_ids"]
        finally:
            await sidecar.stop()
            await relay.close()
            await ledger.close()
            await journal.close()
    assert _in_files(tmp_path, MARK_A) == []
    assert _in_files(tmp_path, MARK_B) != []


async def test_erasing_a_conversation_erases_each_of_its_runs_and_no_other(tmp_path: Path) -> None:
    async with MockTelegram() as mock:
        settings = ChannelSettings.model_validate(
            {"platform": "telegram", "api_base": mock.base_url, "throttle_ms": 0, "delivery": "block"}
        )
        ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
        journal = await SqliteJournal.open(tmp_path / "journal.sqlite3")
        relay = Relay(
            {"telegram": make_runtime("telegram", settings, SecretStr(BOT_TOKEN))},
            ledger,
            MonotonicClock(),
            journal=journal,
        )
        sidecar = Sidecar(relay, token=INGEST_TOKEN)
        await sidecar.start()
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        try:
            async with httpx.AsyncClient(base_url=sidecar.url, headers=headers, timeout=30) as client:
                for run, blocks, chat in (("A1", BLOCKS_A, 7), ("A2", BLOCKS_A[:1], 7), ("B", BLOCKS_B, 8)):
                    assert (await client.post(f"/v1/runs/{run}/events", content=_body(blocks, chat))).status_code == 200
                    assert (await client.get(f"/v1/runs/{run}", params={"wait_s": 20})).json()["done"]
                env = {"STREAMRELAY_TOKEN": INGEST_TOKEN, "NO_COLOR": "1"}
                command = ["erase", "--channel", "telegram", "--chat", "7", "--url", sidecar.url, "--json"]
                cli = await asyncio.to_thread(CliRunner().invoke, app, command, env=env)
                assert cli.exit_code == 0, cli.output
                erased = json.loads(cli.output)
                assert erased["runs"] == ["A1", "A2"] and erased["removed"]["memory"] == 2
                none = (await client.delete("/v1/conversations/telegram/404")).json()
                assert none["runs"] == [] and none["removed"] == {"memory": 0, "journal": 0, "ledger": 0}
        finally:
            await sidecar.stop()
            await relay.close()
            await ledger.close()
            await journal.close()
    assert _in_files(tmp_path, MARK_A) == []
    assert _in_files(tmp_path, MARK_B) != []
