"""The run stage is pure and deterministic: events in, desired chat state out, no adapter, no ledger, no wait.

This is what lets a restarted sidecar rebuild a run from its journal (issue 10): replaying the same events gives
the same desired state, however they are batched, and running it needs nothing but the events.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamrelay.core.chunking import BreakKind, ChunkParams
from streamrelay.core.clock import FakeClock
from streamrelay.core.delivery.cap import MessageLimit
from streamrelay.core.delivery.modes import make_mode
from streamrelay.core.delivery.slotbook import SlotBook
from streamrelay.core.events import (
    DeliveryMode,
    End,
    EndStatus,
    Event,
    MessageEnd,
    ProviderFormat,
    RunStart,
    Target,
    TextDelta,
    TextEvent,
    TextMode,
    Visibility,
)
from streamrelay.core.ingest.sequencer import join_deltas
from streamrelay.core.lanes.pipeline import PipelineLane, ToolCallCollector
from streamrelay.core.normalize import make_normalizer
from streamrelay.core.policy import ChannelPolicy, Splitter
from streamrelay.core.ports import TextFormat
from streamrelay.core.run.monitor import RunMonitor
from streamrelay.core.run.stage import RunStage
from streamrelay.core.text.coalescer import CoalesceParams
from streamrelay.core.units import LengthUnit, text_units

STREAMS = Path(__file__).resolve().parents[1] / "streams"
RUN = "r1"
RECORDED = [
    "anthropic/markdown-long-fences.jsonl",
    "anthropic/multi-message-tools.jsonl",
    "openai-chat/long-text.jsonl",
    "openai-responses/reasoning-function-call.jsonl",
]


def policy(delivery: DeliveryMode) -> ChannelPolicy:
    return ChannelPolicy(
        name="fake",
        delivery=delivery,
        max_units=700,
        unit=LengthUnit.UTF16,
        fmt=TextFormat.PLAIN,
        throttle_s=1.0,
        block_chunk=ChunkParams(min_chars=200, max_chars=700, break_preference=BreakKind.PARAGRAPH),
        coalesce=CoalesceParams(min_chars=200, max_chars=700, idle_ms=1000, joiner="\n\n"),
    )


def stage_for(delivery: DeliveryMode, monitor: RunMonitor | None = None) -> RunStage:
    """A stage built from nothing but its policy: no adapter, chain, ledger or event loop."""
    return stage_of(policy(delivery), monitor)


def stage_of(pol: ChannelPolicy, monitor: RunMonitor | None = None, *, limit: MessageLimit | None = None) -> RunStage:
    """:func:`stage_for` with the policy ``pol`` (and a message ``limit`` on its slot book, None: none)."""
    book = SlotBook(RUN, pol.throttle_s, native=False, limit=limit)

    def measure(text: str) -> int:
        return text_units(text, LengthUnit.UTF16)

    mode = make_mode(pol, book, Splitter(pol, lambda text, _fmt: measure(text)), FakeClock())
    return RunStage(
        start=RunStart(run=RUN, channel="fake", target=Target(chat_id=1)),
        policy=pol,
        book=book,
        mode=mode,
        measure=measure,
        tools=ToolCallCollector(None),
        lane=PipelineLane(RUN),
        monitor=monitor or RunMonitor(RUN),
        threads=None,
    )


def recorded(name: str) -> list[Event]:
    path = STREAMS / name
    normalizer = make_normalizer(ProviderFormat(path.parent.name), RUN)
    events: list[Event] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            events += normalizer.feed(json.loads(line))
    return events + normalizer.close()


def desired(stage: RunStage) -> dict[str, Any]:
    """Everything the stage decided: each part's role and desired text, the pipeline units, the committed text."""
    parts = [
        (str(s.role), s.live.text(stage.book.measure) if s.live is not None else s.desired) for s in stage.book.slots
    ]
    units = [unit.model_dump(mode="json") for unit in stage.lane.units]
    return {"parts": parts, "units": units, "committed": stage.committed}


def replay(delivery: DeliveryMode, events: list[Event], *, batch: int) -> dict[str, Any]:
    stage = stage_for(delivery)
    for i in range(0, len(events), batch):
        for event in join_deltas(events[i : i + batch]):
            stage.handle(event)
    stage.end(End(run=RUN, status=EndStatus.OK))
    return desired(stage)


@pytest.mark.parametrize("name", RECORDED)
@pytest.mark.parametrize("delivery", [DeliveryMode.PREVIEW, DeliveryMode.BLOCK, DeliveryMode.FINAL])
def test_replaying_a_recorded_run_gives_the_same_desired_state_however_it_is_batched(
    name: str, delivery: DeliveryMode
) -> None:
    events = recorded(name)
    live = replay(delivery, events, batch=1)  # as the events arrived, one at a time
    assert live["parts"], "the recorded run shows something"
    assert replay(delivery, events, batch=1) == live  # deterministic
    assert replay(delivery, events, batch=len(events)) == live  # a journal replay: the whole backlog at once


PURE = [
    "streamrelay.core.run.stage",
    "streamrelay.core.delivery.modes",
    "streamrelay.core.delivery.slotbook",
    "streamrelay.core.delivery.agents",
    "streamrelay.core.delivery.reasoning",
]
"""The stages upstream of the slot book."""
EFFECTFUL = (
    "streamrelay.core.delivery.reconciler",
    "streamrelay.core.delivery.send_chain",
    "streamrelay.core.run.controller",
    "streamrelay.core.run.relay",
    "streamrelay.core.records.journal",
)
"""What performs calls or writes: downstream of the slot book (the slot book turns its parts into the ledger's
records, the data type, and never writes them)."""


