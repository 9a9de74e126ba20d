"""The run monitor: numbered events, exact replay after a reconnect, a reset past the buffer, the state."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamrelay.core.events import ErrorEvent, Phase, Source, TextEvent, TextMode, ToolResult, Visibility
from streamrelay.core.run.live import AnswerLive, ErrorLive, Live, PhaseLive, StatusLive, ToolResultLive
from streamrelay.core.run.monitor import RunMonitor
from streamrelay.core.text.assembler import TextAssembler
from streamrelay.core.text.buffer import TextBuffer
from tests.unit.fakes import settle

pytestmark = pytest.mark.timeout(10)


def monitor(buffer: int = 100) -> RunMonitor:
    return RunMonitor("r1", buffer=buffer, wall=lambda: 1000.0)


def told(events: list[Live]) -> list[dict[str, Any]]:
    """The events as a watcher reads them: their JSON objects."""
    return [event.wire() for event in events]


def state_of(m: RunMonitor) -> dict[str, Any]:
    """The monitor's state, its JSON object."""
    return m.state


def test_events_are_numbered_and_carry_run_seq_and_time() -> None:
    m = monitor()
    first = m.publish("run", channel="web", platform="web", mode="preview")
    second = m.publish("answer", delta="Hi")
    assert (first.id, second.id, second.seq, second.run, second.ts) == (1, 2, 2, "r1", 1000.0)
    assert state_of(m)["answer"] == "Hi" and state_of(m)["channel"] == "web"


def test_a_reconnect_gets_exactly_what_it_missed_once() -> None:
    m = monitor()
    for text in ("a", "b", "c", "d"):
        m.publish("answer", delta=text)
    assert [e["delta"] for e in told(m.since(2))] == ["c", "d"]
    assert told(m.since(4)) == []


@pytest.mark.parametrize("last_id", [1, 0, 99, -1])
def test_past_the_buffer_or_an_unknown_id_comes_a_reset_with_the_whole_state(last_id: int) -> None:
    m = monitor(buffer=3)
    for text in ("a", "b", "c", "d", "e"):
        m.publish("answer", delta=text)
    [reset] = told(m.since(last_id))
    assert reset["type"] == "reset" and reset["id"] == 5 and reset["state"]["answer"] == "abcde"


def test_a_reset_answer_replaces_and_a_final_is_marked() -> None:
    m = monitor()
    m.publish("answer", delta="Refunds take 4 days.")
    m.publish("answer", text="Refunds take 14 days.", reset=True, final=True)
    assert state_of(m)["answer"] == "Refunds take 14 days." and state_of(m)["final"] is True


def test_the_state_keeps_agents_parts_the_timeline_and_the_end() -> None:
    m = monitor()
    source = {"agent_id": "a", "session_id": "s1"}
    m.publish("agent", key="s1", source=source, state="started", delta="Hel")
    m.publish("agent", key="s1", source=source, state="done", delta="lo")
    m.publish("delivery", channel="web", part=0, role="answer", state="sent", message_id="1", text="x")
    m.publish("delivery", channel="web", part=0, role="answer", state="edited", message_id="1", text="xy")
    m.publish("phase", name="planning", source=None)
    m.publish("end", status="ok", delivery="delivered")
    state = told([m.reset()])[0]["state"]
    assert state["agents"]["s1"] == {"source": source, "state": "done", "text": "Hello"}
    assert state["parts"]["web/0"]["state"] == "edited" and state["parts"]["web/0"]["text"] == "xy"
    assert [e["type"] for e in state["timeline"]] == ["phase"]
    assert (state["ended"], state["delivery"]) == ("ok", "delivered")


async def test_nothing_is_kept_after_the_end_and_waiters_are_released() -> None:
    m = monitor()
    m.publish("run", channel="web", platform="web", mode="preview")
    waiter = asyncio.ensure_future(m.wait(1))
    await settle()
    assert not waiter.done()
    m.publish("end", status="ok", delivery="delivered")
    await settle()
    assert [e["type"] for e in told(waiter.result())] == ["end"]
    m.publish("answer", delta="late")
    assert m.last_id == 2 and state_of(m)["answer"] == "" and told(await m.wait(2)) == []


