"""LangGraph stream → normalized events, interrupts as approvals.

Sources: https://docs.langchain.com/oss/python/langgraph/streaming (``stream_mode`` ``messages``, ``updates``,
``custom``, ``values``; ``version="v2"`` stream parts) and the LangGraph server's SSE stream
(``POST /threads/{thread_id}/runs/stream``; langgraph-sdk's ``StreamPart``, ``langgraph_sdk/schema.py``); interrupts:
https://docs.langchain.com/oss/python/langgraph/interrupts. Recorded with langgraph 1.2.22 and langgraph-api 0.16.7
(tests/streams/langgraph/recorded/).

One line is one stream part, in either of the two shapes LangGraph puts on the wire:

- the server's SSE event as langgraph-sdk yields it: ``{"event": "messages/partial", "data": ...}`` (the SSE
  ``event:`` name, with ``|<namespace>`` after it for a subgraph's event, and its ``data:`` parsed);
- a ``graph.stream(..., version="v2")`` part: ``{"type": "messages", "ns": [], "data": ..., "interrupts": [...]}``
  (messages and interrupts serialized as the server does: a message by ``model_dump()``, an ``Interrupt`` by its
  fields ``value`` and ``id``).

Mapping (``message`` = 0-based index of the AI message, one per message ``id``):

=====================================================  =========================================================
part (``event`` or ``type``)                            normalized
=====================================================  =========================================================
``messages`` (``[message chunk, metadata]``: the        an AI chunk's ``content`` (a string, or ``text`` and
local ``messages`` mode, the server's                   ``reasoning`` / ``thinking`` blocks): ``TextEvent`` deltas;
``messages-tuple``)                                     its ``tool_call_chunks``: ``ToolCall`` start / args_delta,
                                                        ended by the chunk with ``chunk_position: "last"``; a
                                                        ``tool`` message: ``ToolResult``
``messages/partial`` (the server's ``messages`` mode:   an AI message's ``content`` as a ``TextEvent`` snapshot
each message so far)
``messages/complete``                                   the snapshot, its ``tool_calls`` whole (``ToolCall``
                                                        start, args, end); a ``tool`` message: ``ToolResult``
``updates`` (``{node: output}``)                        each node's AI messages not streamed already: their text,
                                                        their ``tool_calls`` whole; ``tool`` messages:
                                                        ``ToolResult``; ``__interrupt__``: one ``ApprovalRequest``
                                                        per interrupt (below)
``values`` (the whole state)                            its ``__interrupt__`` (and a v2 part's ``interrupts``):
                                                        ``ApprovalRequest`` (the messages are history: not shown)
``custom`` (``get_stream_writer()``)                    a string, or a dict's ``status`` / ``message`` / ``text``
                                                        string: a ``Status`` line; other data is the app's: ignored
``error``                                               ``ErrorEvent`` that ends the run ``error``
=====================================================  =========================================================

An interrupt (``interrupt(value)`` in a node: ``{"value": ..., "id": "<32 hex>"}``) becomes an ``approval.request``
(docs/approvals.md) whose id is the interrupt's ``id``, asked once however often it is streamed (``updates`` and
``values`` both carry it): a string value is the question; a dict's ``question`` / ``message`` / ``description``
is, its ``action`` (a string, else compact JSON) the action; LangChain's human-in-the-loop middleware value
(``action_requests``: ``name``, ``args``, ``description``) and an Agent Inbox ``HumanInterrupt`` (``action_request``:
``action``, ``args``; ``description``) ask "Run the tool NAME?" with the call as the action; any other value is
shown as compact JSON. LangGraph gives no expiry and names nobody: the channel's approvers decide, denied after 10
minutes. The agent resumes the graph with the decision it reads from the ``approval`` unit:
``graph.invoke(Command(resume={"approved": unit.approved}), config)`` (or the server's ``command={"resume": ...}``).

A subgraph's part (a non-empty namespace) is read for its interrupts only (its messages come with the root's, which the
server already merges; its updates are the subgraph's own bookkeeping). Ignored: ``metadata``,
``messages/metadata``, ``end``, ``debug``, ``tasks``, ``checkpoints``, ``events``, human and system messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    Event,
    MessageEnd,
    Status,
    TextEvent,
    TextMode,
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
    text_event,
    whole_tool_call,
)
from streamrelay.core.normalize.ends import stream_failed
from streamrelay.core.normalize.meanings import EventTable, table, undeclared
from streamrelay.core.normalize.meanings import Meaning as M

_PROVIDER = "LangGraph"
NS_SEP = "|"
"""What separates a server SSE event's mode from its namespace (``updates|agent:1a2b``)."""
INTERRUPT = "__interrupt__"
_AI = frozenset({"ai", "AIMessageChunk"})
_TOOL = frozenset({"tool", "ToolMessageChunk"})


