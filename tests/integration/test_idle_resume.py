"""The idle timeout never loses a line answered 200, and a resumed run gets its idle time afresh (chaos seed 23,
run chaos-23-00643, Discord, preview, idle 20 s).

There, a restart resumed the run with the quiet time of its last journaled line (before two kills): it was due to
close 1.3 s after the resume. The agent's replay came back meanwhile; its new lines passed admission (the run was
not closing yet), were journaled while the SQLite write took 0.6 s on a busy machine, and were answered 200
"accepted 2"; the idle close came in that gap, and the lines were handed to the run's closed inbox: never shown
(the chat 22 characters short), its last ``seq`` the one before them, and the agent's next replay of them refused
409 "this line was not taken". The journal here is a real SQLite file; the slow write is a real write held until
the test lets it go.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from streamrelay.adapters.sqlite.journal import SqliteJournal
from streamrelay.adapters.sqlite.ledger import SqliteLedger
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock, boot_seconds
from streamrelay.core.errors import IngestError
from streamrelay.core.ingest.admission import LineResult
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.journal import Journal, JournalEntry
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.stage import IDLE_NOTICE
from tests.unit.fakes import MemoryChat

START = {"kind": "run.start", "channel": "c", "target": {"chat_id": 5}, "seq": 0}
IDLE_S = 0.3


class HeldJournal(SqliteJournal):
    """A SQLite journal whose next write can be held (a busy machine's slow commit) until the test lets it go."""

    hold: asyncio.Event | None = None
    entered: asyncio.Event | None = None

    async def append(self, entries: Sequence[JournalEntry]) -> None:
        if self.hold is not None and self.entered is not None:
            self.entered.set()
            await self.hold.wait()
        await super().append(entries)


def _relay(chat: MemoryChat, ledger: Ledger, journal: Journal, idle_s: float) -> Relay:
    policy = ChannelPolicy(name="c", throttle_s=0)
    return Relay(
        {"c": ChannelRuntime(policy, chat)}, ledger, MonotonicClock(), journal=journal, run_idle_timeout_s=idle_s
    )


def _line(seq: int, text: str) -> dict[str, object]:
    return {"kind": "text", "text": text, "seq": seq}


async def test_lines_journaled_while_the_idle_timeout_falls_due_are_in_the_closed_run(tmp_path: Path) -> None:
    journal = await HeldJournal.open(tmp_path / "journal.db")
    assert isinstance(journal, HeldJournal)
    ledger = await SqliteLedger.open(tmp_path / "ledger.db")
    chat = MemoryChat()
    relay = _relay(chat, ledger, journal, IDLE_S)
    try:
        await relay.submit_line(START, "r")
        await relay.submit_line(_line(1, "Community members create and carry "), "r")
        journal.hold, journal.entered = asyncio.Event(), asyncio.Event()
        late = asyncio.create_task(relay.submit_lines([(_line(2, "lanterns, decorated with"), None)], "r"))
        await journal.entered.wait()  # the line passed admission; its journal write is under way
        await asyncio.sleep(IDLE_S * 2)  # the run's idle timeout falls due meanwhile (its timer is earlier than ours)
        journal.hold.set()
        (result,) = await late
        assert isinstance(result, LineResult) and result.dropped is None, result  # answered 200: taken
        report = await relay.wait_done("r", 10)
        assert report is not None and report.done and report.end_status == "error", report
        assert list(chat.messages.values()) == [
            "Community members create and carry lanterns, decorated with",
            IDLE_NOTICE,
        ]
        # Its replay is a repeat of a line the run took: acknowledged and dropped, never "this line was not taken".
        (again,) = await relay.submit_lines([(_line(2, "lanterns, decorated with"), None)], "r")
        assert isinstance(again, LineResult) and again.dropped is not None, again
        with pytest.raises(IngestError, match="not taken"):
            await relay.submit_line(_line(3, " symbols"), "r")  # a line it never took is refused
    finally:
        journal.hold = None
        await relay.close()
        await journal.close()
        await ledger.close()


async def test_a_resumed_run_gets_its_whole_idle_timeout_from_the_resume(tmp_path: Path) -> None:
    path = tmp_path / "journal.db"
    journal, ledger, chat = (
        await SqliteJournal.open(path),
        await SqliteLedger.open(tmp_path / "ledger.db"),
        MemoryChat(),
    )
    relay = _relay(chat, ledger, journal, 600)
    await relay.submit_line(START, "r")
    await relay.submit_line(_line(1, "The first half. "), "r")
    await relay.wait_done("r", 0.05)
    await relay.close()
    await journal.close()
    with sqlite3.connect(path) as db:  # its agent went quiet 100 s ago (the sidecar was down, or killed twice)
        db.execute("UPDATE journal SET at = at - 100")
    journal = await SqliteJournal.open(path)
    at = await journal.last_at("r")
    assert at is not None and boot_seconds() - at >= 100, at
    restarted = _relay(chat, ledger, journal, 60)
    try:
        assert await restarted.resume() == ["r"]
        assert await restarted.wait_done("r", 0.5) is not None  # the report of a run still open
        assert "r" in restarted._runs and restarted._runs["r"].closing is None  # not closed at once
        again = await restarted.submit_lines(
            [(_line(2, "The second half."), None), ({"kind": "end", "seq": 3}, None)], "r"
        )
        assert all(isinstance(r, LineResult) and r.dropped is None for r in again), again
        report = await restarted.wait_done("r", 10)
        assert report is not None and report.status == "delivered", report
        assert list(chat.messages.values()) == ["The first half. The second half."]
    finally:
        await restarted.close()
        await journal.close()
        await ledger.close()


async def test_lines_a_seq_gap_holds_are_shown_when_the_idle_timeout_closes_the_run(tmp_path: Path) -> None:
    """A line past a ``seq`` gap was answered 200 and held for the gap; the idle timeout (shorter than the gap's
    timeout here) closes the run with it shown and the gap reported, not held back for good (then its replay was
    refused "not taken")."""
    journal, ledger, chat = (
        await SqliteJournal.open(tmp_path / "journal.db"),
        await SqliteLedger.open(tmp_path / "ledger.db"),
        MemoryChat(),
    )
    policy = ChannelPolicy(name="c", throttle_s=0)
    relay = Relay(
        {"c": ChannelRuntime(policy, chat)},
        ledger,
        MonotonicClock(),
        journal=journal,
        run_idle_timeout_s=IDLE_S,
        gap_timeout_s=600,
    )
    try:
        await relay.submit_line(START, "r")
        await relay.submit_line(_line(1, "Before the gap, "), "r")
        await relay.submit_line(_line(3, "after it."), "r")  # seq 2 never comes
        report = await relay.wait_done("r", 10)
        assert report is not None and report.done and report.end_status == "error", report
        assert list(chat.messages.values()) == ["Before the gap, after it.", IDLE_NOTICE]
        assert report.gaps == ["seq 2..2 never arrived"], report.gaps
        (again,) = await relay.submit_lines([(_line(3, "after it."), None)], "r")
        assert isinstance(again, LineResult) and again.dropped is not None, again
    finally:
        await relay.close()
        await journal.close()
        await ledger.close()