def test_progress_events_come_from_the_ingest_events_that_are_progress() -> None:
    child = Source(agent_id="a", session_id="s")
    m = monitor()
    assert isinstance(m.progress(Phase(run="r", name="planning")), PhaseLive)
    result = ToolResult(run="r", id="t", name="search", summary="3 hits", source=child)
    kept = m.progress(result)
    assert isinstance(kept, ToolResultLive) and kept.summary == "3 hits" and (kept.source or {})["agent_id"] == "a"
    assert isinstance(m.progress(ErrorEvent(run="r", message="quota")), ErrorLive)
    assert isinstance(m.progress(TextEvent(run="r", text="looking", visibility=Visibility.STATUS)), StatusLive)
    assert m.progress(TextEvent(run="r", text="answer")) is None
    assert [(e["type"], e["source"]) for e in told(m.since(0))] == [
        ("phase", None),
        ("tool_result", child.model_dump()),
        ("error", None),
        ("status", None),
    ]


def test_the_buffer_holds_a_bounded_amount_of_text() -> None:
    m = RunMonitor("r1", buffer=1000, max_chars=100, wall=lambda: 0.0)
    for _ in range(10):
        m.publish("answer", delta="x" * 30)
    [reset] = told(m.since(1))  # the oldest events were dropped for their size, not their number
    assert reset["type"] == "reset" and reset["state"]["answer"] == "x" * 300
    assert [e["id"] for e in told(m.since(8))] == [9, 10]


def test_a_finished_run_keeps_only_its_last_events_and_its_state() -> None:
    m = monitor(buffer=1000)
    for i in range(100):
        m.publish("answer", delta=f"{i} ")
    m.publish("end", status="ok", delivery="delivered")
    assert [e["id"] for e in told(m.since(99))] == [100, 101]
    [reset] = told(m.since(10))
    assert reset["state"]["ended"] == "ok" and reset["state"]["answer"].startswith("0 1 2")


def test_a_finished_run_keeps_its_answer_once_not_again_in_its_last_events() -> None:
    m = monitor(buffer=1000)
    m.answer_delta("a" * 3000)
    m.answer_delta("b" * 3000)  # no watcher read yet: one event of 6,000 characters
    m.publish("answer", text="a" * 3000 + "b" * 3000, reset=True, final=True)
    m.publish("end", status="ok", delivery="delivered")
    kept = told(m.since(m.last_id - 1))
    assert [e["type"] for e in kept] == ["end"]
    [reset] = told(m.since(1))  # the text events are gone: the state has the answer
    assert reset["state"]["answer"] == "a" * 3000 + "b" * 3000 and reset["state"]["ended"] == "ok"


def test_an_id_of_another_monitor_or_past_the_last_gets_a_reset_at_once() -> None:
    m = monitor()
    second = [m.publish("answer", delta=text) for text in ("a", "b", "c")][1]
    assert m.resume_after(m.sse_id(second)) == 2 and m.resume_after("2") == 2 and m.resume_after(None) == 0
    assert m.resume_after("0badc0de.2") == -1  # a run resumed after a restart has a new monitor
    assert [e["type"] for e in told(m.since(-1))] == ["reset"]
    assert [e["type"] for e in told(m.since(13))] == ["reset"]  # a watcher of the old monitor, further along
    with pytest.raises(ValueError):
        m.resume_after("not-an-id")


async def test_waiting_past_the_last_id_does_not_hang() -> None:
    m = monitor()
    m.publish("answer", delta="a")
    assert [e["type"] for e in told(await asyncio.wait_for(m.wait(13), 1))] == ["reset"]


