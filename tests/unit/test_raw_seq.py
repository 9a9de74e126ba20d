"""``seq`` on raw stream lines (provider and agent-protocol events normalized at admission): a repeat is dropped, a
line past a gap is refused (409, naming the seq to send again from), the numbers count in the run's one sequence
(a normalized ``end`` after them is not held for them), and a journal replay takes each line once."""

from __future__ import annotations

from typing import Any

import pytest

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import IngestError
from streamrelay.core.events import TextEvent
from streamrelay.core.ingest.admission import LineResult
from streamrelay.core.ingest.sequencer import SeqFloor, SeqGate
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.journal import MemoryJournal
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from tests.unit.fakes import MemoryChat

START = {"kind": "run.start", "channel": "c", "target": {"chat_id": 5}, "format": "ag-ui", "seq": 0}


def _relay(chat: MemoryChat, **kw: Any) -> Relay:
    policy = ChannelPolicy(name="c", throttle_s=0)
    return Relay({"c": ChannelRuntime(policy, chat)}, MemoryLedger(), MonotonicClock(), **kw)


def _say(seq: int | None, text: str) -> dict[str, Any]:
    line: dict[str, Any] = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": text}
    return line if seq is None else {**line, "seq": seq}


def test_seq_floor_takes_numbers_in_any_order_and_names_the_next_raw_one() -> None:
    seqs = SeqFloor(floor=0)
    assert seqs.next_raw() == 1
    seqs.take(3)
    assert seqs.taken(3) and not seqs.taken(2) and seqs.next_raw() == 1
    seqs.take(1)
    seqs.take(2)
    assert seqs.floor == 3 and seqs.above == set() and seqs.next_raw() == 4
    assert SeqFloor().next_raw() is None


def test_a_consumed_seq_releases_what_waited_for_it() -> None:
    gate = SeqGate(last=0)
    held = TextEvent(run="r", seq=2, text="after")
    assert gate.push(held, 0.0) == []  # waits for 1
    gate.consume(1)
    assert gate.push(TextEvent(run="r", seq=3, text="more"), 0.0) == [held, TextEvent(run="r", seq=3, text="more")]
    assert gate.gaps == [] and gate.last == 3


async def test_a_resent_raw_request_is_taken_once_and_the_end_is_not_held() -> None:
    chat = MemoryChat()
    relay = _relay(chat, gap_timeout_s=30)
    body = [(START, None), (_say(1, "Hello "), None), (_say(2, "world."), None)]
    first = await relay.submit_lines(body, "r")
    again = await relay.submit_lines(body, "r")  # the agent's first answer was lost: the same request again
    assert all(isinstance(r, LineResult) and r.dropped is None for r in first)
    assert all(isinstance(r, LineResult) and r.dropped is not None for r in again)
    await relay.submit_line({"kind": "end", "status": "ok", "seq": 3}, "r")
    report = await relay.wait_done("r", 5)  # not held 30 s for seqs 1-2: the raw lines used them
    await relay.close()
    assert list(chat.messages.values()) == ["Hello world."]
    assert report is not None and report.status == "delivered" and report.gaps == []


async def test_a_raw_line_past_a_gap_is_refused_with_the_seq_to_send_again_from() -> None:
    relay = _relay(MemoryChat())
    await relay.submit_lines([(START, None), (_say(1, "a"), None)], "r")
    [result] = await relay.submit_lines([(_say(3, "c"), None)], "r")
    assert isinstance(result, IngestError) and result.status == 409
    assert "send again from seq 2" in str(result)
    results = await relay.submit_lines([(_say(2, "b"), None), (_say(3, "c"), None)], "r")
    assert all(isinstance(r, LineResult) and r.dropped is None for r in results)
    await relay.close()


@pytest.mark.parametrize("bad", ["1", 1.5, -1, True, 2**60])
async def test_a_raw_seq_that_is_no_seq_is_a_400(bad: object) -> None:
    relay = _relay(MemoryChat())
    await relay.submit_line(START, "r")
    [result] = await relay.submit_lines([({**_say(None, "x"), "seq": bad}, None)], "r")
    assert isinstance(result, IngestError) and result.status == 400 and "'seq' of a raw stream line" in str(result)
    await relay.close()


async def test_a_journal_replay_takes_each_raw_line_once() -> None:
    journal = MemoryJournal()
    relay = _relay(MemoryChat(), journal=journal)
    body = [(START, None), (_say(1, "One "), None), (_say(2, "two."), None)]
    await relay.submit_lines(body, "r")
    await relay.submit_lines(body, "r")  # repeats: acknowledged, not journaled twice
    await relay.close()  # a restart before the end
    chat = MemoryChat()
    restarted = _relay(chat, journal=journal)
    assert await restarted.resume() == ["r"]
    await restarted.submit_lines([(_say(2, "two."), None), ({"kind": "end", "status": "ok", "seq": 3}, None)], "r")
    report = await restarted.wait_done("r", 5)
    await restarted.close()
    assert list(chat.messages.values()) == ["One two."]
    assert report is not None and report.status == "delivered"
