"""Normalizers over every recorded provider stream (tests/streams) and targeted raw events."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    BlockEnd,
    EndStatus,
    ErrorEvent,
    Event,
    MessageEnd,
    ProviderFormat,
    Status,
    TextEvent,
    ToolCall,
    ToolCallState,
    ToolResult,
    Visibility,
    event_to_json,
    parse_event,
)
from streamrelay.core.normalize import (
    AnthropicNormalizer,
    OpenAIChatNormalizer,
    OpenAIResponsesNormalizer,
    make_normalizer,
)

TESTS = Path(__file__).resolve().parents[1]
STREAMS = TESTS / "streams"
CASES = TESTS / "cases"
STREAM_FILES = sorted(
    p for fmt in ("anthropic", "openai-responses", "openai-chat") for p in (STREAMS / fmt).glob("*.jsonl")
)
"""The provider recordings (the agent-protocol streams have their own tests: test_normalize_<format>.py)."""
RUN = "run-1"

# Streams whose answer an independent source fixes exactly: the scenario cases' expect.content.
CASE_ANSWERS = {
    "anthropic/markdown-long-fences.jsonl": "real-long-markdown-telegram.json",
    "anthropic/thinking-then-text.jsonl": "real-thinking-hidden.json",
}
# Streams whose tool-call arguments must parse as JSON objects once concatenated.
JSON_ARGS = {
    "anthropic/tool-use-json.jsonl",
    "anthropic/multi-message-tools.jsonl",
    "openai-chat/tool-call.jsonl",
    "openai-responses/reasoning-function-call.jsonl",
}
# Literal anchors, read off the recordings by eye: (answer length, start, end, assistant messages).
ANCHORS: dict[str, tuple[int, str, str, int]] = {
    "anthropic/markdown-long-fences.jsonl": (8512, "Based on the conversation", "cover another section?", 1),
    "anthropic/multi-message-tools.jsonl": (738, "I'll help you with this task.", "was successful!", 3),
    "anthropic/server-tool-citations.jsonl": (2402, "Based on my search results", "retail expansion.", 1),
    "anthropic/thinking-then-text.jsonl": (362, "# 25 \u00d7 37", "**Answer: 25 \u00d7 37 = 925**", 1),
    "anthropic/tool-use-json.jsonl": (0, "", "", 1),
    "openai-chat/long-text.jsonl": (3189, 'Introducing "Luminaria"', "the magic of light.", 1),
    "openai-chat/reasoning-content.jsonl": (42, 'The word "strawberry"', 'three "r"s.', 1),
    "openai-chat/text.jsonl": (1724, "**Holiday Name:** Harmony Day", "mutual respect.", 1),
    "openai-chat/tool-call.jsonl": (0, "", "", 1),
    "openai-responses/reasoning-function-call.jsonl": (28, "The final result", "**570**.", 4),
    "openai-responses/web-search-annotations.jsonl": (3645, "I checked today\u2019s tech", "details now?", 1),
}
WITH_REASONING = {
    "anthropic/thinking-then-text.jsonl",
    "openai-chat/reasoning-content.jsonl",
    "openai-chat/tool-call.jsonl",
    "openai-responses/reasoning-function-call.jsonl",
}


def _name(path: Path) -> str:
    return path.relative_to(STREAMS).as_posix()


def _raw(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _normalize(path: Path) -> list[Event]:
    normalizer = make_normalizer(ProviderFormat(path.parent.name), RUN)
    events: list[Event] = []
    for raw in _raw(path):
        events += normalizer.feed(raw)
    return events + normalizer.close()


def _texts(events: list[Event], visibility: Visibility) -> dict[int, str]:
    parts: dict[int, list[str]] = defaultdict(list)
    for event in events:
        if isinstance(event, TextEvent) and event.visibility is visibility:
            parts[event.message].append(event.text)
    return {message: "".join(texts) for message, texts in sorted(parts.items())}


def _answer(events: list[Event]) -> str:
    return "\n\n".join(text for text in _texts(events, Visibility.ANSWER).values() if text)


def _expected_answer(path: Path) -> str:
    """The answer from a source independent of the normalizers' logic."""
    case = CASE_ANSWERS.get(_name(path))
    if case is not None:
        content: str = json.loads((CASES / case).read_text(encoding="utf-8"))["expect"]["content"]
        return content
    messages: list[str] = []
    for raw in _raw(path):
        fmt = path.parent.name
        if fmt == "anthropic":
            if raw["type"] == "message_start":
                messages.append("")
            elif raw["type"] == "content_block_delta" and raw["delta"]["type"] == "text_delta":
                messages[-1] += raw["delta"]["text"]
        elif fmt == "openai-responses":  # the provider's own final text of each response
            if raw["type"] == "response.created":
                messages.append("")
            elif raw["type"] == "response.output_text.done":
                messages[-1] += raw["text"]
        else:
            for choice in raw["choices"]:
                if not messages:
                    messages.append("")
                delta = choice["delta"]
                messages[-1] += (delta.get("content") or "") + (delta.get("refusal") or "")
    return "\n\n".join(m for m in messages if m)


