"""Sub-agents, the two lanes, inline reasoning, shown reasoning, the gate over the lane, typing indicators.

Driven directly on RunController / Reconciler with fakes (no HTTP): what the chat shows, what the pipeline lane
carries.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from streamrelay.core.contracts.units import ToolCallUnit
from streamrelay.core.delivery.reconciler import Reconciler
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.errors import RateLimitedError
from streamrelay.core.events import (
    Commit,
    DeliveryMode,
    End,
    EndStatus,
    ErrorEvent,
    Lane,
    Source,
    Target,
    TextEvent,
    TextMode,
    ToolCall,
    ToolCallState,
    ToolResult,
    Visibility,
)
from streamrelay.core.lanes.gate import Action, ActionCatalog, ActionClass, Verdict, ask_gate
from streamrelay.core.lanes.pipeline import FinishedCall, PipelineLane
from streamrelay.core.policy import ReasoningPolicy, SubagentPolicy
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import SlotRole
from tests.unit.fakes import FakeAdapter, ManualClock, settle
from tests.unit.test_run_controller import CHILD, RUN, Harness, delta, end, harness, policy

pytestmark = pytest.mark.timeout(30)

NESTED = Source(agent_id="fetcher", session_id="s-3", parent_session_id="s-2", depth=2, path="s-1/researcher/fetcher")
OTHER = Source(agent_id="checker", session_id="s-4", parent_session_id="s-1", depth=1, path="s-1/checker")


def child_end(source: Source, status: EndStatus = EndStatus.OK, final_text: str | None = None) -> End:
    return End(run=RUN, status=status, source=source, final_text=final_text)


def call(call_id: str, state: ToolCallState, source: Source | None = None, **kw: Any) -> ToolCall:
    return ToolCall(run=RUN, id=call_id, name=kw.pop("name", "search"), state=state, source=source, **kw)


def kinds(h: Harness) -> list[str]:
    return [u.kind for u in h.ctl.lane.units]


def wire(h: Harness) -> list[dict[str, Any]]:
    """The lane's units as their JSON objects (the lane holds them typed)."""
    return [u.model_dump(mode="json") for u in h.ctl.lane.units]


# --- inline <think> and shown reasoning ------------------------------------------------------------------


@pytest.mark.parametrize("mode", [DeliveryMode.PREVIEW, DeliveryMode.BLOCK, DeliveryMode.FINAL])
async def test_inline_think_cut_across_deltas_never_reaches_the_chat(mode: DeliveryMode) -> None:
    h = await harness(policy(mode))
    pieces = ["<thi", "nk>the user", " wants a short", " answer</th", "ink>\n\nShort", " answer. A <b>", " tag stays."]
    await h.feed(*(delta(p) for p in pieces))
    await h.close()
    assert h.adapter.chat() == ["Short answer. A <b> tag stays."]
    assert not any("user" in t or "think" in t for t in h.sent_texts())


async def test_a_possible_partial_tag_is_held_back_until_it_can_be_classified() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW))
    assert await h.feed(delta("<thi")) == []  # could open a think block before the answer: held
    assert await h.feed(delta("s is fine")) == ["<this is fine"]
    assert await h.feed(delta(", and so is <think> now")) == ["<this is fine, and so is <think> now"]


async def test_a_snapshot_with_inline_reasoning_shows_only_the_answer() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW))
    snap = TextEvent(run=RUN, mode=TextMode.SNAPSHOT, text="<think>plan</think>Answer")
    await h.feed(snap, TextEvent(run=RUN, mode=TextMode.SNAPSHOT, text="<think>plan</think>Answer, whole."))
    await h.close()
    assert h.adapter.chat() == ["Answer, whole."]


async def test_shown_reasoning_is_its_own_message_never_in_the_answer() -> None:
    h = await harness(replace(policy(DeliveryMode.PREVIEW), reasoning=ReasoningPolicy.SHOWN))
    reasoning = TextEvent(run=RUN, text="Compare both options.", visibility=Visibility.REASONING)
    await h.feed(reasoning, delta("<think> Then pick one.</think>"), delta("Option B."))
    await h.close()
    assert h.adapter.chat() == ["💭 Compare both options. Then pick one.", "Option B."]


