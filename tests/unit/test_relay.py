"""The relay: idle runs closed, bad lines failing alone, deltas joined."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.chunking import ChunkParams
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.errors import IngestError
from streamrelay.core.events import DeliveryMode, parse_event
from streamrelay.core.ingest.sequencer import join_deltas
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.journal import JournalEntry, MemoryJournal
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.stage import IDLE_NOTICE
from streamrelay.core.text.coalescer import CoalesceParams
from tests.unit.fakes import FakeAdapter, MemoryChat


async def test_a_run_that_goes_quiet_is_closed_with_what_it_has_and_a_notice() -> None:
    chat = MemoryChat()
    relay = Relay(
        {"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), chat)},
        MemoryLedger(),
        MonotonicClock(),
        run_idle_timeout_s=0.2,
    )
    await relay.submit_line({"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}, "r")
    await relay.submit_line({"kind": "text", "text": "half an answer"}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert report is not None and report.done
    assert report.end_status == "error"
    assert any("sent nothing" in e for e in report.errors)
    assert list(chat.messages.values()) == ["half an answer", IDLE_NOTICE]


async def test_a_bad_line_fails_alone() -> None:
    chat = MemoryChat()
    relay = Relay({"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), chat)}, MemoryLedger(), MonotonicClock())
    await relay.submit_line({"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}, "r")
    with pytest.raises(IngestError, match="unknown event kind"):
        await relay.submit_line({"kind": "nope"}, "r")
    with pytest.raises(IngestError, match="posted to run 'r'"):
        await relay.submit_line({"kind": "text", "text": "x", "run": "other"}, "r")
    await relay.submit_line({"kind": "text", "text": "fine"}, "r")
    await relay.submit_line({"kind": "end"}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert report is not None and report.status == "delivered"
    assert list(chat.messages.values()) == ["fine"]
    assert await relay.submit_line({"kind": "text", "text": "late"}, "r") == 0  # acknowledged and dropped
    assert list(chat.messages.values()) == ["fine"]
    await asyncio.sleep(0)


def _relay(chat: MemoryChat, ledger: MemoryLedger | None = None, **kw: Any) -> Relay:
    policy = ChannelPolicy(name="c", throttle_s=0)
    return Relay({"c": ChannelRuntime(policy, chat)}, ledger or MemoryLedger(), MonotonicClock(), **kw)


START = {"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}


async def test_seq_counts_from_the_run_start_so_an_early_reorder_is_not_lost() -> None:
    chat = MemoryChat()
    relay = _relay(chat)
    await relay.submit_line({**START, "seq": 0}, "r")
    await relay.submit_line({"kind": "text", "seq": 2, "text": "B"}, "r")
    await relay.submit_line({"kind": "text", "seq": 1, "text": "A"}, "r")
    await relay.submit_line({"kind": "end", "seq": 3}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert list(chat.messages.values()) == ["AB"]
    assert report is not None and report.status == "delivered" and report.gaps == []


async def test_a_gap_that_never_fills_makes_the_report_partial() -> None:
    chat = MemoryChat()
    relay = _relay(chat, gap_timeout_s=0.1)
    await relay.submit_line({**START, "seq": 0}, "r")
    await relay.submit_line({"kind": "text", "seq": 1, "text": "A"}, "r")
    await relay.submit_line({"kind": "text", "seq": 3, "text": "C"}, "r")
    await relay.submit_line({"kind": "end", "seq": 4}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert report is not None and report.status == "partial"
    assert report.gaps == ["seq 2..2 never arrived"]


async def test_an_emoji_split_across_deltas_is_joined() -> None:
    chat = MemoryChat()
    relay = _relay(chat)
    await relay.submit_line(START, "r")
    await relay.submit(parse_event({"run": "r", "kind": "text", "text": "Hi \ud83d"}))
    await relay.submit(parse_event({"run": "r", "kind": "text", "text": "\ude00 there \ud83d"}))
    await relay.submit_line({"kind": "end"}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert report is not None and report.status == "delivered"
    assert list(chat.messages.values()) == ["Hi 😀 there"]  # a half pair left at the end is dropped


async def test_a_run_that_ended_before_a_restart_is_acknowledged_and_dropped() -> None:
    ledger = MemoryLedger()
    relay = _relay(MemoryChat(), ledger)
    await relay.submit_line(START, "job-1")
    await relay.submit_line({"kind": "text", "text": "Your order shipped."}, "job-1")
    await relay.submit_line({"kind": "end"}, "job-1")
    await relay.wait_done("job-1", 5)
    await relay.close()
    chat = MemoryChat()
    restarted = _relay(chat, ledger)
    results = await restarted.submit_lines([(START, None), ({"kind": "text", "text": "Your order"}, None)], "job-1")
    assert [r.dropped is not None for r in results if not isinstance(r, IngestError)] == [True, True]
    assert chat.messages == {}
    await restarted.close()


async def test_a_replayed_run_start_must_match_the_first() -> None:
    relay = _relay(MemoryChat())
    await relay.submit_line(START, "r")
    await relay.submit_line(START, "r")  # the same: a harmless replay
    with pytest.raises(IngestError, match="another target"):
        await relay.submit_line({**START, "target": {"chat_id": 6}}, "r")
    await relay.close()


async def test_overrides_are_checked_and_applied() -> None:
    relay = _relay(MemoryChat())
    with pytest.raises(IngestError, match="unknown override 'evil'"):
        await relay.submit_line({**START, "overrides": {"evil": 1}}, "a")
    with pytest.raises(IngestError, match="bad override throttle_ms"):
        await relay.submit_line({**START, "overrides": {"throttle_ms": -1}}, "b")
    await relay.submit_line({**START, "overrides": {"throttle_ms": 250, "format": "markdown"}}, "c")
    controller = relay.controller("c")
    assert controller is not None and controller.policy.throttle_s == 0.25
    await relay.close()


async def test_too_many_active_runs_is_a_503() -> None:
    relay = _relay(MemoryChat(), max_active_runs=2)
    await relay.submit_line(START, "a")
    await relay.submit_line(START, "b")
    with pytest.raises(IngestError, match="runs are active") as info:
        await relay.submit_line(START, "c")
    assert info.value.status == 503
    await relay.close()


async def test_a_retry_of_an_ended_run_with_seqs_is_taken_silently() -> None:
    chat = MemoryChat()
    relay = _relay(chat)
    lines = [{**START, "seq": 0}, {"kind": "text", "seq": 1, "text": "once"}, {"kind": "end", "seq": 2}]
    for line in lines:
        await relay.submit_line(line, "r")
    await relay.wait_done("r", 5)
    for line in lines:  # the client lost the answer and sends the same request again
        await relay.submit_line(line, "r")
    await relay.close()
    assert list(chat.messages.values()) == ["once"]


def test_deltas_that_arrive_together_are_joined_per_message_and_visibility() -> None:
    events = [
        parse_event({"run": "r", "kind": "text", "text": "Hel"}),
        parse_event({"run": "r", "kind": "text", "text": "lo"}),
        parse_event({"run": "r", "kind": "text", "text": "hmm", "visibility": "reasoning"}),
        parse_event({"run": "r", "kind": "text", "text": " world"}),
        parse_event({"run": "r", "kind": "text", "text": "!"}),
        parse_event({"run": "r", "kind": "block_end"}),
        parse_event({"run": "r", "kind": "text", "text": "Next", "message": 1}),
        parse_event({"run": "r", "kind": "text", "mode": "snapshot", "text": "Next one", "message": 1}),
    ]
    joined = join_deltas(events)
    assert [(e.kind, getattr(e, "text", None)) for e in joined] == [
        ("text", "Hello"),
        ("text", "hmm"),
        ("text", " world!"),
        ("block_end", None),
        ("text", "Next"),
        ("text", "Next one"),
    ]


async def test_a_bug_in_one_run_shows_its_person_a_failure_and_other_runs_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streamrelay.core.events import Phase
    from streamrelay.core.run.controller import RunController

    original = RunController.handle

    def handle(self: RunController, event: object) -> None:
        if isinstance(event, Phase) and event.name == "boom":
            raise RuntimeError("a bug")
        original(self, event)  # type: ignore[arg-type]

    monkeypatch.setattr(RunController, "handle", handle)
    chat = MemoryChat()
    relay = _relay(chat)
    await relay.submit_line({**START, "target": {"chat_id": 5}}, "bad")
    await relay.submit_line({**START, "target": {"chat_id": 6}}, "good")
    await relay.submit_line({"kind": "text", "text": "half an answer"}, "bad")
    await relay.submit_line({"kind": "phase", "name": "boom"}, "bad")
    await relay.submit_line({"kind": "text", "text": "fine"}, "good")
    await relay.submit_line({"kind": "end"}, "good")
    bad, good = await relay.wait_done("bad", 5), await relay.wait_done("good", 5)
    await relay.close()
    assert bad is not None and bad.done and bad.end_status == "error"
    assert any("internal error" in e and "a bug" in e for e in bad.errors)
    shown = list(chat.messages.values())
    assert any("went wrong" in t and "a bug" not in t for t in shown)  # a failure, not the sidecar's insides
    assert good is not None and good.status == "delivered" and "fine" in shown
    lane = relay.lane("bad")
    assert lane is not None and lane.closed and lane.units[-1].model_dump()["status"] == "error"


# --- the journal: resume after a restart ------------------------------------------------------------------------


async def test_an_interrupted_run_resumes_from_the_journal_and_finishes_without_its_agent() -> None:
    journal, ledger, chat = MemoryJournal(), MemoryLedger(), MemoryChat()
    relay = _relay(chat, ledger, journal=journal)
    await relay.submit_line({**START, "seq": 0}, "r")
    await relay.submit_line({"kind": "text", "seq": 1, "text": "Your order "}, "r")
    await relay.submit_line({"kind": "text", "seq": 2, "text": "shipped on Monday."}, "r")
    await relay.submit_line({"kind": "end", "seq": 3}, "r")
    await relay.close()  # the process stops before (or while) the run finalizes
    assert await journal.unfinished() == ["r"]

    restarted = _relay(chat, ledger, journal=journal)
    assert await restarted.resume() == ["r"]
    report = await restarted.wait_done("r", 5)
    assert report is not None and report.status == "delivered"
    assert list(chat.messages.values()) == ["Your order shipped on Monday."]  # once, whole
    assert await journal.unfinished() == []
    # the agent re-sends its run from seq 0 after its own crash: acknowledged and dropped, never 409
    again = await restarted.submit_lines(
        [({**START, "seq": 0}, None), ({"kind": "text", "seq": 1, "text": "Your order "}, None)], "r"
    )
    assert all(not isinstance(r, IngestError) and r.dropped for r in again)
    await restarted.close()
    assert list(chat.messages.values()) == ["Your order shipped on Monday."]


async def test_a_resumed_run_whose_agent_never_returns_is_closed_after_the_idle_timeout() -> None:
    journal, ledger, chat = MemoryJournal(), MemoryLedger(), MemoryChat()
    relay = _relay(chat, ledger, journal=journal)
    await relay.submit_line(START, "r")
    await relay.submit_line({"kind": "text", "text": "The first half"}, "r")
    await asyncio.sleep(0.05)
    await relay.close()

    restarted = _relay(chat, ledger, journal=journal, run_idle_timeout_s=0.2)
    await restarted.resume()
    report = await restarted.wait_done("r", 5)
    await restarted.close()
    assert report is not None and report.done and report.end_status == "error"
    assert list(chat.messages.values()) == ["The first half", IDLE_NOTICE]


async def test_a_repeated_seq_is_dropped_after_a_restart_too() -> None:
    journal, ledger, chat = MemoryJournal(), MemoryLedger(), MemoryChat()
    relay = _relay(chat, ledger, journal=journal)
    await relay.submit_line({**START, "seq": 0}, "r")
    await relay.submit_line({"kind": "text", "seq": 1, "text": "A"}, "r")
    await asyncio.sleep(0.05)
    await relay.close()
    restarted = _relay(chat, ledger, journal=journal)
    await restarted.resume()
    await asyncio.sleep(0.05)
    assert await restarted.submit_line({"kind": "text", "seq": 1, "text": "A"}, "r") == 0
    await restarted.submit_line({"kind": "text", "seq": 2, "text": "B"}, "r")
    await restarted.submit_line({"kind": "end", "seq": 3}, "r")
    await restarted.wait_done("r", 5)
    await restarted.close()
    assert list(chat.messages.values()) == ["AB"]


async def test_lines_that_arrive_together_are_journaled_in_one_commit() -> None:
    journal = MemoryJournal()
    relay = _relay(MemoryChat(), journal=journal)
    lines: list[tuple[object, str | None]] = [(START, None)]
    lines += [({"kind": "text", "text": f"{i} "}, None) for i in range(50)]
    results = await relay.submit_lines(lines, "r")
    assert all(not isinstance(r, IngestError) for r in results)
    assert journal.commits == 1 and len(await journal.lines("r")) == 51
    await relay.close()


async def test_a_resumed_block_run_never_shows_a_block_twice_when_the_replay_cuts_elsewhere() -> None:
    journal, ledger, chat = MemoryJournal(), MemoryLedger(), MemoryChat()
    policy = ChannelPolicy(
        name="c",
        delivery=DeliveryMode.BLOCK,
        throttle_s=0,
        block_chunk=ChunkParams(min_chars=10, max_chars=200),
        coalesce=CoalesceParams(min_chars=150, max_chars=200, idle_ms=50, joiner="\n\n"),
    )

    def make() -> Relay:
        return Relay({"c": ChannelRuntime(policy, chat)}, ledger, MonotonicClock(), journal=journal)

    relay = make()
    await relay.submit_line(START, "r")
    for para in ("First paragraph.", "Second paragraph.", "Third paragraph."):
        await relay.submit_line({"kind": "text", "text": para + "\n\n"}, "r")
        await asyncio.sleep(0.2)  # the coalescer's idle gap flushes each paragraph as its own block
    assert list(chat.messages.values())[:2] == ["First paragraph.", "Second paragraph."]
    await relay.close()  # killed: on replay the three paragraphs arrive at once and coalesce into one block

    restarted = make()
    await restarted.resume()
    fourth = "A fourth paragraph, long enough to push the joined replayed paragraphs out as one block. " * 2
    await restarted.submit_line({"kind": "text", "text": fourth.strip() + "\n\n"}, "r")
    await asyncio.sleep(0.2)
    await restarted.submit_line({"kind": "text", "text": "Fifth."}, "r")
    await restarted.submit_line({"kind": "end"}, "r")
    report = await restarted.wait_done("r", 5)
    await restarted.close()
    assert report is not None and report.status == "delivered"
    shown = "\n\n".join(chat.messages.values())
    expected = f"First paragraph.\n\nSecond paragraph.\n\nThird paragraph.\n\n{fourth.strip()}\n\nFifth."
    assert shown == expected  # each once, in order
    assert list(chat.messages.values())[:2] == ["First paragraph.", "Second paragraph."]


async def test_a_resumed_run_catches_up_in_one_step_not_every_intermediate_state() -> None:
    journal, ledger = MemoryJournal(), MemoryLedger()
    relay = _relay(MemoryChat(), ledger, journal=journal)
    await relay.submit_line(START, "r")
    lines: list[tuple[object, str | None]] = [({"kind": "text", "text": f"w{i} "}, None) for i in range(600)]
    await relay.submit_lines(lines, "r")  # more than a worker's batch (256)
    await relay.close()  # killed before the worker ran: nothing was shown

    adapter = FakeAdapter(MonotonicClock())
    restarted = Relay(
        {"c": ChannelRuntime(ChannelPolicy(name="c", throttle_s=0), adapter)}, ledger, MonotonicClock(), journal=journal
    )
    await restarted.resume()
    await restarted.submit_line({"kind": "end"}, "r")
    await restarted.wait_done("r", 5)
    await restarted.close()
    assert adapter.chat() == ["".join(f"w{i} " for i in range(600)).strip()]
    assert len(adapter.calls_of("send_text", "edit_text")) == 1  # one send of the whole text, no replayed steps


async def test_a_media_event_is_its_own_message_between_the_texts_around_it() -> None:
    chat = MemoryChat()
    relay = _relay(chat)
    await relay.submit_line(START, "r")
    await relay.submit_line({"kind": "text", "text": "The chart:"}, "r")
    await relay.submit_line(
        {"kind": "media", "url": "https://example.com/a.png", "media_kind": "image", "caption": "Q3"}, "r"
    )
    await relay.submit_line({"kind": "text", "text": "It grew."}, "r")
    await relay.submit_line({"kind": "end"}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert report is not None and report.status == "delivered"
    assert (report.media, report.media_parts) == (1, 1)
    assert list(chat.messages.values()) == ["The chart:", "image: https://example.com/a.png\nQ3", "It grew."]


async def test_a_media_event_with_a_bad_kind_or_url_is_refused_saying_what_to_send() -> None:
    relay = _relay(MemoryChat())
    await relay.submit_line(START, "r")
    with pytest.raises(IngestError, match="media_kind: Input should be 'image', 'file', 'audio' or 'video'"):
        await relay.submit_line({"kind": "media", "url": "https://example.com/a.png", "media_kind": "photo"}, "r")
    with pytest.raises(IngestError, match="is not an absolute http"):
        await relay.submit_line({"kind": "media", "url": "/tmp/a.png", "media_kind": "image"}, "r")
    await relay.close()


async def test_a_resumed_runs_idle_timeout_counts_afresh_from_the_resume() -> None:
    """Issue 24, item 6: the time the sidecar was down is not its agent's silence (before: a run quiet 100 s before
    the restart was closed at once; chaos seed 23 run 643 closed 1.3 s after the restart, its agent's replay under
    way)."""
    journal, ledger, chat = MemoryJournal(), MemoryLedger(), MemoryChat()
    relay = _relay(chat, ledger, journal=journal)
    await relay.submit_line(START, "r")
    await relay.submit_line({"kind": "text", "text": "The first half. "}, "r")
    await asyncio.sleep(0.05)
    await relay.close()
    journal._last_at["r"] -= 100  # its agent's last line came long before the restart

    restarted = _relay(chat, ledger, journal=journal, run_idle_timeout_s=60)
    await restarted.resume()
    await restarted.submit_line({"kind": "text", "text": "The second half."}, "r")  # taken: the run is open
    await restarted.submit_line({"kind": "end"}, "r")
    report = await restarted.wait_done("r", 5)
    await restarted.close()
    assert report is not None and report.status == "delivered", report
    assert list(chat.messages.values()) == ["The first half. The second half."]


async def test_a_report_rebuilt_from_the_ledger_keeps_the_end_status_rule_and_the_reason() -> None:
    ledger, chat = MemoryLedger(), MemoryChat()
    relay = _relay(chat, ledger, run_idle_timeout_s=0.2)
    await relay.submit_line(START, "r")
    await relay.submit_line({"kind": "text", "text": "half an answer"}, "r")
    live = await relay.wait_done("r", 5)
    await relay.close()
    rebuilt = await _relay(chat, ledger).report("r")  # a sidecar started after the run ended
    assert live is not None and rebuilt is not None
    assert live.status == rebuilt.status == "partial"  # every part delivered, but not a whole answer
    assert any("sent nothing" in e for e in rebuilt.errors)


async def test_a_run_whose_journal_no_longer_replays_is_dropped_alone_and_the_others_resume() -> None:
    journal, ledger, chat = MemoryJournal(), MemoryLedger(), MemoryChat()
    await journal.append([JournalEntry("broken", "{not json")])
    relay = _relay(chat, ledger, journal=journal)
    await relay.submit_line(START, "fine")
    await relay.submit_line({"kind": "text", "text": "kept"}, "fine")
    await relay.close()
    restarted = _relay(chat, ledger, journal=journal)
    assert await restarted.resume() == ["fine"]
    assert await journal.unfinished() == ["fine"]
    await restarted.submit_line({"kind": "end"}, "fine")
    report = await restarted.wait_done("fine", 5)
    await restarted.close()
    assert report is not None and report.status == "delivered"


async def test_a_seq_past_json_safe_integers_or_not_an_integer_is_refused() -> None:
    relay = _relay(MemoryChat())
    await relay.submit_line(START, "r")
    for seq in (2**63, "5", True):
        with pytest.raises(IngestError, match="seq"):
            await relay.submit_line({"kind": "text", "text": "x", "seq": seq}, "r")
    await relay.close()


class _OpenRefused(MemoryLedger):
    """A ledger whose ``start_run`` waits until told, then is refused (a Redis primary with no replica to
    acknowledge the write, a store outage)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def start_run(self, *args: Any, **kwargs: Any) -> Any:
        await self.release.wait()
        raise ConnectionError("no replica acknowledged the write")