def _strip_ws(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.fixture(scope="module", params=STREAM_FILES, ids=_name)
def stream(request: pytest.FixtureRequest) -> tuple[str, list[Event]]:
    path: Path = request.param
    return _name(path), _normalize(path)


def test_every_stream_has_anchors() -> None:
    assert {_name(p) for p in STREAM_FILES} == set(ANCHORS)


def test_answer_matches_independent_expectation(stream: tuple[str, list[Event]]) -> None:
    name, events = stream
    answer = _answer(events)
    expected = _expected_answer(STREAMS / name)
    assert _strip_ws(answer) == _strip_ws(expected)
    assert answer == expected


def test_answer_matches_anchors(stream: tuple[str, list[Event]]) -> None:
    name, events = stream
    length, start, end, message_count = ANCHORS[name]
    answer = _answer(events)
    assert (len(answer), answer.startswith(start), answer.endswith(end)) == (length, True, True)
    assert [e.message for e in events if isinstance(e, MessageEnd)] == list(range(message_count))


def test_answer_has_no_reasoning(stream: tuple[str, list[Event]]) -> None:
    name, events = stream
    answer = _answer(events)
    reasoning = _texts(events, Visibility.REASONING)
    assert bool(reasoning) == (name in WITH_REASONING)
    for text in reasoning.values():
        assert len(text) > 40
        assert text[:40] not in answer
        assert text not in answer


def test_compaction_summary_is_not_answer_text() -> None:
    events = _normalize(STREAMS / "anthropic/markdown-long-fences.jsonl")
    assert all("Summary of Conversation" not in e.text for e in events if isinstance(e, TextEvent))


def test_events_are_valid_contract_events(stream: tuple[str, list[Event]]) -> None:
    _, events = stream
    for event in events:
        assert event.run == RUN
        assert event.seq is None
        assert parse_event(event_to_json(event)) == event


def test_message_indexes_never_decrease(stream: tuple[str, list[Event]]) -> None:
    _, events = stream
    indexes = [e.message for e in events if isinstance(e, TextEvent | BlockEnd | MessageEnd) and e.message is not None]
    assert len(indexes) == sum(isinstance(e, TextEvent | BlockEnd | MessageEnd) for e in events)
    assert indexes == sorted(indexes)
    ended: set[int | None] = set()
    for event in events:
        if isinstance(event, TextEvent | BlockEnd):
            assert event.message not in ended, "content after its message ended"
        if isinstance(event, MessageEnd):
            ended.add(event.message)


def _tool_args(events: list[Event]) -> dict[str, str]:
    """Check the start → args_delta* → end order of every call; return each call's joined arguments."""
    states: dict[str, ToolCallState] = {}
    args: dict[str, list[str]] = {}
    for event in events:
        if not isinstance(event, ToolCall):
            continue
        previous = states.get(event.id)
        if event.state is ToolCallState.START:
            assert previous is None, f"{event.id} started twice"
            assert event.name
            args[event.id] = []
        else:
            assert previous in (ToolCallState.START, ToolCallState.ARGS_DELTA), f"{event.id}: {previous}"
        if event.state is ToolCallState.ARGS_DELTA:
            assert event.args_delta
            args[event.id].append(event.args_delta)
        states[event.id] = event.state
    assert all(state is ToolCallState.END for state in states.values()), states
    return {call_id: "".join(parts) for call_id, parts in args.items()}


def test_tool_calls_start_and_end(stream: tuple[str, list[Event]]) -> None:
    name, events = stream
    args = _tool_args(events)
    if name in JSON_ARGS:
        assert args
        for call_id, text in args.items():
            assert isinstance(json.loads(text), dict), call_id


def test_tool_call_counts_and_arguments() -> None:
    events = _normalize(STREAMS / "anthropic/tool-use-json.jsonl")
    assert json.loads(_tool_args(events)["toolu_01KFbKqPYSuAKujiL6mTfzYA"]) == {
        "elements": [{"location": "San Francisco", "temperature": 58, "condition": "sunny"}]
    }
    events = _normalize(STREAMS / "openai-chat/tool-call.jsonl")
    assert {k: json.loads(v) for k, v in _tool_args(events).items()} == {
        "call_00_ioIn7yN9p1ZOMNpDLwd4MgAF": {"location": "San Francisco"}
    }
    path = STREAMS / "openai-responses/reasoning-function-call.jsonl"
    done = [r["arguments"] for r in _raw(path) if r["type"] == "response.function_call_arguments.done"]
    assert list(_tool_args(_normalize(path)).values()) == done
    assert len(_tool_args(_normalize(STREAMS / "anthropic/multi-message-tools.jsonl"))) == 3


def test_server_tool_results_are_summaries() -> None:
    events = _normalize(STREAMS / "anthropic/server-tool-citations.jsonl")
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [(r.id, r.name, r.summary) for r in results] == [
        ("srvtoolu_01Bj5uzzLcYG5hfueSLcDH8k", "web_search", "10 results")
    ]
    events = _normalize(STREAMS / "openai-responses/web-search-annotations.jsonl")
    ends = [e for e in events if isinstance(e, ToolCall) and e.state is ToolCallState.END]
    assert len(ends) == 6
    assert all(e.name == "web_search" and e.args and "sources" not in e.args for e in ends)
    assert sum(isinstance(e, ToolResult) for e in events) == 6
    assert sum(isinstance(e, Status) for e in events) == 6


# --- targeted raw events -------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", list(ProviderFormat))
@pytest.mark.parametrize("raw", [[1, 2], "text", None, 3])
def test_non_object_raises_ingest_error(fmt: ProviderFormat, raw: Any) -> None:
    with pytest.raises(IngestError, match="JSON object"):
        make_normalizer(fmt, RUN).feed(raw)


@pytest.mark.parametrize("fmt", [ProviderFormat.ANTHROPIC, ProviderFormat.OPENAI_RESPONSES])
@pytest.mark.parametrize("raw", [{}, {"type": None}, {"type": 3}, {"delta": {"text": "x"}}])
def test_missing_type_raises_ingest_error(fmt: ProviderFormat, raw: dict[str, Any]) -> None:
    with pytest.raises(IngestError, match="'type'"):
        make_normalizer(fmt, RUN).feed(raw)


def test_chat_chunk_without_choices_raises_ingest_error() -> None:
    with pytest.raises(IngestError, match="'choices'"):
        OpenAIChatNormalizer(RUN).feed({"object": "chat.completion.chunk"})


@pytest.mark.parametrize("fmt", [ProviderFormat.ANTHROPIC, ProviderFormat.OPENAI_RESPONSES])
def test_unknown_event_types_are_ignored(fmt: ProviderFormat) -> None:
    normalizer = make_normalizer(fmt, RUN)
    assert normalizer.feed({"type": "brand_new_event", "payload": {"x": 1}}) == []
    assert normalizer.close() == []


def test_make_normalizer_picks_the_provider() -> None:
    assert isinstance(make_normalizer(ProviderFormat.ANTHROPIC, RUN), AnthropicNormalizer)
    assert isinstance(make_normalizer(ProviderFormat.OPENAI_RESPONSES, RUN), OpenAIResponsesNormalizer)
    assert isinstance(make_normalizer(ProviderFormat.OPENAI_CHAT, RUN), OpenAIChatNormalizer)


def _feed_all(normalizer: Any, raws: list[dict[str, Any]], close: bool = True) -> list[Event]:
    events: list[Event] = []
    for raw in raws:
        events += normalizer.feed(raw)
    return events + (normalizer.close() if close else [])


def test_anthropic_error_event() -> None:
    events = AnthropicNormalizer(RUN).feed(
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    assert events == [ErrorEvent(run=RUN, message="overloaded_error: Overloaded", ends=EndStatus.ERROR)]


def test_anthropic_truncated_stream_ends_text_but_never_a_partial_tool_call() -> None:
    events = _feed_all(
        AnthropicNormalizer(RUN),
        [
            {"type": "message_start", "message": {}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Hi"}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " there"}},
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "t1", "name": "w"},
            },
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"a'},
            },
        ],
    )
    assert _answer(events) == "Hi there"
    assert [e.state for e in events if isinstance(e, ToolCall)] == [
        ToolCallState.START,
        ToolCallState.ARGS_DELTA,
    ]
    assert [type(e) for e in events[-2:]] == [BlockEnd, MessageEnd]