def test_a_growing_web_part_is_told_as_appends() -> None:
    m = monitor()
    m.publish("delivery", channel="web", part=0, role="answer", state="sent", message_id="1", text="Hel")
    m.publish("delivery", channel="web", part=0, role="answer", state="edited", message_id="1", append="lo")
    assert told([m.reset()])[0]["state"]["parts"]["web/0"]["text"] == "Hello"


async def test_answer_deltas_no_watcher_read_yet_are_one_event_with_the_same_text() -> None:
    m = monitor()
    m.publish("run", channel="web", platform="web", mode="preview")
    for text in ("a", "b", "c"):
        m.answer_delta(text)
    assert [e["delta"] for e in told(m.since(1))] == ["abc"]  # one event per read, not one per delta
    m.answer_delta("d")
    m.answer_delta("e")
    m.publish("phase", name="drafting")
    m.answer_delta("f")
    assert [(e["type"], e.get("delta")) for e in told(m.since(2))] == [
        ("answer", "de"),
        ("phase", None),
        ("answer", "f"),
    ]
    waiter = asyncio.ensure_future(m.wait(m.last_id))
    await settle()
    m.answer_delta("g")
    await settle()
    assert [e["delta"] for e in told(waiter.result())] == ["g"]
    assert state_of(m)["answer"] == "abcdefg" and m.reset().id == m.last_id


# --- one copy of the answer: the monitor refers to the run's text by ranges (issue 23, item 5) -----------------------


def _shared() -> tuple[RunMonitor, TextAssembler]:
    assembler = TextAssembler()
    m = monitor()
    m.share_answer(assembler.view())
    m.publish("run", channel="web", platform="web", mode="preview")
    return m, assembler


def _grow(m: RunMonitor, assembler: TextAssembler, delta: str) -> None:
    assembler.apply(None, 0, TextMode.DELTA, delta)  # as the stage does: the answer grows, then watchers are told
    m.answer_delta(delta)


async def test_a_shared_answer_is_told_by_ranges_and_kept_once() -> None:
    m, assembler = _shared()
    for delta in ("Hello", ", ", "world"):
        _grow(m, assembler, delta)
    assert [e["delta"] for e in told(m.since(1))] == ["Hello, world"]  # merged, read from the shared text
    _grow(m, assembler, "! 📦")
    m.publish("phase", name="checking")
    _grow(m, assembler, " Done.")
    assert [(e["type"], e.get("delta")) for e in told(m.since(2))] == [
        ("answer", "! 📦"),
        ("phase", None),
        ("answer", " Done."),
    ]
    answer = m._answer
    assert state_of(m)["answer"] == "Hello, world! 📦 Done."
    assert isinstance(answer, TextBuffer) and answer.length == 0  # no text of its own
    assert all(not isinstance(e.delta, str) for e in m._events if isinstance(e, AnswerLive))


def test_the_committed_final_is_kept_as_the_stages_own_string_not_copied() -> None:
    m, assembler = _shared()
    _grow(m, assembler, "A draft 📦")
    final = "The answer 📦, checked."  # past Latin-1: a TextBuffer of it would be a second copy
    m.publish("answer", text=final, reset=True, final=True)
    assert m._answer is final and state_of(m)["answer"] is final
    [event] = [e for e in m._events if isinstance(e, AnswerLive) and e.final]
    assert event.text is final
    m.answer_delta(" And more.")  # text told after a whole string still grows it
    assert state_of(m)["answer"] == final + " And more."


def test_a_shared_answer_replaced_gives_watchers_behind_a_reset_not_text_it_no_longer_has() -> None:
    m, assembler = _shared()
    _grow(m, assembler, "Draft one.")
    told(m.since(0))  # a watcher read it: the next delta is an event of its own
    assembler.apply(None, 0, TextMode.REPLACE, "Second draft.")
    m.publish("answer", text="Second draft.", reset=True)
    _grow(m, assembler, " More.")
    [reset] = told(m.since(1))  # the first delta's range names text that is gone
    assert reset["type"] == "reset" and reset["state"]["answer"] == "Second draft. More."
    assert [(e.get("text"), e.get("delta")) for e in told(m.since(3))] == [(None, " More.")]
    m.publish("answer", text="Final, committed.", reset=True, final=True)  # a final that is not the text: kept as is
    assert state_of(m)["answer"] == "Final, committed." and told(m.since(4))[0]["text"] == "Final, committed."


