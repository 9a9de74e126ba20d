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
from streamrelay.core.events import Target
from streamrelay.core.ingest.admission import LineResult
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.journal import Journal, JournalEntry
from streamrelay.core.records.ledger import Ledger
from streamrelay.core.run.controller import IDLE_CLOSED
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


# ---------------------------------------------------------------- the idle close's commit point against kills


class _EndHeld(SqliteLedger):
    """A SQLite ledger whose ``end_run`` never returns, nothing written (a kill -9 after the run's final and notice
    were shown and acknowledged, before its end was recorded): ``ending`` is set when it is reached."""

    ending: asyncio.Event

    async def end_run(self, run: str, end_status: str, errors: Sequence[str] = ()) -> None:
        self.ending.set()
        await asyncio.Event().wait()


class _NoticeHeld(MemoryChat):
    """A chat whose send of the idle notice never returns, nothing stored (a kill -9 with the notice's send in
    flight): ``sending`` is set when it is reached."""

    def __init__(self) -> None:
        super().__init__()
        self.sending = asyncio.Event()
        self.hold = True

    async def send_text(self, target: Target, text: str, fmt: TextFormat, *, delivery_id: str | None = None) -> str:
        if self.hold and text.strip() == IDLE_NOTICE:
            self.sending.set()
            await asyncio.Event().wait()
        return await super().send_text(target, text, fmt, delivery_id=delivery_id)


class _CloseHeld(SqliteJournal):
    """A SQLite journal whose idle-close commit point never returns, nothing written (a kill -9 before the mark):
    ``closing`` is set when it is reached."""

    closing: asyncio.Event

    async def close_idle(self, run: str, last_seq: int | None, *, ended: bool = False) -> None:
        self.closing.set()
        await asyncio.Event().wait()


async def _replayed(relay: Relay) -> list[LineResult | IngestError]:
    """The agent back after the restart, re-sending its whole run from seq 0 and more (as the chaos agent does)."""
    lines = [START, _line(1, "The first half. "), _line(2, "The second half."), {"kind": "end", "seq": 3}]
    return await relay.submit_lines([(line, None) for line in lines], "r")


async def _first_half(relay: Relay) -> None:
    await relay.submit_line(START, "r")
    await relay.submit_line(_line(1, "The first half. "), "r")


async def test_a_kill_after_the_idle_close_was_shown_resumes_the_run_closed(tmp_path: Path) -> None:
    """chaos-10-00017 (Telegram, native, seed 10): the idle close showed the final and the notice, and a kill came
    before the run's end was recorded. Before: the journal kept no trace of the close (one process's
    ``close_idle`` wrote nothing), the run resumed open, took its agent's later lines (200) and ended ``delivered``
    with the "stopped here" notice in the chat: a lie. Now the close is journaled before its notice: the run resumes
    closed, the notice is not sent again (the ledger has it), the lines it never took are refused 409."""
    path, ledger_path = tmp_path / "journal.db", tmp_path / "ledger.db"
    journal, held, chat = await SqliteJournal.open(path), await _EndHeld.open(ledger_path), MemoryChat()
    assert isinstance(held, _EndHeld)
    held.ending = asyncio.Event()
    relay = _relay(chat, held, journal, IDLE_S)
    await _first_half(relay)
    await held.ending.wait()  # closed and shown; the "kill" comes before the run's end is recorded
    assert list(chat.messages.values()) == ["The first half.", IDLE_NOTICE]
    await relay.close()
    await journal.close()
    await held.close()
    ledger = await SqliteLedger.open(ledger_path)
    restarted_journal = await SqliteJournal.open(path)
    restarted = _relay(chat, ledger, restarted_journal, 60)  # an idle timeout far longer than the test
    try:
        assert await restarted.resume() == ["r"]
        results = await _replayed(restarted)
        assert [isinstance(r, LineResult) and r.dropped is not None for r in results[:2]] == [True, True], results
        assert all(isinstance(r, IngestError) and r.status == 409 and "not taken" in str(r) for r in results[2:])
        report = await restarted.wait_done("r", 10)
        assert report is not None and report.done and report.end_status == "error", report
        assert any(IDLE_CLOSED in e for e in report.errors), report.errors
        assert list(chat.messages.values()) == ["The first half.", IDLE_NOTICE]  # the notice once
    finally:
        await restarted.close()
        await restarted_journal.close()
        await ledger.close()


