"""A resumed run's idle timeout counts on a clock no wall-clock jump moves (issue 24, item 6: a +700 s jump while
the sidecar was down closed every resumed run at once, "sent nothing for 600 s", and the agent's re-send was
dropped). The journal is a real SQLite file; the wall clock is faked forward with ``time.time`` patched."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from streamrelay.adapters.sqlite.journal import SqliteJournal
from streamrelay.adapters.sqlite.ledger import SqliteLedger
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.ingest.admission import LineResult
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.journal import Journal
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import MemoryChat

START = {"kind": "run.start", "channel": "c", "target": {"chat_id": 5}, "seq": 0}


def _relay(chat: MemoryChat, ledger: Ledger, journal: Journal, idle_s: float) -> Relay:
    policy = ChannelPolicy(name="c", throttle_s=0)
    return Relay(
        {"c": ChannelRuntime(policy, chat)}, ledger, MonotonicClock(), journal=journal, run_idle_timeout_s=idle_s
    )


async def _half_a_run(path: Path, chat: MemoryChat) -> None:
    journal, ledger = await SqliteJournal.open(path), await SqliteLedger.open(path.with_suffix(".ledger"))
    relay = _relay(chat, ledger, journal, 600)
    await relay.submit_line(START, "r")
    await relay.submit_line({"kind": "text", "text": "The first half. ", "seq": 1}, "r")
    await asyncio.sleep(0.05)
    await relay.close()
    await journal.close()
    await ledger.close()


async def _resume_and_finish(path: Path, chat: MemoryChat) -> tuple[list[str], object]:
    journal, ledger = await SqliteJournal.open(path), await SqliteLedger.open(path.with_suffix(".ledger"))
    restarted = _relay(chat, ledger, journal, 600)
    try:
        assert await restarted.resume() == ["r"]
        again = await restarted.submit_lines(
            [({"kind": "text", "text": "The second half.", "seq": 2}, None), ({"kind": "end", "seq": 3}, None)], "r"
        )
        report = await restarted.wait_done("r", 10)
    finally:
        await restarted.close()
        await journal.close()
        await ledger.close()
    return [str(r) for r in again if not isinstance(r, LineResult) or r.dropped is not None], report


async def test_a_wall_clock_jump_while_down_does_not_close_a_resumed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = MemoryChat()
    await _half_a_run(tmp_path / "journal.db", chat)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 700)  # NTP, an operator or a restored VM moved the clock
    results, report = await _resume_and_finish(tmp_path / "journal.db", chat)
    assert results == [], results  # the re-sent lines taken, none dropped nor refused
    assert report is not None and getattr(report, "status", None) == "delivered", report
    assert list(chat.messages.values()) == ["The first half. The second half."]
