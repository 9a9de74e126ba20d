"""Every integer an agent or a stream format sends is a JSON integer: a ``true``, a ``1.0`` or a ``"1"`` is refused with
the field named, never coerced (pydantic's lax mode took ``{"kind": "text", "text": "Hello ", "message": true}`` for
message 1, and the chat showed "there" then "Hello"). Each event model's integer fields, found by reading the models
(a new one is covered too), through :func:`core.events.parse_event`, the one-step JSON decoder of HTTP ingest and the
in-process fast path (which must agree with the validator on every input); the normalizers' indexes likewise."""

from __future__ import annotations

import json
import types
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from streamrelay.adapters.ingest_http.lines import decode, decode_text
from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    EVENT_TYPES,
    MAX_SEQ,
    BlockEnd,
    MessageEnd,
    ProviderFormat,
    RunStart,
    Source,
    Target,
    TextDelta,
    TextEvent,
    parse_event,
)
from streamrelay.core.ingest.admission import _delta_of
from streamrelay.core.normalize import make_normalizer

RUN = "r"

MINIMAL: dict[str, dict[str, Any]] = {
    "run.start": {"channel": "telegram", "target": {"chat_id": 7}},
    "text": {"text": "Hello "},
    "block_end": {},
    "message_end": {},
    "tool_call": {"id": "c1", "state": "start"},
    "tool_result": {"id": "c1"},
    "phase": {"name": "drafting"},
    "status": {"text": "searching"},
    "media": {"url": "https://example.com/a.png", "media_kind": "image"},
    "citation": {"title": "a source"},
    "commit": {},
    "end": {},
    "error": {"message": "failed"},
    "stop": {},
    "approval.request": {"id": "a1", "question": "Ok?", "ttl_s": 60},
    "approval.decision": {"id": "a1", "decision": "approved", "approved": True, "at": 1.0},
    "approval.expiry": {"id": "a1", "expires_at": 1.0},
}
"""A valid line of each kind, without its ``run``."""

NOT_INTEGERS = [True, False, 1.0, 0.0, 2.0, "1", "0", 1.5, [1], {"n": 1}]
"""What an integer field refuses (``true`` and ``1.0`` are what lax mode took as 1)."""


