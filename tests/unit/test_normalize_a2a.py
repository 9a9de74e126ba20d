"""A2A ``message/stream`` results → normalized events: artifacts streamed in chunks (append / lastChunk), status
updates, messages, referenced tasks as children, the JSON-RPC envelope and the StreamResponse wrapper, malformed
results refused, unknown kinds ignored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    ApprovalRequest,
    End,
    EndStatus,
    ErrorEvent,
    Event,
    Media,
    MessageEnd,
    Source,
    Status,
    TextEvent,
    TextMode,
)
from streamrelay.core.media import MediaKind
from streamrelay.core.normalize import A2ANormalizer

RUN = "r"
LONE = "\ud800"


def feed(*raws: dict[str, Any], close: bool = True) -> list[Event]:
    normalizer = A2ANormalizer(RUN)
    events = [e for raw in raws for e in normalizer.feed(raw)]
    return events + (normalizer.close() if close else [])


def rpc(result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "result": result}


def task(task_id: str, state: str = "submitted") -> dict[str, Any]:
    return {"kind": "task", "id": task_id, "contextId": "c", "status": {"state": state}}


def status(task_id: str, state: str, text: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"state": state}
    if text is not None:
        body["message"] = {
            "kind": "message",
            "role": "agent",
            "messageId": "m",
            "parts": [{"kind": "text", "text": text}],
        }
        body["message"].update(extra)
    return {"kind": "status-update", "taskId": task_id, "contextId": "c", "status": body, "final": False}


def chunk(task_id: str, text: str, *, artifact: str = "a1", append: bool = False, last: bool = False) -> dict[str, Any]:
    parts = [{"kind": "text", "text": text}]
    return {
        "kind": "artifact-update",
        "taskId": task_id,
        "contextId": "c",
        "artifact": {"artifactId": artifact, "parts": parts},
        "append": append,
        "lastChunk": last,
    }


def answer(events: list[Event], source: Source | None = None) -> list[tuple[int, TextMode, str]]:
    return [(e.message, e.mode, e.text) for e in events if isinstance(e, TextEvent) and e.source == source]


def test_an_artifact_streamed_in_chunks_is_one_message_ended_at_its_last_chunk() -> None:
    events = feed(
        rpc(task("t1")),
        rpc(chunk("t1", "Hello")),
        rpc(chunk("t1", ", wor", append=True)),
        rpc(chunk("t1", "ld", append=True, last=True)),
        rpc(chunk("t1", "Second artifact", artifact="a2", last=True)),
    )
    assert answer(events) == [
        (0, TextMode.DELTA, "Hello"),
        (0, TextMode.DELTA, ", wor"),
        (0, TextMode.DELTA, "ld"),
        (1, TextMode.DELTA, "Second artifact"),
    ]
    assert [e.message for e in events if isinstance(e, MessageEnd)] == [0, 1]


def test_an_artifact_sent_again_without_append_replaces_its_text() -> None:
    events = feed(rpc(chunk("t1", "Draft")), rpc(chunk("t1", "Final text")), rpc(chunk("t1", "Final text")))
    assert answer(events) == [(0, TextMode.DELTA, "Draft"), (0, TextMode.REPLACE, "Final text")]


def test_status_updates_working_is_status_input_required_is_an_approval_failed_is_error() -> None:
    events = feed(
        rpc(task("t1")),
        rpc(status("t1", "working", "Looking it up")),
        rpc(status("t1", "working")),
        rpc(status("t1", "input-required", "Which city do you mean?")),
        rpc(status("t1", "TASK_STATE_FAILED", "backend down")),
    )
    assert [e for e in events if isinstance(e, Status)] == [Status(run=RUN, text="Looking it up")]
    asked = [e for e in events if isinstance(e, ApprovalRequest)]
    assert [(e.id, e.question, e.action, e.ttl_s, e.on_expiry) for e in asked] == [
        ("m", "Which city do you mean?", None, 600.0, "denied")
    ]
    assert answer(events) == []  # the question is the approval's message, not the answer
    assert [e.message for e in events if isinstance(e, ErrorEvent)] == ["backend down"]
    assert not [e for e in events if isinstance(e, End)]  # the root's end is the runtime's own end line


def test_completed_message_is_the_answer_only_when_no_artifact_text_came() -> None:
    only_status = feed(rpc(task("t1")), rpc(status("t1", "completed", "Done: 42.")))
    assert answer(only_status) == [(0, TextMode.DELTA, "Done: 42.")]
    with_artifact = feed(rpc(chunk("t1", "The answer is 42.", last=True)), rpc(status("t1", "completed", "Done.")))
    assert answer(with_artifact) == [(0, TextMode.DELTA, "The answer is 42.")]


def test_an_agent_message_is_a_whole_answer_message_and_user_messages_are_not() -> None:
    user = {"kind": "message", "role": "user", "messageId": "u", "parts": [{"kind": "text", "text": "hi"}]}
    agent = {"kind": "message", "role": "agent", "messageId": "a", "parts": [{"kind": "text", "text": "Hello!"}]}
    events = feed(rpc(user), rpc(agent))
    assert answer(events) == [(0, TextMode.DELTA, "Hello!")]
    assert [type(e) for e in events] == [TextEvent, MessageEnd]


def test_referenced_tasks_are_children_with_depth_and_path() -> None:
    events = feed(
        rpc(task("main")),
        rpc(status("main", "working", "Delegating", referenceTaskIds=["sub"])),
        rpc(status("sub", "working", "Nested work", referenceTaskIds=["subsub"])),
        rpc(chunk("subsub", "leaf result", last=True)),
        rpc(status("subsub", "completed")),
        rpc(chunk("sub", "sub result", last=True)),
        rpc(status("sub", "canceled")),
        rpc(status("other", "rejected", "not allowed")),
        rpc(chunk("main", "Main answer", last=True)),
    )
    sub = Source(agent_id="sub", session_id="sub", parent_session_id="main", depth=1, path="main/sub")
    subsub = Source(agent_id="subsub", session_id="subsub", parent_session_id="sub", depth=2, path="main/sub/subsub")
    other = Source(agent_id="other", session_id="other", parent_session_id="main", depth=1, path="main/other")
    assert answer(events, subsub) == [(0, TextMode.DELTA, "leaf result")]
    assert answer(events, sub) == [(0, TextMode.DELTA, "sub result")]
    assert answer(events) == [(0, TextMode.DELTA, "Main answer")]
    ends = [(e.source, e.status) for e in events if isinstance(e, End)]
    assert ends == [(subsub, EndStatus.OK), (sub, EndStatus.CANCELLED), (other, EndStatus.ERROR)]
    assert [e.source for e in events if isinstance(e, ErrorEvent)] == [other]


def test_bare_results_and_stream_response_wrappers_read_like_the_envelope() -> None:
    lines = [task("t1"), chunk("t1", "Hi", last=True)]
    wrapped: list[dict[str, Any]] = [
        {"task": {"id": "t1", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}},
        {
            "artifactUpdate": {
                "taskId": "t1",
                "artifact": {"artifactId": "a1", "parts": [{"text": "Hi"}]},
                "lastChunk": True,
            }
        },
    ]
    expected = feed(*[rpc(line) for line in lines])
    assert feed(*lines) == expected
    assert feed(*wrapped) == expected


def test_file_parts_with_a_uri_are_media_inline_files_a_note_and_data_parts_ignored() -> None:
    parts = [
        {"kind": "file", "file": {"uri": "https://example.com/chart.png", "mimeType": "image/png", "name": "c"}},
        {"kind": "file", "file": {"bytes": "aGVsbG8=", "mimeType": "text/plain"}},
        {"kind": "data", "data": {"total": 3}},
    ]
    events = feed(rpc({"kind": "artifact-update", "taskId": "t", "artifact": {"artifactId": "f", "parts": parts}}))
    assert events == [
        Media(run=RUN, url="https://example.com/chart.png", media_kind=MediaKind.IMAGE),
        Status(run=RUN, text="file not shown: not given by an http(s) link"),  # never dropped silently
    ]


def test_a_json_rpc_error_is_an_error_event() -> None:
    error = {"jsonrpc": "2.0", "id": 7, "error": {"code": -32001, "message": "Task not found"}}
    assert feed(error) == [ErrorEvent(run=RUN, message="-32001: Task not found", ends=EndStatus.ERROR)]


def test_unknown_result_kinds_are_ignored() -> None:
    assert feed(rpc({"kind": "push-notification-config", "taskId": "t"})) == []


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"jsonrpc": "2.0", "id": 1}, "needs a 'result' object or an 'error' object"),
        ({"foo": 1}, "needs a string 'kind'"),
        (rpc({"kind": "status-update", "status": {"state": "working"}}), "needs a non-empty string 'taskId'"),
        (rpc({"kind": "status-update", "taskId": "t", "status": "working"}), "needs a 'status' object"),
        (rpc({"kind": "artifact-update", "taskId": "t", "artifact": {"parts": "x"}}), "with a 'parts' list"),
        (rpc({"kind": "message", "role": "agent"}), "message needs a 'parts' list"),
        (rpc({"kind": "task", "status": {"state": "working"}}), "task event needs a non-empty string 'id'"),
    ],
)
def test_malformed_results_are_refused_with_what_was_wrong(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(IngestError, match=message):
        A2ANormalizer(RUN).feed(raw)


def test_a_referenced_task_id_with_a_lone_surrogate_is_a_400() -> None:
    normalizer = A2ANormalizer(RUN)
    normalizer.feed(rpc(task("main")))
    with pytest.raises(IngestError) as refused:
        normalizer.feed(rpc(chunk(LONE, "x")))
    assert refused.value.status == 400
    assert "makes no valid event" in str(refused.value) and "lone surrogate U+D800" in str(refused.value)


def test_an_artifact_after_the_final_status_update_is_reported_not_edited_into_the_answer() -> None:
    """A2A: ``final: true`` marks the end of the task's stream (issue 26, item 9)."""
    artifact = {"artifactId": "a", "parts": [{"kind": "text", "text": "late"}]}
    events = feed(
        rpc({"kind": "artifact-update", "taskId": "t", "artifact": {**artifact, "parts": [{"text": "Answer."}]}}),
        rpc({"kind": "status-update", "taskId": "t", "final": True, "status": {"state": "completed"}}),
        rpc({"kind": "artifact-update", "taskId": "t", "artifact": artifact}),
    )
    assert [e.text for e in events if isinstance(e, TextEvent)] == ["Answer."]
    assert [e.text for e in events if isinstance(e, Status)] == [
        "not shown: a: an artifact update after the task's final status update"
    ]
    assert [e.message for e in events if isinstance(e, ErrorEvent)] == [
        "not shown: a: an artifact update after the task's final status update"
    ]


