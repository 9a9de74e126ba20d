"""Native streaming through the run controller: a stream while the part grows, persisted at the end.

Append style is Slack's chat.startStream / appendStream / stopStream; replace style is Telegram's
sendMessageDraft then sendMessage. A refusal falls back to preview without losing a word.
"""

from __future__ import annotations

from streamrelay.core.clock import Clock, FakeClock
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.errors import UncertainDeliveryError
from streamrelay.core.events import DeliveryMode, End, EndStatus, RunStart, Target, TextEvent, TextMode
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import ReportStatus
from streamrelay.core.run.controller import RunController
from streamrelay.core.units import LengthUnit
from tests.unit.fakes import STREAM_METHODS, FakeNativeAdapter, ManualClock, drive, settle

RUN = "r1"


def policy(delivery: DeliveryMode = DeliveryMode.NATIVE, max_units: int = 4096) -> ChannelPolicy:
    return ChannelPolicy(
        name="fake", delivery=delivery, max_units=max_units, unit=LengthUnit.UTF16, fmt=TextFormat.PLAIN, throttle_s=0
    )


def delta(text: str) -> TextEvent:
    return TextEvent(run=RUN, mode=TextMode.DELTA, text=text)


async def controller(adapter: FakeNativeAdapter, p: ChannelPolicy, clock: Clock) -> RunController:
    start = RunStart(run=RUN, channel="fake", target=Target(chat_id=1))
    ctl = RunController(start, p, adapter, SendChain(clock), MemoryLedger(), clock)
    await ctl.open()
    return ctl


def methods(adapter: FakeNativeAdapter) -> list[str]:
    return [c.method for c in adapter.calls_of("send_text", "edit_text", "delete_message", *STREAM_METHODS)]


async def test_append_style_streams_one_message_and_stops_it_with_the_final_text() -> None:
    clock = FakeClock()
    adapter = FakeNativeAdapter(clock, style="append")
    ctl = await controller(adapter, policy(), clock)
    for piece in ("Hello", " wor", "ld."):
        ctl.handle(delta(piece))
        await settle()
    assert adapter.chat() == ["Hello world."]
    report = await ctl.end(End(run=RUN, status=EndStatus.OK))
    assert adapter.chat() == ["Hello world."]
    assert methods(adapter) == ["stream_start", "stream_update", "stream_update", "stream_finish"]
    assert report.status is ReportStatus.DELIVERED and report.message_ids == ["1"]


async def test_replace_style_keeps_the_draft_out_of_the_chat_until_it_is_sent() -> None:
    clock = FakeClock()
    adapter = FakeNativeAdapter(clock, style="replace")
    ctl = await controller(adapter, policy(), clock)
    ctl.handle(delta("Draft text"))
    await settle()
    assert adapter.chat() == [] and list(adapter.drafts.values()) == ["Draft text"]
    await ctl.end(End(run=RUN, status=EndStatus.OK, final_text="Draft text, final."))
    assert adapter.chat() == ["Draft text, final."] and adapter.drafts == {}


async def test_a_part_that_fills_up_is_persisted_at_once_and_the_next_one_streams() -> None:
    clock = FakeClock()
    adapter = FakeNativeAdapter(clock, style="replace", max_units=40)
    ctl = await controller(adapter, policy(max_units=40), clock)
    text = "First sentence is here. " * 4 + "Tail."
    for i in range(0, len(text), 7):
        ctl.handle(delta(text[i : i + 7]))
        await settle()
    assert len(adapter.chat()) >= 1  # a frozen part is a real message before the run ends
    await ctl.end(End(run=RUN, status=EndStatus.OK))
    assert "".join(adapter.chat()).replace(" ", "") == text.replace(" ", "")
    assert adapter.drafts == {}


async def test_a_refusal_falls_back_to_preview_messages_without_losing_text() -> None:
    clock = FakeClock()
    adapter = FakeNativeAdapter(clock, refuse=True)
    ctl = await controller(adapter, policy(), clock)
    ctl.handle(delta("Hello"))
    await settle()
    ctl.handle(delta(" world."))
    await settle()
    report = await ctl.end(End(run=RUN, status=EndStatus.OK))
    assert adapter.chat() == ["Hello world."]
    assert methods(adapter)[0] == "stream_start" and "stream_update" not in methods(adapter)
    assert report.status is ReportStatus.DELIVERED