@pytest.mark.parametrize("module", PURE)
def test_the_stages_upstream_of_the_slot_book_import_nothing_that_calls_or_writes(module: str) -> None:
    """The direction is one way: the run stage and the delivery modes write desired state, never call."""
    path = Path(__file__).resolve().parents[2] / (module.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not imported & set(EFFECTFUL)
    assert not any(isinstance(node, ast.AsyncFunctionDef | ast.Await) for node in ast.walk(tree))


_PIECES = st.sampled_from(
    [
        "a",
        "b c",
        " ",
        "\n",
        "\n\n",
        "<",
        "<think>",
        "</think>",
        "<final>",
        "</final>",
        "<fi",
        "```",
        "\u202e",
        "\x1b",
        "\ud83d",
        "\ude00",
        "😀",
        "é",
        "a" * 20,
        "long enough for the guard",
    ]
)
_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["delta", "delta", "delta", "delta", "replay", "snapshot", "message_end", "reasoning"]),
        st.lists(_PIECES, min_size=0, max_size=3).map("".join),
        st.sampled_from([0, 0, 0, 1]),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(_EVENTS, st.sampled_from([DeliveryMode.PREVIEW, DeliveryMode.BLOCK, DeliveryMode.PROGRESS]))
def test_the_common_line_of_a_root_delta_decides_what_the_general_path_does(
    events: list[tuple[str, str, int]], delivery: DeliveryMode
) -> None:
    """RunStage.handle's short line for a plain root delta (VisibleText.plain_delta, AnswerStream.appended,
    RunMonitor.answer_grew) changes nothing a person or a watcher sees: after every event the desired parts and the
    live events are those of a stage that takes the general path for every event."""
    fast, general = (stage_for(delivery, RunMonitor(RUN, wall=lambda: 1.0)) for _ in range(2))
    general.text.plain_delta = lambda message, text, joined=None: False  # type: ignore[method-assign]
    received = ["", ""]
    for kind, text, message in events:
        if kind == "message_end":
            event: Event = MessageEnd(run=RUN, message=message)
        elif kind == "reasoning":
            event = TextEvent(run=RUN, text=text, message=message, visibility=Visibility.REASONING)
        elif kind == "snapshot":
            received[message] += text
            event = TextEvent(run=RUN, text=received[message], message=message, mode=TextMode.SNAPSHOT)
        else:
            text = received[message] + text if kind == "replay" else text  # a delta that replays the text so far
            received[message] += text
            event = TextEvent(run=RUN, text=text, message=message)
        fast.handle(event)
        general.handle(event)
        assert desired(fast) == desired(general)
    _assert_ended_alike(fast, general)


def _assert_ended_alike(fast: RunStage, general: RunStage) -> None:
    """The two stages published the same live events, and ended with the same desired parts and state."""
    assert [e.wire() for e in fast.monitor.since(0)] == [e.wire() for e in general.monitor.since(0)]
    fast.end(End(run=RUN, status=EndStatus.OK))
    general.end(End(run=RUN, status=EndStatus.OK))
    assert desired(fast) == desired(general)
    assert fast.monitor.state == general.monitor.state


_BATCHED_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["delta"] * 12 + ["replay", "snapshot", "message_end", "reasoning"]),
        st.lists(st.sampled_from(["a", "b c", " ", "\n", "\n\n", "é", "😀", "```", "# "]) | _PIECES, max_size=3).map(
            "".join
        ),
        st.sampled_from([0, 0, 0, 0, 0, 1]),
    ),
    max_size=60,
)
"""Mostly plain deltas (most batches join into one plain append), now and then one the general path must take."""


@settings(max_examples=150, deadline=None)
@given(
    _BATCHED_EVENTS, st.sampled_from([DeliveryMode.PREVIEW, DeliveryMode.BLOCK]), st.integers(min_value=2, max_value=8)
)
def test_deltas_joined_for_a_batch_take_the_common_line_only_where_the_general_path_does_the_same(
    events: list[tuple[str, str, int]], delivery: DeliveryMode, batch: int
) -> None:
    """Deltas that arrived together (:func:`join_deltas`: a :class:`JoinedDeltas`, or plain lines as
    :class:`TextDelta`) take RunStage.handle's short line when none of them may be a replay: after every batch the
    desired parts and the live events are those of a stage that takes the general path for every event."""
    fast, general = (stage_for(delivery, RunMonitor(RUN, wall=lambda: 1.0)) for _ in range(2))
    general.text.plain_delta = lambda message, text, joined=None: False  # type: ignore[method-assign]
    received = ["", ""]
    typed: list[Event | TextDelta] = []
    for kind, text, message in events:
        if kind == "message_end":
            typed.append(MessageEnd(run=RUN, message=message))
        elif kind == "reasoning":
            typed.append(TextEvent(run=RUN, text=text, message=message, visibility=Visibility.REASONING))
        elif kind == "snapshot":
            received[message] += text
            typed.append(TextEvent(run=RUN, text=received[message], message=message, mode=TextMode.SNAPSHOT))
        else:
            text = received[message] + text if kind == "replay" else text
            received[message] += text
            typed.append(
                TextDelta(RUN, text, None, message) if len(text) % 2 else TextEvent(run=RUN, text=text, message=message)
            )
    for i in range(0, len(typed), batch):
        for event in join_deltas(typed[i : i + batch]):
            fast.handle(event)
            general.handle(event)
        assert desired(fast) == desired(general)
    _assert_ended_alike(fast, general)
