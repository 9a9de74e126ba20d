"""Vercel AI SDK UI message stream → normalized events.

Source: https://ai-sdk.dev/docs/ai-sdk-ui/stream-protocol (the UI message stream, header
``x-vercel-ai-ui-message-stream: v1``; chunk types in vercel/ai ``packages/ai/src/ui-message-stream/
ui-message-chunks.ts``): one JSON object per SSE ``data:`` line, the chunk type in ``type``, the stream closed by
``data: [DONE]``.

Mapping (``message`` = 0-based index of the assistant UI message: ``start`` opens the next one, ``finish`` ends
it; text before any ``start`` opens one):

===============================================  ===================================================
raw                                              normalized
===============================================  ===================================================
``text-delta``                                   ``TextEvent`` answer delta
``text-end``                                     ``BlockEnd``
``reasoning-delta``                              ``TextEvent`` reasoning delta
``tool-input-start``                             ``ToolCall`` start
``tool-input-delta`` (``inputTextDelta``)        ``ToolCall`` args_delta (held by the pipeline lane)
``tool-input-available``                         ``ToolCall`` end (start and the whole ``input`` as one
                                                 fragment first when nothing was streamed)
``tool-input-error``                             ``ToolCall`` end, ``ToolResult`` ``error: ...``
``tool-output-available`` (not preliminary)      ``ToolResult`` summary ``done`` (never the raw output)
``tool-output-error``, ``tool-output-denied``    ``ToolResult`` summary ``error: ...`` / ``denied``
``file`` (``url``, ``mediaType``)                ``Media`` (``media_kind`` from the media type; a
                                                 ``data:`` URL: a ``Status`` that it was not shown)
``finish``                                       ``MessageEnd``; its ``finishReason`` ``length``: an
                                                 ``ErrorEvent`` that ends the run ``cut``;
                                                 ``content-filter``: ``refused``; ``error`` (when no
                                                 ``error`` chunk came): ``error``
``source-url`` (``url``, ``title``)              ``Citation`` (listed as a link after the answer)
``source-document`` (``title``, ``filename``)    ``Citation`` without a URL (listed by its title)
``abort``                                        ``Status`` ``stopped`` and ``MessageEnd``
``tool-approval-request`` (``approvalId``,       ``ApprovalRequest`` (docs/approvals.md): "Run the tool
``toolCallId``)                                  NAME?", the action the call with its input; who may
                                                 decide is the channel's; denied after 10 minutes
``error`` (``errorText``)                        ``ErrorEvent`` that ends the run ``error``
===============================================  ===================================================

Ignored: ``start-step`` / ``finish-step``, ``text-start``, ``reasoning-start``, ``reasoning-end``, ``data-*``
parts (application data), ``message-metadata``, the ``[DONE]`` terminator (SSE framing; also taken as the bare
string ``"[DONE]"``), and any unknown type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import ValidationError

from streamrelay.core.errors import IngestError
from streamrelay.core.events import (
    BlockEnd,
    Event,
    MessageEnd,
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
    as_str,
    citation_event,
    invalid_event,
    media_event,
    one_line,
    require_str,
    require_type,
    text_event,
    text_field,
)
from streamrelay.core.normalize.ends import stream_cut, stream_failed, stream_refused
from streamrelay.core.normalize.meanings import EventTable, table, undeclared
from streamrelay.core.normalize.meanings import Meaning as M

_PROVIDER = "AI SDK UI"
_CHUNK_TYPE = re.compile(r"[a-z][a-z0-9-]*")
"""Every UI message stream chunk type (``text-delta``, ``tool-input-start``); ``data-*`` parts name their own."""
DONE = "[DONE]"
"""The terminator of the UI message stream (``data: [DONE]``)."""


@dataclass
class _Call:
    id: str
    name: str | None
    got_args: bool = False


class AiSdkUiNormalizer:
    """Normalizes one AI SDK UI message stream (possibly several UI messages in a row).

    Args:
        run_id: the run the events belong to (``run`` of every event).
    """

    def __init__(self, run_id: str) -> None:
        self._run = run_id
        self._messages = MessageCounter()
        self._calls: dict[str, _Call] = {}
        self._names: dict[str, str] = {}
        self._inputs: dict[str, str] = {}
        """Each complete call's input as JSON (what an approval of it says will be done), cut to 500 characters."""
        self._failed = False
        """An ``error`` chunk came: a ``finish`` with ``finishReason: "error"`` after it says nothing more."""
        self._handlers: dict[str, Callable[[JsonObject, str], list[Event]]] = {
            "start": self._start,
            "text-delta": self._text,
            "reasoning-delta": self._text,
            "text-end": self._text_end,
            "tool-input-start": self._tool_start,
            "tool-input-delta": self._tool_delta,
            "tool-input-available": self._tool_available,
            "tool-input-error": self._tool_input_error,
            "tool-output-available": self._tool_output,
            "tool-output-error": self._tool_output_error,
            "tool-output-denied": self._tool_output_error,
            "tool-approval-request": self._approval,
            "file": self._file,
            "source-url": self._source,
            "source-document": self._source,
            "finish": self._finish,
            "abort": self._abort,
            "error": self._error,
        }

    def feed(self, raw: JsonObject) -> list[Event]:
        """Normalize one raw chunk. See :class:`core.normalize.base.Normalizer`.

        Raises:
            IngestError: ``raw`` is not an object (the ``"[DONE]"`` terminator aside), has no string ``type`` or
                one no AI SDK chunk has (not lower-case with dashes: another format's event), a known chunk lacks an
                id it needs (``toolCallId``, a ``file``'s ``url``) or has a non-string text field, a
                ``tool-input-delta`` names a call never started, or a field makes no valid event.
        """
        if raw == DONE:  # type: ignore[comparison-overlap]  # the SSE terminator, when a client passes it on
            return []
        kind = require_type(raw, _PROVIDER)
        handler = self._handlers.get(kind)
        if handler is None:
            if _CHUNK_TYPE.fullmatch(kind) is None and not kind.startswith("data-"):
                raise IngestError(
                    f"{kind[:80]!r} is not an AI SDK UI message stream chunk type (they are lower-case with dashes, "
                    "like 'text-delta'): is the run.start's 'format' the stream's format?"
                )
            undeclared(_PROVIDER, EVENT_TYPES, event_types(raw))  # ignored; logged once if it has no row
            return []
        try:
            return handler(raw, kind)
        except ValidationError as exc:
            raise invalid_event(_PROVIDER, exc) from None

    def close(self) -> list[Event]:
        """End of stream: end the open message (tool calls whose input never became available stay open)."""
        return self._end_message()

    def _end_message(self) -> list[Event]:
        index = self._messages.end()
        return [] if index is None else [MessageEnd(run=self._run, message=index)]

    def _start(self, raw: JsonObject, kind: str) -> list[Event]:
        events = self._end_message()
        self._messages.start()
        return events

    def _text(self, raw: JsonObject, kind: str) -> list[Event]:
        delta = text_field(raw, "delta", _PROVIDER, kind)
        visibility = Visibility.ANSWER if kind == "text-delta" else Visibility.REASONING
        return [text_event(self._run, self._messages.ensure(), delta, visibility)] if delta else []

    def _text_end(self, raw: JsonObject, kind: str) -> list[Event]:
        return [BlockEnd(run=self._run, message=self._messages.ensure())]

    def _tool(self, call: _Call, state: ToolCallState, args_delta: str | None = None) -> ToolCall:
        return ToolCall(run=self._run, id=call.id, name=call.name, state=state, args_delta=args_delta)

    def _open_call(self, raw: JsonObject, kind: str) -> tuple[list[Event], _Call]:
        """The call ``toolCallId`` names, started now if this is its first chunk."""
        call_id = require_str(raw, "toolCallId", _PROVIDER, kind)
        call = self._calls.get(call_id)
        if call is not None:
            return [], call
        self._messages.ensure()
        call = self._calls[call_id] = _Call(call_id, text_field(raw, "toolName", _PROVIDER, kind) or None)
        if call.name is not None:
            self._names[call_id] = call.name
        return [self._tool(call, ToolCallState.START)], call

    def _tool_start(self, raw: JsonObject, kind: str) -> list[Event]:
        return self._open_call(raw, kind)[0]

    def _tool_delta(self, raw: JsonObject, kind: str) -> list[Event]:
        call_id = require_str(raw, "toolCallId", _PROVIDER, kind)
        if call_id not in self._calls:
            raise IngestError(
                f"a raw {_PROVIDER} {kind} event for tool call {call_id[:80]!r} that was never started (send its "
                "tool-input-start first) or whose input is already complete"
            )
        events, call = self._open_call(raw, kind)
        fragment = text_field(raw, "inputTextDelta", _PROVIDER, kind)
        if fragment:
            call.got_args = True
            events.append(self._tool(call, ToolCallState.ARGS_DELTA, fragment))
        return events

    def _close_call(self, raw: JsonObject, kind: str) -> list[Event]:
        """The call's input is complete: its arguments (when none were streamed) and its ``end``."""
        events, call = self._open_call(raw, kind)
        del self._calls[call.id]
        if raw.get("input") is not None:
            self._inputs[call.id] = json.dumps(raw["input"], ensure_ascii=False)[:500]
        if not call.got_args and raw.get("input") is not None:
            fragment = json.dumps(raw["input"], ensure_ascii=False)
            events.append(self._tool(call, ToolCallState.ARGS_DELTA, fragment))
        events.append(self._tool(call, ToolCallState.END))
        return events

    def _tool_available(self, raw: JsonObject, kind: str) -> list[Event]:
        return self._close_call(raw, kind)

    def _tool_input_error(self, raw: JsonObject, kind: str) -> list[Event]:
        events = self._close_call(raw, kind)
        call_id = require_str(raw, "toolCallId", _PROVIDER, kind)
        summary = "error: " + (one_line(text_field(raw, "errorText", _PROVIDER, kind)) or "invalid input")
        return [*events, ToolResult(run=self._run, id=call_id, name=self._name(raw, call_id), summary=summary)]

    def _tool_output(self, raw: JsonObject, kind: str) -> list[Event]:
        call_id = require_str(raw, "toolCallId", _PROVIDER, kind)
        if raw.get("preliminary") is True:
            return []  # an intermediate output: the final one follows
        return [ToolResult(run=self._run, id=call_id, name=self._name(raw, call_id), summary="done")]

    def _tool_output_error(self, raw: JsonObject, kind: str) -> list[Event]:
        call_id = require_str(raw, "toolCallId", _PROVIDER, kind)
        error = one_line(text_field(raw, "errorText", _PROVIDER, kind))
        summary = "denied" if kind == "tool-output-denied" else "error: " + (error or "tool failed")
        return [ToolResult(run=self._run, id=call_id, name=self._name(raw, call_id), summary=summary)]

    def _approval(self, raw: JsonObject, kind: str) -> list[Event]:
        """A tool call waits for a person's approval: an ``approval.request`` whose id is the ``approvalId``."""
        approval_id = require_str(raw, "approvalId", _PROVIDER, kind)
        call_id = require_str(raw, "toolCallId", _PROVIDER, kind)
        name = self._name(raw, call_id) or "a tool"
        args = self._inputs.get(call_id)
        action = f"{name}({args})" if args is not None else f"call {name}"
        return [approval_event(self._run, approval_id, f"Run the tool {name}?", one_line(action, 1000))]

    def _name(self, raw: JsonObject, call_id: str) -> str | None:
        return self._names.get(call_id) or as_str(raw.get("toolName")) or None

    def _file(self, raw: JsonObject, kind: str) -> list[Event]:
        url = require_str(raw, "url", _PROVIDER, kind)
        mime = text_field(raw, "mediaType", _PROVIDER, kind)
        self._messages.ensure()
        return [media_event(self._run, url, mime, None)]

    def _source(self, raw: JsonObject, kind: str) -> list[Event]:
        """A source the answer cites: a ``source-url`` by its URL, a ``source-document`` by its title (or file name)."""
        if kind == "source-url":
            return citation_event(self._run, raw.get("url"), raw.get("title"))
        return citation_event(self._run, None, as_str(raw.get("title")) or raw.get("filename"))

    def _finish(self, raw: JsonObject, kind: str) -> list[Event]:
        reason = as_str(raw.get("finishReason"))
        told: list[Event] = []
        if reason == "length":
            told = [stream_cut(self._run, reason)]
        elif reason == "content-filter":
            told = [stream_refused(self._run, "the provider's content filter stopped the answer")]
        elif reason == "error" and not self._failed:
            told = [stream_failed(self._run, "the agent's stream ended in an error")]
        return told + self._end_message()

    def _abort(self, raw: JsonObject, kind: str) -> list[Event]:
        reason = one_line(as_str(raw.get("reason")))
        status = Status(run=self._run, text=f"stopped: {reason}" if reason else "stopped")
        return [status, *self._end_message()]

    def _error(self, raw: JsonObject, kind: str) -> list[Event]:
        text = text_field(raw, "errorText", _PROVIDER, kind)
        self._failed = True
        return [stream_failed(self._run, text or "agent stream error")]


