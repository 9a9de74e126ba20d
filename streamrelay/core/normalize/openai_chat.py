"""OpenAI Chat Completions stream (and OpenAI-compatible servers) → normalized events.

Source: https://platform.openai.com/docs/api-reference/chat-streaming (``chat.completion.chunk``:
``choices[].delta`` with ``content``, ``refusal``, ``tool_calls``; ``choices[].finish_reason``).
OpenAI-compatible servers add ``reasoning_content`` (DeepSeek) or ``reasoning`` (OpenRouter, vLLM).

Mapping (only choice ``index`` 0 is read: one answer per stream; ``message`` = 0-based index of the
assistant message, the next one opening with the first content after a ``finish_reason``):

=================================================  ====================================================
raw                                                normalized
=================================================  ====================================================
``delta.content``, ``delta.refusal``               ``TextEvent`` answer delta
``delta.reasoning_content``, ``delta.reasoning``   ``TextEvent`` reasoning delta
``delta.tool_calls[i]`` first fragment             ``ToolCall`` start (``id``, ``function.name``)
``delta.tool_calls[i].function.arguments``         ``ToolCall`` args_delta
``finish_reason``                                  ``ToolCall`` end of every open call (by ``index``),
                                                   then ``MessageEnd``
``finish_reason: "length"``                        ``ErrorEvent`` that ends the run ``cut`` (before
                                                   the ``MessageEnd``; a tool call it cut stays open)
``finish_reason: "content_filter"``                ``ErrorEvent`` that ends the run ``refused``
a message with ``delta.refusal`` text              the text as answer, then at its ``finish_reason`` an
                                                   ``ErrorEvent`` that ends the run ``refused``
a chunk with ``error`` and no ``choices``          ``ErrorEvent`` that ends the run ``error``
=================================================  ====================================================

``finish_reason`` ``stop``, ``tool_calls`` and ``function_call`` end a message normally. Ignored on purpose:
``usage``, ``logprobs``, ``role``, ``system_fingerprint``, choices other than 0.

Chunks have no ``type`` field: ``choices`` (a list, possibly empty as in the final usage chunk) is what
makes a chunk; a chunk without it raises :class:`core.errors.IngestError`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from streamrelay.core.errors import IngestError
from streamrelay.core.events import Event, MessageEnd, ToolCall, ToolCallState, Visibility
from streamrelay.core.normalize.base import (
    JsonObject,
    MessageCounter,
    as_dict,
    as_str,
    int_field,
    invalid_event,
    require_object,
    text_event,
)
from streamrelay.core.normalize.ends import stream_cut, stream_failed, stream_refused
from streamrelay.core.normalize.meanings import EventTable, table
from streamrelay.core.normalize.meanings import Meaning as M

_PROVIDER = "OpenAI chat"
_REASONING_FIELDS = ("reasoning_content", "reasoning")
_ANSWER_FIELDS = ("content", "refusal")


@dataclass
class _Call:
    id: str
    name: str | None


class OpenAIChatNormalizer:
    """Normalizes one Chat Completions stream.

    Args:
        run_id: the run the events belong to (``run`` of every event).
    """

    def __init__(self, run_id: str) -> None:
        self._run = run_id
        self._messages = MessageCounter()
        self._calls: dict[int, _Call] = {}
        self._refusal = ""
        """The open message's ``delta.refusal`` text (a refusal in place of an answer)."""

    def feed(self, raw: JsonObject) -> list[Event]:
        """Normalize one raw chunk. See :class:`core.normalize.base.Normalizer`.

        Raises:
            IngestError: ``raw`` is not an object, has neither a ``choices`` list nor an ``error``, a choice's or a
                tool call's ``index`` is not an integer (``true``, ``0.0``, ``"0"``; missing or null: choice 0, the
                call's place in the list), or it gives a field no event can hold (a tool call id with a lone
                surrogate).
        """
        chunk = require_object(raw, _PROVIDER)
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            if "error" in chunk:
                error = chunk["error"]
                message = as_str(as_dict(error).get("message")) if isinstance(error, dict) else as_str(error)
                return [stream_failed(self._run, message or "provider stream error")]
            raise IngestError(f"a raw {_PROVIDER} stream chunk needs a 'choices' list, got {choices!r}")
        events: list[Event] = []
        bodies = [as_dict(choice) for choice in choices]  # every index checked before anything changes
        read = [body for body in bodies if int_field(body, "index", _PROVIDER, "chunk's choice") in (0, None)]
        try:
            for body in read:
                events += self._choice(body)
        except ValidationError as exc:
            raise invalid_event(_PROVIDER, exc) from None
        return events

    def close(self) -> list[Event]:
        """End of stream: end the open message (tool calls without a ``finish_reason`` stay unended)."""
        self._calls.clear()
        message = self._messages.end()
        return [] if message is None else [MessageEnd(run=self._run, message=message)]

    def _choice(self, choice: JsonObject) -> list[Event]:
        events: list[Event] = []
        delta = as_dict(choice.get("delta"))
        calls = delta.get("tool_calls")
        fragments = [as_dict(fragment) for fragment in calls] if isinstance(calls, list) else []
        fragments_at = [(int_field(f, "index", _PROVIDER, "chunk's tool call"), f) for f in fragments]  # checked first
        for name in _REASONING_FIELDS:
            events += self._text(as_str(delta.get(name)), Visibility.REASONING)
        for name in _ANSWER_FIELDS:
            events += self._text(as_str(delta.get(name)), Visibility.ANSWER)
        self._refusal += as_str(delta.get("refusal"))
        for position, (index, fragment) in enumerate(fragments_at):
            events += self._tool_fragment(position if index is None else index, fragment)
        reason = as_str(choice.get("finish_reason"))
        if reason:
            message = self._messages.ensure()
            if reason == "length":  # the model stopped mid-answer: calls it was writing are cut, never complete
                self._calls.clear()
            events += [self._end_call(self._calls[i]) for i in sorted(self._calls)]
            self._calls.clear()
            events += self._finished(reason)
            events.append(MessageEnd(run=self._run, message=message))
            self._messages.end()
        return events

    def _finished(self, reason: str) -> list[Event]:
        """What a message's ``finish_reason`` says of the run: a refusal, a length cut, else nothing."""
        refusal, self._refusal = self._refusal, ""
        if reason == "length":
            return [stream_cut(self._run, reason)]
        if reason == "content_filter":
            return [stream_refused(self._run, refusal or "the provider's content filter stopped the answer")]
        return [stream_refused(self._run, refusal)] if refusal.strip() else []

    def _tool_fragment(self, index: int, fragment: JsonObject) -> list[Event]:
        """A tool call fragment of the call at ``index`` (its own ``index``, else its place in the chunk's list)."""
        message = self._messages.ensure()
        function = as_dict(fragment.get("function"))
        call_id = as_str(fragment.get("id"))
        events: list[Event] = []
        call = self._calls.get(index)
        if call is None or (call_id and call_id != call.id):
            if call is not None:  # a new call reuses the index: the old one's arguments are complete
                events.append(self._end_call(call))
            call = _Call(id=call_id or f"call-{message}-{index}", name=as_str(function.get("name")) or None)
            self._calls[index] = call
            events.append(ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.START))
        elif call.name is None and as_str(function.get("name")):
            call.name = as_str(function.get("name"))
        arguments = as_str(function.get("arguments"))
        if arguments:
            events.append(
                ToolCall(
                    run=self._run,
                    id=call.id,
                    name=call.name,
                    state=ToolCallState.ARGS_DELTA,
                    args_delta=arguments,
                )
            )
        return events

    def _end_call(self, call: _Call) -> ToolCall:
        return ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.END)

    def _text(self, text: str, visibility: Visibility) -> list[Event]:
        return [text_event(self._run, self._messages.ensure(), text, visibility)] if text else []


