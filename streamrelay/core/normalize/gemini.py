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
                                                         args_delta, end (a call sent whole)
a ``functionCall`` with ``willContinue: true``, then     ``ToolCall`` start at the first part; the
parts with ``partialArgs`` (no ``name``, or the same)    arguments assembled (:mod:`gemini_args`) and
until one without ``willContinue`` (Vertex's             handed on whole as one args_delta, then end, when
``streamFunctionCallArguments``)                         the call's last part (or ``finishReason: STOP``)
                                                         comes; never before: a stream cut in the middle
                                                         leaves it open (malformed, never run)
``finishReason`` ``STOP``                                ``MessageEnd``
``finishReason`` ``MAX_TOKENS``                          ``ErrorEvent`` that ends the run ``cut``, then
                                                         ``MessageEnd`` (a call still streaming stays open)
``finishReason`` that blocked the answer (``SAFETY``,    ``ErrorEvent`` that ends the run ``refused``,
``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``,   naming the reason; ``MessageEnd``
``SPII``, ``IMAGE_SAFETY``, ...)
another ``finishReason`` (``MALFORMED_FUNCTION_CALL``,   ``ErrorEvent`` that ends the run ``error``;
``UNEXPECTED_TOOL_CALL``, ``OTHER``, ...)                ``MessageEnd``
``groundingMetadata.groundingChunks[]`` (``web``,          ``Citation`` per chunk (``uri``, ``title``): the
``retrievedContext``, ``maps``), ordered and chosen by    chunks ``groundingSupports`` name, in the order
``groundingSupports[].groundingChunkIndices``            the supports (segments of the answer) name them;
                                                         all chunks, in order, when there are no supports
``citationMetadata.citationSources[]`` (``uri``)         ``Citation`` (a source the text recites)
``promptFeedback.blockReason``                           ``ErrorEvent`` that ends the run ``refused`` (the
                                                         prompt was blocked)
``error`` (``code``, ``message``, ``status``)            ``ErrorEvent`` that ends the run ``error``
=======================================================  ================================================