@dataclass
class _Call:
    id: str
    name: str | None


@dataclass
class _Message:
    """The AI message being streamed: its id, its index, its tool calls by chunk ``index``."""

    id: str | None
    index: int
    calls: dict[int, _Call] = field(default_factory=dict)


class LangGraphNormalizer:
    """Normalizes one LangGraph stream (several runs of a thread in a row: an interrupted run, then its resume).

    Args:
        run_id: the run the events belong to (``run`` of every event).
    """

    def __init__(self, run_id: str) -> None:
        self._run = run_id
        self._messages = MessageCounter()
        self._open: _Message | None = None
        self._streamed: set[str] = set()
        """AI message ids whose text came in a messages mode (an ``updates`` with the same message shows nothing)."""
        self._called: set[str] = set()
        self._results: set[str] = set()
        self._asked: set[str] = set()
        self._interrupts = 0
        self._handlers: dict[str, Callable[[Any, bool], list[Event]]] = {
            "messages": self._tuple,
            "messages-tuple": self._tuple,
            "messages/partial": self._partial,
            "messages/complete": self._complete,
            "updates": self._updates,
            "values": self._values,
            "custom": self._custom,
            "error": self._error,
        }

    def feed(self, raw: JsonObject) -> list[Event]:
        """Normalize one stream part (module docstring). See :class:`core.normalize.base.Normalizer`.

        Raises:
            IngestError: ``raw`` is not an object with a string ``event`` (the server's SSE event) or a string
                ``type`` and a ``data`` (a ``version="v2"`` part), or a field makes no valid event.
        """
        mode, subgraph, data, interrupts = _part(raw)
        handler = self._handlers.get(mode)
        if handler is None:
            undeclared(_PROVIDER, EVENT_TYPES, event_types(raw))  # ignored; logged once if it has no row
            return []
        try:
            events = handler(data, subgraph)
            if interrupts:
                events += self._ask(interrupts)
            return events
        except ValidationError as exc:
            raise invalid_event(_PROVIDER, exc) from None

    def close(self) -> list[Event]:
        """End of stream: end the open message (tool calls whose arguments never ended stay open: never run)."""
        return self._end_message()

    # --- messages ---------------------------------------------------------------------------------------

    def _end_message(self) -> list[Event]:
        self._open = None
        index = self._messages.end()
        return [] if index is None else [MessageEnd(run=self._run, message=index)]

    def _message(self, message_id: str | None) -> tuple[list[Event], _Message]:
        """The open AI message ``message_id``, the one before it ended first when it is another."""
        if self._open is not None and (message_id is None or self._open.id == message_id):
            return [], self._open
        events = self._end_message()
        self._open = _Message(message_id, self._messages.start())
        return events, self._open

    def _tuple(self, data: Any, subgraph: bool) -> list[Event]:
        """``[message chunk, metadata]``: the chunk's text deltas and tool call fragments (a ``tool`` message: its
        result)."""
        message = as_dict(data[0]) if isinstance(data, list) and data else as_dict(data)
        kind = as_str(message.get("type"))
        if kind in _TOOL:
            return self._tool_result(message)
        if kind not in _AI:
            return []
        message_id = as_str(message.get("id")) or None
        events, open_message = self._message(message_id)
        if message_id is not None:
            self._streamed.add(message_id)
        for text, visibility in _content(message.get("content")):
            events.append(text_event(self._run, open_message.index, text, visibility))
        chunks = message.get("tool_call_chunks")
        for chunk in chunks if isinstance(chunks, list) else []:
            events += self._call_chunk(open_message, as_dict(chunk))
        if message.get("chunk_position") == "last":
            events += self._end_calls(open_message)
        return events

    def _call_chunk(self, message: _Message, chunk: JsonObject) -> list[Event]:
        given = chunk.get("index")
        index = given if isinstance(given, int) and not isinstance(given, bool) else len(message.calls)
        call = message.calls.get(index)
        events: list[Event] = []
        if call is None:
            call_id = as_str(chunk.get("id"))
            if not call_id:
                raise IngestError(
                    f"a raw {_PROVIDER} tool_call_chunk (index {index}) names no 'id' in its first fragment: which "
                    "call do its arguments belong to?"
                )
            call = message.calls[index] = _Call(call_id, as_str(chunk.get("name")) or None)
            events.append(ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.START))
        fragment = as_str(chunk.get("args"))
        if fragment:
            events.append(
                ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.ARGS_DELTA, args_delta=fragment)
            )
        return events

    def _end_calls(self, message: _Message) -> list[Event]:
        """The message's streamed calls are complete (its last chunk came): each call's ``end``."""
        events: list[Event] = []
        for call in message.calls.values():
            if call.id not in self._called:
                self._called.add(call.id)
                events.append(ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.END))
        message.calls.clear()
        return events

    def _partial(self, data: Any, subgraph: bool) -> list[Event]:
        """The server's ``messages`` mode: each AI message so far; its text as a snapshot."""
        events: list[Event] = []
        for item in data if isinstance(data, list) else []:
            message = as_dict(item)
            if as_str(message.get("type")) in _AI:
                events += self._snapshot(message)
        return events

    def _snapshot(self, message: JsonObject) -> list[Event]:
        message_id = as_str(message.get("id")) or None
        events, open_message = self._message(message_id)
        if message_id is not None:
            self._streamed.add(message_id)
        for text, visibility in _content(message.get("content"), joined=True):
            events.append(
                TextEvent(
                    run=self._run, mode=TextMode.SNAPSHOT, text=text, message=open_message.index, visibility=visibility
                )
            )
        return events

    def _complete(self, data: Any, subgraph: bool) -> list[Event]:
        """A whole message (the server's ``messages`` mode): an AI message's text and its calls; a tool's result."""
        events: list[Event] = []
        for item in data if isinstance(data, list) else []:
            message = as_dict(item)
            kind = as_str(message.get("type"))
            if kind in _TOOL:
                events += self._tool_result(message)
            elif kind in _AI:
                events += self._snapshot(message)
                events += self._whole_calls(message)
        return events

    def _whole_calls(self, message: JsonObject) -> list[Event]:
        """A message's complete ``tool_calls`` (``name``, ``args`` an object, ``id``), each once."""
        events: list[Event] = []
        calls = message.get("tool_calls")
        for item in calls if isinstance(calls, list) else []:
            call = as_dict(item)
            call_id = as_str(call.get("id"))
            if not call_id or call_id in self._called:
                continue
            self._called.add(call_id)
            events += whole_tool_call(self._run, call_id, as_str(call.get("name")) or None, call.get("args"), None)
        return events

    def _tool_result(self, message: JsonObject) -> list[Event]:
        call_id = as_str(message.get("tool_call_id"))
        if not call_id or call_id in self._results:
            return []
        self._results.add(call_id)
        failed = message.get("status") == "error"
        summary = "error: " + one_line(as_str(message.get("content")) or "tool failed") if failed else "done"
        return [ToolResult(run=self._run, id=call_id, name=as_str(message.get("name")) or None, summary=summary)]

    # --- updates, values, custom ------------------------------------------------------------------------

    def _updates(self, data: Any, subgraph: bool) -> list[Event]:
        """``{node: output}``: what each node wrote (its messages not streamed already) and the interrupts."""
        update = as_dict(data)
        events: list[Event] = []
        if not subgraph:
            for node, output in update.items():
                if node != INTERRUPT:
                    events += self._written(output)
        interrupts = update.get(INTERRUPT)
        if isinstance(interrupts, list):
            events += self._ask(interrupts)
        return events

    def _written(self, output: Any) -> list[Event]:
        """A node's output: its AI messages (text once, calls once) and tool results."""
        messages = as_dict(output).get("messages")
        if isinstance(messages, dict):
            messages = [messages]
        events: list[Event] = []
        for item in messages if isinstance(messages, list) else []:
            message = as_dict(item)
            kind = as_str(message.get("type"))
            if kind in _TOOL:
                events += self._tool_result(message)
                continue
            if kind not in _AI:
                continue
            message_id = as_str(message.get("id"))
            if message_id not in self._streamed:  # only updates streamed: the node's message whole
                if message_id:
                    self._streamed.add(message_id)
                events += self._end_message()
                index = self._messages.start()
                events += [text_event(self._run, index, t, v) for t, v in _content(message.get("content"), joined=True)]
                events += self._end_message()
            events += self._whole_calls(message)
        return events

    def _values(self, data: Any, subgraph: bool) -> list[Event]:
        interrupts = as_dict(data).get(INTERRUPT)
        return self._ask(interrupts) if isinstance(interrupts, list) else []

    def _custom(self, data: Any, subgraph: bool) -> list[Event]:
        text = (
            data
            if isinstance(data, str)
            else next((v for k in ("status", "message", "text") if isinstance(v := as_dict(data).get(k), str)), "")
        )
        text = one_line(text, 200)
        return [Status(run=self._run, text=text)] if text else []

    def _error(self, data: Any, subgraph: bool) -> list[Event]:
        error = as_dict(data)
        text = ": ".join(p for p in (as_str(error.get("error")), as_str(error.get("message"))) if p)
        if not text and isinstance(data, str):
            text = data
        return [*self._end_message(), stream_failed(self._run, one_line(text or "LangGraph run error", 500))]

    # --- interrupts -------------------------------------------------------------------------------------

    def _ask(self, interrupts: list[Any]) -> list[Event]:
        """One ``approval.request`` per interrupt not asked yet (its ``id``; an interrupt without one: numbered)."""
        events: list[Event] = []
        for item in interrupts:
            interrupt = as_dict(item)
            if "value" not in interrupt:
                continue
            key = as_str(interrupt.get("id")) or _compact(interrupt["value"])  # an older langgraph's: no id
            if key in self._asked:
                continue
            self._asked.add(key)
            self._interrupts += 1
            interrupt_id = as_str(interrupt.get("id")) or f"interrupt-{self._interrupts}"
            question, action = _asked(interrupt["value"])
            events.append(approval_event(self._run, interrupt_id, question, action))
        return events