def test_anthropic_ignores_signature_and_citations_deltas() -> None:
    events = _feed_all(
        AnthropicNormalizer(RUN),
        [
            {"type": "message_start", "message": {}},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "thinking", "thinking": ""},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "hmm"},
            },
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "signature_delta", "signature": "s"},
            },
            {"type": "content_block_stop", "index": 0},
            {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 1, "delta": {"type": "citations_delta", "citation": {}}},
            {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Yes."}},
            {"type": "content_block_stop", "index": 1},
            {"type": "message_stop"},
        ],
    )
    assert _texts(events, Visibility.REASONING) == {0: "hmm"}
    assert _answer(events) == "Yes."
    assert [type(e) for e in events if not isinstance(e, TextEvent)] == [BlockEnd, MessageEnd]


def test_responses_done_arguments_fill_a_missing_tail_and_end_once() -> None:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": ""}
    events = _feed_all(
        OpenAIResponsesNormalizer(RUN),
        [
            {"type": "response.created", "response": {}},
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"a":'},
            {"type": "response.function_call_arguments.done", "item_id": "fc_1", "arguments": '{"a": 1}'},
            {"type": "response.output_item.done", "item": {**item, "arguments": '{"a": 1}'}},
            {"type": "response.completed", "response": {}},
        ],
    )
    assert _tool_args(events) == {"call_1": '{"a": 1}'}
    assert [type(e) for e in events][-1] is MessageEnd


