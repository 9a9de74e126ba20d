"""Media through the relay (issue 15, part 2): its own message in order with the text around it in every delivery
mode, never merged into the text, never shown twice after a restart (journal replay), a change of the answer after a
media item never moves text across it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamrelay.adapters.sqlite import SqliteLedger
from streamrelay.core.channel import ChannelRuntime
from streamrelay.core.clock import MonotonicClock
from streamrelay.core.delivery.coverage import split_covered
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.events import DeliveryMode
from streamrelay.core.media import MediaItem, MediaKind
from streamrelay.core.policy import ChannelPolicy
from streamrelay.core.records.journal import MemoryJournal
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import SlotRole
from streamrelay.core.run.relay import Relay
from streamrelay.core.run.stage import PROGRESS_TITLE
from tests.unit.fakes import MemoryChat

START = {"kind": "run.start", "channel": "c", "target": {"chat_id": 5}}
CHART = {"kind": "media", "url": "https://example.com/chart.png", "media_kind": "image", "caption": "The chart"}
SHEET = {"kind": "media", "url": "https://example.com/q3.xlsx", "media_kind": "file"}
CHART_TEXT = "image: https://example.com/chart.png\nThe chart"
SHEET_TEXT = "file: https://example.com/q3.xlsx"
MODES = [DeliveryMode.PREVIEW, DeliveryMode.BLOCK, DeliveryMode.FINAL, DeliveryMode.PROGRESS]


def _relay(chat: MemoryChat, ledger: MemoryLedger, journal: MemoryJournal, mode: DeliveryMode) -> Relay:
    policy = ChannelPolicy(name="c", throttle_s=0, delivery=mode)
    return Relay({"c": ChannelRuntime(policy, chat)}, ledger, MonotonicClock(), journal=journal)


def _answer(chat: MemoryChat) -> list[str]:
    """What the chat shows but the progress status message."""
    return [text for text in chat.messages.values() if not text.startswith((PROGRESS_TITLE, "Done."))]


async def _until(check: Any) -> None:
    for _ in range(200):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")


@pytest.mark.parametrize("mode", MODES)
async def test_media_between_paragraphs_is_its_own_message_in_order(mode: DeliveryMode) -> None:
    chat = MemoryChat()
    relay = _relay(chat, MemoryLedger(), MemoryJournal(), mode)
    for line in (START, {"kind": "text", "text": "First."}, CHART, {"kind": "text", "text": "Second."}):
        await relay.submit_line(line, "r")
    await relay.submit_line(SHEET, "r")
    await relay.submit_line({"kind": "text", "text": "Third."}, "r")
    await relay.submit_line({"kind": "end"}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert _answer(chat) == ["First.", CHART_TEXT, "Second.", SHEET_TEXT, "Third."]
    assert report is not None and report.status == "delivered" and (report.media, report.media_parts) == (2, 2)


@pytest.mark.parametrize("mode", MODES)
async def test_a_restart_mid_run_shows_no_media_twice(mode: DeliveryMode) -> None:
    chat, ledger, journal = MemoryChat(), MemoryLedger(), MemoryJournal()
    relay = _relay(chat, ledger, journal, mode)
    for line in (START, {"kind": "text", "text": "First."}, CHART, {"kind": "text", "text": "Second"}):
        await relay.submit_line(line, "r")
    if mode in (DeliveryMode.PREVIEW, DeliveryMode.BLOCK):
        await _until(lambda: CHART_TEXT in chat.messages.values())  # the media was acknowledged before the kill
    await relay.close()  # killed mid-run: the journal replays, the ledger knows what was shown

    restarted = _relay(chat, ledger, journal, mode)
    await restarted.resume()
    await restarted.submit_line({"kind": "text", "text": " paragraph."}, "r")
    await restarted.submit_line(SHEET, "r")
    await restarted.submit_line({"kind": "text", "text": "Third."}, "r")
    await restarted.submit_line({"kind": "end"}, "r")
    report = await restarted.wait_done("r", 5)
    await restarted.close()
    assert _answer(chat) == ["First.", CHART_TEXT, "Second paragraph.", SHEET_TEXT, "Third."]
    assert report is not None and report.status == "delivered" and report.media == 2


async def test_a_final_text_is_cut_where_each_stretch_ends() -> None:
    head, tail = split_covered("Here is the chart.As you can see, it grew.", "Here is the chart.")
    assert (head, tail) == ("Here is the chart.", "As you can see, it grew.")
    assert split_covered("A new answer.", "Here is the chart.") == ("", "A new answer.")
    assert split_covered("Here is the chart.", "Here is the chart.") == ("Here is the chart.", "")


def test_a_media_items_text_reads_back() -> None:
    item = MediaItem(url="https://example.com/a.mp3", kind=MediaKind.AUDIO, caption="line one\nline two")
    assert MediaItem.from_text(item.text()) == item
    assert MediaItem.from_text("video: https://example.com/v.mp4").caption is None
    with pytest.raises(ValueError, match="not a media part"):
        MediaItem.from_text("Hello: world")


async def test_a_replace_after_a_media_item_keeps_the_text_before_it() -> None:
    chat = MemoryChat()
    relay = _relay(chat, MemoryLedger(), MemoryJournal(), DeliveryMode.PREVIEW)
    for line in (START, {"kind": "text", "text": "First."}, CHART, {"kind": "text", "text": "Draft."}):
        await relay.submit_line(line, "r")
    await relay.submit_line({"kind": "text", "mode": "replace", "text": "First.Final words."}, "r")
    await relay.submit_line({"kind": "end"}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert list(chat.messages.values()) == ["First.", CHART_TEXT, "Final words."]
    assert report is not None and report.status == "delivered"


@pytest.mark.parametrize("mode", [DeliveryMode.FINAL, DeliveryMode.PROGRESS])
async def test_a_failed_run_that_shows_its_answer_only_at_the_end_shows_none_of_its_media(mode: DeliveryMode) -> None:
    chat = MemoryChat()
    relay = _relay(chat, MemoryLedger(), MemoryJournal(), mode)
    for line in (START, {"kind": "text", "text": "First."}, CHART, {"kind": "error", "message": "the tool failed"}):
        await relay.submit_line(line, "r")
    await relay.submit_line({"kind": "end", "status": "error"}, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert CHART_TEXT not in chat.messages.values() and "First." not in chat.messages.values()
    assert report is not None and report.media == 0 and report.media_parts == 0


async def test_a_failed_block_run_keeps_the_media_it_streamed() -> None:
    chat = MemoryChat()
    relay = _relay(chat, MemoryLedger(), MemoryJournal(), DeliveryMode.BLOCK)
    for line in (START, {"kind": "text", "text": "First."}, CHART, {"kind": "end", "status": "error"}):
        await relay.submit_line(line, "r")
    report = await relay.wait_done("r", 5)
    await relay.close()
    assert list(chat.messages.values())[:2] == ["First.", CHART_TEXT]
    assert report is not None and report.status == "partial" and report.media == 1


async def test_a_part_claimed_before_a_media_part_is_restored_before_it() -> None:
    book = SlotBook("r", 0.0, native=False)
    first = book.claim_slot(SlotRole.ANSWER, "First.")
    chart = book.claim_slot(SlotRole.MEDIA, CHART_TEXT)
    second = book.claim_slot(SlotRole.ANSWER, "First, continued.", before=chart)  # a later part of the same text
    after = book.claim_slot(SlotRole.ANSWER, "After.")
    assert [s.index for s in book.slots] == [first.index, second.index, chart.index, after.index] == [0, 2, 1, 3]
    ledger = await SqliteLedger.open(":memory:")
    for slot in book.slots:  # every part acknowledged before the restart
        slot.message_id, slot.shown = str(100 + slot.index), slot.desired
        await ledger.save_part(book.record(slot))
    records = await ledger.parts("r")
    await ledger.close()
    assert [r.slot for r in records] == [0, 1, 2, 3] and records[2].precedes == 1

    restored = SlotBook("r", 0.0, native=False)
    restored.restore(records)
    assert [s.index for s in restored.slots] == [0, 2, 1, 3]  # the order shown, not the order claimed
    assert restored.restored_text(SlotRole.ANSWER) == "First."
    restored.claim_slot(SlotRole.ANSWER, "First.")
    assert restored.restored_text(SlotRole.ANSWER) == "First, continued."  # the text before the media part
    restored.claim_slot(SlotRole.ANSWER, "First, continued.")
    assert restored.restored_text(SlotRole.ANSWER) is None  # the media part ends the text before it
