"""A run's delivery timeline (core/run/timeline.py): what ``public`` shows of marks, taken batches and calls, and
that it keeps no object of its own per call it can share (issue 23: an open run's long-lived objects made while it
streams keep the allocator's pages)."""

from __future__ import annotations

import math

from streamrelay.core.delivery.calls import Done, NotDone, Unknown
from streamrelay.core.delivery.slots import OpKind, Outcome
from streamrelay.core.errors import RateLimitedError, UncertainDeliveryError
from streamrelay.core.ports import Settlement, SettleOutcome
from streamrelay.core.run.timeline import MAX_ENTRIES, Timeline, Timelines


def test_a_timeline_shows_marks_taken_batches_and_calls_with_their_outcomes() -> None:
    timelines = Timelines(keep=2)
    timeline = timelines.open("r1")
    timeline.taken("text", 8)
    timeline.taken("text", 8)  # joins the entry before
    timeline.call(1.0, "r1", 0, "answer", str(OpKind.SEND), "sendMessage", Done("7"), str(Outcome.ACK))
    timeline.taken("text", 3)  # a call came between: a new entry
    limited = RateLimitedError("slow down", retry_after_s=2.5)
    timeline.call(2.0, "r1", 0, "answer", "edit", "editMessageText", NotDone(limited), "rate_limited")
    found = Done(Settlement(SettleOutcome.FOUND, "7"))
    timeline.call(3.0, "r1/fan-1", 1, "answer", "settle", "settle", found, "ack")
    timeline.call(4.0, "r1", None, None, "typing", "sendChatAction", Unknown(UncertainDeliveryError("reset")))
    timelines.close("r1", "delivered")
    entries = timelines.get("r1").public()["entries"]  # type: ignore[union-attr]
    kinds = [e["type"] for e in entries]
    assert kinds.count("opened") == 1 and kinds.count("ended") == 1 and kinds.count("call") == 4
    taken = [e for e in entries if e["type"] == "taken"]
    assert [(e["kind"], e["count"]) for e in taken] == [("text", 16), ("text", 3)]
    assert all(e["last_at"] >= e["at"] for e in taken)
    calls = [e for e in entries if e["type"] == "call"]
    assert calls[0] == {
        "type": "call",
        "at": 1.0,
        "done_at": calls[0]["done_at"],
        "place": "r1",
        "part": 0,
        "role": "answer",
        "op": "send",
        "method": "sendMessage",
        "outcome": "done",
        "label": "ack",
    }
    assert type(calls[0]["op"]) is str and type(calls[0]["label"]) is str  # an enum's value, not the member
    assert calls[1]["outcome"] == "not_done" and calls[1]["retry_after_s"] == 2.5
    assert calls[1]["error"] == "RateLimitedError"
    assert calls[2]["place"] == "r1/fan-1" and calls[2]["settled"] == "found" and "retry_after_s" not in calls[2]
    assert calls[3]["outcome"] == "unknown" and calls[3]["part"] is None and calls[3]["role"] is None
    assert next(e for e in entries if e["type"] == "ended")["status"] == "delivered"


def test_the_same_call_twice_is_one_shared_entry_and_its_numbers_stay_in_the_runs_array() -> None:
    one, two = Timeline("a"), Timeline("b")
    for timeline in (one, two):
        timeline.call(1.0, timeline.run, 2, "answer", str(OpKind.EDIT), "editMessageText", Done(None), "ack")
    assert one._entries[0] is two._entries[0]  # what is shared is the point
    assert len(one._nums) == 3 and math.isnan(one._nums[2])


def test_a_timeline_keeps_at_most_max_entries_and_counts_the_rest() -> None:
    timeline = Timeline("r1")
    for k in range(MAX_ENTRIES + 5):
        timeline.taken("tool_call" if k % 2 else "status", 1)
    public = timeline.public()
    assert len(public["entries"]) == MAX_ENTRIES and public["left_out"] == 5
