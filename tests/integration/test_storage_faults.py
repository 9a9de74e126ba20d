"""Storage that fails loudly and loses nothing (issue 24, item 6), on the real service with its SQLite file: a disk
that fills mid-run (SQLite's own ``max_page_count`` limit on the file, what a full disk answers: SQLITE_FULL), and
the file deleted under the running sidecar. (A read-only file cannot be made so with ``chmod`` here: the tests run as
root, whom file modes do not stop.)"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

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