def _part(raw: Any) -> tuple[str, bool, Any, list[Any]]:
    """``(mode, from a subgraph, data, interrupts)`` of one line in either shape (module docstring).

    Raises:
        IngestError: neither shape.
    """
    if not isinstance(raw, dict):
        raise IngestError(f"a raw {_PROVIDER} stream part must be a JSON object, got {type(raw).__name__}")
    event = raw.get("event")
    if isinstance(event, str) and event:
        mode, _, namespace = event.partition(NS_SEP)
        return mode, bool(namespace), raw.get("data"), []
    kind = raw.get("type")
    if isinstance(kind, str) and kind and "data" in raw:
        ns = raw.get("ns")
        interrupts = raw.get("interrupts")
        return kind, bool(ns), raw["data"], interrupts if isinstance(interrupts, list) else []
    raise IngestError(
        f"a raw {_PROVIDER} stream part needs a string 'event' (the server's SSE event, with its 'data') or a string "
        "'type' with 'data' (graph.stream(..., version=\"v2\")): is the run.start's 'format' the stream's format?"
    )


def _content(content: Any, *, joined: bool = False) -> list[tuple[str, Visibility]]:
    """The text of a message's ``content``: a string (answer), or content blocks (``text``; ``reasoning`` /
    ``thinking``: reasoning), in order; ``joined`` gives one text per visibility (a snapshot's whole text)."""
    if isinstance(content, str):
        return [(content, Visibility.ANSWER)] if content else []
    parts: list[tuple[str, Visibility]] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, str):
            parts.append((block, Visibility.ANSWER))
            continue
        item = as_dict(block)
        kind = as_str(item.get("type"))
        if kind == "text":
            parts.append((as_str(item.get("text")), Visibility.ANSWER))
        elif kind in ("reasoning", "thinking"):
            parts.append((as_str(item.get(kind)) or as_str(item.get("text")), Visibility.REASONING))
    parts = [(text, visibility) for text, visibility in parts if text]
    if not joined:
        return parts
    whole: dict[Visibility, str] = {}
    for text, visibility in parts:
        whole[visibility] = whole.get(visibility, "") + text
    return [
        (text, visibility) for visibility, text in sorted(whole.items(), key=lambda kv: kv[0] != Visibility.REASONING)
    ]


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _call_text(name: str, args: Any) -> str:
    return f"{name}({_compact(args)})" if args is not None else name


