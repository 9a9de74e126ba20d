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
``custom_tool_call`` item added / ``response.custom_tool_call_input.delta`` / item done
                                                             ``ToolCall`` start, then at done one args_delta
                                                             ``{"input": "<the free-form input>"}`` (a custom
                                                             tool's input is text, not JSON) and end
``response.output_text.annotation.added``, the annotations   ``Citation`` per ``url_citation`` (``url``,
of a ``message`` item at its ``output_item.done``           ``title``) and ``file_citation`` /
                                                             ``container_file_citation`` (``filename``, no
                                                             URL): listed after the answer
``response.completed``                                       ``MessageEnd``
``response.incomplete`` (``incomplete_details.reason``)       ``max_output_tokens``: an ``ErrorEvent`` that
                                                             ends the run ``cut``; ``content_filter``: one
                                                             that ends it ``refused``; then ``MessageEnd``
``response.refusal.delta`` ... ``response.refusal.done``      the refusal as answer text, then an
                                                             ``ErrorEvent`` that ends the run ``refused``
``error`` (its ``error`` object, or ``code``/``message`` at   ``ErrorEvent`` that ends the run ``error``
the top level), ``response.failed``                          (+ ``MessageEnd``; one line for both)
``mcp_approval_request`` item done                           a ``Status`` and a report line: not shown (the
                                                             client approves it), naming server and tool
``image_generation_call`` item done (``result``: base64)      a ``Status`` and a report line: the image is
                                                             not shown (inline bytes, no link to send)
``response.image_generation_call.generating``                ``Status`` ``generating an image``
===========================================================  =========================================

Ignored on purpose: ``response.created`` (opens the next message), ``response.in_progress``,
``response.queued``, a ``file_path`` annotation (a file the code interpreter made, not a source), ``content_part.*``,
``response.*.in_progress`` / ``.completed`` progress of hosted tools, ``image_generation_call.partial_image``
(a preview; the whole image is told at done), the items of :data:`IGNORED_ITEMS` (``mcp_list_tools``, ``mcp_call``,
``file_search_call``, ``code_interpreter_call``: the server's own work), ``reasoning`` items (their summary deltas are
read), ``response.output_text.done``'s repeated text, and any unknown event type (forward compatibility). An output
item of a type neither read nor ignored (``computer_call``, ``local_shell_call``, a new one) is a ``Status`` and a
report line at its done: not shown, never dropped unseen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

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
    as_dict,
    as_str,
    citation_event,
    int_field,
    invalid_event,
    require_type,
    text_event,
    whole_tool_call,
)
from streamrelay.core.normalize.ends import not_shown, stream_cut, stream_failed, stream_refused
from streamrelay.core.normalize.meanings import EventTable, table, undeclared
from streamrelay.core.normalize.meanings import Meaning as M

_PROVIDER = "OpenAI Responses"
_WEB_SEARCH = "web_search"

_ANSWER_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
_REASONING_DELTAS = frozenset({"response.reasoning_summary_text.delta", "response.reasoning_text.delta"})
_TEXT_DONE = frozenset({"response.output_text.done", "response.refusal.done"})
READ_ITEMS = frozenset(
    {"message", "reasoning", "function_call", "custom_tool_call", "web_search_call", "mcp_approval_request"}
    | {"image_generation_call"}
)
"""Output item types this normalizer reads (their events, or the item at its ``output_item.done``)."""
IGNORED_ITEMS = frozenset({"mcp_list_tools", "mcp_call", "file_search_call", "code_interpreter_call", "compaction"})
"""Output item types ignored on purpose: hosted tools the provider ran itself (their results reach the answer as text)
and bookkeeping. Any other item type at its ``output_item.done`` (a ``computer_call``, a ``local_shell_call``, one
added after this was written) is told as not shown, never dropped unseen."""


@dataclass
class _Call:
    id: str
    name: str | None
    parts: list[str] = field(default_factory=list)
    custom: bool = False
    """A ``custom_tool_call``: its input is free text, handed on as ``{"input": text}`` at done."""