# --- what each event type means (core.normalize.meanings; README "What each format's events mean") ---------------

EVENT_TYPES: EventTable = table(
    {
        "start": M.BOUNDARY,
        "text-start": M.IGNORED,
        "text-delta": M.TEXT,
        "text-end": M.BOUNDARY,
        "reasoning-start": M.IGNORED,
        "reasoning-delta": M.REASONING,
        "reasoning-end": M.IGNORED,
        "tool-input-start": M.TOOL_CALL,
        "tool-input-delta": M.TOOL_CALL,
        "tool-input-available": M.TOOL_CALL,
        "tool-input-error": (M.TOOL_CALL, M.TOOL_RESULT),
        "tool-output-available": M.TOOL_RESULT,
        "tool-output-error": M.TOOL_RESULT,
        "tool-output-denied": M.TOOL_RESULT,
        "tool-approval-request": M.APPROVAL,
        "file": (M.MEDIA, M.NOT_SHOWN),
        "source-url": M.SOURCE,
        "source-document": M.SOURCE,
        "data-*": M.IGNORED,  # application data (data-weather): the client's UI renders it, not a chat
        "message-metadata": M.IGNORED,
        "start-step": M.IGNORED,
        "finish-step": M.IGNORED,
        "finish": (M.BOUNDARY, M.CUT, M.REFUSAL, M.ERROR),
        "abort": (M.STATUS, M.BOUNDARY),
        "error": M.ERROR,
    }
)
"""Every AI SDK UI message stream chunk type (vercel/ai ``ui-message-chunks.ts``) and what it means here."""


def event_types(raw: object) -> list[str]:
    """The table keys of one raw AI SDK line: its ``type`` (every ``data-NAME`` is ``data-*``)."""
    kind = raw.get("type") if isinstance(raw, dict) else None
    if not isinstance(kind, str):
        return []
    return ["data-*" if kind.startswith("data-") else kind]
