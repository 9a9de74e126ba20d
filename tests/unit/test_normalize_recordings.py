"""The agent-protocol and Gemini sample streams (tests/streams/{ag-ui,ai-sdk-ui,a2a,gemini}) through their
normalizers: valid contract events, the root answer equal to what the raw lines say independently, reasoning and
sub-agent text kept out of it, every tool call started and ended with JSON-object arguments."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from streamrelay.app.client import recorded_events
from streamrelay.app.ingest_client import detect_format, recording_lines
from streamrelay.core.events import (
    End,
    Event,
    MessageEnd,
    ProviderFormat,
    Source,
    TextEvent,
    ToolCall,
    ToolCallState,
    Visibility,
    event_to_json,
    parse_event,
)
from streamrelay.core.normalize import make_normalizer

STREAMS = Path(__file__).resolve().parents[1] / "streams"
FORMATS = ("ag-ui", "ai-sdk-ui", "a2a", "gemini")
FILES = sorted(p for fmt in FORMATS for p in (STREAMS / fmt).glob("*.jsonl"))
RUN = "run-1"

# Read off the files by eye: (root answer length, its start, its end, sub-agents, tool calls).
ANCHORS: dict[str, tuple[int, str, str, int, int]] = {
    "ag-ui/subagent-reasoning.jsonl": (1329, "## Lisbon in three days", "any of the evenings.", 1, 2),
    "ag-ui/chunks-thinking.jsonl": (181, "Light travels at", "defined from it.", 0, 1),
    "ai-sdk-ui/reasoning-tool-text.jsonl": (948, "## What to wear in Berlin", "day in Berlin!", 0, 1),
    "a2a/task-artifact-subtask.jsonl": (1122, "# Quarterly travel expense", "Q3-TRV-0192.", 1, 0),
    "gemini/thinking-text.jsonl": (1288, "## Why the sky is blue", "especially vivid.", 0, 0),
    "gemini/function-call.jsonl": (50, "I'll look up", "for you.", 0, 1),
}
WITH_REASONING = {
    "ag-ui/subagent-reasoning.jsonl",
    "ag-ui/chunks-thinking.jsonl",
    "ai-sdk-ui/reasoning-tool-text.jsonl",
    "gemini/thinking-text.jsonl",
}


def _name(path: Path) -> str:
    return path.relative_to(STREAMS).as_posix()


def _normalize(path: Path) -> list[Event]:
    normalizer = make_normalizer(detect_format(path), RUN)
    events = [e for raw in recording_lines(path) for e in normalizer.feed(raw)]
    return events + normalizer.close()


def _root_text(events: list[Event], visibility: Visibility) -> str:
    return "".join(
        e.text for e in events if isinstance(e, TextEvent) and e.source is None and e.visibility is visibility
    )


def _expected_answer(path: Path) -> str:
    """The root answer read straight off the raw lines, without the normalizers' logic."""
    raws = recording_lines(path)
    fmt = path.parent.name
    if fmt == "ag-ui":
        kinds = ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK")
        return "".join(r["delta"] for r in raws if r["type"] in kinds and "subagentRunId" not in r)
    if fmt == "ai-sdk-ui":
        return "".join(r["delta"] for r in raws if r["type"] == "text-delta")
    if fmt == "a2a":
        results = [r["result"] for r in raws]
        main = results[0]["id"]
        updates = [r for r in results if r["kind"] == "artifact-update" and r["taskId"] == main]
        return "".join(p.get("text", "") for u in updates for p in u["artifact"]["parts"])
    parts = [p for r in raws for c in r["candidates"] for p in c["content"]["parts"]]
    return "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))


@pytest.fixture(scope="module", params=FILES, ids=_name)
def stream(request: pytest.FixtureRequest) -> tuple[Path, list[Event]]:
    path: Path = request.param
    return path, _normalize(path)


def test_every_format_has_recordings_and_anchors() -> None:
    assert {p.parent.name for p in FILES} == set(FORMATS)
    assert {_name(p) for p in FILES} == set(ANCHORS)
    assert {detect_format(p) for p in FILES} == {ProviderFormat(f) for f in FORMATS}


def test_root_answer_matches_the_raw_lines_and_anchors(stream: tuple[Path, list[Event]]) -> None:
    path, events = stream
    answer = _root_text(events, Visibility.ANSWER)
    assert answer == _expected_answer(path)
    length, start, end, _, _ = ANCHORS[_name(path)]
    assert (len(answer), answer.startswith(start), answer.endswith(end)) == (length, True, True)


def test_reasoning_is_separated(stream: tuple[Path, list[Event]]) -> None:
    path, events = stream
    reasoning = _root_text(events, Visibility.REASONING)
    assert bool(reasoning) == (_name(path) in WITH_REASONING)
    assert not reasoning or reasoning[:40] not in _root_text(events, Visibility.ANSWER)


