"""A preview's final reuses the chunks its live preview cut (issue 24): the same message parts, byte for byte, as the
final's text split whole (:meth:`core.policy.Splitter.split`), without chunking the whole answer a second time.

The reuse holds only when the final is exactly the text the live chunker was given (a plain delta stream); any other
final (a replacement, sources after the answer, a text cut at the message limit, a reopened answer) is split whole.
Both paths are compared here over every recorded stream and over generated ones.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamrelay.app.ingest_client import recording_lines
from streamrelay.core.clock import FakeClock
from streamrelay.core.delivery.answer import AnswerChange
from streamrelay.core.delivery.cap import MessageLimit
from streamrelay.core.delivery.modes import ModeHandler, PreviewMode, make_mode
from streamrelay.core.delivery.segments import MediaSegments
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.events import DeliveryMode, End, EndStatus, Event, ProviderFormat, RunStart, Target
from streamrelay.core.ingest.sequencer import join_deltas
from streamrelay.core.lanes.pipeline import PipelineLane, ToolCallCollector
from streamrelay.core.normalize import make_normalizer
from streamrelay.core.policy import ChannelPolicy, Splitter
from streamrelay.core.ports import TextFormat
from streamrelay.core.records.report import SlotRole
from streamrelay.core.run.monitor import RunMonitor
from streamrelay.core.run.stage import RunStage
from streamrelay.core.units import LengthUnit, text_units
from tests.unit.test_event_tables import FILES, ROOTS  # every recording under tests/streams and /work/shared/streams

pytestmark = pytest.mark.timeout(300)

RUN = "r1"
IDS = [f"{path.parts[-3] if path.parent.name != fmt.value else ''}{fmt.value}/{path.stem}" for fmt, path in FILES]


class CountingSplitter(Splitter):
    """A :class:`Splitter` that counts its whole-text splits (the path the reuse avoids)."""

    def __init__(self, policy: ChannelPolicy) -> None:
        super().__init__(policy, lambda text, _fmt: text_units(text, policy.unit))
        self.splits = 0

    def split(self, text: str) -> list[str]:
        self.splits += 1
        return super().split(text)


def policy(delivery: DeliveryMode, max_units: int, unit: LengthUnit = LengthUnit.UTF16) -> ChannelPolicy:
    return ChannelPolicy(name="fake", delivery=delivery, max_units=max_units, unit=unit, fmt=TextFormat.PLAIN)


def events_of(fmt: ProviderFormat, path: Path) -> list[Event]:
    normalizer = make_normalizer(fmt, RUN)
    events: list[Event] = []
    for raw in recording_lines(path):
        events += normalizer.feed(raw)
    return events + normalizer.close()


def answer_parts(book: SlotBook) -> list[str]:
    """The answer's message parts as the chat should show them (parts left without text dropped)."""
    texts = [
        s.live.text(book.measure) if s.live is not None else s.desired for s in book.slots if s.role is SlotRole.ANSWER
    ]
    return [text for text in texts if text]


def run_stage(delivery: DeliveryMode, max_units: int, events: list[Event], batch: int) -> tuple[RunStage, int]:
    """The events through a stage of ``delivery`` to their ``end``; returns it and its whole-text splits."""
    pol = policy(delivery, max_units)
    book = SlotBook(RUN, pol.throttle_s, native=False)
    splitter = CountingSplitter(pol)
    stage = RunStage(
        start=RunStart(run=RUN, channel="fake", target=Target(chat_id=1)),
        policy=pol,
        book=book,
        mode=make_mode(pol, book, splitter, FakeClock()),
        measure=lambda text: text_units(text, LengthUnit.UTF16),
        tools=ToolCallCollector(None),
        lane=PipelineLane(RUN),
        monitor=RunMonitor(RUN),
        threads=None,
    )
    for i in range(0, len(events), batch):
        for event in join_deltas(events[i : i + batch]):
            stage.handle(event)
    if stage.ended is None:
        stage.end(End(run=RUN, status=EndStatus.OK))
    return stage, splitter.splits


@pytest.mark.parametrize(("fmt", "path"), FILES, ids=IDS)
@pytest.mark.parametrize("max_units", [40, 300, 4096])
def test_a_recorded_streams_final_parts_are_those_of_the_whole_final_split(
    fmt: ProviderFormat, path: Path, max_units: int
) -> None:
    events = events_of(fmt, path)
    for batch in (1, 16, max(1, len(events))):
        preview, _ = run_stage(DeliveryMode.PREVIEW, max_units, events, batch)
        final, splits = run_stage(DeliveryMode.FINAL, max_units, events, batch)  # final mode always splits whole
        assert splits or preview.committed is None
        assert answer_parts(preview.book) == answer_parts(final.book), (path, max_units, batch)