async def test_shown_reasoning_longer_than_a_message_shows_its_latest_part() -> None:
    h = await harness(replace(policy(DeliveryMode.PREVIEW, max_units=60), reasoning=ReasoningPolicy.SHOWN))
    words = " ".join(f"step{i}" for i in range(40))
    await h.feed(TextEvent(run=RUN, text=words, visibility=Visibility.REASONING), delta("Done."))
    await h.close()
    shown, answer = h.adapter.chat()
    assert shown.startswith("💭 …") and shown.endswith("step39") and len(shown.encode("utf-16-le")) // 2 <= 60
    assert answer == "Done."


async def test_reasoning_is_hidden_in_progress_mode_even_when_shown() -> None:
    h = await harness(replace(policy(DeliveryMode.PROGRESS), reasoning=ReasoningPolicy.SHOWN))
    await h.feed(TextEvent(run=RUN, text="secret plan", visibility=Visibility.REASONING), delta("Answer."))
    await h.close()
    assert not any("secret" in t for t in h.sent_texts())


# --- sub-agents: status lines, final messages ------------------------------------------------------------


async def test_status_lines_are_a_tree_of_true_facts() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW, subagents=SubagentPolicy.STATUS))
    await h.feed(
        delta("child scratch", source=CHILD),
        call("t1", ToolCallState.START, CHILD, name="web_search"),
        delta("grandchild scratch", source=NESTED),
        ToolResult(run=RUN, id="t2", name="fetch", summary="3 pages", source=NESTED),
        delta("x", source=OTHER),
        ErrorEvent(run=RUN, message="quota", source=OTHER),
        child_end(NESTED),
        child_end(OTHER, EndStatus.ERROR),
        delta("Answer."),
    )
    status = h.adapter.chat()[0]
    assert status.splitlines() == ["↳ researcher: using web_search", "  ↳ fetcher: done", "↳ checker: failed"]
    await h.close()
    status = h.adapter.chat()[0]
    assert status.splitlines()[0] == "↳ researcher: stopped before it finished"  # never claimed done
    assert not any("scratch" in t or "quota" in t for t in h.sent_texts())


async def test_two_sessions_of_one_path_are_two_lines() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW, subagents=SubagentPolicy.STATUS))
    again = CHILD.model_copy(update={"session_id": "s-9"})
    await h.feed(child_end(CHILD), delta("y", source=again), delta("Answer."))
    assert h.adapter.chat()[0].splitlines() == ["↳ researcher: done", "↳ researcher: started"]


async def test_a_child_end_puts_its_whole_message_on_the_pipeline_lane() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW))
    await h.feed(
        delta("<think>hmm</think>Found ", source=CHILD),
        TextEvent(run=RUN, text="3 sources.", source=CHILD),
        child_end(CHILD),
        child_end(CHILD),  # a repeated end adds nothing
        delta("x", source=OTHER),
        call("c9", ToolCallState.ARGS_DELTA, OTHER, args_delta='{"q": "cu'),
        child_end(OTHER, EndStatus.ERROR),
        delta("Answer."),
    )
    await h.close()
    units = wire(h)
    assert kinds(h) == ["message", "tool_call.malformed", "agent.failed", "commit", "run.end"]
    assert units[0]["text"] == "Found 3 sources." and units[0]["source"]["agent_id"] == "researcher"
    assert units[1]["raw"] == '{"q": "cu' and units[1]["source"]["agent_id"] == "checker"
    assert "text" not in units[2]  # a failed child's unchecked text is never a unit
    assert h.adapter.chat() == ["Answer."]


async def test_an_end_with_final_text_is_the_childs_message() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW))
    await h.feed(delta("draft", source=CHILD), child_end(CHILD, final_text="Checked result."))
    assert wire(h)[0]["text"] == "Checked result."


