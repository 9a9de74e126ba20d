"""What the fuzz suite (tests/fuzz/) found, pinned: input no answer can encode is refused or repaired where it enters,
and a run.start's override that is out of range is a 400, never an exception.

- an id or a name with a lone surrogate (``"\\ud800"``) is refused with the field named: it used to reach the pipeline
  lane, whose ``GET /v1/runs/{run}/pipeline`` answered 500 (UnicodeEncodeError while encoding the units);
- tool-call arguments with a lone surrogate in a key or a string are a malformed unit, and a malformed unit's raw
  text is repaired: the unit always encodes;
- a raw provider event whose tool id holds a lone surrogate is a 400 for its line, not an exception;
- ``throttle_ms`` past :data:`core.policy.MAX_THROTTLE_MS` is a 400: ``10**400`` used to raise OverflowError, which the
  ingest answered 503 "the journal could not be written";
- an override's error shows a bounded repr of the value (a 60 kB value or a deep nesting is cut);
- a target is checked as its platform reads it: ``true`` is not chat 1; Telegram ids are ASCII digits of at most 52
  bits (``"²"`` passed ``str.isdigit`` and failed at the first send, Arabic-Indic ``"12"`` was sent to chat 12);
  Slack ids are matched whole (``$`` took a trailing newline, ``\\d`` the digits of every script).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamrelay.adapters.slack import SlackAdapter
from streamrelay.adapters.telegram.adapter import TelegramAdapter
from streamrelay.core.errors import IngestError
from streamrelay.core.events import ProviderFormat, Target, ToolCall, ToolCallState, parse_event
from streamrelay.core.lanes.pipeline import FinishedCall, ToolCallCollector
from streamrelay.core.normalize import make_normalizer
from streamrelay.core.policy import MAX_THROTTLE_MS, ChannelPolicy, apply_overrides

LONE = "\ud800"


def _encodes(call: FinishedCall) -> bool:
    json.dumps([call.raw, call.error, call.args], ensure_ascii=False).encode("utf-8")
    return True


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"kind": "tool_call", "id": LONE, "state": "start"}, "id"),
        ({"kind": "tool_call", "id": "t", "name": "a" + LONE, "state": "start"}, "name"),
        ({"kind": "tool_result", "id": LONE}, "id"),
        ({"kind": "phase", "name": LONE}, "name"),
        ({"kind": "media", "url": LONE}, "url"),
        ({"kind": "status", "text": "s", "source": {"agent_id": LONE}}, "source.agent_id"),
        ({"kind": "status", "text": "s", "source": {"agent_id": "a", "path": LONE}}, "source.path"),
        ({"kind": "run.start", "channel": "web", "target": {"chat_id": LONE}}, "target.chat_id"),
    ],
)
def test_an_id_or_a_name_with_a_lone_surrogate_is_refused_naming_the_field(event: dict[str, Any], field: str) -> None:
    with pytest.raises(IngestError) as refused:
        parse_event({"run": "r", **event})
    assert f"{field}: a lone surrogate U+D800 at character" in str(refused.value)
    assert refused.value.status == 400


def test_text_fields_still_take_half_a_pair() -> None:
    delta = parse_event({"run": "r", "kind": "text", "text": "\ud83d"})  # the next delta may complete it
    assert delta.kind == "text" and delta.text == "\ud83d"
    status = parse_event({"run": "r", "kind": "status", "text": "a" + LONE})
    assert status.kind == "status" and status.text == "a\ufffd"


@pytest.mark.parametrize("args", [{LONE: 1}, {"q": "x" + LONE}, {"q": [{"deep": LONE}]}])
def test_arguments_given_whole_with_a_lone_surrogate_are_malformed_and_encode(args: dict[str, Any]) -> None:
    unit = ToolCallCollector().feed(ToolCall(run="r", id="c1", name="x", state=ToolCallState.END, args=args))
    assert unit is not None and unit.error is not None
    assert "lone surrogate" in unit.error
    assert _encodes(unit)


def test_streamed_arguments_with_a_lone_surrogate_are_malformed_and_encode() -> None:
    tools = ToolCallCollector()
    tools.feed(ToolCall(run="r", id="c1", state=ToolCallState.ARGS_DELTA, args_delta='{"a": "\\ud800"}'))
    unit = tools.feed(ToolCall(run="r", id="c1", state=ToolCallState.END))
    assert unit is not None and unit.malformed and _encodes(unit)


def test_a_cut_off_call_ending_in_half_a_pair_encodes() -> None:
    tools = ToolCallCollector()
    tools.feed(ToolCall(run="r", id="c1", state=ToolCallState.ARGS_DELTA, args_delta='{"a": "x\ud83d'))
    [unit] = tools.close()
    assert unit.raw == '{"a": "x\ufffd' and _encodes(unit)


RAW_TOOL_IDS: dict[ProviderFormat, dict[str, Any]] = {
    ProviderFormat.ANTHROPIC: {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "tool_use", "id": LONE, "name": "x", "input": {}},
    },
    ProviderFormat.OPENAI_RESPONSES: {
        "type": "response.output_item.added",
        "item": {"type": "function_call", "id": "i", "call_id": LONE, "name": "x"},
    },
    ProviderFormat.OPENAI_CHAT: {
        "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": LONE, "function": {"name": "x"}}]}}]
    },
    ProviderFormat.AG_UI: {"type": "TOOL_CALL_START", "toolCallId": LONE, "toolCallName": "x"},
    ProviderFormat.AI_SDK_UI: {"type": "tool-input-start", "toolCallId": LONE, "toolName": "x"},
    ProviderFormat.GEMINI: {"candidates": [{"content": {"parts": [{"functionCall": {"id": LONE, "name": "x"}}]}}]},
    ProviderFormat.LANGGRAPH: {
        "type": "messages",
        "ns": [],
        "data": [
            {"type": "AIMessageChunk", "id": "m1", "content": "", "tool_call_chunks": [{"id": LONE, "index": 0}]},
            {},
        ],
    },
}
"""A raw event per format with tool calls (A2A has none: its task ids are checked in test_normalize_a2a.py)."""


@pytest.mark.parametrize("fmt", list(RAW_TOOL_IDS))
def test_a_raw_event_whose_tool_id_has_a_lone_surrogate_is_a_400(fmt: ProviderFormat) -> None:
    normalizer = make_normalizer(fmt, "r")
    with pytest.raises(IngestError) as refused:
        normalizer.feed(RAW_TOOL_IDS[fmt])
    assert refused.value.status == 400
    assert "makes no valid event: id: Value error, a lone surrogate U+D800" in str(refused.value)


@pytest.mark.parametrize("value", [10**400, MAX_THROTTLE_MS + 1, -1, 1e308])
def test_a_throttle_out_of_range_is_a_400(value: float) -> None:
    with pytest.raises(IngestError, match=f"expected a number of milliseconds from 0 to {MAX_THROTTLE_MS}"):
        apply_overrides(ChannelPolicy(name="c"), {"throttle_ms": value})


def test_an_override_error_shows_a_bounded_value() -> None:
    deep: Any = 1
    for _ in range(900):
        deep = [deep]
    for overrides in ({"throttle_ms": "x" * 60_000}, {"throttle_ms": deep}, {"y" * 60_000: 1}):
        with pytest.raises(IngestError) as refused:
            apply_overrides(ChannelPolicy(name="c"), overrides)
        assert len(str(refused.value)) < 300


def test_a_boolean_chat_id_is_refused_not_read_as_chat_1() -> None:
    with pytest.raises(IngestError, match=r"target\.chat_id"):
        parse_event({"run": "r", "kind": "run.start", "channel": "telegram", "target": {"chat_id": True}})


@pytest.mark.parametrize(
    "target",
    [
        Target(chat_id="²"),
        Target(chat_id="\u0661\u0662\u0663"),
        Target(chat_id=" 12"),
        Target(chat_id="@"),
        Target(chat_id="@chan\u202enel"),
        Target(chat_id=10**30),
        Target(chat_id="-" + "9" * 20),
        Target(chat_id=5, thread_id="²"),
        Target(chat_id=5, reply_to="\u0661\u0662"),
        Target(chat_id=5, reply_to=2**60),
    ],
)
async def test_telegram_refuses_digits_of_other_scripts_and_ids_past_52_bits(target: Target) -> None:
    telegram = TelegramAdapter("123456789:AAE-mock_Secret-Token_0123456789abcdef")
    try:
        assert telegram.check_target(target) is not None
        assert telegram.check_target(Target(chat_id=-1001234567890, thread_id="7", reply_to=42)) is None
        assert telegram.check_target(Target(chat_id="@channel_name")) is None
    finally:
        await telegram.close()


ARAB_TS = "\u0661\u0667\u0660\u0660.\u0660\u0660\u0660\u0661"


@pytest.mark.parametrize("target", [Target(chat_id="C0123456789\n"), Target(chat_id="C0123456789", thread_id=ARAB_TS)])
async def test_slack_ids_are_matched_whole_in_ascii(target: Target) -> None:
    slack = SlackAdapter("xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx")
    try:
        assert slack.check_target(target) is not None
        assert slack.check_target(Target(chat_id="C0123456789", thread_id="1700000000.000100")) is None
    finally:
        await slack.close()