def _asked(value: Any) -> tuple[str, str | None]:
    """The question and the action of an interrupt's ``value`` (module docstring)."""
    if isinstance(value, list) and value:
        value = value[0]  # an Agent Inbox list of HumanInterrupt: the first is asked
    if isinstance(value, str):
        return one_line(value, 1000) or "Approve?", None
    item = as_dict(value)
    if not item:
        return f"The agent asks: {one_line(_compact(value), 980)}", None
    requests = item.get("action_requests")
    if isinstance(requests, list) and requests:  # LangChain's human-in-the-loop middleware
        first = as_dict(requests[0])
        names = [as_str(as_dict(r).get("name")) or "a tool" for r in requests]
        question = as_str(first.get("description")) or f"Run the tool {', '.join(names)}?"
        action = "; ".join(_call_text(n, as_dict(r).get("args")) for n, r in zip(names, requests, strict=True))
        return one_line(question, 1000), one_line(action, 1000)
    request = as_dict(item.get("action_request"))
    if request:  # an Agent Inbox HumanInterrupt
        name = as_str(request.get("action")) or "a tool"
        question = as_str(item.get("description")) or f"Run the tool {name}?"
        return one_line(question, 1000), one_line(_call_text(name, request.get("args")), 1000)
    question = next((v for k in ("question", "message", "description", "prompt") if (v := as_str(item.get(k)))), "")
    action_value = item.get("action")
    said = as_str(action_value) or (_compact(action_value) if action_value is not None else "")
    if not question:
        question = f"The agent asks: {one_line(_compact(value), 980)}"
    return one_line(question, 1000), one_line(said, 1000) if said else None


