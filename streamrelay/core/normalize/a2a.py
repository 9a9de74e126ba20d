"""A2A streaming responses (``message/stream``, ``tasks/resubscribe``) → normalized events.

Source: https://a2a-protocol.org/latest/specification/ (§7.2 ``message/stream``: each SSE ``data:`` line is a
JSON-RPC response whose ``result`` is a ``Task``, a ``Message``, a ``TaskStatusUpdateEvent`` or a
``TaskArtifactUpdateEvent``; the JSON Schema in a2aproject/A2A ``specification/json/a2a.json``).

Accepted shapes of one line: the JSON-RPC envelope ``{"jsonrpc": "2.0", "id": .., "result": {..}}`` (an
``error`` member instead of ``result`` is an ``ErrorEvent`` that ends the run ``error``), the bare result object
(told apart by ``kind``:
``task``, ``message``, ``status-update``, ``artifact-update``), and the same objects wrapped as the gRPC/REST
``StreamResponse`` (``{"task": ..}``, ``{"message": ..}``, ``{"statusUpdate": ..}``, ``{"artifactUpdate": ..}``,
states spelled ``TASK_STATE_WORKING``).

Mapping (``message`` = 0-based index per task: each artifact, and each agent message, is one assistant message):

===========================================================  ================================================
raw                                                          normalized
===========================================================  ================================================
artifact ``text`` parts (``append`` true: appended to the     ``TextEvent`` answer delta (a repeated
artifact with the same ``artifactId``)                       ``artifactId`` without ``append``: ``replace``)
``lastChunk`` true                                           ``MessageEnd`` of the artifact's message
artifact ``file`` part with a ``uri``                         ``Media`` (``media_kind`` from ``mimeType``; a
                                                             file inline or not http(s): a ``Status`` that
                                                             it was not shown)
``Message`` (role ``agent``) text parts                       ``TextEvent`` answer, ``MessageEnd``
status ``working`` / ``submitted`` with a message             ``Status`` (the message's text)
status ``input-required``                                    ``ApprovalRequest`` (docs/approvals.md): the
                                                             message's text the question, its ``data`` parts
                                                             (compact JSON) the action, id the message's
                                                             ``messageId`` (else ``<taskId>:<n>``); the same
                                                             status message again asks nothing
status ``auth-required``                                      the message's text as answer (a question to
                                                             the person), ``MessageEnd``
status ``completed``                                         its message as answer when the task streamed no
                                                             artifact text; the open message ends
status ``failed`` / ``rejected``                              ``ErrorEvent`` (the message's text); of the main
                                                             task, it ends the run ``error`` / ``refused``
                                                             (the agent declined the task)
status ``canceled``                                          ``Status`` ``canceled``
a status update with ``final: true``                         as its state says; the task's stream is over:
                                                             a later artifact update of the task is a
                                                             "not shown" status and report line, never
                                                             edited into the answer
===========================================================  ================================================

An ``input-required`` task waits for the person (spec §6.3, "TaskState": the client answers with a message to the same
``taskId``). The sidecar offers the person Approve and Deny (it reads no platform replies): the agent's client reads
the ``approval`` unit (``RelayClient.wait_approval``) and sends the A2A follow-up message saying the decision. A
question that wants typed input (``Which city do you mean?``) is shown the same way; who may decide is the
channel's (``approvers`` / ``approvals_anyone``), the expiry 10 minutes, then denied.

Referenced tasks: the first task id seen is the run's main task (the root agent). Another task (one a message
or task names in ``referenceTaskIds``, or any other ``taskId``) is a sub-agent: ``source`` = ``agent_id`` and
``session_id`` the task id, ``parent_session_id`` the task that referenced it (else the main task), ``depth``
one below it, ``path`` ``main task/.../task``; its terminal state is its ``End`` (``completed`` ok, ``failed`` /
``rejected`` error, ``canceled`` cancelled).

Ignored: ``data`` parts (structured data, not text), a task's ``history`` (the conversation so far, already
seen), user messages, ``metadata``, and result objects of an unknown ``kind``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    End,
    EndStatus,
    ErrorEvent,
    Event,
    MessageEnd,
    Source,
    Status,
    TextEvent,
    TextMode,
    Visibility,
)
from streamrelay.core.normalize.base import (
    JsonObject,
    MessageCounter,
    approval_event,
    as_dict,
    as_str,
    invalid_event,
    media_event,
    one_line,
    require_object,
    require_str,
    text_event,
)
from streamrelay.core.normalize.ends import not_shown, stream_failed
from streamrelay.core.normalize.meanings import EventTable, table, undeclared
from streamrelay.core.normalize.meanings import Meaning as M

_PROVIDER = "A2A"
_WRAPPERS = {"task": "task", "message": "message", "statusUpdate": "status-update", "artifactUpdate": "artifact-update"}
_ENDED = {"completed": EndStatus.OK, "failed": EndStatus.ERROR, "rejected": EndStatus.ERROR}
_ENDED["canceled"] = EndStatus.CANCELLED
_QUESTIONS = frozenset({"auth-required"})


@dataclass
class _Task:
    """One task's text state (the main task's is the root's)."""

    source: Source | None
    messages: MessageCounter = field(default_factory=MessageCounter)
    artifacts: dict[str, int] = field(default_factory=dict)
    """``artifactId`` → its message index."""
    texts: dict[str, str] = field(default_factory=dict)
    """``artifactId`` → its text so far (a non-appending repeat replaces it)."""
    ended: bool = False
    asked: set[str] = field(default_factory=set)
    """Approval ids its ``input-required`` statuses asked (a status message seen again asks nothing)."""
    waiting: bool = False
    """Its last state was ``input-required`` (a bare repeat of it, without a message id, asks nothing)."""
    final: bool = False
    """A status update with ``final: true`` came: the task's stream is over, a later artifact is not its answer."""