def test_sub_agents_are_children_that_end(stream: tuple[Path, list[Event]]) -> None:
    path, events = stream
    children = {e.source for e in events if e.source is not None}
    assert len(children) == ANCHORS[_name(path)][3]
    for child in children:
        assert child.depth == 1 and child.path is not None and child.path.endswith("/" + child.agent_id)
        own = [e for e in events if e.source == child]
        assert isinstance(own[-1], End), "a child's last event is its end"
        assert _root_text(own, Visibility.ANSWER) == ""  # the helper reads root text only
        child_text = "".join(e.text for e in own if isinstance(e, TextEvent))
        assert child_text and child_text not in _root_text(events, Visibility.ANSWER)


def test_events_are_valid_contract_events(stream: tuple[Path, list[Event]]) -> None:
    _, events = stream
    for event in events:
        assert event.run == RUN and event.seq is None
        assert parse_event(event_to_json(event)) == event


def test_message_indexes_never_go_back_per_source(stream: tuple[Path, list[Event]]) -> None:
    _, events = stream
    last: dict[str | None, int] = {}
    ended: dict[str | None, set[int]] = defaultdict(set)
    for event in events:
        key = event.source.key if event.source is not None else None
        if isinstance(event, TextEvent):
            assert event.message >= last.get(key, 0)
            assert event.message not in ended[key], "text after its message ended"
            last[key] = event.message
        if isinstance(event, MessageEnd) and event.message is not None:
            ended[key].add(event.message)


def test_tool_calls_start_hold_their_arguments_and_end(stream: tuple[Path, list[Event]]) -> None:
    path, events = stream
    args: dict[str, list[str]] = {}
    states: dict[str, ToolCallState] = {}
    for event in events:
        if not isinstance(event, ToolCall):
            continue
        if event.state is ToolCallState.START:
            assert event.id not in states and event.name
            args[event.id] = []
        else:
            assert states[event.id] is not ToolCallState.END
        if event.state is ToolCallState.ARGS_DELTA:
            assert event.args_delta
            args[event.id].append(event.args_delta)
        states[event.id] = event.state
    assert set(states.values()) <= {ToolCallState.END}
    assert len(states) == ANCHORS[_name(path)][4]
    for call_id, parts in args.items():
        assert isinstance(json.loads("".join(parts)), dict), call_id


def test_fragmented_tool_input_is_whole_only_at_the_end() -> None:
    path = STREAMS / "ai-sdk-ui/reasoning-tool-text.jsonl"
    calls = [e for e in _normalize(path) if isinstance(e, ToolCall)]
    fragments = [c.args_delta for c in calls if c.state is ToolCallState.ARGS_DELTA]
    assert len(fragments) > 3
    for n in range(1, len(fragments)):
        with pytest.raises(json.JSONDecodeError):
            json.loads("".join(fragments[:n]))  # type: ignore[arg-type]
    available = next(r for r in recording_lines(path) if r["type"] == "tool-input-available")
    assert json.loads("".join(fragments)) == available["input"]  # type: ignore[arg-type]


def test_every_line_type_that_yields_nothing_is_named_in_its_normalizers_docs() -> None:
    """A sample line that yields no event is one its normalizer's module docstring names (ignored, or read for
    state only): nothing is dropped silently."""
    for path in FILES:
        normalizer = make_normalizer(detect_format(path), RUN)
        doc = sys.modules[type(normalizer).__module__].__doc__ or ""
        for raw in recording_lines(path):
            kind = raw.get("type") or raw.get("result", {}).get("kind")
            if normalizer.feed(raw) == [] and isinstance(kind, str):
                assert kind in doc or (kind.startswith("data-") and "data-*" in doc), (path.name, kind)


def test_a_replayed_recordings_sub_agents_keep_their_source_nested_under_the_replays() -> None:
    path = STREAMS / "ag-ui/subagent-reasoning.jsonl"
    as_root = recorded_events(path, ProviderFormat.AG_UI, RUN)
    child = {"agent_id": "researcher", "session_id": "run_7c1e_researcher", "parent_session_id": "run_7c1e"}
    assert {json.dumps(e.get("source"), sort_keys=True) for e in as_root} == {
        "null",
        json.dumps({**child, "depth": 1, "path": "run_7c1e/researcher"}, sort_keys=True),
    }
    planner = Source(agent_id="planner", session_id="s-plan", parent_session_id="s-root", depth=1, path="s/planner")
    nested = recorded_events(path, ProviderFormat.AG_UI, RUN, planner)
    sources = {Source.model_validate(e["source"]) for e in nested}
    assert sources == {
        planner,
        Source(**{**child, "parent_session_id": "s-plan"}, depth=2, path="s/planner/researcher"),
    }
    root_text = [e["text"] for e in as_root if e["kind"] == "text" and e.get("source") is None]
    assert "".join(root_text).startswith("The user wants")  # reasoning first, then the answer; no child text
    assert "Opening hours checked" not in "".join(root_text)
