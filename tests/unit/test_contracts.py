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

from streamrelay.app.schema import SCHEMA_DIR, rendered, schemas, stale
from streamrelay.core.contracts.live import (
    AnswerEvent,
    DeliveryEvent,
    EndLiveEvent,
    OtherLiveEvent,
    ResetEvent,
    RunOpened,
    check_live_event,
    parse_live_event,
)
from streamrelay.core.contracts.report import RunReport
from streamrelay.core.contracts.units import (
    CommitUnit,
    MalformedToolCallUnit,
    OtherUnit,
    RunEndUnit,
    StopUnit,
    ToolCallUnit,
    check_unit,
    parse_unit,
)
from streamrelay.core.events import EndStatus, Source, ToolCall, ToolCallState
from streamrelay.core.lanes.pipeline import ChildDone, FinishedCall, PipelineLane, StopAsked, ToolCallCollector
from streamrelay.core.records.ledger import MemoryLedger
from streamrelay.core.records.report import DeliveryReport, PartReport, PartState, SlotRole, summarize
from streamrelay.core.run.finished import finished_record
from streamrelay.core.run.monitor import DeliveryWatch, RunMonitor

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
    raw = [event.wire() for event in monitor.since(0)]
    events = [parse_live_event(event) for event in raw]
    assert isinstance(events[0], RunOpened) and isinstance(events[-1], EndLiveEvent)
    for event, typed in zip(raw, events, strict=True):  # key order: LIVE_WIRE (a gate's reason comes second there)
        assert typed.model_dump(mode="json", exclude_unset=True) == event
    answer = next(e for e in events if isinstance(e, AnswerEvent))
    assert answer.delta == "Hello" and answer.text is None
    retry = next(e for e in events if isinstance(e, DeliveryEvent))
    assert retry.retry_after_s == 1.5 and retry.role is SlotRole.ANSWER
    reset = parse_live_event(monitor.reset().wire())
    assert isinstance(reset, ResetEvent) and reset.state.answer == "Hello" and reset.state.ended == "ok"
    assert reset.state.agents["s-1"].text == "Hi" and reset.state.rate_limited == 1
    appended = [e for e in events if isinstance(e, DeliveryEvent) and e.channel == "web"]
    assert [(e.text, e.append) for e in appended] == [("Hel", None), (None, "lo")]
    assert reset.state.parts["web/0"]["text"] == "Hello"


def _head(n: int) -> str:
    return f'{{"id": {n}, "run": "r1", "seq": {n}, "ts": 1700000000.5, '


LIVE_WIRE = [  # what the monitor sent before it held live events typed (dicts): the same bytes, key order included
    _head(1) + ('"type": "run", "channel": "telegram", "platform": "telegram", "mode": "preview"}'),
    _head(2) + ('"type": "phase", "name": "planning", "source": null}'),
    _head(3) + ('"type": "status", "text": "Looking", "source": ') + HELPER_JSON + "}",
    _head(4)
    + (
        '"type": "tool_call", "call_id": "c1", "name": "search", "args": "{\\"q\\": …}", "malformed": false'
        ', "source": null}'
    ),
    _head(5)
    + ('"type": "tool_result", "call_id": "c1", "name": "search", "summary": "3 hits", "source": ')
    + HELPER_JSON
    + "}",
    _head(6)
    + (
        '"type": "decision", "what": "gate", "reason": "idempotent", "call_id": "c1", "name": "search", "'
        'verdict": "run"}'
    ),
    _head(7) + ('"type": "decision", "what": "commit"}'),
    _head(8) + ('"type": "answer", "delta": "Hello ✓"}'),
    _head(9) + ('"type": "agent", "key": "s-1", "source": ') + HELPER_JSON + (', "state": "started", "delta": "Hi"}'),
    _head(10)
    + ('"type": "agent", "key": "s-1", "source": ')
    + HELPER_JSON
    + (', "state": "done", "text": "Hi there", "reset": true}'),
    _head(11)
    + (
        '"type": "delivery", "channel": "telegram", "part": 0, "role": "answer", "state": "retrying", "me'
        'ssage_id": null, "retry_after_s": 1.5}'
    ),
    _head(12)
    + ('"type": "delivery", "channel": "telegram", "part": 0, "role": "answer", "state": "sent", "message_id": "11"}'),
    _head(13)
    + (
        '"type": "delivery", "channel": "telegram", "part": 1, "role": "answer", "state": "failed", "mess'
        'age_id": null, "reason": "too long"}'
    ),
    _head(14)
    + (
        '"type": "delivery", "channel": "web", "part": 0, "role": "answer", "state": "sent", "message_id"'
        ': "w1", "text": "Hel"}'
    ),
    _head(15)
    + (
        '"type": "delivery", "channel": "web", "part": 0, "role": "answer", "state": "edited", "message_i'
        'd": "w1", "append": "lo"}'
    ),
    _head(16) + ('"type": "media", "url": "https://example.com/a.png", "media_kind": "image", "caption": ""}'),
    _head(17) + ('"type": "decision", "what": "stop", "reason": "stopped by the reader (web)"}'),
    _head(18) + ('"type": "error", "message": "the tool failed", "source": null}'),
    _head(19) + ('"type": "answer", "text": "Hello ✓", "reset": true, "final": true}'),
    _head(20) + ('"type": "end", "status": "ok", "delivery": "delivered"}'),
    _head(20)
    + (
        '"type": "reset", "state": {"run": "r1", "channel": "telegram", "platform": "telegram", "mode": "'
        'preview", "started_at": 1700000000.5, "rate_limited": 1, "final": true, "ended": "ok", "delivery'
        '": "delivered", "answer": "Hello ✓", "agents": {"s-1": {"source": '
    )
    + HELPER_JSON
    + (
        ', "state": "done", "text": "Hi there"}}, "parts": {"telegram/0": {"channel": "telegram", "part":'
        ' 0, "role": "answer", "state": "sent", "message_id": "11", "retry_after_s": 1.5}, "telegram/1": '
        '{"channel": "telegram", "part": 1, "role": "answer", "state": "failed", "message_id": null, "rea'
        'son": "too long"}, "web/0": {"channel": "web", "part": 0, "role": "answer", "state": "edited", "'
        'message_id": "w1", "text": "Hello"}}, "timeline": [{"id": 2, "run": "r1", "seq": 2, "ts": 170000'
        '0000.5, "type": "phase", "name": "planning", "source": null}, {"id": 3, "run": "r1", "seq": 3, "'
        'ts": 1700000000.5, "type": "status", "text": "Looking", "source": '
    )
    + HELPER_JSON
    + (
        '}, {"id": 4, "run": "r1", "seq": 4, "ts": 1700000000.5, "type": "tool_call", "call_id": "c1", "n'
        'ame": "search", "args": "{\\"q\\": …}", "malformed": false, "source": null}, {"id": 5, "run": "r1"'
        ', "seq": 5, "ts": 1700000000.5, "type": "tool_result", "call_id": "c1", "name": "search", "summa'
        'ry": "3 hits", "source": '
    )
    + HELPER_JSON
    + (
        '}, {"id": 6, "run": "r1", "seq": 6, "ts": 1700000000.5, "type": "decision", "what": "gate", "rea'
        'son": "idempotent", "call_id": "c1", "name": "search", "verdict": "run"}, {"id": 7, "run": "r1",'
        ' "seq": 7, "ts": 1700000000.5, "type": "decision", "what": "commit"}, {"id": 17, "run": "r1", "s'
        'eq": 17, "ts": 1700000000.5, "type": "decision", "what": "stop", "reason": "stopped by the reade'
        'r (web)"}, {"id": 18, "run": "r1", "seq": 18, "ts": 1700000000.5, "type": "error", "message": "t'
        'he tool failed", "source": null}]}}'
    ),
]