def _state(status: JsonObject) -> str:
    """A task state in the JSON-RPC spelling (``TASK_STATE_INPUT_REQUIRED`` → ``input-required``)."""
    state = as_str(status.get("state")).lower()
    return state.removeprefix("task_state_").replace("_", "-").replace("cancelled", "canceled")


def _parts_text(parts: Any) -> str:
    """The text parts of a message or artifact, joined (``kind`` ``text``, or a part holding a ``text`` string).

    Raises:
        IngestError: ``parts`` is given but not a list, or a text part's ``text`` is not a string (it would be
            dropped silently).
    """
    if parts is None:
        return ""
    if not isinstance(parts, list):
        raise IngestError(f"a raw {_PROVIDER} message's 'parts' must be a list, got {type(parts).__name__}")
    texts = [p for p in parts if isinstance(p, dict) and as_str(p.get("kind")) in ("", "text") and "text" in p]
    for part in texts:
        if not isinstance(part["text"], str):
            raise IngestError(
                f"a raw {_PROVIDER} text part's 'text' must be a string, got {type(part['text']).__name__}"
            )
    return "".join(p["text"] for p in texts)


def _files(parts: list[Any]) -> list[tuple[str, str]]:
    """``(uri, mime type)`` of each file part; ``uri`` is ``""`` for a file given inline (``bytes``, ``raw``)."""
    out = []
    for part in parts:
        body = as_dict(part)
        file = as_dict(body.get("file"))
        if as_str(body.get("kind")) != "file" and not file and "url" not in body and "raw" not in body:
            continue
        uri = as_str(file.get("uri")) or as_str(file.get("fileWithUri")) or as_str(body.get("url"))
        mime = as_str(file.get("mimeType")) or as_str(file.get("mediaType")) or as_str(body.get("mediaType"))
        out.append((uri, mime))
    return out


RESULT_KINDS = frozenset({"task", "message", "status-update", "artifact-update"})
"""The ``kind`` of a bare A2A result object: a line of an ``a2a`` run with one of these is a raw A2A event, not a
normalized one (no normalized event kind is spelled so)."""


