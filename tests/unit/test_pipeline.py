"""The pipeline lane: complete tool calls only; partial or broken arguments become malformed units."""

from __future__ import annotations

from streamrelay.core.events import ToolCall, ToolCallState
from streamrelay.core.lanes.pipeline import ToolCallCollector


def _call(state: ToolCallState, **kw: object) -> ToolCall:
    return ToolCall(run="r", id="c1", name="write_file", state=state, **kw)


def test_complete_arguments_from_fragments_become_one_call() -> None:
    tools = ToolCallCollector()
    assert tools.feed(_call(ToolCallState.START)) is None
    assert tools.feed(_call(ToolCallState.ARGS_DELTA, args_delta='{"path": "a.t')) is None
    assert tools.feed(_call(ToolCallState.ARGS_DELTA, args_delta='xt"}')) is None
    unit = tools.feed(_call(ToolCallState.END))
    assert unit is not None and not unit.malformed and unit.args == {"path": "a.txt"}


def test_arguments_cut_off_by_the_end_are_malformed_and_keep_the_raw_text() -> None:
    tools = ToolCallCollector()
    tools.feed(_call(ToolCallState.START))
    tools.feed(_call(ToolCallState.ARGS_DELTA, args_delta='{"path":"notes.txt","content":"li'))
    [unit] = tools.close()
    assert unit.malformed
    assert unit.raw == '{"path":"notes.txt","content":"li'
    assert unit.error is not None and "cut off" in unit.error


def test_invalid_json_at_end_is_malformed_never_a_call() -> None:
    tools = ToolCallCollector()
    tools.feed(_call(ToolCallState.ARGS_DELTA, args_delta='{"a": 1,}'))
    unit = tools.feed(_call(ToolCallState.END))
    assert unit is not None and unit.malformed
    assert tools.close() == []


def test_arguments_that_are_not_an_object_are_malformed() -> None:
    tools = ToolCallCollector()
    tools.feed(_call(ToolCallState.ARGS_DELTA, args_delta="[1, 2]"))
    unit = tools.feed(_call(ToolCallState.END))
    assert unit is not None and unit.malformed


def test_end_with_args_object_is_taken_as_is() -> None:
    tools = ToolCallCollector()
    unit = tools.feed(_call(ToolCallState.END, args={"q": "x"}))
    assert unit is not None and unit.args == {"q": "x"}


def test_two_sources_may_use_the_same_call_id() -> None:
    from streamrelay.core.events import Source

    tools = ToolCallCollector()
    child = Source(agent_id="a", path="s/a")
    tools.feed(ToolCall(run="r", id="c1", name="x", state=ToolCallState.ARGS_DELTA, args_delta='{"a": 1}'))
    tools.feed(ToolCall(run="r", id="c1", name="y", state=ToolCallState.ARGS_DELTA, args_delta='{"b"', source=child))
    unit = tools.feed(ToolCall(run="r", id="c1", state=ToolCallState.END))
    assert unit is not None and unit.args == {"a": 1}
    [cut] = tools.close()
    assert cut.malformed and cut.name == "y"
