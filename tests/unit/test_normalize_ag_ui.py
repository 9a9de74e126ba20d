"""AG-UI → normalized events: text messages, reasoning apart, tool calls held until their end, sub-agents as
children with depth and path, malformed known events refused, unknown ones ignored."""

from __future__ import annotations

from typing import Any

import pytest

from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    End,
    EndStatus,
    ErrorEvent,
    Event,
    MessageEnd,
    Source,
    Status,
    TextEvent,
    ToolCall,
    ToolCallState,
    ToolResult,
    Visibility,
)
from streamrelay.core.normalize import AgUiNormalizer

RUN = "r"


def feed(*raws: dict[str, Any], close: bool = True) -> list[Event]:
    normalizer = AgUiNormalizer(RUN)
    events = [e for raw in raws for e in normalizer.feed(raw)]
    return events + (normalizer.close() if close else [])


def texts(events: list[Event], visibility: Visibility = Visibility.ANSWER) -> list[tuple[int, str]]:
    return [(e.message, e.text) for e in events if isinstance(e, TextEvent) and e.visibility is visibility]


def test_text_messages_are_answer_deltas_each_its_own_message() -> None:
    events = feed(
        {"type": "RUN_STARTED", "threadId": "t", "runId": "run-a"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": ", world"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m2", "delta": "Again."},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "run-a"},
    )
    assert texts(events) == [(0, "Hello"), (0, ", world"), (1, "Again.")]
    assert [e.message for e in events if isinstance(e, MessageEnd)] == [0, 1]


