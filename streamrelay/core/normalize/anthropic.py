"""Anthropic Messages stream → normalized events.

Source: https://docs.anthropic.com/en/docs/build-with-claude/streaming (event types ``message_start``,
``content_block_start`` / ``_delta`` / ``_stop``, ``message_delta``, ``message_stop``, ``ping``,
``error``).

Mapping (``message`` = 0-based index of the assistant message, one per ``message_start``):

=====================================================  ==============================================
raw                                                    normalized
=====================================================  ==============================================
``text_delta`` in a ``text`` block                     ``TextEvent`` answer delta
``thinking_delta`` in a ``thinking`` block             ``TextEvent`` reasoning delta
``content_block_stop`` of a ``text`` block             ``BlockEnd``
``tool_use`` / ``server_tool_use`` / ``mcp_tool_use``  ``ToolCall`` start, ``args_delta`` per
                                                       ``input_json_delta``, end at its block stop
``*_tool_result`` block (``web_search_tool_result``)   ``ToolResult`` with a short summary
``citations_delta`` (``citation``), a ``text`` block's   ``Citation``: a web search result by its ``url``
``citations``                                          and ``title``, a search result by its ``source``,
                                                       a document by its ``document_title`` (else
                                                       "cited document N"): listed after the answer
``message_stop``                                       ``MessageEnd``
``error`` (``overloaded_error``, ``api_error``, ...)   ``ErrorEvent`` that ends the run ``error``
``message_delta`` ``stop_reason: "refusal"``           ``ErrorEvent`` that ends the run ``refused``: the
                                                       ``stop_details.explanation`` (or its ``category``)
                                                       is the notice's text; text said before it is shown,
                                                       never committed
``stop_reason`` ``max_tokens`` /                       ``ErrorEvent`` that ends the run ``cut`` (before
``model_context_window_exceeded``                      the ``MessageEnd``; a tool call it cut stays open)
=====================================================  ==============================================

``stop_reason`` ``end_turn``, ``tool_use``, ``stop_sequence`` and ``pause_turn`` (the runtime continues the turn
in a next message) end a message normally; the latest is kept in :attr:`stop_reason`.

Ignored on purpose: ``ping``, ``signature_delta``, a citation's ``cited_text`` (the quoted text is not answer text),
``compaction`` blocks and their ``compaction_delta`` (a summary of earlier turns, not answer text),
``redacted_thinking``, the ``message_delta`` usage, and any unknown event or block type (forward compatibility).
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from streamrelay.core.events import (
    BlockEnd,
    Event,
    MessageEnd,
    ToolCall,
    ToolCallState,
    ToolResult,
    Visibility,
)
from streamrelay.core.normalize.base import (
    JsonObject,
    MessageCounter,
    as_dict,
    as_str,
    citation_event,
    int_field,
    invalid_event,
    require_type,
    text_event,
)
from streamrelay.core.normalize.ends import stream_cut, stream_failed, stream_refused
from streamrelay.core.normalize.meanings import EventTable, table, undeclared
from streamrelay.core.normalize.meanings import Meaning as M

_PROVIDER = "Anthropic"
_TOOL_USE_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
CUT_REASONS = frozenset({"max_tokens", "model_context_window_exceeded"})
"""``stop_reason`` values that mean the answer was cut off at a limit (https://docs.anthropic.com/en/api/handling-stop-reasons)."""


class _BlockKind(enum.StrEnum):
    TEXT = "text"
    THINKING = "thinking"
    TOOL = "tool"
    IGNORED = "ignored"


_TEXT, _THINKING, _TOOL = _BlockKind.TEXT, _BlockKind.THINKING, _BlockKind.TOOL
_ANSWER, _REASONING, _ARGS_DELTA = Visibility.ANSWER, Visibility.REASONING, ToolCallState.ARGS_DELTA
"""The members :meth:`AnthropicNormalizer._delta` reads on every delta, looked up once: on CPython 3.11 an enum
member's lookup on its class goes through ``EnumType.__getattr__``'s hook (a call, ~0.3 µs here)."""


@dataclass
class _Block:
    kind: _BlockKind
    tool_id: str = ""
    tool_name: str | None = None
    start_input: JsonObject = field(default_factory=dict)
    got_args: bool = False


class AnthropicNormalizer:
    """Normalizes one Anthropic Messages stream (possibly several messages in a row).

    Args:
        run_id: the run the events belong to (``run`` of every event).
    """

    def __init__(self, run_id: str) -> None:
        self._run = run_id
        self._messages = MessageCounter()
        self._blocks: dict[int, _Block] = {}
        self._tool_names: dict[str, str] = {}
        self.stop_reason: str | None = None
        """``stop_reason`` of the latest ``message_delta`` (``end_turn``, ``tool_use``, ``max_tokens``...)."""

    def feed(self, raw: JsonObject) -> list[Event]:
        """Normalize one raw event. See :class:`core.normalize.base.Normalizer`.

        Raises:
            IngestError: ``raw`` is not an object, has no string ``type``, a content block event's ``index`` is not
                an integer (``true``, ``1.0``, ``"1"``), or it gives a field no event can hold (an id with a lone
                surrogate).
        """
        kind = require_type(raw, _PROVIDER)
        try:
            return self._feed(kind, raw)
        except ValidationError as exc:
            raise invalid_event(_PROVIDER, exc) from None

    def _feed(self, kind: str, raw: JsonObject) -> list[Event]:
        if kind == "content_block_delta":
            return self._delta(raw)
        if kind == "content_block_start":
            return self._block_start(raw)
        if kind == "content_block_stop":
            return self._block_stop(raw)
        if kind == "message_start":
            events = self._end_message()
            self._messages.start()
            self.stop_reason = None
            return events
        if kind == "message_delta":
            return self._stop(as_dict(raw.get("delta")))
        if kind == "message_stop":
            return self._end_message()
        if kind == "error":
            error = as_dict(raw.get("error"))
            text = ": ".join(p for p in (as_str(error.get("type")), as_str(error.get("message"))) if p)
            return [stream_failed(self._run, text or "provider stream error")]
        undeclared(_PROVIDER, EVENT_TYPES, (kind,))  # ignored (forward compatibility), logged once if it has no row
        return []

    def close(self) -> list[Event]:
        """End of stream: end open text blocks and the open message (tool calls stay unended)."""
        return self._end_message()

    def _stop(self, delta: JsonObject) -> list[Event]:
        """A ``message_delta``'s ``stop_reason``: kept; a refusal ends the run ``refused`` (with its explanation), a
        length limit ``cut``."""
        reason = delta.get("stop_reason")
        if not isinstance(reason, str):
            return []
        self.stop_reason = reason
        if reason in CUT_REASONS:
            return [stream_cut(self._run, reason)]
        if reason != "refusal":
            return []
        details = as_dict(delta.get("stop_details"))
        explanation = as_str(details.get("explanation"))
        if not explanation and as_str(details.get("category")):
            explanation = f"the request falls under the {as_str(details.get('category'))} policy"
        return [stream_refused(self._run, explanation)]

    def _block_start(self, raw: JsonObject) -> list[Event]:
        index = int_field(raw, "index", _PROVIDER, "content_block_start event")  # before anything changes
        message = self._messages.ensure()
        block = as_dict(raw.get("content_block"))
        btype = as_str(block.get("type"))
        if index is None:
            return []
        if btype == "text":
            self._blocks[index] = _Block(_BlockKind.TEXT)
            cited = block.get("citations")
            sources = (
                [e for c in cited if isinstance(c, dict) for e in self._citation(c)] if isinstance(cited, list) else []
            )
            return self._text(message, as_str(block.get("text")), Visibility.ANSWER) + sources
        if btype == "thinking":
            self._blocks[index] = _Block(_BlockKind.THINKING)
            return self._text(message, as_str(block.get("thinking")), Visibility.REASONING)
        if btype in _TOOL_USE_BLOCKS:
            tool_id = as_str(block.get("id"))
            name = as_str(block.get("name")) or None
            self._blocks[index] = _Block(
                _BlockKind.TOOL, tool_id=tool_id, tool_name=name, start_input=as_dict(block.get("input"))
            )
            if name:
                self._tool_names[tool_id] = name
            return [ToolCall(run=self._run, id=tool_id, name=name, state=ToolCallState.START)]
        self._blocks[index] = _Block(_BlockKind.IGNORED)
        if btype.endswith("_tool_result"):
            tool_id = as_str(block.get("tool_use_id"))
            summary = _result_summary(block.get("content"))
            return [ToolResult(run=self._run, id=tool_id, name=self._tool_names.get(tool_id), summary=summary)]
        return []

    def _delta(self, raw: JsonObject) -> list[Event]:
        delta = as_dict(raw.get("delta"))
        dtype = delta.get("type")
        index = int_field(raw, "index", _PROVIDER, "content_block_delta event")
        block = self._blocks.get(index) if index is not None else None
        if dtype == "text_delta":
            if block is None or block.kind is _TEXT:
                return self._text(self._messages.ensure(), as_str(delta.get("text")), _ANSWER)
        elif dtype == "thinking_delta":
            if block is None or block.kind is _THINKING:
                return self._text(self._messages.ensure(), as_str(delta.get("thinking")), _REASONING)
        elif dtype == "citations_delta":
            return self._citation(as_dict(delta.get("citation")))
        elif dtype == "input_json_delta" and block is not None and block.kind is _TOOL:
            fragment = as_str(delta.get("partial_json"))
            if fragment:
                block.got_args = True
                return [self._tool(block, _ARGS_DELTA, args_delta=fragment)]
        return []

    def _citation(self, citation: JsonObject) -> list[Event]:
        """A source the answer cites (https://docs.anthropic.com/en/docs/build-with-claude/citations): a web search
        result (``url``, ``title``), a search result (``source``, ``title``), or a document (``char_location``,
        ``page_location``, ``content_block_location``: its ``document_title``, else its place among the documents)."""
        ctype = as_str(citation.get("type"))
        if ctype == "web_search_result_location":
            return citation_event(self._run, citation.get("url"), citation.get("title"))
        if ctype == "search_result_location":
            return citation_event(self._run, citation.get("source"), citation.get("title"))
        title = as_str(citation.get("document_title")).strip()
        index = citation.get("document_index")
        if not title and isinstance(index, int) and not isinstance(index, bool) and index >= 0:
            title = f"cited document {index + 1}"
        return citation_event(self._run, None, title)

    def _block_stop(self, raw: JsonObject) -> list[Event]:
        index = int_field(raw, "index", _PROVIDER, "content_block_stop event")
        block = self._blocks.pop(index, None) if index is not None else None
        if block is None:
            return []
        if block.kind is _BlockKind.TEXT:
            return [BlockEnd(run=self._run, message=self._messages.ensure())]
        if block.kind is _BlockKind.TOOL:
            events: list[Event] = []
            if not block.got_args and block.start_input:
                # Arguments given whole in the start block (not streamed): hand them on as one fragment.
                fragment = json.dumps(block.start_input, ensure_ascii=False)
                events.append(self._tool(block, ToolCallState.ARGS_DELTA, args_delta=fragment))
            events.append(self._tool(block, ToolCallState.END))
            return events
        return []

    def _end_message(self) -> list[Event]:
        """End open text blocks and the open message; forget tool blocks the provider never closed."""
        events: list[Event] = []
        if self._messages.current is None:
            self._blocks.clear()
            return events
        for index in sorted(self._blocks):
            if self._blocks[index].kind is _BlockKind.TEXT:
                events.append(BlockEnd(run=self._run, message=self._messages.current))
        self._blocks.clear()
        events.append(MessageEnd(run=self._run, message=self._messages.end()))
        return events

    def _text(self, message: int, text: str, visibility: Visibility) -> list[Event]:
        return [text_event(self._run, message, text, visibility)] if text else []

    def _tool(self, block: _Block, state: ToolCallState, args_delta: str | None = None) -> ToolCall:
        return ToolCall(run=self._run, id=block.tool_id, name=block.tool_name, state=state, args_delta=args_delta)


def _result_summary(content: Any) -> str:
    """A short, human summary of a server tool result block's ``content`` (never the raw output).

    Returns e.g. ``"5 results"``, ``"1 tool found"``, ``"error: max_uses_exceeded"``, ``"done"``.
    """
    if isinstance(content, list):
        return _count(len(content), "result")
    body = as_dict(content)
    if as_str(body.get("type")).endswith("_error"):
        return f"error: {as_str(body.get('error_code')) or 'unknown'}"
    references = body.get("tool_references")
    if isinstance(references, list):
        return _count(len(references), "tool") + " found"
    return_code = body.get("return_code")
    if type(return_code) is int:  # tolerant, like a summary's other fields, but never ``true`` as exit code True
        return f"exit code {return_code}"
    return "done"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


# --- what each event type means (core.normalize.meanings; README "What each format's events mean") ---------------

EVENT_TYPES: EventTable = table(
    {
        "message_start": M.BOUNDARY,
        "message_delta": M.BOUNDARY,  # its stop_reason, below
        "message_stop": M.BOUNDARY,
        "content_block_start": M.BOUNDARY,  # by its block type, below
        "content_block_delta": M.TEXT,  # by its delta type, below
        "content_block_stop": M.BOUNDARY,
        "ping": M.IGNORED,
        "error": M.ERROR,
        "block/text": M.TEXT,
        "block/thinking": M.REASONING,
        "block/redacted_thinking": M.IGNORED,  # encrypted reasoning: nothing to read
        "block/tool_use": M.TOOL_CALL,
        "block/server_tool_use": M.TOOL_CALL,
        "block/mcp_tool_use": M.TOOL_CALL,
        "block/web_search_tool_result": M.TOOL_RESULT,
        "block/web_fetch_tool_result": M.TOOL_RESULT,
        "block/code_execution_tool_result": M.TOOL_RESULT,
        "block/bash_code_execution_tool_result": M.TOOL_RESULT,
        "block/text_editor_code_execution_tool_result": M.TOOL_RESULT,
        "block/mcp_tool_result": M.TOOL_RESULT,
        "block/tool_search_tool_result": M.TOOL_RESULT,
        "block/container_upload": M.IGNORED,
        "block/compaction": M.IGNORED,  # a summary of earlier turns, not answer text
        "delta/text_delta": M.TEXT,
        "delta/thinking_delta": M.REASONING,
        "delta/input_json_delta": M.TOOL_CALL,
        "delta/signature_delta": M.IGNORED,
        "delta/citations_delta": M.SOURCE,
        "delta/compaction_delta": M.IGNORED,
        "stop/end_turn": M.BOUNDARY,
        "stop/tool_use": M.BOUNDARY,
        "stop/stop_sequence": M.BOUNDARY,
        "stop/pause_turn": M.BOUNDARY,
        "stop/refusal": M.REFUSAL,
        "stop/max_tokens": M.CUT,
        "stop/model_context_window_exceeded": M.CUT,
    }
)
"""Every Anthropic Messages stream event, content block, delta and stop reason type and what it means here."""


def event_types(raw: object) -> list[str]:
    """The table keys of one raw Anthropic line: its ``type``, and its block's, delta's or stop reason's."""
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        return []
    keys = [raw["type"]]
    for field_name, prefix in (("content_block", "block/"), ("delta", "delta/")):
        inner = raw.get(field_name)
        if isinstance(inner, dict) and isinstance(inner.get("type"), str):
            keys.append(prefix + inner["type"])
    delta = raw.get("delta")
    if raw["type"] == "message_delta" and isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
        keys.append("stop/" + delta["stop_reason"])
    return keys
