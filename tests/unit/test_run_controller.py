"""RunController: events in, what the chat shows out, per delivery mode (DESIGN §5, §6).

Driven directly (no HTTP, no relay) with a FakeAdapter, a FakeClock and a MemoryLedger.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamrelay.core.chunking import BreakKind, ChunkParams
from streamrelay.core.clock import FakeClock
from streamrelay.core.delivery.send_chain import SendChain
from streamrelay.core.errors import ForbiddenError, UncertainDeliveryError
from streamrelay.core.events import (
    Commit,
    DeliveryMode,
    End,
    EndStatus,
    ErrorEvent,
    Event,
    MessageEnd,
    Phase,
    RunStart,
    Source,
    Status,
    Target,
    TextEvent,
    TextMode,
    ToolCall,
    ToolCallState,
    Visibility,
)
from streamrelay.core.policy import ChannelPolicy, SubagentPolicy
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.desk import DeskState
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import DeliveryReport, ReportStatus
from streamrelay.core.run.controller import RunController
from streamrelay.core.run.stage import FAILURE_NOTICE, PROGRESS_DONE, PROGRESS_FAILED, PROGRESS_TITLE
from streamrelay.core.text.chunk_checks import content_key, fences_balanced
from streamrelay.core.text.coalescer import CoalesceParams
from streamrelay.core.units import LengthUnit, text_units
from tests.unit.fakes import FakeAdapter, settle

pytestmark = pytest.mark.timeout(30)

RUN = "r1"
CHILD = Source(agent_id="researcher", session_id="s-2", parent_session_id="s-1", depth=1, path="s-1/researcher")


def policy(
    delivery: DeliveryMode,
    *,
    max_units: int = 4096,
    throttle_s: float = 0.0,
    subagents: SubagentPolicy = SubagentPolicy.HIDDEN,
    block_min: int = 20,
) -> ChannelPolicy:
    return ChannelPolicy(
        name="fake",
        delivery=delivery,
        max_units=max_units,
        unit=LengthUnit.UTF16,
        fmt=TextFormat.PLAIN,
        throttle_s=throttle_s,
        block_chunk=ChunkParams(min_chars=block_min, max_chars=max_units, break_preference=BreakKind.PARAGRAPH),
        coalesce=CoalesceParams(min_chars=block_min, max_chars=max_units, idle_ms=1000, joiner="\n\n"),
        subagents=subagents,
    )


def delta(text: str, message: int = 0, source: Source | None = None) -> TextEvent:
    return TextEvent(run=RUN, mode=TextMode.DELTA, text=text, message=message, source=source)


def deltas(text: str, size: int) -> list[Event]:
    return [delta(text[i : i + size]) for i in range(0, len(text), size)]


def end(status: EndStatus = EndStatus.OK, final_text: str | None = None) -> End:
    return End(run=RUN, status=status, final_text=final_text)


@dataclass
class Harness:
    policy: ChannelPolicy
    clock: FakeClock = field(default_factory=FakeClock)
    ledger: MemoryLedger = field(default_factory=MemoryLedger)
    adapter: FakeAdapter = field(init=False)
    ctl: RunController = field(init=False)

    def __post_init__(self) -> None:
        self.adapter = FakeAdapter(self.clock, max_units=self.policy.max_units, unit=self.policy.unit)
        start = RunStart(run=RUN, channel="fake", target=Target(chat_id=1))
        self.ctl = RunController(start, self.policy, self.adapter, SendChain(self.clock), self.ledger, self.clock)

    async def open(self) -> Harness:
        await self.ctl.open()
        return self

    async def feed(self, *events: Event, wait: bool = True) -> list[str]:
        """Hand events to the run; with ``wait``, let delivery catch up. Returns what the chat shows."""
        for event in events:
            self.ctl.handle(event)
            if wait:
                await settle()
        return self.adapter.chat()

    async def close(self, event: End | None = None) -> DeliveryReport:
        return await self.ctl.end(event or end())

    def sent_texts(self) -> list[str]:
        """Every text any call put in the chat, intermediate states included."""
        return [c.text for c in self.adapter.calls_of("send_text", "edit_text") if c.text is not None]


async def harness(p: ChannelPolicy) -> Harness:
    return await Harness(p).open()


def same_content(chat: Sequence[str], text: str) -> bool:
    """The chat shows exactly ``text``: compared without whitespace and fence marker lines."""
    return "".join(content_key(m) for m in chat) == content_key(text)


# --- preview ---------------------------------------------------------------------------------------------


async def test_preview_shows_one_message_that_grows() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW))
    assert await h.feed(delta("Hello")) == ["Hello"]
    assert await h.feed(delta(" wor")) == ["Hello wor"]
    assert await h.feed(delta("ld.")) == ["Hello world."]
    report = await h.close()
    assert h.adapter.chat() == ["Hello world."]
    assert [(c.method, c.message_id) for c in h.adapter.calls_of()] == [
        ("send_text", "1"),
        ("edit_text", "1"),
        ("edit_text", "1"),
    ]
    assert (report.status, report.confirmed, report.message_ids) == (ReportStatus.DELIVERED, 1, ["1"])


async def test_preview_edits_at_most_once_per_throttle_interval() -> None:
    text = "The quick brown fox jumps over the lazy dog."
    h = await harness(policy(DeliveryMode.PREVIEW, throttle_s=1.0))
    await h.feed(*deltas(text, 3))
    calls = h.adapter.calls_of()
    assert all(b.at - a.at >= 1.0 for a, b in itertools.pairwise(calls))
    await h.close()
    assert h.adapter.chat() == [text]


async def test_preview_deltas_that_arrive_together_become_one_call() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW, throttle_s=1.0))
    await h.feed(*deltas("The quick brown fox jumps over the lazy dog.", 3), wait=False)
    await h.close()
    assert h.adapter.summary() == [("send_text", "The quick brown fox jumps over the lazy dog.", "ok")]


async def test_preview_separates_assistant_messages_with_a_blank_line() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW))
    await h.feed(delta("First."), MessageEnd(run=RUN, message=0), delta("Second.", message=1))
    await h.close()
    assert h.adapter.chat() == ["First.\n\nSecond."]


FENCED = (
    "Intro line here.\n\n"
    "```python\n"
    "print('one')\n"
    "print('two')\n"
    "print('three')\n"
    "print('four')\n"
    "```\n\n"
    "Outro text after the code."
)


async def test_preview_rolls_over_at_the_limit_with_balanced_fences() -> None:
    limit = 40
    h = await harness(policy(DeliveryMode.PREVIEW, max_units=limit))
    for event in deltas(FENCED, 4):
        chat = await h.feed(event)
        assert all(text_units(m, LengthUnit.UTF16) <= limit for m in chat)
        assert all(fences_balanced(m) for m in chat[:-1])  # frozen messages are complete
    report = await h.close()
    chat = h.adapter.chat()
    assert len(chat) >= 3
    assert all(text_units(m, LengthUnit.UTF16) <= limit for m in chat)
    assert all(fences_balanced(m) for m in chat)
    assert same_content(chat, FENCED)
    assert report.status is ReportStatus.DELIVERED and report.confirmed == len(chat)
    # a frozen message is never touched again once the next one exists
    calls = h.adapter.calls_of()
    sends = {c.message_id: i for i, c in enumerate(calls) if c.method == "send_text"}
    for n in range(1, len(chat)):
        assert all(c.message_id != str(n) for c in calls[sends[str(n + 1)] :])


async def test_a_replace_rewrites_the_preview_instead_of_appending() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW))
    assert await h.feed(delta("Hello wrld")) == ["Hello wrld"]
    assert await h.feed(TextEvent(run=RUN, mode=TextMode.REPLACE, text="Hello world")) == ["Hello world"]
    await h.close()
    assert h.adapter.chat() == ["Hello world"]
    assert [c.method for c in h.adapter.calls_of()] == ["send_text", "edit_text"]


async def test_a_replace_to_a_short_text_removes_the_rolled_over_part_at_once() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW, max_units=30))
    await h.feed(delta("First sentence is long enough. Second sentence too."))
    assert len(h.adapter.chat()) == 2
    assert await h.feed(TextEvent(run=RUN, mode=TextMode.REPLACE, text="Short.")) == ["Short."]


async def test_a_replace_to_a_short_text_leaves_one_message_at_the_end() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW, max_units=30))
    await h.feed(delta("First sentence is long enough. Second sentence too."))
    await h.feed(TextEvent(run=RUN, mode=TextMode.REPLACE, text="Short."))
    report = await h.close()
    assert h.adapter.chat() == ["Short."]
    assert report.status is ReportStatus.DELIVERED


async def test_a_snapshot_after_deltas_does_not_duplicate() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW))
    await h.feed(delta("Hel"), delta("lo"), TextEvent(run=RUN, mode=TextMode.SNAPSHOT, text="Hello world"))
    await h.close()
    assert h.adapter.chat() == ["Hello world"]
    assert not any("HelloHel" in t or "HelHello" in t for t in h.sent_texts())


# --- block -----------------------------------------------------------------------------------------------

PARAGRAPHS = "First paragraph is here.\n\nSecond paragraph is here.\n\nThird one"


async def test_block_mode_sends_readable_blocks_as_they_complete() -> None:
    h = await harness(policy(DeliveryMode.BLOCK, max_units=60, block_min=20))
    chat = await h.feed(*deltas(PARAGRAPHS, 5))
    assert chat == ["First paragraph is here.", "Second paragraph is here."]
    await h.close()
    assert h.adapter.chat() == ["First paragraph is here.", "Second paragraph is here.", "Third one"]
    assert [c.method for c in h.adapter.calls_of()] == ["send_text"] * 3


async def test_block_mode_final_adds_only_the_uncovered_tail() -> None:
    h = await harness(policy(DeliveryMode.BLOCK, max_units=60, block_min=20))
    await h.feed(*deltas(PARAGRAPHS, 5))
    final = PARAGRAPHS + " and more.\n\nA closing paragraph from the final text."
    report = await h.close(end(final_text=final))
    chat = h.adapter.chat()
    assert chat[:2] == ["First paragraph is here.", "Second paragraph is here."]
    assert same_content(chat, final)  # nothing lost, nothing twice
    assert report.status is ReportStatus.DELIVERED


async def test_block_mode_final_equal_but_for_whitespace_adds_nothing() -> None:
    h = await harness(policy(DeliveryMode.BLOCK, max_units=60, block_min=20))
    await h.feed(*deltas(PARAGRAPHS, 5), MessageEnd(run=RUN, message=0))
    assert len(h.adapter.chat()) == 3
    await h.close(end(final_text=PARAGRAPHS.replace("\n\n", "\n \n") + "\n"))
    assert h.adapter.chat() == ["First paragraph is here.", "Second paragraph is here.", "Third one"]


# --- final -----------------------------------------------------------------------------------------------

LONG = "Alpha beta gamma delta. Epsilon zeta eta theta. Iota kappa lambda mu. Nu xi omicron pi rho."


async def test_final_mode_shows_nothing_until_the_end_then_splits_at_the_limit() -> None:
    h = await harness(policy(DeliveryMode.FINAL, max_units=30))
    assert await h.feed(*deltas(LONG, 7)) == []
    report = await h.close()
    chat = h.adapter.chat()
    assert len(chat) >= 3
    assert all(text_units(m, LengthUnit.UTF16) <= 30 for m in chat)
    assert same_content(chat, LONG)
    assert [c.method for c in h.adapter.calls_of()] == ["send_text"] * len(chat)
    assert report.confirmed == len(chat) and report.status is ReportStatus.DELIVERED


# --- progress --------------------------------------------------------------------------------------------


async def test_progress_shows_no_answer_before_commit_and_the_committed_text_after() -> None:
    h = await harness(policy(DeliveryMode.PROGRESS))
    assert await h.feed(Phase(run=RUN, name="drafting")) == [f"{PROGRESS_TITLE}\n• drafting"]
    assert await h.feed(delta("Refunds take "), delta("4 days.")) == [f"{PROGRESS_TITLE}\n• drafting"]
    assert await h.feed(Commit(run=RUN)) == [f"{PROGRESS_TITLE}\n• drafting", "Refunds take 4 days."]
    # drafts after the commit point are not shown
    await h.feed(delta(" Or maybe 5."))
    report = await h.close()
    assert h.adapter.chat() == [f"{PROGRESS_DONE}\n• drafting", "Refunds take 4 days."]
    assert report.status is ReportStatus.DELIVERED


async def test_progress_commit_with_text_shows_that_text_not_the_draft() -> None:
    h = await harness(policy(DeliveryMode.PROGRESS))
    await h.feed(delta("Refunds take 4 days."), Commit(run=RUN, text="Refunds take 5 business days."))
    await h.close()
    assert h.adapter.chat()[1:] == ["Refunds take 5 business days."]
    assert not any("4 days" in t for t in h.sent_texts())


async def test_progress_run_that_ends_in_error_shows_a_failure_not_the_draft() -> None:
    h = await harness(policy(DeliveryMode.PROGRESS))
    await h.feed(
        Phase(run=RUN, name="drafting"),
        delta("Unverified claim."),
        ErrorEvent(run=RUN, message="verifier failed"),
    )
    report = await h.close(end(EndStatus.ERROR))
    chat = h.adapter.chat()
    assert chat == [f"{PROGRESS_FAILED}\n• drafting", f"{FAILURE_NOTICE}\n• verifier failed"]
    assert not any("Unverified" in t for t in h.sent_texts())
    assert report.end_status == "error"
    assert "verifier failed" in report.errors


# --- what never reaches the answer ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", [DeliveryMode.PREVIEW, DeliveryMode.BLOCK, DeliveryMode.FINAL])
async def test_sub_agent_text_never_reaches_the_answer(mode: DeliveryMode) -> None:
    h = await harness(policy(mode, block_min=5))
    await h.feed(
        delta("Root says "),
        delta("CHILD SECRET one.", source=CHILD),
        delta("hello."),
        delta(" CHILD SECRET two.", source=CHILD),
        End(run=RUN, source=CHILD),
    )
    await h.close()
    assert same_content(h.adapter.chat(), "Root says hello.")
    assert not any("CHILD" in t for t in h.sent_texts())


async def test_sub_agents_as_status_lines_show_activity_not_their_text() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW, subagents=SubagentPolicy.STATUS))
    await h.feed(
        delta("CHILD SECRET", source=CHILD),
        ToolCall(run=RUN, id="c1", name="search", state=ToolCallState.START, source=CHILD),
        delta("Root answer."),
        End(run=RUN, source=CHILD),
    )
    await h.close()
    assert sorted(h.adapter.chat()) == sorted(["↳ researcher: done", "Root answer."])
    assert not any("CHILD" in t for t in h.sent_texts())


@pytest.mark.parametrize("mode", list(DeliveryMode))
async def test_reasoning_never_reaches_the_chat(mode: DeliveryMode) -> None:
    h = await harness(policy(mode, block_min=5))
    await h.feed(
        TextEvent(run=RUN, text="Let me think SECRETLY", visibility=Visibility.REASONING),
        delta("The answer."),
        TextEvent(run=RUN, text=" more SECRET thoughts", visibility=Visibility.REASONING),
        Commit(run=RUN),
    )
    await h.close()
    assert "The answer." in h.adapter.chat()
    assert not any("SECRET" in t for t in h.sent_texts())


# --- the report --------------------------------------------------------------------------------------------


async def test_the_report_counts_confirmed_uncertain_and_failed_parts() -> None:
    h = Harness(policy(DeliveryMode.FINAL, max_units=30))
    h.adapter.settles = "unknown"  # the platform cannot tell (Telegram with a shared bot token)
    h.adapter.fail("send_text", 2, UncertainDeliveryError("timed out"))
    h.adapter.fail("send_text", 3, ForbiddenError("bot was blocked"))
    await h.open()
    await h.feed(delta(LONG))
    report = await h.close()
    parts = len(h.adapter.calls_of("send_text"))
    assert parts >= 3
    assert (report.confirmed, report.uncertain, report.failed, report.unsent) == (parts - 2, 1, 1, 0)
    assert report.status is ReportStatus.PARTIAL
    assert report.message_ids == [str(i) for i in range(1, parts - 1)]
    assert len(h.adapter.chat()) == parts - 2


async def test_the_parts_a_run_did_not_deliver_go_to_the_desk_at_its_end() -> None:
    h = Harness(policy(DeliveryMode.FINAL, max_units=30))
    h.adapter.settles = "unknown"
    h.adapter.fail("send_text", 2, UncertainDeliveryError("timed out"))
    h.adapter.fail("send_text", 3, ForbiddenError("bot was blocked"))
    await h.open()
    await h.feed(delta(LONG))
    await h.close()
    sent = [call.text for call in h.adapter.calls_of("send_text")]
    assert sent[1] == sent[2]  # the part whose create could not be settled was sent again, and refused
    # One entry: the refused part, carrying the create that may have landed (its resend settles it first).
    (failed,) = await h.ledger.deliveries()
    assert (failed.state, failed.run, failed.channel, failed.slot) == (DeskState.FAILED, RUN, "fake", 1)
    assert failed.text == sent[2] and "ForbiddenError" in (failed.error or "") and failed.message_id is None
    assert failed.pending is not None and failed.pending.text == sent[1] and failed.target["chat_id"] == 1


async def test_a_part_sent_again_after_an_unsettled_create_leaves_that_create_on_the_desk() -> None:
    h = Harness(policy(DeliveryMode.FINAL, max_units=30))
    h.adapter.settles = "unknown"
    h.adapter.fail("send_text", 2, UncertainDeliveryError("timed out"))
    await h.open()
    await h.feed(delta(LONG))
    report = await h.close()
    (orphan,) = await h.ledger.deliveries()
    assert orphan.slot < 0 and orphan.state is DeskState.UNCERTAIN and report.uncertain == 1
    assert orphan.text == h.adapter.calls_of("send_text")[1].text and orphan.pending is not None


async def test_the_report_of_a_clean_run_is_delivered_with_every_message_id() -> None:
    h = await harness(policy(DeliveryMode.FINAL, max_units=30))
    await h.feed(delta(LONG))
    report = await h.close()
    assert await h.ledger.deliveries(set(DeskState)) == []  # nothing for the desk
    chat = h.adapter.chat()
    assert report.done and report.status is ReportStatus.DELIVERED
    assert (report.confirmed, report.uncertain, report.failed) == (len(chat), 0, 0)
    assert report.message_ids == [str(i) for i in range(1, len(chat) + 1)]
    assert report.end_status == "ok"


async def test_every_call_of_a_run_is_in_the_ledger() -> None:
    h = await harness(policy(DeliveryMode.PREVIEW, max_units=40))
    await h.feed(*deltas(FENCED, 6))
    await h.close()
    assert len(h.ledger.calls) == len(h.adapter.calls_of())
    assert all(c.outcome == "ack" for c in h.ledger.calls)
    record = await h.ledger.get_run(RUN)
    assert record is not None and record.ended and record.end_status == "ok"


async def test_a_cut_before_inline_backticks_does_not_turn_them_into_a_fence() -> None:
    text = "aaaa bbbb cccc dddd eeee ```py x"
    h = await harness(policy(DeliveryMode.FINAL, max_units=24))
    await h.feed(delta(text))
    await h.close()
    chat = h.adapter.chat()
    assert same_content(chat, text), chat
    assert all(fences_balanced(m) for m in chat), chat


# --- property: any split of any text ends as exactly that text -----------------------------------------------

# Markdown-ish: fence markers only on lines of their own, with short info strings (a backtick run inside
# a line: see the test above).
TOKENS = [
    *["word", "Other", "x.", "end!", "`code`", "**bold**", "é", "😀", "[link](http://a.b/c)"],
    *[" ", " ", "  ", "\n", "\n", "\n\n", "- item\n", "> quote "],
    *["\n```py\n", "\n```\n", "\n~~~\n"],
]


@st.composite
def split_texts(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = "".join(draw(st.lists(st.sampled_from(TOKENS), max_size=40)))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(  # found by this test: the cut fell before ">", and the second message was a block quote
    split=("word[link](http://a.b/c)> quote ", ["word[link](http://a.b/c)> quote "]),
    mode=DeliveryMode.PREVIEW,
    limit=24,
    throttle_s=0.0,
    waits=[False] * 12,
)
@example(  # the same in fence content: "> " at a line start reads as a quoted line's reopened markers
    split=("\n```py\n" + "word" * 14 + "> quote ", ["\n```py\n" + "word" * 14 + "> quote "]),
    mode=DeliveryMode.PREVIEW,
    limit=24,
    throttle_s=0.0,
    waits=[False] * 12,
)
@given(
    split=split_texts(),
    mode=st.sampled_from([DeliveryMode.PREVIEW, DeliveryMode.BLOCK]),
    limit=st.integers(24, 60),
    throttle_s=st.sampled_from([0.0, 1.0]),
    waits=st.lists(st.booleans(), min_size=12, max_size=12),
)
async def test_any_split_of_a_text_ends_as_exactly_that_text(
    split: tuple[str, list[str]], mode: DeliveryMode, limit: int, throttle_s: float, waits: list[bool]
) -> None:
    text, pieces = split
    # arbitrary deltas: the replayed-snapshot guard (a heuristic for real runtimes) would take some for replays
    h = await harness(
        replace(policy(mode, max_units=limit, throttle_s=throttle_s, block_min=10), delta_replay_guard=False)
    )
    for i, piece in enumerate(pieces):
        await h.feed(delta(piece), wait=waits[i % len(waits)])
    report = await h.close()
    chat = h.adapter.chat()
    assert same_content(chat, text), (chat, text)
    assert all(text_units(m, LengthUnit.UTF16) <= limit for m in chat)
    # every message closes the fences it opens; only a text that itself ends inside a fence leaves it
    # open, in its last message
    closed = chat[:-1] if chat and not fences_balanced(text) else chat
    assert all(fences_balanced(m) for m in closed), chat
    # a text with nothing to show (only whitespace) ends empty, never delivered
    assert report.status is (ReportStatus.DELIVERED if chat else ReportStatus.EMPTY), report


async def test_a_cancelled_run_sends_nothing_more_and_says_stopped() -> None:
    h = await harness(policy(DeliveryMode.FINAL))
    await h.feed(delta("An answer that will never be shown."))
    report = await h.close(End(run=RUN, status=EndStatus.CANCELLED))
    assert h.adapter.chat() == ["⏹ Stopped."]
    assert report.end_status == "cancelled"


async def test_a_long_progress_log_keeps_the_status_message_short() -> None:
    h = await harness(policy(DeliveryMode.PROGRESS))
    for i in range(200):
        await h.feed(Phase(run=RUN, name=f"step {i} of a very long plan"))
    await h.close()
    status = h.adapter.chat()[0]
    assert "step 199" in status and "earlier steps" in status
    assert len(status) < 2000


@pytest.mark.parametrize("delivery", [DeliveryMode.FINAL, DeliveryMode.PROGRESS])
async def test_an_authoritative_final_after_a_commit_edits_the_committed_answer(delivery: DeliveryMode) -> None:
    h = await harness(policy(delivery))
    await h.feed(delta("Draft answer one."), Commit(run=RUN, text="Committed answer."))
    await h.close(end(final_text="Authoritative final answer."))
    assert h.adapter.chat()[-1] == "Authoritative final answer."
    assert "Committed answer." not in h.adapter.chat()


async def test_block_mode_never_shows_an_unsent_draft_that_the_final_replaced() -> None:
    h = await harness(policy(DeliveryMode.BLOCK, block_min=1000))
    await h.feed(delta("Draft answer one."))
    await h.close(end(final_text="Authoritative final answer."))
    assert h.adapter.chat() == ["Authoritative final answer."]


async def test_an_error_event_in_a_run_that_ends_ok_shows_no_failure_notice() -> None:
    h = await harness(policy(DeliveryMode.FINAL))
    await h.feed(delta("All good in the end."), ErrorEvent(run=RUN, message="tool web_search failed"))
    report = await h.close()
    assert h.adapter.chat() == ["All good in the end."]
    assert report.errors == ["tool web_search failed"]


async def test_a_live_preview_never_grows_past_the_limit_while_the_chunker_waits() -> None:
    """Found by the split property above: the chunker held a link and a list item past the limit (waiting to see
    where the quote after them ends) and the live message was edited to that whole pending text: rejected."""
    h = await harness(replace(policy(DeliveryMode.PREVIEW, max_units=26), delta_replay_guard=False))
    for piece in ["OtherOtherOther**bold**ééé[link](http://a.b/c)- item\n", ">", " quote "]:
        await h.feed(delta(piece), wait=False)
    report = await h.close()
    assert all(c.outcome == "ok" and len(c.text or "") <= 26 for c in h.adapter.calls_of()), h.adapter.summary()
    assert report.status is ReportStatus.DELIVERED


async def test_a_huge_status_phase_or_tool_name_never_makes_a_message_past_the_limit() -> None:
    """A breaker's finding: one 4,200-character status (or phase, tool name, sub-agent id) made the progress message
    one the platform refused ("message is too long"). Lines are cut, older ones dropped, the message stays whole."""
    h = await harness(policy(DeliveryMode.PROGRESS, max_units=300))
    await h.feed(Phase(run=RUN, name="p" * 4200))
    await h.feed(Status(run=RUN, text="s" * 4200))
    for i in range(30):
        await h.feed(Status(run=RUN, text=f"step {i} " + "x" * 50))
    await h.feed(Commit(run=RUN, text="The answer."))
    report = await h.close()
    assert all(c.outcome == "ok" and len(c.text or "") <= 300 for c in h.adapter.calls_of()), h.adapter.summary()
    assert report.status is ReportStatus.DELIVERED and "The answer." in h.adapter.chat()
