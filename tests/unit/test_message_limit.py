"""The run's message limit (issue 12): ``ChannelPolicy.max_messages`` caps the chat messages of a run, in every mode.

Past it, the last allowed message ends with a short notice (within the platform's limit), the rest is never sent,
and the report says ``partial`` with an error naming the limit and its setting (:mod:`core.delivery.cap`).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from streamrelay.core.clock import FakeClock
from streamrelay.core.delivery.cap import MessageLimit
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.events import (
    BlockEnd,
    DeliveryMode,
    End,
    EndStatus,
    Event,
    MessageEnd,
    Phase,
    RunStart,
    Target,
    TextEvent,
    TextMode,
)
from streamrelay.core.ingest.sequencer import join_deltas
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import CUT_ERROR, DeliveryReport, ReportStatus, SlotRole, summarize
from streamrelay.core.run.controller import RunController
from streamrelay.core.run.stage import RunStage
from streamrelay.core.text.chunk_checks import fences_balanced
from streamrelay.core.units import LengthUnit, text_units
from tests.unit import test_run_stage as stage_tests
from tests.unit.fakes import FakeAdapter, settle
from tests.unit.test_run_controller import RUN, Harness, delta, deltas, end, harness, policy

pytestmark = pytest.mark.timeout(60)

SETTING = "clients.acme.max_messages_per_run"
NOTICE = MessageLimit(3, SETTING).notice


def limited(
    delivery: DeliveryMode, max_messages: int = 3, *, max_units: int = 4096, block_min: int = 20
) -> ChannelPolicy:
    base = policy(delivery, max_units=max_units, block_min=block_min)
    return replace(base, max_messages=max_messages, max_messages_setting=SETTING)


def words(n_chars: int) -> str:
    """Plain prose of about ``n_chars`` characters (spaces to break at)."""
    out, size, i = [], 0, 0
    while size < n_chars:
        word = f"word{i}"
        out.append(word)
        size += len(word) + 1
        i += 1
    return " ".join(out)


def fits(chat: list[str], max_units: int) -> bool:
    return all(text_units(m, LengthUnit.UTF16) <= max_units for m in chat)


def assert_cut(report: DeliveryReport, confirmed: int) -> None:
    assert report.status is ReportStatus.PARTIAL
    assert report.confirmed == confirmed and report.failed == 0 and report.unsent == 0
    assert any(e.startswith(CUT_ERROR) and SETTING in e for e in report.errors), report.errors


# --- preview ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("delta_chars", [1000, 10 * 4096])
async def test_preview_rolls_over_to_at_most_max_messages_the_last_ending_with_the_notice(delta_chars: int) -> None:
    text = words(10 * 4096)
    h = await harness(limited(DeliveryMode.PREVIEW))
    for event in deltas(text, delta_chars):
        chat = await h.feed(event)
        assert len(chat) <= 3 and fits(chat, 4096)
    report = await h.close()
    chat = h.adapter.chat()
    assert len(chat) == 3 and fits(chat, 4096)
    assert chat[-1].endswith(NOTICE) and NOTICE not in "".join(chat[:-1])
    assert text.startswith(chat[0]) and chat[1] in text  # the answer's start, in order
    assert len(h.adapter.calls_of("send_text")) == 3  # a fourth message is never even attempted
    assert_cut(report, confirmed=3)


async def test_preview_that_fits_the_limit_has_no_notice_and_is_delivered() -> None:
    text = words(2 * 4096 + 500)  # three messages
    h = await harness(limited(DeliveryMode.PREVIEW))
    await h.feed(*deltas(text, 700))
    report = await h.close()
    chat = h.adapter.chat()
    assert len(chat) == 3 and not any(NOTICE in m for m in chat)
    assert report.status is ReportStatus.DELIVERED and not report.errors


async def test_a_final_that_fits_takes_back_the_notice_shown_while_streaming() -> None:
    h = await harness(limited(DeliveryMode.PREVIEW, max_units=100))
    chat = await h.feed(*deltas(words(1000), 50))
    assert len(chat) == 3 and chat[-1].endswith(NOTICE)
    report = await h.close(end(final_text="The short answer after all."))
    assert h.adapter.chat() == ["The short answer after all."]
    assert report.status is ReportStatus.DELIVERED and not report.errors


async def test_a_replace_to_a_shorter_text_lifts_the_cut() -> None:
    h = await harness(limited(DeliveryMode.PREVIEW, max_units=100))
    await h.feed(*deltas(words(1000), 50))
    chat = await h.feed(TextEvent(run=RUN, mode=TextMode.REPLACE, text="Short now."))
    assert chat == ["Short now."]
    chat = await h.feed(delta(" And it grows again."))
    assert chat == ["Short now. And it grows again."]
    assert (await h.close()).status is ReportStatus.DELIVERED


async def test_the_notice_keeps_a_cut_code_fence_balanced_within_the_limit() -> None:
    code = "```python\n" + "\n".join(f"print({i})" for i in range(200)) + "\n```\n"
    h = await harness(limited(DeliveryMode.PREVIEW, max_units=120))
    await h.feed(*deltas(code, 40))
    report = await h.close()
    chat = h.adapter.chat()
    assert len(chat) == 3 and fits(chat, 120)
    assert chat[-1].endswith(NOTICE) and all(fences_balanced(m) for m in chat)
    assert_cut(report, confirmed=3)


# --- block, final, progress ------------------------------------------------------------------------------------


async def test_block_mode_with_small_blocks_stops_at_the_limit_and_ends_the_last_with_the_notice() -> None:
    h = await harness(limited(DeliveryMode.BLOCK, max_messages=4, max_units=200, block_min=20))
    events: list[Event] = []
    for i in range(12):
        events += [delta(f"Paragraph {i}: " + words(60)), BlockEnd(run=RUN), MessageEnd(run=RUN)]
    for event in events:
        chat = await h.feed(event)
        assert len(chat) <= 4 and fits(chat, 200)
    report = await h.close()
    chat = h.adapter.chat()
    assert len(chat) == 4 and fits(chat, 200)
    assert [m.split(":")[0] for m in chat] == ["Paragraph 0", "Paragraph 1", "Paragraph 2", "Paragraph 3"]
    assert chat[-1].endswith(MessageLimit(4, SETTING).notice)
    assert len(h.adapter.calls_of("send_text")) == 4
    assert_cut(report, confirmed=4)


async def test_block_mode_final_past_the_limit_cuts_its_tail_without_an_extra_message() -> None:
    h = await harness(limited(DeliveryMode.BLOCK, max_messages=2, max_units=100, block_min=20))
    await h.feed(delta("First block of the answer."), BlockEnd(run=RUN), MessageEnd(run=RUN))
    report = await h.close(end(final_text="First block of the answer.\n\n" + words(500)))
    chat = h.adapter.chat()
    assert len(chat) == 2 and fits(chat, 100)
    assert chat[0] == "First block of the answer." and chat[1].endswith(MessageLimit(2, SETTING).notice)
    assert_cut(report, confirmed=2)


@pytest.mark.parametrize("delivery", [DeliveryMode.FINAL, DeliveryMode.PROGRESS])
async def test_final_and_progress_modes_split_the_final_within_the_limit(delivery: DeliveryMode) -> None:
    h = await harness(limited(delivery, max_messages=4))
    await h.feed(Phase(run=RUN, name="drafting"), *deltas(words(10 * 4096), 5000))
    report = await h.close()
    chat = h.adapter.chat()
    answer = chat[1:] if delivery is DeliveryMode.PROGRESS else chat  # progress: the status message comes first
    assert len(chat) == 4 and fits(chat, 4096)
    assert answer[-1].endswith(MessageLimit(4, SETTING).notice)
    assert len(h.adapter.calls_of("send_text")) == 4
    assert_cut(report, confirmed=4)


async def test_side_messages_leave_the_answer_its_message() -> None:
    """With one message allowed, the progress board is not shown: the one message is the answer's."""
    h = await harness(limited(DeliveryMode.PROGRESS, max_messages=1))
    await h.feed(Phase(run=RUN, name="drafting"), *deltas(words(9000), 3000))
    report = await h.close()
    chat = h.adapter.chat()
    assert len(chat) == 1 and chat[0].startswith("word0 ") and chat[0].endswith(MessageLimit(1, SETTING).notice)
    assert "1 message]" in chat[0]
    assert_cut(report, confirmed=1)


