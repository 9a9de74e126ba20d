"""The agent-protocol and Gemini normalizers on arbitrary input (hypothesis): a line of any shape either becomes
valid contract events or is refused with an IngestError (a 400 that says what was wrong), never a crash, and a
normalizer that refused a line still takes the lines after it."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamrelay.core.errors import IngestError
from streamrelay.core.events import ProviderFormat, event_to_json, parse_event
from streamrelay.core.normalize import make_normalizer

FORMATS = [
    ProviderFormat.AG_UI,
    ProviderFormat.AI_SDK_UI,
    ProviderFormat.A2A,
    ProviderFormat.GEMINI,
    ProviderFormat.LANGGRAPH,
]

AG_UI_TYPES = [
    "RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END", "TEXT_MESSAGE_CHUNK", "REASONING_MESSAGE_CONTENT", "THINKING_TEXT_MESSAGE_CONTENT",
    "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_CHUNK", "TOOL_CALL_RESULT",
    "SUBAGENT_STARTED", "SUBAGENT_FINISHED", "SUBAGENT_ERROR", "CUSTOM",
]  # fmt: skip
AI_SDK_TYPES = [
    "start", "text-delta", "text-end", "reasoning-delta", "tool-input-start", "tool-input-delta",
    "tool-input-available", "tool-input-error", "tool-output-available", "tool-output-error", "file", "finish",
    "abort", "error", "data-x",
]  # fmt: skip
A2A_KINDS = ["task", "message", "status-update", "artifact-update"]
LANGGRAPH_MODES = [
    "messages", "messages/partial", "messages/complete", "updates", "values", "custom", "error", "metadata",
    "updates|sub:1",
]  # fmt: skip
KEYS = [
    "messageId", "delta", "role", "toolCallId", "toolCallName", "subagentRunId", "parentRunId", "name", "runId",
    "stepName", "message", "code", "id", "toolName", "inputTextDelta", "input", "output", "errorText", "url",
    "mediaType", "taskId", "status", "artifact", "parts", "append", "lastChunk", "referenceTaskIds", "state", "text",
    "kind", "file", "uri", "mimeType", "preliminary", "reason", "thought", "functionCall", "args", "finishReason",
    "content", "candidates", "promptFeedback", "blockReason", "artifactId", "artifacts", "final",
    "type", "tool_call_chunks", "tool_calls", "tool_call_id", "chunk_position", "messages", "__interrupt__", "value",
    "action_requests", "action_request", "description", "question", "action", "index",
]  # fmt: skip

ids = st.sampled_from(["a", "b", "c", ""])
scalars = st.none() | st.booleans() | st.integers(-3, 3) | ids | st.text(max_size=6)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=4),
    max_leaves=12,
)
fields = st.dictionaries(st.sampled_from(KEYS), values, max_size=6)


def _typed(types: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda kind, body: {**body, "type": kind}, st.sampled_from(types), fields)


def _a2a() -> st.SearchStrategy[dict[str, Any]]:
    result = st.builds(lambda kind, body: {**body, "kind": kind}, st.sampled_from(A2A_KINDS), fields)
    return result | st.builds(lambda r: {"jsonrpc": "2.0", "id": 1, "result": r}, result)


def _gemini() -> st.SearchStrategy[dict[str, Any]]:
    part = st.dictionaries(st.sampled_from(["text", "thought", "functionCall"]), values, max_size=2)
    candidate = st.fixed_dictionaries(
        {"content": st.fixed_dictionaries({"parts": st.lists(part, max_size=3)})},
        optional={"finishReason": st.sampled_from(["STOP", "SAFETY", ""]), "index": st.integers(0, 1)},
    )
    return st.fixed_dictionaries({"candidates": st.lists(candidate, max_size=2)}) | fields


def _langgraph() -> st.SearchStrategy[dict[str, Any]]:
    """A server SSE part or a v2 part of any mode, its data any value (messages, updates and interrupts likely)."""
    message = st.fixed_dictionaries(
        {"type": st.sampled_from(["AIMessageChunk", "ai", "tool", "human"]), "id": ids},
        optional={k: values for k in KEYS if k not in ("type", "id")},
    )
    data = values | st.lists(message, max_size=2) | st.dictionaries(st.sampled_from(["agent", "__interrupt__"]), values)
    sse = st.builds(lambda mode, d: {"event": mode, "data": d}, st.sampled_from(LANGGRAPH_MODES), data)
    v2 = st.builds(lambda mode, d: {"type": mode, "ns": [], "data": d}, st.sampled_from(LANGGRAPH_MODES), data)
    return sse | v2 | fields


LINES = {
    ProviderFormat.AG_UI: _typed(AG_UI_TYPES),
    ProviderFormat.AI_SDK_UI: _typed(AI_SDK_TYPES),
    ProviderFormat.A2A: _a2a(),
    ProviderFormat.GEMINI: _gemini(),
    ProviderFormat.LANGGRAPH: _langgraph(),
}


def _check(fmt: ProviderFormat, lines: list[dict[str, Any]]) -> None:
    normalizer = make_normalizer(fmt, "r")
    events = []
    for line in lines:
        try:
            events += normalizer.feed(line)
        except IngestError as exc:
            assert exc.status == 400 and str(exc)
    events += normalizer.close()
    for event in events:
        assert parse_event(event_to_json(event)) == event


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_line_becomes_valid_events_or_a_clear_400(data: st.DataObject) -> None:
    fmt = data.draw(st.sampled_from(FORMATS))
    _check(fmt, data.draw(st.lists(LINES[fmt], max_size=12)))
