"""AG-UI event stream → normalized events.

Source: https://docs.ag-ui.com/concepts/events and the ``@ag-ui/core`` schema (typescript-sdk
``packages/core/src/events.ts``, python-sdk ``ag_ui/core/events.py``): one JSON object per SSE ``data:`` line,
camelCase fields, the event name in ``type``.

Mapping (``message`` = 0-based index of an assistant text message, per agent: the root and each sub-agent count
their own; reasoning that comes before a text message shares that message's index):

================================================================  ============================================
raw                                                               normalized
================================================================  ============================================
``TEXT_MESSAGE_START`` / ``_CONTENT`` / ``_END`` (role assistant)  ``TextEvent`` answer deltas, ``MessageEnd``
``TEXT_MESSAGE_CHUNK`` (``messageId`` + ``delta``)                 the same; a chunked message ends at a new
                                                                  ``messageId``, a ``TEXT_MESSAGE_START`` or
                                                                  the run's end
``THINKING_TEXT_MESSAGE_CONTENT``, ``REASONING_MESSAGE_CONTENT``,  ``TextEvent`` reasoning deltas (never shown
``REASONING_MESSAGE_CHUNK``                                       unless the channel says so)
``TOOL_CALL_START`` / ``_ARGS`` / ``_END``                        ``ToolCall`` start / args_delta / end
``TOOL_CALL_CHUNK``                                               the same; a chunked call ends at the next
                                                                  event that is not one of its chunks
``TOOL_CALL_RESULT``                                              ``ToolResult`` (summary ``done``, never the
                                                                  raw content)
``STEP_STARTED``                                                  ``Status`` (the step's name; none for a
                                                                  framework's internal node: LangGraph
                                                                  middleware hooks ``X.after_model``,
                                                                  ``__start__``)
``RUN_FINISHED``                                                  ``MessageEnd`` of the open message
``RUN_FINISHED`` ``outcome`` ``{"type": "interrupt",              and an ``ApprovalRequest`` per interrupt (the
"interrupts": [...]}`` (the root's)                               interrupt's ``id``; ``message``, else its
                                                                  ``reason``, asked; the tool call of its
                                                                  ``toolCallId`` as the action; its
                                                                  ``expiresAt``, else 10 minutes; denied at
                                                                  expiry; who may decide is the channel's)
``RUN_ERROR`` (``message``, ``code``)                             ``ErrorEvent`` that ends the run ``error`` (a
                                                                  sub-agent's: a plain error line)
``SUBAGENT_STARTED`` / ``_FINISHED`` / ``_ERROR``                 the child's ``Status`` / ``End`` ok /
                                                                  ``ErrorEvent`` + ``End`` error
================================================================  ============================================

Sub-agents (AG-UI 1.0): every event that carries ``subagentRunId`` belongs to that child; its ``source`` is
``agent_id`` = the child's name (``name``, ``agentName`` or ``agentId`` of its ``SUBAGENT_STARTED``, else the run
id), ``session_id`` = ``subagentRunId``, ``parent_session_id`` = the run that started it (``parentRunId`` naming
another sub-agent nests it one level deeper; else the root's ``runId``), ``depth`` and ``path`` (``root run id/
name/...``). Only ``subagentRunId`` is read as required: the lifecycle events' other field names are taken
tolerantly.

Ignored (for forward compatibility, they carry nothing a chat shows): ``RUN_STARTED`` (its ``runId`` names the
root), ``STEP_FINISHED``, ``THINKING_START``, ``THINKING_END``, ``THINKING_TEXT_MESSAGE_START``,
``THINKING_TEXT_MESSAGE_END``, ``REASONING_START``, ``REASONING_END``, ``REASONING_MESSAGE_START``,
``REASONING_MESSAGE_END``, ``REASONING_ENCRYPTED_VALUE``, ``STATE_SNAPSHOT``, ``STATE_DELTA``,
``MESSAGES_SNAPSHOT`` (history, already streamed), ``ACTIVITY_SNAPSHOT``, ``ACTIVITY_DELTA``, ``CUSTOM``, ``RAW``,
text of ``user`` / ``system`` / ``developer`` messages, and any unknown type. ``TEXT_MESSAGE_START`` and
``TEXT_MESSAGE_END`` of a message already opened or ended by others yield nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

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
    ToolCall,
    ToolCallState,
    ToolResult,
    Visibility,
)
from streamrelay.core.normalize.base import (
    JsonObject,
    MessageCounter,
    approval_event,
    as_dict,
    as_str,
    invalid_event,
    one_line,
    require_str,
    require_type,
    text_event,
    text_field,
)
from streamrelay.core.normalize.ends import stream_failed
from streamrelay.core.normalize.meanings import EventTable, table, undeclared
from streamrelay.core.normalize.meanings import Meaning as M

_INTERNAL_STEP = re.compile(
    r"__\w+__|[\w.-]+\.(?:before|after|wrap)_(?:model|agent|tools?|model_call|tool_call)", re.ASCII
)
"""A step name that is a framework's internal node, not a step a person follows: the LangGraph integration names
each step after its graph node (ag-ui-protocol/ag-ui#380, ``langgraph_node``), and LangChain agents' middleware hooks
are nodes named ``<Middleware>.before_model`` / ``.after_model`` / ``.before_agent`` / ``.after_agent``
(``CopilotKitMiddleware.after_model``), beside ``__start__`` / ``__end__``."""
_PROVIDER = "AG-UI"
_REASONING_CONTENT = frozenset(
    {"THINKING_TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_CHUNK"}
)
_NAME_FIELDS = ("name", "agentName", "subagentName", "agentId")
_EVENT_TYPE = re.compile(r"[A-Z][A-Z0-9_]*")
"""Every AG-UI event type is UPPER_SNAKE_CASE (``TEXT_MESSAGE_CONTENT``): another spelling is another format's."""


@dataclass
class _Agent:
    """One agent's text state: the root's, or one sub-agent's."""

    source: Source | None
    messages: MessageCounter = field(default_factory=MessageCounter)
    ids: dict[str, int] = field(default_factory=dict)
    answered: bool = False
    """The open message already holds answer text (a new text message then opens the next index)."""
    chunked: str | None = None
    """The ``messageId`` of a message sent as ``TEXT_MESSAGE_CHUNK`` and not yet ended."""
    skipped: set[str] = field(default_factory=set)
    """Ids of text messages whose role is not ``assistant``: their content is not answer text."""


@dataclass
class _Call:
    id: str
    name: str | None
    source: Source | None


class AgUiNormalizer:
    """Normalizes one AG-UI event stream (a run, its sub-agents, possibly several runs in a row).

    Args:
        run_id: the run the events belong to (``run`` of every event).
    """

    def __init__(self, run_id: str) -> None:
        self._run = run_id
        self._root = _Agent(None)
        self._root_run: str | None = None
        self._children: dict[str, _Agent] = {}
        self._calls: dict[str, _Call] = {}
        self._ended_calls: set[str] = set()
        self._finished: set[str] = set()
        """Sub-agents whose SUBAGENT_FINISHED / SUBAGENT_ERROR came: a later event of theirs is refused."""
        self._names: dict[str, str] = {}
        self._chunk_call: _Call | None = None
        self._handlers: dict[str, Callable[[_Agent, JsonObject, str], list[Event]]] = {
            "TEXT_MESSAGE_START": self._text_start,
            "TEXT_MESSAGE_CONTENT": self._text_content,
            "TEXT_MESSAGE_END": self._text_end,
            "TEXT_MESSAGE_CHUNK": self._text_chunk,
            "TOOL_CALL_START": self._tool_start,
            "TOOL_CALL_ARGS": self._tool_args,
            "TOOL_CALL_END": self._tool_end,
            "TOOL_CALL_CHUNK": self._tool_chunk,
            "TOOL_CALL_RESULT": self._tool_result,
            "STEP_STARTED": self._step,
            "RUN_STARTED": self._run_started,
            "RUN_FINISHED": self._run_finished,
            "RUN_ERROR": self._run_error,
            "SUBAGENT_STARTED": self._sub_started,
            "SUBAGENT_FINISHED": self._sub_finished,
            "SUBAGENT_ERROR": self._sub_error,
            **dict.fromkeys(_REASONING_CONTENT, self._reasoning),
        }

    def feed(self, raw: JsonObject) -> list[Event]:
        """Normalize one raw event. See :class:`core.normalize.base.Normalizer`.

        Raises:
            IngestError: ``raw`` is not an object, has no string ``type`` or one that is no AG-UI type (not
                UPPER_SNAKE_CASE: another format's event), a known event lacks an id it needs (``messageId``,
                ``toolCallId``, ``subagentRunId``) or has a non-string text field, ``TOOL_CALL_ARGS`` / ``_END``
                name a call never started (``_ARGS`` one ended; ``_START`` one still open), an event names a
                finished sub-agent, or a field makes no valid event (an id with a lone surrogate).
        """
        kind = require_type(raw, _PROVIDER)
        handler = self._handlers.get(kind)
        if handler is None and _EVENT_TYPE.fullmatch(kind) is None:
            raise IngestError(
                f"{kind[:80]!r} is not an AG-UI event type (they are upper-case, like TEXT_MESSAGE_CONTENT): is the "
                "run.start's 'format' the stream's format?"
            )
        chunk_call = self._chunk_call
        try:
            events = self._end_chunk_call() if kind != "TOOL_CALL_CHUNK" else []
            if handler is None:
                undeclared(_PROVIDER, EVENT_TYPES, (kind,))  # ignored; logged once if it has no row
                return events
            return events + handler(self._agent(raw, kind), raw, kind)
        except ValidationError as exc:
            self._chunk_call = chunk_call  # a refused line changes nothing: the chunked call is still open
            raise invalid_event(_PROVIDER, exc) from None
        except IngestError:
            self._chunk_call = chunk_call
            raise

    def close(self) -> list[Event]:
        """End of stream: end every agent's open message (tool calls and sub-agents never ended stay open)."""
        events: list[Event] = []
        for agent in (self._root, *self._children.values()):
            events += self._end_message(agent)
        return events

    # --- agents -----------------------------------------------------------------------------------------

    def _agent(self, raw: JsonObject, kind: str) -> _Agent:
        """The agent an event belongs to: the sub-agent its ``subagentRunId`` names, else the root."""
        if "subagentRunId" not in raw:
            if kind.startswith("SUBAGENT_"):
                require_str(raw, "subagentRunId", _PROVIDER, kind)
            return self._root
        run_id = require_str(raw, "subagentRunId", _PROVIDER, kind)
        if run_id in self._finished:
            raise IngestError(
                f"a raw {_PROVIDER} {kind} event of sub-agent {run_id[:80]!r}, which already finished "
                "(SUBAGENT_FINISHED or SUBAGENT_ERROR came): its events must come before its end"
            )
        child = self._children.get(run_id)
        if child is None:
            announced = raw if kind == "SUBAGENT_STARTED" else {}  # a child seen first elsewhere: named by its id
            child = self._children[run_id] = _Agent(self._child_source(run_id, announced))
        return child

    def _child_source(self, run_id: str, announced: JsonObject) -> Source:
        """The child's source from its ``SUBAGENT_STARTED`` (its name, the run that started it), else its run id."""
        name = next((as_str(announced.get(k)) for k in _NAME_FIELDS if as_str(announced.get(k))), run_id)
        parent_id = as_str(announced.get("parentRunId")) or as_str(announced.get("parentSubagentRunId"))
        parent = self._children.get(parent_id)
        if parent is not None and parent.source is not None:
            base = parent.source
            return Source(
                agent_id=name,
                session_id=run_id,
                parent_session_id=base.session_id,
                depth=base.depth + 1,
                path=f"{base.path}/{name}",
            )
        root = self._root_run or "root"
        return Source(
            agent_id=name, session_id=run_id, parent_session_id=self._root_run, depth=1, path=f"{root}/{name}"
        )

    # --- text -------------------------------------------------------------------------------------------

    def _open(self, agent: _Agent, message_id: str) -> tuple[list[Event], int]:
        """The index of text message ``message_id``: its own, the open reasoning-only message's, or the next."""
        index = agent.ids.get(message_id)
        if index is not None:
            return [], index
        events: list[Event] = []
        if agent.messages.current is not None and agent.answered:
            events = self._end_message(agent)
        index = agent.messages.ensure()
        agent.ids[message_id] = index
        return events, index

    def _end_message(self, agent: _Agent) -> list[Event]:
        agent.answered, agent.chunked = False, None
        index = agent.messages.end()
        return [] if index is None else [MessageEnd(run=self._run, message=index, source=agent.source)]

    def _answer(self, agent: _Agent, message_id: str, delta: str) -> list[Event]:
        if message_id in agent.skipped:
            return []
        events, index = self._open(agent, message_id)
        if delta:
            agent.answered = True
            events.append(text_event(self._run, index, delta, Visibility.ANSWER, agent.source))
        return events

    def _text_start(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        message_id = require_str(raw, "messageId", _PROVIDER, kind)
        events = self._end_message(agent) if agent.chunked is not None else []
        if as_str(raw.get("role")) not in ("", "assistant"):
            agent.skipped.add(message_id)
            return events
        return events + self._answer(agent, message_id, "")

    def _text_content(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        message_id = require_str(raw, "messageId", _PROVIDER, kind)
        return self._answer(agent, message_id, text_field(raw, "delta", _PROVIDER, kind))

    def _text_end(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        message_id = require_str(raw, "messageId", _PROVIDER, kind)
        index = agent.ids.get(message_id)
        if index is not None and index == agent.messages.current:
            return self._end_message(agent)
        return []

    def _text_chunk(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        message_id = text_field(raw, "messageId", _PROVIDER, kind) or agent.chunked
        if message_id is None:
            raise IngestError(f"a raw {_PROVIDER} {kind} event that opens a message needs a string 'messageId'")
        events: list[Event] = []
        if agent.chunked is not None and agent.chunked != message_id:
            events = self._end_message(agent)
        if as_str(raw.get("role")) not in ("", "assistant"):
            agent.skipped.add(message_id)
        events += self._answer(agent, message_id, text_field(raw, "delta", _PROVIDER, kind))
        if message_id not in agent.skipped:
            agent.chunked = message_id
        return events

    def _reasoning(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        delta = text_field(raw, "delta", _PROVIDER, kind)
        if not delta:
            return []
        return [text_event(self._run, agent.messages.ensure(), delta, Visibility.REASONING, agent.source)]

    # --- tool calls -------------------------------------------------------------------------------------

    def _tool(self, call: _Call, state: ToolCallState, args_delta: str | None = None) -> ToolCall:
        return ToolCall(
            run=self._run, id=call.id, name=call.name, state=state, args_delta=args_delta, source=call.source
        )

    def _tool_start(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        call_id = require_str(raw, "toolCallId", _PROVIDER, kind)
        if (
            call_id in self._calls
        ):  # an id used again after its END is a new call (core.lanes.gate.find_call: the latest)
            raise IngestError(
                f"a raw {_PROVIDER} {kind}: tool call {call_id[:80]!r} is already open (no TOOL_CALL_END)"
            )
        call = _Call(call_id, require_str(raw, "toolCallName", _PROVIDER, kind), agent.source)
        self._calls[call_id] = call
        self._names[call_id] = require_str(raw, "toolCallName", _PROVIDER, kind)
        return [self._tool(call, ToolCallState.START)]

    def _started_call(self, raw: JsonObject, kind: str) -> _Call | None:
        """The open call ``toolCallId`` names; None when it already ended.

        Raises:
            IngestError: no such call was ever started.
        """
        call_id = require_str(raw, "toolCallId", _PROVIDER, kind)
        call = self._calls.get(call_id)
        if call is None and call_id not in self._ended_calls:
            raise IngestError(
                f"a raw {_PROVIDER} {kind} event for tool call {call_id[:80]!r} that was never started "
                "(send its TOOL_CALL_START first)"
            )
        return call

    def _tool_args(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        call = self._started_call(raw, kind)
        delta = text_field(raw, "delta", _PROVIDER, kind)
        if call is None:
            raise IngestError(
                f"a raw {_PROVIDER} {kind} of tool call {as_str(raw.get('toolCallId'))[:80]!r}, which already ended"
            )
        return [self._tool(call, ToolCallState.ARGS_DELTA, delta)] if delta else []

    def _tool_end(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        call = self._started_call(raw, kind)
        if call is None:  # ended already (a chunked call ends at the next other event): a repeat changes nothing
            return []
        del self._calls[call.id]
        self._ended_calls.add(call.id)
        return [self._tool(call, ToolCallState.END)]

    def _tool_chunk(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        call_id = text_field(raw, "toolCallId", _PROVIDER, kind)
        events: list[Event] = []
        call = self._chunk_call
        if call is None or (call_id and call_id != call.id):
            events = self._end_chunk_call()
            name = text_field(raw, "toolCallName", _PROVIDER, kind)
            if not call_id or not name:
                raise IngestError(
                    f"a raw {_PROVIDER} {kind} event that opens a tool call needs string 'toolCallId' and "
                    f"'toolCallName', got {raw.get('toolCallId')!r} and {raw.get('toolCallName')!r}"
                )
            call = self._chunk_call = _Call(call_id, name, agent.source)
            self._names[call_id] = name
            events.append(self._tool(call, ToolCallState.START))
        delta = text_field(raw, "delta", _PROVIDER, kind)
        if delta:
            events.append(self._tool(call, ToolCallState.ARGS_DELTA, delta))
        return events

    def _end_chunk_call(self) -> list[Event]:
        """A chunked tool call's arguments are complete once another event than its chunks arrives."""
        call, self._chunk_call = self._chunk_call, None
        if call is None:
            return []
        self._ended_calls.add(call.id)
        return [self._tool(call, ToolCallState.END)]

    def _tool_result(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        call_id = require_str(raw, "toolCallId", _PROVIDER, kind)
        name = self._names.get(call_id) or as_str(raw.get("toolCallName")) or None
        return [ToolResult(run=self._run, id=call_id, name=name, summary="done", source=agent.source)]

    # --- runs, steps, sub-agents ------------------------------------------------------------------------

    def _step(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        name = text_field(raw, "stepName", _PROVIDER, kind)
        if not name or _INTERNAL_STEP.fullmatch(name) is not None:
            return []  # a framework's own node (a LangGraph middleware hook, __start__): nothing a person reads
        return [Status(run=self._run, text=name, source=agent.source)]

    def _run_started(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        if agent is self._root and self._root_run is None:
            self._root_run = as_str(raw.get("runId")) or None
        return []

    def _run_finished(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        """The run (or a step of it) finished: its open message ends; an ``interrupt`` outcome of the root's asks a
        person (https://docs.ag-ui.com/concepts/interrupts): one ``approval.request`` per interrupt."""
        events = self._end_message(agent)
        outcome = as_dict(raw.get("outcome"))
        if agent is not self._root or outcome.get("type") != "interrupt":
            return events
        interrupts = outcome.get("interrupts")
        if not isinstance(interrupts, list) or not interrupts:
            raise IngestError(f"a {_PROVIDER} RUN_FINISHED interrupt outcome needs a non-empty 'interrupts' list")
        for item in interrupts:
            interrupt = as_dict(item)
            interrupt_id = require_str(interrupt, "id", _PROVIDER, "interrupt")
            question = one_line(as_str(interrupt.get("message")) or as_str(interrupt.get("reason")), 1000)
            call_id = as_str(interrupt.get("toolCallId"))
            action = f"call {self._names[call_id]}" if call_id in self._names else None
            expires = as_str(interrupt.get("expiresAt")) or None
            events.append(approval_event(self._run, interrupt_id, question, action, expires))
        return events

    def _run_error(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        text = ": ".join(p for p in (as_str(raw.get("code")), text_field(raw, "message", _PROVIDER, kind)) if p)
        events = self._end_message(agent)
        return [*events, stream_failed(self._run, text or "agent run error", agent.source)]

    def _sub_started(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        name = agent.source.agent_id if agent.source is not None else "sub-agent"
        return [Status(run=self._run, text=f"{name} started", source=agent.source)]

    def _sub_finished(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        self._finished.add(require_str(raw, "subagentRunId", _PROVIDER, kind))
        return [*self._end_message(agent), End(run=self._run, status=EndStatus.OK, source=agent.source)]

    def _sub_error(self, agent: _Agent, raw: JsonObject, kind: str) -> list[Event]:
        text = text_field(raw, "message", _PROVIDER, kind) or as_str(raw.get("error")) or "sub-agent error"
        self._finished.add(require_str(raw, "subagentRunId", _PROVIDER, kind))
        return [
            *self._end_message(agent),
            ErrorEvent(run=self._run, message=text, source=agent.source),
            End(run=self._run, status=EndStatus.ERROR, source=agent.source),
        ]


# --- what each event type means (core.normalize.meanings; README "What each format's events mean") ---------------

EVENT_TYPES: EventTable = table(
    {
        "TEXT_MESSAGE_START": M.BOUNDARY,
        "TEXT_MESSAGE_CONTENT": M.TEXT,
        "TEXT_MESSAGE_END": M.BOUNDARY,
        "TEXT_MESSAGE_CHUNK": (M.TEXT, M.BOUNDARY),
        "THINKING_TEXT_MESSAGE_CONTENT": M.REASONING,
        "REASONING_MESSAGE_CONTENT": M.REASONING,
        "REASONING_MESSAGE_CHUNK": M.REASONING,
        "TOOL_CALL_START": M.TOOL_CALL,
        "TOOL_CALL_ARGS": M.TOOL_CALL,
        "TOOL_CALL_END": M.TOOL_CALL,
        "TOOL_CALL_CHUNK": M.TOOL_CALL,
        "TOOL_CALL_RESULT": M.TOOL_RESULT,
        "STEP_STARTED": (M.STATUS, M.IGNORED),  # a framework's internal node: ignored (_INTERNAL_STEP)
        "RUN_STARTED": M.BOUNDARY,
        "RUN_FINISHED": (M.BOUNDARY, M.APPROVAL),
        "RUN_ERROR": M.ERROR,
        "SUBAGENT_STARTED": M.STATUS,
        "SUBAGENT_FINISHED": M.BOUNDARY,
        "SUBAGENT_ERROR": M.ERROR,
        # ignored on purpose (module docstring): structure without text, state, history, application events
        **dict.fromkeys(
            (
                "STEP_FINISHED",
                "THINKING_START",
                "THINKING_END",
                "THINKING_TEXT_MESSAGE_START",
                "THINKING_TEXT_MESSAGE_END",
                "REASONING_START",
                "REASONING_END",
                "REASONING_MESSAGE_START",
                "REASONING_MESSAGE_END",
                "REASONING_ENCRYPTED_VALUE",
                "STATE_SNAPSHOT",
                "STATE_DELTA",
                "MESSAGES_SNAPSHOT",
                "ACTIVITY_SNAPSHOT",
                "ACTIVITY_DELTA",
                "CUSTOM",
                "RAW",
            ),
            M.IGNORED,
        ),
    }
)
"""Every AG-UI event type (ag-ui-protocol/ag-ui ``EventType``) and what it means here."""


def event_types(raw: object) -> list[str]:
    """The table keys of one raw AG-UI line: its ``type``."""
    kind = raw.get("type") if isinstance(raw, dict) else None
    return [kind] if isinstance(kind, str) else []