async def test_pipeline_lane_events_are_never_shown_but_a_commit_there_still_commits() -> None:
    h = await harness(policy(DeliveryMode.PROGRESS))
    hidden = TextEvent(run=RUN, text="for the parent only", lane=Lane.PIPELINE)
    await h.feed(hidden, delta("Shown."), Commit(run=RUN, lane=Lane.PIPELINE))
    assert h.adapter.chat()[-1] == "Shown." and h.ctl.committed == "Shown."
    await h.close()
    assert not any("parent only" in t for t in h.sent_texts())


# --- tool calls: schema, progress preview, the gate ------------------------------------------------------


async def test_a_call_that_fails_its_schema_is_malformed_never_a_call() -> None:
    def validator(name: str, args: dict[str, Any]) -> str | None:
        return None if "q" in args else f"args do not match {name}'s schema: 'q' is a required property"

    h = Harness(policy(DeliveryMode.FINAL))
    start = h.ctl.start_event
    from streamrelay.core.run.controller import RunController

    h.ctl = RunController(start, h.policy, h.adapter, SendChain(h.clock), h.ledger, h.clock, validator=validator)
    await h.open()
    await h.feed(call("a", ToolCallState.END, args={"q": "x"}), call("b", ToolCallState.END, args={"query": "x"}))
    assert kinds(h) == ["tool_call", "tool_call.malformed"]
    assert "required property" in wire(h)[1]["error"] and wire(h)[1]["raw"] == '{"query": "x"}'


async def test_strict_json_refuses_nan_and_repeated_keys() -> None:
    h = await harness(policy(DeliveryMode.FINAL))
    for cid, raw in (("a", '{"n": NaN}'), ("b", '{"k": 1, "k": 2}')):
        await h.feed(call(cid, ToolCallState.ARGS_DELTA, args_delta=raw), call(cid, ToolCallState.END))
    assert kinds(h) == ["tool_call.malformed", "tool_call.malformed"]


async def test_progress_shows_tool_calls_with_redacted_arguments() -> None:
    h = await harness(policy(DeliveryMode.PROGRESS))
    args = {"user": "ann", "password": "hunter2", "note": "x" * 100}
    await h.feed(call("t1", ToolCallState.START, name="login"), call("t1", ToolCallState.END, name="login", args=args))
    status = h.adapter.chat()[0]
    assert '• using login (user: "ann", password: •••, note: "xxxxxx' in status
    assert "hunter2" not in status and "x" * 50 not in status


async def test_the_gate_waits_for_the_commit_point_then_lets_the_call_go() -> None:
    catalog = ActionCatalog([Action("search", ActionClass.IDEMPOTENT), Action("send_email", ActionClass.IRREVERSIBLE)])
    h = await harness(policy(DeliveryMode.PROGRESS))
    await h.feed(call("m1", ToolCallState.END, name="send_email", args={"to": "a@b.c"}))
    decision, unit = await ask_gate(catalog, h.ctl.lane, "m1")
    assert decision.verdict is Verdict.WAIT and isinstance(unit, ToolCallUnit) and unit.name == "send_email"
    waiting = asyncio.ensure_future(ask_gate(catalog, h.ctl.lane, "m1", wait_s=10))
    await settle()
    assert not waiting.done()
    await h.feed(delta("Sent."), Commit(run=RUN))
    await settle()
    assert waiting.done() and waiting.result()[0].verdict is Verdict.RUN


async def test_the_gate_refuses_what_waits_once_the_run_failed_before_its_commit() -> None:
    catalog = ActionCatalog([Action("send_email", ActionClass.IRREVERSIBLE)])
    h = await harness(policy(DeliveryMode.PROGRESS))
    await h.feed(call("m1", ToolCallState.END, name="send_email", args={}))
    await h.close(end(EndStatus.ERROR))
    decision, _ = await ask_gate(catalog, h.ctl.lane, "m1", wait_s=5)
    assert decision.verdict is Verdict.REFUSE and "without passing its commit point" in decision.reason
    assert kinds(h)[-1] == "run.end" and wire(h)[-1]["committed"] is False