async def test_a_failure_past_the_limit_is_reported_not_sent_as_an_extra_message() -> None:
    h = await harness(limited(DeliveryMode.PREVIEW, max_messages=2, max_units=100))
    await h.feed(*deltas(words(1000), 100))
    report = await h.close(end(EndStatus.ERROR))
    assert len(h.adapter.chat()) == 2
    assert report.status is ReportStatus.PARTIAL and any(e.startswith(CUT_ERROR) for e in report.errors)


# --- determinism: replay and restart ---------------------------------------------------------------------------


def capped_stage(delivery: DeliveryMode, max_messages: int) -> RunStage:
    """A stage as :func:`tests.unit.test_run_stage.stage_for` builds it, with a message limit."""
    pol = replace(stage_tests.policy(delivery), max_messages=max_messages)
    return stage_tests.stage_of(pol, limit=MessageLimit.of(pol))


def capped_replay(delivery: DeliveryMode, events: list[Event], *, batch: int) -> dict[str, object]:
    stage = capped_stage(delivery, max_messages=2)
    for i in range(0, len(events), batch):
        for event in join_deltas(events[i : i + batch]):
            stage.handle(event)
    stage.end(End(run=RUN, status=EndStatus.OK))
    state = stage_tests.desired(stage)
    state["errors"] = [part.error for part in stage.book.parts()]
    return state


