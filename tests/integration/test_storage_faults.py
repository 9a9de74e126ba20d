"""Storage that fails loudly and loses nothing (issue 24, item 6), on the real service with its SQLite file: a disk
that fills mid-run (SQLite's own ``max_page_count`` limit on the file, what a full disk answers: SQLITE_FULL); the
file deleted under the running sidecar; a run whose ledger write failed waits and resumes when the disk heals. (A
read-only file cannot be made so with ``chmod`` here: the tests run as root, whom file modes do not stop.)"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from streamrelay.app.serving import STORE_TABLES, resume_when_writable
from streamrelay.core.tasks import stop_all
from tests.integration.test_operating import AUTH, Service, service

__all__ = ["service"]

BIG = "word " * 2000  # 10 KB: a line that needs new pages in the file


def _body(*lines: dict[str, Any]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


async def _max_pages(service: Service, pages: int | None) -> None:
    """Let the file grow to ``pages`` pages at most (None: its size now, so it is full)."""

    def limit(db: sqlite3.Connection) -> None:
        count = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {count if pages is None else pages}")

    await service.store.transaction(limit)


async def test_a_full_disk_is_not_ready_pushes_back_and_takes_the_same_lines_when_it_heals(service: Service) -> None:
    run = "full-1"
    start = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 42}, "seq": 0}
    first = await service.client.post(f"/v1/runs/{run}/events", content=_body(start), headers=AUTH)
    assert first.status_code == 200, first.text
    assert (await service.client.get("/readyz")).status_code == 200

    await _max_pages(service, None)  # the disk is full
    rest = [
        {"kind": "text", "mode": "delta", "text": BIG, "seq": 1},
        {"kind": "text", "mode": "delta", "text": "The end.", "seq": 2},
        {"kind": "end", "status": "ok", "seq": 3},
    ]
    refused = await service.client.post(f"/v1/runs/{run}/events", content=_body(*rest), headers=AUTH)
    assert refused.status_code == 503, refused.text
    assert refused.headers["Retry-After"] == "1"
    assert refused.json()["pushed_back_from"] == 1 and refused.json()["accepted"] == 0, refused.text
    assert "full" in refused.json()["error"], refused.text
    ready = await service.client.get("/readyz")
    assert ready.status_code == 503 and "cannot be written" in ready.json()["reason"], ready.text

    await _max_pages(service, 1_073_741_823)  # space again
    ready = await service.client.get("/readyz")
    assert ready.status_code == 200, ready.text
    again = await service.client.post(f"/v1/runs/{run}/events", content=_body(*rest), headers=AUTH)
    assert again.status_code == 200 and again.json() == {"accepted": 3}, again.text  # taken, never "dropped"
    report = await service.client.get(f"/v1/runs/{run}", params={"wait_s": 30}, headers=AUTH)
    assert report.json()["status"] == "delivered", report.text
    shown = " ".join(text for _, text in service.mock.visible(42))
    assert shown.split() == (BIG + "The end.").split()


async def test_the_file_deleted_under_the_running_sidecar_is_not_ready(service: Service, tmp_path: Path) -> None:
    assert (await service.client.get("/readyz")).status_code == 200
    Path(service.store.path).unlink()
    await asyncio.sleep(0)
    ready = await service.client.get("/readyz")
    assert ready.status_code == 503 and "deleted or replaced" in ready.json()["reason"], ready.text


async def test_a_run_whose_ledger_write_failed_waits_and_resumes_when_the_disk_heals(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every write fails for a while (an injected fault in the store's writer: SQLITE_FULL for each transaction) while
    a run waits out a 429: its next ledger write fails, the run stops where it is (nothing shown twice, nothing lost),
    and it resumes from the journal once a probe write succeeds; the agent's `end` then finishes it."""
    healing = asyncio.create_task(
        resume_when_writable(service.relay, lambda: service.store.ping(STORE_TABLES), poll_s=0.1)
    )
    try:
        service.mock.add_fault("sendMessage", 1, {"status": 429, "retry_after_s": 1})
        run = "ledger-full-1"
        start = {"kind": "run.start", "channel": "telegram", "target": {"chat_id": 43}, "seq": 0}
        text = {"kind": "text", "mode": "delta", "text": "Hello from before the disk filled.", "seq": 1}
        posted = await service.client.post(f"/v1/runs/{run}/events", content=_body(start, text), headers=AUTH)
        assert posted.status_code == 200, posted.text

        def full(conn: sqlite3.Connection, batch: list[tuple[Any, Any]]) -> list[Any]:
            return [(done, None, sqlite3.OperationalError("database or disk is full")) for _, done in batch]

        with monkeypatch.context() as patched:
            patched.setattr(service.store, "_in_one", full)
            for _ in range(100):  # the run's ledger write after the 429's pause fails: it waits
                if run in service.relay.interrupted:
                    break
                await asyncio.sleep(0.05)
            assert run in service.relay.interrupted, (service.mock.visible(43), await service.relay.report(run))
            ready = await service.client.get("/readyz")
            assert ready.status_code == 503 and "cannot be written" in ready.json()["reason"], ready.text
        for _ in range(100):  # healed: resumed from the journal
            if run not in service.relay.interrupted and run in service.relay.active_runs():
                break
            await asyncio.sleep(0.05)
        assert (await service.client.get("/readyz")).status_code == 200
        end = {"kind": "end", "status": "ok", "seq": 2}
        assert (await service.client.post(f"/v1/runs/{run}/events", content=_body(end), headers=AUTH)).is_success
        report = await service.client.get(f"/v1/runs/{run}", params={"wait_s": 30}, headers=AUTH)
        assert report.json()["status"] == "delivered", report.text
        assert [text for _, text in service.mock.visible(43)] == ["Hello from before the disk filled."]
    finally:
        await stop_all([healing])