async def test_a_lane_wakes_its_readers_and_ends_with_run_end() -> None:
    lane = PipelineLane("r")
    reader = asyncio.ensure_future(lane.wait(0))
    await settle()
    assert not reader.done()
    lane.emit(FinishedCall("c", "search", None, args={}))
    await settle()
    assert [u.index for u in reader.result()] == [1]
    lane.close("ok", committed=True)
    assert await lane.wait(2) == [] and lane.units[-1].kind == "run.end"
    with pytest.raises(RuntimeError, match="closed"):
        lane.emit(FinishedCall("d", "search", None, args={}))


# --- typing indicators -----------------------------------------------------------------------------------


def typing_rig(clock: ManualClock) -> tuple[FakeAdapter, Reconciler]:
    adapter = FakeAdapter(clock)
    rec = Reconciler(
        book=SlotBook("r1", 0.0, native=False),
        adapter=adapter,
        chain=SendChain(clock),
        target=Target(chat_id=1),
        ledger=MemoryLedger(),
        clock=clock,
        typing_every_s=4.0,
    )
    return adapter, rec


async def test_typing_shows_while_nothing_new_is_visible_and_stops_at_the_end() -> None:
    clock = ManualClock()
    adapter, rec = typing_rig(clock)
    rec.start()
    await settle()
    assert len(adapter.calls_of("send_typing")) == 1  # at once: the person waits from the start
    for _ in range(8):
        clock.advance(1.0)
        await settle()
    assert [c.at for c in adapter.calls_of("send_typing")] == [0.0, 4.0, 8.0]
    rec.book.claim_slot(SlotRole.ANSWER, "Hello")
    await settle()
    clock.advance(3.0)
    await settle()
    assert len(adapter.calls_of("send_typing")) == 3  # something new is visible: no indicator for 4 s
    clock.advance(1.0)
    await settle()
    assert [c.at for c in adapter.calls_of("send_typing")][-1] == 12.0
    await rec.finish()
    clock.advance(60.0)
    await settle()
    assert len(adapter.calls_of("send_typing")) == 4  # never after the end


async def test_a_failing_typing_indicator_is_skipped_and_never_delays_the_answer() -> None:
    clock = ManualClock()
    adapter, rec = typing_rig(clock)
    adapter.fail("send_typing", range(0, 100), RateLimitedError("slow down", retry_after_s=1.0))
    rec.start()
    await settle()
    rec.book.claim_slot(SlotRole.ANSWER, "Hello")
    clock.advance(1.0)
    await settle()
    assert adapter.chat() == ["Hello"]
    await rec.cancel()
    clock.advance(30.0)
    await settle()
    assert len(adapter.calls_of("send_typing")) == 1


# --- found by review: regressions ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [DeliveryMode.PREVIEW, DeliveryMode.BLOCK, DeliveryMode.FINAL, DeliveryMode.PROGRESS])
async def test_inline_reasoning_in_a_final_text_or_commit_text_never_shows(mode: DeliveryMode) -> None:
    h = await harness(policy(mode))
    await h.feed(delta("The answer."), Commit(run=RUN, text="<think>plan A</think>\nThe answer."))
    await h.close(end(final_text="<think>the secret plan</think>\n\nThe answer."))
    assert h.adapter.chat()[-1] == "The answer."
    assert not any("plan" in t for t in h.sent_texts())


async def test_a_childs_final_text_loses_its_inline_reasoning() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW))
    await h.feed(child_end(CHILD, final_text="<think>hmm</think>Checked."))
    assert wire(h)[0]["text"] == "Checked."


