"""The typed contracts (core/contracts): the lane emits only units of the contract, every unit and live event
round-trips through its model key for key, the run report's reader model matches the sidecar's, the committed JSON
Schemas are the models', and mypy refuses a field a unit does not have."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from mypy import api as mypy_api
from pydantic import ValidationError

from app.schema import SCHEMA_DIR, rendered, schemas, stale
from core.contracts.live import (
    AnswerEvent,
    DeliveryEvent,
    EndLiveEvent,
    OtherLiveEvent,
    ResetEvent,
    RunOpened,
    check_live_event,
    parse_live_event,
)
from core.contracts.report import RunReport
from core.contracts.units import (
    CommitUnit,
    MalformedToolCallUnit,
    OtherUnit,
    RunEndUnit,
    StopUnit,
    ToolCallUnit,
    check_unit,
    parse_unit,
)
from core.events import EndStatus, Source, ToolCall, ToolCallState
from core.lanes.pipeline import ChildDone, FinishedCall, PipelineLane, StopAsked, ToolCallCollector
from core.records.report import DeliveryReport, PartReport, PartState, SlotRole, summarize
from core.run.monitor import DeliveryWatch, RunMonitor

ROOT = Path(__file__).resolve().parents[2]
HELPER = Source(agent_id="helper", session_id="s-1", depth=1, path="root/helper")


def _wire(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)


HELPER_JSON = (
    '{"agent_id": "helper", "session_id": "s-1", "parent_session_id": null, "depth": 1, "path": "root/helper"}'
)
WIRE = [  # what the lane sent before it held units typed (dicts): the same bytes, key order included
    '{"index": 1, "kind": "tool_call", "run": "r1", "id": "c1", "name": "search", "args": {"q": "x", "n": [1, 2.5, '
    'null, true, 1000000000000000000000000000000], "é": {"ü": "😀"}}, "source": null}',
    '{"index": 2, "kind": "tool_call.malformed", "run": "r1", "id": "c2", "name": "write", "raw": "{\\"pa", '
    f'"error": "arguments cut off by the end of the stream", "source": {HELPER_JSON}}}',
    f'{{"index": 3, "kind": "message", "run": "r1", "status": "ok", "text": "Found it.", "source": {HELPER_JSON}}}',
    f'{{"index": 4, "kind": "agent.failed", "run": "r1", "status": "error", "source": {HELPER_JSON}}}',
    '{"index": 5, "kind": "commit", "run": "r1", "source": null}',
    '{"index": 6, "kind": "stop", "run": "r1", "by": "telegram:user:1", "reason": null, "source": null}',
    '{"index": 7, "kind": "run.end", "run": "r1", "status": "cancelled", "committed": true, "source": null}',
]


def test_every_unit_the_lane_emits_is_of_the_contract_and_round_trips_byte_for_byte() -> None:
    lane = PipelineLane("r1")
    tools = ToolCallCollector()
    args = {"q": "x", "n": [1, 2.5, None, True, 10**30], "é": {"ü": "😀"}}
    call = tools.feed(ToolCall(run="r1", id="c1", name="search", state=ToolCallState.END, args=args))
    assert call is not None
    lane.emit(call)
    tools.feed(ToolCall(run="r1", id="c2", name="write", state=ToolCallState.START, source=HELPER))
    tools.feed(ToolCall(run="r1", id="c2", state=ToolCallState.ARGS_DELTA, args_delta='{"pa', source=HELPER))
    for cut in tools.close():
        lane.emit(cut)
    lane.emit(ChildDone(HELPER, EndStatus.OK, "Found it."))
    lane.emit(ChildDone(HELPER, EndStatus.ERROR, "unchecked text is never a unit"))
    lane.commit()
    lane.emit(StopAsked(by="telegram:user:1", reason=None))
    lane.close("cancelled", committed=True)
    assert [type(u).__name__ for u in lane.units] == [
        "ToolCallUnit",
        "MalformedToolCallUnit",
        "MessageUnit",
        "AgentFailedUnit",
        "CommitUnit",
        "StopUnit",
        "RunEndUnit",
    ]
    wire = [unit.model_dump(mode="json") for unit in lane.units]  # what the HTTP routes send
    assert [_wire(unit) for unit in wire] == WIRE
    for unit, sent in zip(lane.units, wire, strict=True):
        assert check_unit(sent) == unit  # of the contract, strictly; read back, the same typed unit
    malformed = lane.units[1]
    assert isinstance(malformed, MalformedToolCallUnit) and malformed.source == HELPER and malformed.raw == '{"pa'
    assert isinstance(lane.units[5], StopUnit) and lane.units[5].by == "telegram:user:1"
    end = lane.units[-1]
    assert isinstance(end, RunEndUnit) and end.committed and end.status == "cancelled"


def test_a_unit_off_the_contract_never_reaches_the_lane() -> None:
    with pytest.raises(ValueError, match="committed"):
        check_unit({"index": 1, "kind": "run.end", "run": "r", "status": "ok", "commited": True})  # a typo
    with pytest.raises(ValueError, match=r"fields off the contract \['extra'\]: add them to CommitUnit"):
        check_unit({"index": 1, "kind": "commit", "run": "r", "source": None, "extra": 1})
    with pytest.raises(ValueError, match="unit kind 'tool_result' is not in the contract"):
        check_unit({"index": 1, "kind": "tool_result", "run": "r", "id": "c1"})  # not a unit kind
    lane = PipelineLane("r1")
    with pytest.raises(ValidationError, match="name"):
        lane.emit(FinishedCall("c1", 5, None, args={}))  # type: ignore[arg-type]  # a field the contract refuses
    assert lane.units == []


def test_a_reader_skips_what_a_newer_sidecar_adds() -> None:
    unit = parse_unit({"index": 1, "kind": "commit", "run": "r", "source": None, "added_later": 1})
    assert isinstance(unit, CommitUnit)  # the field it does not know is ignored
    other = parse_unit({"index": 2, "kind": "pause", "run": "r", "source": None, "until": 5})
    assert isinstance(other, OtherUnit) and other.kind == "pause" and other.model_dump()["until"] == 5
    event = parse_live_event({"id": 1, "run": "r", "seq": 1, "ts": 1.0, "type": "vote", "up": True})
    assert isinstance(event, OtherLiveEvent) and event.type == "vote"
    with pytest.raises(ValueError, match="live event type 'vote' is not in the contract"):
        check_live_event({"id": 1, "run": "r", "seq": 1, "ts": 1.0, "type": "vote", "up": True})


def test_a_typed_unit_is_frozen() -> None:
    unit = parse_unit({"index": 1, "kind": "tool_call", "run": "r", "id": "c", "name": "n", "args": {}, "source": None})
    assert isinstance(unit, ToolCallUnit)
    with pytest.raises(ValidationError, match="frozen"):
        unit.name = "other"  # type: ignore[misc]


def test_every_live_event_the_monitor_publishes_round_trips_through_its_model() -> None:
    monitor = RunMonitor("r1", wall=lambda: 1700000000.5)
    monitor.publish("run", channel="telegram", platform="telegram", mode="preview")
    monitor.publish("phase", name="planning", source=None)
    monitor.publish("status", text="Looking", source=HELPER.model_dump())
    monitor.publish("tool_call", call_id="c1", name="search", args='{"q": …}', malformed=False, source=None)
    monitor.publish("tool_result", call_id="c1", name="search", summary="3 hits", source=None)
    monitor.publish("decision", what="gate", call_id="c1", name="search", verdict="run", reason="idempotent")
    monitor.publish("decision", what="commit")
    monitor.answer_delta("Hel")
    monitor.answer_delta("lo")  # merged into the event above
    monitor.publish("agent", key="s-1", source=HELPER.model_dump(), state="started", delta="Hi")
    monitor.publish("delivery", channel="telegram", part=0, role="answer", state="retrying", message_id=None,
                    retry_after_s=1.5)  # fmt: skip
    monitor.publish("delivery", channel="telegram", part=0, role="answer", state="sent", message_id="11")
    web = DeliveryWatch(monitor, "web", live_text=True)  # the web channel: the part's text goes too
    web({"part": 0, "role": "answer", "state": "sent", "message_id": "w1", "text": "Hel"})
    web({"part": 0, "role": "answer", "state": "edited", "message_id": "w1", "text": "Hello"})  # as an append
    monitor.publish("media", url="https://example.com/a.png", media_kind="image", caption="")
    monitor.publish("decision", what="stop", reason="stopped by the reader (web)")
    monitor.publish("error", message="the tool failed", source=None)
    monitor.publish("answer", text="Hello", reset=True, final=True)
    monitor.publish("end", status="ok", delivery="delivered")
    raw = monitor.since(0)
    events = [parse_live_event(event) for event in raw]
    assert isinstance(events[0], RunOpened) and isinstance(events[-1], EndLiveEvent)
    for event, typed in zip(raw, events, strict=True):
        assert _wire(typed.model_dump(mode="json", exclude_unset=True)) == _wire(event)
    answer = next(e for e in events if isinstance(e, AnswerEvent))
    assert answer.delta == "Hello" and answer.text is None
    retry = next(e for e in events if isinstance(e, DeliveryEvent))
    assert retry.retry_after_s == 1.5 and retry.role is SlotRole.ANSWER
    reset = parse_live_event(monitor.reset())
    assert isinstance(reset, ResetEvent) and reset.state.answer == "Hello" and reset.state.ended == "ok"
    assert reset.state.agents["s-1"].text == "Hi" and reset.state.rate_limited == 1
    appended = [e for e in events if isinstance(e, DeliveryEvent) and e.channel == "web"]
    assert [(e.text, e.append) for e in appended] == [("Hel", None), (None, "lo")]
    assert reset.state.parts["web/0"]["text"] == "Hello"


def test_the_run_report_reader_model_has_the_sidecar_report_fields_in_order() -> None:
    assert list(RunReport.model_fields) == list(DeliveryReport.model_fields)
    parts = [PartReport(slot=0, role=SlotRole.ANSWER, state=PartState.ACKED, message_id="11", chars=5)]
    report = summarize("r1", "telegram", parts, done=True, end_status="ok")
    wire = report.model_dump(mode="json")
    typed = RunReport.model_validate(wire)
    assert _wire(typed.model_dump(mode="json")) == _wire(wire) and typed.status == "delivered"


def test_the_committed_schemas_are_the_models() -> None:
    behind = stale(SCHEMA_DIR)
    assert behind == [], f"docs/schema is stale ({behind}): run `uv run streamrelay schema --out docs/schema`"
    unit = json.loads((SCHEMA_DIR / "pipeline-unit.schema.json").read_text(encoding="utf-8"))
    kinds = {unit["$defs"][one["$ref"].rsplit("/", 1)[1]]["properties"]["kind"].get("const") for one in unit["oneOf"]}
    assert kinds == {"tool_call", "tool_call.malformed", "message", "agent.failed", "commit", "stop", "run.end", None}
    assert "additionalProperties" not in unit["$defs"]["CommitUnit"]  # a newer sidecar's field is no error


def test_a_stale_schema_file_is_named(tmp_path: Path) -> None:
    for name, schema in schemas().items():
        (tmp_path / name).write_text(rendered(schema), encoding="utf-8")
    (tmp_path / "run-report.schema.json").write_text("{}\n", encoding="utf-8")
    (tmp_path / "watch-link.schema.json").unlink()
    assert stale(tmp_path) == ["run-report.schema.json", "watch-link.schema.json"]


@pytest.mark.timeout(300)
def test_mypy_refuses_a_field_a_unit_does_not_have(tmp_path: Path) -> None:
    snippet = tmp_path / "loop.py"
    snippet.write_text(
        textwrap.dedent(
            """
            from app.client import RelayClient
            from core.contracts.units import ToolCallUnit


            async def loop(relay: RelayClient) -> None:
                for unit in await relay.units("r1"):
                    if isinstance(unit, ToolCallUnit):
                        print(unit.nmae)
                    print(unit.args)
            """
        )
    )
    out, _, status = mypy_api.run(["--config-file", str(ROOT / "pyproject.toml"), str(snippet)])
    assert status == 1, out
    assert '"ToolCallUnit" has no attribute "nmae"' in out
    assert 'Item "CommitUnit" of' in out and 'has no attribute "args"' in out  # only a tool call has args