def _holds_int(annotation: object) -> bool:
    """Whether a field's annotation is ``int`` or holds it (``int | None``, ``Annotated[int, ...]``, a union)."""
    if annotation is int:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _holds_int(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return any(_holds_int(arg) for arg in typing.get_args(annotation))
    return False


def _int_fields(model: type[BaseModel]) -> list[str]:
    return [name for name, info in model.model_fields.items() if _holds_int(info.annotation)]


def _paths() -> list[tuple[str, tuple[str, ...]]]:
    """Every integer field of every event kind, as (kind, path inside the line): the event's own and its ``source``'s
    and (``run.start``) its ``target``'s."""
    paths: list[tuple[str, tuple[str, ...]]] = []
    for model in EVENT_TYPES:
        kind = model.model_fields["kind"].default
        paths += [(kind, (name,)) for name in _int_fields(model)]
        paths += [(kind, ("source", name)) for name in _int_fields(Source)]
        if model is RunStart:
            paths += [(kind, ("target", name)) for name in _int_fields(Target)]
    return paths


PATHS = _paths()


def _line(kind: str, path: tuple[str, ...], value: object) -> dict[str, Any]:
    line: dict[str, Any] = {"run": RUN, "kind": kind, **json.loads(json.dumps(MINIMAL[kind]))}
    holder = line
    for key in path[:-1]:
        holder = holder.setdefault(key, {"agent_id": "a"} if key == "source" else {})
    holder[path[-1]] = value
    return line


def test_the_event_models_integer_fields_are_the_ones_this_test_knows() -> None:
    """The walk finds every integer field (so a new one is tested too, and none hides in an unread annotation)."""
    assert {(kind, ".".join(path)) for kind, path in PATHS} >= {
        ("text", "seq"),
        ("text", "message"),
        ("text", "source.depth"),
        ("block_end", "message"),
        ("message_end", "message"),
        ("run.start", "target.chat_id"),
        ("run.start", "target.thread_id"),
        ("run.start", "target.reply_to"),
        ("end", "seq"),
        ("end", "source.depth"),
    }
    assert {kind for kind, _ in PATHS} == set(MINIMAL)


@pytest.mark.parametrize(("kind", "path"), PATHS, ids=[f"{k}:{'.'.join(p)}" for k, p in PATHS])
def test_an_integer_field_takes_an_integer_and_refuses_a_bool_a_float_and_a_numeric_string(
    kind: str, path: tuple[str, ...]
) -> None:
    field = path[-1]
    for good in (1, 2, 0) if field != "depth" else (1, 2):
        event = parse_event(_line(kind, path, good))
        holder: Any = event
        for key in path:
            holder = getattr(holder, key)
        assert holder == good and type(holder) is int
    platform_id = path[0] == "target"  # a chat id is an integer or a string: "1" is the string id "1"
    for bad in NOT_INTEGERS:
        if platform_id and isinstance(bad, str):
            continue
        with pytest.raises(IngestError) as refused:
            parse_event(_line(kind, path, bad))
        assert refused.value.status == 400
        message = str(refused.value)
        assert ".".join(path) in message and "valid integer" in message, message


def test_the_bool_message_of_the_report_is_refused_naming_the_field() -> None:
    with pytest.raises(IngestError) as refused:
        parse_event({"run": RUN, "kind": "text", "text": "Hello ", "message": True})
    assert str(refused.value) == "bad 'text' event: message: Input should be a valid integer"


def test_the_json_schema_still_says_integer() -> None:
    schema = TextEvent.model_json_schema()["properties"]
    assert schema["message"] == {"default": 0, "minimum": 0, "title": "Message", "type": "integer"}
    assert {"minimum": 0, "maximum": MAX_SEQ, "type": "integer"} in schema["seq"]["anyOf"]
    assert Source.model_json_schema()["properties"]["depth"]["type"] == "integer"
    for model in (BlockEnd, MessageEnd):
        assert {"minimum": 0, "type": "integer"} in model.model_json_schema()["properties"]["message"]["anyOf"]


# --- HTTP ingest's one-step decoder and the in-process fast path agree with the validator ---------------------------

VALUES = st.one_of(
    st.integers(-2, 3),
    st.sampled_from([MAX_SEQ, MAX_SEQ + 1, 2**64, None, *NOT_INTEGERS, "", "x", -0.0, 1e2]),
)


def _general(raw: bytes) -> object:
    """What HTTP's general path makes of the line ``raw`` posted to run ``RUN``: the event, or the error's text."""
    try:
        obj, _ = decode(raw, 1 << 20)
        return parse_event({**obj, "run": RUN})
    except IngestError as exc:
        return str(exc)


def _validated(obj: dict[str, Any]) -> object:
    try:
        return parse_event({**obj, "run": RUN})
    except IngestError as exc:
        return str(exc)


@settings(max_examples=400, deadline=None)
@given(
    st.fixed_dictionaries({}, optional={"seq": VALUES, "message": VALUES, "source": st.just({"agent_id": "a"})}),
    VALUES,
)
def test_a_text_line_with_any_integer_field_value_is_taken_alike_on_every_path(
    fields: dict[str, Any], depth: object
) -> None:
    if "source" in fields:
        fields = {**fields, "source": {"agent_id": "a", "depth": depth}}
    obj = {"kind": "text", "text": "Hello ", **fields}
    slow = _validated(obj)
    # In process: a plain delta is carried as a TextDelta, else validated; a refused line is left to parse_event.
    fast = _delta_of(obj, RUN, RUN)
    if isinstance(slow, str):
        assert fast is None, (obj, fast)
    else:
        assert fast is not None, obj
        typed = fast.event() if isinstance(fast, TextDelta) else fast
        assert typed.__dict__ == slow.__dict__
    # Over HTTP: decoded and validated in one step, or left to the general path whose event or error is the answer.
    raw = json.dumps(obj).encode()
    one_step = decode_text(raw, json.dumps(RUN).encode())
    general = _general(raw)
    assert (type(general), str(general) if isinstance(general, str) else None) == (
        type(slow),
        slow if isinstance(slow, str) else None,
    )
    if one_step is not None:
        assert not isinstance(general, str) and one_step.__dict__ == general.__dict__


@pytest.mark.parametrize("bad", [True, False, 1.0, "1"])
def test_a_bool_float_or_numeric_string_message_is_not_carried_by_the_fast_paths(bad: Any) -> None:
    obj = {"kind": "text", "text": "Hello ", "message": bad}
    assert _delta_of(obj, RUN, RUN) is None
    assert decode_text(json.dumps(obj).encode(), json.dumps(RUN).encode()) is None
    assert _delta_of({"kind": "text", "text": "Hello ", "message": 1}, RUN, RUN) == TextDelta(RUN, "Hello ", None, 1)


# --- the stream formats' indexes ------------------------------------------------------------------------------------


def _feed(fmt: str, lines: list[dict[str, Any]]) -> tuple[list[tuple[str, object]], list[str]]:
    """Feed ``lines`` to a fresh normalizer of ``fmt``: the events (kind, text or message) and each refusal's text."""
    normalizer = make_normalizer(ProviderFormat(fmt), RUN)
    events: list[tuple[str, object]] = []
    refused: list[str] = []
    for line in lines:
        try:
            taken = normalizer.feed(line)
        except IngestError as exc:
            assert exc.status == 400
            refused.append(str(exc))
            continue
        events += [(e.kind, getattr(e, "text", getattr(e, "message", None))) for e in taken]
    events += [(e.kind, getattr(e, "message", None)) for e in normalizer.close()]
    return events, refused


def _anthropic(index: Any) -> list[dict[str, Any]]:
    return [
        {"type": "message_start", "message": {"id": "m"}},
        {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": "Hi"}},
        {"type": "content_block_stop", "index": index},
    ]


@pytest.mark.parametrize("bad", [True, False, 0.0, "0"])
def test_an_anthropic_block_index_that_is_not_an_integer_is_refused_and_changes_nothing(bad: Any) -> None:
    good, refused = _feed("anthropic", _anthropic(0))
    assert refused == [] and ("text", "Hi") in good
    start, *blocks = _anthropic(0)
    events, refused = _feed("anthropic", [start, *({**line, "index": bad} for line in blocks), *blocks])
    assert refused == [
        f"a raw Anthropic {what} event's 'index' must be an integer, got {type(bad).__name__}"
        for what in ("content_block_start", "content_block_delta", "content_block_stop")
    ]
    assert events == good  # the refused lines changed nothing: the good ones make what they make alone


def _tool_result(return_code: Any) -> list[str | None]:
    block = {"type": "bash_code_execution_tool_result", "tool_use_id": "t", "content": {"return_code": return_code}}
    normalizer = make_normalizer(ProviderFormat.ANTHROPIC, RUN)
    lines: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "m"}},
        {"type": "content_block_start", "index": 0, "content_block": block},
    ]
    return [getattr(e, "summary", None) for line in lines for e in normalizer.feed(line)]


