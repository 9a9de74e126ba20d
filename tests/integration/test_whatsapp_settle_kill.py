"""A WhatsApp send in flight at a kill -9 (``streamrelay serve`` as its own process, SQLite journal, ledger and
receipts), then a restart on the same files (in the test's process: test_durability.py's ``_serve_here``): the create is
settled by its status webhook, which the mock delivers again until the restarted sidecar takes it (as Meta retries a
webhook for up to 7 days). Stored: found, shown once, never sent again. Never stored: its silence, while the other
message's statuses were heard, sends it again, once.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from streamrelay.adapters.whatsapp.webhook import WEBHOOK_PATH
from streamrelay.app.dry_run import DRY_RUN
from streamrelay.mocks.whatsapp import MockWhatsApp
from tests.integration.test_durability import TOKEN, _config, _ready, _serve, _serve_here, _until
from tests.ports import free_port as _free_port

SECRET = "app-secret-of-the-kill-test"
FIRST, SECOND = "The first answer, in a message of its own.", "The second answer, the last message."


def _events(run: str, chat_id: str) -> bytes:
    lines: list[dict[str, Any]] = [
        {"kind": "run.start", "channel": "chat", "target": {"chat_id": chat_id}, "seq": 0},
        {"kind": "text", "mode": "delta", "text": FIRST, "message": 0, "seq": 1},
        {"kind": "message_end", "message": 0, "seq": 2},
        {"kind": "text", "mode": "delta", "text": SECOND, "message": 1, "seq": 3},
        {"kind": "message_end", "message": 1, "seq": 4},
        {"kind": "end", "status": "ok", "seq": 5},
    ]
    return "".join(json.dumps({"run": run, **line}) + "\n" for line in lines).encode()


@pytest.mark.timeout(180)
@pytest.mark.parametrize("stored", [True, False], ids=["stored-status-after-the-kill", "never-stored"])
async def test_a_send_in_flight_at_a_kill_settles_by_its_status_webhook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored: bool
) -> None:
    monkeypatch.setenv("WHATSAPP_APP_SECRET", SECRET)
    dry = DRY_RUN["whatsapp"]
    chat = str(dry.private)
    mock = MockWhatsApp()
    await mock.start()
    try:
        port = _free_port()
        # the statuses wait 3 s: the stored message's arrive while the sidecar is down and are delivered again
        mock.webhook_to(f"http://127.0.0.1:{port}{WEBHOOK_PATH}", SECRET, delay_ms=3000)
        nth = 1 if stored else 2
        mock.add_fault("messages", nth, "timeout_after_commit" if stored else "timeout_before_commit")
        config = _config(
            tmp_path, "whatsapp", mock.base_url, port, delivery="block", format="plain", settle_window_ms=3000
        )
        log = tmp_path / "sidecar.log"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
            with _serve(config, dry.token, log) as first:
                await _ready(client, first, log)
                answer = await client.post("/v1/runs/r1/events", content=_events("r1", chat))
                assert answer.status_code == 200, answer.text
                await _until(lambda: len(mock.calls) == nth, 20, f"send {nth} to be made")
                if not stored:  # the first message's statuses are recorded before the kill
                    await _until(lambda: len(mock.statuses.posted) == 2, 20, "the first statuses")  # type: ignore[union-attr]
                first.send_signal(signal.SIGKILL)  # the send hangs: an intent without an outcome
                first.wait(10)
            if stored:  # the status meets the killed sidecar before the restart (a loaded machine is slow to it)
                await _until(lambda: mock.statuses.answers.count(0) >= 1, 20, "a status refused while down")  # type: ignore[union-attr]
            async with _serve_here(config, dry.token) as second:
                await _ready(client, second, log)
                report = (await client.get("/v1/runs/r1", params={"wait_s": 60})).json()
        shown = [text for _, text in mock.visible(chat)]
        sends = len(mock.calls)
        refused = mock.statuses.answers.count(0) if mock.statuses is not None else 0
    finally:
        await mock.stop()
    assert shown == [FIRST, SECOND], shown  # each once, in order
    assert report["status"] == "delivered" and report["uncertain"] == 0, report
    assert sends == (2 if stored else 3)  # stored: never sent again; not stored: sent again once
    if stored:
        assert refused >= 1  # the status met the killed sidecar and was delivered again