def test_responses_failed_is_an_error() -> None:
    events = _feed_all(
        OpenAIResponsesNormalizer(RUN),
        [
            {"type": "response.created", "response": {}},
            {"type": "response.output_text.delta", "item_id": "m", "delta": "Par"},
            {"type": "response.failed", "response": {"error": {"code": "server_error", "message": "boom"}}},
        ],
    )
    assert events[1:] == [
        ErrorEvent(run=RUN, message="server_error: boom", ends=EndStatus.ERROR),
        MessageEnd(run=RUN, message=0),
    ]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def test_chat_refusal_is_answer_and_parallel_tool_calls_end_at_finish() -> None:
    events = _feed_all(
        OpenAIChatNormalizer(RUN),
        [
            _chunk({"role": "assistant", "refusal": "I can't"}),
            _chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}]}),
            _chunk({"tool_calls": [{"index": 1, "id": "b", "function": {"name": "g", "arguments": "{}"}}]}),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"x": 1}'}}]}),
            _chunk({}, finish="tool_calls"),
            _chunk({"content": "next"}),
            _chunk({}, finish="stop"),
            {"id": "c", "choices": [], "usage": {"total_tokens": 3}},
        ],
    )
    assert _tool_args(events) == {"a": '{"x": 1}', "b": "{}"}
    assert _texts(events, Visibility.ANSWER) == {0: "I can't", 1: "next"}
    assert [e.message for e in events if isinstance(e, MessageEnd)] == [0, 1]


def test_chat_truncated_tool_call_is_never_ended() -> None:
    events = _feed_all(
        OpenAIChatNormalizer(RUN),
        [_chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x'}}]})],
    )
    assert [e.state for e in events if isinstance(e, ToolCall)] == [
        ToolCallState.START,
        ToolCallState.ARGS_DELTA,
    ]
    assert isinstance(events[-1], MessageEnd)


def test_chat_error_chunk() -> None:
    events = OpenAIChatNormalizer(RUN).feed({"error": {"message": "rate limited"}})
    assert events == [ErrorEvent(run=RUN, message="rate limited", ends=EndStatus.ERROR)]