class OpenAIResponsesNormalizer:
    """Normalizes one OpenAI Responses stream (possibly several responses in a row).

    Args:
        run_id: the run the events belong to (``run`` of every event).
    """

    def __init__(self, run_id: str) -> None:
        self._run = run_id
        self._messages = MessageCounter()
        self._calls: dict[str, _Call] = {}
        self._failed = False
        """The open response already told its failure (an ``error`` before its ``response.failed``)."""

    def feed(self, raw: JsonObject) -> list[Event]:
        """Normalize one raw event. See :class:`core.normalize.base.Normalizer`.

        Raises:
            IngestError: ``raw`` is not an object, has no string ``type``, a reasoning summary part's
                ``summary_index`` is not an integer (``true``, ``1.0``, ``"1"``), or it gives a field no event can
                hold (an id with a lone surrogate).
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
        if kind == "response.custom_tool_call_input.delta":
            call = self._calls.get(as_str(raw.get("item_id")))
            if call is not None and call.custom:
                call.parts.append(as_str(raw.get("delta")))
            return []
        return self._other(kind, raw)

    def close(self) -> list[Event]:
        """End of stream: end the open response (tool calls not declared complete stay unended)."""
        return self._end_response()

    def _other(self, kind: str, raw: JsonObject) -> list[Event]:
        if kind == "response.created":
            events = self._end_response()
            self._messages.start()
            self._failed = False
            return events
        if kind == "response.output_item.added":
            return self._item_added(as_dict(raw.get("item")))
        if kind == "response.output_item.done":
            return self._item_done(as_dict(raw.get("item")))
        if kind == "response.output_text.annotation.added":
            return self._annotation(as_dict(raw.get("annotation")))
        if kind == "response.function_call_arguments.done":
            return self._end_call(as_str(raw.get("item_id")), raw.get("arguments"))
        if kind == "response.refusal.done":
            refusal = stream_refused(self._run, as_str(raw.get("refusal")) or "the model declined to answer")
            return [BlockEnd(run=self._run, message=self._messages.ensure()), refusal]
        if kind in _TEXT_DONE:
            return [BlockEnd(run=self._run, message=self._messages.ensure())]
        if kind == "response.reasoning_summary_part.added":
            index = int_field(raw, "summary_index", _PROVIDER, "reasoning_summary_part.added event")
            return self._text("\n\n", Visibility.REASONING) if index is not None and index > 0 else []
        if kind == "response.web_search_call.searching":
            return [Status(run=self._run, text="searching the web")]
        if kind == "response.image_generation_call.generating":
            return [Status(run=self._run, text="generating an image")]
        return self._ended(kind, raw)

    def _ended(self, kind: str, raw: JsonObject) -> list[Event]:
        """A response's end: completed, incomplete (cut or filtered), failed; or a stream ``error``."""
        if kind == "response.completed":
            return self._end_response()
        if kind == "response.incomplete":
            reason = as_str(as_dict(as_dict(raw.get("response")).get("incomplete_details")).get("reason"))
            if reason == "content_filter":
                told = stream_refused(self._run, "the provider's content filter stopped the answer")
            else:
                told = stream_cut(self._run, reason or "incomplete")
            return [told, *self._end_response()]
        if kind == "response.failed":
            error = as_dict(as_dict(raw.get("response")).get("error"))
            return [*self._error(error), *self._end_response()]
        if kind == "error":
            nested = raw.get("error")
            return self._error(as_dict(nested) if isinstance(nested, dict) else raw)
        undeclared(_PROVIDER, EVENT_TYPES, (kind,))  # ignored (forward compatibility), logged once if it has no row
        return []

    def _item_added(self, item: JsonObject) -> list[Event]:
        itype = item.get("type")
        if itype not in ("function_call", "web_search_call", "custom_tool_call"):
            return []
        self._messages.ensure()
        item_id = as_str(item.get("id"))
        if itype == "web_search_call":
            call = _Call(id=item_id, name=_WEB_SEARCH)
        else:
            name = as_str(item.get("name")) or None
            call = _Call(id=as_str(item.get("call_id")) or item_id, name=name, custom=itype == "custom_tool_call")
        if call.custom:
            self._calls[item_id] = call
            call.parts.append(as_str(item.get("input")))
            return [ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.START)]
        self._calls[item_id] = call
        events: list[Event] = [ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.START)]
        arguments = as_str(item.get("arguments"))
        if arguments:
            events += self._args_delta(item_id, arguments)
        return events

    def _annotation(self, annotation: JsonObject) -> list[Event]:
        """A source the answer cites (https://platform.openai.com/docs/api-reference/responses-streaming/response/output_text/annotation/added):
        a ``url_citation`` by its URL, a file citation by its file name; a ``file_path`` is no source."""
        atype = as_str(annotation.get("type"))
        if atype == "url_citation":
            return citation_event(self._run, annotation.get("url"), annotation.get("title"))
        if atype in ("file_citation", "container_file_citation"):
            return citation_event(self._run, None, annotation.get("filename"))
        return []

    def _message_sources(self, item: JsonObject) -> list[Event]:
        """The annotations of a finished ``message`` item's output text (the stream's last word on them: a stream
        that sent no ``annotation.added`` still has its sources; repeats are deduplicated where they are shown)."""
        content = item.get("content")
        events: list[Event] = []
        for part in content if isinstance(content, list) else []:
            annotations = as_dict(part).get("annotations")
            for annotation in annotations if isinstance(annotations, list) else []:
                events += self._annotation(as_dict(annotation))
        return events

    def _item_done(self, item: JsonObject) -> list[Event]:
        itype = item.get("type")
        item_id = as_str(item.get("id"))
        if itype == "message":
            return self._message_sources(item)
        if itype == "function_call":
            return self._end_call(item_id, item.get("arguments"))
        if itype == "custom_tool_call":
            return self._end_custom(item_id, item)
        if itype == "mcp_approval_request":
            server, tool = as_str(item.get("server_label")), as_str(item.get("name")) or "a tool"
            where = f"{server}: {tool}" if server else tool
            return not_shown(self._run, f"an MCP approval request ({where}); the client approves or denies it")
        if itype == "image_generation_call":
            return self._image(item)
        if itype != "web_search_call":
            if not isinstance(itype, str) or itype in READ_ITEMS or itype in IGNORED_ITEMS:
                return []
            return not_shown(self._run, f"a {itype[:60]} item: the relay does not read it")
        call = self._calls.pop(item_id, None)
        if call is None:
            return []
        action = as_dict(item.get("action"))
        args = {k: v for k, v in action.items() if k != "sources"}  # sources are results, not arguments
        return [
            ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.END, args=args or None),
            ToolResult(run=self._run, id=call.id, name=call.name, summary=_search_summary(action)),
        ]

    def _end_custom(self, item_id: str, item: JsonObject) -> list[Event]:
        """A custom tool call is complete: its free-form input (the item's ``input``, else what the deltas carried)
        goes on whole as the arguments ``{"input": text}``, then its end (:func:`whole_tool_call` without a second
        start)."""
        call = self._calls.pop(item_id, None)
        if call is None or not call.custom:
            return []
        text = item.get("input")
        args = {"input": text if isinstance(text, str) else "".join(call.parts)}
        return whole_tool_call(self._run, call.id, call.name, args, None)[1:]

    def _image(self, item: JsonObject) -> list[Event]:
        """A generated image: given inline (base64 ``result``), which no platform fetches: told, not dropped."""
        if item.get("status") == "failed":
            return not_shown(self._run, "an image the image generation tool failed to make")
        return not_shown(self._run, "an image the model generated: given inline (base64), not by a link to send")

    def _args_delta(self, item_id: str, fragment: str) -> list[Event]:
        call = self._calls.get(item_id)
        if call is None or call.custom or not fragment:
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

    def _error(self, error: JsonObject) -> list[Event]:
        """The response's failure, told once (an ``error`` event and the ``response.failed`` after it are one)."""
        if self._failed:
            return []
        self._failed = True
        text = ": ".join(p for p in (as_str(error.get("code")), as_str(error.get("message"))) if p)
        return [stream_failed(self._run, text or "provider stream error")]


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