def test_input_required_from_the_a2a_sdk_is_an_approval() -> None:
    """tests/streams/a2a/recorded/input-required.jsonl (a2a-sdk 1.3.0's own wire JSON): the input-required status's
    question and data part become one approval.request (id its message id); fed again, nothing more is asked."""
    path = Path(__file__).parents[1] / "streams" / "a2a" / "recorded" / "input-required.jsonl"
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    normalizer = A2ANormalizer(RUN)
    events = [e for line in lines for e in normalizer.feed(line)]
    asked = [e for e in events if isinstance(e, ApprovalRequest)]
    assert [(e.id, e.question, e.action) for e in asked] == [
        ("m-2", "Refund 49.99 EUR for order A-1029?", '{"tool":"refund","args":{"amount":49.99,"order":"A-1029"}}')
    ]
    assert [e.text for e in events if isinstance(e, Status)] == ["Looking up order A-1029"]
    assert normalizer.feed(lines[-1]) == []  # the same status again (a resubscribe): asked once
    bare: dict[str, Any] = {"statusUpdate": {"taskId": "t9", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}}
    again = A2ANormalizer(RUN)
    first = [e for e in again.feed(bare) if isinstance(e, ApprovalRequest)]
    assert [(e.id, e.question) for e in first] == [("t9:1", "The agent needs your input to go on.")]
    assert again.feed(bare) == []  # still waiting: no second approval
    again.feed({"statusUpdate": {"taskId": "t9", "status": {"state": "TASK_STATE_WORKING"}}})
    assert [e.id for e in again.feed(bare) if isinstance(e, ApprovalRequest)] == ["t9:2"]
