"""AI SDK UI message stream → normalized events: text and reasoning apart, tool input held until available,
outputs as summaries, files as media, errors and aborts, malformed chunks refused, unknown ones ignored."""

from __future__ import annotations

from typing import Any

import pytest

from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    BlockEnd,
    EndStatus,
    ErrorEvent,
    Event,
    Media,
    MessageEnd,
    Status,
    TextEvent,
    ToolCall,
    ToolCallState,
    ToolResult,
    Visibility,
)
from streamrelay.core.normalize import AiSdkUiNormalizer

RUN = "r"


def feed(*raws: Any, close: bool = True) -> list[Event]:
    normalizer = AiSdkUiNormalizer(RUN)
    events = [e for raw in raws for e in normalizer.feed(raw)]
    return events + (normalizer.close() if close else [])


def test_text_and_reasoning_deltas_per_message() -> None:
    events = feed(
        {"type": "start", "messageId": "m1"},
        {"type": "reasoning-start", "id": "r"},
        {"type": "reasoning-delta", "id": "r", "delta": "hmm"},
        {"type": "reasoning-end", "id": "r"},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "Hi"},
        {"type": "text-end", "id": "t"},
        {"type": "finish", "finishReason": "stop"},
        {"type": "start"},
        {"type": "text-delta", "id": "u", "delta": "Next"},
        {"type": "finish"},
        "[DONE]",
    )
    assert [(e.message, e.visibility, e.text) for e in events if isinstance(e, TextEvent)] == [
        (0, Visibility.REASONING, "hmm"),
        (0, Visibility.ANSWER, "Hi"),
        (1, Visibility.ANSWER, "Next"),
    ]
    assert [type(e) for e in events if not isinstance(e, TextEvent)] == [BlockEnd, MessageEnd, MessageEnd]


def test_streamed_tool_input_is_held_as_fragments_until_available() -> None:
    events = feed(
        {"type": "tool-input-start", "toolCallId": "c", "toolName": "weather"},
        {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": '{"city":'},
        {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": '"Berlin"}'},
        {"type": "tool-input-available", "toolCallId": "c", "toolName": "weather", "input": {"city": "Berlin"}},
        {"type": "tool-output-available", "toolCallId": "c", "output": {"raw": "a long forecast"}, "preliminary": True},
        {"type": "tool-output-available", "toolCallId": "c", "output": {"raw": "a long forecast"}},
    )
    calls = [(e.state, e.args_delta) for e in events if isinstance(e, ToolCall)]
    assert calls == [
        (ToolCallState.START, None),
        (ToolCallState.ARGS_DELTA, '{"city":'),
        (ToolCallState.ARGS_DELTA, '"Berlin"}'),
        (ToolCallState.END, None),
    ]
    assert [(r.id, r.name, r.summary) for r in events if isinstance(r, ToolResult)] == [("c", "weather", "done")]


def test_input_given_whole_is_one_fragment_then_end() -> None:
    events = feed({"type": "tool-input-available", "toolCallId": "c", "toolName": "f", "input": {"a": [1, "é"]}})
    assert [(e.state, e.args_delta) for e in events if isinstance(e, ToolCall)] == [
        (ToolCallState.START, None),
        (ToolCallState.ARGS_DELTA, '{"a": [1, "é"]}'),
        (ToolCallState.END, None),
    ]


def test_tool_errors_are_short_summaries() -> None:
    events = feed(
        {
            "type": "tool-input-error",
            "toolCallId": "a",
            "toolName": "f",
            "input": "{bad",
            "errorText": "bad JSON\nat 1",
        },
        {"type": "tool-input-start", "toolCallId": "b", "toolName": "g"},
        {"type": "tool-output-error", "toolCallId": "b", "errorText": "x" * 500},
        {"type": "tool-output-denied", "toolCallId": "b"},
    )
    summaries = [(r.id, r.name, r.summary) for r in events if isinstance(r, ToolResult)]
    assert summaries == [("a", "f", "error: bad JSON"), ("b", "g", "error: " + "x" * 119 + "…"), ("b", "g", "denied")]


def test_a_file_part_is_media_with_its_kind() -> None:
    events = feed(
        {"type": "file", "url": "https://example.com/chart.png", "mediaType": "image/png"},
        {"type": "file", "url": "https://example.com/report.pdf", "mediaType": "application/pdf"},
        {"type": "file", "url": "https://example.com/a.mp3", "mediaType": "audio/mpeg"},
        {"type": "file", "url": "https://example.com/v.mp4", "mediaType": "video/mp4"},
    )
    media = [(e.url.rsplit("/", 1)[1], e.media_kind) for e in events if isinstance(e, Media)]
    assert media == [("chart.png", "image"), ("report.pdf", "file"), ("a.mp3", "audio"), ("v.mp4", "video")]


@pytest.mark.parametrize("url", ["data:image/png;base64,iVBORw0KGgo=", "file:///tmp/x.png", "chart.png"])
def test_a_file_no_platform_can_fetch_is_a_status_note_not_dropped(url: str) -> None:
    events = feed({"type": "file", "url": url, "mediaType": "image/png"}, close=False)
    assert events == [Status(run=RUN, text="image not shown: not given by an http(s) link")]


def test_error_and_abort() -> None:
    events = feed(
        {"type": "text-delta", "id": "t", "delta": "Part"},
        {"type": "error", "errorText": "rate limited by the provider"},
        {"type": "abort", "reason": "user pressed stop"},
    )
    assert events[1:] == [
        ErrorEvent(run=RUN, message="rate limited by the provider", ends=EndStatus.ERROR),
        Status(run=RUN, text="stopped: user pressed stop"),
        MessageEnd(run=RUN, message=0),
    ]


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "start-step"},
        {"type": "finish-step"},
        {"type": "data-weather", "data": {"a": 1}},
        {"type": "message-metadata", "messageMetadata": {}},
        {"type": "some-future-part", "x": 1},
    ],
)
def test_unknown_and_bookkeeping_chunks_are_ignored(raw: dict[str, Any]) -> None:
    assert feed(raw) == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"type": "text-delta", "id": "t", "delta": 5}, "text-delta event's 'delta' must be a string"),
        ({"type": "tool-input-delta", "inputTextDelta": "{"}, "needs a non-empty string 'toolCallId'"),
        ({"type": "tool-output-available", "output": 1}, "needs a non-empty string 'toolCallId'"),
        ({"type": "file", "mediaType": "image/png"}, "file event needs a non-empty string 'url'"),
        ({"type": "error", "errorText": {"m": 1}}, "'errorText' must be a string"),
        ({"delta": "x"}, "needs a string 'type' field"),
        ("[NOT DONE]", "must be a JSON object"),
    ],
)
def test_malformed_chunks_are_refused(raw: Any, message: str) -> None:
    with pytest.raises(IngestError, match=message.replace("[", r"\[")):
        AiSdkUiNormalizer(RUN).feed(raw)


def test_a_truncated_tool_input_is_never_ended() -> None:
    events = feed(
        {"type": "tool-input-start", "toolCallId": "c", "toolName": "f"},
        {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": '{"a'},
    )
    assert [e.state for e in events if isinstance(e, ToolCall)] == [ToolCallState.START, ToolCallState.ARGS_DELTA]