class A2ANormalizer:
    """Normalizes one A2A stream: the main task, its status and artifacts, and the tasks it references.

    Args:
        run_id: the run the events belong to (``run`` of every event).
    """

    def __init__(self, run_id: str) -> None:
        self._run = run_id
        self._main: str | None = None
        self._tasks: dict[str, _Task] = {}
        self._parents: dict[str, str] = {}
        self._root = _Task(None)

    def feed(self, raw: JsonObject) -> list[Event]:
        """Normalize one line. See :class:`core.normalize.base.Normalizer`.

        Raises:
            IngestError: the line is not an object, is a JSON-RPC envelope without ``result`` or ``error``, is
                neither a known result (``kind``) nor a ``StreamResponse`` wrapper, or a known result lacks what
                it needs (a task ``id`` / ``taskId``, a ``status`` object, an ``artifact`` with a ``parts`` list).
        """
        obj = require_object(raw, _PROVIDER)
        if "jsonrpc" in obj or "result" in obj:
            if isinstance(error := obj.get("error"), dict):
                text = ": ".join(p for p in (str(error.get("code", "")), as_str(error.get("message"))) if p)
                return [stream_failed(self._run, text or "A2A error")]
            result = obj.get("result")
            if not isinstance(result, dict):
                raise IngestError(f"a raw {_PROVIDER} JSON-RPC response needs a 'result' object or an 'error' object")
            obj = result
        kind, body = self._kind(obj)
        try:
            if kind == "status-update":
                return self._status(self._task(require_str(body, "taskId", _PROVIDER, kind)), body, kind)
            if kind == "artifact-update":
                return self._artifact_update(body, kind)
            if kind == "message":
                return self._message(body, kind)
            if kind == "task":
                return self._whole_task(body, kind)
        except ValidationError as exc:
            raise invalid_event(_PROVIDER, exc) from None
        undeclared(_PROVIDER, EVENT_TYPES, (kind,))  # ignored (forward compatibility), logged once if it has no row
        return []

    def close(self) -> list[Event]:
        """End of stream: end each task's open message (a referenced task that never ended is not ended)."""
        events: list[Event] = []
        for task in (self._root, *self._tasks.values()):
            events += self._end_message(task)
        return events

    @staticmethod
    def _kind(obj: JsonObject) -> tuple[str, JsonObject]:
        """The result's kind and body: from ``kind``, from a ``StreamResponse`` wrapper, else an error."""
        kind = obj.get("kind")
        if isinstance(kind, str) and kind:
            return kind, obj
        for key, name in _WRAPPERS.items():
            if isinstance(inner := obj.get(key), dict) and len(obj) == 1:
                return name, inner
        raise IngestError(
            f"a raw {_PROVIDER} stream event needs a string 'kind' (task, message, status-update, artifact-update) "
            f"or one of {', '.join(_WRAPPERS)} as a StreamResponse, got the keys {sorted(obj)[:8]}"
        )

    # --- tasks ------------------------------------------------------------------------------------------

    def _task(self, task_id: str) -> _Task:
        """The task ``task_id``: the main task (the root) or a referenced one (a child)."""
        if self._main is None:
            self._main = task_id
        if task_id == self._main:
            return self._root
        task = self._tasks.get(task_id)
        if task is None:
            task = self._tasks[task_id] = _Task(self._source(task_id))
        return task

    def _source(self, task_id: str) -> Source:
        parent_id = self._parents.get(task_id, self._main or "")
        parent = self._tasks.get(parent_id)
        if parent is not None and parent.source is not None:
            base = parent.source
            return Source(
                agent_id=task_id,
                session_id=task_id,
                parent_session_id=parent_id,
                depth=base.depth + 1,
                path=f"{base.path}/{task_id}",
            )
        return Source(
            agent_id=task_id, session_id=task_id, parent_session_id=self._main, depth=1, path=f"{self._main}/{task_id}"
        )

    def _references(self, owner: str, body: JsonObject) -> None:
        """Tasks ``body`` names in ``referenceTaskIds`` are children of ``owner`` (unless seen before)."""
        refs = body.get("referenceTaskIds")
        if isinstance(refs, list):
            for ref in refs:
                if isinstance(ref, str) and ref and ref != self._main and ref not in self._tasks:
                    self._parents.setdefault(ref, owner)

    def _end_message(self, task: _Task) -> list[Event]:
        index = task.messages.end()
        return [] if index is None else [MessageEnd(run=self._run, message=index, source=task.source)]

    def _answer(self, task: _Task, text: str) -> list[Event]:
        """``text`` as one whole assistant message of ``task``."""
        if not text:
            return []
        events = self._end_message(task)
        index = task.messages.start()
        return [*events, text_event(self._run, index, text, Visibility.ANSWER, task.source), *self._end_message(task)]

    # --- results ----------------------------------------------------------------------------------------

    def _status(self, task: _Task, body: JsonObject, kind: str) -> list[Event]:
        status = body.get("status")
        if not isinstance(status, dict) or not as_str(status.get("state")):
            raise IngestError(f"a raw {_PROVIDER} {kind} needs a 'status' object with a string 'state', got {status!r}")
        state = _state(status)
        if body.get("final") is True:
            task.final = True
        message = as_dict(status.get("message"))
        owner = as_str(body.get("taskId")) or as_str(body.get("id"))
        self._references(owner, message)
        text = _parts_text(message.get("parts"))
        if state == "input-required":
            return self._input_required(task, owner, message, text)
        task.waiting = False
        if state in _QUESTIONS:
            return self._answer(task, text)
        if state in ("failed", "rejected"):
            ends = None if task.source is not None else EndStatus.ERROR if state == "failed" else EndStatus.REFUSED
            error = ErrorEvent(run=self._run, message=text or f"task {state}", source=task.source, ends=ends)
            return [*self._end_message(task), error, *self._ended(task, state)]
        if state == "completed":
            events = self._answer(task, text) if not task.texts else self._end_message(task)
            return events + self._ended(task, state)
        if state == "canceled":
            note = Status(run=self._run, text=f"canceled: {one_line(text)}" if text else "canceled", source=task.source)
            return [*self._end_message(task), note, *self._ended(task, state)]
        return [Status(run=self._run, text=one_line(text), source=task.source)] if text.strip() else []

    def _input_required(self, task: _Task, owner: str, message: JsonObject, text: str) -> list[Event]:
        """An ``input-required`` status: one ``approval.request`` per status message (module docstring)."""
        message_id = as_str(message.get("messageId"))
        approval_id = message_id or f"{owner}:{len(task.asked) + 1}"
        if approval_id in task.asked or (task.waiting and not message_id):
            return []
        task.asked.add(approval_id)
        task.waiting = True
        parts = message.get("parts")
        data = [p.get("data") for p in parts if isinstance(p, dict) and "data" in p] if isinstance(parts, list) else []
        action = (
            json.dumps(data[0] if len(data) == 1 else data, ensure_ascii=False, separators=(",", ":")) if data else None
        )
        question = text.strip() or "The agent needs your input to go on."
        return [*self._end_message(task), approval_event(self._run, approval_id, question, action, source=task.source)]

    def _ended(self, task: _Task, state: str) -> list[Event]:
        """A child's terminal state is its ``End`` (the root's end is the runtime's own ``end`` line)."""
        if task.source is None or task.ended:
            return []
        task.ended = True
        return [End(run=self._run, status=_ENDED[state], source=task.source)]

    def _artifact_update(self, body: JsonObject, kind: str) -> list[Event]:
        task = self._task(require_str(body, "taskId", _PROVIDER, kind))
        artifact = body.get("artifact")
        if not isinstance(artifact, dict) or not isinstance(artifact.get("parts"), list):
            raise IngestError(f"a raw {_PROVIDER} {kind} needs an 'artifact' object with a 'parts' list")
        if task.final:  # the spec: final marks the end of the stream; what came after is not edited into the answer
            name = one_line(as_str(artifact.get("name")) or as_str(artifact.get("artifactId")) or "artifact", 60)
            return not_shown(self._run, f"{name}: an artifact update after the task's final status update", task.source)
        return self._artifact(task, artifact, append=body.get("append") is True, last=body.get("lastChunk") is True)

    def _artifact(self, task: _Task, artifact: JsonObject, *, append: bool, last: bool) -> list[Event]:
        artifact_id = as_str(artifact.get("artifactId")) or as_str(artifact.get("name")) or "artifact"
        parts = artifact.get("parts")
        parts = parts if isinstance(parts, list) else []  # checked by the callers: a list
        text = _parts_text(parts)
        events: list[Event] = []
        index = task.artifacts.get(artifact_id)
        if not append and task.texts.get(artifact_id) == text and not _files(parts):
            return self._end_message(task) if last and index == task.messages.current else []  # a repeat
        if not text and (index is None or index != task.messages.current):  # data only: no message to open
            return self._media(task, parts)
        if index is None or index != task.messages.current:
            events += self._end_message(task)
            index = task.artifacts[artifact_id] = task.messages.start()
            task.texts[artifact_id] = ""
            append = True
        if append and text:
            task.texts[artifact_id] += text
            events.append(text_event(self._run, index, text, Visibility.ANSWER, task.source))
        elif not append:
            task.texts[artifact_id] = text
            events.append(TextEvent(run=self._run, mode=TextMode.REPLACE, text=text, message=index, source=task.source))
        events += self._media(task, parts)
        if last:
            events += self._end_message(task)
        return events

    def _message(self, body: JsonObject, kind: str) -> list[Event]:
        parts = body.get("parts")
        if not isinstance(parts, list):
            raise IngestError(f"a raw {_PROVIDER} message needs a 'parts' list, got {parts!r}")
        task_id = as_str(body.get("taskId"))
        task = self._task(task_id) if task_id else self._root
        self._references(task_id or self._main or "", body)
        if as_str(body.get("role")).lower() not in ("agent", "role_agent"):
            return []
        return self._answer(task, _parts_text(parts)) + self._media(task, parts)

    def _media(self, task: _Task, parts: list[Any]) -> list[Event]:
        """A ``media`` event per file part given by an http(s) URI; a ``status`` line for one that is not (bytes
        inline, another scheme): the platforms fetch media by URL."""
        return [media_event(self._run, uri, mime, task.source) for uri, mime in _files(parts)]

    def _whole_task(self, body: JsonObject, kind: str) -> list[Event]:
        task_id = require_str(body, "id", _PROVIDER, kind)
        task = self._task(task_id)
        self._references(task_id, body)
        events: list[Event] = []
        artifacts = body.get("artifacts")
        for artifact in artifacts if isinstance(artifacts, list) else []:
            if isinstance(artifact, dict) and isinstance(artifact.get("parts"), list):
                events += self._artifact(task, artifact, append=False, last=True)
        if "status" in body:
            events += self._status(task, body, kind)
        return events