async def test_a_target_the_platform_refuses_streams_as_preview_from_the_start() -> None:
    clock = FakeClock()
    adapter = FakeNativeAdapter(clock, refuse_target="drafts are for private chats")
    ctl = await controller(adapter, policy(), clock)
    ctl.handle(delta("Hi there."))
    await ctl.end(End(run=RUN, status=EndStatus.OK))
    assert adapter.chat() == ["Hi there."]
    assert not [c for c in adapter.calls if c.method in STREAM_METHODS]


async def test_a_replace_that_empties_the_stream_cancels_it() -> None:
    clock = FakeClock()
    adapter = FakeNativeAdapter(clock, style="append")
    ctl = await controller(adapter, policy(), clock)
    ctl.handle(delta("Wrong start"))
    await settle()
    ctl.handle(TextEvent(run=RUN, mode=TextMode.REPLACE, text=""))
    await settle()
    ctl.handle(delta("Right."))
    await ctl.end(End(run=RUN, status=EndStatus.OK))
    assert adapter.chat() == ["Right."]


async def test_a_draft_that_would_lapse_is_shown_again_while_nothing_new_arrives() -> None:
    clock = ManualClock()
    adapter = FakeNativeAdapter(clock, style="replace")  # stream_refresh_s = 20
    ctl = await controller(adapter, policy(), clock)
    ctl.handle(delta("Working on it"))
    await settle()
    for _ in range(45):  # 45 s of a long tool call: nothing new to show
        clock.advance(1.0)
        await settle()
    refreshes = [c.at for c in adapter.calls if c.method == "stream_update"]
    assert refreshes == [20.0, 40.0]
    await drive(clock, ctl.end(End(run=RUN, status=EndStatus.OK)))
    assert adapter.chat() == ["Working on it"] and adapter.drafts == {}


async def test_an_append_that_may_have_landed_is_never_appended_again() -> None:
    clock = FakeClock()
    adapter = FakeNativeAdapter(clock, style="append")
    adapter.fail("stream_update", 1, UncertainDeliveryError("timed out"), landed=True)
    ctl = await controller(adapter, policy(), clock)
    ctl.handle(delta("Hello"))
    await settle()
    ctl.handle(delta(" world"))
    await settle()
    ctl.handle(delta("."))
    await ctl.end(End(run=RUN, status=EndStatus.OK))
    assert adapter.chat() == ["Hello world."]  # rewritten whole by an edit, not "Hello world world."


async def test_after_a_restart_an_open_draft_is_finished_never_edited_as_a_message() -> None:
    clock = FakeClock()
    ledger = MemoryLedger()
    first = FakeNativeAdapter(clock, style="replace")
    start = RunStart(run=RUN, channel="fake", target=Target(chat_id=1))
    ctl = RunController(start, policy(), first, SendChain(clock), ledger, clock)
    await ctl.open()
    ctl.handle(delta("Half an ans"))
    await settle()
    await ctl.rec.cancel()  # the process dies with the draft open
    assert (await ledger.parts(RUN))[0].streaming

    second = FakeNativeAdapter(clock, style="replace")  # a new process: its adapter never saw that draft
    again = RunController(start, policy(), second, SendChain(clock), ledger, clock)
    await again.open()
    again.handle(delta("Half an answer, whole."))
    await again.end(End(run=RUN, status=EndStatus.OK, final_text="Half an answer, whole."))
    assert second.chat() == ["Half an answer, whole."]
    assert "edit_text" not in [c.method for c in second.calls]


async def test_a_stream_start_that_timed_out_does_not_lose_the_part() -> None:
    clock = FakeClock()
    adapter = FakeNativeAdapter(clock, style="replace")
    adapter.fail("stream_start", 1, UncertainDeliveryError("timed out"), landed=True)
    ctl = await controller(adapter, policy(), clock)
    ctl.handle(delta("The whole"))
    await settle()
    ctl.handle(delta(" answer."))
    report = await ctl.end(End(run=RUN, status=EndStatus.OK))
    assert adapter.chat() == ["The whole answer."]
    assert report.status is ReportStatus.DELIVERED
