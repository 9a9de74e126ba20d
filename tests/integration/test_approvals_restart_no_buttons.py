"""An approval on a channel that shows no buttons (the live page; Matrix, WhatsApp) survives a restart without a
button call: the restored approval message's buttons are in doubt only where the platform can carry them. Found by
the chaos campaign pressing approvals on Matrix: after a kill -9 the decision's edit was preceded by a call to take
buttons off, which the Matrix adapter does not have ("set_stop: unreadable answer: AttributeError"), reported as an
error of the run."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import SecretStr

from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.adapters.sqlite.journal import SqliteJournal
from streamrelay.app.service import make_runtime
from streamrelay.config.settings import ChannelSettings
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.run.relay import Relay

ALICE = "web:user:alice"


async def _relay(tmp_path: Path) -> tuple[Relay, SqliteLedger, SqliteJournal]:
    channel = ChannelSettings.model_validate({"platform": "web", "throttle_ms": 0})
    ledger = await SqliteLedger.open(tmp_path / "ledger.sqlite3")
    journal = await SqliteJournal.open(tmp_path / "journal.sqlite3")
    relay = Relay({"web": make_runtime("web", channel, SecretStr(""))}, ledger, MonotonicClock(), journal=journal)
    return relay, ledger, journal


async def test_a_restored_approval_without_buttons_is_decided_without_a_button_call(tmp_path: Path) -> None:
    relay, ledger, journal = await _relay(tmp_path)
    lines = [
        {"kind": "run.start", "run": "r1", "channel": "web", "target": {"chat_id": "page"}, "seq": 0},
        {"kind": "text", "run": "r1", "text": "Checking the order.", "seq": 1},
        {
            "kind": "approval.request",
            "run": "r1",
            "id": "a1",
            "question": "Refund?",
            "approvers": [ALICE],
            "ttl_s": 600,
            "seq": 2,
        },
    ]
    for line in lines:
        await relay.submit_line(json.loads(json.dumps(line)), "r1")
    report = await relay.wait_done("r1", 2.0)
    assert report is not None and any(p.role == "approval" and p.message_id for p in report.parts), report
    await relay.close()  # the process dies with the run open
    await ledger.close()
    await journal.close()

    relay, ledger, journal = await _relay(tmp_path)
    try:
        assert await relay.resume() == ["r1"]
        decided = await relay.decide_approval("r1", "a1", "approve", ALICE)
        assert decided["decision"] == "approved"
        await relay.submit_line({"kind": "end", "run": "r1", "seq": 3}, "r1")
        report = await relay.wait_done("r1", 15.0)
        assert report is not None and report.done
        assert not [e for e in report.errors if "button" in e or "set_stop" in e], report.errors
        assert [u.kind for u in relay.lane("r1").after(0)].count("approval") == 1  # type: ignore[union-attr]
    finally:
        await relay.close()
        await ledger.close()
        await journal.close()