# --- what each event type means (core.normalize.meanings; README "What each format's events mean") ---------------

EVENT_TYPES: EventTable = table(
    {
        "error": M.ERROR,  # a JSON-RPC error response
        "task": (M.TEXT, M.MEDIA, M.STATUS, M.BOUNDARY),  # its artifacts and status, as below
        "message": (M.TEXT, M.BOUNDARY),  # an agent message (a user message is ignored)
        "status-update": M.STATUS,  # by its state, below
        "artifact-update": (M.TEXT, M.MEDIA, M.BOUNDARY, M.NOT_SHOWN),  # not shown after the final update
        "part/text": M.TEXT,
        "part/file": (M.MEDIA, M.NOT_SHOWN),
        "part/data": M.IGNORED,  # structured data, not text: the client renders it
        "state/submitted": M.STATUS,
        "state/working": M.STATUS,
        "state/input-required": M.APPROVAL,  # the task waits for the person: Approve / Deny
        "state/auth-required": M.TEXT,
        "state/completed": M.BOUNDARY,
        "state/failed": M.ERROR,
        "state/rejected": M.REFUSAL,
        "state/canceled": M.STATUS,
        "state/unknown": M.IGNORED,
    }
)
"""Every A2A stream result kind, part kind and task state (a2aproject/A2A ``specification/json/a2a.json``) and
what it means here."""


def event_types(raw: object) -> list[str]:
    """The table keys of one raw A2A line: the result's kind, its parts' kinds and its task state."""
    obj = as_dict(raw)
    if "jsonrpc" in obj or "result" in obj:
        if isinstance(obj.get("error"), dict):
            return ["error"]
        obj = as_dict(obj.get("result"))
    kind = obj.get("kind")
    if not isinstance(kind, str):
        wrapped = [(name, obj[key]) for key, name in _WRAPPERS.items() if isinstance(obj.get(key), dict)]
        if not wrapped:
            return []
        kind, obj = wrapped[0][0], as_dict(wrapped[0][1])
    keys = [kind]
    status = obj.get("status")
    if isinstance(status, dict) and isinstance(status.get("state"), str):
        keys.append("state/" + _state(status))
    holders = [obj, obj.get("artifact"), as_dict(status).get("message")]
    artifacts = obj.get("artifacts")
    holders += artifacts if isinstance(artifacts, list) else []
    for holder in holders:
        parts = holder.get("parts") if isinstance(holder, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict):
                keys.append(
                    "part/"
                    + (as_str(part.get("kind")) or ("text" if "text" in part else "file" if "file" in part else "data"))
                )
    return keys