def test_an_anthropic_tool_results_exit_code_is_an_integer_or_not_told() -> None:
    assert _tool_result(0) == ["exit code 0"]
    assert _tool_result(True) == ["done"]  # never "exit code True"
    assert _tool_result(1.0) == ["done"]


def _chat(choice_index: Any = 0, call_index: Any = 0) -> list[dict[str, Any]]:
    call = {"index": call_index, "id": "c1", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"choices": [{"index": choice_index, "delta": {"content": "Hi"}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]


@pytest.mark.parametrize("bad", [False, True, 0.0, "0"])
def test_an_openai_chat_choice_or_call_index_that_is_not_an_integer_is_refused(bad: Any) -> None:
    good, refused = _feed("openai-chat", _chat())
    assert refused == [] and ("text", "Hi") in good
    events, refused = _feed("openai-chat", _chat(choice_index=bad))
    assert refused == [f"a raw OpenAI chat chunk's choice's 'index' must be an integer, got {type(bad).__name__}"]
    assert ("text", "Hi") not in events  # false is not choice 0
    events, refused = _feed("openai-chat", _chat(call_index=bad))
    assert refused == [f"a raw OpenAI chat chunk's tool call's 'index' must be an integer, got {type(bad).__name__}"]
    assert [kind for kind, _ in events] == ["text", "message_end"]  # no part of the call was taken
    events, refused = _feed("openai-chat", [{"choices": [{"delta": {"content": "Hi"}}]}])  # no index: choice 0
    assert refused == [] and ("text", "Hi") in events


@pytest.mark.parametrize("bad", [True, 1.0, "1"])
def test_an_openai_responses_summary_index_that_is_not_an_integer_is_refused(bad: Any) -> None:
    line: dict[str, Any] = {"type": "response.reasoning_summary_part.added", "summary_index": 1}
    events, refused = _feed("openai-responses", [line])
    assert refused == [] and ("text", "\n\n") in events
    events, refused = _feed("openai-responses", [{**line, "summary_index": bad}])
    assert refused == [
        "a raw OpenAI Responses reasoning_summary_part.added event's 'summary_index' must be an integer, got "
        + type(bad).__name__
    ]