Ignored on purpose: ``usageMetadata``, ``modelVersion``, ``responseId``, ``thoughtSignature``, ``inlineData`` and
``fileData`` parts (not yet shown: a known gap, issue 26), ``executableCode`` / ``codeExecutionResult`` (the
model's own tool work), ``safetyRatings``, the ``searchEntryPoint`` and ``webSearchQueries`` of ``groundingMetadata``
(Google's search suggestions are HTML for a web page, no chat can show them), a ``functionResponse`` part
(the client's own answer echoed), and any unknown part.

A line is a ``GenerateContentResponse`` when it has ``candidates`` (a list), ``promptFeedback``, ``usageMetadata``
or an ``error``; anything else raises :class:`core.errors.IngestError`.
"""

from __future__ import annotations

import json

from pydantic import ValidationError

from streamrelay.core.errors import IngestError
from streamrelay.core.events import EndStatus, ErrorEvent, Event, MessageEnd, ToolCall, ToolCallState, Visibility
from streamrelay.core.normalize.base import (
    JsonObject,
    MessageCounter,
    as_dict,
    as_str,
    citation_event,
    invalid_event,
    require_object,
    text_event,
    whole_tool_call,
)
from streamrelay.core.normalize.ends import stream_cut, stream_failed
from streamrelay.core.normalize.gemini_args import StreamedCall
from streamrelay.core.normalize.meanings import EventTable, table
from streamrelay.core.normalize.meanings import Meaning as M

_PROVIDER = "Gemini"
_DONE_REASONS = frozenset({"STOP", "FINISH_REASON_UNSPECIFIED"})
_CUT_REASONS = frozenset({"MAX_TOKENS"})
REFUSAL_REASONS = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "LANGUAGE",
    }
)
"""``finishReason`` values that mean the answer was withheld by policy
(https://ai.google.dev/api/generate-content#FinishReason)."""
_RESPONSE_FIELDS = ("candidates", "promptFeedback", "usageMetadata")
_CHUNK_KINDS = ("web", "retrievedContext", "maps")
"""What a grounding chunk may be (https://ai.google.dev/api/generate-content#GroundingChunk): each has ``uri`` and
``title``."""


class GeminiNormalizer:
    """Normalizes one Gemini ``streamGenerateContent`` stream.

    Args:
        run_id: the run the events belong to (``run`` of every event).
    """

    def __init__(self, run_id: str) -> None:
        self._run = run_id
        self._messages = MessageCounter()
        self._calls = 0
        self._open: list[StreamedCall] = []
        """Calls whose arguments are still streaming (``willContinue``), oldest first."""

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
            return [stream_failed(self._run, text or "Gemini stream error")]
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
                message = f"the prompt was blocked ({reason})"
                events.append(ErrorEvent(run=self._run, message=message, ends=EndStatus.REFUSED))
        except ValidationError as exc:
            raise invalid_event(_PROVIDER, exc) from None
        return events

    def close(self) -> list[Event]:
        """End of stream: end the open model turn (a call still streaming stays open)."""
        return self._end_turn()

    def _end_turn(self) -> list[Event]:
        self._open.clear()  # arguments never declared complete: the lane reports them malformed, never runs them
        message = self._messages.end()
        return [] if message is None else [MessageEnd(run=self._run, message=message)]

    def _candidate(self, candidate: JsonObject) -> list[Event]:
        events: list[Event] = []
        parts = as_dict(candidate.get("content")).get("parts", [])
        if not isinstance(parts, list):
            raise IngestError(f"a raw {_PROVIDER} candidate's 'content.parts' must be a list, got {parts!r}")
        for part in parts:
            events += self._part(as_dict(part))
        events += self._sources(candidate)
        reason = as_str(candidate.get("finishReason"))
        if reason:
            if reason in _DONE_REASONS:
                while self._open:  # the turn is whole: so are the calls it streamed
                    events += self._finish_call(self._open[0])
            elif reason in _CUT_REASONS:
                events.append(stream_cut(self._run, reason))
            else:
                ends = EndStatus.REFUSED if reason in REFUSAL_REASONS else EndStatus.ERROR
                events.append(ErrorEvent(run=self._run, message=f"the model stopped the answer ({reason})", ends=ends))
            events += self._end_turn()
        return events

    def _sources(self, candidate: JsonObject) -> list[Event]:
        """The candidate's sources: its grounding chunks (https://ai.google.dev/api/generate-content#GroundingMetadata)
        in the order its grounding supports cite them (all of them when it has no supports), and its citation sources
        (https://ai.google.dev/api/generate-content#CitationMetadata). Repeated on later chunks of a stream, they are
        deduplicated where they are shown."""
        grounding = as_dict(candidate.get("groundingMetadata"))
        chunks = grounding.get("groundingChunks")
        chunks = chunks if isinstance(chunks, list) else []
        supports = grounding.get("groundingSupports")
        order: list[int] = []
        for support in supports if isinstance(supports, list) else []:
            indices = as_dict(support).get("groundingChunkIndices")
            for i in indices if isinstance(indices, list) else []:
                if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(chunks) and i not in order:
                    order.append(i)
        events: list[Event] = []
        for i in order or range(len(chunks)):
            chunk = as_dict(chunks[i])
            place = next((as_dict(chunk[k]) for k in _CHUNK_KINDS if isinstance(chunk.get(k), dict)), {})
            events += citation_event(self._run, place.get("uri"), place.get("title"))
        cited = as_dict(candidate.get("citationMetadata")).get("citationSources")
        for source in cited if isinstance(cited, list) else []:
            events += citation_event(self._run, as_dict(source).get("uri"), as_dict(source).get("title"))
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
            return self._function_call(call)
        return []

    def _function_call(self, call: JsonObject) -> list[Event]:
        """A ``functionCall`` part: a whole call, or a part of one whose arguments stream (``willContinue``)."""
        name = call.get("name")
        call_id = as_str(call.get("id"))
        more = call.get("willContinue") is True
        target = self._target(name, call_id)
        if target is not None:
            target.apply(call)
            return [] if more else self._finish_call(target)
        if not isinstance(name, str) or not name:
            if not call:
                return []  # an empty part ends a streamed call; with none open it says nothing
            raise IngestError(
                f"a raw {_PROVIDER} functionCall part needs a string 'name' (or to continue a call streamed with "
                f"'willContinue'), got {name!r}"
            )
        message = self._messages.ensure()
        self._calls += 1
        call_id = call_id or f"call-{message}-{self._calls}"
        if not more and "partialArgs" not in call:
            return whole_tool_call(self._run, call_id, name, call.get("args", {}), None)
        streamed = StreamedCall(call_id, name)
        streamed.apply(call)
        start = ToolCall(run=self._run, id=call_id, name=name, state=ToolCallState.START)
        if not more:
            return [start, *self._finish_call(streamed, opened=False)]
        self._open.append(streamed)
        return [start]

    def _target(self, name: object, call_id: str) -> StreamedCall | None:
        """The streamed call a ``functionCall`` part continues: the one with its ``id``; else, for a part without a
        name, the latest open call; else the latest open call of that name (Vertex may repeat the name)."""
        if call_id:
            return next((c for c in self._open if c.id == call_id), None)
        if not self._open:
            return None
        if not isinstance(name, str) or not name:
            return self._open[-1]
        return next((c for c in reversed(self._open) if c.name == name), None)

    def _finish_call(self, call: StreamedCall, *, opened: bool = True) -> list[Event]:
        """The call's arguments are complete: handed on whole, then its end (none when they could not be read:
        the lane then reports the call malformed)."""
        if opened:
            self._open.remove(call)
        events: list[Event] = []
        if call.broken is None:
            fragment = json.dumps(call.args, ensure_ascii=False)
            events.append(
                ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.ARGS_DELTA, args_delta=fragment)
            )
        events.append(ToolCall(run=self._run, id=call.id, name=call.name, state=ToolCallState.END))
        return events


# --- what each event type means (core.normalize.meanings; README "What each format's events mean") ---------------

EVENT_TYPES: EventTable = table(
    {
        "part/text": M.TEXT,
        "part/thought": M.REASONING,  # a text part with thought: true
        "part/functionCall": M.TOOL_CALL,
        "part/thoughtSignature": M.IGNORED,
        "part/inlineData": M.IGNORED,  # inline bytes: not shown yet (a known gap, module docstring)
        "part/fileData": M.IGNORED,
        "part/executableCode": M.IGNORED,  # the model's own tool work
        "part/codeExecutionResult": M.IGNORED,
        "part/functionResponse": M.IGNORED,  # the client's own answer echoed
        "part/videoMetadata": M.IGNORED,
        "candidate/citationMetadata": M.SOURCE,
        "candidate/groundingMetadata": M.SOURCE,
        "candidate/safetyRatings": M.IGNORED,
        "finishReason/STOP": M.BOUNDARY,
        "finishReason/FINISH_REASON_UNSPECIFIED": M.BOUNDARY,
        "finishReason/MAX_TOKENS": M.CUT,
        **dict.fromkeys((f"finishReason/{r}" for r in REFUSAL_REASONS), M.REFUSAL),
        **dict.fromkeys(
            (
                "finishReason/OTHER",
                "finishReason/MALFORMED_FUNCTION_CALL",
                "finishReason/UNEXPECTED_TOOL_CALL",
                "finishReason/TOO_MANY_TOOL_CALLS",
                "finishReason/NO_IMAGE",
                "finishReason/IMAGE_OTHER",
            ),
            M.ERROR,
        ),
        "promptFeedback/blockReason": M.REFUSAL,
        "error": M.ERROR,
    }
)
"""Every Gemini ``GenerateContentResponse`` part kind, candidate field and finish reason and what it means here."""


def event_types(raw: object) -> list[str]:
    """The table keys of one raw Gemini line: each part's kind (``thought`` for a thought text), the candidate's
    read fields and finish reason, a prompt block, an error."""
    if not isinstance(raw, dict):
        return []
    keys = ["error"] if isinstance(raw.get("error"), dict) else []
    if as_dict(raw.get("promptFeedback")).get("blockReason"):
        keys.append("promptFeedback/blockReason")
    candidates = raw.get("candidates")
    for candidate in candidates if isinstance(candidates, list) else []:
        if not isinstance(candidate, dict):
            continue
        keys += [f"candidate/{k}" for k in ("citationMetadata", "groundingMetadata", "safetyRatings") if k in candidate]
        if isinstance(candidate.get("finishReason"), str):
            keys.append("finishReason/" + candidate["finishReason"])
        parts = as_dict(candidate.get("content")).get("parts")
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict):
                keys += [
                    "part/thought" if k == "text" and part.get("thought") else f"part/{k}"
                    for k in part
                    if k != "thought"
                ]
    return keys