async def test_arguments_nested_too_deeply_are_malformed_and_the_run_goes_on() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW))
    deep = "[" * 100_000
    await h.feed(call("d", ToolCallState.ARGS_DELTA, args_delta=deep), call("d", ToolCallState.END))
    await h.feed(delta("Still here."))
    await h.close()
    assert kinds(h)[0] == "tool_call.malformed" and "nested too deeply" in wire(h)[0]["error"]
    assert h.adapter.chat() == ["Still here."]


async def test_an_args_object_with_nan_is_malformed() -> None:
    h = await harness(policy(DeliveryMode.FINAL))
    await h.feed(call("n", ToolCallState.END, args={"amount": float("nan")}))
    assert kinds(h) == ["tool_call.malformed"] and "strict JSON" in wire(h)[0]["error"]


async def test_an_answer_that_is_only_whitespace_so_far_does_not_hold_back_status_lines() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW, subagents=SubagentPolicy.STATUS))
    await h.feed(delta("\n"), delta("scratch", source=CHILD))
    assert h.adapter.chat() == ["↳ researcher: started"]
    await h.feed(delta("Answer."))
    assert h.adapter.chat() == ["↳ researcher: started", "Answer."]


async def test_a_childs_pipeline_lane_text_is_never_shown_nor_its_message() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW, subagents=SubagentPolicy.STATUS))
    private = TextEvent(run=RUN, text="for the parent only", source=CHILD, lane=Lane.PIPELINE)
    await h.feed(private, delta("Shown.", source=CHILD), child_end(CHILD))
    assert wire(h)[0]["text"] == "Shown."
    assert not any("parent only" in t for t in h.sent_texts())


async def test_progress_that_fails_after_its_commit_says_so() -> None:
    h = await harness(policy(DeliveryMode.PROGRESS))
    await h.feed(delta("Refunds take 14 days."), Commit(run=RUN))
    await h.close(end(EndStatus.ERROR))
    status = h.adapter.chat()[0]
    assert status.startswith("Failed after the answer was ready.")


@pytest.mark.parametrize(
    ("args", "hidden"),
    [
        ({"pwd": "hunter2"}, "hunter2"),
        ({"card_number": "4111111111111111", "cvv": "123"}, "4111"),
        ({"headers": "Authorization: Bearer sk-live-abc"}, "sk-live"),
        ({"q": "sk-abc123def"}, "abc123"),
        ({"otp": "918273"}, "918273"),
    ],
)
async def test_progress_never_shows_secret_looking_arguments(args: dict[str, Any], hidden: str) -> None:
    h = await harness(policy(DeliveryMode.PROGRESS))
    await h.feed(call("t", ToolCallState.END, name="login", args=args))
    assert hidden not in h.adapter.chat()[0] and "•••" in h.adapter.chat()[0]


async def test_an_agent_that_reuses_a_call_id_is_gated_on_its_latest_call() -> None:
    catalog = ActionCatalog([Action("search", ActionClass.IDEMPOTENT), Action("pay", ActionClass.IRREVERSIBLE)])
    h = await harness(policy(DeliveryMode.FINAL))
    await h.feed(call("call_0", ToolCallState.END, name="search", args={}))
    await h.feed(call("call_0", ToolCallState.END, name="pay", args={}))
    decision, unit = await ask_gate(catalog, h.ctl.lane, "call_0", source_key="root")
    assert isinstance(unit, ToolCallUnit) and unit.name == "pay" and decision.verdict is Verdict.WAIT


async def test_a_run_whose_prompt_opened_the_reasoning_shows_only_what_follows_the_closer() -> None:
    from streamrelay.core.policy import apply_overrides

    h = await harness(apply_overrides(policy(DeliveryMode.PREVIEW), {"reasoning_opened": True}))
    await h.feed(delta("The user asks about"), delta(" refunds.</th"), delta("ink>\n\nRefunds take 14 days."))
    await h.close(end(final_text="The user asks.</think>Refunds take 14 days."))
    assert h.adapter.chat() == ["Refunds take 14 days."]
    assert not any("asks" in t for t in h.sent_texts())