# --- what each event type means (core.normalize.meanings; README "What each format's events mean") ---------------

EVENT_TYPES: EventTable = table(
    {
        "delta.content": M.TEXT,
        "delta.refusal": (M.TEXT, M.REFUSAL),
        "delta.reasoning_content": M.REASONING,
        "delta.reasoning": M.REASONING,
        "delta.tool_calls": M.TOOL_CALL,
        "delta.role": M.IGNORED,
        "delta.function_call": M.IGNORED,  # the deprecated single call: servers send tool_calls
        "delta.audio": M.IGNORED,
        "delta.annotations": M.IGNORED,  # url citations: sources as links are not built
        "finish_reason/stop": M.BOUNDARY,
        "finish_reason/tool_calls": (M.TOOL_CALL, M.BOUNDARY),
        "finish_reason/function_call": M.BOUNDARY,
        "finish_reason/length": M.CUT,
        "finish_reason/content_filter": M.REFUSAL,
        "error": M.ERROR,
    }
)
"""Every OpenAI Chat Completions chunk field and finish reason and what it means here."""


def event_types(raw: object) -> list[str]:
    """The table keys of one raw chat chunk: each non-null ``delta`` field and ``finish_reason`` of its choices, and
    ``error`` for an error chunk."""
    if not isinstance(raw, dict):
        return []
    keys = ["error"] if isinstance(raw.get("error"), dict) else []
    choices = raw.get("choices")
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        if isinstance(delta, dict):
            keys += [f"delta.{k}" for k, v in delta.items() if v is not None]
        if isinstance(choice.get("finish_reason"), str):
            keys.append("finish_reason/" + choice["finish_reason"])
    return keys