# --- what each event type means (core.normalize.meanings; README "What each format's events mean") ---------------

EVENT_TYPES: EventTable = table(
    {
        "response.output_text.delta": M.TEXT,
        "response.refusal.delta": (M.TEXT, M.REFUSAL),
        "response.refusal.done": M.REFUSAL,
        "response.output_text.done": M.IGNORED,  # its text repeats the deltas
        "response.reasoning_summary_text.delta": M.REASONING,
        "response.reasoning_text.delta": M.REASONING,
        "response.reasoning_summary_part.added": M.BOUNDARY,
        "response.reasoning_summary_part.done": M.IGNORED,
        "response.reasoning_summary_text.done": M.IGNORED,
        "response.reasoning_text.done": M.IGNORED,
        "response.function_call_arguments.delta": M.TOOL_CALL,
        "response.function_call_arguments.done": M.TOOL_CALL,
        "response.custom_tool_call_input.delta": M.TOOL_CALL,
        "response.custom_tool_call_input.done": M.IGNORED,  # the item's done ends the call
        "response.output_item.added": (M.TOOL_CALL, M.BOUNDARY),
        "response.output_item.done": (M.TOOL_CALL, M.STATUS, M.NOT_SHOWN, M.SOURCE),  # by its item type, below
        "response.web_search_call.searching": M.STATUS,
        "response.image_generation_call.generating": M.STATUS,
        "response.created": M.BOUNDARY,
        "response.completed": M.BOUNDARY,
        "response.incomplete": (M.CUT, M.REFUSAL, M.BOUNDARY),
        "response.failed": M.ERROR,
        "error": M.ERROR,
        "response.output_text.annotation.added": M.SOURCE,
        **dict.fromkeys(
            (
                "response.in_progress",
                "response.queued",
                "response.content_part.added",
                "response.content_part.done",
                "response.web_search_call.in_progress",
                "response.web_search_call.completed",
                "response.file_search_call.in_progress",
                "response.file_search_call.searching",
                "response.file_search_call.completed",
                "response.code_interpreter_call.in_progress",
                "response.code_interpreter_call.interpreting",
                "response.code_interpreter_call.completed",
                "response.code_interpreter_call_code.delta",
                "response.code_interpreter_call_code.done",
                "response.image_generation_call.in_progress",
                "response.image_generation_call.partial_image",
                "response.image_generation_call.completed",
                "response.mcp_call.in_progress",
                "response.mcp_call.completed",
                "response.mcp_call.failed",
                "response.mcp_call_arguments.delta",
                "response.mcp_call_arguments.done",
                "response.mcp_list_tools.in_progress",
                "response.mcp_list_tools.completed",
                "response.mcp_list_tools.failed",
            ),
            M.IGNORED,
        ),
        "item/message": (M.TEXT, M.SOURCE),  # its text was streamed; its annotations are sources
        "item/reasoning": M.REASONING,
        "item/function_call": M.TOOL_CALL,
        "item/custom_tool_call": M.TOOL_CALL,
        "item/web_search_call": (M.TOOL_CALL, M.TOOL_RESULT),
        "item/mcp_approval_request": M.NOT_SHOWN,
        "item/image_generation_call": M.NOT_SHOWN,
        **dict.fromkeys((f"item/{t}" for t in IGNORED_ITEMS), M.IGNORED),
        **dict.fromkeys(
            ("item/computer_call", "item/local_shell_call", "item/shell_call", "item/apply_patch_call"), M.NOT_SHOWN
        ),
    }
)
"""Every OpenAI Responses stream event type and output item type and what it means here. An output item of a type
with no row is still told (not shown) at its done: :data:`READ_ITEMS`, :data:`IGNORED_ITEMS`."""


def event_types(raw: object) -> list[str]:
    """The table keys of one raw Responses line: its ``type``, and ``item/<type>`` of an output item it carries."""
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        return []
    keys = [raw["type"]]
    item = raw.get("item")
    if isinstance(item, dict) and isinstance(item.get("type"), str):
        keys.append("item/" + item["type"])
    return keys
