"""How each format's own error, refusal and length cut end a run (``ErrorEvent.ends``), Gemini's streamed function-call
arguments, and the OpenAI Responses items no chat can show (issue 26). The streams replayed end to end are in
tests/integration/test_stream_outcomes.py; these pin the normalizers alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamrelay.app.ingest_client import detect_format, recording_lines
from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    EndStatus,
    ErrorEvent,
    Event,
    MessageEnd,
    Source,
    Status,
    ToolCall,
    ToolCallState,
    parse_event,
)
from streamrelay.core.events import ProviderFormat as F
from streamrelay.core.normalize import make_normalizer
from streamrelay.core.normalize.gemini_args import PartialArgError, StreamedCall, parse_path

RUN = "run-1"
UPSTREAM = Path(__file__).resolve().parents[1] / "streams"


def feed(fmt: F, *raws: Any, close: bool = True) -> list[Event]:
    normalizer = make_normalizer(fmt, RUN)
    events = [e for raw in raws for e in normalizer.feed(raw)]
    return events + (normalizer.close() if close else [])


def ends(events: list[Event]) -> list[tuple[EndStatus | None, str]]:
    return [(e.ends, e.message) for e in events if isinstance(e, ErrorEvent)]


def calls(events: list[Event]) -> list[tuple[str, str | None, ToolCallState, str | None]]:
    return [(e.id, e.name, e.state, e.args_delta) for e in events if isinstance(e, ToolCall)]


# --- errors -----------------------------------------------------------------------------------------------------------


def test_every_formats_stream_error_ends_the_run_error() -> None:
    cases: list[tuple[F, dict[str, Any]]] = [
        (F.ANTHROPIC, {"type": "error", "error": {"type": "api_error", "message": "boom"}}),
        (F.OPENAI_CHAT, {"error": {"message": "boom"}}),
        (F.OPENAI_RESPONSES, {"type": "error", "code": "server_error", "message": "boom"}),
        (F.GEMINI, {"error": {"code": 500, "message": "boom", "status": "INTERNAL"}}),
        (F.AG_UI, {"type": "RUN_ERROR", "message": "boom"}),
        (F.AI_SDK_UI, {"type": "error", "errorText": "boom"}),
        (F.A2A, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "boom"}}),
    ]
    for fmt, raw in cases:
        told = ends(feed(fmt, raw, close=False))
        assert len(told) == 1 and told[0][0] is EndStatus.ERROR and "boom" in told[0][1], (fmt, told)


def test_a_responses_error_nested_as_recorded_keeps_its_message_and_is_told_once() -> None:
    """Item 7: the recorded ``error`` event nests ``{"error": {"code", "message"}}``; the ``response.failed`` after
    it is the same failure (one line, not two)."""
    path = UPSTREAM / "openai-responses" / "upstream" / "error-insufficient-quota.jsonl"
    told = ends(feed(F.OPENAI_RESPONSES, *recording_lines(path)))
    assert len(told) == 1 and told[0][0] is EndStatus.ERROR
    assert told[0][1].startswith("insufficient_quota: You exceeded your current quota")


def test_ai_sdk_finish_reason_error_alone_fails_and_after_an_error_chunk_adds_nothing() -> None:
    assert ends(feed(F.AI_SDK_UI, {"type": "finish", "finishReason": "error"})) == [
        (EndStatus.ERROR, "the agent's stream ended in an error")
    ]
    both = feed(F.AI_SDK_UI, {"type": "error", "errorText": "x"}, {"type": "finish", "finishReason": "error"})
    assert ends(both) == [(EndStatus.ERROR, "x")]


def test_a_sub_agents_error_is_its_own_not_the_runs() -> None:
    events = feed(
        F.AG_UI,
        {"type": "SUBAGENT_STARTED", "subagentRunId": "s1", "name": "helper"},
        {"type": "RUN_ERROR", "subagentRunId": "s1", "message": "child broke"},
        close=False,
    )
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert [(e.ends, e.message) for e in errors] == [(None, "child broke")]
    assert isinstance(errors[0].source, Source)


def test_a2a_main_task_failed_or_rejected_ends_the_run_a_child_does_not() -> None:
    def status(task: str, state: str) -> dict[str, Any]:
        return {"kind": "status-update", "taskId": task, "status": {"state": state}, "final": True}

    assert ends(feed(F.A2A, status("t1", "failed"), close=False)) == [(EndStatus.ERROR, "task failed")]
    assert ends(feed(F.A2A, status("t1", "rejected"), close=False)) == [(EndStatus.REFUSED, "task rejected")]
    child = feed(F.A2A, status("t1", "working"), status("t2", "failed"), close=False)
    assert ends(child) == [(None, "task failed")]


def test_ends_must_say_a_bad_end() -> None:
    assert parse_event({"kind": "error", "run": "r", "message": "m", "ends": "cut"}).ends is EndStatus.CUT  # type: ignore[union-attr]
    for value in ("ok", "cancelled", "later"):
        with pytest.raises(IngestError, match="ends"):
            parse_event({"kind": "error", "run": "r", "message": "m", "ends": value})


# --- refusals ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "explanation"),
    [
        ("refusal-explained", "refused: This request was refused due to policy."),
        ("hi-then-refusal", "refused: This request was refused due to policy."),
        ("refusal-no-block", "refused: This request triggered restrictions on violative cyber content"),
    ],
)
def test_an_anthropic_refusal_ends_the_run_refused_with_its_explanation(name: str, explanation: str) -> None:
    path = UPSTREAM / "anthropic" / "upstream" / f"{name}.jsonl"
    told = ends(feed(detect_format(path), *recording_lines(path)))
    assert len(told) == 1 and told[0][0] is EndStatus.REFUSED and told[0][1].startswith(explanation)


def test_an_anthropic_refusal_without_details_or_with_a_category_only() -> None:
    def refusal(details: Any) -> dict[str, Any]:
        return {"type": "message_delta", "delta": {"stop_reason": "refusal", "stop_details": details}}

    assert ends(feed(F.ANTHROPIC, refusal(None), close=False)) == [
        (EndStatus.REFUSED, "refused: the model declined to answer")
    ]
    assert ends(feed(F.ANTHROPIC, refusal({"type": "refusal", "category": "bio"}), close=False)) == [
        (EndStatus.REFUSED, "refused: the request falls under the bio policy")
    ]


def test_openai_refusals_chat_and_responses() -> None:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chat = feed(F.OPENAI_CHAT, chunk({"refusal": "I can't "}), chunk({"refusal": "help with that."}, "stop"))
    assert ends(chat) == [(EndStatus.REFUSED, "refused: I can't help with that.")]
    filtered = feed(F.OPENAI_CHAT, chunk({"content": "Par"}, "content_filter"))
    assert ends(filtered) == [(EndStatus.REFUSED, "refused: the provider's content filter stopped the answer")]
    responses = feed(
        F.OPENAI_RESPONSES,
        {"type": "response.created"},
        {"type": "response.refusal.delta", "delta": "No."},
        {"type": "response.refusal.done", "refusal": "No."},
    )
    assert ends(responses) == [(EndStatus.REFUSED, "refused: No.")]


def test_gemini_blocking_reasons_refuse_other_reasons_fail() -> None:
    def finish(reason: str) -> dict[str, Any]:
        return {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason}]}

    assert ends(feed(F.GEMINI, finish("SAFETY")))[0][0] is EndStatus.REFUSED
    assert ends(feed(F.GEMINI, {"promptFeedback": {"blockReason": "OTHER"}}))[0][0] is EndStatus.REFUSED
    assert ends(feed(F.GEMINI, finish("MALFORMED_FUNCTION_CALL")))[0][0] is EndStatus.ERROR
    assert ends(feed(F.GEMINI, finish("STOP"))) == []


# --- length cuts ------------------------------------------------------------------------------------------------------


def test_every_formats_length_cut_ends_the_run_cut_before_its_message_end() -> None:
    cases: list[tuple[F, list[dict[str, Any]], str]] = [
        (
            F.ANTHROPIC,
            [{"type": "message_start"}, {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}],
            "max_tokens",
        ),
        (F.OPENAI_CHAT, [{"choices": [{"index": 0, "delta": {"content": "{"}, "finish_reason": "length"}]}], "length"),
        (
            F.OPENAI_RESPONSES,
            [
                {"type": "response.created"},
                {"type": "response.incomplete", "response": {"incomplete_details": {"reason": "max_output_tokens"}}},
            ],
            "max_output_tokens",
        ),
        (
            F.GEMINI,
            [{"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "MAX_TOKENS"}]}],
            "MAX_TOKENS",
        ),
        (F.AI_SDK_UI, [{"type": "start"}, {"type": "finish", "finishReason": "length"}], "length"),
    ]
    for fmt, raws, reason in cases:
        events = feed(fmt, *raws)
        told = [i for i, e in enumerate(events) if isinstance(e, ErrorEvent)]
        assert ends(events) == [(EndStatus.CUT, f"cut off: the model reached its output limit ({reason})")], fmt
        assert isinstance(events[told[0] + 1], MessageEnd), (fmt, events)


def test_a_chat_tool_call_cut_by_the_length_limit_is_never_ended() -> None:
    def chunk(fragment: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}, "finish_reason": finish}]}

    events = feed(
        F.OPENAI_CHAT,
        chunk({"index": 0, "id": "c1", "function": {"name": "pay", "arguments": '{"amount": 1'}}),
        chunk({"index": 0, "function": {"arguments": "0"}}, "length"),
    )
    assert [state for _, _, state, _ in calls(events)] == [
        ToolCallState.START,
        ToolCallState.ARGS_DELTA,
        ToolCallState.ARGS_DELTA,
    ]


# --- Gemini streamed function-call arguments --------------------------------------------------------------------------


def _gemini(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {"candidates": [candidate]}


def test_gemini_streamed_arguments_are_one_whole_call_and_the_next_line_is_taken() -> None:
    """The issue's own stream: ``getWeather`` with ``willContinue``, ``partialArgs`` chunks without a name, then a
    second call: two whole calls, each ending once, no line refused."""
    events = feed(
        F.GEMINI,
        _gemini({"functionCall": {"name": "getWeather", "willContinue": True}}),
        _gemini(
            {
                "functionCall": {
                    "partialArgs": [{"jsonPath": "$.city", "stringValue": "Par", "willContinue": True}],
                    "willContinue": True,
                }
            }
        ),
        _gemini({"functionCall": {"partialArgs": [{"jsonPath": "$.city", "stringValue": "is"}], "willContinue": True}}),
        _gemini({"functionCall": {"partialArgs": [{"jsonPath": "$.days", "numberValue": 3}]}}),
        _gemini({"functionCall": {"name": "getTime", "args": {"tz": "CET"}}}, finish="STOP"),
    )
    assert calls(events) == [
        ("call-0-1", "getWeather", ToolCallState.START, None),
        ("call-0-1", "getWeather", ToolCallState.ARGS_DELTA, json.dumps({"city": "Paris", "days": 3})),
        ("call-0-1", "getWeather", ToolCallState.END, None),
        ("call-0-2", "getTime", ToolCallState.START, None),
        ("call-0-2", "getTime", ToolCallState.ARGS_DELTA, json.dumps({"tz": "CET"})),
        ("call-0-2", "getTime", ToolCallState.END, None),
    ]


def test_gemini_continuations_by_id_and_by_repeated_name() -> None:
    events = feed(
        F.GEMINI,
        _gemini(
            {
                "functionCall": {
                    "name": "get_weather",
                    "id": "fc1",
                    "partialArgs": [{"jsonPath": "$.location", "stringValue": "Lon"}],
                    "willContinue": True,
                }
            }
        ),
        _gemini(
            {
                "functionCall": {
                    "name": "get_weather",
                    "id": "fc1",
                    "partialArgs": [{"jsonPath": "$.location", "stringValue": "don"}],
                    "willContinue": True,
                }
            }
        ),
        _gemini({"functionCall": {"name": "get_weather", "id": "fc1", "willContinue": False}}),
    )
    # "don" without a willContinue before it replaces "Lon" (a path is appended only after willContinue).
    assert calls(events)[1:] == [
        ("fc1", "get_weather", ToolCallState.ARGS_DELTA, json.dumps({"location": "don"})),
        ("fc1", "get_weather", ToolCallState.END, None),
    ]


def test_gemini_a_call_cut_mid_stream_or_with_unreadable_parts_is_never_whole() -> None:
    cut = feed(
        F.GEMINI,
        _gemini({"functionCall": {"name": "pay", "willContinue": True}}),
        _gemini(
            {"functionCall": {"partialArgs": [{"jsonPath": "$.amount", "numberValue": 1}], "willContinue": True}},
            finish="MAX_TOKENS",
        ),
    )
    assert [state for _, _, state, _ in calls(cut)] == [ToolCallState.START]  # no end: malformed on the lane
    unreadable = feed(
        F.GEMINI,
        _gemini(
            {
                "functionCall": {
                    "name": "pay",
                    "partialArgs": [{"jsonPath": "$..amount", "numberValue": 1}],
                    "willContinue": True,
                }
            }
        ),
        _gemini({"functionCall": {}}),
    )
    assert [state for _, _, state, _ in calls(unreadable)] == [ToolCallState.START, ToolCallState.END]  # no arguments


def test_gemini_a_nameless_part_with_no_call_to_continue_is_refused() -> None:
    with pytest.raises(IngestError, match="needs a string 'name'"):
        feed(F.GEMINI, _gemini({"functionCall": {"partialArgs": [{"jsonPath": "$.a", "stringValue": "x"}]}}))
    assert feed(F.GEMINI, _gemini({"functionCall": {}})) == []  # an empty part with no call open says nothing


def test_partial_arg_paths_and_values() -> None:
    assert parse_path("$.a.b") == ["a", "b"]
    assert parse_path("$['c d'][1]") == ["c d", 1]
    assert parse_path('$["e"][0].f') == ["e", 0, "f"]
    for bad in ("$", "a.b", "$..a", "$[*]", "$[999999]"):
        with pytest.raises(PartialArgError):
            parse_path(bad)
    call = StreamedCall("c", "f")
    call.apply(
        {
            "args": {"existing": "v"},
            "partialArgs": [
                {"jsonPath": "$.a.b", "numberValue": 1.0},
                {"jsonPath": "$['c d'][1]", "boolValue": True},
                {"jsonPath": '$["e"][0].f', "nullValue": "NULL_VALUE"},
                {"jsonPath": "$.s", "stringValue": "hel", "willContinue": True},
            ],
        }
    )
    call.apply({"partialArgs": [{"jsonPath": "$.s", "stringValue": "lo"}]})
    assert call.args == {"existing": "v", "a": {"b": 1.0}, "c d": [None, True], "e": [{"f": None}], "s": "hello"}
    call.apply({"partialArgs": [{"jsonPath": "$.a[0]", "stringValue": "y"}]})  # an object read as an array
    assert call.broken is not None


# --- OpenAI Responses items ------------------------------------------------------------------------------------------


def test_a_custom_tool_call_reaches_the_lane_as_a_call_with_its_input() -> None:
    path = UPSTREAM / "openai-responses" / "upstream" / "custom-tool.jsonl"
    assert calls(feed(F.OPENAI_RESPONSES, *recording_lines(path))) == [
        ("call_custom_sql_001", "write_sql", ToolCallState.START, None),
        (
            "call_custom_sql_001",
            "write_sql",
            ToolCallState.ARGS_DELTA,
            json.dumps({"input": "SELECT * FROM users WHERE age > 25"}),
        ),
        ("call_custom_sql_001", "write_sql", ToolCallState.END, None),
    ]
    added = {
        "type": "response.output_item.added",
        "item": {"type": "custom_tool_call", "id": "ct", "call_id": "c", "name": "sh", "input": ""},
    }
    delta = {"type": "response.custom_tool_call_input.delta", "item_id": "ct", "delta": "ls -la"}
    done = {
        "type": "response.output_item.done",
        "item": {"type": "custom_tool_call", "id": "ct", "call_id": "c", "name": "sh"},
    }
    assert calls(feed(F.OPENAI_RESPONSES, added, delta, done))[1][3] == json.dumps({"input": "ls -la"})
    # The stream ends before the item is done: the call never ends (the lane reports it malformed).
    assert [s for _, _, s, _ in calls(feed(F.OPENAI_RESPONSES, added, delta))] == [ToolCallState.START]


@pytest.mark.parametrize(
    ("name", "line"),
    [
        (
            "mcp-tool-approval",
            "not shown: an MCP approval request (zip1: create_short_url); the client approves or denies it",
        ),
        ("image-generation", "not shown: an image the model generated: given inline (base64), not by a link to send"),
    ],
)
def test_items_no_chat_can_show_are_a_status_and_a_report_line(name: str, line: str) -> None:
    path = UPSTREAM / "openai-responses" / "upstream" / f"{name}.jsonl"
    events = feed(F.OPENAI_RESPONSES, *recording_lines(path))
    assert line in [e.text for e in events if isinstance(e, Status)]
    assert ends(events) == [(None, line)]  # a line in the report; the run is not failed by it


def test_an_output_item_neither_read_nor_ignored_is_told_not_dropped() -> None:
    item = {"type": "computer_call", "id": "cu_1", "call_id": "c1", "action": {"type": "click", "x": 1, "y": 2}}
    events = feed(F.OPENAI_RESPONSES, {"type": "response.output_item.done", "item": item}, close=False)
    assert ends(events) == [(None, "not shown: a computer_call item: the relay does not read it")]
    hosted = {"type": "code_interpreter_call", "id": "ci_1", "code": "1+1"}
    assert feed(F.OPENAI_RESPONSES, {"type": "response.output_item.done", "item": hosted}, close=False) == []