async def test_a_request_waiting_for_room_in_a_run_whose_open_failed_gets_its_answer() -> None:
    """Two requests of one run: the first opens it and its ledger's ``start_run`` is refused; the second found the
    run opening and waited for room in its full queue. Before, that wait never ended (the run left the relay, no
    worker read the queue): the request hung. Now the queue is closed with the open: the second request returns,
    its lines journaled, and the run is interrupted, to resume from the journal."""
    ledger = _OpenRefused()
    relay = _relay(MemoryChat(), ledger, queue_size=2)
    first = asyncio.ensure_future(relay.submit_line(START, "r"))
    await asyncio.sleep(0.05)
    lines = [{"kind": "text", "text": f"{i} "} for i in range(6)]
    second = asyncio.ensure_future(relay.submit_lines([(line, None) for line in lines], "r"))
    await asyncio.sleep(0.05)
    assert not second.done()  # waiting for room in the opening run's queue
    ledger.release.set()
    with pytest.raises(ConnectionError):
        await asyncio.wait_for(first, 2)
    results = await asyncio.wait_for(second, 2)
    assert len(results) == 6 and "r" in relay.interrupted
    await relay.close()


@pytest.mark.parametrize("blank", [" ", "\t"])
async def test_an_answer_that_opens_with_blanks_past_a_messages_length_is_delivered(blank: str) -> None:
    """A preview whose pending text was spaces (or tabs) past one message's length ended the run's delivery with
    "internal error, delivery stopped: IndexError" (the blank text fits in no part): now nothing is shown for it
    and the answer after it is delivered."""
    chat = MemoryChat()
    relay = _relay(chat)
    await relay.submit_line(START, "r")
    await relay.submit_line({"kind": "text", "text": blank * 5000}, "r")
    await asyncio.sleep(0.05)
    await relay.submit_line({"kind": "text", "text": "\n\nthe answer"}, "r")
    await relay.submit_line({"kind": "end"}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert report is not None and report.status == "delivered", report
    assert [m.strip() for m in chat.messages.values()] == ["the answer"]