async def test_a_kill_between_the_idle_close_mark_and_its_notice_sends_the_notice_once(tmp_path: Path) -> None:
    """Killed with the notice's send in flight (the close journaled, nothing of the notice stored): the run resumes
    closed at once (not after another idle timeout), the notice is sent once, and the agent's later lines are
    refused 409 as they are for a run whose close was not interrupted."""
    path = tmp_path / "journal.db"
    journal, ledger, chat = (
        await SqliteJournal.open(path),
        await SqliteLedger.open(tmp_path / "ledger.db"),
        _NoticeHeld(),
    )
    relay = _relay(chat, ledger, journal, IDLE_S)
    await _first_half(relay)
    await chat.sending.wait()
    await relay.close()
    await journal.close()
    chat.hold = False
    assert list(chat.messages.values()) == ["The first half."]
    journal = await SqliteJournal.open(path)
    restarted = _relay(chat, ledger, journal, 60)
    try:
        assert await restarted.resume() == ["r"]
        results = await _replayed(restarted)
        assert all(isinstance(r, IngestError) and r.status == 409 and "not taken" in str(r) for r in results[2:])
        report = await restarted.wait_done("r", 10)
        assert report is not None and report.done and report.end_status == "error", report
        assert list(chat.messages.values()) == ["The first half.", IDLE_NOTICE]
    finally:
        await restarted.close()
        await journal.close()
        await ledger.close()


async def test_a_kill_before_the_idle_close_mark_resumes_the_run_open(tmp_path: Path) -> None:
    """Killed before the close's commit point: nothing of the close was shown, and the run resumes open (its idle
    time afresh): the agent's replay is taken and the run ends ``delivered`` without a notice."""
    path = tmp_path / "journal.db"
    journal = await _CloseHeld.open(path)
    assert isinstance(journal, _CloseHeld)
    journal.closing = asyncio.Event()
    ledger, chat = await SqliteLedger.open(tmp_path / "ledger.db"), MemoryChat()
    relay = _relay(chat, ledger, journal, IDLE_S)
    await _first_half(relay)
    await journal.closing.wait()
    await relay.close()
    await journal.close()
    assert IDLE_NOTICE not in chat.messages.values()
    restarted_journal = await SqliteJournal.open(path)
    restarted = _relay(chat, ledger, restarted_journal, 60)
    try:
        assert await restarted.resume() == ["r"]
        results = await _replayed(restarted)
        assert all(isinstance(r, LineResult) for r in results), results
        report = await restarted.wait_done("r", 10)
        assert report is not None and report.status == "delivered", report
        assert list(chat.messages.values()) == ["The first half. The second half."]
    finally:
        await restarted.close()
        await restarted_journal.close()
        await ledger.close()


class _SlowMark(HeldJournal):
    """The idle close's first commit point held until the test lets it go (a busy machine's slow commit: the mark is
    a real write now), each one recorded; ``append`` can be held too (:class:`HeldJournal`)."""

    marks: list[tuple[int | None, bool]]
    mark_entered: asyncio.Event
    mark_hold: asyncio.Event

    async def close_idle(self, run: str, last_seq: int | None, *, ended: bool = False) -> None:
        self.marks.append((last_seq, ended))
        if len(self.marks) == 1:
            self.mark_entered.set()
            await self.mark_hold.wait()
        await super().close_idle(run, last_seq, ended=ended)


async def test_lines_taken_while_the_idle_close_is_journaled_are_shown_and_marked(tmp_path: Path) -> None:
    """The idle close's commit point is a journal write, awaited: lines a request takes meanwhile (the run is not
    closing yet), one handed over before the mark returns and one still being journaled after it, are answered 200,
    shown, and a second mark names the run's new last ``seq``; a later line is refused 409."""
    journal = await _SlowMark.open(tmp_path / "journal.db")
    assert isinstance(journal, _SlowMark)
    journal.marks, journal.mark_entered, journal.mark_hold = [], asyncio.Event(), asyncio.Event()
    ledger, chat = await SqliteLedger.open(tmp_path / "ledger.db"), MemoryChat()
    relay = _relay(chat, ledger, journal, IDLE_S)
    try:
        await _first_half(relay)
        await journal.mark_entered.wait()  # the close's first mark is being written
        (second,) = await relay.submit_lines([(_line(2, "The second half, "), None)], "r")
        journal.hold, journal.entered = asyncio.Event(), asyncio.Event()
        third = asyncio.create_task(relay.submit_lines([(_line(3, "and more."), None)], "r"))
        await journal.entered.wait()  # taken, its journal write under way
        journal.mark_hold.set()  # the first mark returns while the third line is not handed over yet
        await asyncio.sleep(0)
        journal.hold.set()
        (third_result,) = await third
        assert all(isinstance(r, LineResult) and r.dropped is None for r in (second, third_result))
        report = await relay.wait_done("r", 10)
        assert report is not None and report.done and report.end_status == "error", report
        assert list(chat.messages.values()) == ["The first half. The second half, and more.", IDLE_NOTICE]
        assert journal.marks == [(1, False), (3, False)]
        with pytest.raises(IngestError, match="not taken"):
            await relay.submit_line(_line(4, " Never shown."), "r")
    finally:
        journal.hold = None
        await relay.close()
        await journal.close()
        await ledger.close()