def test_reasoning_is_reasoning_and_shares_the_next_messages_index() -> None:
    events = feed(
        {"type": "REASONING_START", "messageId": "r1"},
        {"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "assistant"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "think"},
        {"type": "REASONING_MESSAGE_END", "messageId": "r1"},
        {"type": "THINKING_TEXT_MESSAGE_CONTENT", "delta": " more"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Answer"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    )
    assert texts(events, Visibility.REASONING) == [(0, "think"), (0, " more")]
    assert texts(events) == [(0, "Answer")]
    assert sum(isinstance(e, MessageEnd) for e in events) == 1


def test_text_of_other_roles_is_not_answer() -> None:
    events = feed(
        {"type": "TEXT_MESSAGE_START", "messageId": "u", "role": "user"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "u", "delta": "my question"},
        {"type": "TEXT_MESSAGE_END", "messageId": "u"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "s", "role": "system", "delta": "be brief"},
    )
    assert events == []


def test_chunked_messages_end_at_a_new_message_id() -> None:
    events = feed(
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a", "role": "assistant", "delta": "one"},
        {"type": "TEXT_MESSAGE_CHUNK", "delta": " two"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "b", "delta": "three"},
    )
    assert texts(events) == [(0, "one"), (0, " two"), (1, "three")]
    assert [e.message for e in events if isinstance(e, MessageEnd)] == [0, 1]


def test_tool_call_arguments_stay_fragments_until_the_end() -> None:
    events = feed(
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "search"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"q": "li'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": 'sbon"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "t", "toolCallId": "c1", "content": "raw tool output, long"},
    )
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [(c.state, c.args_delta, c.args) for c in calls] == [
        (ToolCallState.START, None, None),
        (ToolCallState.ARGS_DELTA, '{"q": "li', None),
        (ToolCallState.ARGS_DELTA, 'sbon"}', None),
        (ToolCallState.END, None, None),
    ]
    assert [(r.id, r.name, r.summary) for r in events if isinstance(r, ToolResult)] == [("c1", "search", "done")]


def test_a_chunked_tool_call_ends_at_the_next_other_event_and_a_truncated_one_never() -> None:
    events = feed(
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "f", "delta": '{"a"'},
        {"type": "TOOL_CALL_CHUNK", "delta": ": 1}"},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c2", "toolCallName": "g", "delta": "{}"},
        {"type": "STEP_FINISHED", "stepName": "x"},
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c3", "toolCallName": "h", "delta": '{"b'},
    )
    states = [(e.id, e.state) for e in events if isinstance(e, ToolCall) and e.state is not ToolCallState.ARGS_DELTA]
    assert states == [
        ("c1", ToolCallState.START),
        ("c1", ToolCallState.END),
        ("c2", ToolCallState.START),
        ("c2", ToolCallState.END),
        ("c3", ToolCallState.START),
    ]


def test_sub_agent_events_are_a_child_with_depth_path_and_end() -> None:
    events = feed(
        {"type": "RUN_STARTED", "threadId": "t", "runId": "main"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "parentRunId": "main", "name": "researcher"},
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s2", "parentRunId": "s1", "name": "fetcher"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "subagentRunId": "s2"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "fetched", "subagentRunId": "s2"},
        {"type": "SUBAGENT_FINISHED", "subagentRunId": "s2"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "n", "delta": "found", "subagentRunId": "s1"},
        {"type": "SUBAGENT_ERROR", "subagentRunId": "s1", "message": "quota exceeded"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "root", "delta": "Root answer"},
    )
    researcher = Source(
        agent_id="researcher", session_id="s1", parent_session_id="main", depth=1, path="main/researcher"
    )
    fetcher = Source(
        agent_id="fetcher", session_id="s2", parent_session_id="s1", depth=2, path="main/researcher/fetcher"
    )
    assert [(type(e).__name__, e.source) for e in events if not isinstance(e, TextEvent)] == [
        ("Status", researcher),
        ("Status", fetcher),
        ("MessageEnd", fetcher),
        ("End", fetcher),
        ("MessageEnd", researcher),
        ("ErrorEvent", researcher),
        ("End", researcher),
        ("MessageEnd", None),
    ]
    assert [(e.source, e.text) for e in events if isinstance(e, TextEvent)] == [
        (fetcher, "fetched"),
        (researcher, "found"),
        (None, "Root answer"),
    ]
    ends = [e for e in events if isinstance(e, End)]
    assert [e.status for e in ends] == [EndStatus.OK, EndStatus.ERROR]
    assert [e.message for e in events if isinstance(e, ErrorEvent)] == ["quota exceeded"]


def test_child_tool_calls_carry_the_childs_source() -> None:
    events = feed(
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "coder"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "run", "subagentRunId": "s1"},
        {"type": "TOOL_CALL_END", "toolCallId": "c", "subagentRunId": "s1"},
    )
    assert {e.source.agent_id if e.source else None for e in events} == {"coder"}
    assert next(e for e in events if isinstance(e, Status)).text == "coder started"


def test_run_error_and_steps() -> None:
    events = feed(
        {"type": "STEP_STARTED", "stepName": "searching"},
        {"type": "RUN_ERROR", "message": "model overloaded", "code": "503"},
    )
    assert events == [
        Status(run=RUN, text="searching"),
        ErrorEvent(run=RUN, message="503: model overloaded", ends=EndStatus.ERROR),
    ]


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}},
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/a", "value": 1}]},
        {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "m", "role": "assistant", "content": "old"}]},
        {"type": "CUSTOM", "name": "x", "value": 1},
        {"type": "RAW", "event": {"text": "x"}},
        {"type": "A_FUTURE_EVENT", "payload": "x"},
    ],
)
def test_bookkeeping_and_unknown_events_are_ignored(raw: dict[str, Any]) -> None:
    assert feed(raw) == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"type": "TEXT_MESSAGE_CONTENT", "delta": "x"},
            "TEXT_MESSAGE_CONTENT event needs a non-empty string 'messageId'",
        ),
        ({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": 3}, "'delta' must be a string, got int"),
        ({"type": "TOOL_CALL_START", "toolCallId": "c"}, "needs a non-empty string 'toolCallName'"),
        ({"type": "TOOL_CALL_ARGS", "delta": "{"}, "needs a non-empty string 'toolCallId'"),
        ({"type": "TOOL_CALL_CHUNK", "delta": "{"}, "opens a tool call needs string 'toolCallId' and 'toolCallName'"),
        ({"type": "SUBAGENT_STARTED", "name": "x"}, "needs a non-empty string 'subagentRunId'"),
        ({"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}, "opens a message needs a string 'messageId'"),
        ({"type": 5}, "needs a string 'type' field"),
    ],
)
def test_malformed_known_events_are_refused_with_what_was_wrong(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(IngestError, match=message.replace("(", r"\(")):
        AgUiNormalizer(RUN).feed(raw)


def test_a_truncated_stream_ends_messages_but_never_a_tool_call() -> None:
    events = feed(
        {"type": "TEXT_MESSAGE_START", "messageId": "m"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "partial"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": '{"a'},
    )
    assert [e.state for e in events if isinstance(e, ToolCall)] == [ToolCallState.START, ToolCallState.ARGS_DELTA]
    assert isinstance(events[-1], MessageEnd)


def test_a_child_seen_before_its_announcement_is_named_by_its_run_id() -> None:
    events = feed(
        {"type": "RUN_STARTED", "threadId": "t", "runId": "main"},
        {"type": "CUSTOM", "name": "progress", "value": 1, "subagentRunId": "s9"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi", "subagentRunId": "s9"},
    )
    assert {e.source for e in events} == {
        Source(agent_id="s9", session_id="s9", parent_session_id="main", depth=1, path="main/s9")
    }


@pytest.mark.parametrize(
    "name", ["CopilotKitMiddleware.after_model", "SummarizationMiddleware.before_model", "X.after_agent", "__start__"]
)
def test_a_frameworks_internal_step_is_no_status_line(name: str) -> None:
    """LangGraph names steps after graph nodes; middleware hooks are nodes too (issue 26, item 9)."""
    assert feed({"type": "STEP_STARTED", "stepName": name}) == []
    assert feed({"type": "STEP_STARTED", "stepName": "model"}) == [Status(run=RUN, text="model")]
