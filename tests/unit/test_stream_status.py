"""Status lines on a native stream (Teams' informative updates), decided by the delivery machine with no I/O: when
one is due, how it is cut, and what each outcome comes to (core/delivery/machine.py, its STATUS_RULES table)."""

from __future__ import annotations

import pytest

from streamrelay.core.delivery.calls import Done, NotDone, StreamInform, StreamInformEnd, Unknown
from streamrelay.core.delivery.machine import STATUS_RULES, StatusVerdict, cut_status, status_rule
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.errors import (
    AnswerTimeoutError,
    DeliveryError,
    NativeUnavailableError,
    PayloadRejectedError,
    PlatformUnavailableError,
    RateLimitedError,
    RejectReason,
    RetryAfterTooLongError,
    UncertainDeliveryError,
)
from streamrelay.core.events import Target
from streamrelay.core.records.report import SlotRole
from tests.unit.fakes import delivery_machine

ROWS = [
    (Done(), StatusVerdict.SHOWN),
    (NotDone(RateLimitedError("429", retry_after_s=1.0)), StatusVerdict.AGAIN),
    (NotDone(RetryAfterTooLongError(RateLimitedError("429", retry_after_s=900.0), 60.0)), StatusVerdict.DROPPED),
    (NotDone(NativeUnavailableError("the stream ended")), StatusVerdict.DROPPED),
    (NotDone(PayloadRejectedError("too long", reason=RejectReason.TOO_LONG)), StatusVerdict.DROPPED),
    (NotDone(PlatformUnavailableError("502")), StatusVerdict.DROPPED),
    (NotDone(DeliveryError("odd")), StatusVerdict.DROPPED),
    (Unknown(AnswerTimeoutError("timeout")), StatusVerdict.DROPPED),
    (Unknown(UncertainDeliveryError("reset")), StatusVerdict.DROPPED),
]


@pytest.mark.parametrize(("result", "verdict"), ROWS, ids=[f"{type(r[0]).__name__}-{r[1]}" for r in ROWS])
def test_each_outcome_of_a_status_line(result: Done | NotDone | Unknown, verdict: StatusVerdict) -> None:
    assert status_rule(result).verdict is verdict


def test_every_row_says_why_and_the_last_rows_take_anything() -> None:
    assert all(rule.why for rule in STATUS_RULES)
    assert status_rule(Unknown(DeliveryError("odd"))) is STATUS_RULES[-1]


def test_a_status_is_due_before_the_answer_and_while_its_stream_is_open_never_after() -> None:
    book = SlotBook("r1", 0.0, True)
    m = delivery_machine(book, native=True, status_chars=1000)
    assert not m.status_due()  # nothing to show yet
    book.set_stream_status("  Searching the docs…  ")
    assert m.status_due() and m.status_call() == StreamInform(Target(chat_id=7), "Searching the docs…")
    m.status_applied("Searching the docs…", Done())
    assert not m.status_due() and m.status_calls == 1  # shown: not again until the status changes
    slot = book.claim_slot(SlotRole.ANSWER, "Refunds take")
    book.set_stream_status("using lookup")
    assert not m.status_due()  # the answer's stream start comes first
    slot.streaming = True
    assert m.status_due()  # between the stream's chunks
    slot.streaming = False
    assert not m.status_due()  # its stream is finished: no status line opens another
    slot.streaming = True
    book.finalizing = True
    assert not m.status_due()  # never during or after the final


def test_a_429_keeps_the_line_due_and_any_other_failure_drops_it() -> None:
    book = SlotBook("r1", 0.0, True)
    m = delivery_machine(book, native=True, status_chars=1000)
    book.set_stream_status("Searching")
    m.status_applied("Searching", NotDone(RateLimitedError("429", retry_after_s=1.0)))
    assert m.status_due()
    m.status_applied("Searching", Unknown(AnswerTimeoutError("timeout")))
    assert not m.status_due() and m.status_calls == 0 and m.status_off() is None
    book.set_stream_status("Reading")
    assert m.status_due()


def test_no_status_line_where_the_adapter_shows_none_or_native_is_off() -> None:
    book = SlotBook("r1", 0.0, True)
    m = delivery_machine(book, native=True)  # an adapter without StreamStatus (Slack, Telegram)
    book.set_stream_status("Searching")
    assert not m.status_due()
    m = delivery_machine(book, native=True, status_chars=1000)
    m.native_off()  # the platform refused native streaming: the run goes on as messages
    assert not m.status_due()


def test_the_end_takes_down_a_stream_of_status_lines_only_when_one_was_shown() -> None:
    book = SlotBook("r1", 0.0, True)
    m = delivery_machine(book, native=True, status_chars=1000)
    assert m.status_off() is None
    book.set_stream_status("Searching")
    m.status_applied("Searching", Done())
    assert m.status_off() == StreamInformEnd(Target(chat_id=7))


def test_a_long_status_is_cut_within_the_limit_in_utf16_units_between_code_points() -> None:
    assert cut_status("short", 10) == "short"
    cut = cut_status("a" * 1500, 1000)
    assert len(cut) == 1000 and cut.endswith("…")
    emoji = cut_status("😀" * 600, 1000)  # 1,200 UTF-16 units
    assert emoji.endswith("…") and len(emoji.encode("utf-16-le")) // 2 <= 1000
    assert all(ch in "😀…" for ch in emoji)