def test_a_web_part_refers_to_the_text_the_delivery_side_shows() -> None:
    m = monitor()
    fact = {"part": 0, "role": "answer", "message_id": "1"}
    shown = ["Hel", "Hello", "Hello, world", "Goodbye"]
    for state, text in zip(("sent", "edited", "edited", "edited"), shown, strict=True):
        m.delivered("web", {**fact, "state": state}, text)
        assert state_of(m)["parts"]["web/0"]["text"] is text  # the delivery side's string, not a copy
    [reset] = told(
        m.since(0)
    )  # "Goodbye" did not grow from what was shown: the ranges before it name text that is gone
    assert reset["type"] == "reset" and reset["state"]["parts"]["web/0"]["text"] == "Goodbye"
    m2 = monitor()
    m2.delivered("web", {**fact, "state": "sent"}, "Hel")
    m2.delivered("web", {**fact, "state": "edited"}, "Hello")
    assert [(e.get("text"), e.get("append")) for e in told(m2.since(0))] == [("Hel", None), (None, "lo")]
    m2.delivered("web", {**fact, "state": "edited"}, "Bye")  # not a growth: the earlier ranges cannot be read
    [reset] = told(m2.since(0))
    assert reset["type"] == "reset" and reset["state"]["parts"]["web/0"]["text"] == "Bye"
    assert [(e.get("text"), e.get("append")) for e in told(m2.since(2))] == [("Bye", None)]


def test_edits_no_watcher_read_join_into_one_event_that_tells_the_same_messages() -> None:
    m = monitor()
    fact = {"part": 0, "role": "answer", "message_id": "1"}
    m.answer_delta("Hel")
    m.delivered("web", {**fact, "state": "sent"}, "Hel")
    for delta, text in (("lo", "Hello"), (", wo", "Hello, wo"), ("rld", "Hello, world")):
        m.answer_delta(delta)
        m.delivered("web", {**fact, "state": "edited"}, text)
    m.delivered("telegram", {**fact, "state": "edited"}, None)  # another row: its own event
    m.delivered("telegram", {**fact, "state": "edited"}, None)
    events = told(m.since(0))
    kinds = [(e["type"], e.get("state"), e.get("text"), e.get("append"), e.get("channel")) for e in events]
    assert kinds == [
        ("answer", None, None, None, None),
        ("delivery", "sent", "Hel", None, "web"),
        ("delivery", "edited", None, "lo, world", "web"),  # three edits, each character once
        ("delivery", "edited", None, None, "telegram"),
    ]
    assert events[0]["delta"] == "Hello, world"  # the answer's deltas joined across the delivery events
    # a watcher read them: the next edit is an event of its own, as is a 429's retry (never joined)
    m.delivered("web", {**fact, "state": "edited"}, "Hello, world!")
    m.delivered("web", {**fact, "state": "retrying", "retry_after_s": 1.0}, "Hello, world!")
    m.delivered("web", {**fact, "state": "edited"}, "Hello, world!?")
    after = [(e["state"], e.get("append"), e.get("retry_after_s")) for e in told(m.since(4))]
    assert after == [("edited", "!", None), ("retrying", None, 1.0), ("edited", "?", None)]
    assert state_of(m)["rate_limited"] == 1 and state_of(m)["parts"]["web/0"]["text"] == "Hello, world!?"
    m.delivered("web", {**fact, "state": "edited"}, "Bye")  # not a growth, joined: the whole text, a new range
    m.delivered("web", {**fact, "state": "edited"}, "Bye now")
    assert [(e.get("text"), e.get("append")) for e in told(m.since(7))] == [("Bye now", None)]
