"""Gemini streamGenerateContent → normalized events: thought parts are reasoning, function calls whole tool
calls, finish reasons and blocked prompts, malformed responses refused, unknown parts ignored."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    EndStatus,
    ErrorEvent,
    Event,
    MessageEnd,
    TextEvent,
    ToolCall,
    ToolCallState,
    Visibility,
)
from streamrelay.core.normalize import GeminiNormalizer

RUN = "r"


def feed(*raws: dict[str, Any], close: bool = True) -> list[Event]:
    normalizer = GeminiNormalizer(RUN)
    events = [e for raw in raws for e in normalizer.feed(raw)]
    return events + (normalizer.close() if close else [])


def response(*parts: dict[str, Any], finish: str | None = None, index: int = 0) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": index}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash"}


def test_thought_parts_are_reasoning_and_text_parts_the_answer() -> None:
    events = feed(
        response({"text": "Let me think", "thought": True}),
        response({"text": "Blue, "}, {"text": "because"}),
        response({"text": " of scattering."}, finish="STOP"),
        {"usageMetadata": {"totalTokenCount": 12}},
    )
    assert [(e.message, e.visibility, e.text) for e in events if isinstance(e, TextEvent)] == [
        (0, Visibility.REASONING, "Let me think"),
        (0, Visibility.ANSWER, "Blue, "),
        (0, Visibility.ANSWER, "because"),
        (0, Visibility.ANSWER, " of scattering."),
    ]
    assert [e for e in events if not isinstance(e, TextEvent)] == [MessageEnd(run=RUN, message=0)]


def test_a_function_call_is_one_whole_tool_call() -> None:
    call = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "abc"}
    events = feed(response(call, finish="STOP"))
    calls = [(e.id, e.name, e.state, e.args_delta) for e in events if isinstance(e, ToolCall)]
    assert calls == [
        ("call-0-1", "get_weather", ToolCallState.START, None),
        ("call-0-1", "get_weather", ToolCallState.ARGS_DELTA, json.dumps({"city": "Paris"})),
        ("call-0-1", "get_weather", ToolCallState.END, None),
    ]
    with_id = feed(response({"functionCall": {"id": "fc-9", "name": "f"}}))
    assert {e.id for e in with_id if isinstance(e, ToolCall)} == {"fc-9"}


def test_a_blocking_finish_reason_and_a_blocked_prompt_are_errors() -> None:
    events = feed(response({"text": "Partial"}, finish="SAFETY"), {"promptFeedback": {"blockReason": "OTHER"}})
    assert [e.message for e in events if isinstance(e, ErrorEvent)] == [
        "the model stopped the answer (SAFETY)",
        "the prompt was blocked (OTHER)",
    ]
    assert feed(response({"text": "cut"}, finish="MAX_TOKENS"))[-1] == MessageEnd(run=RUN, message=0)


def test_an_error_object_is_an_error_event() -> None:
    raw = {"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}
    assert feed(raw) == [ErrorEvent(run=RUN, message="RESOURCE_EXHAUSTED: Resource exhausted", ends=EndStatus.ERROR)]


def test_a_new_turn_after_a_finish_reason_is_the_next_message() -> None:
    events = feed(response({"text": "One"}, finish="STOP"), response({"text": "Two"}, finish="STOP"))
    assert [(e.message, e.text) for e in events if isinstance(e, TextEvent)] == [(0, "One"), (1, "Two")]


def test_other_candidates_and_unknown_parts_are_ignored() -> None:
    events = feed(
        response({"text": "second candidate"}, index=1),
        response({"inlineData": {"mimeType": "image/png", "data": "iVBOR"}}, {"executableCode": {"code": "1"}}),
        {"usageMetadata": {"promptTokenCount": 3}},
    )
    assert events == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"choices": []}, "must be a GenerateContentResponse"),
        ({"candidates": {"content": {}}}, "'candidates' must be a list"),
        ({"candidates": [{"content": {"parts": "text"}}]}, "'content.parts' must be a list"),
        (response({"text": 5}), "part's 'text' must be a string, got int"),
        (response({"functionCall": {"args": {}}}), "functionCall part needs a string 'name'"),
    ],
)
def test_malformed_responses_are_refused_with_what_was_wrong(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(IngestError, match=message):
        GeminiNormalizer(RUN).feed(raw)
