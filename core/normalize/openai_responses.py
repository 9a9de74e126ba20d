"""OpenAI Responses stream → normalized events.

Source: https://platform.openai.com/docs/api-reference/responses-streaming (events ``response.created``,
``response.output_item.added`` / ``.done``, ``response.output_text.delta`` / ``.done``,
``response.reasoning_summary_text.delta``, ``response.function_call_arguments.delta`` / ``.done``,
``response.web_search_call.*``, ``response.completed``, ``error``).

Mapping (``message`` = 0-based index of the response in the stream: each ``response.created`` opens
the next one, so several responses in a row each get their own index):

===========================================================  =========================================
raw                                                          normalized
===========================================================  =========================================
``response.output_text.delta``, ``response.refusal.delta``   ``TextEvent`` answer delta
``response.reasoning_summary_text.delta``,                   ``TextEvent`` reasoning delta (summary
``response.reasoning_text.delta``                            parts after the first open with ``\\n\\n``)
``response.output_text.done``, ``response.refusal.done``     ``BlockEnd``
``output_item.added`` of a ``function_call``                 ``ToolCall`` start (``id`` = ``call_id``)
``response.function_call_arguments.delta``                   ``ToolCall`` args_delta
``response.function_call_arguments.done`` (or the item's     ``ToolCall`` end (a missing tail of the
``output_item.done``)                                        arguments is sent first as a fragment)
``web_search_call`` item added / ``.searching`` / done       ``ToolCall`` start / ``Status`` / ``ToolCall``
                                                             end (``args`` = the search action) and
                                                             ``ToolResult``
``response.completed`` / ``response.incomplete``             ``MessageEnd``
``response.failed``, ``error``                               ``ErrorEvent`` (+ ``MessageEnd``)
===========================================================  =========================================

Ignored: ``response.in_progress``, ``output_text.annotation.added`` (annotations are not text),
``content_part.*``, other hosted tool items, and any unknown event type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from core.events import (
    BlockEnd,
    ErrorEvent,
    Event,
    MessageEnd,
    Status,
    ToolCall,
    ToolCallState,
    ToolResult,
    Visibility,
)
from core.normalize.base import JsonObject, MessageCounter, as_dict, as_str, invalid_event, require_type, text_event

_PROVIDER = "OpenAI Responses"
_WEB_SEARCH = "web_search"

_ANSWER_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
_REASONING_DELTAS = frozenset({"response.reasoning_summary_text.delta", "response.reasoning_text.delta"})
_TEXT_DONE = frozenset({"response.output_text.done", "response.refusal.done"})
_RESPONSE_END = frozenset({"response.completed", "response.incomplete"})


@dataclass
class _Call:
    id: str
    name: str | None
    parts: list[str] = field(default_factory=list)


class OpenAIResponsesNormalizer:
    """Normalizes one OpenAI Responses stream (possibly several responses in a row).

    Args:
        run_id: the run the events belong to (``run`` of every event).
    """

    def __init__(self, run_id: str) -> None:
        self._run = run_id
        self._messages = MessageCounter()
        self._calls: dict[str, _Call] = {}

    def feed(self, raw: JsonObject) -> list[Event]:
        """Normalize one raw event. See :class:`core.normalize.base.Normalizer`.

        Raises:
            IngestError: ``raw`` is not an object, has no string ``type``, or gives a field no event can hold (an id
                with a lone surrogate).
        """
        kind = require_type(raw, _PROVIDER)
        try:
            return self._feed(kind, raw)
        except ValidationError as exc:
            raise invalid_event(_PROVIDER, exc) from None

    def _feed(self, kind: str, raw: JsonObject) -> list[Event]:
        if kind in _ANSWER_DELTAS:
            return self._text(as_str(raw.get("delta")), Visibility.ANSWER)
        if kind in _REASONING_DELTAS:
            return self._text(as_str(raw.get("delta")), Visibility.REASONING)
        if kind == "response.function_call_arguments.delta":
            return self._args_delta(as_str(raw.get("item_id")), as_str(raw.get("delta")))
        return self._other(kind, raw)

    def close(self) -> list[Event]:
        """End of stream: end the open response (tool calls not declared complete stay unended)."""
        return self._end_response()

    def _other(self, kind: str, raw: JsonObject) -> list[Event]:
        if kind == "response.created":
            events = self._end_response()
            self._messages.start()
            return events
        if kind == "response.output_item.added":
            return self._item_added(as_dict(raw.get("item")))
        if kind == "response.output_item.done":
            return self._item_done(as_dict(raw.get("item")))
        if kind == "response.function_call_arguments.done":
            return self._end_call(as_str(raw.get("item_id")), raw.get("arguments"))
        if kind in _TEXT_DONE:
            return [BlockEnd(run=self._run, message=self._messages.ensure())]
        if kind == "response.reasoning_summary_part.added":
            index = raw.get("summary_index")
            return self._text("\n\n", Visibility.REASONING) if isinstance(index, int) and index > 0 else []
        if kind == "response.web_search_call.searching":
            return [Status(run=self._run, text="searching the web")]
        if kind in _RESPONSE_END:
            return self._end_response()
        if kind == "response.failed":
            error = as_dict(as_dict(raw.get("response")).get("error"))
            return [self._error(error), *self._end_response()]
        if kind == "error":
            return [self._error(raw)]
        return []

    def _item_added(self, item: JsonObject) -> list[Event]:
        itype = item.get("type")
        if itype not in ("function_call", "web_search_call"):
            return []
        self._messages.ensure()
        item_id = as_str(item.get("id"))
        if itype == "function_call":
            call = _Call(id=as_str(item.get("call_id")) or item_id, name=as_str(item.get("name")) or None)
        else:
            call = _Call(id=item_id, name=_WEB_SEARCH)
        self._calls[item_id] = call
        events: list[Event] = [ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.START)]
        arguments = as_str(item.get("arguments"))
        if arguments:
            events += self._args_delta(item_id, arguments)
        return events

    def _item_done(self, item: JsonObject) -> list[Event]:
        itype = item.get("type")
        item_id = as_str(item.get("id"))
        if itype == "function_call":
            return self._end_call(item_id, item.get("arguments"))
        if itype != "web_search_call":
            return []
        call = self._calls.pop(item_id, None)
        if call is None:
            return []
        action = as_dict(item.get("action"))
        args = {k: v for k, v in action.items() if k != "sources"}  # sources are results, not arguments
        return [
            ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.END, args=args or None),
            ToolResult(run=self._run, id=call.id, name=call.name, summary=_search_summary(action)),
        ]

    def _args_delta(self, item_id: str, fragment: str) -> list[Event]:
        call = self._calls.get(item_id)
        if call is None or not fragment:
            return []
        call.parts.append(fragment)
        return [
            ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.ARGS_DELTA, args_delta=fragment)
        ]

    def _end_call(self, item_id: str, arguments: Any) -> list[Event]:
        """End a function call; first send the tail of ``arguments`` the deltas did not carry, if any."""
        call = self._calls.get(item_id)
        if call is None:
            return []
        events: list[Event] = []
        full = as_str(arguments)
        streamed = "".join(call.parts)
        if len(full) > len(streamed) and full.startswith(streamed):
            events += self._args_delta(item_id, full[len(streamed) :])
        del self._calls[item_id]
        events.append(ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.END))
        return events

    def _end_response(self) -> list[Event]:
        self._calls.clear()  # calls never declared complete stay unended: never acted on
        message = self._messages.end()
        return [] if message is None else [MessageEnd(run=self._run, message=message)]

    def _text(self, text: str, visibility: Visibility) -> list[Event]:
        return [text_event(self._run, self._messages.ensure(), text, visibility)] if text else []

    def _error(self, error: JsonObject) -> ErrorEvent:
        text = ": ".join(p for p in (as_str(error.get("code")), as_str(error.get("message"))) if p)
        return ErrorEvent(run=self._run, message=text or "provider stream error")


def _search_summary(action: JsonObject) -> str:
    """A short summary of a web search call's action, e.g. ``searched: tech news (5 sources)``."""
    atype = action.get("type")
    if atype == "search":
        query = as_str(action.get("query"))
        sources = action.get("sources")
        text = f"searched: {query}" if query else "searched the web"
        if isinstance(sources, list):
            text += f" ({len(sources)} source{'' if len(sources) == 1 else 's'})"
        return text
    if atype == "open_page":
        return "opened a page"
    if atype == "find_in_page":
        return "searched in a page"
    return "done"