def _live_run() -> RunMonitor:
    """Every event type the producers publish, their fields in the producers' order."""
    m = RunMonitor("r1", wall=lambda: 1700000000.5)
    m.publish("run", channel="telegram", platform="telegram", mode="preview")
    m.publish("phase", name="planning", source=None)
    m.publish("status", text="Looking", source=HELPER.model_dump())
    m.publish("tool_call", call_id="c1", name="search", args='{"q": …}', malformed=False, source=None)
    m.publish("tool_result", call_id="c1", name="search", summary="3 hits", source=HELPER.model_dump())
    m.publish("decision", what="gate", reason="idempotent", call_id="c1", name="search", verdict="run")
    m.publish("decision", what="commit")
    m.answer_delta("Hel")
    m.answer_delta("lo ✓")
    m.publish("agent", key="s-1", source=HELPER.model_dump(), state="started", delta="Hi")
    m.publish("agent", key="s-1", source=HELPER.model_dump(), state="done", text="Hi there", reset=True)
    m.publish(
        "delivery", channel="telegram", part=0, role="answer", state="retrying", message_id=None, retry_after_s=1.5
    )
    m.publish("delivery", channel="telegram", part=0, role="answer", state="sent", message_id="11")
    m.publish("delivery", channel="telegram", part=1, role="answer", state="failed", message_id=None, reason="too long")
    web = DeliveryWatch(m, "web", live_text=True)
    web({"part": 0, "role": "answer", "state": "sent", "message_id": "w1", "text": "Hel"})
    web({"part": 0, "role": "answer", "state": "edited", "message_id": "w1", "text": "Hello"})
    m.publish("media", url="https://example.com/a.png", media_kind="image", caption="")
    m.publish("decision", what="stop", reason="stopped by the reader (web)")
    m.publish("error", message="the tool failed", source=None)
    m.publish("answer", text="Hello ✓", reset=True, final=True)
    m.publish("end", status="ok", delivery="delivered")
    return m


async def test_the_live_events_on_the_wire_are_the_bytes_they_were_as_dicts() -> None:
    monitor = _live_run()
    sent = [_wire(event.wire()) for event in monitor.since(0)]
    assert [*sent, _wire(monitor.reset().wire())] == LIVE_WIRE
    report = DeliveryReport(run="r1", channel="telegram")
    finished = finished_record(report, PipelineLane("r1"), monitor.record(), None, MemoryLedger(), None)
    kept = await finished.monitor.wait(monitor.last_id - 3)  # a finished run's last events: read back, same bytes
    assert [_wire(event.wire()) for event in kept] == LIVE_WIRE[-4:-1]


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
    assert kinds == {
        "tool_call",
        "tool_call.malformed",
        "message",
        "agent.failed",
        "commit",
        "stop",
        "approval",
        "run.end",
        None,
    }
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
            from streamrelay.app.client import RelayClient
            from streamrelay.core.contracts.units import ToolCallUnit


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