@pytest.mark.parametrize(
    "name",
    ["anthropic/markdown-long-fences.jsonl", "openai-chat/long-text.jsonl", "anthropic/multi-message-tools.jsonl"],
)
def test_the_final_of_a_plain_delta_stream_is_not_chunked_again(name: str) -> None:
    path = ROOTS[0] / name
    events = events_of(ProviderFormat(path.parent.name), path)
    for max_units in (40, 300, 4096):
        preview, splits = run_stage(DeliveryMode.PREVIEW, max_units, events, batch=1)
        assert preview.committed and splits == 0, (name, max_units)
        final, _ = run_stage(DeliveryMode.FINAL, max_units, events, batch=1)
        assert answer_parts(preview.book) == answer_parts(final.book)


# --- generated streams ---------------------------------------------------------------------------------------------

TOKENS = [
    "a",
    "word ",
    "Sentence. ",
    "\n",
    "\n\n",
    "```py\n",
    "```\n",
    "~~~~\n",
    "    ",
    "- item ",
    "1. ",
    "> quote ",
    "# Head\n",
    "`code` ",
    "[link](http://x.y/z) ",
    "é",
    "\u4e2d\u6587\u3002",
    "\U0001f600",
    "e\u0301",
    "\U0001f1eb\U0001f1f7",
    "---\n",
]
texts = st.lists(st.sampled_from(TOKENS), max_size=80).map("".join)


class WholeSplitPreview(PreviewMode):
    """The preview as it was before the reuse: its final always split whole (the reference)."""

    def _reused(self, final_text: str) -> list[str] | None:
        return None


def preview_mode(
    pol: ChannelPolicy, limit: int | None, *, reuse: bool = True
) -> tuple[ModeHandler, SlotBook, CountingSplitter]:
    cap = MessageLimit(limit, "clients.c.max_messages_per_run") if limit is not None else None
    book = SlotBook(RUN, pol.throttle_s, native=False, limit=cap)
    splitter = CountingSplitter(pol)
    if reuse:
        return make_mode(pol, book, splitter, FakeClock()), book, splitter
    return MediaSegments(lambda: WholeSplitPreview(pol, book, splitter), book, pol.fmt), book, splitter


def pieces(text: str, cuts: list[int]) -> list[str]:
    """``text`` cut at the positions ``cuts`` (taken modulo its length, sorted)."""
    at = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *at, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@settings(max_examples=300, deadline=None)
@given(
    text=texts,
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
    max_units=st.integers(6, 120),
    unit=st.sampled_from(list(LengthUnit)),
    fmt=st.sampled_from([TextFormat.PLAIN, TextFormat.MARKDOWN]),
    reset=st.none() | texts,
    final=st.sampled_from(["same", "longer", "shorter", "other"]),
    after=st.none() | texts,
    limit=st.none() | st.integers(1, 4),
)
def test_a_generated_finals_parts_are_those_of_the_whole_final_split(
    text: str,
    cuts: list[int],
    max_units: int,
    unit: LengthUnit,
    fmt: TextFormat,
    reset: str | None,
    final: str,
    after: str | None,
    limit: int | None,
) -> None:
    pol = replace(policy(DeliveryMode.PREVIEW, max_units, unit), fmt=fmt)
    mode, book, splitter = preview_mode(pol, limit)
    twin, twin_book, _ = preview_mode(pol, limit, reuse=False)  # fed the same, its final split whole
    streamed = ""
    for piece in pieces(text, cuts):
        for m in (mode, twin):
            m.on_answer(AnswerChange(piece), 0)
        streamed += piece
    if reset is not None:  # a replacement: the live chunker starts again on the new text
        for m in (mode, twin):
            m.on_answer(AnswerChange(reset, reset=True), 0)
        streamed = reset
    final_text = {
        "same": streamed,
        "longer": streamed + " and more",
        "shorter": streamed[: len(streamed) // 2],
        "other": streamed.replace("a", "b"),
    }[final]
    reference = Splitter(pol, lambda t, _fmt: text_units(t, unit)).split(final_text)
    mode.finalize(final_text)
    twin.finalize(final_text)
    assert answer_parts(book) == answer_parts(twin_book)
    if limit is None:  # (else the parts past the run's message limit are cut: core.delivery.cap)
        assert answer_parts(book) == [part for part in reference if part]
    if final == "same" and limit is None:
        assert splitter.splits == 0  # reused, not chunked again
    if after is not None:  # text after a final (a child's thread): the live chunker goes on as if never finalized
        for piece in pieces(after, cuts):
            for m in (mode, twin):
                m.on_answer(AnswerChange(piece), 0)
            streamed += piece
            assert answer_parts(book) == answer_parts(twin_book)
        mode.finalize(streamed)
        twin.finalize(streamed)
        assert answer_parts(book) == answer_parts(twin_book)
