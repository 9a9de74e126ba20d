"""Breaker findings on issue 15's ingest formats (AG-UI, AI SDK UI, Gemini): hostile lines that were accepted and
silently dropped, or shown where they must not be. Each test says what the sidecar did before its fix."""

from __future__ import annotations

from typing import Any

import pytest

from streamrelay.core.errors import IngestError
from streamrelay.core.events import TextEvent, ToolCall, ToolCallState, Visibility
from streamrelay.core.json_types import JsonObject
from streamrelay.core.normalize import A2ANormalizer, AgUiNormalizer, AiSdkUiNormalizer, GeminiNormalizer

RUN = "r"


def gemini_part(part: dict[str, Any]) -> dict[str, Any]:
    return {"candidates": [{"index": 0, "content": {"role": "model", "parts": [part]}}]}


@pytest.mark.parametrize("thought", ["true", 1, "yes", {"on": True}])
def test_a_gemini_thought_flag_that_is_not_a_boolean_is_refused_not_shown_as_the_answer(thought: Any) -> None:
    # was: ``"thought": "true"`` made the part answer text: the model's private reasoning reached the chat
    with pytest.raises(IngestError, match="'thought' must be a boolean"):
        GeminiNormalizer(RUN).feed(gemini_part({"text": "my private plan", "thought": thought}))


def test_a_gemini_thought_flag_false_or_null_is_the_answer() -> None:
    for thought in (False, None):
        events = GeminiNormalizer(RUN).feed(gemini_part({"text": "Hello", "thought": thought}))
        assert [(e.text, e.visibility) for e in events if isinstance(e, TextEvent)] == [("Hello", Visibility.ANSWER)]


@pytest.mark.parametrize("call", ["get_weather", ["get_weather"], 5])
def test_a_gemini_function_call_that_is_not_an_object_is_refused(call: Any) -> None:
    # was: accepted and dropped (no tool call, no error: the parent loop never heard of it)
    with pytest.raises(IngestError, match="'functionCall' must be an object"):
        GeminiNormalizer(RUN).feed(gemini_part({"functionCall": call}))


@pytest.mark.parametrize("kind", ["TOOL_CALL_ARGS", "TOOL_CALL_END"])
def test_ag_ui_arguments_or_end_of_a_call_never_started_are_refused(kind: str) -> None:
    # was: 200 and nothing: the fragment was dropped silently
    with pytest.raises(IngestError, match="tool call 'ghost' that was never started"):
        AgUiNormalizer(RUN).feed({"type": kind, "toolCallId": "ghost", "delta": '{"a": 1}'})