# --- what each event type means (core.normalize.meanings; README "What each format's events mean") ---------------

EVENT_TYPES: EventTable = table(
    {
        "messages": (M.TEXT, M.REASONING, M.TOOL_CALL, M.TOOL_RESULT, M.BOUNDARY),
        "messages-tuple": (M.TEXT, M.REASONING, M.TOOL_CALL, M.TOOL_RESULT, M.BOUNDARY),
        "messages/partial": (M.TEXT, M.REASONING, M.BOUNDARY),
        "messages/complete": (M.TEXT, M.TOOL_CALL, M.TOOL_RESULT),
        "messages/metadata": M.IGNORED,
        "updates": (M.TEXT, M.TOOL_CALL, M.TOOL_RESULT, M.APPROVAL),
        "values": M.APPROVAL,  # the whole state: its interrupts (its messages are history, streamed already)
        "custom": M.STATUS,
        "error": M.ERROR,
        "metadata": M.IGNORED,  # the run's id
        "end": M.IGNORED,
        "debug": M.IGNORED,
        "tasks": M.IGNORED,
        "checkpoints": M.IGNORED,
        "events": M.IGNORED,
    }
)
"""Every LangGraph stream mode (the SSE event names of the server, the ``type`` of a v2 part) and what it means here."""


def event_types(raw: object) -> list[str]:
    """The table keys of one raw LangGraph line: its mode (the ``event`` before any ``|namespace``, or the ``type``)."""
    if not isinstance(raw, dict):
        return []
    event = raw.get("event")
    if isinstance(event, str):
        return [event.partition(NS_SEP)[0]]
    kind = raw.get("type")
    return [kind] if isinstance(kind, str) else []
