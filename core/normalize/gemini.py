"""Gemini ``streamGenerateContent`` (``alt=sse``) → normalized events.

Source: https://ai.google.dev/api/generate-content#v1beta.GenerateContentResponse (each SSE ``data:`` line is one
``GenerateContentResponse``: ``candidates[].content.parts[]``, ``candidates[].finishReason``, ``promptFeedback``,
``usageMetadata``); thought parts: https://ai.google.dev/gemini-api/docs/thinking (``"thought": true``).

Mapping (only candidate ``index`` 0 is read: one answer per stream; ``message`` = 0-based index of the model turn,
the next one opening with the first part after a ``finishReason``):

=======================================================  ================================================
raw                                                      normalized
=======================================================  ================================================
a part's ``text``                                        ``TextEvent`` answer delta
a part's ``text`` with ``thought: true``                 ``TextEvent`` reasoning delta
a ``functionCall`` part (``name``, ``args``, ``id``)      ``ToolCall`` start, the whole ``args`` as one
                                                         args_delta, end (Gemini sends a call whole)
``finishReason`` ``STOP`` / ``MAX_TOKENS``               ``MessageEnd``
``finishReason`` that blocked the answer (``SAFETY``,    ``ErrorEvent`` naming the reason, ``MessageEnd``
``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``,
``SPII``, ``MALFORMED_FUNCTION_CALL``, ...)
``promptFeedback.blockReason``                           ``ErrorEvent`` (the prompt was blocked)
``error`` (``code``, ``message``, ``status``)            ``ErrorEvent``
=======================================================  ================================================

Ignored: ``usageMetadata``, ``modelVersion``, ``responseId``, ``thoughtSignature``, ``inlineData`` (bytes, no URL to
send), ``fileData``, ``executableCode`` / ``codeExecutionResult``, ``citationMetadata``, ``safetyRatings``.

A line is a ``GenerateContentResponse`` when it has ``candidates`` (a list), ``promptFeedback``, ``usageMetadata``
or an ``error``; anything else raises :class:`core.errors.IngestError`.
"""

from __future__ import annotations

from pydantic import ValidationError

from core.errors import IngestError
from core.events import ErrorEvent, Event, MessageEnd, Visibility
from core.normalize.base import (
    JsonObject,
    MessageCounter,
    as_dict,
    as_str,
    invalid_event,
    require_object,
    text_event,
    whole_tool_call,
)

_PROVIDER = "Gemini"
_DONE_REASONS = frozenset({"STOP", "MAX_TOKENS", "FINISH_REASON_UNSPECIFIED"})
_RESPONSE_FIELDS = ("candidates", "promptFeedback", "usageMetadata")


class GeminiNormalizer:
    """Normalizes one Gemini ``streamGenerateContent`` stream.

    Args:
        run_id: the run the events belong to (``run`` of every event).
    """

    def __init__(self, run_id: str) -> None:
        self._run = run_id
        self._messages = MessageCounter()
        self._calls = 0

    def feed(self, raw: JsonObject) -> list[Event]:
        """Normalize one raw ``GenerateContentResponse``. See :class:`core.normalize.base.Normalizer`.

        Raises:
            IngestError: ``raw`` is not an object, is no ``GenerateContentResponse`` (none of ``candidates``,
                ``promptFeedback``, ``usageMetadata``, ``error``), ``candidates`` or a candidate's ``parts`` is
                not a list, a candidate is not an object with an integer ``index`` (or none), a part's ``text``
                is not a string or its ``thought`` not a boolean (a reasoning part must never be shown as the
                answer), or a ``functionCall`` is not an object with a string ``name``.
        """
        chunk = require_object(raw, _PROVIDER)
        if isinstance(error := chunk.get("error"), dict):
            text = ": ".join(p for p in (as_str(error.get("status")), as_str(error.get("message"))) if p)
            return [ErrorEvent(run=self._run, message=text or "Gemini stream error")]
        if not any(key in chunk for key in _RESPONSE_FIELDS):
            raise IngestError(
                f"a raw {_PROVIDER} stream event must be a GenerateContentResponse (with 'candidates', "
                f"'promptFeedback' or 'usageMetadata'), got the keys {sorted(chunk)[:8]}"
            )
        candidates = chunk.get("candidates", [])
        if not isinstance(candidates, list):
            raise IngestError(f"a raw {_PROVIDER} response's 'candidates' must be a list, got {candidates!r}")
        events: list[Event] = []
        try:
            for candidate in candidates:
                index = candidate.get("index", 0) if isinstance(candidate, dict) else None
                if not isinstance(candidate, dict) or not isinstance(index, int) or isinstance(index, bool):
                    raise IngestError(
                        f"a raw {_PROVIDER} response's candidate must be an object with an integer 'index' (or "
                        f"none: 0), got {str(candidate)[:80]!r}"
                    )
                if index == 0:
                    events += self._candidate(candidate)
            reason = as_str(as_dict(chunk.get("promptFeedback")).get("blockReason"))
            if reason:
                events.append(ErrorEvent(run=self._run, message=f"the prompt was blocked ({reason})"))
        except ValidationError as exc:
            raise invalid_event(_PROVIDER, exc) from None
        return events

    def close(self) -> list[Event]:
        """End of stream: end the open model turn."""
        message = self._messages.end()
        return [] if message is None else [MessageEnd(run=self._run, message=message)]

    def _candidate(self, candidate: JsonObject) -> list[Event]:
        events: list[Event] = []
        parts = as_dict(candidate.get("content")).get("parts", [])
        if not isinstance(parts, list):
            raise IngestError(f"a raw {_PROVIDER} candidate's 'content.parts' must be a list, got {parts!r}")
        for part in parts:
            events += self._part(as_dict(part))
        reason = as_str(candidate.get("finishReason"))
        if reason:
            if reason not in _DONE_REASONS:
                events.append(ErrorEvent(run=self._run, message=f"the model stopped the answer ({reason})"))
            events += self.close()
        return events

    def _part(self, part: JsonObject) -> list[Event]:
        if "text" in part:
            text = part["text"]
            if not isinstance(text, str):
                raise IngestError(f"a raw {_PROVIDER} part's 'text' must be a string, got {type(text).__name__}")
            thought = part.get("thought")
            if thought is not None and not isinstance(thought, bool):
                raise IngestError(
                    f"a raw {_PROVIDER} part's 'thought' must be a boolean (true marks reasoning), got {thought!r}"[
                        :300
                    ]
                )
            visibility = Visibility.REASONING if thought is True else Visibility.ANSWER
            return [text_event(self._run, self._messages.ensure(), text, visibility)] if text else []
        call = part.get("functionCall")
        if call is not None and not isinstance(call, dict):
            raise IngestError(
                f"a raw {_PROVIDER} part's 'functionCall' must be an object {{'name': ..., 'args': {{...}}}}, "
                f"got {type(call).__name__}"
            )
        if isinstance(call, dict):
            name = call.get("name")
            if not isinstance(name, str) or not name:
                raise IngestError(f"a raw {_PROVIDER} functionCall part needs a string 'name', got {name!r}")
            message = self._messages.ensure()
            self._calls += 1
            call_id = as_str(call.get("id")) or f"call-{message}-{self._calls}"
            return whole_tool_call(self._run, call_id, name, call.get("args", {}), None)
        return []
