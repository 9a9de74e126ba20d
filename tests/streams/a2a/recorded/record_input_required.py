# mypy: ignore-errors
"""Writes input-required.jsonl: an A2A ``message/stream`` that ends waiting for the person, as the a2a-sdk 1.3.0
types put it on the wire (its protobuf messages as JSON: ``StreamResponse`` objects, ``TASK_STATE_*``, camelCase).

Not a test (a2a-sdk is not a dependency):
``uv run --no-project --with a2a-sdk==1.3.0 python tests/streams/a2a/recorded/record_input_required.py``.
The shapes are the SDK's own (``a2a.types``, generated from the A2A spec's ``a2a.proto``,
https://a2a-protocol.org/latest/specification/ §6.3 "input-required").
"""

from pathlib import Path

from a2a.types import Message, Part, Role, StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent
from google.protobuf import json_format, struct_pb2

TASK, CONTEXT = "5b8e9f62-refund-task", "ctx-1029"


def data(value: dict) -> struct_pb2.Value:
    out = struct_pb2.Value()
    out.struct_value.update(value)
    return out


def status(state: int, message: Message | None = None) -> StreamResponse:
    update = TaskStatusUpdateEvent(task_id=TASK, context_id=CONTEXT, status=TaskStatus(state=state, message=message))
    return StreamResponse(status_update=update)


lines = [
    StreamResponse(task=Task(id=TASK, context_id=CONTEXT, status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))),
    status(
        TaskState.TASK_STATE_WORKING,
        Message(message_id="m-1", role=Role.ROLE_AGENT, parts=[Part(text="Looking up order A-1029")]),
    ),
    status(
        TaskState.TASK_STATE_INPUT_REQUIRED,
        Message(
            message_id="m-2",
            task_id=TASK,
            context_id=CONTEXT,
            role=Role.ROLE_AGENT,
            parts=[
                Part(text="Refund 49.99 EUR for order A-1029?"),
                Part(data=data({"tool": "refund", "args": {"order": "A-1029", "amount": 49.99}})),
            ],
        ),
    ),
]
out = Path(__file__).with_name("input-required.jsonl")
out.write_text("".join(json_format.MessageToJson(line, indent=None) + "\n" for line in lines), encoding="utf-8")
print(out)