def test_ag_ui_arguments_after_the_calls_end_are_refused() -> None:
    normalizer = AgUiNormalizer(RUN)
    normalizer.feed({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "search"})
    normalizer.feed({"type": "TOOL_CALL_END", "toolCallId": "c"})
    with pytest.raises(IngestError, match="already ended"):
        normalizer.feed({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}"})


def test_ag_ui_text_of_a_finished_sub_agent_is_refused() -> None:
    # was: accepted (200) and never shown nor handed to the parent loop: the child's message unit had no text
    normalizer = AgUiNormalizer(RUN)
    normalizer.feed({"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "researcher"})
    normalizer.feed({"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"})
    with pytest.raises(IngestError, match="sub-agent 's1', which already finished"):
        normalizer.feed({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "late", "subagentRunId": "s1"})
    with pytest.raises(IngestError, match="sub-agent 's1', which already finished"):
        normalizer.feed({"type": "SUBAGENT_FINISHED", "subagentRunId": "s1"})
    assert normalizer.feed({"type": "TEXT_MESSAGE_CONTENT", "messageId": "r", "delta": "root goes on"})


@pytest.mark.parametrize("kind", ["text-delta", "tool-input-delta", "start", "reasoning-delta"])
def test_ag_ui_run_refuses_an_event_of_another_format(kind: str) -> None:
    # was: an AI SDK line in a run declared ag-ui was ignored as an 'unknown type': the whole answer vanished
    with pytest.raises(IngestError, match="not an AG-UI event type"):
        AgUiNormalizer(RUN).feed({"type": kind, "id": "t", "delta": "hello"})


@pytest.mark.parametrize("kind", ["TEXT_MESSAGE_CONTENT", "RUN_STARTED", "Text-Delta"])
def test_ai_sdk_run_refuses_an_event_of_another_format(kind: str) -> None:
    with pytest.raises(IngestError, match="not an AI SDK UI"):
        AiSdkUiNormalizer(RUN).feed({"type": kind, "messageId": "m", "delta": "hello"})


def test_ai_sdk_data_parts_with_any_name_are_still_ignored() -> None:
    assert AiSdkUiNormalizer(RUN).feed({"type": "data-weatherReport", "data": {"a": 1}}) == []


def test_ai_sdk_input_delta_of_a_call_never_started_is_refused() -> None:
    # was: a tool call with no name was opened from the fragment; the AI SDK always sends tool-input-start first
    with pytest.raises(IngestError, match="tool call 'ghost' that was never started"):
        AiSdkUiNormalizer(RUN).feed({"type": "tool-input-delta", "toolCallId": "ghost", "inputTextDelta": "{"})


def test_a_refused_line_does_not_lose_the_end_of_a_chunked_tool_call() -> None:
    # was: the refused line had already ended the chunked call (its END computed, then thrown away with the 400):
    # the call never ended, so the parent loop never got it
    normalizer = AgUiNormalizer(RUN)
    normalizer.feed({"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "search", "delta": '{"q": 1}'})
    with pytest.raises(IngestError):
        normalizer.feed({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": 5})
    events = normalizer.feed({"type": "RUN_FINISHED", "threadId": "t", "runId": "main"})
    assert [(e.id, e.state) for e in events if isinstance(e, ToolCall)] == [("c", ToolCallState.END)]


def test_a_chunked_calls_explicit_end_is_a_harmless_repeat() -> None:
    normalizer = AgUiNormalizer(RUN)
    normalizer.feed({"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "toolCallName": "search", "delta": "{}"})
    events = normalizer.feed({"type": "TOOL_CALL_END", "toolCallId": "c"})
    assert [(e.id, e.state) for e in events if isinstance(e, ToolCall)] == [("c", ToolCallState.END)]


@pytest.mark.parametrize("text", [5, {"t": "x"}, ["a"]])
def test_an_a2a_text_part_whose_text_is_not_a_string_is_refused(text: Any) -> None:
    # was: accepted (200) and dropped: the artifact showed nothing and the report said 'empty'
    artifact: JsonObject = {"artifactId": "a", "parts": [{"kind": "text", "text": text}]}
    with pytest.raises(IngestError, match="text part's 'text' must be a string"):
        A2ANormalizer(RUN).feed({"kind": "artifact-update", "taskId": "t", "contextId": "c", "artifact": artifact})


@pytest.mark.parametrize("candidate", ["Hello", 5, {"index": "0", "content": {"parts": [{"text": "Hello"}]}}])
def test_a_gemini_candidate_that_is_not_an_object_or_has_a_non_integer_index_is_refused(candidate: Any) -> None:
    # was: skipped silently (a string index "0" is not 0; a non-object candidate read as {}): the answer vanished
    with pytest.raises(IngestError, match="candidate"):
        GeminiNormalizer(RUN).feed({"candidates": [candidate]})


def test_ag_ui_a_tool_call_started_again_while_open_is_refused() -> None:
    # was: the second TOOL_CALL_START silently replaced the open call's name ('pay' became 'refund' or the reverse)
    normalizer = AgUiNormalizer(RUN)
    normalizer.feed({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "pay"})
    with pytest.raises(IngestError, match="tool call 'c' is already open"):
        normalizer.feed({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "refund"})


def test_ag_ui_an_id_used_again_after_its_end_is_a_new_call() -> None:
    # agents that number their calls per turn reuse ids; the gate takes the latest (core.lanes.gate.find_call)
    normalizer = AgUiNormalizer(RUN)
    for _ in range(2):
        normalizer.feed({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "search"})
        events = normalizer.feed({"type": "TOOL_CALL_END", "toolCallId": "c"})
        assert [(e.id, e.state) for e in events if isinstance(e, ToolCall)] == [("c", ToolCallState.END)]