@pytest.mark.parametrize("delivery", [DeliveryMode.PREVIEW, DeliveryMode.BLOCK, DeliveryMode.FINAL])
def test_a_capped_run_replays_to_the_same_desired_state_however_it_is_batched(delivery: DeliveryMode) -> None:
    events = stage_tests.recorded("openai-chat/long-text.jsonl")
    live = capped_replay(delivery, events, batch=1)
    parts = live["parts"]
    assert isinstance(parts, list) and len(parts) == 2, "the recorded answer needs more than two 700-unit parts"
    assert parts[-1][1].endswith(MessageLimit(2, "max_messages_per_run").notice)
    assert live["errors"] == [None, MessageLimit(2, "max_messages_per_run").error()]  # what the report will say
    assert capped_replay(delivery, events, batch=len(events)) == live  # a journal replay: the whole backlog at once
    assert live["units"] == stage_tests.replay(delivery, events, batch=1)["units"]  # the pipeline lane: untouched


@pytest.mark.parametrize("delivery", [DeliveryMode.PREVIEW, DeliveryMode.BLOCK])
async def test_a_restarted_run_reaches_the_same_capped_chat_without_sending_twice(delivery: DeliveryMode) -> None:
    pol = limited(delivery, max_units=100, block_min=20)
    events: list[Event] = []
    for i in range(10):
        events += [delta(f"Part {i}. " + words(150)), BlockEnd(run=RUN)]
    first = await Harness(pol).open()
    for event in events[:12]:  # past the limit already
        await first.feed(event)
    shown = first.adapter.chat()
    assert len(shown) == 3 and shown[-1].endswith(NOTICE)
    await first.ctl.interrupt()  # the process dies

    clock, adapter = first.clock, first.adapter
    start = RunStart(run=RUN, channel="fake", target=Target(chat_id=1))
    second = RunController(start, pol, adapter, SendChain(clock), first.ledger, clock)
    await second.open()
    for event in events:  # the journal replayed: the whole run
        second.handle(event)
    await settle()
    report = await second.end(end())
    assert adapter.chat() == shown
    assert len(adapter.calls_of("send_text")) == 3
    assert_cut(report, confirmed=3)


async def test_a_report_rebuilt_from_the_ledger_says_partial_too() -> None:
    ledger = MemoryLedger()
    h = Harness(limited(DeliveryMode.FINAL), ledger=ledger)
    await h.open()
    await h.feed(*deltas(words(5 * 4096), 4096))
    await h.close()
    parts = [p.report() for p in await ledger.parts(RUN)]
    rebuilt = summarize(RUN, "fake", parts, done=True, end_status="ok")
    assert rebuilt.status is ReportStatus.PARTIAL and any(SETTING in e for e in rebuilt.errors)


# --- the slot book -----------------------------------------------------------------------------------------------


def test_the_slot_book_refuses_a_slot_past_the_limit_and_keeps_one_for_the_answer() -> None:
    book = SlotBook(RUN, 0.0, native=False, limit=MessageLimit(2, SETTING))
    status = book.claim_slot(SlotRole.STATUS, "working")
    assert not status.over_limit and book.room(SlotRole.STATUS) == 0 and book.room(SlotRole.ANSWER) == 1
    assert book.claim_slot(SlotRole.REASONING, "thinking").over_limit  # the last one stays the answer's
    answer = book.claim_slot(SlotRole.ANSWER, "hello")
    assert not answer.over_limit and book.room(SlotRole.ANSWER) == 0
    notice = book.claim_slot(SlotRole.NOTICE, "failed")
    assert notice.over_limit and notice not in book.slots
    assert [s.desired for s in book.slots] == ["working", "hello"]


def test_no_limit_is_the_default() -> None:
    assert ChannelPolicy(name="x").max_messages is None
    assert MessageLimit.of(ChannelPolicy(name="x")) is None
    assert SlotBook(RUN, 0.0, native=False).room() is None


async def test_sends_stay_within_the_limit_with_a_slow_platform() -> None:
    """Whatever the platform's pace, the desired state never holds more parts than the limit."""
    pol = limited(DeliveryMode.PREVIEW, max_units=100)
    clock = FakeClock()
    adapter = FakeAdapter(clock, max_units=100, latency_s=0.5)
    start = RunStart(run=RUN, channel="fake", target=Target(chat_id=1))
    ctl = RunController(start, pol, adapter, SendChain(clock), MemoryLedger(), clock)
    await ctl.open()
    for event in deltas(words(2000), 30):
        ctl.handle(event)
        assert len([s for s in ctl.rec.book.slots if s.role is SlotRole.ANSWER]) <= 3
    report = await ctl.end(end())
    assert len(adapter.chat()) == 3
    assert_cut(report, confirmed=3)
